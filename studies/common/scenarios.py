"""Feed scenarios of the offline–online studies (Jeunen, Potapov & Ustimenko, KDD'24 §6).

Not a study: the shared setting of ``correlation`` (Table 2) and ``sensitivity`` (Fig. 1), as
named, validated presets of `ScenarioConfig`, and small pure functions that build everything from
(root key, config, replication). The studies build their platforms in their ``setup`` (once per
run, cached by the runner) and everything else per cell from them.

* **Platform** (`platforms`): a `simrec.world` World of users x items; the world's observed
  feedback O⁺ (prior-relevant P⁺ ~ Bernoulli(q), then a simple random sample at
  `RankerConfig.observation_rate`, as in Lim et al. §2); a FIXED candidate generator G = the top N
  items of a truncated SVD of O⁺ (`RankerConfig.retrieval_dim`), precomputed per user
  (`simrec.feed.top_k_candidates`, identical to `feed.TopK`); and the factorisation models
  fitted on O⁺ with `simrec.models.fit` (slot ``r0``: by default MF-AUC; slot ``rt``: MF-ADG
  trained four times longer; the same initial parameters).
* **Rankers** (`Ranker`, scored over the whole catalogue by `scores`): `Trained` (a trained
  slot), `Popularity` (item counts in O⁺) and `NoisyOracle` (the world's true quality logit +
  N(0, scale²) noise, draw j an exchangeable copy). `ranker_label` names them in tables
  (``r0``, ``rt``, ``popularity``, ``oracle@SCALE`` or ``oracle@SCALE#DRAW``) and `parse_ranker`
  reads those labels back (config overrides on the command line).
* **Levels** (`LEVELS`): the two feeds of KDD'24 §6. ``level1``: the probabilistic scroll-budget
  view model (`simrec.feed.ScrollBudget`, Jeunen RecSys'23), no violations by default, the paper
  uses no clipping there (m = inf). ``level2``: the exponential view model (`simrec.feed.Exponential`,
  rank-biased precision), the same N and K (one compiled shape) but half the exploration, hence
  heavier-tailed importance weights; a cascade (a watch-complete ends the session with
  `LevelConfig.cascade`, breaking Asm. 2) and satiation (`LevelConfig.satiation`, rewards depend on
  the items above, Asm. 3); default clipping m = 200 as in the paper.
* **Policies**: every policy shows the first K of the N candidates of the same G. The logging
  policy R₀ (`logging_policy`) is epsilon-greedy around a Sort of its ranker's scores, so that every
  candidate has positive logging exposure (Asm. 5) and the exposures of deep items fall to
  epsilon·sum_i S(i)/N, about 1e-3 and below; targets (`target_policy`) are deterministic Sorts,
  as in the paper's deployed change. All exposures are exact (`simrec.feed.is_exact`).
* **Signals** (`SignalConfig.names`, from `SIGNAL_KINDS`): by default ``like`` (explicit, rare)
  and ``watch`` (implicit, frequent, a watch to the end); also available ``share`` (explicit,
  rarer than like) and ``replay`` (implicit, a video watched again: rarer than watch, steeper),
  so that a scenario can carry KDD'24 §6.2's four signals, two explicit and two implicit. Each has
  qualities  q_s(x, a) = sigmoid(slope_s · ℓ_d(x, a) + shift_s + engagement · z_e(d))  where ℓ_d
  is the world's quality logit on day d (`simrec.world.quality_logit`).
* **Days** (`day`, `day_factors`): days differ by a documented drift. Two day factors
  z_s(d), z_e(d) ~ N(0, 1) i.i.d. over days: z_s scales the mean session length (level 1: the
  scroll-budget exponent a_d = 1 + (a - 1)·exp(-session · z_s); level 2: the continuation
  probability gamma_d = 1 - (1 - gamma)·exp(-session · z_s), i.e. mean depth x exp(session · z_s)),
  z_e shifts every signal's logit (user engagement); and `simrec.world.drift` perturbs item
  quality (item bias + N(0, item_strength²)) and the user mix (log-activity + N(0,
  user_strength²)). Days are independent fluctuations around the base world, so day d of a
  replication is reproducible on its own. A day's `feed.Scenario` is
  `simrec.feed.scenario_from_world` of the drifted world: its users drawn by the day's user mix,
  one table per signal. Two optional drifts persist instead (both 0 by default,
  which leaves every day bit-identical): `DriftConfig.item_walk` adds item_walk · W_i(d) to each
  item's bias, W_i a per-item Gaussian random walk (item-level trends and churn, which move
  items, hence the target's and the logger's rankings, differently), and `DriftConfig.view_walk`
  adds view_walk · W(d) to the log session-length factor (examination whose shape drifts and
  stays drifted); `walk` gives W on any day on its own. Offline logs D₀ᵈ and the online A/B arms are
  independent draws from the caller's keys.
* **Truth** (`online`): the exact online reward per session and signal of a policy on a day,
  `simrec.feed.online_value` (exact for every policy here but the epsilon-greedy logger under the
  level-2 violations, a Monte Carlo mean with its standard error there).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import feed, missing, models, validate
from simrec.runner import ConfigError, shared_key
from simrec.world import World, WorldConfig, drift, make_world, quality_logit

__all__ = [
    "SIGNAL_KINDS", "signals_text", "LEVELS", "VIEWS", "METHODS", "SLOTS", "SignalConfig", "LevelConfig", "DriftConfig",
    "RankerConfig", "ScenarioConfig", "PRESETS", "Trained", "Popularity", "NoisyOracle", "Ranker", "RankerField",
    "ranker_label", "parse_ranker", "Platform", "Day", "platforms", "platform", "scores",
    "level_config", "day_factors", "day", "logging_policy", "target_policy", "online",
    "logging_exposure", "WALKS", "walk", "retrieval_scores",
]

#: the reward signals a scenario can simulate and their kind (KDD'24 §6: explicit, e.g. a like;
#: implicit, e.g. a video watched to the end); a cascade ends the session on a ``watch``
SIGNAL_KINDS = {"like": "explicit", "share": "explicit", "watch": "implicit", "replay": "implicit"}
LEVELS = ("level1", "level2")
VIEWS = ("scroll_budget", "exponential")
METHODS = ("mf_auc", "mf_adg")
SLOTS = ("r0", "rt")                     # the platform's trained models (`RankerConfig`)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _is_int(value, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= low


@dataclass(frozen=True)
class SignalConfig:
    """The simulated signals `names` (from `SIGNAL_KINDS`, in this order), each with
    q_s = sigmoid(slope_s · ℓ_d + shift_s + engagement · z_e(d)) (module docstring): ``like`` rare (a
    low shift), ``share`` rarer, ``watch`` frequent (a flatter slope, a high shift), ``replay`` between
    them (steeper and rarer than watch)."""
    names: tuple[str, ...] = ("like", "watch")    # the simulated signals, distinct, from SIGNAL_KINDS
    like_slope: float = 1.0          # slope of the like quality in the day's quality logit
    like_shift: float = -7.0         # shift of the like logit (low: likes are rare)
    watch_slope: float = 0.5         # slope of the watch quality in the day's quality logit
    watch_shift: float = -1.5        # shift of the watch logit (high: watches are frequent)
    share_slope: float = 1.0         # slope of the share quality in the day's quality logit
    share_shift: float = -8.0        # shift of the share logit (rarer than likes)
    replay_slope: float = 0.8        # slope of the replay quality in the day's quality logit
    replay_shift: float = -4.0       # shift of the replay logit (rarer than watches)

    def __post_init__(self):
        _require(isinstance(self.names, tuple) and self.names and len(set(self.names)) == len(self.names)
                 and set(self.names) <= set(SIGNAL_KINDS),
                 f"signals.names must be distinct names from {tuple(SIGNAL_KINDS)}, got {self.names!r}")
        for name in SIGNAL_KINDS:
            for part in ("slope", "shift"):
                value = getattr(self, f"{name}_{part}")
                _require(math.isfinite(value), f"signals.{name}_{part} must be finite, got {value!r}")

    def slopes(self) -> tuple[float, ...]:
        """slope_s of each signal of `names`, in order."""
        return tuple(getattr(self, f"{name}_slope") for name in self.names)

    def shifts(self) -> tuple[float, ...]:
        """shift_s of each signal of `names`, in order."""
        return tuple(getattr(self, f"{name}_shift") for name in self.names)


def signals_text(names: Sequence[str]) -> str:
    """The signals with their kind, for prose: "like (explicit), watch (implicit)"."""
    return ", ".join(f"{name} ({SIGNAL_KINDS[name]})" for name in names)


@dataclass(frozen=True)
class LevelConfig:
    """One feed level: its view model, candidate set, feed length, exploration, clipping and
    assumption violations."""
    view: str = "scroll_budget"      # view model: "scroll_budget" or "exponential"
    #: view-model parameter: the scroll-budget exponent a > 1, or the exponential model's gamma in (0, 1)
    view_parameter: float = 1.3
    candidates: int = 200            # candidates N = |G(x)| (top N of the retrieval score)
    feed_length: int = 60            # shown items K <= N
    epsilon: float = 0.05            # the logging policy's exploration, in [0, 1]
    clip: float = math.inf           # the level's default IPS clipping m >= 1 (inf = none)
    cascade: float = 0.0             # probability that a watch ends the session (0 = off, Asm. 2)
    satiation: float = 0.0           # satiation beta in [0, 1] (0 = off, Asm. 3)

    def __post_init__(self):
        _require(self.view in VIEWS, f"level.view must be one of {VIEWS}, got {self.view!r}")
        if self.view == "scroll_budget":
            _require(math.isfinite(self.view_parameter) and self.view_parameter > 1,
                     f"level.view_parameter is the scroll-budget exponent and must be > 1, "
                     f"got {self.view_parameter!r}")
        else:
            _require(0 < self.view_parameter < 1, f"level.view_parameter is the exponential "
                     f"model's gamma and must be in (0, 1), got {self.view_parameter!r}")
        _require(_is_int(self.candidates, 2), f"level.candidates must be an integer >= 2, "
                                              f"got {self.candidates!r}")
        _require(_is_int(self.feed_length, 1) and self.feed_length <= self.candidates,
                 f"level.feed_length must be an integer in [1, candidates = {self.candidates}], "
                 f"got {self.feed_length!r}")
        for name in ("epsilon", "cascade", "satiation"):
            value = getattr(self, name)
            _require(0 <= value <= 1, f"level.{name} must be in [0, 1], got {value!r}")
        _require(self.clip >= 1, f"level.clip must be >= 1 (inf = no clipping), got {self.clip!r}")

    @property
    def breaks_session(self) -> bool:
        """Whether a cascade or satiation makes the reward at a rank depend on the items above
        (KDD'24 Asm. 2–3), so that a policy's online value is no longer Σ_x p(x) Σ_a q ε(x, a)."""
        return self.cascade > 0 or self.satiation > 0

    def violations(self) -> list[str]:
        """The level's within-session violations in words ([] without any)."""
        return ([f"a cascade (a watch ends the session with probability {self.cascade:g}: Asm. 2)"]
                if self.cascade > 0 else []) + ([f"satiation β = {self.satiation:g} (Asm. 3)"]
                                                if self.satiation > 0 else [])


@dataclass(frozen=True)
class DriftConfig:
    """Day-to-day drift (module docstring); every value >= 0 (0 = no drift)."""
    session: float = 0.25            # sd of the day's log session-length factor
    engagement: float = 0.2          # sd of the day's logit shift (engagement)
    item_strength: float = 0.2       # sd of `simrec.world.drift`'s item-bias noise
    user_strength: float = 0.5       # sd of `simrec.world.drift`'s user log-activity noise
    #: sd of the daily step of a per-item random walk in the item bias (trends, churn: item-level,
    #: persistent; 0 = off, the days of the other drifts exactly)
    item_walk: float = 0.0
    #: sd of the daily step of a random walk in the log session-length factor (examination that
    #: changes over days and stays changed; 0 = off, the days of the other drifts exactly)
    view_walk: float = 0.0

    def __post_init__(self):
        for name in ("session", "engagement", "item_strength", "user_strength", "item_walk", "view_walk"):
            value = getattr(self, name)
            _require(math.isfinite(value) and value >= 0, f"drift.{name} must be finite and >= 0, "
                                                          f"got {value!r}")


@dataclass(frozen=True)
class RankerConfig:
    """The platform's models: O⁺, the candidate generator's SVD and the two trained slots r0 and
    rt, fitted with `simrec.models.fit` (adagrad, the same initial parameters for both)."""
    observation_rate: float = 0.5    # SRS rate of O⁺ from P⁺, in (0, 1]
    retrieval_dim: int = 16          # rank of the truncated SVD that scores the candidate generator
    dim: int = 32                    # latent dimension of the trained models
    learning_rate: float = 0.1       # adagrad learning rate
    l2: float = 0.01                 # L2 regularisation
    batch_size: int = 256            # sampled (u, i⁺) pairs per step
    r0_method: str = "mf_auc"        # model of slot r0 (the logger's ranker): mf_auc or mf_adg
    r0_pairs: int = 100_000          # about this many sampled (u, i⁺) pairs train slot r0
    rt_method: str = "mf_adg"        # model of slot rt (the target): mf_auc or mf_adg
    rt_pairs: int = 400_000          # about this many sampled (u, i⁺) pairs train slot rt

    def __post_init__(self):
        _require(0 < self.observation_rate <= 1, f"rankers.observation_rate must be in (0, 1], "
                                                 f"got {self.observation_rate!r}")
        for name in ("retrieval_dim", "dim", "batch_size", "r0_pairs", "rt_pairs"):
            _require(_is_int(getattr(self, name), 1), f"rankers.{name} must be an integer >= 1, "
                                                      f"got {getattr(self, name)!r}")
        for name in ("r0_method", "rt_method"):
            _require(getattr(self, name) in METHODS, f"rankers.{name} must be one of {METHODS}, "
                                                     f"got {getattr(self, name)!r}")
        for name in ("learning_rate", "l2"):
            value = getattr(self, name)
            _require(math.isfinite(value) and value >= 0, f"rankers.{name} must be finite and >= 0, "
                                                          f"got {value!r}")


@dataclass(frozen=True)
class ScenarioConfig:
    """A platform, its two feed levels, signals, drift and rankers, and the daily sample sizes."""
    #: the simulated world (users x items)
    world: WorldConfig = field(default_factory=lambda: WorldConfig(
        n_users=2000, n_items=1000, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-6.0))
    level1: LevelConfig = field(default_factory=LevelConfig)      # feed level 1 (no violations)
    #: feed level 2 (exponential view, cascade and satiation)
    level2: LevelConfig = field(default_factory=lambda: LevelConfig(
        view="exponential", view_parameter=0.9, candidates=200, feed_length=60, epsilon=0.01,
        clip=200.0, cascade=0.1, satiation=0.02))
    signals: SignalConfig = field(default_factory=SignalConfig)   # reward signals' qualities
    drift: DriftConfig = field(default_factory=DriftConfig)       # day-to-day drift
    rankers: RankerConfig = field(default_factory=RankerConfig)   # the platform's models
    log_sessions: int = 8192         # sessions in each offline log D₀ᵈ, per level and day
    ab_sessions: int = 8192          # sessions per arm of each A/B test, per level and day
    #: Monte Carlo rankings per context for the online value of a stochastic policy under
    #: within-session violations (level 2's logger)
    online_samples: int = 4
    days: int = 7                    # days of one experiment

    def __post_init__(self):
        _require(isinstance(self.world, WorldConfig), "scenario.world must be a WorldConfig")
        _require(_is_int(self.days, 1), f"scenario.days must be an integer >= 1, got {self.days!r}")
        for name in ("log_sessions", "ab_sessions", "online_samples"):
            _require(_is_int(getattr(self, name), 2), f"scenario.{name} must be an integer >= 2, "
                                                      f"got {getattr(self, name)!r}")
        for name in LEVELS:
            level = getattr(self, name)
            _require(level.candidates <= self.world.n_items,
                     f"scenario.{name}.candidates = {level.candidates} exceeds the catalogue "
                     f"(world.n_items = {self.world.n_items})")
        _require(self.rankers.retrieval_dim < min(self.world.n_users, self.world.n_items),
                 "scenario.rankers.retrieval_dim must be < min(world.n_users, world.n_items)")
        _require(all(getattr(self, name).cascade == 0 for name in LEVELS) or "watch" in self.signals.names,
                 f"a cascade ends the session on a watch: scenario.signals.names must include 'watch' when a "
                 f"level's cascade is > 0, got {self.signals.names!r}")


PRESETS = {
    # seconds: a toy platform for tests
    "smoke": ScenarioConfig(
        world=WorldConfig(n_users=200, n_items=150, dim=4, affinity_scale=3.5, popularity_exponent=0.3,
                          offset=-4.0),
        level1=LevelConfig(candidates=40, feed_length=30),
        level2=LevelConfig(view="exponential", view_parameter=0.85, candidates=40, feed_length=30,
                           epsilon=0.02, clip=200.0, cascade=0.1, satiation=0.02),
        rankers=RankerConfig(retrieval_dim=8, dim=8, r0_pairs=5_000, rt_pairs=20_000),
        log_sessions=2048, ab_sessions=2048, online_samples=2),
    "default": ScenarioConfig(),
    # bigger platform and samples
    "paper": ScenarioConfig(
        world=WorldConfig(n_users=5000, n_items=2000, dim=4, affinity_scale=3.5, popularity_exponent=0.3,
                          offset=-6.5),
        level1=LevelConfig(candidates=300, feed_length=200),
        level2=LevelConfig(view="exponential", view_parameter=0.95, candidates=300, feed_length=200,
                           epsilon=0.02, clip=200.0, cascade=0.1, satiation=0.02),
        rankers=RankerConfig(r0_pairs=200_000, rt_pairs=1_000_000),
        log_sessions=32_768, ab_sessions=32_768, online_samples=16),
}


# ---- rankers: typed values ----------------------------------------------------------------------

@dataclass(frozen=True)
class Trained:
    """A factorisation model trained on O⁺: slot "r0" or "rt" of `RankerConfig`."""
    slot: str = "r0"                 # trained slot: r0 or rt (RankerConfig's r0_* / rt_* fields)

    def __post_init__(self):
        _require(self.slot in SLOTS, f"Trained.slot must be one of {SLOTS}, got {self.slot!r}")


@dataclass(frozen=True)
class Popularity:
    """Item counts in O⁺, the same ranking for every user."""


@dataclass(frozen=True)
class NoisyOracle:
    """A noisy oracle of controlled quality: the base world's true quality logit + scale · N(0, 1)
    per (user, item), noise from fold_in(the platform's noise key, draw); draws are exchangeable
    copies of one scale, scale 0 the exact oracle."""
    scale: float = 0.0               # noise standard deviation, finite and >= 0
    draw: int = 0                    # index of the independent noise draw, >= 0

    def __post_init__(self):
        _require(not isinstance(self.scale, bool) and isinstance(self.scale, (int, float))
                 and math.isfinite(self.scale) and self.scale >= 0,
                 f"NoisyOracle.scale must be a finite number >= 0, got {self.scale!r}")
        _require(_is_int(self.draw, 0), f"NoisyOracle.draw must be an integer >= 0, got {self.draw!r}")
        object.__setattr__(self, "scale", float(self.scale))
        object.__setattr__(self, "draw", int(self.draw))


Ranker = Trained | Popularity | NoisyOracle


def ranker_label(ranker: Ranker) -> str:
    """The ranker's name in tables: "r0", "rt", "popularity", "oracle@SCALE" ("oracle@SCALE#DRAW"
    for draw > 0); `parse_ranker` reads it back."""
    if isinstance(ranker, Trained):
        return ranker.slot
    if isinstance(ranker, Popularity):
        return "popularity"
    if isinstance(ranker, NoisyOracle):
        return f"oracle@{ranker.scale:g}" + (f"#{ranker.draw}" if ranker.draw else "")
    raise ConfigError(f"a ranker must be Trained, Popularity or NoisyOracle, got {ranker!r}")


def parse_ranker(text: str, name: str | None = None) -> Ranker:
    """A ranker from its label (`ranker_label`): "r0", "rt", "popularity", "oracle@SCALE" or
    "oracle@SCALE#DRAW" (for config overrides on the command line). `name`: the config field, for
    the error message."""
    text = text.strip()
    if text in SLOTS:
        return Trained(text)
    if text == "popularity":
        return Popularity()
    scale, _, draw = text.removeprefix("oracle@").partition("#")
    try:
        if text.startswith("oracle@"):
            return NoisyOracle(float(scale), int(draw) if draw else 0)
    except (ValueError, ConfigError):
        pass
    raise ConfigError(f"{name + ': ' if name else ''}cannot read ranker {text!r}; write 'r0', 'rt', 'popularity', "
                      f"'oracle@SCALE' or 'oracle@SCALE#DRAW' (SCALE >= 0, DRAW >= 0)")


#: a ranker as a config field: a typed value, read from its label by `--set` (`parse_ranker`)
RankerField = Annotated[Ranker, parse_ranker]


# ---- platform: world, observed feedback, G and the trained models ------------------------------

@dataclass(frozen=True, eq=False)
class Platform:
    """One replication's platform: the world, observed positives O⁺ (bool CSR [U, A]), the
    candidate generator's fixed candidate sets per level ({level: `feed.FixedCandidates`
    i32[U, N]}, the top N of the retrieval scores), the fitted models of the trained slots
    ({slot: `simrec.models.Model`}), and the replication's drift and oracle-noise keys. Arrays and keys
    only, so it pickles (the runner caches a study's setup on disk); `scores` builds the rankers."""
    config: ScenarioConfig
    world: World
    observed: sp.csr_matrix
    candidates: dict
    trained: dict
    drift_key: jax.Array
    noise_key: jax.Array


def _scores_table(model: models.Model) -> np.ndarray:
    """f32[U, A] scores of a fitted model for every user (`simrec.models.score`, in user blocks)."""
    n_users, n_items = model.params.user.shape[0], model.params.item_bias.shape[0]
    validate.fits_in_memory(f"scenarios: a scores table of {n_users:,} users x {n_items:,} items "
                            "(f32 blocks and their concatenation)", 8 * n_users * n_items)
    return np.concatenate([np.asarray(models.score(model, np.arange(s, min(s + 1024, n_users))))
                           for s in range(0, n_users, 1024)])


def _spec(method: str, rankers: RankerConfig) -> models.MFSpec:
    """The model spec of a trained slot: `method` (`METHODS`: the scenarios' one string dispatch)
    with the slots' shared dim, adagrad(learning_rate), l2 and batch size."""
    objective = models.OptADG(dim=rankers.dim) if method == "mf_adg" else models.MFAUC(dim=rankers.dim)
    return models.MFSpec(objective, l2=rankers.l2, learning_rate=rankers.learning_rate, optimizer="adagrad",
                         batch_size=rankers.batch_size)


def platforms(root: jax.Array, config: ScenarioConfig, replications: Sequence[int],
              rankers: Sequence[Ranker] = (Trained("r0"), Trained("rt"))) -> tuple[Platform, ...]:
    """The platforms of `replications` in the run with root key `root`, training the slots that
    `rankers` use. Replication r draws from shared_key(root, f"platform:{r}:...") (world, prior,
    observe, init, drift, noise), so a platform does not depend on the others or on `rankers`.
    The expensive step of a study's setup (training the models)."""
    slots = [slot for slot in SLOTS if Trained(slot) in rankers]
    r = config.rankers
    out = []
    for replication in replications:
        if not _is_int(replication, 0):
            raise ValueError(f"replications must be integers >= 0, got {replication!r}")
        name = f"platform:{replication}"
        world = make_world(shared_key(root, f"{name}:world"), config.world)
        prior = missing.prior_relevant(shared_key(root, f"{name}:prior"), world)
        observed = missing.observe_srs(shared_key(root, f"{name}:observe"), prior, r.observation_rate)
        retrieval = feed.from_table(_scores_table(models.fit(None, models.SVDSpec(r.retrieval_dim), observed)))
        init = shared_key(root, f"{name}:init")             # same initial parameters for r0 and rt
        methods = {"r0": (r.r0_method, r.r0_pairs), "rt": (r.rt_method, r.rt_pairs)}
        trained = {slot: models.fit(init, _spec(methods[slot][0], r), observed, pairs=methods[slot][1])
                   for slot in slots}
        candidates = {level: feed.top_k_candidates(retrieval, level_config(config, level).candidates,
                                                   world.n_users) for level in LEVELS}
        out.append(Platform(config=config, world=world, observed=observed, candidates=candidates,
                            trained=trained, drift_key=shared_key(root, f"{name}:drift"),
                            noise_key=shared_key(root, f"{name}:noise")))
    return tuple(out)


def platform(root: jax.Array, config: ScenarioConfig, replication: int = 0,
             rankers: Sequence[Ranker] = (Trained("r0"), Trained("rt"))) -> Platform:
    """The platform of one replication (`platforms`)."""
    return platforms(root, config, (replication,), rankers)[0]


def retrieval_scores(platform_: Platform) -> feed.ItemFn:
    """The candidate generator's retrieval scores f32[U, A] (as an `ItemFn`): the truncated SVD of
    O⁺ whose top N per user are `Platform.candidates` (recomputed, deterministic), for targets
    whose generator G′ departs from G."""
    rank = platform_.config.rankers.retrieval_dim
    return feed.from_table(_scores_table(models.fit(None, models.SVDSpec(rank), platform_.observed)))


def scores(platform_: Platform, ranker: Ranker) -> feed.ItemFn:
    """Scores f32[U, A] (as an `ItemFn`) of a ranker on the platform: a trained slot's model, the
    item counts in O⁺ (`Popularity`), or a noisy oracle (true logit of the base world + scale ·
    N(0, 1) noise from fold_in(noise key, draw))."""
    if isinstance(ranker, Trained):
        if ranker.slot not in platform_.trained:
            raise ValueError(f"slot {ranker.slot!r} was not trained on this platform; pass "
                             f"Trained({ranker.slot!r}) among the rankers of `platforms`")
        return feed.from_table(_scores_table(platform_.trained[ranker.slot]))
    if isinstance(ranker, Popularity):
        return feed.from_table(_scores_table(models.fit(None, models.PopularitySpec(), platform_.observed)))
    if isinstance(ranker, NoisyOracle):
        world = platform_.world
        validate.fits_in_memory(f"scenarios: a noisy oracle of {world.n_users:,} users x {world.n_items:,} "
                                "items (f32 noise, logit, scaled noise and scores)",
                                16 * world.n_users * world.n_items)
        noise = jax.random.normal(jax.random.fold_in(platform_.noise_key, ranker.draw),
                                  (world.n_users, world.n_items))
        logit = quality_logit(world, jnp.arange(world.n_users))
        return feed.from_table(np.asarray(logit + ranker.scale * noise, np.float32))
    raise ValueError(f"ranker must be Trained, Popularity or NoisyOracle, got {ranker!r}")


# ---- levels, policies, days ----------------------------------------------------------------

def level_config(config: ScenarioConfig, level: str) -> LevelConfig:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return getattr(config, level)


def logging_policy(platform_: Platform, level: str, ranker: feed.ItemFn) -> feed.Policy:
    """R₀ of a level: epsilon-greedy (the level's epsilon) around Sort(ranker scores, `scores`) on
    the fixed G, showing the first K candidates."""
    lv = level_config(platform_.config, level)
    ranker_ = feed.EpsilonGreedy(feed.Sort(ranker), jnp.float32(lv.epsilon))
    return feed.Policy(platform_.candidates[level], ranker_, lv.feed_length)


def target_policy(platform_: Platform, level: str, ranker: feed.ItemFn) -> feed.Policy:
    """A deterministic target of a level: Sort(ranker scores, `scores`) on the same fixed G and K."""
    lv = level_config(platform_.config, level)
    return feed.Policy(platform_.candidates[level], feed.Sort(ranker), lv.feed_length)


class Day(NamedTuple):
    """One level on one day: the `feed.Scenario` (day's view model, qualities, user mix), the day
    factors z_s (session length) and z_e (engagement), and the day index."""
    scenario: feed.Scenario
    session: float
    engagement: float
    index: int


def day_factors(platform_: Platform, d: int) -> tuple[float, float]:
    """(z_s(d), z_e(d)) ~ N(0, 1) i.i.d., from fold_in(drift key, d); shared by both levels."""
    z = jax.random.normal(jax.random.fold_in(jax.random.fold_in(platform_.drift_key, 0), d), (2,))
    return float(z[0]), float(z[1])


def _day_view(level: LevelConfig, log_length: float, signals: tuple[str, ...]) -> feed.ViewModel:
    """The level's view model with the mean session length scaled by exp(log_length); a cascade
    ends the session on a watch (`signals`: the scenario's signal names)."""
    if level.view == "scroll_budget":
        base = feed.ScrollBudget(jnp.float32(1.0 + (level.view_parameter - 1.0) * math.exp(-log_length)))
    else:
        base = feed.Exponential(jnp.float32(1.0 - (1.0 - level.view_parameter) * math.exp(-log_length)))
    return feed.Cascade(base, jnp.float32(level.cascade), signals.index("watch")) if level.cascade > 0 else base


#: the walks of `walk`: their stream of `Platform.drift_key` (streams 0 and 1 are the day factors
#: and `simrec.world.drift`) and their size (per item, or one number for the view model)
WALKS = {"item": 2, "view": 3}


@functools.partial(jax.jit, static_argnums=1)
def _walk(key, size: int, d):
    return jax.lax.fori_loop(1, d + 1, lambda t, total: total + jax.random.normal(jax.random.fold_in(key, t), (size,)),
                             jnp.zeros(size))


def walk(platform_: Platform, kind: str, d: int) -> jax.Array:
    """A standard Gaussian random walk on day d: W(d) = sum_{t=1}^{d} xi_t, W(0) = 0, xi_t ~ N(0, I)
    i.i.d. over days from fold_in(fold_in(drift key, WALKS[kind]), t). kind "item": one walk per
    item, f32[A] (`DriftConfig.item_walk` scales it into the item bias); "view": one walk, f32[1]
    (`DriftConfig.view_walk` scales it into the log session-length factor). Any day is computed
    on its own in O(d · size), and days share their steps, so drift persists."""
    if kind not in WALKS:
        raise ValueError(f"kind must be one of {tuple(WALKS)}, got {kind!r}")
    if not _is_int(d, 0):
        raise ValueError(f"day must be an integer >= 0, got {d!r}")
    size = platform_.world.n_items if kind == "item" else 1
    return _walk(jax.random.fold_in(platform_.drift_key, WALKS[kind]), size, d)


@jax.jit
def _day_quality(world: World, slopes, shifts):
    logit = quality_logit(world, jnp.arange(world.n_users))
    return jax.nn.sigmoid(slopes[:, None, None] * logit[None] + shifts[:, None, None])


def day(platform_: Platform, level: str, d: int) -> Day:
    """The scenario of `level` on day `d` (module docstring's drift): deterministic given the
    platform, so both levels and every caller see the same day."""
    if not _is_int(d, 0):
        raise ValueError(f"day must be an integer >= 0, got {d!r}")
    config = platform_.config
    lv, dr, sg = level_config(config, level), config.drift, config.signals
    z_s, z_e = day_factors(platform_, d)
    world = drift(jax.random.fold_in(platform_.drift_key, 1), platform_.world, d, dr.item_strength,
                  dr.user_strength)
    if dr.item_walk > 0:                                   # off: the world above, bit for bit
        world = dataclasses.replace(world, item_bias=world.item_bias + dr.item_walk * walk(platform_, "item", d))
    log_length = dr.session * z_s
    if dr.view_walk > 0:
        log_length = log_length + dr.view_walk * float(walk(platform_, "view", d)[0])
    shifts = jnp.array(sg.shifts(), jnp.float32) + dr.engagement * z_e
    validate.fits_in_memory(f"scenarios: a day's quality tables of {world.n_users:,} users x "
                            f"{world.n_items:,} items (f32 logit, its product and one table per signal)",
                            4 * (2 + len(sg.names)) * world.n_users * world.n_items)
    quality = np.asarray(_day_quality(world, jnp.array(sg.slopes(), jnp.float32), shifts))
    scenario = feed.scenario_from_world(world, _day_view(lv, log_length, sg.names), dict(zip(sg.names, quality)),
                                        satiation=float(lv.satiation))   # users drawn by the day's activity
    return Day(scenario, z_s, z_e, int(d))


def logging_exposure(scenario: feed.Scenario, policy: feed.Policy) -> jax.Array:
    """ε(x, a) of an exact policy under the day's true view model, for every context.  f32[X, A]."""
    contexts = np.arange(np.shape(scenario.activity)[0])
    return feed.exposure(None, policy, scenario.view, contexts).mean


def online(key: jax.Array | None, platform_: Platform, scenario: feed.Scenario,
           policy: feed.Policy) -> feed.OnlineValue:
    """Exact online reward per session and signal of `policy` on a day (`simrec.feed.online_value`;
    a Monte Carlo mean over config.online_samples rankings, with its standard error, for a
    stochastic policy under a cascade or satiation: pass a key then)."""
    return feed.online_value(key, scenario, policy, num_samples=platform_.config.online_samples,
                             block_size=platform_.config.world.n_users)



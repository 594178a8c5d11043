"""Feed scenarios of the offline–online studies (Jeunen, Potapov & Ustimenko, KDD'24 §6).

Not a study: the shared setting of ``correlation`` (Table 2) and ``sensitivity`` (Fig. 1), as
named, validated presets of `ScenarioConfig`, and small functions that build everything from
(root key, config, replication):

* **Platform** (`platform`): a `simrec.world` World of users x items; the world's observed
  feedback O⁺ (prior-relevant P⁺ ~ Bernoulli(q), then a simple random sample at
  `RankerConfig.observation_rate`, as in Lim et al. §2); a FIXED candidate generator G = the top N
  items of a truncated SVD of O⁺ (`RankerConfig.retrieval_dim`), precomputed per user
  (`simrec.feed.top_k_candidates`, identical to `feed.TopK`); and rankers scored over the whole
  catalogue: ``"r0"`` and ``"rt"``, factorisation models trained on O⁺ with `simrec.models`
  (default R₀ = MF-AUC, R_t = MF-ADG trained four times longer), and noisy oracles
  ``"oracle@s"`` = the world's true quality logit + N(0, s²) noise (``"oracle@s#j"``: the j-th
  independent noise draw of the same scale, an exchangeable copy; ``"oracle"`` = ``"oracle@0"``).
  Trained once per (run, replication) and memoised in memory (`functools.lru_cache` keyed by the
  root key's id, like `studies.opt_adg`).
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
* **Signals** (`SIGNALS`): ``like`` (explicit, rare) and ``watch`` (implicit, frequent), with
  qualities  q_s(x, a) = sigmoid(slope_s · ℓ_d(x, a) + shift_s + engagement · z_e(d))  where ℓ_d
  is the world's quality logit on day d (`simrec.world.quality_logit`).
* **Days** (`day`, `day_factors`): days differ by a documented drift. Two day factors
  z_s(d), z_e(d) ~ N(0, 1) i.i.d. over days: z_s scales the mean session length (level 1: the
  scroll-budget exponent a_d = 1 + (a - 1)·exp(-session · z_s); level 2: the continuation
  probability gamma_d = 1 - (1 - gamma)·exp(-session · z_s), i.e. mean depth x exp(session · z_s)),
  z_e shifts every signal's logit (user engagement); and `simrec.world.drift` perturbs item
  quality (item bias + N(0, item_strength²)) and the user mix (log-activity + N(0,
  user_strength²)). Days are independent fluctuations around the base world, so day d of a
  replication is reproducible on its own. Offline logs D₀ᵈ and the online A/B arms are
  independent draws from the caller's keys.
* **Truth** (`online`): the exact online reward per session and signal of a policy on a day,
  `simrec.feed.online_value` (exact for every policy here but the epsilon-greedy logger under the
  level-2 violations, a Monte Carlo mean with its standard error there).

See /work/notes/scenarios.md for the API the studies use.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.sparse as sp

from simrec import feed, missing, models
from simrec.runner import ConfigError, key_id, shared_key
from simrec.world import World, WorldConfig, drift, make_world, quality_logit

__all__ = [
    "SIGNALS", "LEVELS", "VIEWS", "METHODS", "SignalConfig", "LevelConfig", "DriftConfig",
    "RankerConfig", "ScenarioConfig", "PRESETS", "Platform", "Day", "platform", "platform_of",
    "ranker", "noisy_oracle", "level_config", "day_factors", "day", "logging_policy", "target_policy",
    "online", "logging_exposure", "TARGETS", "build",
]

SIGNALS = ("like", "watch")              # explicit (rare), implicit (frequent)
LEVELS = ("level1", "level2")
VIEWS = ("scroll_budget", "exponential")
METHODS = ("mf_auc", "mf_adg")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _is_int(value, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= low


@dataclass(frozen=True)
class SignalConfig:
    """q_s = sigmoid(slope_s · ℓ_d + shift_s + engagement · z_e(d)) per signal s (module docstring):
    ``like`` rare (a low shift), ``watch`` frequent (a flatter slope, a high shift)."""
    like_slope: float = 1.0
    like_shift: float = -7.0
    watch_slope: float = 0.5
    watch_shift: float = -1.5

    def __post_init__(self):
        for name in ("like_slope", "like_shift", "watch_slope", "watch_shift"):
            _require(math.isfinite(getattr(self, name)), f"signals.{name} must be finite, got "
                                                         f"{getattr(self, name)!r}")


@dataclass(frozen=True)
class LevelConfig:
    """One feed level. view: "scroll_budget" (view_parameter = the power-law exponent a > 1) or
    "exponential" (view_parameter = gamma in (0, 1)); candidates N = |G(x)| (top N of the retrieval
    score); feed_length K <= N shown items; epsilon: the logging policy's exploration in [0, 1];
    clip: the level's default IPS clipping m >= 1 (inf = none); cascade: probability that a
    ``watch`` ends the session (0 = off, Asm. 2); satiation: beta in [0, 1] (0 = off, Asm. 3)."""
    view: str = "scroll_budget"
    view_parameter: float = 1.3
    candidates: int = 200
    feed_length: int = 60
    epsilon: float = 0.05
    clip: float = math.inf
    cascade: float = 0.0
    satiation: float = 0.0

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


@dataclass(frozen=True)
class DriftConfig:
    """Day-to-day drift (module docstring): session and engagement are the standard deviations of
    the day's log session-length factor and logit shift; item_strength and user_strength those of
    `simrec.world.drift`'s item-bias and user log-activity noise. All >= 0 (0 = no drift)."""
    session: float = 0.25
    engagement: float = 0.2
    item_strength: float = 0.2
    user_strength: float = 0.5

    def __post_init__(self):
        for name in ("session", "engagement", "item_strength", "user_strength"):
            value = getattr(self, name)
            _require(math.isfinite(value) and value >= 0, f"drift.{name} must be finite and >= 0, "
                                                          f"got {value!r}")


@dataclass(frozen=True)
class RankerConfig:
    """The platform's models. observation_rate: SRS rate of O⁺ from P⁺; retrieval_dim: rank of the
    truncated SVD that scores the candidate generator; r0_method / rt_method in `METHODS`, trained
    with `simrec.models.train` (dim, adagrad(learning_rate), l2, batch_size) on about
    r0_iterations / rt_iterations sampled (u, i⁺) pairs; the same initial parameters for both."""
    observation_rate: float = 0.5
    retrieval_dim: int = 16
    dim: int = 32
    learning_rate: float = 0.1
    l2: float = 0.01
    batch_size: int = 256
    r0_method: str = "mf_auc"
    r0_iterations: int = 100_000
    rt_method: str = "mf_adg"
    rt_iterations: int = 400_000

    def __post_init__(self):
        _require(0 < self.observation_rate <= 1, f"rankers.observation_rate must be in (0, 1], "
                                                 f"got {self.observation_rate!r}")
        for name in ("retrieval_dim", "dim", "batch_size", "r0_iterations", "rt_iterations"):
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
    """A platform, its two feed levels, signals, drift and rankers, and the daily sample sizes:
    log_sessions sessions in each offline log D₀ᵈ and ab_sessions per arm of each A/B test, per
    level and day; online_samples: Monte Carlo rankings per context for the exact online value of
    a stochastic policy under within-session violations (level 2's logger)."""
    world: WorldConfig = field(default_factory=lambda: WorldConfig(
        n_users=2000, n_items=1000, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-6.0))
    level1: LevelConfig = field(default_factory=LevelConfig)
    level2: LevelConfig = field(default_factory=lambda: LevelConfig(
        view="exponential", view_parameter=0.9, candidates=200, feed_length=60, epsilon=0.01,
        clip=200.0, cascade=0.1, satiation=0.02))
    signals: SignalConfig = field(default_factory=SignalConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    rankers: RankerConfig = field(default_factory=RankerConfig)
    log_sessions: int = 8192
    ab_sessions: int = 8192
    online_samples: int = 4
    days: int = 7

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
                 f"scenario.rankers.retrieval_dim must be < min(world.n_users, world.n_items)")


PRESETS = {
    # seconds: a toy platform for tests
    "smoke": ScenarioConfig(
        world=WorldConfig(n_users=200, n_items=150, dim=4, affinity_scale=3.5, popularity_exponent=0.3,
                          offset=-4.0),
        level1=LevelConfig(candidates=40, feed_length=30),
        level2=LevelConfig(view="exponential", view_parameter=0.85, candidates=40, feed_length=30,
                           epsilon=0.02, clip=200.0, cascade=0.1, satiation=0.02),
        rankers=RankerConfig(retrieval_dim=8, dim=8, r0_iterations=5_000, rt_iterations=20_000),
        log_sessions=2048, ab_sessions=2048, online_samples=2),
    "default": ScenarioConfig(),
    # bigger platform and samples
    "paper": ScenarioConfig(
        world=WorldConfig(n_users=5000, n_items=2000, dim=4, affinity_scale=3.5, popularity_exponent=0.3,
                          offset=-6.5),
        level1=LevelConfig(candidates=300, feed_length=200),
        level2=LevelConfig(view="exponential", view_parameter=0.95, candidates=300, feed_length=200,
                           epsilon=0.02, clip=200.0, cascade=0.1, satiation=0.02),
        rankers=RankerConfig(r0_iterations=200_000, rt_iterations=1_000_000),
        log_sessions=32_768, ab_sessions=32_768, online_samples=16),
}


# ---- platform: world, observed feedback, G and the rankers ----------------------------------

@dataclass(frozen=True, eq=False)
class Platform:
    """World, observed positives O⁺ (bool CSR [U, A]), the candidate generator's retrieval scores
    and its fixed candidate sets per level ({level: `feed.FixedCandidates` i32[U, N]}, the top N
    of the retrieval scores), the trained rankers' scores (`feed.ItemFn` over [U, A]), and the
    replication's drift and oracle-noise keys."""
    config: ScenarioConfig
    world: World
    observed: sp.csr_matrix
    retrieval: feed.ItemFn
    candidates: dict
    trained: dict
    drift_key: jax.Array
    noise_key: jax.Array


def _root(root_id: tuple) -> jax.Array:
    return jax.random.wrap_key_data(jnp.asarray(root_id, dtype=jnp.uint32))


def _scores_table(params) -> np.ndarray:
    n_users = params.user.shape[0]
    return np.concatenate([np.asarray(models.scores(params, np.arange(s, min(s + 1024, n_users))))
                           for s in range(0, n_users, 1024)])


def _train(key, method: str, iterations: int, observed, rankers: RankerConfig):
    spec = models.OptADG(dim=rankers.dim) if method == "mf_adg" else models.MFAUC(dim=rankers.dim)
    return models.train(key, spec, observed, epochs=-(-iterations // observed.nnz),
                        batch_size=rankers.batch_size, optimizer=_optimizer(rankers.learning_rate),
                        l2=rankers.l2)


@functools.lru_cache(maxsize=None)
def _optimizer(learning_rate: float) -> optax.GradientTransformation:
    """One optax object per rate, so the compiled training epoch is reused."""
    return optax.adagrad(learning_rate)


@functools.lru_cache(maxsize=4)
def platform_of(root_id: tuple, config: ScenarioConfig, replication: int) -> Platform:
    """The platform of `replication` in the run with root key id `root_id` (memoised)."""
    root = _root(root_id)
    name = f"platform:{replication}"
    world = make_world(shared_key(root, f"{name}:world"), config.world)
    prior = missing.prior_relevant(shared_key(root, f"{name}:prior"), world)
    observed = missing.observe_srs(shared_key(root, f"{name}:observe"), prior,
                                   config.rankers.observation_rate)
    retrieval = feed.from_table(_scores_table(models.svd(observed, config.rankers.retrieval_dim)))
    init = shared_key(root, f"{name}:init")             # same initial parameters for R0 and Rt
    r = config.rankers
    trained = {"r0": feed.from_table(_scores_table(_train(init, r.r0_method, r.r0_iterations, observed, r))),
               "rt": feed.from_table(_scores_table(_train(init, r.rt_method, r.rt_iterations, observed, r))),
               "popularity": feed.from_table(_scores_table(models.popularity(observed)))}
    candidates = {level: feed.top_k_candidates(retrieval, level_config(config, level).candidates, world.n_users)
                  for level in LEVELS}
    return Platform(config=config, world=world, observed=observed, retrieval=retrieval,
                    candidates=candidates, trained=trained,
                    drift_key=shared_key(root, f"{name}:drift"), noise_key=shared_key(root, f"{name}:noise"))


def platform(root: jax.Array, config: ScenarioConfig, replication: int = 0) -> Platform:
    """The platform (world, O⁺, G, trained rankers) of `replication` in the run with root key
    `root`: keys shared_key(root, f"platform:{replication}:...")."""
    if not _is_int(replication, 0):
        raise ValueError(f"replication must be an integer >= 0, got {replication!r}")
    return platform_of(key_id(root), config, int(replication))


def _parse_oracle(name: str) -> tuple[float, int]:
    """"oracle" -> (0, 0); "oracle@s" -> (s, 0); "oracle@s#j" -> (s, j)."""
    spec = name[len("oracle"):]
    scale, _, draw = spec.lstrip("@").partition("#")
    try:
        values = (float(scale) if scale else 0.0, int(draw) if draw else 0)
    except ValueError:
        values = (math.nan, -1)
    if not (spec == "" or spec.startswith("@")) or not (math.isfinite(values[0]) and values[0] >= 0) \
            or values[1] < 0:
        raise ValueError(f"ranker {name!r}: write a noisy oracle as 'oracle', 'oracle@SCALE' or "
                         f"'oracle@SCALE#DRAW' (SCALE >= 0, DRAW >= 0)")
    return values


@functools.lru_cache(maxsize=16)
def _oracle(platform_: Platform, scale: float, draw: int) -> feed.ItemFn:
    world = platform_.world
    users = jnp.arange(world.n_users)
    noise = jax.random.normal(jax.random.fold_in(platform_.noise_key, draw), (world.n_users, world.n_items))
    return feed.from_table(np.asarray(quality_logit(world, users) + scale * noise, np.float32))


def noisy_oracle(platform_: Platform, scale: float, draw: int = 0) -> feed.ItemFn:
    """A noisy oracle of controlled quality: the base world's true logit + scale · N(0, 1) noise
    per (user, item), from fold_in(noise key, draw) (draws are exchangeable copies).  f32[U, A]."""
    return ranker(platform_, f"oracle@{float(scale)!r}#{int(draw)}")


def ranker(platform_: Platform, name: str) -> feed.ItemFn:
    """Scores f32[U, A] (as an `ItemFn`) of a named ranker: "r0", "rt" (trained on O⁺),
    "popularity" (item counts in O⁺), or a noisy oracle "oracle", "oracle@SCALE",
    "oracle@SCALE#DRAW" (true logit of the base world + SCALE · N(0, 1) noise, draw DRAW;
    memoised)."""
    if name in platform_.trained:
        return platform_.trained[name]
    if name.startswith("oracle"):
        return _oracle(platform_, *_parse_oracle(name))
    raise ValueError(f"unknown ranker {name!r}; use 'r0', 'rt', 'popularity' or 'oracle@SCALE[#DRAW]'")


# ---- levels, policies, days ----------------------------------------------------------------

def level_config(config: ScenarioConfig, level: str) -> LevelConfig:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return getattr(config, level)


def logging_policy(platform_: Platform, level: str, name: str = "r0") -> feed.Policy:
    """R₀ of a level: epsilon-greedy (the level's epsilon) around Sort(ranker `name`) on the fixed
    G, showing the first K candidates."""
    lv = level_config(platform_.config, level)
    ranker_ = feed.EpsilonGreedy(feed.Sort(ranker(platform_, name)), jnp.float32(lv.epsilon))
    return feed.Policy(platform_.candidates[level], ranker_, lv.feed_length)


def target_policy(platform_: Platform, level: str, name: str = "rt") -> feed.Policy:
    """A deterministic target of a level: Sort(ranker `name`) on the same fixed G and K."""
    lv = level_config(platform_.config, level)
    return feed.Policy(platform_.candidates[level], feed.Sort(ranker(platform_, name)), lv.feed_length)


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


def _day_view(level: LevelConfig, log_length: float) -> feed.ViewModel:
    """The level's view model with the mean session length scaled by exp(log_length)."""
    if level.view == "scroll_budget":
        base = feed.ScrollBudget(jnp.float32(1.0 + (level.view_parameter - 1.0) * math.exp(-log_length)))
    else:
        base = feed.Exponential(jnp.float32(1.0 - (1.0 - level.view_parameter) * math.exp(-log_length)))
    return feed.Cascade(base, jnp.float32(level.cascade), SIGNALS.index("watch")) if level.cascade > 0 else base


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
    shifts = jnp.array([sg.like_shift, sg.watch_shift], jnp.float32) + dr.engagement * z_e
    quality = np.asarray(_day_quality(world, jnp.array([sg.like_slope, sg.watch_slope], jnp.float32), shifts))
    activity = np.asarray(jax.nn.softmax(world.user_log_activity), np.float64)
    scenario = feed.Scenario(_day_view(lv, dr.session * z_s), tuple(feed.from_table(q) for q in quality),
                             jnp.asarray(activity / activity.sum(), jnp.float32), SIGNALS,
                             satiation=float(lv.satiation))
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


#: target rankers and their intended effect against the logger R₀ = epsilon-greedy("r0") at both
#: levels (measured with `online` on the default platform, day 0: relative change like / watch,
#: level 1 and level 2): rt +14 %/+6 % and +15 %/+6 %; oracle@2 +32 %/+9 % and +33 %/+8 %;
#: oracle@1 +53 %/+21 % and +55 %/+19 %; oracle@4 -6 %/-7 % and -10 %/-11 %; oracle@8 -36 %/-19 %
#: and -47 %/-27 %; popularity -1 %/-7 % and -14 %/-19 %; r0 (its own Sort, no exploration)
#: +1 %/+1 % — a near-A/A. Verify per platform and day: `online` gives the exact difference.
TARGETS = {"rt": "improving", "oracle@2": "improving", "oracle@1": "improving",
           "oracle@4": "harmful", "oracle@8": "harmful", "popularity": "harmful", "r0": "near-A/A"}


def build(root: jax.Array, config: ScenarioConfig, level: str, d: int, replication: int = 0,
          targets=tuple(TARGETS)) -> tuple[feed.Scenario, feed.Policy, dict]:
    """Everything a feed study needs for one level on one day: (the day's `feed.Scenario`, the
    logging policy R₀, {name: deterministic target policy} for the ranker names `targets`)."""
    platform_ = platform(root, config, replication)
    return (day(platform_, level, d).scenario, logging_policy(platform_, level),
            {name: target_policy(platform_, level, name) for name in targets})

"""Study ``assumptions``: each of Jeunen, Potapov & Ustimenko's (KDD'24 §4) Assumptions 1–5 violated
alone, on a dial from 0 (the assumption holds) to strong, and what the violation does to the offline
estimators of an online difference.

The setting is one feed level of `simrec_studies.scenarios` (default: level 1, the scroll-budget view
model, no violation) on one day of one platform: R₀ = epsilon-greedy around the trained ranker r0
logs D₀ (`feed.simulate`), and deterministic targets R_t (improving: rt and a noisy oracle;
harmful: two very noisy oracles) are scored on it. Every estimator is compared with the EXACT online
difference V(R_t) − V(R₀) of the same violated world (`feed.online_value`; the one exception is
fatigue, where the reward depends on the session history and the truth is the mean of
`truth_arms` simulated deployments of `log_sessions` sessions, each from a fresh state).

Violations (one at a time; each dial's scenario differs from the baseline only by that parameter):

* ``fatigue`` — Asm. 1, reward independence across trajectories: `feed.Scenario.fatigue` φ, a
  viewed item's quality shrinks by (1 − φ) per earlier session in which the user viewed it (state
  updated every `round_size` sessions);
* ``cascade`` — Asm. 2, position-based examination: `feed.Cascade` around the level's view model, a
  watch ends the session with probability p, so whether rank i is viewed depends on the items above
  it; the estimators keep the position-only model (the cascade's base), as a PBM-based logger would;
* ``context`` — Asm. 2, examination by rank only: the users split into two fixed types (type 0: even
  user index, type 1: odd — the world draws its users i.i.d., so the split is independent of every
  user property); type 0 scrolls deeper and type 1 shallower: each type's view model is the level's
  with its log session-length factor moved by ±δ as the day drift moves it (`shifted_view`;
  scroll budget a → 1 + (a − 1)e^{∓δ}). Each type's sessions are simulated in its own
  `feed.Scenario` (same qualities, activity restricted to the type and renormalised, the type's view
  model; ε₀ recorded under that view model), a FIXED number per type, proportional to its activity
  mass w_t (n₀ = round(N·w₀), n₁ = N − n₀, `type_sessions`), and the logs are concatenated. The
  estimators use one rank-only discount, the population average P(V|i) = Σ_t w_t S_t(i)
  (`pooled_view`) — the curve a learnt pbm (`feed.fit_view_model`) converges to on the pooled log,
  so the only error is that examination depends on the user, not a wrong average curve (exposures
  are linear in the curve, so with types independent of the users' tastes the per-type errors
  cancel in expectation: `MECHANISMS`). The truth is Σ_t w_t V_t, V_t the exact online value in
  type t's scenario;
* ``satiation`` — Asm. 3, reward independence across ranks: `feed.Scenario.satiation` β,
  q̃(i) = q(i) · Π_{j<i} (1 − β q(j));
* ``view_log`` / ``view_exp`` — the P(V|R) of Asm. 2/4 mis-specified by the estimator: the world keeps
  its scroll-budget view model S (`feed.ScrollBudget`), the estimator computes ε₀, ε and the nDCG
  discount under S_λ = (1 − λ) S + λ S_family (`misspecified_view`), S_family logarithmic
  1/log₂(i+1) or exponential γ^{i−1}; λ = 0 is the truth, λ = 1 the family;
* ``support`` — Asm. 5, full support of the logger: a share s of the catalogue (a fixed random
  order of the items, so larger s removes a superset) is left out of the LOGGER's candidate
  generator only (G₀ = top N of the retrieval scores over the remaining items, `logging_candidates`),
  while the targets keep G. The targets' exposure on those items has no logged counterpart: the
  estimators are computed on the supported part as they stand (they raise only on a *viewed* item
  with ε₀ = 0, which cannot occur), so they silently lose that mass; its size is recorded (``lost``,
  `ope.support_loss`). Doubly robust DCG still credits those items through its direct-method term.

Estimators (per signal, target and clipping m in `m`): clipped-IPS DCG and nDCG with the
same-discount ideal (`sensitivity.offline_differences`), nDCG with the all-viewed ideal, pnDCG,
self-normalised DCG and doubly robust DCG (`estimator_differences`; the DR reward model q̂ is each
item's smoothed click-per-view rate in the same log, `reward_model`). Each gives the paired
difference Δ̄ = f̄(R_t) − f̄(R₀) with a normal CI at `confidence` and R₀'s own value f̄(R₀).

Keys: the log of replication r draws from cell_key(root, {"part": "log", "replication": r}) in every
cell, so every dial of every assumption sees the same random stream (common random numbers), and at
dial 0 — where the scenario, the logger and the estimator's view model are built by the same code
with the violation parameter 0 (the context violation splits the users only for δ > 0) — the log
and every estimate are bit-identical to the baseline's.
The baseline is one cell (assumption "none"); the report uses it as dial 0 of every assumption.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from simrec import feed, ope, stats, validate
from simrec.feed.policies import table_values
from simrec.runner import ConfigError, Report, Study, cell_key, shared_key
from simrec.world import WorldConfig
from simrec_studies import scenarios, sensitivity
from simrec_studies.scenarios import NoisyOracle, Trained

#: the violations, in the paper's order of assumptions
ASSUMPTIONS = ("fatigue", "cascade", "context", "satiation", "view_log", "view_exp", "support")
BASELINE = "none"
#: what each violation breaks, for tables and figures
LABELS = {
    "fatigue": "Asm. 1 (state across sessions): fatigue φ",
    "cascade": "Asm. 2 (examination by rank only): cascade stop p",
    "context": "Asm. 2 (examination by rank only): two user types scroll deeper / shallower by ±δ",
    "satiation": "Asm. 3 (rewards independent across ranks): satiation β",
    "view_log": "Asm. 4 (P(V|R) mis-specified): blend λ towards 1/log2(i+1)",
    "view_exp": "Asm. 4 (P(V|R) mis-specified): blend λ towards γ^(i-1)",
    "support": "Asm. 5 (full support): share s of items the logger never shows",
}
#: the dial field of the config of each violation
DIAL_FIELDS = {"fatigue": "fatigue", "cascade": "cascade", "context": "depth_shift", "satiation": "satiation",
               "view_log": "misspecification", "view_exp": "misspecification", "support": "unsupported"}
METRICS = ("dcg", "ndcg", "ndcg_all", "pndcg", "sndcg", "dr")
#: estimators whose value is on the online-reward scale (their difference is compared directly)
ONLINE_SCALE = ("dcg", "sndcg", "dr")
METRIC_NAMES = {"dcg": "DCG", "ndcg": "nDCG (same discount)", "ndcg_all": "nDCG (all viewed)", "pndcg": "pnDCG",
                "sndcg": "SN-DCG", "dr": "DR-DCG"}
SIGN_LEVEL = 0.95           # the sign-agreement level of the summary table
BIAS_ALPHA = 0.01           # the level of the (Bonferroni-adjusted) bias test of the summary table
#: the record schema: one row per (assumption, dial, replication, signal, target, metric, m).
#: replication -1 holds the truth of the cell (metric "", m NaN): true_diff, true_se (of the
#: difference), true_base (V(R₀)); offline rows hold the estimated difference (est_diff, est_se),
#: R₀'s own estimate (est_base), the target's lost exposure on items R₀ never shows (lost) and the truth again.
COLUMNS = {"assumption": str, "dial": float, "replication": int, "signal": str, "target": str, "metric": str,
           "m": float, "est_diff": float, "est_se": float, "est_base": float, "lost": float, "true_diff": float,
           "true_se": float, "true_base": float}

SCENARIO = scenarios.ScenarioConfig(
    world=WorldConfig(n_users=1000, n_items=500, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-5.0),
    level1=scenarios.LevelConfig(candidates=60, feed_length=30, epsilon=0.05),
    level2=scenarios.LevelConfig(view="exponential", view_parameter=0.9, candidates=60, feed_length=30,
                                 epsilon=0.05),
    rankers=scenarios.RankerConfig(retrieval_dim=12, dim=16, r0_pairs=30_000, rt_pairs=120_000),
    log_sessions=8192, ab_sessions=2, online_samples=16, days=1)


def _dials(name: str, values, high: float) -> None:
    if not isinstance(values, tuple) or any(not (isinstance(v, (int, float)) and 0 < v <= high) for v in values) \
            or len(set(values)) != len(values) or list(values) != sorted(values):
        raise ConfigError(f"{name} must be increasing distinct dial values in (0, {high:g}] (0, the baseline, "
                          f"is always included), got {values!r}")


@dataclass(frozen=True)
class AssumptionsConfig:
    """The assumptions study's settings (module docstring)."""
    #: platform, world, feed levels and sample sizes (`simrec_studies.scenarios`); one day (day 0) is
    #: used, scenario.log_sessions sessions per log (scenario.ab_sessions is not used)
    scenario: scenarios.ScenarioConfig = field(default_factory=lambda: SCENARIO)
    level: str = "level1"            # the feed level whose view model, candidates and epsilon are used
    #: the ranker of R₀ (epsilon-greedy around it, `scenarios.logging_policy`)
    logger: scenarios.RankerField = field(default_factory=lambda: Trained("r0"))
    #: rankers of deterministic targets intended to beat R₀ (labels on the command line, e.g. rt,oracle@1)
    improving: tuple[scenarios.RankerField, ...] = (Trained("rt"), NoisyOracle(1.0))
    #: rankers of deterministic targets intended to lose to R₀ (the truth decides at every dial)
    harmful: tuple[scenarios.RankerField, ...] = (NoisyOracle(8.0), NoisyOracle(16.0))
    assumptions: tuple[str, ...] = ASSUMPTIONS                   # the violations run (names of `ASSUMPTIONS`)
    fatigue: tuple[float, ...] = (0.02, 0.05, 0.2)               # Asm. 1 dial: fatigue φ in (0, 1]
    cascade: tuple[float, ...] = (0.25, 0.5, 1.0)               # Asm. 2 dial: stop probability p after a watch
    #: Asm. 2 dial: shift δ in (0, 3] of the two user types' log session-length factor (+δ deeper, −δ shallower)
    depth_shift: tuple[float, ...] = (0.5, 1.0, 2.0)
    satiation: tuple[float, ...] = (0.1, 0.2, 0.4)              # Asm. 3 dial: satiation β in (0, 1]
    #: Asm. 4 dial: blend λ in (0, 1] of the estimator's view model towards the wrong family
    misspecification: tuple[float, ...] = (0.25, 0.5, 1.0)
    exponential_gamma: float = 0.9   # gamma of the exponential family the view_exp violation blends towards
    unsupported: tuple[float, ...] = (0.05, 0.1, 0.2)           # Asm. 5 dial: share s of items left out of G₀
    replications: int = 6            # independent logs per dial value (bias, SD and RMSE over them)
    m: tuple[float, ...] = (1.0, 10.0, 100.0, math.inf)         # clipping values m >= 1 (inf = none)
    confidence: float = 0.99         # level of the normal CIs that decide TPR and FPR
    zero_ideal: str = "zero"         # nDCG of sessions with no positive label: "zero" or "skip"
    prior_views: float = 10.0        # DR reward model: pseudo-views of the overall rate added to each item
    #: fatigue truth: independent simulated deployments (scenario.log_sessions sessions each) per policy
    truth_arms: int = 8
    round_size: int = 256            # fatigue: sessions simulated between two updates of the users' state

    def __post_init__(self):
        for name, rankers in (("logger", (self.logger,)), ("improving", self.improving), ("harmful", self.harmful)):
            if not isinstance(rankers, tuple) or not all(isinstance(r, (Trained, scenarios.Popularity, NoisyOracle))
                                                         for r in rankers):
                raise ConfigError(f"{name} must hold rankers such as Trained('rt') or NoisyOracle(2.0), "
                                  f"got {rankers!r}")
        if not self.improving:
            raise ConfigError("improving must name at least one target ranker, e.g. (Trained('rt'),)")
        names = [scenarios.ranker_label(r) for r in (self.logger,) + self.improving + self.harmful]
        if len(set(names)) != len(names):
            raise ConfigError(f"logger, improving and harmful must be distinct rankers, got {names}")
        if not self.assumptions or len(set(self.assumptions)) != len(self.assumptions) or \
                not set(self.assumptions) <= set(ASSUMPTIONS):
            raise ConfigError(f"assumptions must be distinct names from {ASSUMPTIONS}, got {self.assumptions!r}")
        if self.level not in scenarios.LEVELS:
            raise ConfigError(f"level must be one of {scenarios.LEVELS}, got {self.level!r}")
        for name in ("fatigue", "cascade", "depth_shift", "satiation", "misspecification", "unsupported"):
            _dials(name, getattr(self, name), {"unsupported": 0.9, "depth_shift": 3.0}.get(name, 1.0))
        if not 0 < self.exponential_gamma < 1:
            raise ConfigError(f"exponential_gamma must be in (0, 1), got {self.exponential_gamma!r}")
        for name in ("replications", "truth_arms", "round_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "replications" else 1):
                raise ConfigError(f"{name} must be an integer >= {2 if name == 'replications' else 1}, got {value!r}")
        try:
            validate.clipping_values("m", self.m)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.zero_ideal not in ("zero", "skip"):
            raise ConfigError(f"zero_ideal must be 'zero' or 'skip', got {self.zero_ideal!r}")
        if not (math.isfinite(self.prior_views) and self.prior_views > 0):
            raise ConfigError(f"prior_views must be finite and > 0, got {self.prior_views!r}")

    @property
    def targets(self) -> tuple:
        return self.improving + self.harmful

    def dials(self, assumption: str) -> tuple[float, ...]:
        """The dial values of a violation, 0 (the baseline) first."""
        return (0.0,) + tuple(float(v) for v in getattr(self, DIAL_FIELDS[assumption]))


PRESETS = {
    "smoke": AssumptionsConfig(
        scenario=dataclasses.replace(
            scenarios.PRESETS["smoke"], days=1, log_sessions=1024, ab_sessions=2, online_samples=4,
            level1=scenarios.LevelConfig(candidates=30, feed_length=15, epsilon=0.1)),
        improving=(Trained("rt"), NoisyOracle(1.0)), harmful=(NoisyOracle(8.0),),
        fatigue=(0.3,), cascade=(0.5,), depth_shift=(2.0,), satiation=(0.3,), misspecification=(1.0,),
        unsupported=(0.2,),
        replications=4, m=(1.0, 10.0, math.inf), truth_arms=2, round_size=128),
    "default": AssumptionsConfig(),
    "paper": AssumptionsConfig(scenario=dataclasses.replace(SCENARIO, log_sessions=32_768), replications=20),
}


# ---- the violations: pure functions of the platform and the dial ---------------------------------

def misspecified_view(view: feed.ViewModel, family: str, blend: float, feed_length: int, gamma: float = 0.9
                      ) -> feed.Tabulated:
    """The estimator's view model S_λ = (1 − λ) S + λ S_family over `feed_length` ranks, S the true
    (position-only) survival, S_family = 1/log₂(i+1) ("logarithmic") or gamma^{i−1} ("exponential").
    λ = `blend` in [0, 1]; λ = 0 gives S itself (bit for bit). Returns a `feed.Tabulated`."""
    if family not in ("logarithmic", "exponential"):
        raise ValueError(f"family must be 'logarithmic' or 'exponential', got {family!r}")
    if not 0 <= blend <= 1:
        raise ValueError(f"blend must be in [0, 1], got {blend!r}")
    wrong = feed.Logarithmic() if family == "logarithmic" else feed.Exponential(jnp.float32(gamma))
    truth = feed.view_probability(view, feed_length)
    other = feed.view_probability(wrong, feed_length)
    return feed.Tabulated(jnp.float32(1.0 - blend) * truth + jnp.float32(blend) * other)


def excluded_items(key: jax.Array, num_items: int, share: float) -> np.ndarray:
    """bool[A]: the items left out of the logger's generator at share s — the first round(s·A) of a
    fixed random order of the catalogue (from `key`), so a larger share removes a superset."""
    order = np.asarray(jax.random.permutation(key, num_items))
    out = np.zeros(num_items, bool)
    out[order[:int(round(share * num_items))]] = True
    return out


def logging_candidates(retrieval: np.ndarray, excluded: np.ndarray, num_candidates: int) -> feed.FixedCandidates:
    """G₀: the top `num_candidates` items of the retrieval scores f32[U, A] among the items not
    `excluded` (bool[A]) — with nothing excluded, exactly the platform's G (`scenarios.platforms`)."""
    scores = np.where(excluded[None, :], np.float32(retrieval.min() - 1.0), retrieval).astype(np.float32)
    return feed.top_k_candidates(feed.from_table(scores), num_candidates, retrieval.shape[0])


def shifted_view(view: feed.ViewModel, shift: float) -> feed.ViewModel:
    """The view model with its log session-length factor moved by `shift`, as the day drift moves it
    (`scenarios.day`): ScrollBudget a → 1 + (a − 1)·e^{−shift}, Exponential γ → 1 − (1 − γ)·e^{−shift}
    (shift > 0 scrolls deeper); shift 0 returns `view` itself."""
    if shift == 0:
        return view
    if isinstance(view, feed.ScrollBudget):
        return dataclasses.replace(view, exponent=jnp.float32(1.0 + (float(view.exponent) - 1.0) * math.exp(-shift)))
    if isinstance(view, feed.Exponential):
        return feed.Exponential(jnp.float32(1.0 - (1.0 - float(view.gamma)) * math.exp(-shift)))
    raise ValueError(f"view must be a ScrollBudget or Exponential view model (the levels' models), got {view!r}")


def user_types(num_users: int) -> np.ndarray:
    """i32[U]: the context violation's user type — 0 (scrolls deeper) for an even user index, 1
    (shallower) for an odd one; the world draws its users i.i.d., so the split is independent of them."""
    return (np.arange(num_users) % 2).astype(np.int32)


def context_types(scenario: feed.Scenario, shift: float) -> tuple:
    """The two user types of the context violation: ((w_t, scenario_t), ...) for t = 0 (view model
    `shifted_view`(+shift)) and 1 (−shift), w_t the type's share of the activity and scenario_t the
    scenario with its activity restricted to the type's users and renormalised."""
    activity = np.asarray(scenario.activity, np.float64)
    types = user_types(activity.shape[0])
    out = []
    for t, sign in enumerate((1.0, -1.0)):
        part = np.where(types == t, activity, 0.0)
        out.append((float(part.sum() / activity.sum()),
                    dataclasses.replace(scenario, view=shifted_view(scenario.view, sign * shift),
                                        activity=jnp.asarray(part / part.sum(), jnp.float32))))
    return tuple(out)


def pooled_view(types: tuple, feed_length: int) -> feed.Tabulated:
    """The population's rank-only view model P(V=1|i) = Σ_t w_t S_t(i) over `feed_length` ranks, for
    `types` as `context_types` returns them: the survival a learnt pbm (`feed.fit_view_model`)
    converges to on the pooled log."""
    return feed.Tabulated(sum(jnp.float32(w) * feed.view_probability(scenario.view, feed_length)
                              for w, scenario in types))


def type_sessions(num_sessions: int, weights) -> tuple[int, ...]:
    """Fixed sessions per type, proportional to the activity shares `weights` (w₀, w₁): n₀ =
    round(N·w₀), n₁ = N − n₀ (a proportionally stratified sample of the population)."""
    first = int(round(num_sessions * float(weights[0])))
    if not 1 <= first < num_sessions:
        raise ValueError(f"both user types need a session: {num_sessions} sessions with shares {tuple(weights)}")
    return first, num_sessions - first


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0), its retrieval scores f32[U, A] (the
    candidate generator's, for G₀ of the support violation) and the key of the item order that
    decides which items the logger loses."""
    platform: scenarios.Platform
    retrieval: np.ndarray
    exclusion_key: jax.Array


def setup(key, config: AssumptionsConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    platform = scenarios.platform(key, config.scenario, 0, (config.logger, *config.targets))
    retrieval = np.asarray(table_values(scenarios.retrieval_scores(platform)), np.float32)
    return Shared(platform, retrieval, shared_key(key, "assumptions:excluded"))


@dataclass(frozen=True, eq=False)
class Setting:
    """One (assumption, dial): the platform (its config carrying the level's switches), the day's
    scenario, R₀, the targets {label: policy}, the view model the estimators assume and, for the
    context violation, the user types ((w_t, scenario_t), ...) that replace `scenario` (`context_types`)."""
    platform: scenarios.Platform
    scenario: feed.Scenario
    logger: feed.Policy
    targets: dict
    view: feed.ViewModel
    types: tuple = ()


def setting(config: AssumptionsConfig, shared: Shared, assumption: str, dial: float) -> Setting:
    """The scenario, policies and estimator view model of `assumption` at `dial` (module docstring).
    Every assumption goes through the same construction, so dial 0 is the baseline."""
    if assumption not in (BASELINE,) + ASSUMPTIONS:
        raise ValueError(f"assumption must be one of {(BASELINE,) + ASSUMPTIONS}, got {assumption!r}")
    dial = float(dial)
    level = scenarios.level_config(config.scenario, config.level)
    changes = {"cascade": dial} if assumption == "cascade" else {"satiation": dial} if assumption == "satiation" \
        else {}
    platform = shared.platform
    if changes:       # LevelConfig switches: `scenarios._day_view` wraps a Cascade only for p > 0
        violated = dataclasses.replace(config.scenario, **{config.level: dataclasses.replace(level, **changes)})
        platform = dataclasses.replace(platform, config=violated)
    scenario = scenarios.day(platform, config.level, 0).scenario
    if assumption == "fatigue":
        scenario = dataclasses.replace(scenario, fatigue=dial)
    logger = scenarios.logging_policy(platform, config.level, scenarios.scores(platform, config.logger))
    if assumption == "support":
        excluded = excluded_items(shared.exclusion_key, platform.world.n_items, dial)
        logger = dataclasses.replace(logger, generator=logging_candidates(shared.retrieval, excluded,
                                                                           level.candidates))
    targets = {scenarios.ranker_label(r): scenarios.target_policy(platform, config.level, scenarios.scores(platform, r))
               for r in config.targets}
    view = scenario.view
    if assumption in ("view_log", "view_exp"):
        view = misspecified_view(scenario.view, "logarithmic" if assumption == "view_log" else "exponential", dial,
                                 level.feed_length, config.exponential_gamma)
    types = ()
    if assumption == "context" and dial > 0:          # two user types only for δ > 0: dial 0 is the baseline
        types = context_types(scenario, dial)
        view = pooled_view(types, level.feed_length)
    return Setting(platform, scenario, logger, targets, view, types)


# ---- estimators beyond DCG and same-discount nDCG --------------------------------------------------

def reward_model(log: feed.Log, signal: int, num_items: int, prior_views: float) -> np.ndarray:
    """The DR reward model q̂(a) = (c_a + n₀ r̄) / (v_a + n₀): item a's clicks c_a per view v_a in the
    log, shrunk towards the log's overall rate r̄ = Σc / Σv with n₀ = `prior_views` pseudo-views (under
    the examination hypothesis E[C | V = 1] = q). Items never viewed get r̄. Returns f64[A]."""
    viewed = np.asarray(log.viewed)
    items = np.asarray(log.items)[viewed]
    clicks = np.asarray(log.rewards[signal])[viewed].astype(np.float64)
    views = np.bincount(items, minlength=num_items).astype(np.float64)
    hits = np.bincount(items, weights=clicks, minlength=num_items)
    rate = hits.sum() / max(views.sum(), 1.0)
    return (hits + prior_views * rate) / (views + prior_views)


def _summary(delta: np.ndarray, confidence: float) -> dict:
    """Mean, se, low, high of paired per-trajectory differences f64[M, N] (NaN skipped)."""
    mean, low, high, se = stats.mean_ci(delta, confidence, nan_policy="omit")
    return {"mean": np.atleast_1d(mean), "se": np.atleast_1d(se), "low": np.atleast_1d(low),
            "high": np.atleast_1d(high)}


def _ratio_difference(value_t, value_0, influence_t, influence_0, confidence: float) -> dict:
    """The difference of two ratio estimates on one log with its paired delta-method SE: the SE of
    the mean of the influence values φ_t − φ_0 f64[M, N]."""
    mean = np.asarray(value_t, np.float64) - np.asarray(value_0, np.float64)
    se = np.std(influence_t - influence_0, axis=-1, ddof=1) / math.sqrt(influence_t.shape[-1])
    q = float(scipy_stats.norm.ppf((1 + confidence) / 2))
    return {"mean": mean, "se": se, "low": mean - q * se, "high": mean + q * se}


def estimator_differences(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
                          zero_ideal: str = "zero", prior_views: float = 10.0) -> dict:
    """Paired differences f̄(R_t) − f̄(R₀) on R₀'s log of the estimators `sensitivity.offline_differences`
    does not score, for every m at once:

    * ``ndcg_all``: mean_τ nDCG_τ with the all-viewed ideal (`ope.trajectory_ndcg`, KDD'24 Table 1);
    * ``pndcg``: mean DCG_τ / mean iDCG_τ, same-discount ideal (the value of `ope.post_normalised_dcg`);
    * ``sndcg``: T · mean DCG_τ / mean W_τ, W_τ the IPS estimate of the target's views and T the
      logged mean views (the value of `ope.self_normalised_dcg`);
    * ``dr``: doubly robust DCG (`ope.trajectory_dr`) with q̂ = `reward_model` of the same log (its
      SE treats q̂ as fixed, so it misses q̂'s fitting noise, most at small m).

    The two ratio estimators' differences get the paired delta-method SE of the influence values
    φ = (a_τ − r b_τ) / b̄ of numerator a and denominator b (`_ratio_difference`). Arguments as
    `sensitivity.offline_differences`. Returns {signal: {name: {metric: {"mean", "se", "low",
    "high": f64[M]}}, "R0": {metric: f64[M]}}}, R₀'s own estimates under "R0".
    """
    m = np.asarray(m, np.float64)
    exposures, tables, position = sensitivity.logged_exposures_by_policy(log, {"R0": logger, **targets}, view)
    logging_exposure = exposures["R0"]
    K = logger.feed_length
    discount = feed.view_probability(view, K)
    viewed = log.viewed
    rows = np.asarray(position)
    items = np.maximum(np.asarray(log.items), 0)
    out = {}
    for s, signal in enumerate(log.signals):
        rewards = log.rewards[s]
        q_hat = reward_model(log, s, tables["R0"].shape[1], prior_views)
        predicted = jnp.asarray(q_hat[items], jnp.float32)
        idcg_all = ope.ideal_dcg(rewards, logging_exposure, viewed, discount, m, ideal="all viewed")
        idcg = np.asarray(ope.ideal_dcg(rewards, logging_exposure, viewed, discount, m), np.float64)
        ones = jnp.ones(np.shape(viewed), jnp.float32)
        target_views = float(np.mean(np.sum(np.asarray(viewed), axis=1)))
        per = {}
        for name, exposure in exposures.items():
            dcg = np.asarray(ope.trajectory_dcg(rewards, logging_exposure, exposure, viewed, m), np.float64)
            views = np.asarray(ope.trajectory_dcg(ones, logging_exposure, exposure, viewed, m), np.float64)
            # the values of ope.post_normalised_dcg and ope.self_normalised_dcg (tested), from the arrays at hand
            pn = dcg.mean(axis=-1) / idcg.mean(axis=-1)
            sn = target_views * dcg.mean(axis=-1) / views.mean(axis=-1)
            direct = np.asarray(ope.direct_method(np.broadcast_to(q_hat, tables[name].shape), tables[name]))[rows]
            per[name] = {
                "ndcg_all": np.asarray(ope.trajectory_ndcg(rewards, logging_exposure, exposure, viewed, discount, m,
                                                           ideal="all viewed", zero_ideal=zero_ideal, idcg=idcg_all),
                                       np.float64),
                "pndcg": (pn, (dcg - pn[:, None] * idcg) / idcg.mean(axis=-1, keepdims=True)),
                "sndcg": (sn, target_views * (dcg - (sn / target_views)[:, None] * views)
                          / views.mean(axis=-1, keepdims=True)),
                "dr": np.asarray(ope.trajectory_dr(rewards, logging_exposure, exposure, viewed, predicted, direct, m),
                                 np.float64),
            }
        base = per.pop("R0")
        by_target = {"R0": {metric: (values[0] if isinstance(values, tuple) else np.nanmean(values, axis=-1))
                            for metric, values in base.items()}}
        for name, values in per.items():
            by_target[name] = {}
            for metric, value in values.items():
                if isinstance(value, tuple):
                    by_target[name][metric] = _ratio_difference(value[0], base[metric][0], value[1], base[metric][1],
                                                                confidence)
                else:
                    by_target[name][metric] = _summary(value - base[metric], confidence)
        out[signal] = by_target
    return out


def all_differences(log: feed.Log, setting_: Setting, m, config: AssumptionsConfig) -> dict:
    """`sensitivity.offline_differences` (dcg, ndcg) and `estimator_differences` (the rest) of every
    target on one log, merged: {signal: {name: {metric: {...}}}, "R0": ...}, plus "lost"."""
    first = sensitivity.offline_differences(log, setting_.logger, setting_.targets, setting_.view, m,
                                            confidence=config.confidence, zero_ideal=config.zero_ideal)
    second = estimator_differences(log, setting_.logger, setting_.targets, setting_.view, m,
                                   confidence=config.confidence, zero_ideal=config.zero_ideal,
                                   prior_views=config.prior_views)
    out = {"lost": first["lost"], "max_weight": first["max_weight"]}
    for signal in log.signals:
        out[signal] = {name: {**first[signal][name], **second[signal][name]} for name in second[signal]}
    return out


# ---- the truth -----------------------------------------------------------------------------------

def truth(key, config: AssumptionsConfig, setting_: Setting) -> dict:
    """The online values {"R0" and each target: (mean f64[S], se f64[S])}: exact (`scenarios.online`,
    i.e. `feed.online_value`; Monte Carlo over scenario.online_samples rankings per context only for
    R₀'s uniform part under a cascade or satiation, policy i drawing from fold_in(key, i)) or, with
    fatigue, the mean of `truth_arms` simulated deployments of log_sessions sessions per policy
    (`feed.ab_test`, each arm from a fresh state). With user types, Σ_t w_t V_t of each type's values
    (type t from fold_in(key, t); standard errors combined as sqrt(Σ_t w_t² se_t²))."""
    if setting_.types:
        parts = [truth(jax.random.fold_in(key, t), config, dataclasses.replace(setting_, scenario=sc, types=()))
                 for t, (_, sc) in enumerate(setting_.types)]
        weights = [w for w, _ in setting_.types]
        return {name: (sum(w * part[name][0] for w, part in zip(weights, parts)),
                       np.sqrt(sum((w * part[name][1]) ** 2 for w, part in zip(weights, parts))))
                for name in parts[0]}
    policies = {"R0": setting_.logger, **setting_.targets}
    if setting_.scenario.fatigue > 0:
        arms = config.truth_arms
        ab = feed.ab_test(key, setting_.scenario, [p for p in policies.values() for _ in range(arms)],
                          config.scenario.log_sessions, round_size=config.round_size)
        means = ab.mean.reshape(len(policies), arms, -1)
        errors = ab.standard_error.reshape(len(policies), arms, -1)
        return {name: (means[i].mean(axis=0), np.sqrt((errors[i] ** 2).sum(axis=0)) / arms)
                for i, name in enumerate(policies)}
    out = {}
    for i, (name, policy) in enumerate(policies.items()):
        value = scenarios.online(jax.random.fold_in(key, i), setting_.platform, setting_.scenario, policy)
        out[name] = (np.asarray(value.mean, np.float64), np.asarray(value.standard_error, np.float64))
    return out


# ---- cells ---------------------------------------------------------------------------------------

def cells(config: AssumptionsConfig) -> list[dict]:
    """The baseline (assumption "none", dial 0) and every violation's non-zero dials."""
    out = [{"assumption": BASELINE, "dial": 0.0}]
    for assumption in config.assumptions:
        out += [{"assumption": assumption, "dial": dial} for dial in config.dials(assumption)[1:]]
    return out


def log_key(root, replication: int):
    """The key of replication r's log: the same in every cell (common random numbers)."""
    return cell_key(root, {"part": "log", "replication": int(replication)})


def simulate_log(root, config: AssumptionsConfig, setting_: Setting, replication: int) -> feed.Log:
    """Replication r's log of R₀ in the setting's scenario (`feed.simulate`, exact ε₀ recorded). With
    user types: `type_sessions` sessions of each type in its own scenario (type t from
    fold_in(log key, t), its own ε₀ recorded), concatenated in type order (`feed.concatenate`)."""
    if setting_.types:
        counts = type_sessions(config.scenario.log_sessions, [w for w, _ in setting_.types])
        return feed.concatenate(
            feed.simulate(jax.random.fold_in(log_key(root, replication), t), scenario, setting_.logger, n,
                          logging_exposure=scenarios.logging_exposure(scenario, setting_.logger),
                          round_size=config.round_size)
            for t, ((_, scenario), n) in enumerate(zip(setting_.types, counts)))
    exposure = scenarios.logging_exposure(setting_.scenario, setting_.logger)
    return feed.simulate(log_key(root, replication), setting_.scenario, setting_.logger,
                         config.scenario.log_sessions, logging_exposure=exposure, round_size=config.round_size)


def compute(key, config: AssumptionsConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one (assumption, dial); `key` is the run's root key. The truth draws from
    cell_key(key, {"part": "truth", **cell}), replication r's log from `log_key`."""
    assumption, dial = cell["assumption"], float(cell["dial"])
    setting_ = setting(config, shared, assumption, dial)
    values = truth(cell_key(key, {"part": "truth", **cell}), config, setting_)
    signals = setting_.scenario.signals
    base, base_se = values["R0"]
    true = {name: (mean - base, np.hypot(se, base_se)) for name, (mean, se) in values.items() if name != "R0"}
    common = {"assumption": assumption, "dial": dial}
    out = [{**common, "replication": -1, "signal": signal, "target": name, "metric": "", "m": math.nan,
            "est_diff": math.nan, "est_se": math.nan, "est_base": math.nan, "lost": math.nan, "true_diff": float(d[s]),
            "true_se": float(e[s]), "true_base": float(base[s])}
           for s, signal in enumerate(signals) for name, (d, e) in true.items()]
    for r in range(config.replications):
        log = simulate_log(key, config, setting_, r)
        est = all_differences(log, setting_, config.m, config)
        for s, signal in enumerate(signals):
            for name in setting_.targets:
                for metric in METRICS:
                    summary, r0 = est[signal][name][metric], est[signal]["R0"][metric]
                    out += [{**common, "replication": r, "signal": signal, "target": name, "metric": metric,
                             "m": float(mi), "est_diff": float(summary["mean"][i]),
                             "est_se": float(summary["se"][i]), "est_base": float(r0[i]),
                             "lost": float(est["lost"][name]),
                             "true_diff": float(true[name][0][s]), "true_se": float(true[name][1][s]),
                             "true_base": float(base[s])}
                            for i, mi in enumerate(config.m)]
    return out


# ---- report --------------------------------------------------------------------------------------

def _m_text(m: float) -> str:
    return "∞" if math.isinf(m) else f"{m:g}"


def estimator_label(metric: str, m: float) -> str:
    """An estimator's name in tables: e.g. "DCG m=∞", "DR-DCG m=10"."""
    return f"{METRIC_NAMES[metric]} m={_m_text(m)}"


def _offline(config: AssumptionsConfig, records: pd.DataFrame) -> pd.DataFrame:
    """The offline rows with the baseline copied in as dial 0 of every assumption, and lifts."""
    rows = records[records.replication >= 0]
    base = rows[rows.assumption == BASELINE]
    frame = pd.concat([base.assign(assumption=a) for a in config.assumptions] + [rows[rows.assumption != BASELINE]],
                      ignore_index=True)
    return frame.assign(est_lift=frame.est_diff / frame.est_base, true_lift=frame.true_diff / frame.true_base,
                        true_lift_se=frame.true_se / frame.true_base)


def _per_target(config: AssumptionsConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """Per (assumption, dial, signal, target, metric, m), over the replications: bias and mean squared
    error of the difference and of the relative lift Δ̄/f̄(R₀) against (V_t − V₀)/V₀, the SD of the
    lift, the standard error of the lift's bias — sqrt(Σ_r (se_r/|f̄_r(R₀)|)²)/R from each log's own
    standard error (the replications' SD is unreliable with few logs and heavy-tailed weights), with
    the truth's Monte Carlo error added — the share of logs agreeing in sign with the truth and the
    share whose CI at `confidence` lies above 0."""
    q = float(scipy_stats.norm.ppf((1 + config.confidence) / 2))
    frame = frame.assign(err_diff=frame.est_diff - frame.true_diff, err_lift=frame.est_lift - frame.true_lift,
                         sq_diff=(frame.est_diff - frame.true_diff) ** 2,
                         sq_lift=(frame.est_lift - frame.true_lift) ** 2,
                         lift_var=(frame.est_se / frame.est_base.abs()) ** 2,
                         agree=np.sign(frame.est_diff) == np.sign(frame.true_diff),
                         significant=frame.est_diff - q * frame.est_se > 0)
    keys = ["assumption", "dial", "signal", "target", "metric", "m"]
    out = frame.groupby(keys, sort=False).agg(
        n=("err_lift", "size"), true_diff=("true_diff", "first"), true_lift=("true_lift", "first"),
        true_lift_se=("true_lift_se", "first"), bias_diff=("err_diff", "mean"), bias_lift=("err_lift", "mean"),
        mse_diff=("sq_diff", "mean"), mse_lift=("sq_lift", "mean"), sd_lift=("est_lift", "std"),
        lift_var=("lift_var", "sum"), agree=("agree", "mean"), significant=("significant", "mean"),
        lost=("lost", "mean")).reset_index()
    out["bias_lift_se"] = np.sqrt(out.lift_var / out.n ** 2 + out.true_lift_se ** 2)
    return out.drop(columns="lift_var")


def _errors(config: AssumptionsConfig, targets: pd.DataFrame) -> pd.DataFrame:
    """Per (assumption, dial, signal, metric, m), over the targets: RMSE of the difference (online-scale
    estimators only) and of the lift, mean |bias| and mean bias of the lift, the bias test (the largest
    |z| = |bias|/se over the k targets, Bonferroni-adjusted two-sided p = min(1, k·2Φ(−max|z|)), valid
    although the targets share their logs), sign agreement, TPR and FPR at `confidence`, lost exposure."""
    rows = []
    for key, g in targets.groupby(["assumption", "dial", "signal", "metric", "m"], sort=False):
        z = float(np.max(np.abs(g.bias_lift / g.bias_lift_se)))
        positive, negative = g[g.true_diff > 0], g[g.true_diff < 0]
        nonzero = g[g.true_diff != 0]
        rows.append({
            **dict(zip(["assumption", "dial", "signal", "metric", "m"], key)),
            "estimator": estimator_label(key[3], key[4]), "targets": len(g), "replications": int(g.n.max()),
            "mean_true_lift": g.true_lift.mean(),
            "rmse_diff": math.sqrt(g.mse_diff.mean()) if key[3] in ONLINE_SCALE else math.nan,
            "rmse_lift": math.sqrt(g.mse_lift.mean()), "mean_abs_bias_lift": g.bias_lift.abs().mean(),
            "mean_signed_bias_lift": g.bias_lift.mean(), "sd_lift": math.sqrt(np.mean(g.sd_lift ** 2)),
            "max_abs_z": z, "bias_p": min(1.0, len(g) * 2 * float(scipy_stats.norm.sf(z))),
            "sign_agreement": float(np.average(nonzero.agree, weights=nonzero.n)) if len(nonzero) else math.nan,
            "TPR": float(np.average(positive.significant, weights=positive.n)) if len(positive) else math.nan,
            "FPR": float(np.average(negative.significant, weights=negative.n)) if len(negative) else math.nan,
            "n_improving": len(positive), "n_harmful": len(negative), "lost": g.lost.mean()})
    return pd.DataFrame(rows)


def _first(dials: pd.Series, flags: pd.Series) -> str:
    """The first dial (ascending) where `flags` holds: "0" when it already holds without a violation,
    "never" when it holds at no dial of the range."""
    hit = dials[flags.to_numpy()]
    return "never" if hit.empty else f"{hit.min():g}"


def _summary_table(config: AssumptionsConfig, errors: pd.DataFrame) -> pd.DataFrame:
    """Per (assumption, signal, estimator): the first dial where sign agreement falls below
    `SIGN_LEVEL`, the first dial where the bias test rejects at `BIAS_ALPHA`, and the values at 0
    and at the strongest dial."""
    rows = []
    for (assumption, signal, metric, m), g in errors.groupby(["assumption", "signal", "metric", "m"], sort=False):
        g = g.sort_values("dial")
        first, last = g.iloc[0], g.iloc[-1]
        rows.append({"assumption": assumption, "signal": signal, "estimator": estimator_label(metric, m),
                     "metric": metric, "m": m,
                     "sign_below_95_at": _first(g.dial, g.sign_agreement < SIGN_LEVEL),
                     "bias_detected_at": _first(g.dial, g.bias_p < BIAS_ALPHA),
                     "sign_agreement_0": first.sign_agreement, "sign_agreement_max": last.sign_agreement,
                     "rmse_lift_0": first.rmse_lift, "rmse_lift_max": last.rmse_lift,
                     "TPR_0": first.TPR, "TPR_max": last.TPR, "FPR_max": last.FPR, "max_dial": last.dial})
    return pd.DataFrame(rows)


def _pivot(summary: pd.DataFrame, signal: str, column: str) -> pd.DataFrame:
    """Rows: estimators; columns: assumptions; entries: `column` (a dial or "never")."""
    part = summary[summary.signal == signal]
    table = part.pivot_table(index=["metric", "m"], columns="assumption", values=column, aggfunc="first", sort=False)
    table = table.reindex(columns=[a for a in ASSUMPTIONS if a in table.columns])
    table.index = [estimator_label(metric, m) for metric, m in table.index]
    table.index.name = "estimator"
    return table.reset_index()


def _figure(config: AssumptionsConfig, errors: pd.DataFrame, assumption: str):
    """Mean |bias| and RMSE of the estimated lift against the dial, a panel per m, a line per
    estimator, dashed for the explicit signal (pnDCG left out: its lift is DCG's exactly)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    part = errors[(errors.assumption == assumption) & (errors.metric != "pndcg")]
    shown = [metric for metric in METRICS if metric != "pndcg"]
    fig, axes = plt.subplots(2, len(config.m), figsize=(3.3 * len(config.m), 5.6), sharex=True, squeeze=False)
    for col, m in enumerate(config.m):
        for row, (y, label) in enumerate((("mean_abs_bias_lift", "mean |bias| of the lift"),
                                          ("rmse_lift", "RMSE of the lift"))):
            ax = axes[row][col]
            sns.lineplot(data=part[part.m == m], x="dial", y=y, hue="metric", style="signal", markers=True,
                         hue_order=shown, style_order=list(scenarios.SIGNALS)[::-1], ax=ax)
            ax.set_yscale("log")
            ax.set_title(f"m = {_m_text(m)}" if row == 0 else "")
            ax.set_ylabel(label if col == 0 else "")
            ax.set_xlabel(DIAL_FIELDS[assumption] if row == 1 else "")
            if ax.get_legend() is not None:
                if row == 0 and col == len(config.m) - 1:
                    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, title_fontsize=7)
                else:
                    ax.get_legend().remove()
    fig.suptitle(f"{LABELS[assumption]} (pnDCG's lift equals DCG's)", fontsize=10)
    fig.tight_layout()
    return fig


def _baseline_text(config: AssumptionsConfig, errors: pd.DataFrame) -> str:
    """The no-violation check: unbiased estimators (DCG and DR at m = ∞) show no detectable bias."""
    if math.inf not in config.m:
        return "The grid has no m = ∞, so the unbiased estimators are not checked at dial 0."
    zero = errors[(errors.assumption == config.assumptions[0]) & (errors.dial == 0) & (errors.m == math.inf)]
    parts = []
    for metric in ("dcg", "dr", "pndcg", "sndcg", "ndcg", "ndcg_all"):
        for signal in scenarios.SIGNALS:
            row = zero[(zero.metric == metric) & (zero.signal == signal)]
            if len(row):
                row = row.iloc[0]
                parts.append(f"{METRIC_NAMES[metric]} ({signal}): bias-test p = {row.bias_p:.2g}, sign agreement "
                             f"{row.sign_agreement:.0%}, RMSE of the lift {row.rmse_lift:.3f}")
    return ("**No violation (dial 0).** At m = ∞: " + "; ".join(parts) + ". DCG and DR are unbiased here "
            "(Jeunen et al. Eq. 8–9; DR for any q̂), so their bias test should not reject; pnDCG is DCG "
            "over a constant (its lift equals DCG's exactly), SN-DCG is consistent but biased in finite "
            "samples, and both nDCGs estimate a different quantity (their lift is not the online lift).")


#: how each violation moves the estimators (the direction is read from the data in `_assumption_text`)
MECHANISMS = {
    "fatigue": "The log records rewards depressed by the logger's own history, while a deterministic target "
               "shows a user the same feed in every session, so deployed it tires its users of exactly the "
               "items it promotes; no estimator built on one log of R₀ can see that.",
    "cascade": "A watch ends the session, so the ranks below a watched item are viewed less than the "
               "position model says; the estimators keep the position model, so they credit a target for "
               "views that stop earlier online, more so for targets that put watched items on top.",
    "context": "Examination depends on the user: one type scrolls deeper than the pooled rank curve "
               "S̄ = Σ_t w_t S_t says, the other less, and the estimators weight every session with S̄. Per "
               "type the IPS weight is wrong (an item a target moves from the logger's rank r₀ to rank r is "
               "credited S̄(r)·S_t(r₀)/S̄(r₀) instead of S_t(r)), but every exposure is linear in the view "
               "curve, so the w-weighted sum of a user's two possible errors is exactly 0: with types "
               "independent of the users' tastes and rankings (index parity here), the errors cancel in "
               "expectation over the users and only the imbalance of one split remains. The rank-only "
               "estimators can be biased only through a correlation between a user's depth and what the "
               "policies show or the user likes, which this dial leaves out.",
    "satiation": "A reward depends on the items above it; the log measures qualities in R₀'s context of "
                 "neighbours, and a target that stacks good items satiates its users more than that.",
    "view_log": "The estimator's exposures ε₀ and ε use a discount that is not the world's, so the weights "
                "ε/ε₀ are wrong wherever the two rankings put an item at different ranks.",
    "view_exp": "As for the logarithmic blend, with an exponential (rank-biased) discount.",
    "support": "The targets' exposure on items R₀ never shows has no logged counterpart: IPS estimators "
               "(DCG, its normalisations, SN-DCG) silently drop it; DR still credits it through q̂, which "
               "knows those items only by the log's overall rate.",
}


def _markdown(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (strings as they are)."""
    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _summary_markdown(config: AssumptionsConfig, summary: pd.DataFrame) -> str:
    """The summary table in the README: per estimator and violation, "watch / like" first dial with
    sign agreement below `SIGN_LEVEL`."""
    tables = {signal: _pivot(summary, signal, "sign_below_95_at").set_index("estimator")
              for signal in scenarios.SIGNALS}
    watch, like = tables["watch"], tables["like"]
    combined = watch.copy()
    for column in combined.columns:
        combined[column] = watch[column].astype(str) + " / " + like[column].astype(str)
    combined.columns = [f"{c} ({DIAL_FIELDS[c]} ≤ {config.dials(c)[-1]:g})" for c in combined.columns]
    return _markdown(combined.reset_index())


def _headline(config: AssumptionsConfig, summary: pd.DataFrame) -> str:
    """Which estimators keep their sign agreement best: per estimator, the number of (violation,
    signal) pairs in which it never falls below `SIGN_LEVEL`, and in how many it already fails at 0."""
    never = summary.assign(never=summary.sign_below_95_at == "never", at_zero=summary.sign_below_95_at == "0")
    counts = never.groupby("estimator", sort=False)[["never", "at_zero"]].sum()
    total = len(config.assumptions) * len(scenarios.SIGNALS)
    best = counts.never.max()
    leaders = [name for name, value in counts.never.items() if value == best]
    failing = [name for name, value in counts.at_zero.items() if value == total]
    return (f"**Headline.** Across the {total} (violation, signal) pairs, the estimators that keep sign "
            f"agreement ≥ {SIGN_LEVEL:.0%} over the whole dial range most often are {', '.join(leaders)} "
            f"({best} of {total}; "
            + ", ".join(f"{name} {int(counts.never[name])}" for name in counts.index
                        if name.endswith("m=∞") and name not in leaders)
            + f"). Already below {SIGN_LEVEL:.0%} without any violation, in every pair: "
            + (", ".join(failing) if failing else "none") + " — there the logger's regime (ε-greedy "
            "exploration, clipping, nDCG's per-session normalisation) decides the verdict before any "
            "assumption is violated, as in the `sensitivity` study.")


def _direction(errors: pd.DataFrame, assumption: str, dial: float, signal: str, metric: str, m: float) -> str:
    row = errors[(errors.assumption == assumption) & (errors.dial == dial) & (errors.signal == signal)
                 & (errors.metric == metric) & (errors.m == m)]
    return "" if row.empty else f"{row.iloc[0].mean_signed_bias_lift:+.3f}"


def _assumption_text(config: AssumptionsConfig, assumption: str, errors: pd.DataFrame,
                     summary: pd.DataFrame) -> str:
    """One paragraph per violation: its mechanism, where the main estimators lose the sign and
    become biased, and the errors at the strongest dial."""
    part = summary[summary.assumption == assumption]
    strongest = config.dials(assumption)[-1]
    m_top = max(config.m)
    lines = []
    for signal in scenarios.SIGNALS:
        chosen = part[part.signal == signal].set_index(["metric", "m"])
        bits = []
        for metric in ("dcg", "dr", "sndcg", "ndcg"):
            if (metric, m_top) in chosen.index:
                row = chosen.loc[(metric, m_top)]
                bits.append(f"{estimator_label(metric, m_top)} sign < 95 % at {row.sign_below_95_at}, bias "
                            f"detected at {row.bias_detected_at}, mean bias of the lift at {strongest:g} "
                            f"{_direction(errors, assumption, strongest, signal, metric, m_top)}, sign agreement "
                            f"{row.sign_agreement_0:.0%} → {row.sign_agreement_max:.0%}"
                            + (f", TPR {row.TPR_0:.2f} → {row.TPR_max:.2f}, FPR at {strongest:g} {row.FPR_max:.2f}"
                               if metric == "dcg" else ""))
        robust = part[(part.signal == signal) & (part.sign_below_95_at == "never")]
        lines.append(f"  - {signal}: " + "; ".join(bits) + ". Sign agreement ≥ 95 % over the whole range: "
                     + (", ".join(robust.estimator) if len(robust) else "no estimator") + ".")
    extra = ""
    if assumption == "support":
        err = errors[(errors.assumption == assumption) & (errors.dial == strongest)]
        extra = (f" At s = {strongest:g} the targets put {err.lost.mean():.3f} expected views per session on "
                 f"items the logger never shows.")
    if assumption == "context":
        extra = (f" At δ = {strongest:g} the deep type's scroll-budget excess a − 1 is e^(−δ) = "
                 f"{math.exp(-strongest):.2f} times the baseline's, the shallow type's e^δ = "
                 f"{math.exp(strongest):.2f} times (an exponential model's 1 − γ likewise).")
    return (f"**{LABELS[assumption]}** (dial 0 … {strongest:g}). {MECHANISMS[assumption]}{extra}\n"
            + "\n".join(lines))


def report(config: AssumptionsConfig, records: pd.DataFrame) -> Report:
    import seaborn as sns
    sns.set_theme(style="whitegrid", context="paper")
    frame = _offline(config, records)
    targets = _per_target(config, frame)
    errors = _errors(config, targets)
    summary = _summary_table(config, errors)
    truth_rows = records[records.replication < 0]
    truth_table = pd.concat([truth_rows[truth_rows.assumption == BASELINE].assign(assumption=a)
                             for a in config.assumptions]
                            + [truth_rows[truth_rows.assumption != BASELINE]], ignore_index=True)
    truth_table = truth_table.assign(true_lift=truth_table.true_diff / truth_table.true_base)[
        ["assumption", "dial", "signal", "target", "true_base", "true_diff", "true_se", "true_lift"]]
    tables = {"table_summary": summary, "table_errors": errors, "table_truth": truth_table}
    for signal in scenarios.SIGNALS:
        tables[f"table_sign_{signal}"] = _pivot(summary, signal, "sign_below_95_at")
        tables[f"table_bias_{signal}"] = _pivot(summary, signal, "bias_detected_at")
    figures = {f"fig_{assumption}": _figure(config, errors, assumption) for assumption in config.assumptions}
    sc = config.scenario
    level = scenarios.level_config(sc, config.level)
    text = [
        f"Each assumption of Jeunen et al. (KDD'24 §4) is violated alone on a dial; everything else is the "
        f"no-violation baseline: {sc.world.n_users} users × {sc.world.n_items} items, {config.level} "
        f"({level.view} view model, N = {level.candidates} candidates, K = {level.feed_length} shown), R₀ = "
        f"ε-greedy({scenarios.ranker_label(config.logger)}, ε = {level.epsilon:g}), targets "
        f"{', '.join(map(scenarios.ranker_label, config.targets))}, {config.replications} independent logs of "
        f"{sc.log_sessions} sessions per dial value, both signals (like: explicit, rare; watch: implicit, "
        f"frequent). Errors are against the exact online difference of the violated world "
        f"(fatigue: the mean of {config.truth_arms} simulated deployments per policy). The lift Δ̄/f̄(R₀) "
        f"against (V_t − V₀)/V₀ is the one scale every estimator shares; `table_errors` also gives the RMSE "
        f"of the difference itself for the online-scale estimators (DCG, SN-DCG, DR).",
        f"**Reading the summary tables.** `table_sign_SIGNAL`: per estimator and violation, the first dial at "
        f"which the share of (target, log) pairs whose estimated difference has the sign of the true "
        f"difference falls below {SIGN_LEVEL:.0%} (\"0\": already without a violation, \"never\": not within "
        f"the dial range). `table_bias_SIGNAL`: the first dial at which the lift's bias is detectable (some "
        f"target's |bias|/SE beyond the Bonferroni-adjusted two-sided level {BIAS_ALPHA:g}; SE from each "
        f"log's own standard error); a bias below the logs' noise is \"never\". Sign agreement mixes "
        f"bias and noise: a rare signal loses it from noise alone.",
        "**Summary** — first dial at which sign agreement with the true difference falls below "
        f"{SIGN_LEVEL:.0%}, watch / like:\n\n" + _summary_markdown(config, summary),
        _headline(config, summary),
        _baseline_text(config, errors),
        *[_assumption_text(config, assumption, errors, summary) for assumption in config.assumptions],
        "**Relation to the paper.** The paper lists the assumptions (§4) and argues (§6–7) that DCG stays "
        "useful when they are mildly violated; it does not vary one at a time. Here Asm. 2 is split into "
        "the cascade (examination depends on the clicks above), context-dependent examination (two user "
        "types with their own scroll depth, scored with the population's rank-only curve) and, with the "
        "examination hypothesis (Asm. 4), a view model P(V|R) that the estimator gets wrong — the world "
        "itself keeps C = V·Q there.",
        "**Caveats.** One platform, one day, one logger; the dial scales are the simulator's, not "
        "calibrated to a real platform. Sign agreement and TPR pool the targets and logs of a dial (the "
        "truth decides which targets are improving at each dial, so the counts can change with the dial). "
        "Under fatigue the truth is a simulated deployment of the same length as the log, so it carries "
        "a Monte Carlo error (added to the bias SE). The context violation's two types split the users by "
        "index parity with a fixed number of sessions per type (a proportionally stratified log: the type "
        "shares differ from the activity shares by at most 1/(2N), and the i.i.d. standard errors are "
        "slightly conservative); its estimators get the exact population-average curve, where a learnt "
        "pbm would add its fitting noise (a wrong average curve is the view_log / view_exp violation). "
        "The DR reward model is a per-item rate fitted on the same log, not a tuned model, and DR's "
        "standard error treats it as fixed: its fitting noise is "
        "missing from the SE (on a small hand-built feed the spread of DR's difference over independent "
        "logs is up to 1.5× the reported SE at m = 1, where the direct-method term dominates), so DR's CIs, "
        "TPR/FPR and bias tests at small m are somewhat anti-conservative.",
    ]
    return Report(tables=tables, figures=figures, summary="\n\n".join(text))


STUDY = Study(
    name="assumptions",
    description="Jeunen et al. KDD'24 Asm. 1–5 violated one at a time: bias, SD, RMSE, sign agreement, TPR "
                "and FPR of clipped DCG, nDCG (both ideals), pnDCG, SN-DCG and DR against the exact online "
                "difference",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, expected_seconds={"smoke": 150, "default": 500, "paper": 2500})

"""Study ``assumptions``: each of Jeunen, Potapov & Ustimenko's (KDD'24 §4) Assumptions 1–5 violated
alone, on a dial from 0 (the assumption holds) to strong, and what the violation does to the offline
estimators of an online difference.

The setting is one feed level of `simrec_studies.common.scenarios` (default: level 1, the scroll-budget view
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

Estimators (per signal, target and clipping m in `comparison.m`): every one of the `simrec.ope`
registry — clipped-IPS DCG, nDCG with the same-discount and with the all-viewed ideal, pnDCG,
self-normalised DCG and doubly robust DCG (`compute.estimates`; the DR reward model q̂ is each item's
smoothed click-per-view rate in the same log, `ope.click_rate_model`). Each gives the paired
difference Δ̄ = f̄(R_t) − f̄(R₀) with a normal CI at `comparison.confidence` (ratio estimators by the
paired delta method) and R₀'s own value f̄(R₀).

Keys: the log of replication r draws from cell_key(root, {"part": "log", "replication": r}) in every
cell, so every dial of every assumption sees the same random stream (common random numbers), and at
dial 0 — where the scenario, the logger and the estimator's view model are built by the same code
with the violation parameter 0 (the context violation splits the users only for δ > 0) — the log
and every estimate are bit-identical to the baseline's.
The baseline is one cell (assumption "none"); the report uses it as dial 0 of every assumption.

The package: this module holds the configuration (`AssumptionsConfig`, `PRESETS`), the record
schema (`COLUMNS`) and `STUDY`; `compute` the violations, logs, estimates and truth (cells, setup,
compute); `report` the tables, figures, claims and prose.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec.world import WorldConfig
from simrec_studies.common import scenarios
from simrec_studies.assumptions.compute import ASSUMPTIONS, DIAL_FIELDS, cells, compute, setup
from simrec_studies.assumptions.report import report
from simrec_studies.common.comparison import Comparison
from simrec_studies.common.configs import checked
from simrec_studies.common.scenarios import NoisyOracle, Trained

__all__ = ["AssumptionsConfig", "COLUMNS", "PRESETS", "SCENARIO", "COMPARISON", "STUDY"]

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
#: R₀ = ε-greedy(r0); improving targets rt and a noisy oracle, harmful two very noisy oracles
COMPARISON = Comparison(logger=Trained("r0"), improving=(Trained("rt"), NoisyOracle(1.0)),
                        harmful=(NoisyOracle(8.0), NoisyOracle(16.0)), m=(1.0, 10.0, 100.0, math.inf),
                        confidence=0.99, zero_ideal="zero")


def _dials(name: str, values, high: float) -> None:
    """A violation's dial: increasing distinct values in (0, high] (0, the baseline, is implied)."""
    if not isinstance(values, tuple):
        raise ConfigError(f"{name} must be a tuple of dial values in (0, {high:g}], got {values!r}")
    checked(validate.numbers, name, values, low=0.0, low_open=True, high=high)
    if list(values) != sorted(set(values)):
        raise ConfigError(f"{name} must be increasing distinct dial values in (0, {high:g}] (0, the baseline, "
                          f"is always included), got {values!r}")


@dataclass(frozen=True)
class AssumptionsConfig:
    """The assumptions study's settings (module docstring)."""
    #: platform, world, feed levels and sample sizes (`simrec_studies.common.scenarios`); one day (day 0) is
    #: used, scenario.log_sessions sessions per log (scenario.ab_sessions is not used)
    scenario: scenarios.ScenarioConfig = field(default_factory=lambda: SCENARIO)
    level: str = "level1"            # the feed level whose view model, candidates and epsilon are used
    #: R₀ (epsilon-greedy around comparison.logger), the improving and harmful targets (the truth
    #: decides at every dial), the clipping values m, the CI level that decides TPR and FPR, and
    #: nDCG's rule for sessions without a positive label (`simrec_studies.common.comparison`)
    comparison: Comparison = field(default_factory=lambda: COMPARISON)
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
    prior_views: float = 10.0        # DR reward model: pseudo-views of the overall rate added to each item
    #: fatigue truth: independent simulated deployments (scenario.log_sessions sessions each) per policy
    truth_arms: int = 8
    round_size: int = 256            # fatigue: sessions simulated between two updates of the users' state

    def __post_init__(self):
        if not isinstance(self.comparison, Comparison):
            raise ConfigError(f"comparison must be a Comparison, got {self.comparison!r}")
        if not self.assumptions or len(set(self.assumptions)) != len(self.assumptions):
            raise ConfigError(f"assumptions must be distinct names from {ASSUMPTIONS}, got {self.assumptions!r}")
        for name in self.assumptions:
            checked(validate.choice, "assumptions", name, ASSUMPTIONS)
        checked(validate.choice, "level", self.level, scenarios.LEVELS)
        for name in ("fatigue", "cascade", "depth_shift", "satiation", "misspecification", "unsupported"):
            _dials(name, getattr(self, name), {"unsupported": 0.9, "depth_shift": 3.0}.get(name, 1.0))
        checked(validate.probability, "exponential_gamma", self.exponential_gamma, low_open=True, high_open=True)
        checked(validate.integer, "replications", self.replications, low=2)
        checked(validate.integer, "truth_arms", self.truth_arms, low=1)
        checked(validate.integer, "round_size", self.round_size, low=1)
        checked(validate.positive, "prior_views", self.prior_views)

    def dials(self, assumption: str) -> tuple[float, ...]:
        """The dial values of a violation, 0 (the baseline) first."""
        return (0.0,) + tuple(float(v) for v in getattr(self, DIAL_FIELDS[assumption]))


PRESETS = {
    "smoke": AssumptionsConfig(
        scenario=dataclasses.replace(
            scenarios.PRESETS["smoke"], days=1, log_sessions=1024, ab_sessions=2, online_samples=4,
            level1=scenarios.LevelConfig(candidates=30, feed_length=15, epsilon=0.1)),
        comparison=dataclasses.replace(COMPARISON, harmful=(NoisyOracle(8.0),), m=(1.0, 10.0, math.inf)),
        fatigue=(0.3,), cascade=(0.5,), depth_shift=(2.0,), satiation=(0.3,), misspecification=(1.0,),
        unsupported=(0.2,),
        replications=4, truth_arms=2, round_size=128),
    "default": AssumptionsConfig(),
    "paper": AssumptionsConfig(scenario=dataclasses.replace(SCENARIO, log_sessions=32_768), replications=20),
}

STUDY = Study(
    name="assumptions",
    description="Jeunen et al. KDD'24 Asm. 1–5 violated one at a time: bias, SD, RMSE, sign agreement, TPR "
                "and FPR of clipped DCG, nDCG (both ideals), pnDCG, SN-DCG and DR against the exact online "
                "difference",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, expected_seconds={"smoke": 150, "default": 110, "paper": 2500})

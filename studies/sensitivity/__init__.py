"""Study ``sensitivity``: does an offline (n)DCG difference detect a true online improvement, and
at which clipping m? (Jeunen, Potapov & Ustimenko, KDD'24 §6.2, Fig. 1, extended)

A *setting* is (feed level, reward signal, target ranker R_t, day) on the platform of
`simrec_studies.common.scenarios`. On day d the logging policy R₀ (epsilon-greedy around a trained ranker) logs
D₀ᵈ (`feed.simulate`), and every target is scored on that log with per-trajectory differences

    Δ_τ(m) = f_τ(R_t; m) − f_τ(R₀; m),   f = clipped-IPS DCG (`ope.trajectory_dcg`) or nDCG
    (`ope.trajectory_ndcg`, one iDCG per session shared by both rankers),

for the whole grid of clipping values m in one vectorised pass, with a normal CI of the mean at
`confidence` (99 %) and the one-sided p-value of H₀: E[Δ] <= 0 (`stats.mean_ci`, `stats.one_sided_p`).
Independently, the simulator gives the truth: the exact online difference V(R_t) − V(R₀)
(`feed.online_value`) and a simulated A/B test of R₀ against the improving targets
(`feed.ab_test`, independent sessions per arm).

Kinds of settings:
* improving — intended better; kept only if the exact difference is > 0 and the A/B test rejects
  H₀: V(R_t) <= V(R₀) at p < `ab_alpha` (the paper's p << 0.001; Holm-adjusted p-values are
  reported too); the others are listed as failed and left out of the rates;
* harmful — intended worse; kept if the exact difference is < 0;
* A/A — R_t = R₀ itself (Δ_τ ≡ 0 on R₀'s own log: a check of the pipeline);
* A/A on independent logs — every target against itself, estimated on D₀ᵈ and on a second,
  independent log of R₀ from the same day (`independent_aa`): the same estimand twice, so a CI of
  the difference strictly above 0 is a false positive of the normal interval under the heavy
  importance weights (nominal rate (1 − confidence)/2), as a function of m.

For each metric and m (`stats.sensitivity_from_moments` on the per-setting means and SEs):
TPR = share of improving settings whose CI is strictly positive, mean one-sided p, sign
agreement; FPR = the same share on both kinds of A/A and on harmful settings (each rate with its
95 % Wilson interval); and bias and RMSE
(`stats.bias_rmse`) of the estimated relative lift Δ̄ / f̄(R₀) against the exact online lift
(V(R_t) − V(R₀)) / V(R₀) — the one scale DCG and nDCG share — plus, for DCG, of Δ̄ itself against
the exact online difference (DCG estimates expected feedback per session; nDCG does not). To show
*why* nDCG behaves as it does, each difference is also split into the part from the sessions
whose ideal DCG is in the top 10 % (those holding a click with a large weight 1/ε₀) and the rest.

Setup: the platform (`scenarios.platform`: world and trained rankers, cached on disk). Cells:
``truth`` per (level, day) — online values and A/B tests — and ``offline`` per (level, day),
which scores its grid of m (`offline_grid`: the standard grid `M_GRID` plus any other m of the
config) in one vectorised pass. The config's m is a report field (`runner.Study.report_fields`):
it only chooses the offline cells' grid and the m the report shows, so runs and sweeps over m
within `M_GRID` share cached cells. Records (`COLUMNS`): one number per row, addressed by
(part, level, day, m, signal, target, metric, statistic); see `compute`.

Presets: ``default`` logs with R₀ epsilon-greedy around r0 (ε 0.05 on level 1, 0.01 on level 2),
showing K = 60 of N = 200 candidates; ``deployed`` runs Jeunen et al.'s own regime
(`simrec_studies.common.deployed`): R₀ and every target deterministic over the same fixed
candidates, all of them shown (K = N = 60), so that exposures are the view probabilities at the
ranks (Eq. 9), with the four signals of `scenarios.SIGNAL_KINDS` (two explicit, two implicit) on
5 days, so that the deployed change R_t = Sort(rt) on level 2 gives the 4 × 5 = 20 settings of
Fig. 1 (the report's scope `FIGURE1_SCOPE`, beside every level and target), with the 13 finite
clipping values 1 … 4096 (and ∞) and 99 % normal intervals.

The package: this module holds the configuration (`SensitivityConfig`, `PRESETS`), the record
schema (`COLUMNS`) and `STUDY`; `compute` the truth and offline cells (cells, setup, compute);
`report` the rates, bias, mechanism, claims, prose and figures.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec_studies.common import scenarios
from simrec_studies.common.configs import checked
from simrec_studies.common.deployed import deployed
from simrec_studies.common.scenarios import NoisyOracle, Popularity, Trained
from simrec_studies.sensitivity.compute import (AA, AA_LOGS, METRICS, M_GRID, cells, compute, offline_grid,
                                                online_truth, setup)
from simrec_studies.sensitivity.report import NULL_KINDS, report

__all__ = ["SensitivityConfig", "COLUMNS", "PRESETS", "M_GRID", "AB_POWERED", "METRICS", "AA", "AA_LOGS",
           "NULL_KINDS", "STUDY", "cells", "compute", "offline_grid", "online_truth", "setup"]

#: the scenarios' default platform, with A/B arms large enough to verify a +6 % change at p < 0.001
AB_POWERED = dataclasses.replace(scenarios.PRESETS["default"], ab_sessions=32_768)

#: the record schema. part: "truth" (statistic exact, exact_se, ab_mean or ab_se of a policy's
#: online value; m NaN, metric ""), "paired" (the difference of a target against R₀ on D₀ᵈ:
#: statistic mean, se, low, high, p, top, rest, and the target's own value and value_se; target
#: "R0" holds R₀'s own value), "two logs" (a target against itself on two independent logs:
#: mean, se, low, high, p) or "log" (statistic lost: a target's lost exposure, max_weight: max
#: 1/ε₀ of D₀ᵈ; m NaN). target: a ranker label (`scenarios.ranker_label`), "R0" or `AA`.
COLUMNS = {"part": str, "level": str, "day": int, "m": float, "signal": str, "target": str, "metric": str,
           "statistic": str, "value": float}


@dataclass(frozen=True)
class SensitivityConfig:
    """The sensitivity study's settings (module docstring)."""
    #: platform, feed levels, drift, days and sample sizes (`simrec_studies.common.scenarios`): each of
    #: scenario.days days of each level logs scenario.log_sessions sessions of R₀ and A/B-tests R₀
    #: against the improving targets with scenario.ab_sessions sessions per arm
    scenario: scenarios.ScenarioConfig = field(default_factory=lambda: AB_POWERED)
    levels: tuple[str, ...] = scenarios.LEVELS       # feed levels scored
    #: the ranker of R₀ (epsilon-greedy around it, `scenarios.logging_policy`)
    logger: scenarios.RankerField = field(default_factory=lambda: Trained("r0"))
    #: rankers of deterministic targets intended to beat R₀ (`scenarios.Ranker` values; on the
    #: command line their labels, e.g. --set improving=rt,oracle@2,oracle@2#1,popularity)
    improving: tuple[scenarios.RankerField, ...] = (Trained("rt"), NoisyOracle(2.0), NoisyOracle(1.0))
    #: rankers of deterministic targets intended to lose to R₀ (as improving)
    harmful: tuple[scenarios.RankerField, ...] = (NoisyOracle(4.0), NoisyOracle(8.0), Popularity())
    m: tuple[float, ...] = M_GRID                    # clipping grid shown (inf allowed; a report field)
    confidence: float = 0.99                         # confidence level of the offline CIs
    ab_alpha: float = 0.001                          # the A/B p-value an improvement needs
    #: exposures under the day's true view model ("true") or the position model learnt from the
    #: log's depths ("pbm", `feed.fit_view_model`, the paper's)
    view: str = "pbm"
    #: nDCG of sessions with no positive label: "zero", or "skip" to drop them from the nDCG mean
    zero_ideal: str = "zero"

    def __post_init__(self):
        for name, rankers in (("logger", (self.logger,)), ("improving", self.improving), ("harmful", self.harmful)):
            if not isinstance(rankers, tuple) or not all(isinstance(r, (Trained, Popularity, NoisyOracle))
                                                         for r in rankers):
                raise ConfigError(f"{name} must hold rankers such as Trained('rt') or NoisyOracle(2.0) (on "
                                  f"the command line their labels, e.g. rt,oracle@2), got {rankers!r}")
        if not self.levels or len(set(self.levels)) != len(self.levels) or \
                not set(self.levels) <= set(scenarios.LEVELS):
            raise ConfigError(f"levels must be distinct names from {scenarios.LEVELS}, got {self.levels}")
        if not self.improving:
            raise ConfigError("improving must name at least one target ranker, e.g. (Trained('rt'),)")
        names = [scenarios.ranker_label(r) for r in (self.logger,) + self.improving + self.harmful]
        if len(set(names)) != len(names):
            raise ConfigError(f"logger, improving and harmful must be distinct rankers, got {names}")
        checked(validate.clipping_values, "m", self.m)
        for name in ("confidence", "ab_alpha"):
            checked(validate.probability, name, getattr(self, name), low_open=True, high_open=True)
        checked(validate.choice, "view", self.view, ("true", "pbm"))
        checked(validate.choice, "zero_ideal", self.zero_ideal, ("zero", "skip"))

    @property
    def targets(self) -> tuple:
        return self.improving + self.harmful


# The default targets' effect against R₀ = epsilon-greedy(r0), measured with `scenarios.online` on
# the default platform, day 0 (relative change of like / watch on level 1, then level 2): rt +14 %
# / +6 % and +15 % / +6 %; oracle@2 +32 % / +9 % and +33 % / +8 %; oracle@1 +53 % / +21 % and +55 %
# / +19 %; oracle@4 -6 % / -7 % and -10 % / -11 %; oracle@8 -36 % / -19 % and -47 % / -27 %;
# popularity -1 % / -7 % and -14 % / -19 %. Every run verifies each setting with the exact values.
PRESETS = {
    "smoke": SensitivityConfig(scenario=dataclasses.replace(scenarios.PRESETS["smoke"], days=2),
                               improving=(Trained("rt"), NoisyOracle(1.0)), harmful=(NoisyOracle(8.0),),
                               m=(1.0, 4.0, 64.0, math.inf)),
    "default": SensitivityConfig(),
    "paper": SensitivityConfig(scenario=scenarios.PRESETS["paper"]),
    "deployed": SensitivityConfig(scenario=dataclasses.replace(
        deployed(AB_POWERED), days=5, signals=scenarios.SignalConfig(names=tuple(scenarios.SIGNAL_KINDS)))),
}


STUDY = Study(
    name="sensitivity",
    description="Jeunen et al. KDD'24 Fig. 1 extended: TPR, mean p, FPR on A/A and harmful changes, and "
                "bias/RMSE of offline DCG and nDCG differences as functions of the clipping m",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, report_fields=("m",),
    expected_seconds={"smoke": 45, "default": 85, "paper": 1500, "deployed": 45})

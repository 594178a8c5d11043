"""Study ``position_bias``: how well is the examination curve P(V=1 | rank) learnt from clicks
alone, and what does its error do to DCG as an off-policy estimate? (Joachims et al., WSDM'17;
Wang et al., WSDM'18; Agarwal et al., WSDM'19; Jeunen et al., KDD'24 Table 2's learnt `pbm`)

On the feed platform of `simrec_studies.common.scenarios` (day 0 of each level, position-based: the
level-2 cascade and satiation are switched off here, so that one curve θ_k describes the
examination exactly), each replication draws, for each log size N:

* **randomisation** — N sessions of RandTop-K around the logger's ranker (`feed.randomised_top`:
  its K shown items in a uniformly random order), estimated by `feed.randomisation_curve`;
* **intervention harvesting** and **regression-EM** — N sessions split equally over the
  deterministic rankers of `harvest_rankers` (Sort of each ranker's scores on the same candidate
  generator), whose full rankings are restored with `feed.click_log`; `feed.harvesting_curve`
  (AllPairs, and the ratio to rank 1) and `feed.regression_em` (relevance per (user, item));
* **logged views** — `feed.fit_view_model` on the view masks of those same pooled sessions (what
  the curve costs when views ARE logged; the reference of KDD'24's `pbm`).

Each curve is relative to rank 1 (clicks identify no more); every simrec view model has
S(1) = 1, so the truth is `feed.view_probability(day's view model, K)`. Curve error: RMSE over
the K ranks against it (ranks an estimator leaves unidentified are counted separately).

Downstream, each replication also logs `scenario.log_sessions` sessions of the scenarios'
epsilon-greedy logger R₀, and every curve (projected onto a non-increasing table,
`feed.curve_view_model`) is used as the `pbm` discount of DCG: the estimated improvement Δ of each
target over R₀ (`simrec_studies.common.differences.offline_differences`, through `simrec.ope`:
exposures of R₀ and R_t under the curve, clipping m = 1 = labels C, m = ∞ = labels Q̂), against the
exact online difference V(R_t) − V(R₀) (`feed.online_value`). References: the true curve and
`fit_view_model` on that log's own views.
Reported: bias and RMSE of Δ, TPR (improving targets whose `confidence` CI is above 0) and FPR
(harmful targets whose CI is above 0), over targets x signals x replications.

Cells: ``truth`` per level (exact online values), ``reference`` per (level, replication) and
``curves`` per (level, replication, N). Records (`COLUMNS`): one number per row.

The package: this module holds the configuration (`PositionBiasConfig`, `PRESETS`), the record
schema (`COLUMNS`) and `STUDY`; `compute` the logs, curves and downstream differences (cells,
setup, compute); `report` the error tables, slopes, downstream table, prose and figures.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec_studies.common import scenarios
from simrec_studies.common.configs import checked
from simrec_studies.position_bias.compute import DOWNSTREAM, ESTIMATORS, cells, compute, setup
from simrec_studies.position_bias.report import LABELS, report
from simrec_studies.common.scenarios import NoisyOracle, Popularity, Trained

__all__ = ["PositionBiasConfig", "COLUMNS", "PRESETS", "PBM_DEFAULT", "PBM_SMOKE", "ESTIMATORS", "DOWNSTREAM",
           "LABELS", "STUDY", "cells", "compute", "setup"]

#: the record schema. part: "truth" (statistic "exact": V of target, R₀ as "R0"), "curve"
#: (statistic estimate, se or truth of one rank; se NaN where not computed) or "ope" (statistic
#: mean, se, low or high of the DCG difference Δ of target over R₀ at clipping m). estimator: a
#: key of `LABELS`; sessions: N of the curve's log (the OPE log's size for "true"/"ope_views").
COLUMNS = {"part": str, "level": str, "seed": int, "sessions": int, "estimator": str, "rank": int,
           "signal": str, "target": str, "m": float, "statistic": str, "value": float}

#: the scenarios' default platform with level 2's cascade and satiation off: both levels are PBMs
PBM_DEFAULT = dataclasses.replace(scenarios.PRESETS["default"], level2=dataclasses.replace(
    scenarios.PRESETS["default"].level2, cascade=0.0, satiation=0.0))
PBM_SMOKE = dataclasses.replace(scenarios.PRESETS["smoke"], level2=dataclasses.replace(
    scenarios.PRESETS["smoke"].level2, cascade=0.0, satiation=0.0), log_sessions=2048)


@dataclass(frozen=True)
class PositionBiasConfig:
    """The position-bias study's settings (module docstring)."""
    #: platform, feed levels and the OPE log's size scenario.log_sessions (`simrec_studies.common.scenarios`);
    #: day 0 of each level is used; cascade and satiation should be 0 (a PBM)
    scenario: scenarios.ScenarioConfig = field(default_factory=lambda: PBM_DEFAULT)
    levels: tuple[str, ...] = scenarios.LEVELS       # feed levels studied
    signal: str = "watch"                            # the reward signal whose clicks the curves are learnt from
    sessions: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)   # log sizes N of the curve estimators
    replications: int = 2                            # independent replications (logs) per level and size
    #: the logging ranker: R₀ = epsilon-greedy around its Sort; randomisation permutes its top K
    logger: scenarios.RankerField = field(default_factory=lambda: Trained("r0"))
    #: deterministic rankers whose pooled logs (N / len sessions each) feed harvesting and EM
    harvest_rankers: tuple[scenarios.RankerField, ...] = (Trained("r0"), NoisyOracle(1.0), NoisyOracle(2.0),
                                                          NoisyOracle(4.0))
    #: deterministic targets intended to beat R₀ (DCG's downstream TPR)
    improving: tuple[scenarios.RankerField, ...] = (Trained("rt"), NoisyOracle(2.0), NoisyOracle(1.0))
    #: deterministic targets intended to lose to R₀ (DCG's downstream FPR)
    harmful: tuple[scenarios.RankerField, ...] = (NoisyOracle(4.0), NoisyOracle(8.0), Popularity())
    m: tuple[float, ...] = (1.0, math.inf)           # clipping values of the DCG estimates (1 = labels C, inf = Q̂)
    confidence: float = 0.99                         # confidence level of the DCG difference's CI
    em_iterations: int = 500                         # EM steps of regression-EM (fixed, deterministic)

    def __post_init__(self):
        if not self.levels or len(set(self.levels)) != len(self.levels) or \
                not set(self.levels) <= set(scenarios.LEVELS):
            raise ConfigError(f"levels must be distinct names from {scenarios.LEVELS}, got {self.levels}")
        checked(validate.choice, "signal", self.signal, self.scenario.signals.names)
        if not self.sessions or any(isinstance(n, bool) or not isinstance(n, int) or n < 2 * len(self.harvest_rankers)
                                    for n in self.sessions) or len(set(self.sessions)) != len(self.sessions):
            raise ConfigError(f"sessions must be distinct integers >= 2 x len(harvest_rankers), got {self.sessions}")
        for name in ("replications", "em_iterations"):
            checked(validate.integer, name, getattr(self, name), low=1)
        for name, rankers in (("logger", (self.logger,)), ("harvest_rankers", self.harvest_rankers),
                              ("improving", self.improving), ("harmful", self.harmful)):
            if not isinstance(rankers, tuple) or not all(isinstance(r, (Trained, Popularity, NoisyOracle))
                                                         for r in rankers):
                raise ConfigError(f"{name} must hold rankers such as Trained('rt') or NoisyOracle(2.0), "
                                  f"got {rankers!r}")
        if len(self.harvest_rankers) < 2 or len(set(self.harvest_rankers)) != len(self.harvest_rankers):
            raise ConfigError("harvest_rankers must name at least 2 distinct rankers (harvesting needs the same items "
                              "at different ranks)")
        if not self.improving:
            raise ConfigError("improving must name at least one target ranker")
        targets = [scenarios.ranker_label(r) for r in self.improving + self.harmful]
        if len(set(targets)) != len(targets) or scenarios.ranker_label(self.logger) in targets:
            raise ConfigError(f"logger, improving and harmful must be distinct rankers, got {targets}")
        checked(validate.clipping_values, "m", self.m)
        checked(validate.probability, "confidence", self.confidence, low_open=True, high_open=True)
        for level in self.levels:
            lv = scenarios.level_config(self.scenario, level)
            if lv.cascade or lv.satiation:
                raise ConfigError(f"scenario.{level}: cascade and satiation must be 0 (the estimators assume a "
                                  f"position-based model), got {lv.cascade} and {lv.satiation}")

    @property
    def targets(self) -> tuple:
        return self.improving + self.harmful


PRESETS = {
    "smoke": PositionBiasConfig(scenario=PBM_SMOKE, levels=("level1",), sessions=(400, 2_000), replications=2,
                                improving=(Trained("rt"), NoisyOracle(1.0)), harmful=(NoisyOracle(8.0),),
                                em_iterations=200),
    "default": PositionBiasConfig(),
    "paper": PositionBiasConfig(replications=5),
}

STUDY = Study(
    name="position_bias",
    description="The examination curve learnt from clicks only (randomisation, regression-EM, intervention "
                "harvesting): its error against log size, and DCG's bias and TPR when it replaces the true curve.",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS, setup=setup, cache_setup=True,
    expected_seconds={"smoke": 130, "default": 170, "paper": 1200},
)

"""Study ``correlation``: do offline (n)DCG estimates track online reward over days? (Jeunen,
Potapov & Ustimenko, KDD'24 §6.1, Table 2.)

Setting: `simrec_studies.common.scenarios` — a platform with a fixed candidate generator G, a logging
policy R₀ (epsilon-greedy around MF-AUC) and a deterministic target R_t (MF-ADG trained longer), two feed
levels (level 1: scroll-budget view model, no violations, m = inf; level 2: exponential view,
cascade and satiation, m = 200) and two signals (``like`` explicit and rare, ``watch`` implicit
and frequent). Days drift (session length, engagement, item quality, user mix).

Per day d and level the study draws, independently, an offline log D₀ᵈ of R₀ and a two-arm A/B
test (R₀, R_t), and computes the exact online reward of both (`scenarios.online`). The online
reward of the day is the A/B arm's mean positive feedback per session (as in the paper; the exact
value is reported alongside). The offline estimates of each policy on D₀ᵈ come from the estimator
registry of `simrec.ope` (`simrec_studies.common.table2_estimates`: `inputs`, `contributions`,
`estimates`):

* DCG with discount {log, pbm} x labels {C, Q̂}: exposures of logger and target under the
  logarithmic view model (`log`) or the position-based model learnt from the day's logged depths
  (`pbm`, `simrec.feed.fit_view_model`), labels C (clipping m = 1, raw clicks) or Q̂ = C/P(V|R₀)
  (m = the level's clip: inf on level 1, 200 on level 2) — the registry's "dcg";
* nDCG (pbm, Q̂) with the same-discount ideal, sessions with iDCG = 0 counted as 0 or skipped —
  "ndcg" with option zero_ideal "zero" or "skip" (its per-session values give the bins of positives);
* pnDCG (pbm, Q̂) = mean DCG / mean iDCG — "pndcg" (its denominator: the day's iDCG per session).

For R₀ the target is the logger itself (an on-policy estimate). Pearson's r with Student's
two-tailed p (`simrec.stats.pearson`) between the daily online series and each daily offline
series, per level x signal x policy, over 7-day experiments (the paper's week; non-overlapping
windows of each replication's days) and over each replication's whole series (the many-day
variant). Replication r uses platform r mod `platforms` and that platform's days
[k · long_days, (k + 1) · long_days) with k = r div `platforms`, so replications never share a day.

Mechanism tables: Pearson r of each daily quantity with the day factors, its mean over days with a
Newey–West standard error (`simrec.stats.hac_mean_se`), and partial correlations with online reward
given one factor with their t-tests (`simrec.stats.partial_correlation`, statsmodels OLS).

Setup: the platforms (`scenarios.platforms`: worlds and trained rankers, cached on disk). Cells:
(replication, day), both levels in one cell. Records (`COLUMNS`): one daily number per row,
addressed by (replication, day, level, signal, policy, quantity, positives, statistic); see
`compute._record`. The report pivots them into `table_daily` (one row per day and setting) and
computes every table, figure and claim from it.

Presets: ``default`` logs with R₀ epsilon-greedy around r0 (K = 60 of N = 200 candidates);
``deployed`` runs Jeunen et al.'s own regime (`simrec_studies.common.deployed`): R₀ and R_t
deterministic over the same fixed candidates, all of them shown (K = N = 60), exposures the view
probabilities at the ranks (Eq. 9).

The package: this module holds the configuration (`CorrelationConfig`, `PRESETS`), the record
schema (`COLUMNS`) and `STUDY`; `compute` the days, logs, online values and estimates (cells,
setup, compute); `report` Table 2 and its variants, the mechanism tables, the claims of Jeunen et
al. beside ours, the figures and the prose. Table 2's estimators, settings and numbers are
`simrec_studies.common.table2`'s.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec_studies.common import scenarios as S
from simrec_studies.common.configs import checked
from simrec_studies.common.deployed import deployed
from simrec_studies.common.table2 import ESTIMATORS, POLICIES, SIGNALS
from simrec_studies.correlation.compute import (DAY_QUANTITIES, ESTIMATES, POSITIVE_BINS, RANKERS, SIGNAL_QUANTITIES,
                                                cells, compute, setup)
from simrec_studies.correlation.report import DAILY_COLUMNS, daily_frame, report

__all__ = ["CorrelationConfig", "COLUMNS", "PRESETS", "STUDY", "ESTIMATORS", "ESTIMATES", "POLICIES", "RANKERS",
           "POSITIVE_BINS", "DAY_QUANTITIES", "SIGNAL_QUANTITIES", "DAILY_COLUMNS", "daily_frame"]

#: the record schema: one daily number per row. quantity: a day quantity (`DAY_QUANTITIES`; signal
#: and policy ""), a signal quantity (`SIGNAL_QUANTITIES`, or "sessions" with statistic "share"
#: per bin of positives; policy ""), or a policy's "online_ab", "online_exact" or estimate
#: (`ESTIMATES`); positives: a bin of `POSITIVE_BINS` ("" = all sessions); statistic: "value",
#: "se" (its standard error) or "share".
COLUMNS = {"replication": int, "day": int, "level": str, "signal": str, "policy": str, "quantity": str,
           "positives": str, "statistic": str, "value": float}


@dataclass(frozen=True)
class CorrelationConfig:
    """The correlation study's settings; replication r runs on platform r mod platforms."""
    #: the feed setting (`simrec_studies.common.scenarios`); scenario.days = the length of one
    #: experiment (7 as in the paper)
    scenario: S.ScenarioConfig = field(default_factory=lambda: S.PRESETS["default"])
    #: days per replication (the many-day variant, cut into scenario.days-day experiments for Table 2)
    long_days: int = 28
    replications: int = 2            # independent day series
    platforms: int = 1               # distinct platforms (world + trained rankers) they cycle through

    def __post_init__(self):
        checked(validate.integer, "long_days", self.long_days, low=3)
        checked(validate.integer, "replications", self.replications, low=1)
        # a Pearson test needs 3 days; replications cycle through the platforms
        checked(validate.integer, "platforms", self.platforms, low=1, high=self.replications)
        checked(validate.integer, "scenario.days", self.scenario.days, low=3, high=self.long_days)
        if not set(SIGNALS) <= set(self.scenario.signals.names):
            raise ConfigError(f"scenario.signals.names must include Table 2's signals {SIGNALS} (C_exp, C_imp), "
                              f"got {self.scenario.signals.names}")


PRESETS = {
    "smoke": CorrelationConfig(scenario=dataclasses.replace(S.PRESETS["smoke"], days=4), long_days=8,
                               replications=2),
    "default": CorrelationConfig(),
    "paper": CorrelationConfig(scenario=S.PRESETS["paper"], long_days=63, replications=6, platforms=3),
    "deployed": CorrelationConfig(scenario=deployed(S.PRESETS["default"])),
}

STUDY = Study(
    name="correlation",
    description="Offline DCG / nDCG vs online reward over days (Jeunen et al., KDD'24 Table 2): "
                "Pearson r per feed level, signal and policy, with its spread over replications.",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, expected_seconds={"smoke": 35, "default": 130, "paper": 10800, "deployed": 65})

"""Study ``regimes``: where do the offline-evaluation verdicts of Jeunen, Potapov & Ustimenko
(KDD'24 §6) hold? Verdict maps over the dials that decide them.

The paper draws four conclusions from one production regime (40M users a day, one deployed change
of a deterministic ranker, candidate generator G fixed in §6.1):

* (a) DCG (pbm, Q̂) tracks online reward over days (Table 2: strong positive Pearson r);
* (b) nDCG tracks it worse, even with the opposite sign (Table 2's negative r);
* (c) a learnt position model (pbm) and debiased labels Q̂ beat the log discount and raw labels C;
* (d) clipped DCG detects true online improvements with few false positives, best at a moderate
  clipping m (Fig. 1).

Here every conclusion is re-tested on a grid of regimes of the `simrec_studies.common.scenarios` feed
(one level, `RegimesConfig.level`: by default the first, with the scroll-budget view model and no
violations of Asm. 1–5 except Asm. 5 when G′ ≠ G; the preset ``level2`` runs the second, with the
exponential view model, a cascade and satiation, where the paper measured Fig. 1):

* exploration of the logger R₀ — epsilon-greedy around Sort(r0) (``epsilon``), or Plackett–Luce
  over r0's scores standardised per user, at temperature ``temperature`` (a smooth, rank-dependent
  exploration; its placement probabilities P(a at rank i | x) are estimated once per run from
  `exposure_samples` sampled rankings per user, `feed.placement`, and give its exposures under every
  day's view model);
* the logged sessions per day (``log_sessions``: the noise of one day's estimate);
* the drift mix: the global day factors' total sd ``global_drift`` split into session length and
  engagement with ``session_share`` (share of variance from session length);
* two drifts that are not global (`scenarios.DriftConfig`): a per-item random walk in the item
  bias (``item_walk``: trends and churn that move the target's and the logger's items
  differently) and a random walk in the view model's session-length factor (``view_walk``:
  examination that drifts, which a fixed log discount cannot follow and a pbm learnt per day can);
* a target that changes the candidate generator (``generator_shift`` λ): G′ = the top N per user of
  (1 − λ)·z(retrieval) + λ·z(rt scores), z = standardised per user (λ = 0: G′ = G exactly; λ = 1:
  the target retrieves with its own scores, and part of its exposure falls on items the logger
  never shows, which no estimator on R₀'s log can see);
* engagement-only drift (map ``engagement``): the global drift's size ``global_drift`` and its
  session-length share with both walks off (`MAP_DIALS`), so that at share 0 the days differ in
  engagement alone and at share 1 in session length alone;
* the watch signal's own shape under that engagement-only drift (map ``signal``, global drift sd
  1.28, share 0): its slope in the quality logit (``watch_slope``) and its logit shift
  (``watch_shift``), each at watch's own value (0.5, −1.5) and at like's (1, −7), so that which
  property of a signal turns nDCG's daily correlation negative is read off one signal.

A *map* (`MAPS`) varies two dials on a grid, the others stay at `RegimesConfig.dials` (or at the
map's `MAP_DIALS`). A cell is one distinct regime x one replication: `days` consecutive days
(replication r: days r·days … (r+1)·days − 1; the walks persist over absolute days). Grid points of
several maps with the same dials (the default regime lies on four maps) are one regime, computed
once, and its records are written for each of its points. Each day, R₀ logs `log_sessions` sessions
(`feed.simulate`), the simulator gives the exact online reward of every policy
(Σ_x p(x) Σ_a q(x, a) ε(x, a) under the day's true view model, `table_value`; for the
Plackett–Luce logger with its estimated exposures; on a level with a cascade or satiation
`scenarios.online`, exact for the deterministic targets and a Monte Carlo mean with its standard
error for a stochastic logger), and on the log:

* R_t = Sort(rt) on G′ and the logger R₀ itself (Table 2 correlates both series) are estimated
  with DCG {log, pbm} x {C, Q̂} (m = 1 and ∞) and nDCG (pbm, Q̂) with sessions without positive
  label skipped or counted as 0 — the estimators of study
  ``correlation`` (Table 2, the labels of `simrec_studies.common.table2.ESTIMATORS`), through the
  estimator registry of `simrec.ope` (`simrec_studies.common.table2_estimates`: "dcg", "ndcg");
* every target of `improving` and `harmful` gets the per-trajectory difference
  Δ_τ(m) = DCG_τ(R_t; m) − DCG_τ(R₀; m) under the learnt pbm, its mean and standard error for the
  whole grid `m` (the registry's paired difference against R₀, `ope.summarise`; 10^6 sessions a day
  hold f64[M, 10^6] per policy, 40 MB for the default five m) — Fig. 1's statistic.

The log and online draws of (replication, day) use the same keys at every grid point (common random
numbers), so neighbouring cells differ by their dials, not by luck. One extra cell (``paper``) runs
the default dials at `paper_sessions` (10^6) logged sessions a day.

Verdicts (`verdicts`), noise-aware over the replications (r per replication's `days`-day series,
correlated against the exact online reward: with 40M users a day the paper's A/B means are exact
to the digits it reports):
(a) holds where mean r >= 0.5 and mean r − 2 SE > 0, fails where mean r + 2 SE < 0.5;
(b) DCG (pbm, Q̂) − nDCG (skip) in r, paired over replications: holds beyond +2 SE, fails below
−2 SE, else tie; "opposite sign" where nDCG's mean r + 2 SE < 0;
(c) DCG (pbm, Q̂) − DCG (log, C) in r, paired likewise, for R_t's series and for R₀'s;
(d) over the grid point's settings (replications x days x signals x targets): TPR(m) = share of
truly improving settings (exact difference > 0) whose `confidence` normal CI is above 0, FPR(m)
the same share of truly harmful settings, Wilson intervals (`stats.proportion_ci`); holds where the best m
has TPR >= 0.5, FPR <= 0.05 (or no truly harmful setting at that grid point) and is finite with more
detections than m = ∞ beyond 2 SE (paired);
"partly" where the detection and false-positive parts hold but m = ∞ detects as many; fails
otherwise. Every 2-SE rule is `simrec.reporting.verdict` / `paired_verdict`.

Claims (`report.claims`, the README's Claims section): Table 2's r of R_t on the first-level feed
(`simrec_studies.common.table2`) and Fig. 1a's finding beside the base regime — the first grid
point whose dials are `RegimesConfig.dials` (ε-greedy logger, G′ = G), with SEs over replications
— and beside the paper-like cell (one replication: r without an SE).

Package: `compute` (cells, setup, the regime's policies and exposures, a day's records) and
`report` (tables, verdicts, heatmaps, claims, prose); compute never imports report.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec.world import WorldConfig
from simrec_studies.common import scenarios as S
from simrec_studies.common.configs import checked
from simrec_studies.regimes.compute import DIALS, MAPS

#: the record schema: one number per row. map, x, y, replication: the cell (x, y: its dials'
#: values; the paper cell has x = its sessions, y = 0); day: absolute day; signal: a scenario
#: signal or "" (day quantities); target: a ranker label, "R0" (the logger) or ""; quantity: a
#: day quantity (`DAY_QUANTITIES`), "lost" (day −1: target exposure per session on items R₀ never
#: shows, under the log discount, averaged over the base user mix), "online" (exact online reward
#: per session of R₀ or a target), "online_se" (its Monte Carlo SE, on a level with a cascade or
#: satiation only), an estimate of
#: `CORRELATED` or "se[...]" its SE (target rt), "delta" / "delta_se" (mean and SE of Δ_τ(m)), or a
#: `ONE_CLICK` quantity of the day's log (target rt); m: the clipping of delta rows, else NaN.
COLUMNS = {"map": str, "x": float, "y": float, "replication": int, "day": int, "signal": str, "target": str,
           "quantity": str, "m": float, "value": float}


@dataclass(frozen=True)
class Dials:
    """One regime: the value of every dial (`DIALS`) where a map does not vary it."""
    epsilon: float = 0.05            # the ε-greedy logger's exploration, in [0, 1]
    #: the Plackett–Luce logger's temperature over per-user standardised r0 scores (> 0), or 0 for
    #: the ε-greedy logger
    temperature: float = 0.0
    log_sessions: int = 10_000       # sessions R₀ logs per day
    global_drift: float = 0.32       # total sd of the global day factors, sqrt(session² + engagement²)
    session_share: float = 0.5       # share of global_drift's variance from session length, in [0, 1]
    item_walk: float = 0.1           # sd of the daily step of the per-item bias random walk
    view_walk: float = 0.1           # sd of the daily step of the session-length-factor random walk
    #: λ in [0, 1]: the target's generator G′ = top N of (1 − λ) z(retrieval) + λ z(rt scores)
    generator_shift: float = 0.0
    watch_slope: float | None = None     # the watch signal's slope in the quality logit (None: the scenario's)
    watch_shift: float | None = None     # the watch signal's logit shift (None: the scenario's)

    def __post_init__(self):
        for name in ("epsilon", "session_share", "generator_shift"):
            checked(validate.probability, f"dials.{name}", getattr(self, name))
        for name in ("temperature", "global_drift", "item_walk", "view_walk"):
            checked(validate.finite, f"dials.{name}", getattr(self, name), low=0.0)
        checked(validate.integer, "dials.log_sessions", self.log_sessions, low=2)
        for name in ("watch_slope", "watch_shift"):
            if getattr(self, name) is not None:
                checked(validate.finite, f"dials.{name}", getattr(self, name))


def _platform() -> S.ScenarioConfig:
    """The study's platform: smaller than the correlation default (800 users x 400 items, N = 60
    candidates, K = 20 shown, shorter training), so that a map cell takes seconds."""
    world = WorldConfig(n_users=800, n_items=400, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-5.5)
    level = S.LevelConfig(candidates=60, feed_length=20)
    return S.ScenarioConfig(world=world, level1=level,
                            level2=dataclasses.replace(S.PRESETS["default"].level2, candidates=60, feed_length=20),
                            rankers=S.RankerConfig(r0_pairs=50_000, rt_pairs=200_000), days=7)


@dataclass(frozen=True)
class RegimesConfig:
    """The regimes study's settings (module docstring)."""
    #: platform, view model, signals and rankers (`simrec_studies.common.scenarios`; `level` is used,
    #: its epsilon and the drift are set by the dials); scenario.days = days per replication
    scenario: S.ScenarioConfig = field(default_factory=_platform)
    #: the feed level simulated: level1 (scroll-budget view, no violations) or level2 (exponential
    #: view, a cascade and satiation: Asm. 2 and 3 broken; the feed of KDD'24 Fig. 1)
    level: str = "level1"
    dials: Dials = field(default_factory=Dials)        # the regime where a map does not vary a dial
    maps: tuple[str, ...] = tuple(MAPS)                # the maps computed (names of `MAPS`)
    epsilons: tuple[float, ...] = (0.01, 0.05, 0.2)    # grid of the epsilon dial
    temperatures: tuple[float, ...] = (0.5, 1.0, 2.0)  # grid of the temperature dial (Plackett–Luce)
    sessions: tuple[int, ...] = (1_000, 10_000, 100_000)   # grid of the log_sessions dial
    session_shares: tuple[float, ...] = (0.0, 0.5, 1.0)    # grid of the session_share dial
    item_walks: tuple[float, ...] = (0.0, 0.1, 0.3)        # grid of the item_walk dial
    view_walks: tuple[float, ...] = (0.0, 0.1, 0.3)        # grid of the view_walk dial
    generator_shifts: tuple[float, ...] = (0.0, 0.5, 1.0)  # grid of the generator_shift dial
    global_drifts: tuple[float, ...] = (0.16, 0.32, 0.64, 1.28)  # grid of the global_drift dial (engagement map)
    watch_slopes: tuple[float, ...] = (0.5, 1.0)           # grid of the watch_slope dial (watch's, like's)
    watch_shifts: tuple[float, ...] = (-7.0, -1.5)         # grid of the watch_shift dial (like's, watch's)
    #: replications per grid point (disjoint day ranges): each verdict's SE is over them (>= 2 for
    #: an SE; 5 give a 2-SE rule with 4 degrees of freedom)
    replications: int = 5
    #: logged sessions a day of the paper-like cell (default dials, replication 0..paper_replications-1);
    #: 0 = no such cell
    paper_sessions: int = 1_000_000
    paper_replications: int = 1      # replications of the paper-like cell
    paper_days: int = 5              # days of the paper-like cell (KDD'24 §6.2 uses 5 days, Table 2 seven)
    #: rankers of deterministic targets intended to beat R₀ (the first must be rt, the Table 2 target)
    improving: tuple[S.RankerField, ...] = (S.Trained("rt"), S.NoisyOracle(2.0))
    #: rankers of deterministic targets intended to lose to R₀ (false-positive checks)
    harmful: tuple[S.RankerField, ...] = (S.NoisyOracle(8.0),)
    m: tuple[float, ...] = (1.0, 8.0, 64.0, 512.0, math.inf)   # clipping grid of (d)
    confidence: float = 0.99         # confidence of the offline CIs of (d) (the paper's 99 %)
    #: rankings sampled per context, once per run, for the Plackett–Luce logger's placement
    #: probabilities (`feed.placement`), hence its exposures under every view model and its online value
    exposure_samples: int = 128

    def __post_init__(self):
        checked(validate.choice, "level", self.level, S.LEVELS)
        if not self.maps or not set(self.maps) <= set(MAPS) or len(set(self.maps)) != len(self.maps):
            raise ConfigError(f"maps must be distinct names from {tuple(MAPS)}, got {self.maps!r}")
        for dial, (name, _) in DIALS.items():
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise ConfigError(f"{name} must hold distinct values, got {values!r}")
            for v in values:
                dataclasses.replace(self.dials, **{dial: v})            # validates the value
        checked(validate.numbers, "temperatures", self.temperatures, low=0.0, low_open=True)
        for name, low in (("replications", 1), ("paper_sessions", 0), ("paper_replications", 1),
                          ("paper_days", 3), ("exposure_samples", 2)):
            checked(validate.integer, name, getattr(self, name), low=low)
        if self.paper_sessions == 1:
            raise ConfigError("paper_sessions must be 0 (no paper cell) or >= 2")
        if self.scenario.days < 3:
            raise ConfigError(f"scenario.days must be >= 3 (a Pearson r per replication), got {self.scenario.days}")
        if not {"like", "watch"} <= set(self.scenario.signals.names):
            raise ConfigError(f"scenario.signals.names must include like and watch (Table 2's C_exp and C_imp; the "
                              f"signal map dials watch), got {self.scenario.signals.names}")
        if not self.improving or self.improving[0] != S.Trained("rt"):
            raise ConfigError(f"improving must start with Trained('rt') (the correlated target), "
                              f"got {self.improving!r}")
        labels = [S.ranker_label(r) for r in self.improving + self.harmful]
        if len(set(labels)) != len(labels) or "r0" in labels:
            raise ConfigError(f"improving and harmful must be distinct rankers other than r0, got {labels}")
        checked(validate.clipping_values, "m", self.m)
        checked(validate.probability, "confidence", self.confidence, low_open=True, high_open=True)


def _smoke() -> RegimesConfig:
    world = WorldConfig(n_users=200, n_items=150, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-4.0)
    scenario = dataclasses.replace(S.PRESETS["smoke"], world=world, days=3,
                                   level1=S.LevelConfig(candidates=40, feed_length=20))
    return RegimesConfig(scenario=scenario, dials=Dials(log_sessions=1000), maps=("exploration", "generator"),
                         epsilons=(0.05, 0.2), sessions=(500, 2000), generator_shifts=(0.0, 1.0), replications=2,
                         paper_sessions=4000, paper_days=3, m=(1.0, 16.0, math.inf), exposure_samples=32)


PRESETS = {"smoke": _smoke(), "default": RegimesConfig(),
           # (d) where Fig. 1 was measured: the second-level feed, over exploration and log size
           "level2": RegimesConfig(level="level2", maps=("exploration",),
                                   scenario=dataclasses.replace(_platform(), online_samples=16))}


# the parts a caller (and the tests) reach through the package; compute.py never imports report.py
from simrec_studies.regimes.compute import (  # noqa: E402,F401
    CORRELATED, DAY_QUANTITIES, ONE_CLICK, PAPER, SERIES, TARGET, Shared, cell_dials, cell_points, cells,
    compute, difference_moments, grid, grid_points, logger_policy, regime_config, setup,
    shifted_generator, table_value)
from simrec_studies.regimes.report import (  # noqa: E402,F401
    claims, correlations, daily_frame, detection, mechanism, report, settings_frame, verdict_d, verdicts)

STUDY = Study(
    name="regimes",
    description="Verdict maps: where Jeunen et al.'s KDD'24 §6 conclusions (DCG tracks online reward, nDCG "
                "worse, pbm/Q̂ beat log/C, clipped DCG detects improvements) hold over exploration, log size, "
                "drift and candidate-generator regimes",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, expected_seconds={"smoke": 150, "default": 230, "level2": 125})

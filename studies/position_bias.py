"""Study ``position_bias``: how well is the examination curve P(V=1 | rank) learnt from clicks
alone, and what does its error do to DCG as an off-policy estimate? (Joachims et al., WSDM'17;
Wang et al., WSDM'18; Agarwal et al., WSDM'19; Jeunen et al., KDD'24 Table 2's learnt `pbm`)

On the feed platform of `simrec_studies.scenarios` (day 0 of each level, position-based: the
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
target over R₀ (`simrec_studies.common.differences.offline_differences`: exposures of R₀ and R_t under the curve, clipping
m = 1 = labels C, m = ∞ = labels Q̂), against the exact online difference V(R_t) − V(R₀)
(`feed.online_value`). References: the true curve and `fit_view_model` on that log's own views.
Reported: bias and RMSE of Δ, TPR (improving targets whose `confidence` CI is above 0) and FPR
(harmful targets whose CI is above 0), over targets x signals x replications.

Cells: ``truth`` per level (exact online values), ``reference`` per (level, replication) and
``curves`` per (level, replication, N). Records (`COLUMNS`): one number per row.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import jax
import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simrec import feed, validate  # noqa: E402
from simrec.runner import ConfigError, Report, Study, cell_key  # noqa: E402
from simrec_studies import scenarios  # noqa: E402
from simrec_studies.common.differences import offline_differences  # noqa: E402
from simrec_studies.scenarios import NoisyOracle, Popularity, Trained  # noqa: E402

ESTIMATORS = ("randomisation", "regression_em", "harvesting", "harvesting_ratio", "logged_views")
#: the curves whose downstream DCG is scored (the ratio estimator's curve is only in the curve tables)
DOWNSTREAM = ("randomisation", "regression_em", "harvesting", "logged_views")
LABELS = {"randomisation": "randomisation (RandTop-K)", "regression_em": "regression-EM",
          "harvesting": "harvesting (AllPairs)", "harvesting_ratio": "harvesting (ratio to rank 1)",
          "logged_views": "logged views (fit_view_model)", "true": "true curve",
          "ope_views": "logged views of the OPE log"}
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
    #: platform, feed levels and the OPE log's size scenario.log_sessions (`simrec_studies.scenarios`);
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
        if self.signal not in scenarios.SIGNALS:
            raise ConfigError(f"signal must be one of {scenarios.SIGNALS}, got {self.signal!r}")
        if not self.sessions or any(isinstance(n, bool) or not isinstance(n, int) or n < 2 * len(self.harvest_rankers)
                                    for n in self.sessions) or len(set(self.sessions)) != len(self.sessions):
            raise ConfigError(f"sessions must be distinct integers >= 2 x len(harvest_rankers), got {self.sessions}")
        for name in ("replications", "em_iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
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
        try:
            validate.clipping_values("m", self.m)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence}")
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


# ---- cells ----------------------------------------------------------------------------------------

def cells(config: PositionBiasConfig) -> list[dict]:
    out = [{"part": "truth", "level": level} for level in config.levels]
    for level in config.levels:
        for seed in range(config.replications):
            out.append({"part": "reference", "level": level, "seed": seed})
            out += [{"part": "curves", "level": level, "seed": seed, "sessions": n} for n in config.sessions]
    return out


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0, with the config's rankers trained)."""
    platform: scenarios.Platform


def setup(key, config: PositionBiasConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    rankers = (config.logger, *config.harvest_rankers, *config.targets)
    return Shared(scenarios.platform(key, config.scenario, 0, rankers))


def _row(part: str, **values) -> dict:
    base = {"part": part, "seed": -1, "sessions": 0, "estimator": "", "rank": 0, "signal": "", "target": "",
            "m": math.nan, "statistic": "", "value": math.nan}
    return {**base, **values}


def _truth(config: PositionBiasConfig, platform, level: str) -> list[dict]:
    """Exact online value per signal of R₀ ("R0") and every target on day 0."""
    scenario = scenarios.day(platform, level, 0).scenario
    logger = scenarios.logging_policy(platform, level, scenarios.scores(platform, config.logger))
    policies = {"R0": logger, **{scenarios.ranker_label(r): scenarios.target_policy(
        platform, level, scenarios.scores(platform, r)) for r in config.targets}}
    rows = []
    for name, policy in policies.items():
        value = scenarios.online(None, platform, scenario, policy).mean
        rows += [_row("truth", signal=signal, target=name, statistic="exact", value=float(value[s]))
                 for s, signal in enumerate(scenarios.SIGNALS)]
    return rows


def _ope(root, config: PositionBiasConfig, platform, level: str, seed: int, views: dict, sessions: int) -> list[dict]:
    """DCG differences of every target over R₀ on the replication's OPE log (drawn from
    cell_key(root, {"part": "ope log", "level", "seed"}), the same log in every cell of the
    replication) under each curve of `views` {estimator: view model}; "ope_views" adds
    `fit_view_model` of the log itself."""
    day = scenarios.day(platform, level, 0).scenario
    logger = scenarios.logging_policy(platform, level, scenarios.scores(platform, config.logger))
    targets = {scenarios.ranker_label(r): scenarios.target_policy(platform, level, scenarios.scores(platform, r))
               for r in config.targets}
    log = feed.simulate(cell_key(root, {"part": "ope log", "level": level, "seed": seed}), day, logger,
                        config.scenario.log_sessions, logging_exposure=scenarios.logging_exposure(day, logger))
    if "ope_views" in views:
        views = {**views, "ope_views": feed.fit_view_model(log.viewed)}
    rows = []
    for estimator, view in views.items():
        out = offline_differences(log, logger, targets, view, config.m, confidence=config.confidence)
        n = config.scenario.log_sessions if estimator in ("true", "ope_views") else sessions
        for signal in scenarios.SIGNALS:
            for name in targets:
                summary = out[signal][name]["dcg"]
                rows += [_row("ope", sessions=n, estimator=estimator, signal=signal, target=name, m=float(m),
                              statistic=statistic, value=float(summary[statistic][i]))
                         for i, m in enumerate(config.m) for statistic in ("mean", "se", "low", "high")]
    return rows


def _curve_rows(estimator: str, sessions: int, estimate: feed.CurveEstimate, truth: np.ndarray) -> list[dict]:
    return [_row("curve", sessions=sessions, estimator=estimator, rank=k + 1, statistic=statistic, value=float(v))
            for k in range(truth.shape[0])
            for statistic, v in (("estimate", estimate.curve[k]), ("se", estimate.standard_error[k]),
                                 ("truth", truth[k]))]


def _curves(root, config: PositionBiasConfig, platform, cell: dict) -> tuple[list[dict], dict]:
    """Curve records of one (level, replication, N) and the curves as view models."""
    level, n = cell["level"], cell["sessions"]
    key = cell_key(root, cell)
    scenario = scenarios.day(platform, level, 0).scenario
    K = scenarios.level_config(config.scenario, level).feed_length
    truth = np.asarray(feed.view_probability(scenario.view, K), np.float64)
    signal = scenarios.SIGNALS.index(config.signal)
    n_users = config.scenario.world.n_users
    # (i) randomisation: N RandTop-K sessions around the logger's Sort
    base = scenarios.target_policy(platform, level, scenarios.scores(platform, config.logger))
    randomised = feed.randomised_top(base, n_users)
    log = feed.simulate(jax.random.fold_in(key, 0), scenario, randomised, n,
                        logging_exposure=scenarios.logging_exposure(scenario, randomised))
    estimates = {"randomisation": feed.randomisation_curve(np.asarray(log.rewards[signal]))}
    del log
    # (ii)-(iii) and logged views: N sessions split over the harvest rankers, pooled
    parts, viewed = [], []
    share = n // len(config.harvest_rankers)
    for i, ranker in enumerate(config.harvest_rankers):
        policy = scenarios.target_policy(platform, level, scenarios.scores(platform, ranker))
        log = feed.simulate(jax.random.fold_in(key, 1 + i), scenario, policy, share,
                            logging_exposure=scenarios.logging_exposure(scenario, policy))
        parts.append(feed.click_log(log, policy, config.signal))
        viewed.append(np.asarray(log.viewed))
    pooled = [np.concatenate(arrays) for arrays in zip(*parts)]
    estimates["regression_em"] = feed.regression_em(None, *pooled, iterations=config.em_iterations)
    estimates["harvesting"] = feed.harvesting_curve(None, *pooled)
    estimates["harvesting_ratio"] = feed.harvesting_curve(None, *pooled, method="ratio")
    fitted = np.asarray(feed.fit_view_model(np.concatenate(viewed)).survival, np.float64)
    estimates["logged_views"] = feed.CurveEstimate(fitted / fitted[0], np.full(K, np.nan))
    rows = [row for name, est in estimates.items() for row in _curve_rows(name, n, est, truth)]
    return rows, {name: feed.curve_view_model(est.curve) for name, est in estimates.items() if name in DOWNSTREAM}


def compute(key, config: PositionBiasConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell; `key` is the run's root key (a cell's logs draw from cell_key(key, cell),
    the OPE log from its replication's key, see `_ope`)."""
    level = cell["level"]
    platform = shared.platform
    if cell["part"] == "truth":
        rows = _truth(config, platform, level)
    elif cell["part"] == "reference":
        scenario = scenarios.day(platform, level, 0).scenario
        rows = _ope(key, config, platform, level, cell["seed"], {"true": scenario.view, "ope_views": None}, 0)
    else:
        rows, views = _curves(key, config, platform, cell)
        rows += _ope(key, config, platform, level, cell["seed"], views, cell["sessions"])
    return [{**row, "level": level, "seed": cell.get("seed", -1)} for row in rows]


# ---- report ----------------------------------------------------------------------------------------

def _curve_errors(records: pd.DataFrame) -> pd.DataFrame:
    """Per (level, estimator, sessions, seed): RMSE over the identified ranks, their number."""
    part = records[records.part == "curve"]
    wide = part.pivot_table(index=["level", "estimator", "sessions", "seed", "rank"], columns="statistic",
                            values="value", dropna=False).reset_index()
    wide["sq"] = (wide.estimate - wide.truth) ** 2
    wide["abs_rel"] = (wide.estimate - wide.truth).abs() / wide.truth
    grouped = wide.groupby(["level", "estimator", "sessions", "seed"])
    return grouped.agg(rmse=("sq", lambda s: math.sqrt(s.mean())), max_rel=("abs_rel", "max"),
                       identified=("estimate", lambda s: int(s.notna().sum())), ranks=("rank", "size")).reset_index()


def _error_table(errors: pd.DataFrame) -> pd.DataFrame:
    table = errors.groupby(["level", "estimator", "sessions"]).agg(
        rmse_mean=("rmse", "mean"), rmse_sd=("rmse", "std"), max_rel_error=("max_rel", "mean"),
        identified_ranks=("identified", "min"), ranks=("ranks", "first"), replications=("rmse", "size")).reset_index()
    table["estimator"] = pd.Categorical(table.estimator, [e for e in ESTIMATORS if e in set(table.estimator)])
    return table.sort_values(["level", "estimator", "sessions"]).assign(estimator=lambda t: t.estimator.astype(str))


def _slopes(errors: pd.DataFrame) -> pd.DataFrame:
    """Least-squares slope of log10 RMSE on log10 N per (level, estimator) (−1/2: root-N)."""
    rows = []
    for (level, estimator), g in errors.groupby(["level", "estimator"]):
        if g.sessions.nunique() >= 2:
            slope = np.polyfit(np.log10(g.sessions), np.log10(g.rmse), 1)[0]
            rows.append({"level": level, "estimator": estimator, "slope": slope})
    return pd.DataFrame(rows)


def _downstream(config: PositionBiasConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Bias, RMSE, TPR, FPR of the DCG difference per (level, m, estimator, sessions)."""
    truth = records[records.part == "truth"].set_index(["level", "signal", "target"]).value
    ope = records[records.part == "ope"].pivot_table(
        index=["level", "seed", "sessions", "estimator", "signal", "target", "m"], columns="statistic",
        values="value").reset_index()
    exact = truth.reindex(pd.MultiIndex.from_frame(ope[["level", "signal", "target"]])).to_numpy()
    base = truth.reindex(pd.MultiIndex.from_arrays([ope.level, ope.signal, ["R0"] * len(ope)])).to_numpy()
    ope["exact"] = exact - base
    ope["error"] = ope["mean"] - ope["exact"]
    improving = {scenarios.ranker_label(r) for r in config.improving}
    setting = ["level", "seed", "signal", "target", "m"]
    true_error = ope[ope.estimator == "true"].set_index(setting).error.abs()
    ope["vs_true"] = ope.error.abs() - true_error.reindex(pd.MultiIndex.from_frame(ope[setting])).to_numpy()
    rows = []
    for (level, m, estimator, sessions), g in ope.groupby(["level", "m", "estimator", "sessions"]):
        up = g[g.target.isin(improving) & (g.exact > 0)]
        down = g[~g.target.isin(improving) & (g.exact < 0)]
        rows.append({"level": level, "m": m, "estimator": estimator, "sessions": sessions, "n": len(g),
                     "bias": g.error.mean(), "bias_se": g.error.std(ddof=1) / math.sqrt(len(g)),
                     "rmse": math.sqrt((g.error ** 2).mean()), "mean_abs_exact": g.exact.abs().mean(),
                     "sign_agreement": float((np.sign(g["mean"]) == np.sign(g.exact)).mean()),
                     "n_improving": len(up), "TPR": float((up.low > 0).mean()) if len(up) else math.nan,
                     "n_harmful": len(down), "FPR": float((down.low > 0).mean()) if len(down) else math.nan,
                     "abs_error_minus_true": g.vs_true.mean(),
                     "abs_error_minus_true_se": g.vs_true.std(ddof=1) / math.sqrt(len(g))})
    out = pd.DataFrame(rows)
    order = {name: i for i, name in enumerate(("true", "ope_views") + ESTIMATORS)}
    return out.sort_values(["level", "m", "estimator", "sessions"], key=lambda c: c.map(order) if c.name ==
                           "estimator" else c).reset_index(drop=True)


def _figure_errors(errors: pd.DataFrame, levels):
    fig, axes = plt.subplots(1, len(levels), figsize=(5.2 * len(levels), 4.0), squeeze=False, sharey=True)
    for ax, level in zip(axes[0], levels):
        part = errors[errors.level == level]
        for estimator in ESTIMATORS:
            g = part[part.estimator == estimator].groupby("sessions").rmse
            if not len(g):
                continue
            mean, sd = g.mean(), g.std().fillna(0.0)
            ax.errorbar(mean.index, mean.values, yerr=sd.values, marker="o", capsize=3, label=LABELS[estimator])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(level)
        ax.set_xlabel("sessions N in the estimator's log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel("RMSE of the curve over ranks (mean ± sd over replications)")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _figure_curves(records: pd.DataFrame, levels):
    part = records[(records.part == "curve") & (records.seed == 0)]
    largest = part.sessions.max()
    fig, axes = plt.subplots(1, len(levels), figsize=(5.2 * len(levels), 4.0), squeeze=False)
    for ax, level in zip(axes[0], levels):
        g = part[(part.level == level) & (part.sessions == largest)]
        truth = g[(g.statistic == "truth") & (g.estimator == ESTIMATORS[0])].sort_values("rank")
        ax.plot(truth["rank"], truth.value, color="black", lw=2.5, label="truth")
        for estimator in ESTIMATORS:
            e = g[(g.statistic == "estimate") & (g.estimator == estimator)].sort_values("rank")
            ax.plot(e["rank"], e.value, lw=1, label=LABELS[estimator])
        ax.set_yscale("log")
        ax.set_xlabel("rank k")
        ax.set_ylabel("θ_k / θ_1")
        ax.set_title(f"{level}, N = {largest:,}, replication 0")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _figure_downstream(down: pd.DataFrame, levels):
    part = down[np.isinf(down.m)]
    fig, axes = plt.subplots(1, len(levels), figsize=(5.2 * len(levels), 4.0), squeeze=False, sharey=True)
    for ax, level in zip(axes[0], levels):
        g = part[part.level == level]
        for estimator in DOWNSTREAM:
            e = g[g.estimator == estimator].sort_values("sessions")
            ax.plot(e.sessions, e.rmse / e.mean_abs_exact, marker="o", label=LABELS[estimator])
        for ref, style in (("true", "--"), ("ope_views", ":")):
            r = g[g.estimator == ref]
            if len(r):
                ax.axhline(float(r.rmse.iloc[0] / r.mean_abs_exact.iloc[0]), color="black", ls=style,
                           label=LABELS[ref])
        ax.set_xscale("log")
        ax.set_xlabel("sessions N in the curve's log")
        ax.set_title(f"{level}: DCG (pbm, Q̂), m = ∞")
    axes[0, 0].set_ylabel("RMSE of Δ / mean |true Δ|")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _summary(config: PositionBiasConfig, table: pd.DataFrame, slopes: pd.DataFrame, down: pd.DataFrame) -> str:
    largest, smallest = max(config.sessions), min(config.sessions)
    lines = ["# Position bias from clicks", "",
             "How well three click-only estimators recover the examination curve θ_k = P(V=1 | rank k) of a "
             "simulated feed, and what using the learnt curve as DCG's `pbm` discount does to the off-policy "
             "estimate of a target's improvement over the logger. Both levels are position-based models "
             "(level 1: scroll budget, level 2: exponential, with level 2's cascade and satiation switched off), "
             f"day 0, {config.replications} replications per log size; the clicks are `{config.signal}`.", ""]
    lines += ["## Claims", ""]
    for level in config.levels:
        at = table[(table.level == level) & (table.sessions == largest)].set_index("estimator")
        parts = [f"{LABELS[e]} {_fmt(at.rmse_mean[e])} (sd {_fmt(at.rmse_sd[e])})" for e in ESTIMATORS if e in at.index]
        click_only = at.loc[[e for e in ESTIMATORS[:4] if e in at.index]]
        best = click_only.rmse_mean.idxmin()
        others = click_only.drop(best)
        se = click_only.rmse_sd / math.sqrt(config.replications)
        beaten = [e for e in others.index
                  if others.rmse_mean[e] - click_only.rmse_mean[best] > 2 * math.hypot(se[e], se[best])]
        tied = [LABELS[e] for e in others.index if e not in beaten]
        verdict = (f"{LABELS[best]} has the smallest error; " +
                   (f"it beats {', '.join(LABELS[e] for e in beaten)} beyond 2 SE" if beaten else "") +
                   ("; " if beaten and tied else "") +
                   (f"no difference established against {', '.join(tied)}" if tied else ""))
        lines.append(f"- **{level}, curve error at N = {largest:,}** (RMSE over ranks, mean over replications): "
                     + "; ".join(parts) + f". {verdict}.")
        s = slopes[slopes.level == level].set_index("estimator").slope
        lines.append(f"  Slope of log RMSE on log N ({smallest:,} … {largest:,}): "
                     + ", ".join(f"{LABELS[e]} {s[e]:.2f}" for e in ESTIMATORS if e in s.index)
                     + " (−0.5 = root-N; flatter means a bias floor).")
    inf = down[np.isinf(down.m)]
    for level in config.levels:
        g = inf[inf.level == level].set_index(["estimator", "sessions"])
        true = g.xs("true", level="estimator").iloc[0]
        items = []
        for estimator in DOWNSTREAM:
            if (estimator, largest) in g.index:
                r = g.loc[(estimator, largest)]
                diff, se = r.abs_error_minus_true, r.abs_error_minus_true_se
                verdict = ("worse than the true curve" if diff > 2 * se else "better than the true curve"
                           if diff < -2 * se else "no difference from the true curve established")
                items.append(f"{LABELS[estimator]} bias {_fmt(r.bias)} ± {_fmt(r.bias_se)}, RMSE {_fmt(r.rmse)}, "
                             f"TPR {r.TPR:.2f}, |error| − |error with the true curve| {_fmt(diff)} ± {_fmt(se)} "
                             f"({verdict})")
            if (estimator, smallest) in g.index:
                r0 = g.loc[(estimator, smallest)]
                items[-1] += f" (at N = {smallest:,}: RMSE {_fmt(r0.rmse)}, TPR {r0.TPR:.2f})"
        lines.append(f"- **{level}, downstream DCG (pbm, Q̂) of Δ = V(R_t) − V(R₀)** over "
                     f"{int(true.n)} (target, signal, replication) settings, mean |true Δ| "
                     f"{_fmt(true.mean_abs_exact)}: "
                     f"true curve bias {_fmt(true.bias)} ± {_fmt(true.bias_se)}, RMSE {_fmt(true.rmse)}, TPR "
                     f"{true.TPR:.2f}, FPR {_fmt(true.FPR)}; with curves learnt from N = {largest:,} sessions: "
                     + "; ".join(items) + ".")
    clipped = down[down.m == 1.0]
    for level in config.levels:
        g = clipped[clipped.level == level].set_index(["estimator", "sessions"])
        true = g.xs("true", level="estimator").iloc[0]
        spread = max(abs(g.loc[(e, largest)].bias - true.bias) for e in DOWNSTREAM if (e, largest) in g.index)
        lines.append(f"- **{level}, DCG (pbm, C) (m = 1)**: bias {_fmt(true.bias)} ± {_fmt(true.bias_se)} with the "
                     f"true curve (mean |true Δ| {_fmt(true.mean_abs_exact)}), TPR {true.TPR:.2f}; every curve learnt "
                     f"from N = {largest:,} sessions moves the bias by at most {_fmt(spread)}: with raw labels the "
                     f"estimator's own bias, not the curve, decides.")
    lines += ["", "## Evidence", "",
              "- `table_curve_error`: RMSE over ranks of each estimator's curve against the truth, mean and sd over "
              "replications, the mean of the largest relative error over ranks, and how many ranks each identified.",
              "- `table_slopes`: the slope of log RMSE on log N.",
              "- `table_downstream`: bias (± its SE over settings), RMSE, sign agreement, TPR and FPR of DCG's "
              "estimated difference against the exact online difference, per curve source, log size and m, and "
              "the mean paired difference of |error| against the true curve's on the same settings (± SE) "
              "(m = 1: raw labels C; m = ∞: Q̂). `true` uses the simulator's curve, `ope_views` `fit_view_model` "
              "on the OPE log's own views.",
              "- `fig_curve_error` (log-log), `fig_curves` (the curves at the largest N), `fig_downstream`.", "",
              "## Caveats", "",
              "- The model is exactly a PBM: examination depends on the rank only and clicks are V·Q. Under a cascade "
              "(level 2's default) the click-based estimators estimate a quality-dependent mixture, not θ_k.",
              "- Randomisation permutes the whole shown feed (RandTop-K); RandTop-n with n < K, or pairwise swaps "
              "(Joachims et al., WSDM'17), randomise less and identify only the first n ranks. Its log is a "
              "separate, fully randomised log of N sessions, not a share of the logger's traffic.",
              "- Harvesting and EM receive N sessions split equally over the rankers "
              f"{', '.join(scenarios.ranker_label(r) for r in config.harvest_rankers)} (deterministic Sorts on the "
              "same candidate generator), and need the full shown rankings, which `feed.click_log` restores for "
              "deterministic rankers only. Their accuracy depends on how much these rankings overlap; "
              "noisy oracles of several noise levels are an assumption of convenience, not Agarwal et al.'s "
              "production A/B variants.",
              "- Regression-EM's relevance model is a (user, item) table (Wang et al. regress it on features with "
              "GBDT); with a misspecified relevance model EM is biased in ways this study does not show.",
              "- Curves are relative to rank 1, which clicks alone identify; in simrec S(1) = 1, so relative = "
              "absolute. Downstream, each estimated curve is projected onto a non-increasing table "
              "(`feed.curve_view_model`) before use.",
              "- Downstream settings are few (targets x signals x replications on one day), so TPR and FPR are "
              "coarse; the OPE log is the scenario's default size, so the true curve itself carries IPS noise."]
    return "\n".join(lines)


def report(config: PositionBiasConfig, records: pd.DataFrame) -> Report:
    levels = [level for level in config.levels if level in set(records.level)]
    errors = _curve_errors(records)
    table = _error_table(errors)
    slopes = _slopes(errors)
    down = _downstream(config, records)
    return Report(tables={"table_curve_error": table, "table_slopes": slopes, "table_downstream": down},
                  figures={"fig_curve_error": _figure_errors(errors, levels),
                           "fig_curves": _figure_curves(records, levels),
                           "fig_downstream": _figure_downstream(down, levels)},
                  summary=_summary(config, table, slopes, down))


STUDY = Study(
    name="position_bias",
    description="The examination curve learnt from clicks only (randomisation, regression-EM, intervention "
                "harvesting): its error against log size, and DCG's bias and TPR when it replaces the true curve.",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS, setup=setup, cache_setup=True,
    expected_seconds={"smoke": 130, "default": 480, "paper": 1200},
)

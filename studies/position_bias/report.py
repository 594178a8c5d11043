"""The position-bias study's report (`simrec_studies.position_bias`): curve errors against the
log size, their log-log slopes, the downstream bias / RMSE / TPR / FPR of DCG under each curve, the
prose and figures."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simrec import reporting
from simrec.runner import Report
from simrec_studies.common import scenarios
from simrec_studies.position_bias.compute import DOWNSTREAM, ESTIMATORS

if TYPE_CHECKING:
    from simrec_studies.position_bias import PositionBiasConfig

__all__ = ["LABELS", "report"]

LABELS = {"randomisation": "randomisation (RandTop-K)", "regression_em": "regression-EM",
          "harvesting": "harvesting (AllPairs)", "harvesting_ratio": "harvesting (ratio to rank 1)",
          "logged_views": "logged views (fit_view_model)", "true": "true curve",
          "ope_views": "logged views of the OPE log"}


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
    """Least-squares slope of log10 RMSE on log10 N per (level, estimator) (`reporting.loglog_fit`;
    −1/2: root-N)."""
    rows = []
    for (level, estimator), g in errors.groupby(["level", "estimator"]):
        if g.sessions.nunique() >= 2:
            slope = reporting.loglog_fit(g.sessions, g.rmse).exponent
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
    keys = ["level", "m", "estimator", "sessions"]
    bias = reporting.mean_se(ope, keys, "error").set_index(keys)
    vs_true = reporting.mean_se(ope, keys, "vs_true").set_index(keys)
    rows = []
    for group, g in ope.groupby(keys):
        level, m, estimator, sessions = group
        up = g[g.target.isin(improving) & (g.exact > 0)]
        down = g[~g.target.isin(improving) & (g.exact < 0)]
        rows.append({"level": level, "m": m, "estimator": estimator, "sessions": sessions, "n": len(g),
                     "bias": bias.loc[group, "mean"], "bias_se": bias.loc[group, "se"],
                     "rmse": math.sqrt((g.error ** 2).mean()), "mean_abs_exact": g.exact.abs().mean(),
                     "sign_agreement": float((np.sign(g["mean"]) == np.sign(g.exact)).mean()),
                     "n_improving": len(up), "TPR": float((up.low > 0).mean()) if len(up) else math.nan,
                     "n_harmful": len(down), "FPR": float((down.low > 0).mean()) if len(down) else math.nan,
                     "abs_error_minus_true": vs_true.loc[group, "mean"],
                     "abs_error_minus_true_se": vs_true.loc[group, "se"]})
    out = pd.DataFrame(rows)
    order = {name: i for i, name in enumerate(("true", "ope_views") + ESTIMATORS)}
    return out.sort_values(["level", "m", "estimator", "sessions"], key=lambda c: c.map(order) if c.name ==
                           "estimator" else c).reset_index(drop=True)


def _figure_errors(errors: pd.DataFrame, levels):
    with reporting.theme():
        fig, axes = reporting.figure(1, len(levels), width=5.2, height=4.0, sharey=True)
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
    with reporting.theme():
        part = records[(records.part == "curve") & (records.seed == 0)]
        largest = part.sessions.max()
        fig, axes = reporting.figure(1, len(levels), width=5.2, height=4.0)
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
    with reporting.theme():
        part = down[np.isinf(down.m)]
        fig, axes = reporting.figure(1, len(levels), width=5.2, height=4.0, sharey=True)
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


def _curve_lines(config: PositionBiasConfig, errors: pd.DataFrame, table: pd.DataFrame,
                 slopes: pd.DataFrame) -> list[str]:
    """Per level: each curve's error at the largest N, the smallest against the others (the 2-SE
    rule over replications, `reporting.verdict`), and the log-log slopes."""
    largest, smallest = max(config.sessions), min(config.sessions)
    lines = []
    for level in config.levels:
        at = table[(table.level == level) & (table.sessions == largest)].set_index("estimator")
        parts = [f"{LABELS[e]} {_fmt(at.rmse_mean[e])} (sd {_fmt(at.rmse_sd[e])})" for e in ESTIMATORS if e in at.index]
        click_only = at.loc[[e for e in ESTIMATORS[:4] if e in at.index]]
        best = click_only.rmse_mean.idxmin()
        others = click_only.drop(best)
        se = errors[(errors.level == level) & (errors.sessions == largest)].pipe(
            reporting.mean_se, "estimator", "rmse").set_index("estimator").se
        beaten = [e for e in others.index if reporting.verdict(others.rmse_mean[e] - click_only.rmse_mean[best],
                                                               math.hypot(se[e], se[best])).verdict == "holds"]
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
    return lines


def _downstream_lines(config: PositionBiasConfig, down: pd.DataFrame) -> list[str]:
    """Per level: DCG (pbm, Q̂, m = ∞) under the true curve and under each learnt one, each against
    the true curve's |error| on the same settings (`reporting.verdict`)."""
    largest, smallest = max(config.sessions), min(config.sessions)
    lines = []
    inf = down[np.isinf(down.m)]
    for level in config.levels:
        g = inf[inf.level == level].set_index(["estimator", "sessions"])
        true = g.xs("true", level="estimator").iloc[0]
        items = []
        for estimator in DOWNSTREAM:
            if (estimator, largest) in g.index:
                r = g.loc[(estimator, largest)]
                diff, se = r.abs_error_minus_true, r.abs_error_minus_true_se
                verdict = {"holds": "worse than the true curve", "fails": "better than the true curve"}.get(
                    reporting.verdict(diff, se).verdict, "no difference from the true curve established")
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
    return lines


def _clipped_lines(config: PositionBiasConfig, down: pd.DataFrame) -> list[str]:
    """Per level: DCG with raw labels (m = 1), whose bias no curve moves much."""
    largest = max(config.sessions)
    lines = []
    clipped = down[down.m == 1.0]
    for level in config.levels:
        g = clipped[clipped.level == level].set_index(["estimator", "sessions"])
        true = g.xs("true", level="estimator").iloc[0]
        spread = max(abs(g.loc[(e, largest)].bias - true.bias) for e in DOWNSTREAM if (e, largest) in g.index)
        lines.append(f"- **{level}, DCG (pbm, C) (m = 1)**: bias {_fmt(true.bias)} ± {_fmt(true.bias_se)} with the "
                     f"true curve (mean |true Δ| {_fmt(true.mean_abs_exact)}), TPR {true.TPR:.2f}; every curve learnt "
                     f"from N = {largest:,} sessions moves the bias by at most {_fmt(spread)}: with raw labels the "
                     f"estimator's own bias, not the curve, decides.")
    return lines


def _evidence_and_caveats(config: PositionBiasConfig) -> list[str]:
    return ["", "## Evidence", "",
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


def _summary(config: PositionBiasConfig, errors: pd.DataFrame, table: pd.DataFrame, slopes: pd.DataFrame,
             down: pd.DataFrame) -> str:
    lines = ["# Position bias from clicks", "",
             "How well three click-only estimators recover the examination curve θ_k = P(V=1 | rank k) of a "
             "simulated feed, and what using the learnt curve as DCG's `pbm` discount does to the off-policy "
             "estimate of a target's improvement over the logger. Both levels are position-based models "
             "(level 1: scroll budget, level 2: exponential, with level 2's cascade and satiation switched off), "
             f"day 0, {config.replications} replications per log size; the clicks are `{config.signal}`.", ""]
    lines += ["## Claims", ""]
    lines += _curve_lines(config, errors, table, slopes) + _downstream_lines(config, down)
    lines += _clipped_lines(config, down) + _evidence_and_caveats(config)
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
                  summary=_summary(config, errors, table, slopes, down))

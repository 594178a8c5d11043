"""The sensitivity study's report (`simrec_studies.sensitivity`): the settings and their
verification, TPR / mean p / FPR per metric and m, bias and RMSE of the lift, the top-10 % iDCG
split, Jeunen et al.'s Fig. 1 claims beside ours (`Report(claims=...)`), the prose and figures."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from simrec import reporting, stats
from simrec.reporting import Claim
from simrec.runner import Report
from simrec_studies.common import scenarios
from simrec_studies.common.deployed import is_deployed
from simrec_studies.sensitivity.compute import AA, AA_LOGS, METRICS

if TYPE_CHECKING:
    from simrec_studies.sensitivity import SensitivityConfig

__all__ = ["NULL_KINDS", "PAPER_SIGN_AGREEMENT", "FIGURE1_SCOPE", "report"]

NULL_KINDS = ("aa", "aa_logs", "harmful")          # settings where a CI above 0 is a false positive
SOURCE = "Jeunen et al. KDD'24 §6.2, Fig. 1"
#: Fig. 1's own settings: the deployed change (R_t = Sort(rt)) on the 2nd-level feed, every signal
#: and day; the scope's null settings (A/A, harmful) are the level's
FIGURE1_LEVEL, FIGURE1_TARGET = "level2", "rt"
FIGURE1_SCOPE = f"Fig. 1: {FIGURE1_LEVEL} × {FIGURE1_TARGET}"
#: Jeunen et al. KDD'24 §6.2: every offline estimator agreed in sign with the online effect
PAPER_SIGN_AGREEMENT = 1.0
#: what Fig. 1 shows (the figure's values are not in the text): its 20 significant online
#: improvements (5 days x 4 signals) on the 2nd-level feed, against m in {1, 2, ..., 4096, ∞}
PAPER = {"peak": "TPR rises once m > 1 (IPS weighting) and falls again at m = ∞ (Fig. 1a; 20 settings)",
         "infinite": "unclipped DCG's variance harms its TPR (Fig. 1a), sign agreement kept",
         "dcg_vs_ndcg": "DCG's TPR above nDCG's, its mean p below, over a wide range of m (Fig. 1a, 1b)",
         "sign": "100 % for every estimator (20 settings)"}

def _settings(config: SensitivityConfig, records: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (level, day, signal, target) with its truth and verification."""
    kinds = {**{scenarios.ranker_label(r): "improving" for r in config.improving},
             **{scenarios.ranker_label(r): "harmful" for r in config.harmful}}
    labels = [scenarios.ranker_label(r) for r in config.targets]
    truth = records[records.part == "truth"]
    rows = []
    for (level, day), cell in truth.groupby(["level", "day"], sort=False):
        value = {(s, n, stat): v for s, n, stat, v in zip(cell.signal, cell.target, cell.statistic, cell.value)}
        for signal in config.scenario.signals.names:
            base, base_se = value[signal, "R0", "exact"], value[signal, "R0", "exact_se"]
            common = {"level": level, "day": day, "signal": signal, "online_R0": base}
            rows.append({**common, "target": AA, "kind": "aa", "exact_diff": 0.0, "exact_se": 0.0, "exact_lift": 0.0})
            rows += [{**common, "target": name + AA_LOGS, "kind": "aa_logs", "exact_diff": 0.0, "exact_se": 0.0,
                      "exact_lift": 0.0} for name in labels]
            for name in labels:
                diff = value[signal, name, "exact"] - base
                row = {**common, "target": name, "kind": kinds[name], "exact_diff": diff,
                       "exact_se": math.hypot(value[signal, name, "exact_se"], base_se), "exact_lift": diff / base}
                if (signal, name, "ab_mean") in value:
                    row["ab_diff"] = value[signal, name, "ab_mean"] - value[signal, "R0", "ab_mean"]
                    row["ab_se"] = math.hypot(value[signal, name, "ab_se"], value[signal, "R0", "ab_se"])
                    row["ab_p"] = stats.z_test(row["ab_diff"], row["ab_se"])
                rows.append(row)
    frame = pd.DataFrame(rows).reindex(columns=[
        "level", "day", "signal", "target", "kind", "online_R0", "exact_diff", "exact_se", "exact_lift",
        "ab_diff", "ab_se", "ab_p"])
    improving = (frame.kind == "improving").to_numpy()
    frame["ab_p_holm"] = np.nan
    frame.loc[improving, "ab_p_holm"] = stats.holm_bonferroni(frame.loc[improving, "ab_p"].to_numpy())[1]
    frame["verified"] = np.select([improving, frame.kind == "harmful"],
                                  [(frame.exact_diff > 0) & (frame.ab_p < config.ab_alpha), frame.exact_diff < 0],
                                  True)                                                    # A/A: by construction
    return frame


def _offline_rows(config: SensitivityConfig, records: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One row per (level, day, m, signal, target, metric) for the m of config.m, in the order
    (level, day, m as in config.m, signal, target, metric) — each target's paired comparison, then
    its A/A-on-two-logs comparison under the name name + AA_LOGS — with the statistics as columns,
    R₀'s own value ("base") and the target's lost exposure (0 on two logs); and max 1/ε₀ per level."""
    log = records[records.part == "log"]
    weights = log[log.statistic == "max_weight"].groupby("level", sort=False).value.max().to_dict()
    lost = log[log.statistic == "lost"].set_index(["level", "day", "target"]).value
    part = records[records.part.isin(["paired", "two logs"]) & records.m.isin(config.m)]
    order = [(config.levels.index(level), day, config.m.index(m))
             for level, day, m in zip(part.level, part.day, part.m)]
    part = part.assign(order=order).sort_values("order", kind="stable")
    keys = ["level", "day", "m", "signal", "part", "target", "metric"]
    wide = part.set_index([*keys, "statistic"])["value"].unstack("statistic")
    wide = wide.reindex(pd.MultiIndex.from_frame(part[keys].drop_duplicates()))
    wide = wide[["mean", "se", "low", "high", "p", "top", "rest", "value", "value_se"]].reset_index()
    wide.columns.name = None
    setting = ["level", "day", "m", "signal", "metric"]
    base = wide[wide.target == "R0"].set_index(setting).value
    rows = wide[wide.target != "R0"].reset_index(drop=True)
    rows["base"] = base.reindex(pd.MultiIndex.from_frame(rows[setting])).to_numpy()
    two_logs = (rows.part == "two logs").to_numpy()
    rows["lost"] = np.where(two_logs, 0.0, lost.reindex(pd.MultiIndex.from_frame(rows[["level", "day", "target"]]))
                            .to_numpy())
    rows["target"] = np.where(two_logs, rows.target + AA_LOGS, rows.target)
    return rows.drop(columns="part"), weights


def _frame(config: SensitivityConfig, records: pd.DataFrame):
    settings = _settings(config, records)
    offline, weights = _offline_rows(config, records)
    frame = offline.merge(settings, on=["level", "day", "signal", "target"], validate="many_to_one")
    for column in ("mean", "top", "rest"):
        frame[f"{column}_lift"] = frame[column] / frame["base"]
    return settings, frame, weights


def _scopes(config: SensitivityConfig, frame: pd.DataFrame):
    """(scope, its rows): every level, each level, and Fig. 1's settings (`FIGURE1_SCOPE`) when
    the config scores that level and target."""
    yield "all levels", frame
    for level in config.levels:
        yield level, frame[frame.level == level]
    if FIGURE1_LEVEL in config.levels and FIGURE1_TARGET in map(scenarios.ranker_label, config.improving):
        yield FIGURE1_SCOPE, frame[(frame.level == FIGURE1_LEVEL)
                                   & ((frame.kind != "improving") | (frame.target == FIGURE1_TARGET))]


def _rates(config: SensitivityConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """TPR, mean p, sign agreement and FPR per (scope, metric, m), over the verified settings, then
    95 % Wilson intervals of each rate (`stats.sensitivity_from_moments`; TPR_low, TPR_high,
    FPR_<kind>_low, FPR_<kind>_high)."""
    rows = []
    for scope, part in _scopes(config, frame[frame.verified]):
        for (metric, m), g in part.groupby(["metric", "m"], sort=True):
            row, intervals = {"scope": scope, "metric": metric, "m": m}, {}
            for kind in NULL_KINDS:
                group = g[g.kind.isin(["improving", kind])]
                summary = stats.sensitivity_from_moments(group["mean"], group["se"],
                                                         (group.kind == "improving").to_numpy(), config.confidence)
                row.update({"n_improving": summary.n_positive, "TPR": summary.tpr, "mean_p": summary.mean_p_value,
                            "sign_agreement": summary.sign_agreement,
                            f"n_{kind}": summary.n_negative, f"FPR_{kind}": summary.fpr})
                intervals[f"FPR_{kind}_low"], intervals[f"FPR_{kind}_high"] = summary.fpr_low, summary.fpr_high
            intervals["TPR_low"], intervals["TPR_high"] = summary.tpr_low, summary.tpr_high
            row.update(intervals)
            rows.append(row)
    return pd.DataFrame(rows)


def _bias(config: SensitivityConfig, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Bias and RMSE over the verified non-A/A settings: of the relative lift (DCG and nDCG) per
    (scope, kind), and of DCG's difference against the exact online difference per (level, signal)."""
    kept = frame[frame.verified & frame.kind.isin(["improving", "harmful"])]
    lift = []
    for scope, part in _scopes(config, kept):
        for kind in ("all", "improving", "harmful"):
            chosen = part if kind == "all" else part[part.kind == kind]
            for (metric, m), g in chosen.groupby(["metric", "m"], sort=True):
                bias, rmse = stats.bias_rmse((g.mean_lift - g.exact_lift).to_numpy(), 0.0)
                lift.append({"scope": scope, "kind": kind, "metric": metric, "m": m, "n": len(g),
                             "mean_true_lift": g.exact_lift.mean(), "mean_estimated_lift": g.mean_lift.mean(),
                             "bias": bias, "rmse": rmse, "sd": math.sqrt(max(rmse ** 2 - bias ** 2, 0.0))})
    diff = []
    for (level, signal, m), g in kept[kept.metric == "dcg"].groupby(["level", "signal", "m"], sort=True):
        bias, rmse = stats.bias_rmse((g["mean"] - g.exact_diff).to_numpy(), 0.0)
        diff.append({"level": level, "signal": signal, "m": m, "n": len(g),
                     "mean_abs_exact_diff": g.exact_diff.abs().mean(),
                     "bias": bias, "rmse": rmse, "relative_rmse": rmse / g.exact_diff.abs().mean()})
    return pd.DataFrame(lift), pd.DataFrame(diff)


def _mechanism(config: SensitivityConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """Mean lift of the verified improving settings and the parts of it from the sessions whose
    iDCG is in the top 10 % and from the rest, per (scope, metric, m)."""
    rows = []
    for scope, part in _scopes(config, frame[frame.verified & (frame.kind == "improving")]):
        for (metric, m), g in part.groupby(["metric", "m"], sort=True):
            rows.append({"scope": scope, "metric": metric, "m": m, "n": len(g), "lift": g.mean_lift.mean(),
                         "from_top_10pct_idcg": g.top_lift.mean(), "from_rest": g.rest_lift.mean(),
                         "true_lift": g.exact_lift.mean()})
    return pd.DataFrame(rows)


def _m_position(m: float, grid) -> float:
    """x position of m: log2 m, and ∞ one and a half octaves beyond the largest finite m."""
    finite = [v for v in grid if math.isfinite(v)]
    return math.log2(m) if math.isfinite(m) else (math.log2(max(finite)) if finite else 0.0) + 1.5


def _curves(config, data: pd.DataFrame, y: str, ylabel: str, title: str, *, style: str | None = None,
            log: bool = False, zero: bool = False, rate: bool = False):
    """One panel per scope: y against m (∞ at the right end), a line per metric (and style)."""
    import seaborn as sns
    scopes = list(dict.fromkeys(data.scope))
    plot = data.assign(x=[_m_position(m, config.m) for m in data.m])
    with reporting.theme():
        fig, axes = reporting.figure(1, len(scopes), width=4.2, height=3.4, sharey=True)
        for ax, scope in zip(axes[0], scopes):
            sns.lineplot(data=plot[plot.scope == scope], x="x", y=y, hue="metric", style=style, markers=True,
                         ax=ax, palette={"dcg": "C0", "ndcg": "C1"}, hue_order=list(METRICS))
            if log:
                ax.set_yscale("log")
            if zero:
                ax.axhline(0.0, color="grey", lw=0.8)
            if rate:
                ax.set_ylim(-0.03, 1.03)
            ax.set_xticks([_m_position(m, config.m) for m in config.m],
                          ["∞" if math.isinf(m) else f"{m:g}" for m in config.m], rotation=60, fontsize=7)
            ax.set_xlabel("clipping m")
            ax.set_title(scope)
            ax.set_ylabel(ylabel)
            if ax.get_legend() is not None:
                if ax is axes[0][-1]:
                    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, title_fontsize=7)
                else:
                    ax.get_legend().remove()
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
    return fig


def _m_text(m: float) -> str:
    return "∞" if math.isinf(m) else f"{m:g}"


def _yes(holds: bool, p_value: float) -> str:
    return "no" if not holds else "yes" if p_value < 0.05 else "yes, but not significantly (McNemar p >= 0.05)"


def _claim_verdict(holds: bool, p_value: float) -> str:
    """`_yes` as a claim's verdict: a direction that holds without McNemar p < 0.05 is a tie."""
    return "not reproduced" if not holds else "reproduced" if p_value < 0.05 else "tie"


@dataclass(frozen=True)
class Figure1:
    """Fig. 1's comparisons on one scope: DCG's TPR and mean p against m (best moderate m, McNemar's
    exact test of it against m = ∞ on the settings detected at one of the two only), and how
    often DCG beats nDCG over the grid."""
    scope: str
    settings: int
    tpr: dict                   # {metric: TPR per m}
    p: dict                     # {metric: mean p per m}
    wilson: dict                # {m: "[low, high]" of DCG's TPR}
    best: float
    best_ms: list
    only_best: int
    only_inf: int
    mcnemar: float
    wins: int
    ties: int
    p_wins: int

    @property
    def peak(self) -> bool:
        return self.best > self.tpr["dcg"].loc[1.0] and self.best > self.tpr["dcg"].loc[math.inf]

    @property
    def infinite_loses(self) -> bool:
        return self.tpr["dcg"].loc[math.inf] < self.tpr["dcg"].max()

    @property
    def dcg_wins(self) -> bool:
        n = len(self.tpr["dcg"])
        return self.wins >= n / 2 and self.p_wins >= n / 2


def _figure1(config, rates: pd.DataFrame, frame: pd.DataFrame) -> list[Figure1]:
    """`Figure1` of each scope, or [] when the grid lacks m = 1, a moderate m or m = ∞."""
    moderate = [m for m in config.m if 1 < m < math.inf]
    if 1.0 not in config.m or math.inf not in config.m or not moderate:
        return []
    out = []
    improving = frame[frame.verified & (frame.kind == "improving") & (frame.metric == "dcg")]
    for scope, part in _scopes(config, improving):
        r = rates[rates.scope == scope].set_index(["metric", "m"])
        if part.empty or r.empty:
            continue
        tpr = {k: r.loc[k].TPR for k in METRICS}
        p = {k: r.loc[k].mean_p for k in METRICS}
        d_tpr, d_p = tpr["dcg"], p["dcg"]
        best = d_tpr.loc[moderate].max()
        best_ms = [m for m in moderate if d_tpr.loc[m] == best]
        detected = part.assign(hit=part.low > 0).pivot_table(
            index=["level", "day", "signal", "target"], columns="m", values="hit", aggfunc="first")
        test = stats.mcnemar(detected[best_ms[0]].to_numpy(bool), detected[math.inf].to_numpy(bool), exact=True)
        wilson = {m: f"[{r.loc[('dcg', m)].TPR_low:.2f}, {r.loc[('dcg', m)].TPR_high:.2f}]"
                  for m in (1.0, best_ms[0], math.inf)}
        out.append(Figure1(scope, len(detected), tpr, p, wilson, best, best_ms, test.only_first, test.only_second,
                           test.p_value, int((d_tpr > tpr["ndcg"]).sum()), int((d_tpr == tpr["ndcg"]).sum()),
                           int((d_p < p["ndcg"]).sum())))
    return out


def _verdicts(figure1: list[Figure1]) -> list[str]:
    """Claim (d) (Jeunen et al. Fig. 1) on each scope: TPR and mean p of DCG and nDCG against m,
    with the three verdicts (`Figure1`)."""
    if not figure1:
        return ["- the grid needs m = 1, some 1 < m < ∞ and m = ∞ to test claim (d)."]
    lines = []
    for f in figure1:
        d_tpr, d_p, n = f.tpr["dcg"], f.p["dcg"], len(f.tpr["dcg"])
        lines.append(
            f"- **{f.scope}** ({f.settings} verified improving settings): DCG's TPR is "
            f"{d_tpr.loc[1.0]:.2f} {f.wilson[1.0]} at m = 1, at most {f.best:.2f} {f.wilson[f.best_ms[0]]} for "
            f"1 < m < ∞ (m = {', '.join(map(_m_text, f.best_ms))}) and {d_tpr.loc[math.inf]:.2f} "
            f"{f.wilson[math.inf]} at m = ∞ (95 % Wilson intervals, settings as independent trials; {f.only_best} "
            f"settings detected only at m = {_m_text(f.best_ms[0])}, {f.only_inf} only at ∞; McNemar p = "
            f"{f.mcnemar:.2g}); its mean p is {d_p.loc[1.0]:.2g} at m = 1, lowest {d_p.min():.2g} at m = "
            f"{_m_text(d_p.idxmin())} and {d_p.loc[math.inf]:.2g} at m = ∞. nDCG's TPR ranges "
            f"{f.tpr['ndcg'].min():.2f}–{f.tpr['ndcg'].max():.2f}. (i) moderate clipping maximises TPR: "
            f"**{_yes(f.peak, f.mcnemar)}**; (ii) m = ∞ loses sensitivity: **{_yes(f.infinite_loses, f.mcnemar)}**; "
            f"(iii) DCG beats nDCG over a wide range of m: **{'yes' if f.dcg_wins else 'no'}** (higher TPR at "
            f"{f.wins} of {n} m, ties {f.ties}; lower mean p at {f.p_wins} of {n}).")
    return lines


def _claims(figure1: list[Figure1], sign: list[Claim]) -> list[Claim]:
    """Fig. 1's three claims on each scope beside the paper's statements, then sign agreement."""
    out = []
    for f in figure1:
        d_tpr, n = f.tpr["dcg"], len(f.tpr["dcg"])
        where = f"table_sensitivity, table_dcg_vs_ndcg, fig_tpr ({f.scope}, {f.settings} improving settings)"
        out += [
            Claim(SOURCE, f"moderate clipping (1 < m < ∞) gives DCG its highest TPR ({f.scope})", PAPER["peak"],
                  f"TPR {d_tpr.loc[1.0]:.2f} at m = 1, {f.best:.2f} at m = {_m_text(f.best_ms[0])}, "
                  f"{d_tpr.loc[math.inf]:.2f} at m = ∞ (McNemar p = {f.mcnemar:.2g})",
                  _claim_verdict(f.peak, f.mcnemar), where=where),
            Claim(SOURCE, f"no clipping (m = ∞) loses DCG's sensitivity ({f.scope})", PAPER["infinite"],
                  f"TPR {d_tpr.loc[math.inf]:.2f} at m = ∞ against {d_tpr.max():.2f} at best "
                  f"(McNemar p = {f.mcnemar:.2g})", _claim_verdict(f.infinite_loses, f.mcnemar), where=where),
            Claim(SOURCE, f"DCG is more sensitive than nDCG over a wide range of m ({f.scope})", PAPER["dcg_vs_ndcg"],
                  f"higher TPR at {f.wins} of {n} m (ties {f.ties}), lower mean p at {f.p_wins} of {n}",
                  "reproduced" if f.dcg_wins else "not reproduced", where=where)]
    return out + sign


def _deployed(config) -> bool:
    """Whether every scored level runs the deployed regime (`simrec_studies.common.deployed`)."""
    return is_deployed(config.scenario, config.levels)


def _logged_text(config, weights: dict) -> str:
    """How the logger showed the items a better ranker promotes, and the weights that follow."""
    largest = ", ".join(f"{weights[l]:.0f} ({l})" for l in config.levels if l in weights)
    if _deployed(config):
        return ("The logger is deterministic and shows every candidate (K = N), so a promoted item was logged "
                "at its own, deeper rank under R₀, and its weight is the ratio of the view probabilities at the "
                f"two ranks, S(rank under R_t) / S(rank under R₀), at most 1/ε₀ = 1/S(rank under R₀): up to {largest}:")
    return ("The logger explores with ε = "
            + ", ".join(f"{scenarios.level_config(config.scenario, l).epsilon:g} ({l})" for l in config.levels)
            + f", so the promoted items were mostly logged through exploration, with weights 1/ε₀ up to {largest}:")


def _violation_text(config, improving: pd.DataFrame, level: str, m_hi: float) -> str:
    """For a level that breaks DCG's Asm. 2–3 (a cascade or satiation): the bias left where clipping
    no longer acts, beside that of the levels without violations. improving: the improving targets'
    lift rows indexed by (scope, metric, m)."""
    lv = scenarios.level_config(config.scenario, level)
    if not lv.breaks_session:
        return ""
    clean = [other for other in config.levels if other != level and (other, "dcg", m_hi) in improving.index
             and not scenarios.level_config(config.scenario, other).breaks_session]
    return (f" At m = {_m_text(m_hi)} clipping no longer acts: the bias left, "
            f"{improving.loc[(level, 'dcg', m_hi)].bias:+.3f}, comes from this level's "
            + " and ".join(lv.violations())
            + ", which break DCG's assumptions (and shorten the depths the position model is learnt from)"
            + "".join(f"; {other}, without them, ends at {improving.loc[(other, 'dcg', m_hi)].bias:+.3f}"
                      for other in clean) + ".")


def _why(config, lift, mechanism, weights) -> list[str]:
    """The mechanisms behind the verdicts, with the numbers from the tables."""
    improving = lift[lift.kind == "improving"].set_index(["scope", "metric", "m"]).sort_index()
    if improving.empty:
        return []
    m_low, m_hi = min(config.m), max(config.m)
    every = improving.loc[("all levels", "dcg")]
    out = [
        f"*Why DCG's sensitivity grows with m.* A better ranker moves exposure to items the logger rarely "
        f"shows. Clipping at m removes part of their credit, which biases the difference by "
        f"−E Σ q (ε − ε₀)(1 − m ε₀)₊ (`simrec.ope`): against the change. Over the verified improving "
        f"settings "
        f"the estimated DCG lift averages {every.loc[m_low].mean_estimated_lift:+.3f} at m = {_m_text(m_low)} "
        f"and {every.loc[m_hi].mean_estimated_lift:+.3f} at m = {_m_text(m_hi)}, against a true "
        f"{every.loc[m_low].mean_true_lift:+.3f}: small m makes a better ranker look worse (m = 1 scores the "
        f"raw labels C, which favour the logger that produced them). " + _logged_text(config, weights)]
    for level in config.levels:
        if (level, "dcg") not in improving.index.droplevel(2):
            continue
        curve = improving.loc[(level, "dcg")]
        everything = lift[(lift.scope == level) & (lift.kind == "all") & (lift.metric == "dcg")].set_index("m")
        best = everything.rmse.idxmin()
        out.append(
            f"- {level}: the bias of the improving targets' lift falls from {curve.loc[m_low].bias:+.3f} "
            f"(m = {_m_text(m_low)}) to {curve.loc[m_hi].bias:+.3f} (m = {_m_text(m_hi)}) while its spread "
            f"across settings is {curve.loc[best].sd:.3f} at m = {_m_text(best)} and {curve.loc[m_hi].sd:.3f} at "
            f"m = {_m_text(m_hi)}; the RMSE over all verified settings is smallest at m = {_m_text(best)} "
            f"({everything.loc[best].rmse:.3f}, bias {everything.loc[best].bias:+.3f}) — "
            + (f"at or above the largest weight {weights[level]:.0f} every m is the unclipped estimator, so the "
               f"best m and no clipping coincide." if best >= weights.get(level, math.inf) else
               "the bias–variance trade-off of the paper: clipping below the largest weights trades some "
               "bias for less variance." if curve.loc[best].sd < 0.8 * curve.loc[m_hi].sd else
               "clipping there changes little: the unclipped estimator is hardly noisier on this level.")
            + _violation_text(config, improving, level, m_hi))
    out[-1] += " See `table_bias_lift` and `fig_bias_rmse`."
    mech = mechanism[mechanism.scope == "all levels"].set_index(["metric", "m"])
    promoted = ("a click deep in R₀'s session on an item a better ranker lifts" if _deployed(config)
                else "the explored items a better ranker promotes")
    if ("ndcg", m_hi) in mech.index:
        d, n = mech.loc[("dcg", m_hi)], mech.loc[("ndcg", m_hi)]
        out.append(
            f"*Why nDCG fails.* At m = {_m_text(m_hi)} the improving targets' DCG lift {d.lift:+.3f} is "
            f"{d.from_top_10pct_idcg:+.3f} from the 10 % of sessions with the largest iDCG (those holding a "
            f"click with a large weight 1/ε₀: {promoted}) and {d.from_rest:+.3f} "
            f"from the rest (the target demotes the logger's own clicked items). nDCG divides each session by "
            f"its iDCG, so the first part shrinks to {n.from_top_10pct_idcg:+.3f} while the second stays "
            f"{n.from_rest:+.3f}: nDCG's lift is {n.lift:+.3f} against a true {n.true_lift:+.3f}. The bounded "
            f"ratio that keeps nDCG's variance low (the paper's argument) also discards the evidence. The "
            f"ideal is each session's own (its logged labels debiased by min(m, 1/ε₀), sorted, under the same "
            f"discount) and both rankers share it, so nDCG's difference weights each session's DCG difference by "
            f"1/iDCG_τ: any nDCG normalised per session by an ideal built from that session's feedback does this, "
            f"whichever candidate set. "
            f"See `table_mechanism` and `fig_mechanism`.")
    return out


def _sign_text(config, rates: pd.DataFrame, weights: dict) -> str:
    """The sign-agreement verdict: the share of verified improving settings whose estimated
    difference is positive, per metric against m, next to the paper's 100 %, and why."""
    every = rates[rates.scope == "all levels"].set_index(["metric", "m"]).sign_agreement.dropna()
    if every.empty:
        return "**Sign agreement**: no verified improving settings, so it is undefined."
    dcg, ndcg = every.loc["dcg"], every.loc["ndcg"]
    m_low, m_hi = min(dcg.index), max(dcg.index)
    n = int(rates[rates.scope == "all levels"].n_improving.max())
    holds = bool((every >= PAPER_SIGN_AGREEMENT).all())
    levels, at_hi = [], []
    for level in config.levels:
        part = rates[(rates.scope == level) & (rates.metric == "dcg")].set_index("m").sign_agreement
        if len(part):
            epsilon = scenarios.level_config(config.scenario, level).epsilon
            at_hi.append((epsilon, part.loc[m_hi]))
            levels.append(f"{level} (ε = {epsilon:g}"
                          f"{f', largest weight {weights[level]:.0f}' if level in weights else ''}): "
                          f"{part.loc[m_low]:.0%} at m = {_m_text(m_low)}, "
                          f"{part.loc[m_hi]:.0%} at m = {_m_text(m_hi)}")
    at_hi.sort()
    rarer = (len({epsilon for epsilon, _ in at_hi}) == len(at_hi) > 1
             and all(a[1] < b[1] for a, b in itertools.pairwise(at_hi)))
    return (f"**Sign agreement** (Jeunen et al.: {PAPER_SIGN_AGREEMENT:.0%} of their settings for "
            f"every estimator): **{'reproduced' if holds else 'not reproduced'}**. Over the {n} "
            f"verified improving settings the estimated DCG difference is positive in "
            f"{dcg.loc[m_low]:.0%} of them at m = {_m_text(m_low)}, at most {dcg.max():.0%} "
            f"(m = {_m_text(dcg.idxmax())}) and {dcg.loc[m_hi]:.0%} at m = {_m_text(m_hi)}; nDCG's "
            f"share is {ndcg.min():.0%}–{ndcg.max():.0%} for every m. Per level, DCG: "
            + "; ".join(levels) + ". The mechanism: " + (
                "the deterministic logger shows every candidate, the items a better ranker promotes at the "
                "deep ranks R₀ gives them, so the improvement sits in rarely viewed items whose clicks carry "
                "large weights 1/S(rank); " if _deployed(config) else
                "the ε-greedy logger shows the items a better ranker promotes mostly through exploration, so the "
                "improvement sits in rarely logged items whose clicks carry large weights 1/ε₀; ")
            + "clipping at small m removes that credit "
            "(m = 1 scores the raw labels, which favour the logger that produced them), and nDCG "
            "divides the sessions holding those clicks by their large iDCG (see the two "
            "paragraphs below)."
            + (f" The rarer the exploration, the lower the agreement, even at m = {_m_text(m_hi)} "
               "(no clipping)." if rarer else ""))


def _aa_logs_text(config, rates: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The A/A-on-two-logs false-positive rates against their nominal level, and the spread of
    their z = Δ / se (standard deviation 1 when the standard errors are right), per metric."""
    nominal = (1 - config.confidence) / 2
    part = rates[rates.scope == "all levels"]
    n = int(part.n_aa_logs.max())
    # a rate above this is unlikely (p < 0.01) for n independent tests at the nominal level
    ceiling = scipy_stats.binom.ppf(0.99, n, nominal) / n if n else float("nan")
    aa = frame[frame.kind == "aa_logs"].assign(z=lambda f: f["mean"] / f["se"])
    lines = []
    for metric in METRICS:
        fpr = part[part.metric == metric].set_index("m").FPR_aa_logs
        at_inf = f" (m = ∞: {fpr.loc[math.inf]:.3f})" if math.inf in fpr.index else ""
        z_sd = aa[aa.metric == metric].groupby("m").z.std()
        lines.append(f"{'DCG' if metric == 'dcg' else 'nDCG'} {fpr.min():.3f}–{fpr.max():.3f}{at_inf}, "
                     f"SD of z {z_sd.min():.2f}–{z_sd.max():.2f}")
    return (f"The non-trivial A/A compares each target with itself on two independent logs of the same day "
            f"({n} comparisons per metric and m): the share whose {config.confidence:.0%} CI lies strictly above 0 is "
            f"{'; '.join(lines)} over the m grid, against a nominal {nominal:g} (above {ceiling:.3f} would be "
            f"unlikely, binomial p < 0.01, if the normal CI held its level; the comparisons share days, so they "
            f"are not fully independent). An SD of z = Δ / se below 1 means the normal CIs are conservative "
            f"here, above 1 that they are too narrow for these importance weights.")


def _figures(config: SensitivityConfig, rates: pd.DataFrame, lift: pd.DataFrame, mechanism: pd.DataFrame) -> dict:
    """TPR, mean p, FPR, bias / RMSE of the lift and the top-10 % iDCG split against m (`_curves`)."""
    long_fpr = rates.melt(id_vars=["scope", "metric", "m"], value_vars=[f"FPR_{kind}" for kind in NULL_KINDS],
                          var_name="kind", value_name="FPR")
    all_lift = lift[lift.kind == "all"].melt(id_vars=["scope", "metric", "m"], value_vars=["bias", "rmse"],
                                             var_name="error", value_name="value")
    parts = mechanism.melt(id_vars=["scope", "metric", "m"], value_vars=["from_top_10pct_idcg", "from_rest"],
                           var_name="sessions", value_name="part")
    return {
        "fig_tpr": _curves(config, rates, "TPR", "TPR (99% CI > 0)", "Sensitivity to verified online improvements",
                           rate=True),
        "fig_mean_p": _curves(config, rates, "mean_p", "mean one-sided p", "Mean p-value (H0: Δ <= 0) of the "
                              "improving settings", log=True),
        "fig_fpr": _curves(config, long_fpr, "FPR", "FPR", "False positives on A/A and harmful targets",
                           style="kind", rate=True),
        "fig_bias_rmse": _curves(config, all_lift, "value", "error of the relative lift",
                                 "Bias and RMSE of the estimated lift vs the exact online lift", style="error",
                                 zero=True),
        "fig_mechanism": _curves(config, parts, "part", "part of the estimated lift",
                                 "Improving targets: lift from the top-10 % iDCG sessions vs the rest",
                                 style="sessions", zero=True),
    }


def _sign_claims(rates: pd.DataFrame) -> list[Claim]:
    """The paper's 100 % sign agreement beside our shares over the verified improving settings
    (every level, and Fig. 1's settings when scored), per metric over the m grid."""
    return [claim for scope in ("all levels", FIGURE1_SCOPE) if (claim := _sign_claim(rates, scope))]


def _sign_claim(rates: pd.DataFrame, scope: str) -> Claim | None:
    every = rates[rates.scope == scope].set_index(["metric", "m"]).sign_agreement.dropna()
    if every.empty:
        return None
    shares = []
    for metric in METRICS:
        share = every.loc[metric]
        low, high = reporting.percent(share.min()), reporting.percent(share.max())
        shares.append(f"{'DCG' if metric == 'dcg' else 'nDCG'} {low if low == high else f'{low}–{high}'}"
                      + (f" ({reporting.percent(share.loc[math.inf])} at m = ∞)" if math.inf in share.index else ""))
    n = int(rates[rates.scope == scope].n_improving.max())
    return Claim("Jeunen et al. KDD'24 §6.2", "an offline difference has the sign of the verified online "
                 f"improvement, for every estimator and m ({scope})", PAPER["sign"],
                 "; ".join(shares) + " over the m grid",
                 "reproduced" if bool((every >= PAPER_SIGN_AGREEMENT).all()) else "not reproduced",
                 where=f"table_sensitivity (sign_agreement, {n} verified improving settings)")


def report(config: SensitivityConfig, records: pd.DataFrame) -> Report:
    settings, frame, weights = _frame(config, records)
    rates = _rates(config, frame)
    figure1 = _figure1(config, rates, frame)
    lift, diff = _bias(config, frame)
    mechanism = _mechanism(config, frame)
    comparison = rates.pivot_table(index=["scope", "m"], columns="metric", values=["TPR", "mean_p"], sort=False)
    comparison.columns = [f"{value}_{metric}" for value, metric in comparison.columns]
    comparison = comparison.reset_index()
    paired = frame[frame.verified & (frame.kind == "improving")].pivot_table(
        index=["level", "day", "signal", "target", "m"], columns="metric", values="p")
    comparison["share_p_dcg_below_ndcg"] = comparison.m.map((paired.dcg < paired.ndcg).groupby("m").mean())

    figures = _figures(config, rates, lift, mechanism)
    non_aa = settings[settings.kind.isin(["improving", "harmful"])]
    failed = non_aa[~non_aa.verified]
    verified = settings[(settings.kind == "improving") & settings.verified]
    n_tests = len(frame[frame.verified]) // max(len(config.m) * len(METRICS), 1)
    summary = [
        f"Settings: {len(config.levels)} levels × {len(config.scenario.signals.names)} signals × "
        f"{config.scenario.days} days × "
        f"targets {', '.join(map(scenarios.ranker_label, config.improving))} (intended improving), "
        f"{', '.join(map(scenarios.ranker_label, config.harmful)) or 'none'} "
        f"(intended harmful), R₀ itself (A/A) and every target against itself on a second, independent log "
        f"(A/A, 2 logs), against R₀ = "
        + (f"Sort({scenarios.ranker_label(config.logger)}), deterministic, over the same candidates as every "
           f"target, all of them shown (K = N; exposures by rank, Eq. 9); " if _deployed(config) else
           f"ε-greedy({scenarios.ranker_label(config.logger)}); ")
        + f"{config.scenario.log_sessions} logged sessions per (level, day) and A/B tests with "
        f"{config.scenario.ab_sessions} sessions per arm; exposures under the "
        f"{'true' if config.view == 'true' else 'learnt (pbm)'} view model; {config.confidence:.0%} normal CIs. "
        + ("This is the preset `deployed`, Jeunen et al.'s own regime; the default preset (`results/sensitivity`) "
           "logs with an ε-greedy R₀ over N > K candidates." if _deployed(config) else
           "The preset `deployed` (`results/sensitivity_deployed`) runs Jeunen et al.'s own regime: a "
           "deterministic R₀ and targets over the same candidates, all of them shown."),
        f"Verification: {len(failed)} of {len(non_aa)} non-A/A settings failed (improving: A/B p >= "
        f"{config.ab_alpha:g} or exact difference <= 0; harmful: exact difference >= 0) and are left out of the "
        f"rates, see `table_settings`; {int((verified.ab_p_holm < config.ab_alpha).sum())} of the {len(verified)} "
        f"verified improvements also pass Holm's correction over all {int((settings.kind == 'improving').sum())} "
        f"A/B claims.",
        "**Claim (d)** (Jeunen et al. Fig. 1: moderate clipping maximises TPR, m = ∞ loses "
        "sensitivity, DCG beats nDCG over a wide range of m):\n\n" + "\n".join(_verdicts(figure1)),
        _sign_text(config, rates, weights),
        f"*Where the settings differ.* Jeunen et al. read Fig. 1 off 20 online improvements (5 days × 4 "
        f"reward signals) of one deployed change on a real platform's 2nd-level feed, each significant at "
        f"p ≪ 0.001; Fig. 1's values are not in the paper's text, so `table_claims` sets their statements, "
        f"not numbers, beside ours. Here the improvements are simulated ({len(verified)} verified of "
        f"{int((settings.kind == 'improving').sum())} intended, {len(config.levels)} level(s), "
        f"{len(config.scenario.signals.names)} signals, {config.scenario.days} days), the truth is exact, and the "
        f"settings share days and targets, so they are not independent trials.",
        *_why(config, lift, mechanism, weights),
        f"*False positives.* FPR_harmful is the share of verified harmful settings whose CI lies strictly above "
        f"0; its maximum over m is {rates.FPR_harmful.max():.3f} for DCG and nDCG together "
        f"(`table_sensitivity`, `fig_fpr`). A/A settings score R₀ on its own log, so Δ_τ ≡ 0 and the paired test "
        f"cannot fire (FPR_aa = 0 by construction: a check of the pipeline, not evidence). "
        + _aa_logs_text(config, rates, frame),
        f"*Multiple testing.* Each (setting, metric, m) is its own one-sided test at "
        f"{(1 - config.confidence) / 2:g} ({n_tests} verified settings per metric and m); TPR and FPR are per-test "
        f"rates, as in the paper, not family-wise error rates.",
    ]
    tables = {"table_sensitivity": rates, "table_dcg_vs_ndcg": comparison, "table_bias_lift": lift,
              "table_bias_difference": diff, "table_mechanism": mechanism, "table_settings": settings}
    return Report(tables=tables, figures=figures, summary="\n\n".join(summary),
                  claims=_claims(figure1, _sign_claims(rates)))



"""The report of study ``valid_vs_test``: Diff% of validation and of the unobserved relevant items
against test per metric (Lim et al. Table 2), and whether the sets agree."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simrec import reporting
from simrec.runner import Report
from simrec_studies.common.lim import METRICS, PROTOCOLS, SETS
from simrec_studies.common.lim_report import LABELS, budget_text, selected

if TYPE_CHECKING:
    from simrec_studies.valid_vs_test import ValidVsTestConfig

UBM = ("atop", "adg", "recall@10")        # unbiased under SRS (Lim §5)
#: Lim et al. Table 2 (MovieLens): Diff% = 100 (valid - test) / test per model and measure
LIM_TABLE2 = {"mf_auc": {"atop": -0.06, "adg": -0.29, "recall@10": 0.00, "ap": -24.38, "ndcg": -20.47},
              "mf_adg": {"atop": -0.05, "adg": -0.00, "recall@10": 0.49, "ap": -23.43, "ndcg": -20.42}}
#: the dataset of ours that stands for Lim's MovieLens 10M (the paper-like world)
LIM_WORLD = "movielens"


def _diff_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per protocol, dataset, method and metric: fold means on each set, Diff% against test and
    the z of the mean per-fold difference. frame: records of one setting per (dataset, fold,
    method)."""
    wide = frame[frame.metric.isin(METRICS)].pivot_table(index=["protocol", "dataset", "method", "metric", "fold"],
                                                         columns="set", values="value", sort=False).reset_index()
    rows = []
    for (protocol, name, method, spec), part in wide.groupby(
            ["protocol", "dataset", "method", "metric"], sort=False):
        row = {"protocol": protocol, "dataset": name, "method": method, "metric": LABELS[spec]}
        test = part["test"].mean()
        row["test"] = test
        for other in ("valid", "unobserved"):
            if other not in part or part[other].isna().all():
                row[other], row[f"Diff% {other}"], row[f"z {other}"] = np.nan, np.nan, np.nan
                continue
            row[other] = part[other].mean()
            row[f"Diff% {other}"] = 100 * (row[other] - test) / test
            diffs = (part[other] - part["test"]).to_numpy()
            se = reporting.standard_error(diffs)
            row[f"z {other}"] = diffs.mean() / se if se > 0 else 0.0
        row["UBM"] = "yes" if spec in UBM else "no"
        rows.append(row)
    columns = ["protocol", "dataset", "method", "metric", "UBM", "valid", "test", "unobserved", "Diff% valid",
               "Diff% unobserved", "z valid", "z unobserved"]
    return pd.DataFrame(rows)[columns]


def _sizes(frame: pd.DataFrame) -> pd.DataFrame:
    first = frame[(frame.metric == METRICS[0]) & (frame.protocol == PROTOCOLS[0])]
    sizes = first.groupby(["dataset", "set"], sort=False)["size"].mean()
    return sizes.unstack("set").reset_index()


def _figure(diff: pd.DataFrame):
    import seaborn as sns
    long = diff.melt(id_vars=["protocol", "dataset", "method", "metric"],
                     value_vars=["Diff% valid", "Diff% unobserved"], var_name="set",
                     value_name="Diff%").dropna()
    long["set"] = long["set"].str.replace("Diff% ", "")
    long["method"] = long["method"].str.replace("_", "-")
    names = list(dict.fromkeys(long.dataset))
    protocols = list(dict.fromkeys(long.protocol))
    fig, axes = reporting.figure(len(protocols), len(names), width=4.2, height=3.4, sharey="row")
    with reporting.theme():
        # seaborn jitters strips with numpy's global RNG: seeded for the figure (the same on every
        # run), and the caller's state is given back afterwards
        rng_state = np.random.get_state()
        np.random.seed(0)
        for row, protocol in enumerate(protocols):
            for ax, name in zip(axes[row], names):
                part = long[(long.dataset == name) & (long.protocol == protocol)]
                sns.stripplot(data=part, x="metric", y="Diff%", hue="set",
                              order=[LABELS[m] for m in METRICS], dodge=True, jitter=0.15, size=5,
                              ax=ax, palette={"valid": "C0", "unobserved": "C3"})
                ax.axhline(0.0, color="grey", lw=0.8)
                ax.set_title(f"{name} ({protocol})", fontsize=9)
                ax.set_xlabel("")
                ax.tick_params(axis="x", rotation=30)
                if (row, name) != (0, names[0]):
                    ax.get_legend().remove()
            axes[row][0].set_ylabel("Diff% against test\n(one point per method)")
        np.random.set_state(rng_state)
        fig.suptitle("Diff% of validation and of the unobserved relevant items P⁺∖O⁺ against test",
                     fontsize=10)
        fig.tight_layout()
    return fig


def _pairs(diff: pd.DataFrame) -> list:
    """(protocol, other set) pairs present in the Diff% table, each with its row count."""
    return [((protocol, other), int(diff[diff.protocol == protocol][f"Diff% {other}"].notna().sum()))
            for protocol in dict.fromkeys(diff.protocol) for other in ("valid", "unobserved")
            if diff[diff.protocol == protocol][f"Diff% {other}"].notna().any()]


def claims(diff: pd.DataFrame) -> list[reporting.Claim]:
    """Lim et al.'s Table 2 beside ours on the MovieLens-like world, under each protocol: per model
    and measure, Diff% of validation against test. A UBM measure's claim (valid predicts test) is
    reproduced when the mean per-fold difference is within `reporting.Z` standard errors of 0
    (a tie); MAP's and NDCG's (validation lower than test) when it lies beyond them below 0."""
    out = []
    rows = diff[(diff.dataset == LIM_WORLD) & diff.method.isin(list(LIM_TABLE2))]
    for _, row in rows.iterrows():
        spec = next(m for m in METRICS if LABELS[m] == row.metric)
        z = row["z valid"]
        se = abs(row["Diff% valid"] / z) if z else np.nan
        ubm = spec in UBM
        direction = reporting.verdict(row["Diff% valid"], se, expect="less").verdict   # NaN se: "unclear"
        if ubm:
            verdict = {"tie": "reproduced", "unclear": "not testable"}.get(direction, "not reproduced")
        else:
            verdict = {"holds": "reproduced", "tie": "tie", "unclear": "not testable"}.get(direction, "not reproduced")
        out.append(reporting.Claim(
            "Lim et al. RecSys'15, Table 2", f"MovieLens, {row.method.replace('_', '-').upper()}, {row.metric}: "
            + ("validation predicts test (Diff% near 0)" if ubm else "validation is well below test"),
            f"{LIM_TABLE2[row.method][spec]:+.2f} %", f"{row['Diff% valid']:+.2f} % ({LIM_WORLD}-like world, {row.protocol})",
            verdict, se=se, where="table_diff"))
    return out


def report(config: ValidVsTestConfig, records: pd.DataFrame) -> Report:
    frame = selected(records)
    frame = frame[frame.protocol.isin(PROTOCOLS)]          # not the early-stopping curves
    diff = _diff_table(frame)
    sizes = _sizes(frame)
    lines = [budget_text(config, config.data, config.training), "",
             "Diff% = 100 (X - test) / test of the means over folds (Lim Table 2); z = mean per-fold "
             f"difference / its SE; the sets differ when |z| > {reporting.Z:g} ({reporting.VERDICT_RULE}). "
             "Mean relevant items per "
             "user: " + "; ".join(
                 f"{r.dataset}: " + ", ".join(f"{s} {r[s]:.1f}" for s in SETS if s in r and not
                                              pd.isna(r[s])) for _, r in sizes.iterrows()), ""]
    lines += ["Protocols: 'held-out excluded' (the usual protocol) ranks valid without train "
              "and test, test without train and valid, P⁺∖O⁺ without O⁺ (each set in its own list), "
              "each averaged over the users with an item in it; 'train excluded, common users' "
              "ranks all three in one list without the training items and averages over the users "
              "with items in every set, where given the model the sets are uniform random subsets "
              "of each user's P⁺∖train (Lim §5's exchangeability argument holds exactly).", ""]
    for (protocol, other), _ in _pairs(diff):
        part = diff[diff.protocol == protocol].dropna(subset=[f"Diff% {other}"])
        lines.append(f"{protocol}, {other} vs test:")
        for spec, g in part.groupby("metric", sort=False):
            worst = g[f"Diff% {other}"].abs().max()
            agree = int((g[f"z {other}"].abs() <= reporting.Z).sum())
            kind = "UBM" if g.UBM.iloc[0] == "yes" else "not UBM"
            lines.append(f"- {spec} ({kind}): |Diff%| <= {worst:.2f} %, median "
                         f"{g[f'Diff% {other}'].median():+.2f} %; agree (|z| <= {reporting.Z:g}) in "
                         f"{agree} of {len(g)} dataset x method rows")
        lines.append("")
    return Report(tables={"table_diff": diff, "table_sizes": sizes},
                  figures={"fig_diff": _figure(diff)}, summary="\n".join(lines), claims=claims(diff))

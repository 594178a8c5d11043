"""The open_bandit study's report: each estimate beside the on-policy truth, the position bias,
the data, the figure and the prose."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.stats

from simrec import data, reporting, stats
from simrec.datafiles import skipped_note
from simrec.runner import Report
from simrec_studies.open_bandit.compute import ON_POLICY, OVERALL, POLICIES, log_path

if TYPE_CHECKING:
    from simrec_studies.open_bandit import OpenBanditConfig


# ---- report ---------------------------------------------------------------------------------

def comparison(config: OpenBanditConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Each estimate beside the target's on-policy click rate (same campaign and position), with
    the intervals of both, of their difference, and the two agreement flags."""
    est = records[records.part == "estimate"]
    truth = records[records.part == ON_POLICY][["campaign", "target", "position", "value", "se"]]
    table = est.merge(truth, on=["campaign", "target", "position"], suffixes=("", "_truth"))
    z = config.z
    diff_se = np.sqrt(table.se ** 2 + table.se_truth ** 2)
    difference = table.value - table.value_truth
    out = pd.DataFrame({
        "campaign": table.campaign, "target": table.target, "logger": table.logger,
        "estimator": table.estimator, "position": table.position,
        "estimate": table.value, "low": table.value - z * table.se, "high": table.value + z * table.se,
        "on-policy": table.value_truth, "on-policy low": table.value_truth - z * table.se_truth,
        "on-policy high": table.value_truth + z * table.se_truth,
        "difference": difference, "difference low": difference - z * diff_se,
        "difference high": difference + z * diff_se,
        "truth in CI": np.where((table.value_truth >= table.value - z * table.se)
                                & (table.value_truth <= table.value + z * table.se), "yes", "no"),
        "agrees": np.where(np.abs(difference) <= z * diff_se, "yes", "no"),
        "clicks": table.clicks, "rounds": table.n})
    order = {c: i for i, c in enumerate(data.OPEN_BANDIT_CAMPAIGNS)}
    return out.sort_values(["campaign", "target", "position"], key=lambda s: s.map(order) if s.name == "campaign"
                           else s, kind="stable").reset_index(drop=True)


def bias_table(config: OpenBanditConfig, records: pd.DataFrame) -> pd.DataFrame:
    rows = records[records.part == "position bias"]
    z = config.z
    return pd.DataFrame({"campaign": rows.campaign, "log": rows.logger, "estimator": rows.estimator,
                         "position": rows.position + 1, "relative click rate": rows.value,
                         "low": rows.value * np.exp(-z * rows.se), "high": rows.value * np.exp(z * rows.se),
                         "clicks": rows.clicks, "rounds": rows.n}).reset_index(drop=True)


def data_table(records: pd.DataFrame) -> pd.DataFrame:
    rows = records[records.part == "data"]
    table = rows.pivot_table(index=["campaign", "logger"], columns="estimator", values="value", sort=False)
    sizes = rows.groupby(["campaign", "logger"], sort=False)[["n", "clicks"]].first()
    support = records[(records.part == "support") & (records.position == OVERALL)]
    support = support.set_index(["campaign", "logger"]).value.rename("target mass off this log")
    return sizes.rename(columns={"n": "rows"}).join(table).join(support).reset_index()


def _figure(config: OpenBanditConfig, table: pd.DataFrame):
    overall = table[table.position == OVERALL]
    campaigns = list(dict.fromkeys(overall.campaign))
    fig, axes = reporting.figure(len(POLICIES), len(campaigns), width=4.2, height=2.6)
    with reporting.theme():
        for i, target in enumerate(POLICIES):
            for j, campaign in enumerate(campaigns):
                ax = axes[i, j]
                rows = overall[(overall.target == target) & (overall.campaign == campaign)].reset_index(drop=True)
                y = np.arange(len(rows))
                if len(rows):
                    truth = rows.iloc[0]
                    ax.axvspan(truth["on-policy low"] * 100, truth["on-policy high"] * 100, color="0.85",
                               label=f"on-policy {config.level:.0%} CI")
                    ax.axvline(truth["on-policy"] * 100, color="0.3", lw=1, label="on-policy")
                for row, r in rows.iterrows():
                    colour = "tab:blue" if r.agrees == "yes" else "tab:red"
                    ax.errorbar(r.estimate * 100, row, xerr=[[(r.estimate - r.low) * 100], [(r.high - r.estimate) * 100]],
                                fmt="o", color=colour, ms=4, capsize=3)
                ax.set_yticks(y, rows.estimator if j == 0 else [""] * len(rows))
                ax.invert_yaxis()
                ax.set_title(f"{campaign}: {target} from the {'bts' if target == 'random' else 'random'} log",
                             fontsize=9)
                if i == len(POLICIES) - 1:
                    ax.set_xlabel("click rate per impression (%)")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2)
        fig.suptitle(f"Off-policy estimates ({config.level:.0%} CI; red = difference CI excludes 0) beside the "
                     "on-policy click rate", fontsize=10)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def report(config: OpenBanditConfig, records: pd.DataFrame) -> Report:
    if records.empty:
        return Report(summary="No Open Bandit data, nothing computed.\n" + skipped_note(
            log_path(config, "random", config.campaigns[0])))
    table = comparison(config, records)
    tables = {"table_estimates": table[table.position == OVERALL].drop(columns="position").reset_index(drop=True),
              "table_positions": table[table.position != OVERALL].assign(position=lambda t: t.position + 1)
              .reset_index(drop=True),
              "table_position_bias": bias_table(config, records), "table_data": data_table(records)}
    return Report(tables=tables, figures={"fig_estimates": _figure(config, table)},
                  summary=summary_text(config, records, table, tables["table_position_bias"]))


def _ci(value, low, high) -> str:
    return f"{value * 100:.2f} % [{low * 100:.2f}, {high * 100:.2f}]"


def summary_text(config: OpenBanditConfig, records: pd.DataFrame, table: pd.DataFrame,
                 bias: pd.DataFrame) -> str:
    overall = table[table.position == OVERALL]
    sizes = records[records.part == ON_POLICY]
    sizes = sizes[sizes.position == OVERALL]
    lines = ["Open Bandit Dataset sample (Saito et al., NeurIPS'21 Datasets and Benchmarks; the "
             "10,000-row logs shipped with obp 0.5.7): for each campaign a uniform-random and a "
             "Bernoulli-Thompson-sampling (BTS) log of the same week. Each policy's click rate is "
             "estimated from the other policy's log and compared with its on-policy click rate "
             f"(click rate per impression; {config.level:.0%} normal intervals).", "",
             "Logs: " + "; ".join(f"{r.campaign}/{r.target} {int(r.clicks)} clicks in {int(r.n):,} rows"
                                  for r in sizes.itertuples()) + ".", "",
             "How the target's action probabilities were obtained: random evaluated on the BTS log "
             "uses π = 1/I (exact); BTS evaluated on the random log uses the BTS log's empirical "
             "(item, position) distribution, an estimate of BTS's time-averaged distribution: the "
             "BTS propensities change over the week and the sample gives none for the random log's "
             "rows. That estimand ignores the covariance between BTS's choices and the click rates "
             "over time, and it is fitted on the very log that supplies the truth.", "",
             "Estimates over all positions (estimate [CI] vs on-policy [CI]; difference CI; agrees = "
             "difference CI covers 0):", ""]
    for (campaign, target), rows in overall.groupby(["campaign", "target"], sort=False):
        truth = rows.iloc[0]
        lines.append(f"- {campaign}, {target} from the {truth.logger} log; on-policy "
                     f"{_ci(truth['on-policy'], truth['on-policy low'], truth['on-policy high'])}:")
        for _, r in rows.iterrows():
            lines.append(f"  - {r.estimator}: {_ci(r.estimate, r.low, r.high)}; difference "
                         f"{r.difference * 100:+.2f} [{r['difference low'] * 100:+.2f}, "
                         f"{r['difference high'] * 100:+.2f}] points; "
                         f"{'agrees' if r.agrees == 'yes' else 'DISAGREES'}")
    agree = (overall.agrees == "yes").sum()
    inside = (overall["truth in CI"] == "yes").sum()
    positions = table[table.position != OVERALL]
    widths = (overall.high - overall.low) / overall["on-policy"]
    lines += ["", f"Verdict: {agree} of {len(overall)} overall estimates agree with the on-policy truth "
              f"(difference interval covers 0), and the truth lies inside {inside} of the {len(overall)} "
              f"estimate intervals; position-wise, {(positions.agrees == 'yes').sum()} of {len(positions)} "
              "agree. Agreement here means 'not distinguishable from the truth at this sample size', "
              f"not precision: the estimate intervals are {widths.median():.1f} times the on-policy "
              f"rate wide (median), because a 10,000-row log holds {int(sizes.clicks.min())}–"
              f"{int(sizes.clicks.max())} clicks; the widths shrink as 1/sqrt(rows), so the full data "
              "set (26M rows over all logs) would test precision, which this sample cannot.", ""]
    for estimator, rows in overall.groupby("estimator", sort=False):
        lines.append(f"- {estimator}: agrees in {(rows.agrees == 'yes').sum()} of {len(rows)}; median "
                     f"interval width {((rows.high - rows.low) * 100).median():.2f} points.")
    data_rows = records[(records.part == "data") & (records.logger == "bts")].pivot_table(
        index="campaign", columns="estimator", values="value", sort=False)
    largest = 1 / (data_rows["items"] * data_rows["min propensity"])
    lines += ["", "Weights: evaluating random on the BTS log weighs a row by 1/(I·p₀), up to " + ", ".join(
        f"{w:,.0f} ({c})" for c, w in largest.items()) + "; such heavy tails make the IPS estimate's "
        "distribution right-skewed (a typical sample falls below the truth, a rare heavy row lifts it "
        "far above) and its normal interval rough. Evaluating BTS on the random log weighs a row by "
        "I·π̂ <= I, so those intervals are trustworthy at this size."]
    support = records[(records.part == "support") & (records.position == OVERALL)]
    lines += ["", "Support: the share of the target's (item, position) probability on pairs the "
              "logger's sample never shows (lost by IPS, partly restored by self-normalisation "
              "and the doubly robust direct term): " + "; ".join(
                  f"{r.campaign} {r.target} on the {r.logger} log {r.value:.1%}" for r in support.itertuples())
              + ".", "",
              "Position bias by randomisation (random log: each item equally likely at every "
              "position, so the click-rate ratio estimates P(V | k) / P(V | 1) under the position-based "
              "model; the BTS ratio mixes examination with the items BTS places there):", ""]
    for (campaign, log), rows in bias.groupby(["campaign", "log"], sort=False):
        cells = ", ".join(f"position {int(r.position)} {r['relative click rate']:.2f} [{r.low:.2f}, {r.high:.2f}]"
                          for _, r in rows.iterrows() if r.position > 1)
        lines.append(f"- {campaign}, {log} log: {cells}")
    random_rows = records[(records.part == "position bias") & (records.logger == "random") & (records.position > 0)]
    below = int((bias[(bias.log == "random") & (bias.position > 1)].high < 1).sum())
    above = int((bias[(bias.log == "random") & (bias.position > 1)].low > 1).sum())
    p_values = 2 * scipy.stats.norm.sf(np.abs(np.log(random_rows.value.to_numpy()) / random_rows.se.to_numpy()))
    reject, _ = stats.holm_bonferroni(p_values, alpha=1 - config.level)
    lines += ["", f"Over the {len(random_rows)} position-campaign pairs of the random logs, {below} interval(s) "
              f"lie below 1 and {above} above 1 (a lower position clicked more often than position 1); "
              f"after Holm's correction for the {len(random_rows)} tests, {int(reject.sum())} ratio(s) differ from "
              "1. " + ("The sample cannot tell a position effect in this three-slot widget from none."
                       if not reject.any() else "Those positions' examination differs from position 1's."), "",
              "Caveats: rows of one impression are not linked, so slate-level estimators and "
              "standard errors clustered by impression are not possible (the three rows of an "
              "impression share a user, which makes the stated standard errors somewhat optimistic); "
              "clipping at m = c·I biases the random-on-BTS estimate downwards by design, and changes "
              "nothing for BTS on the random log, where 1/p₀ = I on every row; the "
              "doubly robust reward model is a per-(item, position) click rate without user "
              f"features, cross-fitted over {config.folds} random folds."]
    return "\n".join(lines)



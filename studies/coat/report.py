"""The report of study ``coat``: Kendall's τ of each protocol with the MCAR truth, the noise-aware
inversions, the best protocol and its leads, the selected hyper-parameters, Steck's claim beside
ours, the figure and the summary."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simrec import data, reporting, stats
from simrec.datafiles import skipped_note
from simrec.runner import Report
from simrec_studies.coat.compute import (A1, A1_IPS, A2, A2_IPS, ALL_USERS, B, IPS_METRICS, METRICS, MODELS,
                                         OFFLINE, TRUTH, TRUTH_RANDOM, UNWEIGHTED, interval)

if TYPE_CHECKING:
    from simrec_studies.coat import CoatConfig


def inversions(config: CoatConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Per split, offline protocol, metric and MCAR truth: of the model pairs, how many the
    protocol and the truth each decide beyond z SE (`reporting.paired_verdict` over the user
    parts), how many both decide, and how many of those they decide oppositely (inverted)."""
    parts = records[(records.part == "model") & (records.user_part >= 0)]
    table = {key: group.sort_values("user_part").value.to_numpy()
             for key, group in parts.groupby(["split", "protocol", "metric", "model"])}
    rows = []
    for (split_index, protocol, metric), _ in parts.groupby(["split", "protocol", "metric"]):
        if protocol in (TRUTH, TRUTH_RANDOM):
            continue
        for truth in (TRUTH, TRUTH_RANDOM):
            counts = dict.fromkeys(("offline decided", "truth decided", "both decided",
                                    "inverted"), 0)
            for a, b in itertools.combinations(MODELS, 2):
                verdicts = []
                for p in (protocol, truth):
                    difference = table[split_index, p, metric, a] - table[split_index, p, metric, b]
                    verdicts.append(_winner(difference, (a, b), config.z))
                offline, true = verdicts
                counts["offline decided"] += offline != stats.TIE
                counts["truth decided"] += true != stats.TIE
                both = offline != stats.TIE and true != stats.TIE
                counts["both decided"] += both
                counts["inverted"] += both and offline != true
            rows.append({"split": split_index, "protocol": protocol, "truth": truth,
                         "metric": metric, **counts})
    return pd.DataFrame(rows)


def _winner(difference: np.ndarray, names: tuple[str, str], z: float) -> str:
    """The model the verdict rule names on the per-part differences A - B, or a tie (also when a
    part has no value)."""
    if np.isnan(difference).any():
        return stats.TIE
    return {"holds": names[0], "fails": names[1]}.get(reporting.paired_verdict(difference, z=z).verdict,
                                                      stats.TIE)


def agreement_table(records: pd.DataFrame, flips: pd.DataFrame) -> pd.DataFrame:
    """Per offline protocol x metric x truth: τ and its bootstrap interval averaged over the
    splits, τ's range over the splits, and the noise-aware inversions summed over the splits."""
    tau = records[records.part == "agreement"]
    summary = tau.groupby(["truth", "protocol", "metric"], sort=False).agg(
        tau=("value", "mean"), ci_low=("low", "mean"), ci_high=("high", "mean"),
        tau_min=("value", "min"), tau_max=("value", "max"), splits=("value", "size"))
    counted = flips.groupby(["truth", "protocol", "metric"], sort=False)[
        ["offline decided", "truth decided", "both decided", "inverted"]].sum()
    out = summary.join(counted).reset_index()
    rank = {name: i for i, name in enumerate((TRUTH, TRUTH_RANDOM, *OFFLINE, *METRICS))}
    return out.sort_values(["truth", "protocol", "metric"],
                           key=lambda column: column.map(rank)).reset_index(drop=True)


def values_table(records: pd.DataFrame) -> pd.DataFrame:
    """Model x protocol x metric user means (mean over splits) and the split-0 standard error."""
    scored = records[(records.part == "model") & (records.user_part == ALL_USERS)]
    wide = scored.groupby(["protocol", "metric", "model"], sort=False).value.mean().unstack("model")
    return wide[[m for m in MODELS if m in wide.columns]].reset_index()


def protocol_differences(config: CoatConfig, agree: pd.DataFrame,
                         records: pd.DataFrame) -> pd.DataFrame:
    """The unweighted protocol with the highest mean τ over the metrics vs the MCAR truth (τ
    averaged over splits) against each other one: the difference of mean τ and its paired
    percentile bootstrap interval at `level` (resample b of every protocol shares its users; the
    split means of resample b are averaged over the splits, whose resamples are independent). A
    difference is significant when its interval excludes 0."""
    main = agree[(agree.truth == TRUTH) & agree.protocol.isin(UNWEIGHTED)]
    best = main.groupby("protocol").tau.mean().reindex(UNWEIGHTED).idxmax()
    rows = []
    for other in (p for p in UNWEIGHTED if p != best):
        difference, low, high = _lead(config, agree, records, best, other)
        rows.append({"best": best, "other": other, "difference": difference, "low": low, "high": high,
                     "significant": "yes" if low > 0 or high < 0 else "no"})
    return pd.DataFrame(rows)


def selected_table(records: pd.DataFrame) -> pd.DataFrame:
    chosen = records[records.part == "selected"]
    return pd.DataFrame({"split": chosen.split, "model": chosen.model, "selected": chosen.point,
                         "selected by": chosen.metric, "validation value": chosen.value,
                         "budget (sweeps or pairs)": chosen.budget,
                         "at grid edge": chosen.edges,
                         "not searched (< 3 values)": chosen.unsearched}).reset_index(drop=True)


def _figure(table: pd.DataFrame):
    main = table[table.truth == TRUTH]
    figure, axes = reporting.figure(width=8, height=3.8)
    ax = axes[0, 0]
    with reporting.theme():
        labels = [m for m in METRICS if m in set(main.metric)]
        width = 0.8 / max(len(OFFLINE), 1)
        for j, protocol in enumerate(OFFLINE):
            rows = main[main.protocol == protocol].set_index("metric").reindex(labels)
            x = np.arange(len(labels)) + (j - (len(OFFLINE) - 1) / 2) * width
            # a percentile interval need not contain the point estimate: draw it as it is
            ax.vlines(x, rows.ci_low, rows.ci_high, color=f"C{j}", lw=1)
            ax.plot(x, rows.tau, "o", color=f"C{j}", label=protocol)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(np.arange(len(labels)), labels)
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel(f"Kendall τ vs {TRUTH}")
        ax.legend(fontsize=7, ncol=3, loc="lower left")
        figure.tight_layout()
    return figure


def report(config: CoatConfig, records: pd.DataFrame) -> Report:
    if records.empty:
        return Report(summary=_skipped_text(config))
    flips = inversions(config, records)
    agree = agreement_table(records, flips)
    selected = selected_table(records)
    differences = protocol_differences(config, agree, records)
    tables = {"table_agreement": agree, "table_values": values_table(records),
              "table_selected": selected, "table_inversions": flips,
              "table_best_protocol": differences}
    steck = claims(config, agree, records)
    return Report(tables=tables, figures={"fig_agreement": _figure(agree)},
                  summary=summary_text(config, records, agree, selected, differences, steck), claims=steck)


def claims(config: CoatConfig, agree: pd.DataFrame, records: pd.DataFrame) -> list[reporting.Claim]:
    """Steck's argument (RecSys'13, §3.3): an offline test that ranks all items (a1) or the unrated
    items (a2) reflects what users meet better than one that ranks only their rated test items (b).
    Here: τ with the MCAR truth, mean over the metrics and splits, of (a1) and of (a2) against (b),
    with the paired bootstrap interval at `level` over users (`_lead`)."""
    out = []
    for protocol in (A1, A2):
        lead, low, high = _lead(config, agree, records, protocol, B)
        verdict = "reproduced" if low > 0 else "not reproduced" if high < 0 else "tie"
        out.append(reporting.Claim(
            "Steck RecSys'13, §3.3", f"ranking the {'whole catalogue' if protocol == A1 else 'unrated items'} "
            f"({protocol.split()[0]}) orders models closer to the truth on all items than ranking the rated "
            "test items (b)", "argued, no number (Netflix has no missing-at-random truth)",
            f"mean Kendall τ with the MCAR truth {protocol.split()[0]} minus b: {lead:+.2f} "
            f"[{low:+.2f}, {high:+.2f}] ({config.level:.0%} paired bootstrap over users)",
            verdict, where="table_agreement"))
    return out


def _lead(config: CoatConfig, agree: pd.DataFrame, records: pd.DataFrame, protocol: str, other: str):
    """(mean τ of `protocol` minus that of `other` vs the MCAR truth, low, high): τ averaged over
    the metrics and splits, and the percentile interval of the same difference over the bootstrap
    resamples (resample b of every protocol shares its users; `protocol_differences`)."""
    main = agree[agree.truth == TRUTH]
    point = main.groupby("protocol").tau.mean()
    boot = records[records.part == "bootstrap"]
    draws = boot.pivot_table(index="user_part", columns="protocol", values="value", aggfunc="mean", dropna=False)
    low, high = interval(config, (draws[protocol] - draws[other]).to_numpy())
    return point[protocol] - point[other], low, high


def _skipped_text(config: CoatConfig) -> str:
    relative = f"{config.folder}/{data.COAT_FILES['train']}" if config.folder else ""
    return "No Coat data, nothing computed.\n" + skipped_note(relative)


def summary_text(config: CoatConfig, records: pd.DataFrame, agree: pd.DataFrame,
                 selected: pd.DataFrame, differences: pd.DataFrame, steck=()) -> str:
    sizes = records[(records.part == "data") & (records.split == records.split.min())]
    v = sizes.set_index("metric").value
    cutoffs = records[records.metric == "P@N"].groupby("protocol").cutoff.first()
    lines = [f"Coat (Schnabel et al., ICML'16): {int(v['users'])} users x {int(v['items'])} "
             f"items; per split {int(v['train ratings'])} train / {int(v['validation ratings'])} "
             f"validation / {int(v['held-out MNAR ratings'])} held-out MNAR ratings "
             f"({int(v['relevant held-out MNAR'])} relevant), {int(v['MCAR ratings'])} MCAR "
             f"ratings ({int(v['relevant MCAR'])} relevant, {int(v['users with relevant MCAR'])} "
             f"users with one). {config.splits} random splits; relevant = rating >= "
             f"{config.relevant_rating:g}; N = {config.cutoff} over the catalogue, "
             f"{cutoffs[B]} under (b), {cutoffs[TRUTH_RANDOM]} among the random items.", "",
             f"Kendall τ of each protocol's model ordering ({len(MODELS)} models) with the MCAR "
             f"truth ({TRUTH}), mean over splits, [mean {config.level:.0%} bootstrap interval "
             f"over users]; inverted = pairs both decide beyond {config.z:g} SE "
             f"({config.parts} user parts) but oppositely, summed over splits:", ""]
    main = agree[agree.truth == TRUTH]
    for protocol in OFFLINE:
        rows = main[main.protocol == protocol]
        cells = "; ".join(f"{r.metric} {r.tau:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}], "
                          f"{int(r.inverted)}/{int(r['both decided'])} inverted"
                          for _, r in rows.iterrows())
        lines.append(f"- {protocol}: {cells}")
    lines.append("")
    common = main[main.metric.isin(IPS_METRICS)]
    by_protocol = main.groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
    on_dcg = common.groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
    best = differences.best.iloc[0]
    lines.append("Mean τ over the metrics: " + ", ".join(
        f"{p} {t:+.2f}" for p, t in by_protocol.items() if t == t) + "; on DCG@N and DCG only "
        "(where IPS applies): " + ", ".join(f"{p} {t:+.2f}" for p, t in on_dcg.items() if t == t)
        + ".")
    leads = "; ".join(f"over {r.other} {r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}]"
                      for r in differences.itertuples())
    significant = differences[differences.significant == "yes"]
    if len(significant) == len(differences):
        strength = "significantly better than each other unweighted protocol"
    elif len(significant):
        strength = ("significantly better only than " + ", ".join(significant.other)
                    + "; its lead over the others is not significant")
    else:
        strength = ("not significantly better than the others: the differences between the "
                    "unweighted protocols are not significant")
    lines.append(f"Verdict: on Coat the unweighted protocol whose model ordering is closest to the "
                 f"MCAR truth is {best} (mean τ {by_protocol[best]:+.2f}), {strength} (lead in "
                 f"mean τ, paired bootstrap {config.level:.0%} interval over users and splits: "
                 f"{leads}); IPS weighting "
                 + ("helps" if on_dcg[[A1_IPS, A2_IPS]].max() > on_dcg[[A1, A2]].max() else
                    "does not help") + " on the DCG metrics it applies to (no test of that "
                 "difference). Trust it only as far as the intervals allow:")
    if steck:                  # before the verdict and its caveats
        leads = [(protocol.split()[0], *_lead(config, agree, records, protocol, B), claim.verdict)
                 for protocol, claim in zip((A1, A2), steck)]
        lines.insert(-1, "Steck's argument that ranking all or the unrated items reflects users better than "
                     "ranking only their rated test items (the Claims section), mean τ minus that of b: "
                     + "; ".join(f"{name} {lead:+.2f} [{low:+.2f}, {high:+.2f}], {verdict}"
                                 for name, lead, low, high, verdict in leads) + ".")
    lines += [
        f"- {int(v['users'])} users with 16 random ratings each, of which about 3 are relevant "
        f"(and {int(v['users']) - int(v['users with relevant MCAR'])} users have none), so the "
        "truth itself is noisy: with six models τ moves in steps of 2/15 = 0.13 per swapped "
        "pair, and the bootstrap intervals span several such steps; models closer than the "
        "truth's 2-SE resolution are ties, which the inversion counts leave out.",
        "- IPS is only as good as the shipped propensities, which are the authors' estimates "
        "(Schnabel et al. §6 say how they were fitted); if their estimate drew on the random "
        "ratings, IPS borrows from the truth it is scored against.",
        "- One catalogue of 300 coats and one kind of user: a verdict about protocols on this data, "
        "not a law; the simulated cells of `protocols` show how it can change with the "
        "observation process."]
    edges = selected[selected["at grid edge"] != ""]
    if len(edges):
        lines.append("- Selected at a grid edge: " + "; ".join(
            f"split {r['split']} {r['model']} ({r['at grid edge']})"
            for _, r in edges.iterrows()) + ".")
    else:
        lines.append("- No selected hyper-parameter is at the edge of its grid.")
    return "\n".join(lines)


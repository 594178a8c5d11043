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
                                         OFFLINE, POOLED, TRUTH, TRUTH_RANDOM, UNWEIGHTED, interval)

TRUTHS = (TRUTH, TRUTH_RANDOM)

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
    """Per MCAR truth x offline protocol x metric: τ of the pooled values (each model's per-user
    values averaged over the splits first) with its bootstrap interval over users; the mean,
    smallest and largest τ of the single splits; and the noise-aware inversions summed over the
    splits."""
    tau = records[records.part == "agreement"]
    keys = ["truth", "protocol", "metric"]
    pooled = tau[tau.split == POOLED].set_index(keys)[["value", "low", "high"]].rename(
        columns={"value": "tau"})
    single = tau[tau.split != POOLED].groupby(keys, sort=False).agg(
        split_tau=("value", "mean"), split_tau_min=("value", "min"), split_tau_max=("value", "max"),
        splits=("value", "size"))
    counted = flips.groupby(keys, sort=False)[
        ["offline decided", "truth decided", "both decided", "inverted"]].sum()
    out = pooled.join(single).join(counted).reset_index()
    rank = {name: i for i, name in enumerate((*TRUTHS, *OFFLINE, *METRICS))}
    return out.sort_values(keys, key=lambda column: column.map(rank)).reset_index(drop=True)


def values_table(records: pd.DataFrame) -> pd.DataFrame:
    """Model x protocol x metric user means (mean over splits) and the split-0 standard error."""
    scored = records[(records.part == "model") & (records.user_part == ALL_USERS)]
    wide = scored.groupby(["protocol", "metric", "model"], sort=False).value.mean().unstack("model")
    return wide[[m for m in MODELS if m in wide.columns]].reset_index()


def protocol_differences(config: CoatConfig, agree: pd.DataFrame,
                         records: pd.DataFrame) -> pd.DataFrame:
    """Per MCAR truth, the unweighted protocol with the highest mean τ over the metrics (pooled
    values) against each other one: the difference of mean τ and its paired percentile bootstrap
    interval at `level` (`_lead`). A difference is significant when its interval excludes 0."""
    rows = []
    for truth in TRUTHS:
        main = agree[(agree.truth == truth) & agree.protocol.isin(UNWEIGHTED)]
        best = main.groupby("protocol").tau.mean().reindex(UNWEIGHTED).idxmax()
        for other in (p for p in UNWEIGHTED if p != best):
            difference, low, high = _lead(config, agree, records, best, other, truth)
            rows.append({"truth": truth, "best": best, "other": other, "difference": difference,
                         "low": low, "high": high, "significant": "yes" if low > 0 or high < 0 else "no"})
    return pd.DataFrame(rows)


def selected_table(records: pd.DataFrame) -> pd.DataFrame:
    chosen = records[records.part == "selected"]
    return pd.DataFrame({"split": chosen.split, "model": chosen.model, "selected": chosen.point,
                         "selected by": chosen.metric, "validation value": chosen.value,
                         "budget (sweeps or pairs)": chosen.budget,
                         "at grid edge": chosen.edges,
                         "not searched (< 3 values)": chosen.unsearched}).reset_index(drop=True)


def _figure(table: pd.DataFrame):
    """τ of the pooled values per metric and offline protocol with its bootstrap interval, one
    panel per MCAR truth."""
    figure, axes = reporting.figure(1, len(TRUTHS), width=6.5, height=3.8)
    with reporting.theme():
        for ax, truth in zip(axes[0], TRUTHS):
            main = table[table.truth == truth]
            labels = [m for m in METRICS if m in set(main.metric)]
            width = 0.8 / max(len(OFFLINE), 1)
            for j, protocol in enumerate(OFFLINE):
                rows = main[main.protocol == protocol].set_index("metric").reindex(labels)
                x = np.arange(len(labels)) + (j - (len(OFFLINE) - 1) / 2) * width
                # a percentile interval need not contain the point estimate: draw it as it is
                ax.vlines(x, rows.low, rows.high, color=f"C{j}", lw=1)
                ax.plot(x, rows.tau, "o", color=f"C{j}", label=protocol)
            ax.axhline(0, color="black", lw=0.8)
            ax.set_xticks(np.arange(len(labels)), labels)
            ax.set_ylim(-1.05, 1.05)
            ax.set_ylabel("Kendall τ (values pooled over splits)")
            ax.set_title(f"truth: {truth}", fontsize=9)
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
    leads = steck_leads(config, agree, records)
    steck = _claims_from(config, leads)
    return Report(tables=tables, figures={"fig_agreement": _figure(agree)},
                  summary=summary_text(config, records, agree, selected, differences, leads), claims=steck)


def steck_leads(config: CoatConfig, agree: pd.DataFrame, records: pd.DataFrame) -> list[dict]:
    """Per MCAR truth and protocol (a1, a2): its lead over (b) in τ of the pooled values, mean over
    the metrics, the paired bootstrap interval at `level` over users (`_lead`), and the verdict on
    Steck's argument (reproduced when the interval lies above 0, not reproduced below, else tie)."""
    out = []
    for truth in TRUTHS:
        for protocol in (A1, A2):
            lead, low, high = _lead(config, agree, records, protocol, B, truth)
            out.append({"truth": truth, "protocol": protocol, "lead": lead, "low": low, "high": high,
                        "verdict": "reproduced" if low > 0 else "not reproduced" if high < 0 else "tie"})
    return out


def claims(config: CoatConfig, agree: pd.DataFrame, records: pd.DataFrame) -> list[reporting.Claim]:
    """Steck's argument (RecSys'13, §3.3): an offline test that ranks all items (a1) or the unrated
    items (a2) reflects what users meet better than one that ranks only their rated test items (b).
    Here, against each MCAR truth: τ of the pooled values, mean over the metrics, of (a1) and of
    (a2) against (b), with the paired bootstrap interval at `level` over users (`steck_leads`)."""
    return _claims_from(config, steck_leads(config, agree, records))


def _claims_from(config: CoatConfig, leads: list[dict]) -> list[reporting.Claim]:
    return [reporting.Claim(
        "Steck RecSys'13, §3.3", f"ranking the {'whole catalogue' if r['protocol'] == A1 else 'unrated items'} "
        f"({r['protocol'].split()[0]}) orders models closer to the users' truth than ranking the rated "
        f"test items (b); truth: {r['truth']}", "argued, no number (Netflix has no missing-at-random truth)",
        f"mean Kendall τ {r['protocol'].split()[0]} minus b: {r['lead']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}] "
        f"({config.level:.0%} paired bootstrap over users; values pooled over {config.splits} splits)",
        r["verdict"], where="table_agreement") for r in leads]


def _lead(config: CoatConfig, agree: pd.DataFrame, records: pd.DataFrame, protocol: str, other: str,
          truth: str):
    """(mean τ of `protocol` minus that of `other` against `truth`, low, high): τ of the pooled
    values averaged over the metrics, and the percentile interval of the same difference over the
    pooled cell's bootstrap resamples (resample b of every protocol shares its users)."""
    point = agree[agree.truth == truth].groupby("protocol").tau.mean()
    boot = records[(records.part == "bootstrap") & (records.split == POOLED) & (records.truth == truth)]
    draws = boot.pivot_table(index="user_part", columns="protocol", values="value", aggfunc="mean", dropna=False)
    low, high = interval(config, (draws[protocol] - draws[other]).to_numpy())
    return point[protocol] - point[other], low, high


def _skipped_text(config: CoatConfig) -> str:
    relative = f"{config.folder}/{data.COAT_FILES['train']}" if config.folder else ""
    return "No Coat data, nothing computed.\n" + skipped_note(relative)


def summary_text(config: CoatConfig, records: pd.DataFrame, agree: pd.DataFrame,
                 selected: pd.DataFrame, differences: pd.DataFrame, steck_rows=()) -> str:
    sizes = records[(records.part == "data") & (records.split == 0)]
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
             f"Kendall τ of each protocol's model ordering ({len(MODELS)} models) with each MCAR "
             f"truth: every model's per-user values are averaged over the {config.splits} splits "
             f"first (τ of the pooled values, [its {config.level:.0%} bootstrap interval over "
             "users]), so that the splits' refitting noise, which scrambles each single split's "
             "ordering, does not pull τ towards 0; (τ averaged over the single splits in "
             f"parentheses); inverted = pairs both decide beyond {config.z:g} SE ({config.parts} "
             "user parts) but oppositely, summed over splits. The truths: "
             f"'{TRUTH}' ranks every coat outside the fit part with the random ratings as the "
             f"relevant ones; '{TRUTH_RANDOM}' ranks only the user's random coats.", ""]
    for truth in TRUTHS:
        main = agree[agree.truth == truth]
        lines.append(f"Truth {truth}:")
        for protocol in OFFLINE:
            rows = main[main.protocol == protocol]
            cells = "; ".join(f"{r.metric} {r.tau:+.2f} [{r.low:+.2f}, {r.high:+.2f}] ({r.split_tau:+.2f}), "
                              f"{int(r.inverted)}/{int(r['both decided'])} inverted"
                              for _, r in rows.iterrows())
            lines.append(f"- {protocol}: {cells}")
        lines.append("")
    ips_better = []
    for truth in TRUTHS:
        main = agree[agree.truth == truth]
        by_protocol = main.groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
        by_split = main.groupby("protocol", sort=False).split_tau.mean().reindex(OFFLINE)
        on_dcg = main[main.metric.isin(IPS_METRICS)].groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
        ips_better.append(on_dcg[[A1_IPS, A2_IPS]].max() > on_dcg[[A1, A2]].max())
        part = differences[differences.truth == truth]
        best = part.best.iloc[0]
        leads = "; ".join(f"over {r.other} {r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}]"
                          for r in part.itertuples())
        significant = part[part.significant == "yes"]
        if len(significant) == len(part):
            strength = "significantly better than each other unweighted protocol"
        elif len(significant):
            strength = ("significantly better only than " + ", ".join(significant.other)
                        + "; its lead over the others is not significant")
        else:
            strength = "not significantly better than the others"
        lines.append(f"Against {truth}: mean τ over the metrics " + ", ".join(
            f"{p} {t:+.2f} ({by_split[p]:+.2f})" for p, t in by_protocol.items() if t == t)
            + "; on DCG@N and DCG only (where IPS applies): " + ", ".join(
                f"{p} {t:+.2f}" for p, t in on_dcg.items() if t == t)
            + f". Closest to this truth among the unweighted protocols: {best} (mean τ "
            f"{by_protocol[best]:+.2f}), {strength} (lead in mean τ, paired bootstrap "
            f"{config.level:.0%} interval over users: {leads}).")
    if steck_rows:                                     # `steck_leads`
        lines.append("Steck's argument that ranking all or the unrated items reflects users better than "
                     "ranking only their rated test items (the Claims section), mean τ minus that of b: "
                     + "; ".join(f"{r['protocol'].split()[0]} against {r['truth']}: {r['lead']:+.2f} "
                                 f"[{r['low']:+.2f}, {r['high']:+.2f}], {r['verdict']}" for r in steck_rows) + ".")
    lines.append("IPS weighting " + ("helps" if all(ips_better) else "does not help" if not any(ips_better)
                                     else "helps against one truth only")
                 + " on the DCG metrics it applies to (no test of that difference). Trust these "
                 "verdicts only as far as the intervals allow:")
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


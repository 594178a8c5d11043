"""The report of study ``fold_in``: the MANDCG, selection, crossing, curve and early-stopping
tables, the NDCG@k-against-L figure, the FastML note's claims beside ours, and the prose."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simrec import reporting
from simrec.datafiles import data_file, skipped_note
from simrec.reporting import Claim
from simrec.runner import Report
from simrec_studies.fold_in.compute import HYPERPARAMETERS, LASTFM, MODELS, STOP_METRIC, real_files, selection

if TYPE_CHECKING:
    from simrec_studies.fold_in import FoldInConfig

#: the source the study reproduces (`/work/shared/sources`, 002)
FASTML = "FastML, Evaluating recommender systems"
#: the size of the note's test set (users); ours matches it when a source has at least half as many
NOTE_TEST_USERS = 1000
#: `reporting.verdict` outcome -> how the note's claim fares
OUTCOME = {"holds": "reproduced", "fails": "not reproduced", "tie": "tie", "unclear": "not testable"}


def _crossings(curves: pd.DataFrame) -> list[dict]:
    """Per pair of models, the L at which the sign of the difference of mean NDCG changes
    (reported as the first L after the change) and which model leads before and after. A
    crossing is "clear" when the model leading before it is significantly ahead (its confidence
    interval entirely above the other's) at some smaller L and the model leading after it at
    some L at or beyond it; otherwise the order change is within noise."""
    out = []
    for data_name, part in curves.groupby("data", sort=False):
        wide = {v: part.pivot(index="L", columns="model", values=v) for v in ("mean", "low", "high")}
        for i, a in enumerate(MODELS):
            for b in MODELS[i + 1:]:
                diff = (wide["mean"][a] - wide["mean"][b]).to_numpy()
                ahead = {a: (wide["low"][a] > wide["high"][b]).to_numpy(),
                         b: (wide["low"][b] > wide["high"][a]).to_numpy()}
                for j in np.flatnonzero(np.sign(diff[1:]) * np.sign(diff[:-1]) < 0):
                    before, after = (a, b) if diff[j] > 0 else (b, a)
                    out.append({"data": data_name, "model a": a, "model b": b,
                                "L": int(wide["mean"].index[j + 1]),
                                "leader before": before, "leader after": after,
                                "clear": bool(ahead[before][:j + 1].any()
                                              and ahead[after][j + 1:].any())})
    return out


def _tables(config: FoldInConfig, records: pd.DataFrame):
    """(curves, MANDCG table) from the records: the strong NDCG@k curve points on the test users,
    and per data source and model MANDCG, the curve's ends, weak NDCG@k, users and wall time."""
    curves = records[(records.protocol == "strong") & (records.measure == "ndcg")]
    curves = curves[["data", "model", "L", "mean", "low", "high", "se"]].reset_index(drop=True)
    rows = []
    for (name, model), part in records.groupby(["data", "model"], sort=False):
        strong = part[(part.protocol == "strong") & (part.measure == "ndcg")].set_index("L")
        largest = int(strong.index.max())
        mandcg = part[(part.protocol == "strong") & (part.measure == "mandcg")].iloc[0]
        weak = part[part.protocol == "weak"].iloc[0]
        rows.append({"data": name, "model": model,
                     "MANDCG (strong)": mandcg["mean"], "MANDCG se": mandcg["se"],
                     "largest L": largest, f"NDCG@{config.k} strong L=1": strong.loc[1, "mean"],
                     f"NDCG@{config.k} strong at largest L": strong.loc[largest, "mean"],
                     f"NDCG@{config.k} weak": weak["mean"], "weak se": weak["se"],
                     "evaluated users": mandcg["users"], "cell wall time (s)": mandcg["seconds"]})
    return curves, pd.DataFrame(rows)


def _point(row) -> dict[str, float]:
    """A record's grid point {name: value} (its non-NaN `HYPERPARAMETERS`)."""
    return {name: float(row[name]) for name in HYPERPARAMETERS if not math.isnan(row[name])}


def selected_table(config: FoldInConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Per data source and model, the grid point selected by validation MANDCG (`selection` over
    the "validation" records), its validation MANDCG, the users behind it, the budget at its best
    early-stopping checkpoint and whether its training ran to the maximum budget (the safety
    net: `pairs` for MF-ADG, `ials_sweeps` for iALS) without stopping early, the grid size, and
    the hyperparameters at the edge of their grid ("at grid edge") or searched at fewer than 3
    values ("not searched")."""
    rows = []
    for (name, model), part in records.groupby(["data", "model"], sort=False):
        valid = part[part.protocol == "validation"]
        points = [_point(r) for _, r in valid.iterrows()]
        choice = selection(model, points, valid["mean"].to_numpy(), valid["se"].to_numpy())
        best = valid.iloc[0 if choice is None else choice.index]
        test = part[(part.protocol == "strong") & (part.measure == "mandcg")].iloc[0]
        curve = part[(part.protocol == "stopping") & (part.l2 == best["l2"])]
        maximum = config.pairs if model == "MF-ADG" else config.ials_sweeps
        rows.append({"data": name, "model": model,
                     "selected": ", ".join(f"{k} = {v:g}" for k, v in _point(best).items()),
                     "validation MANDCG": best["mean"], "validation se": best["se"],
                     "grid points": len(valid), "validation users": int(best["users"]),
                     "test users": int(test["users"]),
                     "best checkpoint": int(best["budget"]),
                     "ran to maximum": ("" if curve.empty else
                                        "yes" if curve.budget.max() >= maximum else "no"),
                     "at grid edge": "" if choice is None else ", ".join(choice.edges),
                     "not searched": "" if choice is None else ", ".join(choice.unsearched)})
    return pd.DataFrame(rows)


def _stopping_figure(records: pd.DataFrame):
    """Validation NDCG@10 of the training users against sampled pairs, one panel per data source,
    one line per MF-ADG training λ (iALS's curves, in sweeps, are in `table_stopping`)."""
    curves = records[(records.protocol == "stopping") & (records.model == "MF-ADG")]
    names = list(dict.fromkeys(curves.data))
    fig, axes = reporting.figure(1, max(len(names), 1), width=4.6, height=3.4)
    with reporting.theme():
        for ax, name in zip(axes[0], names):
            part = curves[curves.data == name]
            for l2, line in part.groupby("l2"):
                ax.plot(line.budget, line["mean"], marker=".", label=f"λ = {l2:g}")
            ax.set_xlabel("sampled pairs")
            ax.set_ylabel(f"validation {STOP_METRIC}")
            ax.set_title(f"{name}: MF-ADG early stopping", fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
    return fig


def _curves_figure(config: FoldInConfig, curves: pd.DataFrame, table: pd.DataFrame):
    """Mean NDCG@k of the test users against L with confidence bands, one panel per data source."""
    import seaborn as sns

    names = list(dict.fromkeys(table.data))
    fig, axes = reporting.figure(1, len(names), width=5.2, height=3.9)
    palette = dict(zip(MODELS, sns.color_palette("tab10", len(MODELS))))
    with reporting.theme():
        for ax, name in zip(axes[0], names):
            part = curves[curves.data == name]
            for model in MODELS:
                line = part[part.model == model]
                ax.plot(line.L, line["mean"], color=palette[model], label=model)
                ax.fill_between(line.L, line.low, line.high, color=palette[model], alpha=0.2)
            ax.set_xlabel("L (revealed interactions of a new user)")
            ax.set_ylabel(f"mean NDCG@{config.k} on the rest")
            users = int(table[table.data == name]["evaluated users"].iloc[0])
            ax.set_title(f"{name} ({users} held-out users, {config.level:.0%} CI)", fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
    return fig


def _difference_claim(claim: str, source_value: str, difference: float, se: float,
                      where: str) -> Claim:
    """A claim that a difference is positive, decided by `reporting.verdict` (beyond 2 SE)."""
    decided = reporting.verdict(difference, se)
    return Claim(FASTML, claim, source_value, decided.mean, OUTCOME[decided.verdict], decided.se,
                 where)


def _source_claims(config, name: str, models: pd.DataFrame, curves: pd.DataFrame,
                   cross: pd.DataFrame) -> list[Claim]:
    """A data source's claims (`claims`): the curve rises with L, curves cross, fold-in serves
    new users."""
    best = models["MANDCG (strong)"].drop("popularity").idxmax()
    line = curves[(curves.data == name) & (curves.model == best)].set_index("L")
    largest = int(line.index.max())
    first, last = line.loc[1], line.loc[largest]
    clear = cross[cross.clear]
    ours = ("; ".join(f"{c['leader before']} → {c['leader after']} at L = {c['L']}"
                      for c in clear.to_dict("records"))
            or f"none clear ({len(cross)} within noise)")
    ials, popularity = models.loc["iALS"], models.loc["popularity"]
    return [_difference_claim(
                f"{name}: NDCG@{config.k} of a new user rises as they reveal more interactions "
                f"(L = 1 to {largest}; {best}, the best MANDCG but popularity)",
                "rises with L, then levels off (NDCG@50)", last["mean"] - first["mean"],
                math.hypot(first.se, last.se), "table_curves"),
            Claim(FASTML, f"{name}: the curves of two models can cross, so the better one "
                  f"depends on L (clear crossings, {config.level:.0%} CIs apart)",
                  "a crossing near L = 50", ours,
                  "reproduced" if len(clear) else "tie" if len(cross) else "not reproduced",
                  where="table_crossings"),
            _difference_claim(
                f"{name}: a factor model trained once serves new users by fold-in (item factors "
                f"fixed, a ridge solve for the user): iALS's MANDCG minus popularity's",
                "", ials["MANDCG (strong)"] - popularity["MANDCG (strong)"],
                math.hypot(ials["MANDCG se"], popularity["MANDCG se"]), "table_mandcg")]


def claims(config: FoldInConfig, table: pd.DataFrame, curves: pd.DataFrame,
           crossings: pd.DataFrame) -> list[Claim]:
    """The FastML note's claims beside ours: per data source, that the curve of a new user rises
    with L (the best model by MANDCG among those that read the history, i.e. not popularity:
    NDCG@k at the largest L minus L = 1), that two models'
    curves can cross (the clear crossings), that a factor model serves new users by fold-in
    without retraining (iALS's MANDCG minus popularity's); then that MANDCG is the mean of the
    curve over L, and the size of the test set. The records hold each curve point's mean and
    standard error over the same users, not the per-user differences, so a difference's standard
    error combines the two as if they were independent: conservative when the users' values are
    positively correlated, as they are here."""
    out = [claim for name, part in table.groupby("data", sort=False)
           for claim in _source_claims(config, name, part.set_index("model"), curves,
                                       crossings[crossings.data == name])]
    area = curves.groupby(["data", "model"], sort=False)["mean"].mean()
    deviation = float((table.set_index(["data", "model"])["MANDCG (strong)"] - area).abs().max())
    out.append(Claim(FASTML, "MANDCG, the mean over users of each user's average NDCG@k over L = 1 "
                     "to the largest L, is the mean of the curve over L (the area under it): "
                     "largest deviation", "", deviation,
                     "reproduced" if deviation <= 1e-9 else "not reproduced", where="table_mandcg"))
    users = table.groupby("data", sort=False)["evaluated users"].first()
    out.append(Claim(FASTML, "a test set of this size shows the curves' shapes, with some noise "
                     f"(held-out users; median standard error of a curve point "
                     f"{reporting.number(curves.se.median())})", f"about {NOTE_TEST_USERS} users",
                     ", ".join(f"{name} {int(n)}" for name, n in users.items()),
                     "reproduced" if users.max() >= NOTE_TEST_USERS / 2 else "differs in setting",
                     where="table_curves"))
    return out


def report(config: FoldInConfig, records: pd.DataFrame) -> Report:
    curves, table = _tables(config, records)
    crossings = pd.DataFrame(_crossings(curves),
                             columns=["data", "model a", "model b", "L", "leader before",
                                      "leader after", "clear"])
    chosen = selected_table(config, records)
    stopping = records[records.protocol == "stopping"][
        ["data", "model", "l2", "budget", "mean"]].rename(columns={"mean": STOP_METRIC})
    return Report(tables={"table_mandcg": table, "table_selected": chosen,
                          "table_crossings": crossings, "table_curves": curves,
                          "table_stopping": stopping},
                  figures={"fig_ndcg_vs_L": _curves_figure(config, curves, table),
                           "fig_early_stopping": _stopping_figure(records)},
                  claims=claims(config, table, curves, crossings),
                  summary=_summary_text(config, table, crossings, chosen))


def _summary_text(config, table, crossings, chosen) -> str:
    reach = ", ".join(f"{name} {int(L)}" for name, L in
                      table.groupby("data", sort=False)["largest L"].first().items())
    lines = [f"Strong generalisation: NDCG@{config.k} of held-out test users after revealing "
             f"L = 1 .. the largest L ({reach}) interactions (fold-in, no retraining); held-out "
             f"users are drawn among those with at least L + {config.min_rest} interactions. "
             f"MANDCG = mean over "
             f"L (± standard error over users). Every model's hyperparameters are selected by "
             f"MANDCG on separate validation users (grids in `manifest.json`, selections in "
             f"`table_selected`; MF-ADG's training λ by the one-standard-error rule, the largest λ "
             f"within one standard error of the best); MF-ADG and iALS stop early on {STOP_METRIC} of a per-user "
             f"{config.stop_fraction:.0%} part of the training users (`fig_early_stopping`). "
             f"Weak generalisation: the same fitted models on a per-user "
             f"{config.weak_test_fraction:.0%} test split of the training users. "
             f"Crossings marked * are within noise: the leader before it is never "
             f"significantly ahead ({config.level:.0%} CIs apart) at a smaller L, or the leader "
             "after it never at a larger one.",
             ""]
    for data_name, part in table.groupby("data", sort=False):
        lines += _source_lines(config, data_name, part, crossings[crossings.data == data_name],
                               chosen[chosen.data == data_name].set_index("model"))
    lines += ["", _claims_paragraph(config, reach), "", _convergence_paragraph(chosen)]
    edges = chosen[chosen["at grid edge"] != ""]
    lines += ["", "Grid edges (`table_selected`, column 'at grid edge'): " + (
        "none — every selected value is inside its grid." if edges.empty else "; ".join(
            f"{r.data} {r.model}: {r['at grid edge']} (widen that grid)"
            for _, r in edges.iterrows()))]
    for name, path in real_files(config).items():
        if not data_file(path):
            lines.append(skipped_note(path) if path else f"- {name} disabled (its file is \"\")")
    if data_file(config.lastfm_file):
        lines.append(f"- {LASTFM}: HetRec 2011 last.fm data (Cantador, Brusilovsky, Kuflik, "
                     "HetRec 2011), for non-commercial use only; every listened artist is a "
                     f"positive, artists with fewer than {config.lastfm_min_item} listeners "
                     "dropped.")
    return "\n".join(lines)


def _source_lines(config, data_name: str, part: pd.DataFrame, cross: pd.DataFrame,
                  picked: pd.DataFrame) -> list[str]:
    """A data source's MANDCG and weak NDCG@k per model (best first), selections and crossings."""
    ranked = part.sort_values("MANDCG (strong)", ascending=False)
    lines = [f"- {data_name} ({int(part['evaluated users'].iloc[0])} held-out test users, "
             f"{int(picked['validation users'].iloc[0])} validation users; fitted, tuned "
             f"and evaluated in {part['cell wall time (s)'].sum():.0f} s): "
             "MANDCG " + ", ".join(
                 f"{row.model} {reporting.plus_minus(row['MANDCG (strong)'], row['MANDCG se'], '.3f')}"
                 for _, row in ranked.iterrows())
             + f"; weak NDCG@{config.k} " + ", ".join(
                 f"{row.model} {row[f'NDCG@{config.k} weak']:.3f}" for _, row in ranked.iterrows()),
             "  selected: " + "; ".join(
                 f"{model} {row.selected}" for model, row in picked.iterrows() if row.selected)]
    if len(cross):
        lines.append("  crossings: " + "; ".join(
            f"{c['leader before']} -> {c['leader after']} at L = {c['L']}"
            + ("" if c["clear"] else "*") for c in cross.to_dict("records")))
    else:
        lines.append("  no crossings of mean curves")
    return lines


def _claims_paragraph(config, reach: str) -> str:
    """What `table_claims` judges, and its caveats."""
    return ("Claims of the FastML note (`table_claims`): a new user's NDCG@K should rise as they "
            "reveal more interactions (judged on the best model that reads the history; popularity "
            "ignores it, and as NDCG@K is computed on the user's remaining items, which shrink as "
            "L grows, its curve falls); two models' curves can cross, the note's near L = 50 "
            f"(ours end at L = {reach}); a "
            "factor model serves new users by fold-in without retraining (iALS against "
            "popularity); MANDCG is the mean of the curve over L; and the note's test set of "
            f"about {NOTE_TEST_USERS} users. The note reports no table, only a figure, so its numbers beside "
            "ours are its K, L and sample size. The records hold each curve point's mean and "
            "standard error over the same users, not per-user differences, so a difference's "
            "standard error treats the two as independent (conservative for positively "
            "correlated users); a verdict holds beyond 2 of those standard errors. A crossing is "
            f"clear when the two {config.level:.0%} confidence intervals separate on both sides "
            "of it, a stricter rule than 2 SE of the difference.")


def _convergence_paragraph(chosen: pd.DataFrame) -> str:
    """Whether a selected trained model ran to its maximum budget, and how the grids interact."""
    net = chosen[chosen["ran to maximum"] == "yes"]
    return "Convergence: " + (
        "every selected trained model stopped early (patience) before its maximum budget."
        if net.empty else "the selected " + "; ".join(f"{r.data} {r.model}" for _, r in
                                                      net.iterrows())
        + " ran to the maximum budget without stopping early (raise `pairs` / `ials_sweeps`).") \
        + (" MF-ADG's training λ and fold-in λ interact: a smaller training λ gives larger item "
           "factors, so the best fold-in λ is larger; the top fold-in values rank by summed item "
           "similarity (the λ → ∞ limit), the top k values make every item a neighbour.")

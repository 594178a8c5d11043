"""Jeunen, Potapov & Ustimenko's (KDD'24 §6.1) Table 2 estimators (`table2.ESTIMATORS`) on one
signal's log through the estimator registry of `simrec.ope`: DCG {log, pbm} x {C, Q̂} ("dcg" at
m = 1 or m = the clip), nDCG (pbm, Q̂) with sessions without a positive label skipped or counted as 0
("ndcg" with option zero_ideal "skip" or "zero") and pnDCG = mean DCG / mean iDCG ("pndcg").
`inputs` wraps exposures of the logged items a study has computed already (under the views "log"
and "pbm") as `ope.LoggedData` and `ope.Target`; `contributions` gives the per-session values,
`estimates` their means and standard errors (`ope.contributions`, `ope.summarise`). Kept apart from
`table2` (layout and the paper's numbers) so that a study whose report alone shows the paper's
numbers computes without them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from simrec import ope

__all__ = ["REGISTRY", "contributions", "estimates", "inputs"]

#: estimator key -> (view, the registry's estimator, its options, labels): labels "C" = clipping m = 1,
#: "Q̂" = m = the setting's clip (inf: unclipped)
REGISTRY = {
    "dcg_log_c": ("log", "dcg", {}, "C"), "dcg_log_q": ("log", "dcg", {}, "Q̂"),
    "dcg_pbm_c": ("pbm", "dcg", {}, "C"), "dcg_pbm_q": ("pbm", "dcg", {}, "Q̂"),
    "ndcg_zero": ("pbm", "ndcg", {"zero_ideal": "zero"}, "Q̂"),
    "ndcg_skip": ("pbm", "ndcg", {"zero_ideal": "skip"}, "Q̂"),
    "pndcg": ("pbm", "pndcg", {}, "Q̂"),
}


def inputs(rewards, viewed, exposures: Mapping[str, Mapping], discount, logger: str = "R0"
           ) -> tuple[dict[str, ope.LoggedData], dict[str, dict[str, ope.Target]]]:
    """The registry's inputs of one signal's log under each view: ({view: `ope.LoggedData`},
    {view: {name: `ope.Target`}}). rewards: [N, K] the signal's labels; viewed: bool[N, K];
    exposures: {"log" | "pbm": {name: ε f32[N, K] of the logged items}}, the logger's under
    ``logger``; discount: the pbm's view probabilities P(V=1 | rank) (the nDCG ideal's discount)."""
    data = {view: ope.LoggedData(rewards, viewed, by[logger], discount if view == "pbm" else None)
            for view, by in exposures.items()}
    return data, {view: {name: ope.Target(e) for name, e in by.items()} for view, by in exposures.items()}


def contributions(data: Mapping[str, ope.LoggedData], targets: Mapping[str, Mapping[str, ope.Target]], clip: float,
                  keys: Sequence[str] = tuple(REGISTRY)) -> dict[tuple[str, str], ope.Contribution]:
    """{(key, target): `ope.Contribution` f64[1, N]} of the estimators ``keys`` (`REGISTRY`) for
    every target (`inputs`): the registry's per-trajectory contributions (`ope.contributions`)
    under the key's view, at m = 1 for labels C and m = ``clip`` for Q̂; an nDCG (skip) value is
    NaN for a session without a positive label. One registry call per view: nDCG is computed once,
    with sessions without an ideal skipped, and nDCG (zero) is that with its NaN set to 0 (the
    one difference `ope.trajectory_ndcg` makes between the two)."""
    m = np.array([1.0, clip])
    out = {}
    for view in dict.fromkeys(REGISTRY[key][0] for key in keys):
        group = [key for key in keys if REGISTRY[key][0] == view]
        names = list(dict.fromkeys(REGISTRY[key][1] for key in group))
        options = {"zero_ideal": "skip"} if "ndcg" in names else {}
        parts = ope.contributions(data[view], targets[view], m, estimators=names, options=options)
        for key in group:
            i = 0 if REGISTRY[key][3] == "C" else 1
            for target in targets[view]:
                c = parts[REGISTRY[key][1], target].at(slice(i, i + 1))
                if REGISTRY[key][2].get("zero_ideal") == "zero":
                    c = c._replace(numerator=np.where(np.isnan(c.numerator), 0.0, c.numerator))
                out[key, target] = c
    return {(key, target): out[key, target] for key in keys for target in targets[REGISTRY[key][0]]}


def estimates(parts: Mapping[tuple[str, str], ope.Contribution]) -> dict[tuple[str, str], tuple[float, float]]:
    """{(key, target): (estimate, standard error)} of `contributions` (`ope.summarise`: a mean of
    the per-trajectory values, NaN skipped, or pnDCG's ratio of means with its delta-method SE)."""
    return {k: (float(s["value"][0]), float(s["value_se"][0])) for k, s in ope.summarise(parts, 1.0).items()}

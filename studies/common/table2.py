"""Jeunen, Potapov & Ustimenko's (KDD'24 §6.1) Table 2: the offline estimators it correlates with
online reward over days, its layout and its numbers.

The estimators (`ESTIMATORS`, keys -> Table 2's labels): DCG with the discount ``log``
(1/log₂(i+1)) or ``pbm`` (the position-based model learnt from the logged depths) × the labels
``C`` (raw clicks: clipping m = 1) or ``Q̂`` = C / P(V|R) (importance-weighted); nDCG (pbm, Q̂)
with sessions whose ideal DCG is 0 skipped or counted as 0 (the paper does not say which); pnDCG
(pbm, Q̂) = mean DCG / mean iDCG, which the paper does not report. The settings (`SETTINGS`) are
feed level × signal (C_exp: the explicit "like", C_imp: the implicit "watch") × policy (R₀ the
logger, R_t the target); `PAPER` and `PAPER_P` hold the paper's Pearson r and two-tailed p per
setting, in `SETTINGS` order.

`inputs`, `contributions` and `estimates` compute the estimators on one signal's log through the
estimator registry (`simrec.ope`: "dcg", "ndcg" with its option zero_ideal, "pndcg"), from
exposures of the logged items the study has computed already.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from simrec import ope

__all__ = ["ESTIMATORS", "REGISTRY", "POLICIES", "SIGNALS", "SETTINGS", "PAPER", "PAPER_P", "setting_label",
           "inputs", "contributions", "estimates"]

#: estimator key -> its label in Table 2 (rows of the output tables)
ESTIMATORS = {
    "dcg_log_c": "DCG (log, C)", "dcg_log_q": "DCG (log, Q̂)", "dcg_pbm_c": "DCG (pbm, C)",
    "dcg_pbm_q": "DCG (pbm, Q̂)", "ndcg_zero": "nDCG (pbm, Q̂), iDCG=0 → 0",
    "ndcg_skip": "nDCG (pbm, Q̂), iDCG=0 skipped", "pndcg": "pnDCG (pbm, Q̂)",
}
#: estimator key -> (view, the registry's estimator, its options, labels): labels "C" = clipping m = 1,
#: "Q̂" = m = the setting's clip (inf: unclipped)
REGISTRY = {
    "dcg_log_c": ("log", "dcg", {}, "C"), "dcg_log_q": ("log", "dcg", {}, "Q̂"),
    "dcg_pbm_c": ("pbm", "dcg", {}, "C"), "dcg_pbm_q": ("pbm", "dcg", {}, "Q̂"),
    "ndcg_zero": ("pbm", "ndcg", {"zero_ideal": "zero"}, "Q̂"),
    "ndcg_skip": ("pbm", "ndcg", {"zero_ideal": "skip"}, "Q̂"),
    "pndcg": ("pbm", "pndcg", {}, "Q̂"),
}
POLICIES = ("R0", "Rt")                  # the logger R₀ and the deterministic target R_t
LEVELS = ("level1", "level2")            # the paper's 1st- and 2nd-level feeds
SIGNALS = ("like", "watch")              # C_exp (explicit) and C_imp (implicit)
#: Table 2's columns: (level, signal, policy)
SETTINGS = [(level, signal, policy) for level in LEVELS for signal in SIGNALS for policy in POLICIES]

#: Jeunen et al. KDD'24 Table 2, Pearson r per setting (`SETTINGS` order); its nDCG column is
#: (pbm, Q̂) with an unstated rule for sessions without a positive label, shown on the skip row
PAPER = {
    "dcg_log_c": (0.97, 0.86, 0.57, 0.05, 0.75, 0.28, 0.10, 0.55),
    "dcg_log_q": (0.96, 0.86, 0.70, 0.17, 0.71, 0.25, 0.58, 0.88),
    "dcg_pbm_c": (0.97, 0.87, 0.57, 0.05, 0.77, 0.38, 0.48, 0.70),
    "dcg_pbm_q": (0.98, 0.91, 0.70, 0.17, 0.79, 0.49, 0.85, 0.88),
    "ndcg_skip": (-0.91, -0.80, -0.80, -0.32, -0.42, -0.34, -0.93, -0.77),
}
#: the two-tailed p-values of `PAPER`, as the paper prints them
PAPER_P = {
    "dcg_log_c": ("<0.01", "0.03", "0.24", "0.92", "0.14", "0.65", "0.88", "0.34"),
    "dcg_log_q": ("<0.01", "0.03", "0.12", "0.73", "0.18", "0.68", "0.30", "0.05"),
    "dcg_pbm_c": ("<0.01", "0.03", "0.24", "0.92", "0.13", "0.53", "0.41", "0.19"),
    "dcg_pbm_q": ("<0.01", "0.01", "0.12", "0.75", "0.11", "0.40", "0.07", "0.05"),
    "ndcg_skip": ("0.01", "0.06", "0.06", "0.55", "0.48", "0.57", "0.02", "0.13"),
}


def setting_label(level: str, signal: str, policy: str) -> str:
    """A setting's column name in Table 2's style, e.g. "L1 C_exp R0"."""
    return f"{'L1' if level == 'level1' else 'L2'} {'C_exp' if signal == 'like' else 'C_imp'} {policy}"


# ---- the estimates, through the registry -----------------------------------------------------------

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
                  keys: Sequence[str] = tuple(ESTIMATORS)) -> dict[tuple[str, str], ope.Contribution]:
    """{(key, target): `ope.Contribution` f64[1, N]} of the estimators ``keys`` (`REGISTRY`) for
    every target (`inputs`): the registry's per-trajectory contributions (`ope.contributions`)
    under the key's view, at m = 1 for labels C and m = ``clip`` for Q̂; an nDCG (skip) value is
    NaN for a session without a positive label."""
    groups: dict[tuple, list[str]] = {}
    for key in keys:
        view, _, options, _ = REGISTRY[key]
        groups.setdefault((view, tuple(sorted(options.items()))), []).append(key)
    m = np.array([1.0, clip])
    out = {}
    for (view, options), group in groups.items():
        names = list(dict.fromkeys(REGISTRY[key][1] for key in group))
        parts = ope.contributions(data[view], targets[view], m, estimators=names, options=dict(options))
        for key in group:
            i = 0 if REGISTRY[key][3] == "C" else 1
            for target in targets[view]:
                c = parts[REGISTRY[key][1], target]
                out[key, target] = c._replace(numerator=c.numerator[i:i + 1],
                                              denominator=None if c.denominator is None else c.denominator[i:i + 1])
    return {(key, target): out[key, target] for key in keys for target in targets[REGISTRY[key][0]]}


def estimates(parts: Mapping[tuple[str, str], ope.Contribution]) -> dict[tuple[str, str], tuple[float, float]]:
    """{(key, target): (estimate, standard error)} of `contributions` (`ope.summarise`: a mean of
    the per-trajectory values, NaN skipped, or pnDCG's ratio of means with its delta-method SE)."""
    return {k: (float(s["value"][0]), float(s["value_se"][0])) for k, s in ope.summarise(parts, 1.0).items()}

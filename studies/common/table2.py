"""Jeunen, Potapov & Ustimenko's (KDD'24 §6.1) Table 2: the offline estimators it correlates with
online reward over days, its layout and its numbers.

The estimators (`ESTIMATORS`, keys -> Table 2's labels): DCG with the discount ``log``
(1/log₂(i+1)) or ``pbm`` (the position-based model learnt from the logged depths) × the labels
``C`` (raw clicks: clipping m = 1) or ``Q̂`` = C / P(V|R) (importance-weighted); nDCG (pbm, Q̂)
with sessions whose ideal DCG is 0 skipped or counted as 0 (the paper does not say which); pnDCG
(pbm, Q̂) = mean DCG / mean iDCG, which the paper does not report. The settings (`SETTINGS`) are
feed level × signal (C_exp: the explicit "like", C_imp: the implicit "watch") × policy (R₀ the
logger, R_t the target); `PAPER` and `PAPER_P` hold the paper's Pearson r and two-tailed p per
setting, in `SETTINGS` order. The estimators on a log, through the estimator registry:
`simrec_studies.common.table2_estimates`.
"""
from __future__ import annotations

__all__ = ["ESTIMATORS", "POLICIES", "SIGNALS", "SETTINGS", "PAPER", "PAPER_P", "setting_label"]

#: estimator key -> its label in Table 2 (rows of the output tables)
ESTIMATORS = {
    "dcg_log_c": "DCG (log, C)", "dcg_log_q": "DCG (log, Q̂)", "dcg_pbm_c": "DCG (pbm, C)",
    "dcg_pbm_q": "DCG (pbm, Q̂)", "ndcg_zero": "nDCG (pbm, Q̂), iDCG=0 → 0",
    "ndcg_skip": "nDCG (pbm, Q̂), iDCG=0 skipped", "pndcg": "pnDCG (pbm, Q̂)",
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

"""Offline differences between ranking policies on one logged feed, per session and summarised:
what the studies ``sensitivity`` and ``position_bias`` measure of DCG and nDCG (Jeunen et al.
KDD'24 §6.2, Fig. 1) for every clipping value m at once.

The estimates come from the estimator registry (`simrec.ope`: `from_log` assembles the log's
inputs, `contributions` the per-trajectory values f_τ(m) of "dcg" and "ndcg", `summarise` their
means, standard errors and the paired differences against R₀). On top of the registry:
`offline_differences` adds, per signal and target, the split of the mean difference
Δ_τ(m) = f_τ(R_t) − f_τ(R₀) into the sessions of the top 10 % of iDCG_τ(m) and the rest, each
target's lost exposure and the largest weight 1/ε₀; `target_values` gives the values alone (of a
second log); `independent_aa` the difference of one target's values on two independent logs (an
A/A test).
"""
from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from simrec import feed, ope, stats

METRICS = ("dcg", "ndcg")      # the registry's estimators scored: clipped-IPS DCG, same-discount nDCG
TOP = 0.9                      # sessions with iDCG_τ above this quantile form the "top 10 %"


def _scored(log: feed.Log, logger: feed.Policy, targets: dict, view, m, zero_ideal: str):
    """(`ope.from_log` of R₀ (as "R0") and the targets, {signal: `ope.contributions` of
    `METRICS`})."""
    on = ope.from_log(log, {"R0": logger, **targets}, view)
    parts = {signal: ope.contributions(on.data[signal], on.targets[signal], m, estimators=METRICS,
                                       options={"zero_ideal": zero_ideal})
             for signal in log.signals}
    return on, parts


def offline_differences(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
                        zero_ideal: str = "zero") -> dict:
    """Per-trajectory differences Δ_τ(m) = f_τ(R_t) − f_τ(R₀) of every target on R₀'s log, for
    f = DCG and nDCG and every m at once, summarised per signal and target (`ope.summarise`).

    log: R₀'s `feed.Log` (N >= 2 sessions, feed length K). logger, targets: R₀ and {name: R_t}.
    view: the view model the exposures ε₀, ε (`feed.exposure`) and the nDCG ideal's discount are
    computed under. m: f[M] clipping values. Returns {signal: {name: {metric: {"mean", "se",
    "low", "high", "p", "top", "rest", "value", "value_se": f64[M]}}}} — "top" and "rest" split
    the mean into (1/N) Σ Δ_τ over the sessions whose iDCG_τ(m) lies above its 90th percentile and over the
    others, "value" and "value_se" are the target's own f̄(R_t) and its standard error — plus, under
    the name "R0", each metric's mean f̄(R₀) f64[M]; "lost": the mean target
    exposure per session on items R₀ never exposes (Asm. 5); "max_weight": max 1/ε₀ over viewed items.
    """
    m = np.asarray(m, np.float64)
    on, parts = _scored(log, logger, targets, view, m, zero_ideal)
    lost = {name: float(np.mean(np.asarray(ope.support_loss(on.tables["R0"], on.tables[name]))[on.rows]))
            for name in targets}
    logging_exposure = on.data[log.signals[0]].logging_exposure
    viewed_exposure = np.asarray(logging_exposure)[np.asarray(log.viewed)]
    out = {"lost": lost, "max_weight": float(1.0 / viewed_exposure.min()) if viewed_exposure.size else 1.0}
    for signal in log.signals:
        data = on.data[signal]
        ideal = np.asarray(ope.ideal_dcg(data.rewards, data.logging_exposure, data.viewed, data.discount, m),
                           np.float64)
        top = ideal > np.quantile(ideal, TOP, axis=1, keepdims=True)                      # bool[M, N]
        summary = ope.summarise(parts[signal], m, baseline="R0", confidence=confidence)
        by_target = {"R0": {metric: summary[metric, "R0"]["value"] for metric in METRICS}}
        for name in targets:
            by_target[name] = {}
            for metric in METRICS:
                delta = parts[signal][metric, name].numerator - parts[signal][metric, "R0"].numerator   # f64[M, N]
                used = np.where(np.isnan(delta), 0.0, delta)
                count = np.sum(~np.isnan(delta), axis=1)
                s = summary[metric, name]
                by_target[name][metric] = {"mean": s["difference"], "se": s["se"], "low": s["low"],
                                           "high": s["high"], "p": s["p"],
                                           "top": np.sum(used * top, axis=1) / count,
                                           "rest": np.sum(used * ~top, axis=1) / count,
                                           "value": s["value"], "value_se": s["value_se"]}
        out[signal] = by_target
    return out


def target_values(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
                  zero_ideal: str = "zero") -> dict:
    """Each target's own estimate on R₀'s log and its standard error, no differences (what
    `independent_aa` needs of the second log): {signal: {name: {metric: {"value", "value_se":
    f64[M]}}}}, equal to those entries of `offline_differences`."""
    m = np.asarray(m, np.float64)
    _, parts = _scored(log, logger, targets, view, m, zero_ideal)
    out = {}
    for signal in log.signals:
        summary = ope.summarise({key: c for key, c in parts[signal].items() if key[1] != "R0"}, m,
                                confidence=confidence)
        out[signal] = {name: {metric: {"value": summary[metric, name]["value"],
                                       "value_se": summary[metric, name]["value_se"]} for metric in METRICS}
                       for name in targets}
    return out


def independent_aa(first: dict, second: dict, confidence: float = 0.99) -> dict:
    """A/A on independent logs: every target scored on two independent logs of R₀ (`first` from
    `offline_differences`, `second` from `target_values` or `offline_differences`) against itself,

        Δ = f̄_{D'}(R_t) − f̄_D(R_t),  se = sqrt(se_D² + se_{D'}²),  CI = Δ ± Φ⁻¹((1 + confidence)/2)·se,

    whose expectation is 0 for every m (one estimator, one estimand, independent samples), for the
    targets scored on both logs. Returns {signal: {target: {metric: {"mean", "se", "low", "high",
    "p": f64[M]}}}} (p one-sided, H₀: Δ <= 0, `stats.z_test`)."""
    q = float(scipy_stats.norm.ppf((1 + confidence) / 2))
    out = {}
    for signal, by_target in first.items():
        if not isinstance(by_target, dict) or "R0" not in by_target:
            continue                                                   # "lost", "max_weight"
        out[signal] = {}
        for name, summary in by_target.items():
            if name == "R0" or name not in second[signal]:
                continue                                               # scored on one log only
            out[signal][name] = {}
            for metric, a in summary.items():
                b = second[signal][name][metric]
                mean = np.asarray(b["value"]) - np.asarray(a["value"])
                se = np.hypot(a["value_se"], b["value_se"])
                out[signal][name][metric] = {"mean": mean, "se": se, "low": mean - q * se, "high": mean + q * se,
                                             "p": np.asarray(stats.z_test(mean, se), np.float64)}
    return out

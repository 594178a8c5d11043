"""Offline differences between ranking policies on one logged feed, per session and summarised:
what the studies ``sensitivity`` and ``position_bias`` measure of DCG and nDCG (Jeunen et al.
KDD'24 §6.2, Fig. 1) for every clipping value m at once.

`offline_differences` gives, per signal and target, the mean of Δ_τ(m) = f_τ(R_t) − f_τ(R₀)
(f = clipped-IPS DCG and nDCG with the same-discount ideal) with its interval and one-sided
p-value, the split of that mean into the sessions of the top 10 % of iDCG_τ(m) and the rest, and
each target's own value; `target_values` the values alone (of a second log); `independent_aa`
the difference of one target's values on two independent logs (an A/A test).
"""
from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from simrec import feed, ope, stats

TOP = 0.9                      # sessions with iDCG_τ above this quantile form the "top 10 %"


def logged_exposures_by_policy(log: feed.Log, policies: dict, view):
    """(ε of each policy's logged items {name: f32[N, K]} (`ope.logged_exposures`), its exposure
    tables over the log's distinct contexts {name: f32[B, A]}, each session's row i64[N] in them)."""
    contexts, position = np.unique(np.asarray(log.users), return_inverse=True)
    tables = {name: feed.exposure(None, policy, view, contexts).mean for name, policy in policies.items()}
    return ({name: ope.logged_exposures(log, table, contexts) for name, table in tables.items()}, tables,
            position)


def _per_trajectory(rewards, logging_exposure, exposure, viewed, discount, m, idcg, zero_ideal: str) -> dict:
    """f_τ(m) of one policy on the log: {"dcg", "ndcg": f64[M, N]}."""
    dcg = ope.trajectory_dcg(rewards, logging_exposure, exposure, viewed, m)
    ndcg = ope.trajectory_ndcg(rewards, logging_exposure, exposure, viewed, discount, m, zero_ideal=zero_ideal,
                               idcg=idcg)
    return {"dcg": np.asarray(dcg, np.float64), "ndcg": np.asarray(ndcg, np.float64)}


def offline_differences(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
                        zero_ideal: str = "zero") -> dict:
    """Per-trajectory differences Δ_τ(m) = f_τ(R_t) − f_τ(R₀) of every target on R₀'s log, for
    f = DCG and nDCG and every m at once, summarised per signal and target.

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
    exposures, tables, position = logged_exposures_by_policy(log, {"R0": logger, **targets}, view)
    logging_exposure = exposures.pop("R0")
    lost = {name: float(np.mean(np.asarray(ope.support_loss(tables["R0"], tables[name]))[position]))
            for name in targets}
    discount = feed.view_probability(view, logger.feed_length)
    viewed_exposure = np.asarray(logging_exposure)[np.asarray(log.viewed)]
    out = {"lost": lost, "max_weight": float(1.0 / viewed_exposure.min()) if viewed_exposure.size else 1.0}
    for s, signal in enumerate(log.signals):
        rewards = log.rewards[s]
        idcg = ope.ideal_dcg(rewards, logging_exposure, log.viewed, discount, m)
        ideal = np.asarray(idcg, np.float64)
        top = ideal > np.quantile(ideal, TOP, axis=1, keepdims=True)                      # bool[M, N]
        base = _per_trajectory(rewards, logging_exposure, logging_exposure, log.viewed, discount, m, idcg,
                               zero_ideal)
        by_target = {"R0": {metric: np.nanmean(values, axis=1) for metric, values in base.items()}}
        for name, exposure in exposures.items():
            summary = {}
            for metric, values in _per_trajectory(rewards, logging_exposure, exposure, log.viewed, discount, m,
                                                  idcg, zero_ideal).items():
                delta = values - base[metric]                                                 # f64[M, N]
                mean, low, high, se = stats.mean_ci(delta, confidence, nan_policy="omit")
                value, _, _, value_se = stats.mean_ci(values, confidence, nan_policy="omit")
                used = np.where(np.isnan(delta), 0.0, delta)
                count = np.sum(~np.isnan(delta), axis=1)
                summary[metric] = {"mean": mean, "se": se, "low": low, "high": high,
                                   "p": stats.one_sided_p(delta, nan_policy="omit"),
                                   "top": np.sum(used * top, axis=1) / count,
                                   "rest": np.sum(used * ~top, axis=1) / count,
                                   "value": value, "value_se": value_se}
            by_target[name] = summary
        out[signal] = by_target
    return out


def target_values(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
                  zero_ideal: str = "zero") -> dict:
    """Each target's own estimate on R₀'s log and its standard error, no differences (what
    `independent_aa` needs of the second log): {signal: {name: {metric: {"value", "value_se":
    f64[M]}}}}, equal to those entries of `offline_differences`."""
    m = np.asarray(m, np.float64)
    exposures, _, _ = logged_exposures_by_policy(log, {"R0": logger, **targets}, view)
    logging_exposure = exposures.pop("R0")
    discount = feed.view_probability(view, logger.feed_length)
    out = {}
    for s, signal in enumerate(log.signals):
        rewards = log.rewards[s]
        idcg = ope.ideal_dcg(rewards, logging_exposure, log.viewed, discount, m)
        out[signal] = {}
        for name, exposure in exposures.items():
            out[signal][name] = {}
            for metric, values in _per_trajectory(rewards, logging_exposure, exposure, log.viewed, discount, m,
                                                  idcg, zero_ideal).items():
                value, _, _, value_se = stats.mean_ci(values, confidence, nan_policy="omit")
                out[signal][name][metric] = {"value": value, "value_se": value_se}
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

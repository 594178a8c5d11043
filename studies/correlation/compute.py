"""The correlation study's computation: per (replication, day) and feed level, the day's offline
log and A/B test, the exact online values, and every offline estimate of R₀ and R_t on the log
with the mechanism quantities (the package docstring states the design)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import numpy as np

from simrec import feed, ope
from simrec.runner import cell_key
from simrec_studies.common import scenarios as S
from simrec_studies.common import table2_estimates
from simrec_studies.common.table2 import POLICIES

if TYPE_CHECKING:
    from simrec_studies.correlation import CorrelationConfig

#: the rankers of R₀ (the logger, epsilon-greedy around it) and R_t (the deterministic target)
RANKERS = {"R0": S.Trained("r0"), "Rt": S.Trained("rt")}
#: sessions by their number of positive labels: bin label -> (low, high), inclusive
POSITIVE_BINS = {"1": (1, 1), "2": (2, 2), "3-4": (3, 4), "5+": (5, 10**9)}
#: quantities of a level on a day, of a signal, and their order in `table_daily`
DAY_QUANTITIES = ("session", "engagement", "depth", "min_logging_exposure", "share_below_1e-3")
SIGNAL_QUANTITIES = ("positives", "no_positive", "idcg")
#: the estimates of a policy, in `table_daily` order (every one but pndcg has a standard error)
ESTIMATES = ("dcg_log_c", "dcg_log_q", "dcg_pbm_c", "dcg_pbm_q", "ndcg_skip", "ndcg_zero", "pndcg")


def cells(config: CorrelationConfig) -> list[dict]:
    return [{"replication": r, "day": d} for r in range(config.replications) for d in range(config.long_days)]


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platforms (`scenarios.platforms`, with R₀'s and R_t's rankers trained), one per
    index 0..config.platforms-1."""
    platforms: tuple[S.Platform, ...]


def setup(key, config: CorrelationConfig) -> Shared:
    """Build (and train) every platform once per run; `key` is the run's root key."""
    return Shared(S.platforms(key, config.scenario, range(config.platforms), tuple(RANKERS.values())))


# ---- one level on one day ---------------------------------------------------------------------

def _tables(policies, view, num_contexts: int) -> list:
    """Exposure tables f32[X, A] of exact policies under `view` for every context (one shape for
    every day)."""
    contexts = np.arange(num_contexts)
    return [feed.exposure(None, p, view, contexts).mean for p in policies]


def _exposures(log: feed.Log, policies: dict, view, num_contexts: int) -> dict:
    """{name: exposures f32[N, K] of the policy's logged items} under `view` (exact policies,
    `ope.logged_exposures` of tables over every context)."""
    return {name: ope.logged_exposures(log, t) for name, t in zip(policies, _tables(policies.values(), view,
                                                                                     num_contexts))}


def _record(quantity: str, value, *, signal: str = "", policy: str = "", positives: str = "",
            statistic: str = "value") -> dict:
    """One record of a level on a day (`COLUMNS` less replication, day and level)."""
    return {"signal": signal, "policy": policy, "quantity": quantity, "positives": positives,
            "statistic": statistic, "value": value}


def _positive_bins(signal: str, policy: str, positives: np.ndarray, ndcg: np.ndarray) -> list[dict]:
    """Mean nDCG (skip) of `policy` per bin of the number of positive labels (`POSITIVE_BINS`),
    and, for the first policy, the share of sessions in each bin."""
    out = []
    for label, (low, high) in POSITIVE_BINS.items():
        inside = (positives >= low) & (positives <= high)
        if policy == POLICIES[0]:
            out.append(_record("sessions", float(inside.mean()), signal=signal, positives=label,
                               statistic="share"))
        out.append(_record("ndcg_skip", float(np.mean(ndcg[inside])) if inside.any() else math.nan,
                           signal=signal, policy=policy, positives=label))
    return out


def _day_records(today, log: feed.Log) -> list[dict]:
    """The day's factors and its log's depth and logging exposures (`DAY_QUANTITIES`)."""
    viewed = np.asarray(log.viewed)
    logged = np.asarray(log.logging_exposure)[viewed]
    return [_record(q, v) for q, v in zip(DAY_QUANTITIES, (
        today.session, today.engagement, float(np.mean(np.sum(viewed, axis=1))),
        float(logged.min()), float(np.mean(logged < 1e-3))))]


def _signal_records(signal: str, rewards, exposures: dict, viewed, discount, clip: float, ab, exact,
                    s: int) -> list[dict]:
    """One signal's records on a level and day: its mechanism quantities and, per policy, the
    online values (A/B and exact), the offline estimates with their standard errors (the registry's,
    `table2_estimates.contributions` and `.estimates`; pnDCG without one) and the nDCG (skip) per
    bin of positives. exposures: {view: {policy: ε}} of the logged items."""
    positives = np.asarray(np.sum(rewards, axis=1))
    parts = table2_estimates.contributions(*table2_estimates.inputs(rewards, viewed, exposures, discount), clip)
    summary = table2_estimates.estimates(parts)
    idcg = parts["pndcg", POLICIES[0]].denominator                  # iDCG_τ at the clip, f64[1, N]
    out = [_record(q, v, signal=signal) for q, v in zip(SIGNAL_QUANTITIES, (
        float(positives.mean()), float(np.mean(positives == 0)), float(np.mean(idcg))))]
    bins = [b for policy in POLICIES
            for b in _positive_bins(signal, policy, positives, parts["ndcg_skip", policy].numerator[0])]
    out += [b for b in bins if b["quantity"] == "sessions"]
    for i, policy in enumerate(POLICIES):
        out += [_record("online_ab", ab.mean[i, s], signal=signal, policy=policy),
                _record("online_ab", ab.standard_error[i, s], signal=signal, policy=policy, statistic="se"),
                _record("online_exact", exact[i].mean[s], signal=signal, policy=policy)]
        out += [_record(q, summary[q, policy][0], signal=signal, policy=policy) for q in ESTIMATES]
        out += [_record(q, summary[q, policy][1], signal=signal, policy=policy, statistic="se")
                for q in ESTIMATES if q != "pndcg"]
        out += [b for b in bins if b["policy"] == policy]
    return out


def _level_day(key, platform: S.Platform, rankers: dict, level: str, d: int) -> list[dict]:
    """Records of one level on day d: the day's factors and log, then per signal the mechanism
    quantities and per policy the online values and offline estimates. rankers: {policy: scores}."""
    config = platform.config
    lv = S.level_config(config, level)
    today = S.day(platform, level, d)
    logger, target = S.logging_policy(platform, level, rankers["R0"]), S.target_policy(platform, level, rankers["Rt"])
    k_log, k_ab, k_online = jax.random.split(key, 3)
    log = feed.simulate(k_log, today.scenario, logger, config.log_sessions, day=d,
                        logging_exposure=S.logging_exposure(today.scenario, logger))
    ab = feed.ab_test(k_ab, today.scenario, [logger, target], config.ab_sessions)
    exact = [S.online(k_online, platform, today.scenario, p) for p in (logger, target)]
    pbm = feed.fit_view_model(log.viewed)
    n = config.world.n_users
    policies = dict(zip(POLICIES, (logger, target)))
    exposures = {"log": _exposures(log, policies, feed.Logarithmic(), n), "pbm": _exposures(log, policies, pbm, n)}
    discount = feed.view_probability(pbm, lv.feed_length)
    out = _day_records(today, log)
    for s, signal in enumerate(log.signals):
        out += _signal_records(signal, log.rewards[s], exposures, log.viewed, discount, lv.clip, ab, exact, s)
    return out


def compute(key, config: CorrelationConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of both levels on the cell's day; `key` is the run's root key (level i draws from
    fold_in(cell_key(key, cell), i))."""
    r = cell["replication"]
    platform = shared.platforms[r % config.platforms]
    d = (r // config.platforms) * config.long_days + cell["day"]
    base = cell_key(key, cell)
    rankers = {policy: S.scores(platform, ranker) for policy, ranker in RANKERS.items()}
    return [{"replication": r, "day": cell["day"], "level": level, **record}
            for i, level in enumerate(S.LEVELS)
            for record in _level_day(jax.random.fold_in(base, i), platform, rankers, level, d)]

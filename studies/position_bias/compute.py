"""The position-bias study's cells (`simrec_studies.position_bias`): the exact online values, the
examination curves learnt from clicks on logs of N sessions, and the DCG differences of every target
over R₀ on an OPE log under each curve (`simrec_studies.common.differences`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import numpy as np

from simrec import feed
from simrec.runner import cell_key
from simrec_studies.common import scenarios
from simrec_studies.common.differences import offline_differences

if TYPE_CHECKING:
    from simrec_studies.position_bias import PositionBiasConfig

__all__ = ["ESTIMATORS", "DOWNSTREAM", "cells", "Shared", "setup", "compute"]

ESTIMATORS = ("randomisation", "regression_em", "harvesting", "harvesting_ratio", "logged_views")
#: the curves whose downstream DCG is scored (the ratio estimator's curve is only in the curve tables)
DOWNSTREAM = ("randomisation", "regression_em", "harvesting", "logged_views")


# ---- cells ----------------------------------------------------------------------------------------

def cells(config: PositionBiasConfig) -> list[dict]:
    out = [{"part": "truth", "level": level} for level in config.levels]
    for level in config.levels:
        for seed in range(config.replications):
            out.append({"part": "reference", "level": level, "seed": seed})
            out += [{"part": "curves", "level": level, "seed": seed, "sessions": n} for n in config.sessions]
    return out


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0, with the config's rankers trained)."""
    platform: scenarios.Platform


def setup(key, config: PositionBiasConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    rankers = (config.logger, *config.harvest_rankers, *config.targets)
    return Shared(scenarios.platform(key, config.scenario, 0, rankers))


def _row(part: str, **values) -> dict:
    base = {"part": part, "seed": -1, "sessions": 0, "estimator": "", "rank": 0, "signal": "", "target": "",
            "m": math.nan, "statistic": "", "value": math.nan}
    return {**base, **values}


def _truth(config: PositionBiasConfig, platform, level: str) -> list[dict]:
    """Exact online value per signal of R₀ ("R0") and every target on day 0."""
    scenario = scenarios.day(platform, level, 0).scenario
    logger = scenarios.logging_policy(platform, level, scenarios.scores(platform, config.logger))
    policies = {"R0": logger, **{scenarios.ranker_label(r): scenarios.target_policy(
        platform, level, scenarios.scores(platform, r)) for r in config.targets}}
    rows = []
    for name, policy in policies.items():
        value = scenarios.online(None, platform, scenario, policy).mean
        rows += [_row("truth", signal=signal, target=name, statistic="exact", value=float(value[s]))
                 for s, signal in enumerate(scenario.signals)]
    return rows


def _ope(root, config: PositionBiasConfig, platform, level: str, seed: int, views: dict, sessions: int) -> list[dict]:
    """DCG differences of every target over R₀ on the replication's OPE log (drawn from
    cell_key(root, {"part": "ope log", "level", "seed"}), the same log in every cell of the
    replication) under each curve of `views` {estimator: view model}; "ope_views" adds
    `fit_view_model` of the log itself."""
    day = scenarios.day(platform, level, 0).scenario
    logger = scenarios.logging_policy(platform, level, scenarios.scores(platform, config.logger))
    targets = {scenarios.ranker_label(r): scenarios.target_policy(platform, level, scenarios.scores(platform, r))
               for r in config.targets}
    log = feed.simulate(cell_key(root, {"part": "ope log", "level": level, "seed": seed}), day, logger,
                        config.scenario.log_sessions, logging_exposure=scenarios.logging_exposure(day, logger))
    if "ope_views" in views:
        views = {**views, "ope_views": feed.fit_view_model(log.viewed)}
    rows = []
    for estimator, view in views.items():
        out = offline_differences(log, logger, targets, view, config.m, confidence=config.confidence)
        n = config.scenario.log_sessions if estimator in ("true", "ope_views") else sessions
        for signal in log.signals:
            for name in targets:
                summary = out[signal][name]["dcg"]
                rows += [_row("ope", sessions=n, estimator=estimator, signal=signal, target=name, m=float(m),
                              statistic=statistic, value=float(summary[statistic][i]))
                         for i, m in enumerate(config.m) for statistic in ("mean", "se", "low", "high")]
    return rows


def _curve_rows(estimator: str, sessions: int, estimate: feed.CurveEstimate, truth: np.ndarray) -> list[dict]:
    return [_row("curve", sessions=sessions, estimator=estimator, rank=k + 1, statistic=statistic, value=float(v))
            for k in range(truth.shape[0])
            for statistic, v in (("estimate", estimate.curve[k]), ("se", estimate.standard_error[k]),
                                 ("truth", truth[k]))]


def _curves(root, config: PositionBiasConfig, platform, cell: dict) -> tuple[list[dict], dict]:
    """Curve records of one (level, replication, N) and the curves as view models."""
    level, n = cell["level"], cell["sessions"]
    key = cell_key(root, cell)
    scenario = scenarios.day(platform, level, 0).scenario
    K = scenarios.level_config(config.scenario, level).feed_length
    truth = np.asarray(feed.view_probability(scenario.view, K), np.float64)
    signal = scenario.signals.index(config.signal)
    n_users = config.scenario.world.n_users
    # (i) randomisation: N RandTop-K sessions around the logger's Sort
    base = scenarios.target_policy(platform, level, scenarios.scores(platform, config.logger))
    randomised = feed.randomised_top(base, n_users)
    log = feed.simulate(jax.random.fold_in(key, 0), scenario, randomised, n,
                        logging_exposure=scenarios.logging_exposure(scenario, randomised))
    estimates = {"randomisation": feed.randomisation_curve(np.asarray(log.rewards[signal]))}
    del log
    # (ii)-(iii) and logged views: N sessions split over the harvest rankers, pooled
    parts, viewed = [], []
    share = n // len(config.harvest_rankers)
    for i, ranker in enumerate(config.harvest_rankers):
        policy = scenarios.target_policy(platform, level, scenarios.scores(platform, ranker))
        log = feed.simulate(jax.random.fold_in(key, 1 + i), scenario, policy, share,
                            logging_exposure=scenarios.logging_exposure(scenario, policy))
        parts.append(feed.click_log(log, policy, config.signal))
        viewed.append(np.asarray(log.viewed))
    pooled = [np.concatenate(arrays) for arrays in zip(*parts)]
    estimates["regression_em"] = feed.regression_em(None, *pooled, iterations=config.em_iterations)
    estimates["harvesting"] = feed.harvesting_curve(None, *pooled)
    estimates["harvesting_ratio"] = feed.harvesting_curve(None, *pooled, method="ratio")
    fitted = np.asarray(feed.fit_view_model(np.concatenate(viewed)).survival, np.float64)
    estimates["logged_views"] = feed.CurveEstimate(fitted / fitted[0], np.full(K, np.nan))
    rows = [row for name, est in estimates.items() for row in _curve_rows(name, n, est, truth)]
    return rows, {name: feed.curve_view_model(est.curve) for name, est in estimates.items() if name in DOWNSTREAM}


def compute(key, config: PositionBiasConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell; `key` is the run's root key (a cell's logs draw from cell_key(key, cell),
    the OPE log from its replication's key, see `_ope`)."""
    level = cell["level"]
    platform = shared.platform
    if cell["part"] == "truth":
        rows = _truth(config, platform, level)
    elif cell["part"] == "reference":
        scenario = scenarios.day(platform, level, 0).scenario
        rows = _ope(key, config, platform, level, cell["seed"], {"true": scenario.view, "ope_views": None}, 0)
    else:
        rows, views = _curves(key, config, platform, cell)
        rows += _ope(key, config, platform, level, cell["seed"], views, cell["sessions"])
    return [{**row, "level": level, "seed": cell.get("seed", -1)} for row in rows]

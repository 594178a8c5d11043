"""The sensitivity study's cells (`simrec_studies.sensitivity`): the online truth of every target
against R₀ per (level, day) and the offline differences of DCG and nDCG on R₀'s log and on a second,
independent log (`simrec_studies.common.differences`), for a grid of clipping values m at once."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax

from simrec import feed
from simrec.runner import cell_key
from simrec_studies.common import scenarios
from simrec_studies.common.differences import METRICS, independent_aa, offline_differences, target_values

if TYPE_CHECKING:
    from simrec_studies.sensitivity import SensitivityConfig

__all__ = ["M_GRID", "METRICS", "AA", "AA_LOGS", "online_truth", "offline_grid", "cells", "Shared", "setup",
           "compute"]

M_GRID = tuple(float(2 ** i) for i in range(13)) + (math.inf,)      # 1, 2, 4, ..., 4096, ∞
AA = "R0 (A/A)"
AA_LOGS = " (A/A, 2 logs)"     # suffix of a target compared with itself on two independent logs


# ---- per-setting computations (pure functions of a scenario, a log and policies) ------------------

def online_truth(key, scenario: feed.Scenario, logger: feed.Policy, targets: dict, ab_sessions: int, *,
                 tested: tuple = (), online_samples: int = 64) -> dict:
    """The truth of every target against R₀ per signal: online values V (`feed.online_value`:
    exact, or a Monte Carlo mean over `online_samples` rankings for a stochastic policy under
    within-session violations) and a simulated A/B test (`feed.ab_test`, independent of any log)
    of R₀ against the targets named in `tested`. Returns {"exact", "exact_se": {name: f64[S]},
    "ab_mean", "ab_se": {name: f64[S]} (R₀ and the tested targets)}, R₀ under the name "R0"."""
    k_online, k_ab = jax.random.split(key)
    policies = {"R0": logger, **targets}
    values = {name: feed.online_value(jax.random.fold_in(k_online, i), scenario, policy, num_samples=online_samples)
              for i, (name, policy) in enumerate(policies.items())}
    arms = ["R0", *tested]
    ab = feed.ab_test(k_ab, scenario, [policies[name] for name in arms], ab_sessions)
    return {"exact": {name: v.mean for name, v in values.items()},
            "exact_se": {name: v.standard_error for name, v in values.items()},
            "ab_mean": dict(zip(arms, ab.mean)), "ab_se": dict(zip(arms, ab.standard_error))}


# ---- setup and cells -----------------------------------------------------------------------------

def offline_grid(config: SensitivityConfig) -> tuple[float, ...]:
    """The m an offline cell scores: `M_GRID` and any other m of config.m, ascending (∞ last)."""
    return tuple(sorted(set(M_GRID) | set(config.m)))


def cells(config: SensitivityConfig) -> list[dict]:
    grid = list(offline_grid(config))
    out = []
    for level in config.levels:
        for d in range(config.scenario.days):
            out.append({"part": "truth", "level": level, "day": d})
            out.append({"part": "offline", "level": level, "day": d, "m": grid})
    return out


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0, with the config's rankers trained)."""
    platform: scenarios.Platform


def setup(key, config: SensitivityConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    return Shared(scenarios.platform(key, config.scenario, 0, (config.logger, *config.targets)))


def _policies(platform: scenarios.Platform, config: SensitivityConfig, level: str, d: int):
    """(the day's scenario, R₀, {label: R_t}) of one level on day d (`simrec_studies.common.scenarios`)."""
    targets = {scenarios.ranker_label(r): scenarios.target_policy(platform, level, scenarios.scores(platform, r))
               for r in config.targets}
    logger = scenarios.logging_policy(platform, level, scenarios.scores(platform, config.logger))
    return scenarios.day(platform, level, d).scenario, logger, targets


def _truth(key, config: SensitivityConfig, platform: scenarios.Platform, level: str, d: int) -> list[dict]:
    """Records of the online truth of one level on day d (`online_truth`)."""
    scenario, logger, targets = _policies(platform, config, level, d)
    truth = online_truth(key, scenario, logger, targets, config.scenario.ab_sessions,
                         tested=tuple(scenarios.ranker_label(r) for r in config.improving),
                         online_samples=config.scenario.online_samples)
    return [{"part": "truth", "m": math.nan, "signal": signal, "target": name, "metric": "", "statistic": statistic,
             "value": values[name][s]}
            for s, signal in enumerate(scenario.signals) for name in truth["exact"]
            for statistic, values in truth.items() if name in values]


def _offline(root, config: SensitivityConfig, platform: scenarios.Platform, level: str, d: int,
             grid: tuple[float, ...]) -> list[dict]:
    """Records of one level on day d for every m of `grid`: `offline_differences` on the day's log
    D₀ᵈ and `independent_aa` against a second, independent log of R₀ from the same day (with its
    own learnt view model). The logs draw from cell_key(root, {"part": "log" or "replicate log",
    "level", "day"}), independent of the grid."""
    scenario, logger, targets = _policies(platform, config, level, d)
    logging_exposure = scenarios.logging_exposure(scenario, logger)

    def simulate(part: str):
        log = feed.simulate(cell_key(root, {"part": part, "level": level, "day": d}), scenario, logger,
                            config.scenario.log_sessions, day=d, logging_exposure=logging_exposure)
        return log, scenario.view if config.view == "true" else feed.fit_view_model(log.viewed)

    log, view = simulate("log")
    first = offline_differences(log, logger, {AA: logger, **targets}, view, grid, confidence=config.confidence,
                                zero_ideal=config.zero_ideal)
    log, view = simulate("replicate log")
    second = target_values(log, logger, targets, view, grid, confidence=config.confidence,
                           zero_ideal=config.zero_ideal)
    aa = independent_aa(first, second, config.confidence)
    out = [{"part": "log", "m": math.nan, "signal": "", "target": "", "metric": "", "statistic": "max_weight",
            "value": first["max_weight"]}]
    out += [{"part": "log", "m": math.nan, "signal": "", "target": name, "metric": "", "statistic": "lost",
             "value": lost} for name, lost in first["lost"].items()]
    for i, m in enumerate(grid):
        for signal in scenario.signals:
            block = first[signal]
            out += [{"part": "paired", "m": m, "signal": signal, "target": "R0", "metric": metric,
                     "statistic": "value", "value": values[i]} for metric, values in block["R0"].items()]
            for name in (AA, *targets):
                out += [{"part": "paired", "m": m, "signal": signal, "target": name, "metric": metric,
                         "statistic": statistic, "value": values[i]}
                        for metric, summary in block[name].items() for statistic, values in summary.items()]
                out += [{"part": "two logs", "m": m, "signal": signal, "target": name, "metric": metric,
                         "statistic": statistic, "value": values[i]}
                        for metric, summary in aa[signal].get(name, {}).items()
                        for statistic, values in summary.items()]
    return out


def compute(key, config: SensitivityConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell; `key` is the run's root key (the truth draws from cell_key(key, cell)),
    an offline cell scores its grid cell["m"]."""
    level, d = cell["level"], cell["day"]
    if cell["part"] == "truth":
        records = _truth(cell_key(key, cell), config, shared.platform, level, d)
    else:
        records = _offline(key, config, shared.platform, level, d, tuple(cell["m"]))
    return [{"level": level, "day": d, **record} for record in records]



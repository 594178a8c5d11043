"""Jeunen, Potapov & Ustimenko's regime as deployed (KDD'24 §6): a deterministic logger and a
deterministic target over the same fixed candidates, every candidate in the feed.

In §6 R₀ and R_t are deterministic rankers over one candidate generator G, so each item's exposure
is the view model's probability at its rank (Eq. 9) under either policy, and DCG's weight of a
logged item is ε(x, a) / ε₀(x, a) = S(rank under R_t) / S(rank under R₀). With every candidate
shown (K = N) both policies expose every candidate, so no weight is undefined and no exposure is
lost (Asm. 5 holds without exploration); the weights are bounded by S(1) / S(K), large where the
target lifts an item R₀ shows deep in a long session. `deployed` turns a scenario of
`simrec_studies.common.scenarios` into this regime: ε = 0 and N = K on both levels, everything else
(world, view models, level 2's violations, signals, drift, rankers) kept.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from simrec_studies.common.scenarios import LEVELS, ScenarioConfig, level_config

__all__ = ["deployed", "is_deployed"]


def deployed(scenario: ScenarioConfig) -> ScenarioConfig:
    """The scenario with a deterministic logger (ε = 0) showing every candidate (N = K, the level's
    feed length) on both levels."""
    return dataclasses.replace(scenario, **{
        level: dataclasses.replace(level_config(scenario, level), epsilon=0.0,
                                   candidates=level_config(scenario, level).feed_length)
        for level in LEVELS})


def is_deployed(scenario: ScenarioConfig, levels: Sequence[str] = LEVELS) -> bool:
    """Whether every level of ``levels`` runs the deployed regime: a deterministic logger showing
    every candidate."""
    configs = [level_config(scenario, level) for level in levels]
    return all(config.epsilon == 0 and config.candidates == config.feed_length for config in configs)

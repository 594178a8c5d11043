"""Study ``slate_papers``: the synthetic experiments of the two ranking-OPE papers, Cascade-DR
(Kiyohara et al., WSDM'22) and adaptive IPS (Kiyohara et al., KDD'23), rebuilt on
`simrec.feed.slotwise` from their public code's settings (the repositories
``aiueola/wsdm2022-cascade-dr`` and ``aiueola/kdd2023-aips``, read, not run), with the exact value
as the truth, side by side with the numbers read off the papers' committed figures.

Both papers draw slates slot by slot, with replacement, from a handful of actions, with a
context x ~ N(0, I_5) per round and context-free factorised policies (every slot draws from the
same distribution):

* **AIPS (KDD'23)**, `AipsConfig`: A = 3 actions, K = 8 slots; slot rewards 1 + σ(z(x, a_k)) plus
  additive pairwise interactions W[a_k, a_j]·(8/K) with every slot j that the round's user type
  makes relevant, plus Gaussian noise (σ_r = 0.5, shared by the slots of a round as in the
  paper's code: `shared_noise`; W and the logger are the values the paper's code draws from its
  fixed seed: `pairs`, `logger`); six user types (`compute.AIPS_TYPES`: neighbours, two cascades
  with lookahead, two random sets, standard), P(c | x) ∝ exp(ω_c |θ_c · x|) with ω_c =
  exp((2δ − 1) κ_c) (δ = 0.6). The logger is softmax(b), b ~ U(0, 1)^3, the target ε-greedy (ε =
  0.3) on the logger's least likely action (argmin b). One world for every run (drawn once, as in
  the paper). Estimators: IPS (SIPS),
  IIPS, RIPS, AIPS with each round's true type, and AIPS with each slot's action set chosen from the
  log (`simrec.ope.choose_action_sets`: the paper's user-behaviour tree at its root, with the bias
  estimated against IPS on the log instead of from simulated logs and the true value). The
  truth is the exact value per context (`slotwise.context_values`, closed form) averaged over
  `truth_contexts` fresh contexts, with its standard error; metric: relative MSE, squared bias and
  variance over `runs` logs, against the log size (`rounds_grid`), K (`slots_grid`) and δ
  (`delta_grid`).
* **Cascade-DR (WSDM'22)**, `CascadeDrConfig`: A = 5 actions; Bernoulli slot rewards
  σ(z(x, a_k) + interaction) with the interaction additive (W ~ N(0, 5²), symmetric) or decaying
  (−z(x, a_j)/(|k − j| + 1)), summed over the slots the reward structure makes relevant
  (standard: all others; cascade: those above; independent: none). Every run draws a new world,
  logger softmax(b), target softmax(λ b) with λ from `similarity_grid`, and the interaction kind
  (as the paper, pooled in each point). Estimators: IPS, IIPS, RIPS and Cascade-DR with the
  recursive reward model (`slotwise.recursive_reward_model`, a weighted ridge regression on
  context, action and earlier-action counts, cross-fitted; the paper fits depth-3 trees in
  sample). The truth is the exact value of the target on the log's contexts (by enumeration,
  as in the paper). Metric: each estimator's MSE over the runs of a point divided by
  Cascade-DR's, against the log size (`rounds_grid`, K = 5), K (`slots_grid`, N = 1,000) and λ
  (`similarity_grid`, N = 1,000, K = 5).

Records (`COLUMNS`): one per (cell, run, estimator). The package: this module holds the
configuration and `STUDY`; `compute` the worlds, logs and estimates; `report` the tables beside
the papers' numbers, the pairwise orderings and the figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec_studies.common.configs import checked
from simrec_studies.slate_papers.compute import (AIPS_ESTIMATORS, CASCADE_DR_ESTIMATORS, STRUCTURES, cells, compute,
                                                 setup)
from simrec_studies.slate_papers.report import report

__all__ = ["AipsConfig", "CascadeDrConfig", "SlatePapersConfig", "COLUMNS", "PRESETS", "STUDY", "AIPS_ESTIMATORS",
           "CASCADE_DR_ESTIMATORS", "cells", "compute", "setup"]

#: the record schema: paper ("aips" or "cascade_dr"), the swept parameter ("rounds", "slots",
#: "delta", "similarity") and its value, the reward structure (Cascade-DR; "" for AIPS), the run,
#: the estimator, its estimate, the truth and the truth's standard error (0 where exact), and the
#: run's interaction kind and λ (Cascade-DR; NaN λ for AIPS)
COLUMNS = {"paper": str, "sweep": str, "value": float, "structure": str, "run": int, "estimator": str,
           "estimate": float, "truth": float, "truth_se": float, "interaction": str, "similarity": float}


def _grid(name: str, values, low: float, integer: bool) -> None:
    if not isinstance(values, tuple) or not values or len(set(values)) != len(values) or any(
            isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or not math.isfinite(v)
            or v < low for v in values):
        raise ConfigError(f"{name} must be a non-empty tuple of distinct finite {'integers' if integer else 'numbers'}"
                          f" >= {low}, got {values!r}")


@dataclass(frozen=True)
class AipsConfig:
    """KDD'23's synthetic setting (module docstring); the grids are swept one at a time around the
    default point (rounds, slots, delta)."""
    num_actions: int = 3                     # actions A each slot draws from
    dim: int = 5                             # context dimension d
    slots: int = 8                           # slate size K at the default point
    rounds: int = 8_000                      # log size N at the default point
    delta: float = 0.6                       # user-behaviour interpolation δ in [0, 1]
    epsilon: float = 0.3                     # the target's exploration
    noise: float = 0.5                       # σ_r of the Gaussian slot reward
    shared_noise: bool = True                # one noise draw per round, shared by its slots (the paper's code)
    interaction_scale: float = 8.0           # W is scaled by interaction_scale / K
    #: W [A][A] (symmetric, before the scaling) and the logger's per-slot probabilities [A]: the values
    #: the paper's code draws from its fixed seed (None: drawn from the study's seed instead)
    pairs: tuple[tuple[float, ...], ...] | None = ((-0.205, -0.556, 0.093), (-0.556, 1.966, 0.282),
                                                   (0.093, 0.282, 0.769))
    logger: tuple[float, ...] | None = (0.2853, 0.4126, 0.3022)   # per-slot logging probabilities (see pairs)
    runs: int = 200                          # logs per point
    truth_contexts: int = 1_000_000          # fresh contexts averaged for the truth
    rounds_grid: tuple[int, ...] = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000)    # the log sizes swept
    slots_grid: tuple[int, ...] = (4, 6, 8, 10, 12, 14)                              # the slate sizes swept
    delta_grid: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)                   # the δ swept

    def __post_init__(self):
        for name, low in (("num_actions", 2), ("dim", 1), ("slots", 2), ("rounds", 2), ("runs", 2),
                          ("truth_contexts", 2)):
            checked(validate.integer, name, getattr(self, name), low=low)
        for name in ("delta", "epsilon"):
            checked(validate.probability, name, getattr(self, name))
        for name in ("noise", "interaction_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.pairs is not None:
            pairs = np.asarray(self.pairs, dtype=float)
            if pairs.shape != (self.num_actions,) * 2 or not np.all(np.isfinite(pairs)) or \
                    not np.allclose(pairs, pairs.T):
                raise ConfigError(f"pairs must be a finite symmetric [{self.num_actions}][{self.num_actions}] matrix "
                                  f"or None, got {self.pairs!r}")
        if self.logger is not None:
            logger = np.asarray(self.logger, dtype=float)
            if logger.shape != (self.num_actions,) or np.any(logger <= 0) or abs(logger.sum() - 1) > 1e-3:
                raise ConfigError(f"logger must be {self.num_actions} positive probabilities summing to 1 (within "
                                  f"1e-3) or None, got {self.logger!r}")
        _grid("rounds_grid", self.rounds_grid, 2, True)
        _grid("slots_grid", self.slots_grid, 2, True)
        _grid("delta_grid", self.delta_grid, 0, False)
        if max(self.delta_grid) > 1:
            raise ConfigError(f"delta_grid must lie in [0, 1], got {self.delta_grid}")

    def sweeps(self) -> dict[str, tuple]:
        return {"rounds": self.rounds_grid, "slots": self.slots_grid, "delta": self.delta_grid}


@dataclass(frozen=True)
class CascadeDrConfig:
    """WSDM'22's synthetic setting (module docstring); the grids are swept one at a time around the
    default point (rounds, slots; λ drawn from similarity_grid per run except in its own sweep)."""
    num_actions: int = 5                     # actions A each slot draws from
    dim: int = 5                             # context dimension d
    slots: int = 5                           # slate size K at the default point
    rounds: int = 1_000                      # log size N at the default point
    pair_scale: float = 5.0                  # the sd of the additive interaction W
    structures: tuple[str, ...] = STRUCTURES                  # reward structures, each its own panel
    interactions: tuple[str, ...] = ("additive", "decay")     # drawn per run, pooled
    similarities: tuple[float, ...] = (-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8)   # λ drawn per run
    ridge: float = 1.0                       # the recursive reward model's ridge penalty
    folds: int = 2                           # its cross-fitting folds (1: in sample, as the paper)
    runs: int = 40                           # runs (worlds and logs) per point and structure
    rounds_grid: tuple[int, ...] = (250, 500, 1_000, 2_000, 4_000)                   # the log sizes swept
    slots_grid: tuple[int, ...] = (3, 4, 5, 6, 7)                                    # the slate sizes swept
    similarity_grid: tuple[float, ...] = (-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8)   # the λ swept

    def __post_init__(self):
        for name, low in (("num_actions", 2), ("dim", 1), ("slots", 1), ("rounds", 4), ("runs", 2), ("folds", 1)):
            checked(validate.integer, name, getattr(self, name), low=low)
        if not self.structures or not set(self.structures) <= set(STRUCTURES) or \
                len(set(self.structures)) != len(self.structures):
            raise ConfigError(f"structures must be distinct names of {STRUCTURES}, got {self.structures!r}")
        if not self.interactions or not set(self.interactions) <= {"additive", "decay"}:
            raise ConfigError(f"interactions must be names of ('additive', 'decay'), got {self.interactions!r}")
        for name in ("pair_scale", "ridge"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
        _grid("rounds_grid", self.rounds_grid, 4, True)
        _grid("slots_grid", self.slots_grid, 1, True)
        for name in ("similarities", "similarity_grid"):
            _grid(name, getattr(self, name), -math.inf, False)
        if self.num_actions ** max(self.slots_grid + (self.slots,)) > 10 ** 6:
            raise ConfigError(f"num_actions ** K must stay <= 10^6 (under the standard structure the truth "
                              f"enumerates all A^K slates), got "
                              f"{self.num_actions} ** {max(self.slots_grid + (self.slots,))}")

    def sweeps(self) -> dict[str, tuple]:
        return {"rounds": self.rounds_grid, "slots": self.slots_grid, "similarity": self.similarity_grid}


@dataclass(frozen=True)
class SlatePapersConfig:
    """Which papers' experiments to run (None: skipped) and their settings."""
    aips: AipsConfig | None = field(default_factory=AipsConfig)                  # KDD'23's experiment
    cascade_dr: CascadeDrConfig | None = field(default_factory=CascadeDrConfig)  # WSDM'22's experiment

    def __post_init__(self):
        if self.aips is None and self.cascade_dr is None:
            raise ConfigError("at least one of aips and cascade_dr must be set")


PRESETS = {
    "smoke": SlatePapersConfig(
        aips=AipsConfig(runs=4, truth_contexts=10_000, rounds_grid=(500, 2_000), slots_grid=(4, 6),
                        delta_grid=(0.0, 1.0), rounds=2_000),
        cascade_dr=CascadeDrConfig(runs=4, rounds_grid=(250, 1_000), slots_grid=(3, 4), similarity_grid=(-0.8, 0.8))),
    "default": SlatePapersConfig(),
    "paper": SlatePapersConfig(aips=AipsConfig(runs=1_000), cascade_dr=CascadeDrConfig(runs=200)),
}

STUDY = Study(
    name="slate_papers",
    description="The synthetic experiments of Cascade-DR (WSDM'22) and adaptive IPS (KDD'23) rebuilt on slot-wise "
                "slates with the exact value: relative MSE of every estimator beside the papers' figures.",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS, setup=setup,
    expected_seconds={"smoke": 60, "default": 420, "paper": 2000},
)

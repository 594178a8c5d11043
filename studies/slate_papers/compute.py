"""The slate-papers study's cells (`simrec_studies.slate_papers`): one cell per (paper, swept
parameter, value[, reward structure]) runs its replications, each a fresh log scored by every
estimator of that paper against the exact value."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from simrec import ope
from simrec.feed import slotwise
from simrec.runner import cell_key, shared_key

if TYPE_CHECKING:
    from simrec_studies.slate_papers import AipsConfig, CascadeDrConfig, SlatePapersConfig

__all__ = ["AIPS_ESTIMATORS", "CASCADE_DR_ESTIMATORS", "AIPS_TYPES", "STRUCTURES", "cells", "Shared", "setup",
           "compute", "aips_relevance", "aips_type_scales"]

#: the estimators of each paper's synthetic experiment, by name (the report's labels)
AIPS_ESTIMATORS = ("ips", "iips", "rips", "aips_true", "aips_chosen")
CASCADE_DR_ESTIMATORS = ("ips", "iips", "rips", "cascade_dr")
#: the KDD'23 user types (candidate behaviours), the widest last (`ope.choose_action_sets` needs it there)
AIPS_TYPES = ("independent_neighbour_1", "cascade_neighbour_2", "cascade_neighbour_3", "random_3", "random_6",
              "standard")
#: κ_c of each type in AIPS_TYPES: P(c | x) ∝ exp(exp((2δ − 1) κ_c) |θ_c · x|) (KDD'23 code's ordering:
#: δ = 0 favours independent_neighbour_1, δ = 1 standard)
_TYPE_KAPPA = {"independent_neighbour_1": -1.5, "cascade_neighbour_2": -0.9, "cascade_neighbour_3": -0.3,
               "random_3": 0.3, "random_6": 0.9, "standard": 1.5}
#: the WSDM'22 reward structures: which slots the reward at slot k depends on (names of
#: `ope.slot_action_sets`: every slot, the slots above, the slot alone)
STRUCTURES = ("standard", "cascade", "independent")


# ---- cells ----------------------------------------------------------------------------------------

def cells(config: SlatePapersConfig) -> list[dict]:
    out = []
    if config.aips is not None:
        out += [{"paper": "aips", "sweep": sweep, "value": float(v), "structure": ""}
                for sweep, values in config.aips.sweeps().items() for v in values]
    if config.cascade_dr is not None:
        out += [{"paper": "cascade_dr", "sweep": sweep, "value": float(v), "structure": structure}
                for structure in config.cascade_dr.structures
                for sweep, values in config.cascade_dr.sweeps().items() for v in values]
    return out


# ---- the KDD'23 world -------------------------------------------------------------------------------

def aips_relevance(key, num_slots: int) -> np.ndarray:
    """The six candidate relevance matrices of KDD'23's synthetic data, in `AIPS_TYPES` order:
    [c, k, j] True when the reward at slot k depends on slot j. independent_neighbour_1: |k − j| <= 1;
    cascade_neighbour_2 / _3: j <= k + 2 / k + 3; random_3 / random_6: the slot itself and 3 / 6
    draws with replacement from the other slots, per slot; standard: every slot.  bool[6, K, K]."""
    slot, other = np.meshgrid(np.arange(num_slots), np.arange(num_slots), indexing="ij")
    relevance = {"independent_neighbour_1": np.abs(other - slot) <= 1, "cascade_neighbour_2": other <= slot + 2,
                 "cascade_neighbour_3": other <= slot + 3, "standard": np.ones((num_slots, num_slots), bool)}
    for name, draws in (("random_3", 3), ("random_6", 6)):
        matrix = np.eye(num_slots, dtype=bool)
        if num_slots > 1:
            rows = np.repeat(np.arange(num_slots)[:, None], draws, axis=1)
            picks = np.asarray(jax.random.randint(jax.random.fold_in(key, draws), (num_slots, draws), 0, num_slots - 1))
            matrix[rows, picks + (picks >= rows)] = True                          # the other slots, skipping k
        relevance[name] = matrix
    return np.stack([relevance[name] for name in AIPS_TYPES])


def aips_type_scales(delta: float) -> np.ndarray:
    """ω_c = exp((2δ − 1) κ_c) of each type in `AIPS_TYPES` (KDD'23's user-behaviour interpolation δ).
    f64[6]."""
    return np.exp((2 * delta - 1) * np.array([_TYPE_KAPPA[name] for name in AIPS_TYPES]))


def _aips_world(key, config: AipsConfig, num_slots: int, delta: float) -> slotwise.SlotWorld:
    """KDD'23's synthetic world: base reward 1 + σ(z(x, a)), additive interactions W·(scale/K) switched
    on by the round's user type, Gaussian noise. The same draws for every K and δ (the relevance
    matrices' random rows are drawn per K)."""
    slopes, intercepts = slotwise.linear_logits(jax.random.fold_in(key, 0), config.dim, config.num_actions)
    pairs = (slotwise.symmetric_pairs(jax.random.fold_in(key, 1), config.num_actions) if config.pairs is None
             else jnp.asarray(config.pairs, jnp.float32)) * (config.interaction_scale / num_slots)
    directions = jax.random.uniform(jax.random.fold_in(key, 2), (len(AIPS_TYPES), config.dim))
    relevance = aips_relevance(jax.random.fold_in(key, 100 + num_slots), num_slots)
    return slotwise.SlotWorld(slopes, intercepts, pairs, jnp.asarray(relevance), directions,
                              jnp.asarray(aips_type_scales(delta), jnp.float32), jnp.asarray(config.noise, jnp.float32),
                              "linear", "additive")


def _aips_policies(key, config: AipsConfig) -> tuple[np.ndarray, np.ndarray]:
    """The logger softmax(b), b ~ U(0, 1)^A (or the config's), and the target ε-greedy on its least
    likely action, argmin b (KDD'23's β = −2 evaluation policy).  f64[A] each."""
    if config.logger is None:
        b = np.asarray(jax.random.uniform(jax.random.fold_in(key, 3), (config.num_actions,)), np.float64)
        logger = np.exp(b) / np.exp(b).sum()
    else:
        logger = np.asarray(config.logger, np.float64) / np.sum(config.logger)
    target = np.full(config.num_actions, config.epsilon / config.num_actions)
    target[np.argmin(logger)] += 1 - config.epsilon
    return logger, target


@dataclass(frozen=True, eq=False)
class Shared:
    """The KDD'23 world's root key and its policies (fixed over every run, as in the paper)."""
    aips_key: jax.Array
    aips_logger: np.ndarray | None
    aips_target: np.ndarray | None


def setup(key, config: SlatePapersConfig) -> Shared:
    aips_key = shared_key(key, "aips world")
    logger, target = _aips_policies(aips_key, config.aips) if config.aips is not None else (None, None)
    return Shared(aips_key, logger, target)


def _ips_family(log: slotwise.SlotLog, logging_slot, target_slot, **extra) -> dict[str, float]:
    """IPS (every slot), IIPS (the slot alone) and RIPS (the slots above), and IPS over each further
    named action set (bool[N, K, K] per round), on the log's slot log-probabilities.  {name: V̂}."""
    K = log.slates.shape[1]
    sets = {"ips": ope.slot_action_sets("standard", K), "iips": ope.slot_action_sets("independent", K),
            "rips": ope.slot_action_sets("cascade", K), **extra}
    return {name: float(jnp.mean(ope.trajectory_factorised_ips(log.rewards, logging_slot, target_slot, action_sets)))
            for name, action_sets in sets.items()}


def _aips_run(key, config: AipsConfig, shared: Shared, world: slotwise.SlotWorld, rounds: int,
              truth: tuple[float, float]) -> list[dict]:
    log = slotwise.simulate(key, world, shared.aips_logger, rounds, shared_noise=config.shared_noise)
    K = world.num_slots
    relevance = np.asarray(world.relevance)
    logging_slot = slotwise.slot_log_probability(shared.aips_logger, log.slates)
    target_slot = slotwise.slot_log_probability(shared.aips_target, log.slates)
    values = _ips_family(log, logging_slot, target_slot, aips_true=relevance[np.asarray(log.types)])
    terms = np.stack([np.asarray(ope.factorised_ips_terms(log.rewards, logging_slot, target_slot, candidate))
                      for candidate in relevance])                                    # [6, N, K]
    chosen = ope.choose_action_sets(terms)
    values["aips_chosen"] = float(np.mean(np.sum(terms[chosen, :, np.arange(K)], axis=0)))
    return [{"estimator": name, "estimate": value, "truth": truth[0], "truth_se": truth[1]}
            for name, value in values.items()]


def _aips_cell(key, config: AipsConfig, shared: Shared, sweep: str, value: float) -> list[dict]:
    K = int(value) if sweep == "slots" else config.slots
    delta = value if sweep == "delta" else config.delta
    rounds = int(value) if sweep == "rounds" else config.rounds
    world = _aips_world(shared.aips_key, config, K, delta)
    reference = jax.random.normal(jax.random.fold_in(key, 0), (config.truth_contexts, config.dim))
    values = np.asarray(slotwise.context_values(world, shared.aips_target, reference), np.float64)
    truth = (float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)))
    return [{**row, "run": run} for run in range(config.runs)
            for row in _aips_run(jax.random.fold_in(key, 1 + run), config, shared, world, rounds, truth)]


# ---- the WSDM'22 world ------------------------------------------------------------------------------

def _cascade_dr_run(key, config: CascadeDrConfig, structure: str, sweep: str, value: float) -> list[dict]:
    """One run: a fresh world (WSDM'22 draws one per run), its policies, a log, every estimator, and
    the exact value of the target on the log's contexts."""
    K = int(value) if sweep == "slots" else config.slots
    rounds = int(value) if sweep == "rounds" else config.rounds
    k_world, k_pairs, k_policy, k_choice, k_log = (jax.random.fold_in(key, i) for i in range(5))
    choice = np.asarray(jax.random.randint(k_choice, (2,), 0, 2 ** 30))
    interaction = config.interactions[int(choice[0]) % len(config.interactions)]
    lam = value if sweep == "similarity" else config.similarities[int(choice[1]) % len(config.similarities)]
    slopes, intercepts = slotwise.linear_logits(k_world, config.dim, config.num_actions)
    world = slotwise.SlotWorld(slopes, intercepts,
                               slotwise.symmetric_pairs(k_pairs, config.num_actions, config.pair_scale),
                               jnp.asarray(ope.slot_action_sets(structure, K))[None],
                               jnp.zeros((1, config.dim)), jnp.zeros(1), jnp.asarray(0.0), "logistic", interaction)
    b = np.asarray(jax.random.uniform(k_policy, (config.num_actions,)), np.float64)
    logger, target = np.exp(b) / np.exp(b).sum(), np.exp(lam * b) / np.exp(lam * b).sum()
    log = slotwise.simulate(k_log, world, logger, rounds)
    truth = float(np.mean(np.asarray(slotwise.context_values(world, target, log.contexts), np.float64)))
    logging_slot = slotwise.slot_log_probability(logger, log.slates)
    target_slot = slotwise.slot_log_probability(target, log.slates)
    values = _ips_family(log, logging_slot, target_slot)
    predicted, baseline = slotwise.recursive_reward_model(log, logger, target, ridge=config.ridge, folds=config.folds)
    values["cascade_dr"] = float(np.mean(ope.trajectory_cascade_dr(
        log.rewards, np.ones(log.rewards.shape, bool), np.cumsum(logging_slot, axis=1),
        np.cumsum(target_slot, axis=1), predicted, baseline)))
    return [{"estimator": name, "estimate": v, "truth": truth, "truth_se": 0.0, "interaction": interaction,
             "similarity": float(lam)} for name, v in values.items()]


def compute(key, config: SlatePapersConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell: per run and estimator, the estimate and the truth."""
    base = {"paper": cell["paper"], "sweep": cell["sweep"], "value": cell["value"], "structure": cell["structure"]}
    own = cell_key(key, cell)
    if cell["paper"] == "aips":
        rows = _aips_cell(own, config.aips, shared, cell["sweep"], cell["value"])
        rows = [{**row, "interaction": "additive", "similarity": math.nan} for row in rows]
    else:
        rows = [{**row, "run": run} for run in range(config.cascade_dr.runs)
                for row in _cascade_dr_run(jax.random.fold_in(own, run), config.cascade_dr, cell["structure"],
                                           cell["sweep"], cell["value"])]
    return [{**base, **row} for row in rows]

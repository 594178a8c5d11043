"""Scroll-depth view models: P(V=1 | R=i) and scroll-depth sampling.

A view model is the survival function S(i) = P(D >= i) of a session's scroll depth D, so that
P(V=1 | R=i) = S(i): a user views rank i exactly when they scroll at least that far (Jeunen,
Potapov & Ustimenko, KDD'24, Asm. 2, the position-based model). Ranks are 1-based in formulas and
0-based in arrays: ``view_probability(model, K)[i - 1] = S(i)``. Depths take values 0..K.

Models:

* `Logarithmic`: S(i) = 1 / log2(i + 1), the discount of classic DCG (KDD'24 §4).
* `Exponential`: S(i) = gamma^(i - 1), rank-biased precision's patience model (Moffat & Zobel,
  TOIS 2008); the KDD'24 second-level feed.
* `ScrollBudget`: a scroll budget B from a discrete power law P(B = b) ∝ b^(-exponent) on
  b = 1..max_budget, and S(i) = P(B >= i), so the continuation probability S(i+1)/S(i) rises
  with depth (Jeunen, RecSys'23, the probabilistic position-bias model of the KDD'24 first-level
  feed).
* `Tabulated`: any non-increasing S given as a table; `fit_view_model` estimates one from logged
  viewed masks (the *learnt PBM* discount of KDD'24 Table 2).
* `Cascade`: a base model whose session additionally ends after a click on ``stop_signal`` with
  probability ``stop_probability``. Position alone then no longer determines viewing, which
  breaks Asm. 2 on purpose; `view_probability` returns the base (position-only) model, i.e. what
  a logger that assumes the PBM would record, and `simrec.feed.sessions` applies the stops.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Union

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate

__all__ = [
    "Logarithmic", "Exponential", "ScrollBudget", "Tabulated", "Cascade", "ViewModel",
    "view_probability", "sample_depth", "depth_from_uniform", "fit_view_model", "position_model",
]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Logarithmic:
    """S(i) = 1 / log2(i + 1) (the DCG discount; Jeunen et al., KDD'24 §4)."""


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Exponential:
    """Rank-biased view model S(i) = gamma^(i - 1) (Moffat & Zobel, TOIS 2008).

    gamma: f32[], the probability of scrolling on from one rank to the next, in [0, 1].
    """
    gamma: jax.Array

    def __post_init__(self):
        if validate.is_concrete(self.gamma):
            validate.probability("Exponential.gamma", self.gamma)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class ScrollBudget:
    """Scroll budget B ~ discrete power law on 1..max_budget; S(i) = P(B >= i).

        P(B = b) = b^(-exponent) / sum_{b'=1}^{max_budget} b'^(-exponent)     (Jeunen, RecSys'23)

    exponent: f32[], > 1. max_budget: static int >= 1, or None to truncate at the feed length K.
    """
    exponent: jax.Array
    max_budget: int | None = field(default=None, metadata=dict(static=True))

    def __post_init__(self):
        if validate.is_concrete(self.exponent):
            validate.finite("ScrollBudget.exponent", self.exponent, low=1.0, low_open=True)
        if self.max_budget is not None:
            validate.integer("ScrollBudget.max_budget", self.max_budget, low=1)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Tabulated:
    """A tabulated survival function: S(i) = survival[i - 1], and 0 beyond the table.

    survival: f32[L], values in [0, 1], non-increasing.
    """
    survival: jax.Array

    def __post_init__(self):
        if validate.is_concrete(self.survival):
            s = validate.probabilities("Tabulated.survival", self.survival)
            if s.ndim != 1 or s.size == 0:
                raise ValueError(f"Tabulated.survival must be a non-empty vector, got shape {s.shape}")
            if np.any(np.diff(s) > 1e-6):
                raise ValueError("Tabulated.survival must be non-increasing: P(D >= i) cannot grow with i")


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Cascade:
    """Base view model plus stopping: a click on `stop_signal` ends the session with probability
    `stop_probability` (the click itself counts). Violates Asm. 2 of Jeunen et al., KDD'24.

    base: a non-cascade view model. stop_probability: f32[] in [0, 1]. stop_signal: static int,
    the index of the reward signal whose clicks can end the session.
    """
    base: "ViewModel"
    stop_probability: jax.Array
    stop_signal: int = field(default=0, metadata=dict(static=True))

    def __post_init__(self):
        if isinstance(self.base, Cascade) or not isinstance(self.base, _POSITION_MODELS):
            raise ValueError("Cascade.base must be a position-only view model "
                             "(Logarithmic, Exponential, ScrollBudget or Tabulated)")
        if validate.is_concrete(self.stop_probability):
            validate.probability("Cascade.stop_probability", self.stop_probability)
        validate.integer("Cascade.stop_signal", self.stop_signal, low=0)


_POSITION_MODELS = (Logarithmic, Exponential, ScrollBudget, Tabulated)
ViewModel = Union[Logarithmic, Exponential, ScrollBudget, Tabulated, Cascade]


def position_model(model: ViewModel) -> ViewModel:
    """The position-only part of a view model (the base of a `Cascade`, else the model itself)."""
    return model.base if isinstance(model, Cascade) else model


def view_probability(model: ViewModel, num_ranks: int) -> jax.Array:
    """P(V=1 | R=i) = S(i) for i = 1..num_ranks.  Returns f32[num_ranks], non-increasing in [0, 1].

    For a `Cascade`, the survival of its base model (the position-only exposure).
    """
    return _survival(position_model(model), validate.integer("num_ranks (the feed length K)", num_ranks, low=1))


@functools.partial(jax.jit, static_argnums=1)
def _survival(model: ViewModel, num_ranks: int) -> jax.Array:
    ranks = jnp.arange(1, num_ranks + 1, dtype=jnp.float32)
    if isinstance(model, Logarithmic):
        return 1.0 / jnp.log2(ranks + 1.0)
    if isinstance(model, Exponential):
        # gamma^(i-1) with 0^0 = 1: rank 1 is always viewed
        return jnp.where(ranks == 1.0, 1.0, jnp.asarray(model.gamma, jnp.float32) ** (ranks - 1.0))
    if isinstance(model, ScrollBudget):
        max_budget = num_ranks if model.max_budget is None else model.max_budget
        budgets = jnp.arange(1, max_budget + 1, dtype=jnp.float32)
        log_mass = -jnp.asarray(model.exponent, jnp.float32) * jnp.log(budgets)
        # P(B >= i) = sum_{b >= i} b^-a / sum_b b^-a, as a reverse log-cum-sum-exp (no underflow)
        log_tail = jax.lax.associative_scan(jnp.logaddexp, log_mass, reverse=True)
        tail = jnp.exp(log_tail - log_tail[0])
        return jnp.concatenate([tail, jnp.zeros(max(num_ranks - max_budget, 0))])[:num_ranks]
    if isinstance(model, Tabulated):
        table = jnp.asarray(model.survival, jnp.float32)
        return jnp.concatenate([table, jnp.zeros(max(num_ranks - table.shape[0], 0))])[:num_ranks]
    raise TypeError(f"unknown view model {type(model).__name__}")


def sample_depth(key: jax.Array, model: ViewModel, num_ranks: int, shape=()) -> jax.Array:
    """Scroll depths D in 0..num_ranks with P(D >= i) = S(i).  Returns i32[*shape].

    For a `Cascade` this is the depth before click-stops (applied by the session simulator).
    """
    return depth_from_uniform(jax.random.uniform(key, shape), model, num_ranks)


def depth_from_uniform(uniform: jax.Array, model: ViewModel, num_ranks: int) -> jax.Array:
    """D = #{i : U < S(i)} for U ~ Uniform[0, 1): since S is non-increasing, D >= i iff
    U < S(i), so P(D >= i) = S(i).  uniform: f32[...]. Returns i32[...]."""
    survival = view_probability(model, num_ranks)
    return jnp.sum(uniform[..., None] < survival, axis=-1, dtype=jnp.int32)


def fit_view_model(viewed) -> Tabulated:
    """Learnt position-based model from logged viewed masks (Jeunen et al., KDD'24 Table 2, `pbm`).

        P̂(V=1 | R=i) = (1/N) sum_n viewed[n, i-1]

    the empirical survival of the logged depths. viewed: bool[N, K] with N >= 1. Returns a
    `Tabulated` over K ranks.
    """
    viewed = jnp.asarray(viewed)
    if viewed.ndim != 2 or viewed.shape[0] == 0 or viewed.dtype != jnp.bool_:
        raise ValueError(f"viewed must be a non-empty bool[N, K] mask, got {viewed.dtype}{list(viewed.shape)}")
    return Tabulated(jnp.mean(viewed, axis=0, dtype=jnp.float32))

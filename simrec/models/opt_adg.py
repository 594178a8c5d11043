"""OPT-ADG (Lim, McAuley, Lanckriet, RecSys'15, §4 and Alg. 1): train MF for the average discounted gain.

For a pair (u, i⁺) negatives are drawn uniformly from I∖{i⁺} until the first margin violator
v, f(u, i⁺) - f(u, v) < 1, or until max_draws = ⌈(|I|-1)/γ⌉ draws have failed (Alg. 1 lines 5-12).
If v was found after n draws (n >= 1, counting v itself; the paper's counter starts at 0 and
would divide by zero), ⌊(|I|-1)/n⌋ estimates rank(i⁺) and the step descends
C(⌊(|I|-1)/n⌋)·(f(u, v) - f(u, i⁺) + 1) with C(k) = 1 - 1/log₂(k+2) (Eq. 4); pairs without a
violator take no step. The search is vectorised: every pair of a batch owns a random stream of
draws, scored `chunk_size` at a time, and only pairs still searching are scored again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from simrec.models.data import PositiveSets, other_items
from simrec.models.mf import MF

__all__ = ["OptADG", "rank_cost", "violator_weight", "max_draws", "negative_chunk", "find_violators",
           "draw_negatives"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class OptADG:
    """MF-ADG: f(u,i) = <θᵤ,θᵢ> + bᵢ with k = dim, init N(0, init_scale²), trained by OPT-ADG with γ = gamma.

    Speed only: every search iteration scores the next `chunk_size` draws of up to `search_width`
    pairs still searching. chunk_size fixes how the draw stream is cut (so the draws, not their
    distribution, depend on it); search_width does not change the result.
    """
    dim: int = field(default=50, metadata=dict(static=True))
    gamma: float = field(default=100.0, metadata=dict(static=True))
    init_scale: float = field(default=0.1, metadata=dict(static=True))
    chunk_size: int = field(default=32, metadata=dict(static=True))
    search_width: int = field(default=128, metadata=dict(static=True))

    def __post_init__(self):
        if int(self.dim) != self.dim or self.dim < 1:
            raise ValueError(f"dim must be a positive integer, got {self.dim}")
        if not math.isfinite(self.gamma) or self.gamma <= 0:
            raise ValueError(f"gamma must be a finite number > 0 (Lim use 100), got {self.gamma}")
        if not math.isfinite(self.init_scale) or self.init_scale < 0:
            raise ValueError(f"init_scale must be a finite number >= 0, got {self.init_scale}")
        for name in ("chunk_size", "search_width"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")


def rank_cost(k: jax.Array) -> jax.Array:
    """C(k) = 1 - 1/log₂(k + 2), the cost of rank k (Lim Eq. 4).  Same shape as k, f32."""
    return 1.0 - 1.0 / jnp.log2(jnp.asarray(k, jnp.float32) + 2.0)


def violator_weight(n_draws: jax.Array, n_items: int) -> jax.Array:
    """C(⌊(|I| - 1)/n⌋), the weight of a violator found at draw n >= 1 (Lim Alg. 1 line 14).  f32."""
    return rank_cost((n_items - 1) // jnp.asarray(n_draws, jnp.int32))


def max_draws(n_items: int, gamma: float) -> int:
    """⌈(|I| - 1)/γ⌉: the draws Alg. 1 makes before giving up (its loop stops once N >= (|I|-1)/γ)."""
    return max(1, math.ceil((n_items - 1) / gamma))


def negative_chunk(key: jax.Array, pair: jax.Array, chunk: jax.Array, positive: jax.Array,
                   n_items: int, chunk_size: int) -> jax.Array:
    """Draws chunk·c, ..., chunk·c + c - 1 of pair `pair` of a batch, uniform on I∖{positive}.

    The stream of pair b is fixed by (key, b): chunk t uses `fold_in(fold_in(key, b), t)`.
    pair, chunk, positive: i32[]. Returns i32[c].
    """
    return other_items(jax.random.fold_in(jax.random.fold_in(key, pair), chunk), positive, n_items,
                       chunk_size)


def find_violators(key: jax.Array, spec: OptADG, params: MF, users: jax.Array,
                   positives: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """First margin violator of every pair and the number of draws it took (Alg. 1 lines 3-12).

    users, positives: i32[B]. Returns violators: i32[B], n_draws: i32[B] (1-based index of the
    violator in the pair's draw stream, see `negative_chunk`), found: bool[B]; violators and n_draws
    are 0 where not found. Each loop iteration scores the next chunk of the (up to)
    `spec.search_width` pairs still searching, so pairs that found their violator cost nothing.
    Parameters are not differentiated through.
    """
    params = jax.lax.stop_gradient(params)
    n_items = params.item.shape[0]
    draws_cap = max_draws(n_items, spec.gamma)
    n_chunks = -(-draws_cap // spec.chunk_size)
    batch = users.shape[0]
    width = min(batch, spec.search_width)
    user = params.user[users]
    positive_score = jnp.sum(user * params.item[positives], axis=-1) + params.item_bias[positives]
    chunk_of = jax.vmap(negative_chunk, in_axes=(None, 0, 0, 0, None, None))

    def searching(state):
        next_chunk, found, _, _ = state
        return ~found & (next_chunk < n_chunks)

    def search(state):
        next_chunk, found, violators, n_draws = state
        active = searching(state)
        # compact the first `width` searching pairs into slots; empty slots point past the batch
        slot = jnp.where(active, jnp.cumsum(active) - 1, width)
        pairs = jnp.full((width,), batch).at[slot].set(jnp.arange(batch), mode="drop")
        live = pairs < batch
        pair = jnp.minimum(pairs, batch - 1)
        chunk = next_chunk[pair]
        candidates = chunk_of(key, pair, chunk, positives[pair], n_items, spec.chunk_size)
        candidate_score = (jnp.einsum("bk,bck->bc", user[pair], params.item[candidates])
                           + params.item_bias[candidates])
        draw = chunk[:, None] * spec.chunk_size + jnp.arange(spec.chunk_size)
        violates = (positive_score[pair, None] - candidate_score < 1.0) & (draw < draws_cap)
        first = jnp.argmax(violates, axis=1)
        new = live & jnp.any(violates, axis=1)
        violator = jnp.take_along_axis(candidates, first[:, None], 1)[:, 0]
        return (next_chunk.at[pairs].add(1, mode="drop"),
                found.at[pairs].set(new, mode="drop"),
                violators.at[pairs].set(jnp.where(new, violator, 0), mode="drop"),
                n_draws.at[pairs].set(jnp.where(new, chunk * spec.chunk_size + first + 1, 0),
                                      mode="drop"))

    zeros = jnp.zeros((batch,), jnp.int32)
    _, found, violators, n_draws = jax.lax.while_loop(
        lambda state: jnp.any(searching(state)), search,
        (zeros, jnp.zeros((batch,), bool), zeros, zeros))
    return violators, n_draws, found


def draw_negatives(key: jax.Array, spec: OptADG, params: MF, sets: PositiveSets, users: jax.Array,
                   positives: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Negatives, weights and step mask of a batch for `pairwise_loss`.

    Returns violators: i32[B], weights C(⌊(|I|-1)/n⌋) where found else 0: f32[B], found: bool[B].
    """
    del sets  # OPT-ADG draws from I∖{i⁺}, observed or not (Alg. 1 line 6)
    violators, n_draws, found = find_violators(key, spec, params, users, positives)
    weights = jnp.where(found, violator_weight(jnp.maximum(n_draws, 1), params.item.shape[0]), 0.0)
    return violators, weights, found

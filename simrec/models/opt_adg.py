"""OPT-ADG (Lim, McAuley, Lanckriet, RecSys'15, §4 and Alg. 1): train MF for the average discounted gain.

For a pair (u, i⁺) negatives are drawn uniformly from I∖{i⁺} until the first margin violator
v, f(u, i⁺) - f(u, v) < 1, or until max_draws = ⌈(|I|-1)/γ⌉ draws have failed (Alg. 1 lines 5-12).
If v was found after n draws (n >= 1, counting v itself; the paper's counter starts at 0 and
would divide by zero), ⌊(|I|-1)/n⌋ estimates rank(i⁺) and the step descends
C(⌊(|I|-1)/n⌋)·(f(u, v) - f(u, i⁺) + 1) with C(k) = 1 - 1/log₂(k+2) (Eq. 4); pairs without a
violator take no step.

The search is vectorised with shared draw streams. The pairs of a batch are cut into blocks of
`search_width` consecutive pairs; every block draws one stream j₁, j₂, ... i.i.d. uniform on
{0, ..., |I|-2}, cut into chunks of `chunk_size`, and each pair reads every chunk cyclically from
its own random offset (drawn independently of the stream), taking j as the item j, or as |I|-1
where j = i⁺ (a bijection onto I∖{i⁺}). Each pair's draws are therefore exactly Alg. 1's:
i.i.d. uniform on I∖{i⁺}. The pairs of one block share candidates within a step (their
searches are dependent; the offsets let them meet the block's violators in different orders),
which lets a block score a chunk as one [width, k] x [k, chunk] product instead of gathering a
fresh item row for every pair and draw: this, not the arithmetic, dominated the cost. Later
chunks are scored only while some pair of the batch is still searching.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.models.positives import SAMPLINGS, PositiveSets
from simrec.models.mf import MF

__all__ = ["OptADG", "rank_cost", "violator_weight", "max_draws", "pair_streams", "find_violators",
           "draw_negatives"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class OptADG:
    """MF-ADG: f(u,i) = <θᵤ,θᵢ> + bᵢ with k = dim, init N(0, init_scale²), trained by OPT-ADG with γ = gamma.

    search_width: pairs of a batch that share one stream of draws (1 = every pair draws its own,
    as Alg. 1 run pair by pair; larger is faster, see the module docstring). It changes which
    pairs see the same candidates, not the distribution of any pair's draws; but a step's updates
    concentrate on fewer items as it grows: on the movielens-like world of study opt_adg (fold 0,
    λ = 0.05) test ADG was 0.1558 / 0.1559 / 0.1562 / 0.1551 / 0.1529 at widths 1 / 4 / 8 / 16 /
    256, hence the default 8. chunk_size: draws
    scored per search iteration (the default covers max_draws for |I| <= 25,601 at γ = 100, so
    the search is one pass; smaller chunks stop early once every pair found its violator).
    sampling: how the (u, i⁺) pairs are drawn (`simrec.models.positives.SAMPLINGS`): "user" (the
    default, Lim Alg. 1 line 2: u uniform over users with positives, i⁺ uniform in O⁺ᵤ) or
    "positive" ((u, i⁺) uniform over the training positives, LightFM's visiting rate; it weights
    user u by |O⁺ᵤ| in the objective).
    """
    dim: int = field(default=50, metadata=dict(static=True))
    gamma: float = field(default=100.0, metadata=dict(static=True))
    init_scale: float = field(default=0.1, metadata=dict(static=True))
    chunk_size: int = field(default=256, metadata=dict(static=True))
    search_width: int = field(default=8, metadata=dict(static=True))
    sampling: str = field(default="user", metadata=dict(static=True))

    def __post_init__(self):
        validate.integer("OptADG.dim", self.dim, low=1)
        validate.positive("OptADG.gamma (Lim use 100)", self.gamma)
        validate.finite("OptADG.init_scale", self.init_scale, low=0.0)
        validate.integer("OptADG.chunk_size", self.chunk_size, low=1)
        validate.integer("OptADG.search_width", self.search_width, low=1)
        validate.choice("OptADG.sampling", self.sampling, tuple(SAMPLINGS))


def rank_cost(k: jax.Array) -> jax.Array:
    """C(k) = 1 - 1/log₂(k + 2), the cost of rank k (Lim Eq. 4).  Same shape as k, f32."""
    return 1.0 - 1.0 / jnp.log2(jnp.asarray(k, jnp.float32) + 2.0)


def violator_weight(n_draws: jax.Array, n_items: int) -> jax.Array:
    """C(⌊(|I| - 1)/n⌋), the weight of a violator found at draw n >= 1 (Lim Alg. 1 line 14).  f32."""
    return rank_cost((n_items - 1) // jnp.asarray(n_draws, jnp.int32))


def max_draws(n_items: int, gamma: float) -> int:
    """⌈(|I| - 1)/γ⌉: the draws Alg. 1 makes before giving up (its loop stops once N >= (|I|-1)/γ)."""
    return max(1, math.ceil((n_items - 1) / gamma))


def _layout(spec: OptADG, batch: int, n_items: int) -> tuple[int, int, int, int]:
    """(blocks, width, chunk, chunks): ⌈batch/width⌉ blocks of width = min(batch, search_width)
    consecutive pairs (the last one padded), read chunk = min(chunk_size, max_draws) draws at a
    time, in ⌈max_draws/chunk⌉ chunks."""
    width = min(batch, spec.search_width)
    draws_cap = max_draws(n_items, spec.gamma)
    chunk = min(spec.chunk_size, draws_cap)
    return -(-batch // width), width, chunk, -(-draws_cap // chunk)


def _block_streams(key: jax.Array, n_blocks: int, n_draws: int, n_items: int) -> jax.Array:
    """Stream of block g: n_draws draws uniform on {0, ..., |I|-2} from fold_in(key, g).  i32[G, n_draws]."""
    return jax.vmap(lambda g: jax.random.randint(jax.random.fold_in(key, g), (n_draws,), 0,
                                                 n_items - 1))(jnp.arange(n_blocks))


def _offsets(key: jax.Array, n_blocks: int, width: int, chunk: int, n_chunks: int,
             draws_cap: int) -> tuple[jax.Array, jax.Array]:
    """Per-pair reading offsets i32[G, W, chunks] and the valid length v_t of every chunk i32[chunks].

    Chunk t holds stream positions t·chunk + [0, v_t) with v_t = min(chunk, max_draws - t·chunk);
    a pair reads them cyclically from its own uniform offset r in [0, v_t): its j-th read is
    position (r + j) mod v_t. The offsets are independent of the stream, so every pair's draws stay
    i.i.d. uniform, while pairs of a block meet the block's violators in different orders.
    """
    valid = jnp.asarray(np.minimum(chunk, draws_cap - np.arange(n_chunks) * chunk), jnp.int32)
    return jax.random.randint(key, (n_blocks, width, n_chunks), 0, valid), valid


def _as_pair_draw(stream: jax.Array, positive: jax.Array, n_items: int) -> jax.Array:
    """j -> j for j != i⁺ and i⁺ -> |I|-1: a bijection of {0, ..., |I|-2} onto I∖{i⁺}.  Broadcasts."""
    return jnp.where(stream == positive, n_items - 1, stream)


def _streams_and_offsets(key: jax.Array, spec: OptADG, batch: int, n_items: int):
    """Block streams i32[G, chunks·chunk] (zero past max_draws) and `_offsets`."""
    n_blocks, width, chunk, n_chunks = _layout(spec, batch, n_items)
    draws_cap = max_draws(n_items, spec.gamma)
    stream_key, offset_key = jax.random.split(key)
    streams = jnp.pad(_block_streams(stream_key, n_blocks, draws_cap, n_items),
                      ((0, 0), (0, n_chunks * chunk - draws_cap)))
    return streams, _offsets(offset_key, n_blocks, width, chunk, n_chunks, draws_cap)


def pair_streams(key: jax.Array, spec: OptADG, positives: jax.Array, n_items: int) -> jax.Array:
    """The draws every pair of a batch reads in `find_violators`, in order.  positives: i32[B].

    Returns i32[B, max_draws(n_items, spec.gamma)]; row b is i.i.d. uniform on I∖{i⁺_b}, and the
    rows of the pairs of one block (see `OptADG.search_width`) are re-orderings of the same stream.
    """
    batch = positives.shape[0]
    n_blocks, width, chunk, n_chunks = _layout(spec, batch, n_items)
    streams, (offsets, valid) = _streams_and_offsets(key, spec, batch, n_items)
    reads = jnp.arange(n_chunks)[:, None] * chunk + (
        (offsets[..., None] + jnp.arange(chunk)) % valid[:, None])                 # [G, W, chunks, c]
    draws = jax.vmap(lambda stream, rows: stream[rows])(streams, reads.reshape(n_blocks, width, -1))
    # only the last chunk can be partial: its reads past v_t are padding, after max_draws reads
    draws = draws.reshape(n_blocks * width, -1)[:batch, :max_draws(n_items, spec.gamma)]
    return _as_pair_draw(draws, positives[:, None], n_items)


def find_violators(key: jax.Array, spec: OptADG, params: MF, users: jax.Array,
                   positives: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """First margin violator of every pair and the number of draws it took (Alg. 1 lines 3-12).

    users, positives: i32[B]. Returns violators: i32[B], n_draws: i32[B] (1-based index of the
    violator in the pair's row of `pair_streams`), found: bool[B]; violators and n_draws are 0
    where not found. Search t scores chunk t of every block's stream against the block's pairs
    ([width, k] x [k, chunk] per block); a pair's first violator in its reading order is the
    violating position with the smallest (position - offset) mod v_t. With one chunk (max_draws
    <= chunk_size) that is the whole search; otherwise chunks are scored while some pair of the
    batch is still searching. Parameters are not differentiated through.
    """
    params = jax.lax.stop_gradient(params)
    n_items = params.item.shape[0]
    batch = users.shape[0]
    n_blocks, width, chunk, n_chunks = _layout(spec, batch, n_items)
    streams, (offsets, valid) = _streams_and_offsets(key, spec, batch, n_items)
    padding = n_blocks * width - batch

    def blocks(x, fill):                                                           # [B, ...] -> [G, W, ...]
        x = jnp.concatenate([x, jnp.full((padding,) + x.shape[1:], fill, x.dtype)])
        return x.reshape((n_blocks, width) + x.shape[1:])

    user = blocks(params.user[users], 0)                                           # [G, W, k]
    positive = blocks(positives, 0)                                                # [G, W]
    positive_score = (jnp.sum(user * params.item[positive], axis=-1)
                      + params.item_bias[positive])
    last = n_items - 1                             # the item a draw equal to i⁺ stands for
    last_score = user @ params.item[last] + params.item_bias[last]                 # [G, W]
    position = jnp.arange(chunk)

    def search(state):
        t, found, violators, n_draws = state
        candidates = jax.lax.dynamic_slice_in_dim(streams, t * chunk, chunk, axis=1)  # [G, c]
        scores = (jnp.einsum("gwk,gck->gwc", user, params.item[candidates])
                  + params.item_bias[candidates][:, None, :])                      # [G, W, c]
        scores = jnp.where(candidates[:, None, :] == positive[:, :, None], last_score[:, :, None],
                           scores)
        offset, length = offsets[:, :, t, None], valid[t]
        violates = (positive_score[:, :, None] - scores < 1.0) & (position < length)
        first = jnp.min(jnp.where(violates, (position - offset) % length, chunk), axis=-1)
        new = ~found & (first < chunk)
        at = (first + offsets[:, :, t]) % length                                   # stream position
        violator = _as_pair_draw(jnp.take_along_axis(candidates, at, axis=1), positive, n_items)
        return (t + 1, found | new, jnp.where(new, violator, violators),
                jnp.where(new, t * chunk + first + 1, n_draws))

    zeros = jnp.zeros((n_blocks, width), jnp.int32)
    state = (jnp.zeros((), jnp.int32), blocks(jnp.zeros((batch,), bool), True),  # padding: found
             zeros, zeros)
    if n_chunks == 1:
        state = search(state)
    else:
        state = jax.lax.while_loop(lambda s: (s[0] < n_chunks) & jnp.any(~s[1]), search, state)
    _, found, violators, n_draws = state
    trim = lambda x: x.reshape(-1)[:batch]
    return trim(violators), trim(n_draws), trim(found)


def draw_negatives(key: jax.Array, spec: OptADG, params: MF, sets: PositiveSets, users: jax.Array,
                   positives: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Negatives, weights and step mask of a batch for `pairwise_loss`.

    Returns violators: i32[B], weights C(⌊(|I|-1)/n⌋) where found else 0: f32[B], found: bool[B].
    """
    del sets  # OPT-ADG draws from I∖{i⁺}, observed or not (Alg. 1 line 6)
    violators, n_draws, found = find_violators(key, spec, params, users, positives)
    weights = jnp.where(found, violator_weight(jnp.maximum(n_draws, 1), params.item.shape[0]), 0.0)
    return violators, weights, found

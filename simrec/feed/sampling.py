"""Drawing rankings from a policy: the items a session shows, in rank order.

`sample_ranking` draws a policy's ranking for a batch of contexts: the candidates of its
generator (`simrec.feed.policies.sample_candidates`), ordered by its ranker and cut to the feed
length K. `Sort` is deterministic (descending score, ties by the lower item id); `PlackettLuce`
rankings are sampled by Gumbel-top-K (Yellott 1977); `EpsilonGreedy` explores with a uniformly
random order. With the per-context tables of `context_tables` (what `simulate` uses), short PL and
uniform feeds are instead drawn by first appearances: i.i.d. draws from the softmax, O(1) each
from Walker's alias tables (Walker 1977; Vose 1991), keep each item's first appearance; by Luce's
choice axiom the next new item follows the softmax over the items not yet shown, so the order of
first appearances is exactly Plackett–Luce. Only the ranks the session views are needed, so few
draws suffice; the rare sessions without enough distinct draws are completed by Gumbel-top-K over
the rest. Random numbers are 32-bit words of an explicit key (`random_words`), the same on any
number of devices.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p, threefry_2x32

from simrec import sharding, validate
from simrec.feed.policies import (EpsilonGreedy, FixedCandidates, PlackettLuce, Policy, RandomSubset, Ranker, Sort,
                                  TopK, base_ranker, candidate_count, check_contexts, is_deterministic,
                                  item_values, lookup, sample_candidates)

__all__ = [
    "sort_permutation", "sorted_prefix", "inverse_permutation", "random_words", "uniform_from_words", "ContextTables",
    "context_tables", "sample_ranking", "uniform_prefix",
]


# --------------------------------------------------------------------------------------------
# Orders
# --------------------------------------------------------------------------------------------

def sort_permutation(scores: jax.Array, items: jax.Array) -> jax.Array:
    """Indices along axis 1 that order `items` by descending score, ties by ascending item id.
    i32[N, k]."""
    iota = jax.lax.broadcasted_iota(jnp.int32, items.shape, 1)
    return jax.lax.sort((-scores, items, iota), dimension=1, num_keys=2)[2]


def sorted_prefix(scores: jax.Array, items: jax.Array, depth: int) -> jax.Array:
    """The first ``depth`` columns of `sort_permutation` (descending score, ties by ascending item
    id), without sorting whole rows: the top ``depth`` scores give the threshold t (the depth-th
    largest); every column above t belongs to the prefix, and the ties at t fill it in increasing
    id (a second top ``depth``, of −id among the columns at t); only those 2·depth columns are
    sorted. O(N·k) instead of O(N·k log k). The ids at t are compared in float32 (an integer top_k
    falls back to a sort on a CPU) relative to the row's smallest one: exact while they span fewer
    than 2^24 ids, i.e. for any catalogue below 16.7 million items.  scores: f32[N, k];
    items: i32[N, k], or i32[k] shared by every row. Returns i32[N, depth]."""
    items = jnp.broadcast_to(items, scores.shape)
    values, columns = jax.lax.top_k(scores, depth)
    threshold = jnp.min(values, axis=1, keepdims=True)        # the last; a slice of top_k's values would make
                                                              # XLA (CPU) sort the whole row instead
    above = values > threshold                                               # [N, depth]: all of scores > t
    tied = scores == threshold
    lowest = jnp.min(jnp.where(tied, items, jnp.iinfo(jnp.int32).max), axis=1, keepdims=True)
    at_threshold = jnp.where(tied, -(items - lowest).astype(jnp.float32), -jnp.inf)
    tied_columns = jax.lax.top_k(at_threshold, depth)[1]                      # ties at t, increasing id
    pool = jnp.concatenate([jnp.where(above, columns, -1), tied_columns], axis=1)          # [N, 2 depth]
    valid = jnp.concatenate([above, jnp.arange(depth)[None, :] < depth - above.sum(1, keepdims=True)], axis=1)
    safe = jnp.maximum(pool, 0)
    key_score = jnp.where(valid, -jnp.take_along_axis(scores, safe, axis=1), jnp.inf)
    key_item = jnp.where(valid, jnp.take_along_axis(items, safe, axis=1), jnp.iinfo(jnp.int32).max)
    return jax.lax.sort((key_score, key_item, safe), dimension=1, num_keys=2)[2][:, :depth]


def inverse_permutation(perm: jax.Array) -> jax.Array:
    """position[n, perm[n, j]] = j.  i32[N, k]."""
    rows = jnp.arange(perm.shape[0])[:, None]
    iota = jax.lax.broadcasted_iota(jnp.int32, perm.shape, 1)
    return jnp.zeros(perm.shape, jnp.int32).at[rows, perm].set(iota)


# --------------------------------------------------------------------------------------------
# Random words
# --------------------------------------------------------------------------------------------

def random_words(key: jax.Array, shape) -> jax.Array:
    """Uniform random 32-bit words from an explicit key.  Returns u32[*shape].

    For a Threefry key, both 32-bit outputs of every Threefry-2x32 block are used (counter =
    word index, JAX's non-partitionable layout); JAX's default partitionable `random.bits`
    keeps one word per block, so this halves the cost of the simulator's hottest operation.
    Other key implementations use `jax.random.bits`. With several devices the same words are
    computed each from its own index (`_words_by_index`), so that a sharded batch axis draws its
    words without communication.
    """
    shape = tuple(shape)
    size = math.prod(shape)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if typed and str(jax.random.key_impl(key)) != "threefry2x32":
        return jax.random.bits(key, shape, jnp.uint32)
    data = jax.random.key_data(key) if typed else key
    if sharding.num_devices() > 1:
        return _words_by_index(data, shape)
    return threefry_2x32(data, jax.lax.iota(jnp.uint32, size)).reshape(shape)


def _words_by_index(data: jax.Array, shape: tuple) -> jax.Array:
    """`random_words` computed element by element from each word's flat index j, so that a
    sharded axis needs no communication: with h = ceil(n / 2), word j < h is the first output of
    the Threefry block of counters (j, j + h) and word j >= h the second output of (j - h, j)
    (JAX's `threefry_2x32` layout; for odd n the counter n is 0). Both outputs are hashed and one
    kept: twice the hashing of `threefry_2x32`, split over the devices, bit-identical words."""
    size = math.prod(shape)
    half = jnp.uint32((size + 1) // 2)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    index = sum(jax.lax.broadcasted_iota(jnp.uint32, shape, d) * jnp.uint32(stride)
                for d, stride in enumerate(strides))
    first = index < half
    low = jnp.where(first, index, index - half)
    high = jnp.where(low + half < jnp.uint32(size), low + half, jnp.uint32(0))
    out_first, out_second = threefry2x32_p.bind(data[0], data[1], low, high)
    return jnp.where(first, out_first, out_second)


def uniform_from_words(words: jax.Array) -> jax.Array:
    """U = (w >> 8) / 2^24, exactly uniform on the 2^24 floats {0, 2^-24, ..., 1 - 2^-24}.
    words: u32[...]. Returns f32[...]."""
    return (words >> 8).astype(jnp.float32) * jnp.float32(2.0 ** -24)


def _gumbel(words: jax.Array) -> jax.Array:
    """Standard Gumbel variates -log(-log U) from words, U = ((w >> 8) + 1/2) / 2^24 in (0, 1).
    f32[...]."""
    uniform = ((words >> 8).astype(jnp.float32) + 0.5) * jnp.float32(2.0 ** -24)
    return -jnp.log(-jnp.log(uniform))


def _scaled_index(words: jax.Array, size) -> jax.Array:
    """floor(w · size / 2^32) for size < 2^31, exactly and without 64-bit integers (the product of
    16-bit halves, carried): uniform on 0..size-1 up to a relative error below size / 2^32.
    size: an int or a u32/i32 array broadcast against words.  i32[...]."""
    size = jnp.asarray(size).astype(jnp.uint32)
    word_high, word_low = words >> 16, words & 0xFFFF
    size_high, size_low = size >> 16, size & 0xFFFF
    cross_a, cross_b = word_high * size_low, word_low * size_high          # each < 2^32
    carry = (cross_a & 0xFFFF) + (cross_b & 0xFFFF) + ((word_low * size_low) >> 16)
    return (word_high * size_high + (cross_a >> 16) + (cross_b >> 16) + (carry >> 16)).astype(jnp.int32)


def uniform_prefix(key: jax.Array, num_rows: int, num_candidates: int, length: int) -> jax.Array:
    """The first `length` positions of a uniformly random order of 0..num_candidates-1, per row:
    a partial Fisher–Yates shuffle (step i swaps position i with one uniform on i..k-1, from
    `random_words`), in the [k, rows] layout so that each step writes one row of contiguous
    memory — several times faster on a CPU than the top `length` of uniform noise. Needs
    length <= num_candidates < 2^31 (`_scaled_index`); memory O(num_candidates · num_rows).
    i32[num_rows, length]."""
    if not length <= num_candidates < 2**31:
        raise ValueError(f"uniform_prefix needs length <= num_candidates < 2^31, got length {length} and "
                         f"num_candidates {num_candidates}")
    words = random_words(key, (length, num_rows))
    positions = jnp.broadcast_to(jnp.arange(num_candidates, dtype=jnp.int32)[:, None], (num_candidates, num_rows))
    columns = jnp.arange(num_rows)

    def swap(i, positions):
        j = i + _scaled_index(words[i], num_candidates - i)                              # uniform on i..k-1
        drawn = positions[j, columns]
        return positions.at[j, columns].set(positions[i]).at[i].set(drawn)

    positions = jax.lax.fori_loop(0, length, swap, positions, unroll=True if length <= 32 else 8)
    return positions[:length].T


# --------------------------------------------------------------------------------------------
# Plackett–Luce and uniform rankings by first appearances
# --------------------------------------------------------------------------------------------

def _alias_width(num_candidates: int) -> int:
    """Columns of an alias table: the next power of two >= k (at least 2), so that the top bits
    of one 32-bit word pick a column exactly uniformly and the rest are its coin."""
    return max(2, 1 << (num_candidates - 1).bit_length())


def _alias_tables(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias tables of softmax(logits) per row, built in float64 (Vose's pairing of a
    small and a large column, vectorised over rows by scanning the columns in increasing order
    of probability), over W = `_alias_width(k)` columns (columns k..W-1 have weight 0).

    logits: f[X, k], finite. Returns (accept u32[X, W], alias i32[X, W]). A 32-bit word w with
    column c = w >> (32 - b) (W = 2^b) and coin w mod 2^(32-b) gives item c if the coin is below
    accept[c], else alias[c]; so P(item a) = (1/W) (accept[a] + sum_{c: alias[c] = a}
    (2^(32-b) - accept[c])) / 2^(32-b), within 2^-32 per column of the softmax.
    """
    X, k = logits.shape
    width = _alias_width(k)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    scaled = np.zeros((X, width))
    scaled[:, :k] = weights * (width / weights.sum(axis=1, keepdims=True))           # mean 1
    order = np.argsort(scaled, axis=1, kind="stable")
    ascending = np.take_along_axis(scaled, order, axis=1)
    prob = np.ones((X, width))
    alias = np.broadcast_to(np.arange(width), (X, width)).copy()
    rows = np.arange(X)
    # unpaired columns are the sorted positions small..large; `rest` is the large one's residual
    small, large, rest = np.zeros(X, np.int64), np.full(X, width - 1), ascending[:, -1].copy()
    for _ in range(width - 1):
        active = small < large
        demoted = active & (rest < 1.0)          # the large column fell below 1: pair it first
        pos = np.where(demoted, large, small)
        value = np.where(demoted, rest, ascending[rows, small])
        partner = np.where(demoted, large - 1, large)
        item = order[rows, pos]
        prob[rows[active], item[active]] = np.clip(value[active], 0.0, 1.0)
        alias[rows[active], item[active]] = order[rows, partner][active]
        rest = np.where(active, np.where(demoted, ascending[rows, np.maximum(large - 1, 0)], rest) - (1.0 - value),
                        rest)
        large = np.where(demoted, large - 1, large)
        small = np.where(active & ~demoted, small + 1, small)
    coin = 32 - (width.bit_length() - 1)
    return np.rint(prob * 2.0**coin).astype(np.uint32), alias.astype(np.int32)


def _num_draws(feed_length: int, num_candidates: int, weighted: bool = True) -> int | None:
    """Draws per session for sampling by first appearances (`_first_appearances`), or None when
    duplicates would be too frequent (then Gumbel-top-K is used): 1.5 K draws for feeds of up
    to 32 ranks from at least 4 K candidates; 48 draws, covering about the first 32 ranks, for
    longer feeds from at least 96 candidates, whose deeper sessions are then completed by
    Gumbel-top-K (`_complete_short`). The alias coin of ``weighted`` draws needs fewer than 2^16
    candidates; uniform draws (`_scaled_index`) fewer than 2^31."""
    if num_candidates >= (2**16 if weighted else 2**31):
        return None
    if feed_length <= 32:
        return feed_length + (feed_length + 1) // 2 if 4 * feed_length <= num_candidates else None
    return 48 if num_candidates >= 96 else None


_UNROLL_DRAWS = 16


def _first_appearances_scan(draws: jax.Array, feed_length: int) -> tuple[jax.Array, jax.Array]:
    """`_first_appearances` by a scan over the draws: a draw is new when it is not among the
    positions filled so far (all distinct draws while fewer than min(K, M) are found; after that
    the count only has to reach its cap K)."""
    num_draws, n = draws.shape
    slots = jnp.arange(min(feed_length, num_draws))[None, :]

    def step(carry, draw):
        positions, count = carry
        new = ~jnp.any(positions == draw[:, None], axis=1)
        positions = jnp.where(new[:, None] & (slots == count[:, None]), draw[:, None], positions)
        return (positions, count + new), None

    init = (jnp.full((n, slots.shape[1]), -1, draws.dtype), jnp.zeros(n, jnp.int32))
    (positions, count), _ = jax.lax.scan(step, init, draws)
    if feed_length > num_draws:
        positions = jnp.pad(positions, ((0, 0), (0, feed_length - num_draws)), constant_values=-1)
    return positions, jnp.minimum(count, feed_length)


def _first_appearances(draws: jax.Array, feed_length: int) -> tuple[jax.Array, jax.Array]:
    """Candidate positions in order of first appearance in i.i.d. draws, and how many distinct.

    draws: i32[M, N] (draw j of session n in row j). Returns (positions i32[N, K], -1 after the
    count; count i32[N], capped at K). Elementwise over sessions. Up to `_UNROLL_DRAWS` draws the
    M(M-1)/2 comparisons are unrolled (fastest for short feeds); more draws are scanned, each
    compared with the min(K, M) positions filled so far (same result; the unrolled graph's
    compile time grows to tens of seconds at M = 48, the scan's stays below a second).
    """
    num_draws, n = draws.shape
    if num_draws > _UNROLL_DRAWS:
        return _first_appearances_scan(draws, feed_length)
    fresh, slot = [], []
    count = jnp.zeros(n, jnp.int32)
    for j in range(num_draws):
        new = jnp.ones(n, bool)
        for i in range(j):
            new = new & (draws[i] != draws[j])
        fresh.append(new)
        slot.append(count)
        count = count + new
    positions = []
    for s in range(min(feed_length, num_draws)):
        pos = jnp.full(n, -1, jnp.int32)
        for j in range(s, num_draws):
            pos = jnp.where(fresh[j] & (slot[j] == s), draws[j], pos)
        positions.append(pos)
    positions = jnp.stack(positions, axis=1)
    if feed_length > num_draws:
        positions = jnp.pad(positions, ((0, 0), (0, feed_length - num_draws)), constant_values=-1)
    return positions, jnp.minimum(count, feed_length)


def _complete_short(key, positions, count, need, logits_of, num_candidates: int):
    """Finish the rankings whose draws gave fewer than `need` distinct candidates: ranks
    count+1..K by Gumbel-top-K over the candidates not yet placed (the Plackett–Luce law of the
    rest of a ranking given its prefix, whatever produced the prefix). Short sessions are
    completed in batches, gathered by a while loop: of N/256 sessions for feeds of up to 32 ranks
    (duplicates are rare) and of N/4 for longer ones (about a fifth of log-discount sessions
    scroll past their first 32 ranks); usually one batch.

    positions: i32[N, K] (-1 after count). count, need: i32[N]. logits_of(rows i32[B]) -> f32[B, k].
    Returns i32[N, K].
    """
    n, K = positions.shape
    size = min(n, max(64, n // (256 if K <= 32 else 4)))
    rank = jnp.arange(K)[None, :]

    def complete(state):
        positions, short, batch = state
        rows = jnp.nonzero(short, size=size, fill_value=n)[0]        # n marks an unused slot
        safe = jnp.minimum(rows, n - 1)
        prefix, placed = positions[safe], count[safe]
        logits = logits_of(safe)
        placed_at = jnp.where(prefix >= 0, prefix, num_candidates)              # -1: dropped below
        taken = jnp.zeros(logits.shape, bool).at[jnp.arange(size)[:, None], placed_at].set(True, mode="drop")
        noise = _gumbel(random_words(jax.random.fold_in(key, batch), logits.shape))
        rest = jax.lax.top_k(jnp.where(taken, -jnp.inf, logits + noise), K)[1].astype(jnp.int32)
        tail = jnp.take_along_axis(rest, jnp.maximum(rank - placed[:, None], 0), axis=1)
        positions = positions.at[rows].set(jnp.where(rank < placed[:, None], prefix, tail), mode="drop")
        return positions, short.at[rows].set(False, mode="drop"), batch + 1

    state = (positions, count < need, jnp.zeros((), jnp.int32))
    return jax.lax.while_loop(lambda state: jnp.any(state[1]), complete, state)[0]


def _draw_ranking(key, accept, alias, rows, num_candidates: int, feed_length: int, need, logits_of):
    """Plackett–Luce candidate positions by first appearances in i.i.d. draws from the
    softmax (Luce's choice axiom: the first appearance among the remaining items follows the
    softmax restricted to them), drawn in O(1) each from per-context alias tables (accept and
    alias indexed by rows i32[N]; None for uniform weights). `_num_draws` draws per session;
    sessions with fewer than need[n] distinct candidates are finished by `_complete_short`.
    Returns i32[N, K] candidate positions, -1 after the distinct draws of sessions that needed
    no completion."""
    k_draw, k_rest = jax.random.split(key)
    words = random_words(k_draw, (_num_draws(feed_length, num_candidates, accept is not None), rows.shape[0]))
    if accept is None:
        draws = _scaled_index(words, num_candidates)
    else:
        coin_bits = 33 - accept.shape[1].bit_length()
        column = (words >> coin_bits).astype(jnp.int32)
        coin = words & jnp.uint32((1 << coin_bits) - 1)
        draws = jnp.where(coin < lookup(accept, rows[None, :], column), column, lookup(alias, rows[None, :], column))
    positions, count = _first_appearances(draws, feed_length)
    return _complete_short(k_rest, positions, count, need, logits_of, num_candidates)


# --------------------------------------------------------------------------------------------
# Rankings
# --------------------------------------------------------------------------------------------

def _rank_candidates(key, ranker: Ranker, contexts, candidates, feed_length: int,
                     tables: "ContextTables | None" = None, need=None, fixed=None) -> jax.Array:
    """The first `feed_length` of the ranked candidates (item ids).  i32[N, K].

    tables: `context_tables` of the policy (Sort order, alias tables). need: i32[N] or None
    (= K): only ranks 1..need[n] must be sampled; for rankers sampled by first appearances,
    later ranks may hold -1. fixed: i32[k], the candidates when they are the same for every
    context (positions then map to ids by a 1-D gather).
    """
    n, k = candidates.shape

    def by_draws(num_draws: int | None) -> bool:
        """By first appearances when the draws usually give every needed rank (else Gumbel-top-K
        or a shuffle)."""
        return key is not None and num_draws is not None and (need is not None or num_draws >= feed_length)

    draws, uniform_draws = by_draws(_num_draws(feed_length, k)), by_draws(_num_draws(feed_length, k, weighted=False))
    need = jnp.full(n, feed_length, jnp.int32) if need is None else need

    def to_items(positions):
        safe = jnp.maximum(positions, 0)
        items = fixed[safe] if fixed is not None else jnp.take_along_axis(candidates, safe, axis=1)
        return jnp.where(positions >= 0, items, -1)

    def candidates_of(rows):
        return jnp.broadcast_to(fixed, (rows.shape[0], k)) if fixed is not None else candidates[rows]

    if isinstance(ranker, Sort):
        if tables is not None and tables.sorted_top is not None:
            return tables.sorted_top[contexts]
        perm = sorted_prefix(item_values(ranker.scores, contexts, candidates), candidates, feed_length)
        return jnp.take_along_axis(candidates, perm, axis=1)
    if isinstance(ranker, PlackettLuce):
        def logits_of(rows):
            return item_values(ranker.scores, contexts[rows], candidates_of(rows)) / ranker.temperature
        if draws and tables is not None and tables.accept is not None:
            positions = _draw_ranking(key, tables.accept, tables.alias, contexts, k, feed_length, need, logits_of)
            return to_items(positions)
        perturbed = logits_of(jnp.arange(n)) + _gumbel(random_words(key, candidates.shape))
        return jnp.take_along_axis(candidates, jax.lax.top_k(perturbed, feed_length)[1], axis=1)
    if isinstance(ranker, EpsilonGreedy):
        k_coin, k_uniform, k_base = jax.random.split(key, 3)
        explore = jax.random.uniform(k_coin, contexts.shape) < ranker.epsilon
        if uniform_draws:
            positions = _draw_ranking(k_uniform, None, None, contexts, k, feed_length, need,
                                      lambda rows: jnp.zeros((rows.shape[0], k)))
            uniform = to_items(positions)
        elif k < 2**16:
            uniform = to_items(uniform_prefix(k_uniform, n, k, feed_length))
        else:                                      # beyond `_scaled_index`: the top K of uniform noise
            shuffle = jax.lax.top_k(jax.random.uniform(k_uniform, candidates.shape), feed_length)[1]
            uniform = jnp.take_along_axis(candidates, shuffle, axis=1)
        base = _rank_candidates(k_base, ranker.base, contexts, candidates, feed_length, tables, need, fixed)
        return jnp.where(explore[:, None], uniform, base)
    raise TypeError(f"unknown ranker {type(ranker).__name__}")


class ContextTables(NamedTuple):
    """Per-context parts of a policy's ranking that do not depend on chance: candidates i32[X, k]
    (None for FixedCandidates, which are read directly), the top K of their Sort order
    i32[X, K] (None unless the base ranker is `Sort`), and for a Plackett–Luce base ranker the
    alias tables of its softmax over the candidates, accept u32[X, W] and alias i32[X, W] with W
    = `_alias_width(k)` (`_alias_tables`; None when its rankings are drawn by Gumbel-top-K). See
    `context_tables`."""
    candidates: jax.Array | None
    sorted_top: jax.Array | None
    accept: jax.Array | None = None
    alias: jax.Array | None = None


@jax.jit
def _tables_block(policy: Policy, contexts):
    candidates = sample_candidates(None, policy.generator, contexts)
    base = base_ranker(policy.ranker)
    if isinstance(base, Sort):
        return candidates, _rank_candidates(None, base, contexts, candidates, policy.feed_length)
    return candidates, item_values(base.scores, contexts, candidates) / base.temperature


def context_tables(policy: Policy, num_contexts: int, block_size: int = 1024) -> ContextTables | None:
    """Precompute, for contexts 0..num_contexts-1, what a policy with a deterministic generator
    (FixedCandidates, TopK) ranks the same way every time: the candidates and their Sort order
    for a `Sort` base ranker, the alias tables of the softmax for a `PlackettLuce` one (when
    `_num_draws` allows sampling by first appearances), so that sampling a session only draws
    its randomness. None for other policies. Memory O(X (k + K)) with Sort, O(X k) with PL.
    Raises ValueError unless the policy's lookup tables have num_contexts rows (`check_contexts`)."""
    contexts = np.arange(validate.integer("num_contexts", num_contexts, low=1), dtype=np.int32)
    check_contexts(policy, contexts.shape[0], "contexts (num_contexts)")
    if isinstance(policy.generator, RandomSubset):
        return None
    base = base_ranker(policy.ranker)
    k = candidate_count(policy.generator)
    if isinstance(base, PlackettLuce) and _num_draws(policy.feed_length, k) is None:
        return None
    blocks = [_tables_block(policy, jnp.asarray(contexts[s:s + block_size]))
              for s in range(0, contexts.shape[0], block_size)]
    candidates = jnp.concatenate([b[0] for b in blocks]) if isinstance(policy.generator, TopK) else None
    second = np.concatenate([np.asarray(b[1]) for b in blocks])
    if isinstance(base, Sort):
        keep = isinstance(policy.ranker, EpsilonGreedy)
        return ContextTables(candidates if keep else None, jnp.asarray(second))
    accept, alias = _alias_tables(second.astype(np.float64))
    return ContextTables(candidates, None, jnp.asarray(accept), jnp.asarray(alias))


def sample_ranking(key: jax.Array | None, policy: Policy, contexts: jax.Array,
                   tables: ContextTables | None = None, depth: jax.Array | None = None) -> jax.Array:
    """The shown items in rank order for contexts i32[N].  Returns i32[N, K].

    `key` may be None for deterministic policies (`is_deterministic`). tables: the policy's
    `context_tables`, to skip recomputing the deterministic parts and, for a Plackett–Luce
    ranker, to draw its rankings by first appearances (`_draw_ranking`) instead of by
    Gumbel-top-K (ε-greedy exploration is always drawn so when `_num_draws` allows; both ways
    sample the same law). depth: i32[N], optional: only ranks 1..depth[n] are needed (e.g. the
    session's scroll depth); with draws, ranks below may then hold -1."""
    if key is None:
        if not is_deterministic(policy):
            raise ValueError("sample_ranking needs a PRNG key for a stochastic policy")
        k_gen = k_rank = None
    else:
        k_gen, k_rank = jax.random.split(key)
    if tables is not None and tables.candidates is not None:
        candidates = tables.candidates[contexts]
    else:
        candidates = sample_candidates(k_gen, policy.generator, contexts)
    return _rank_candidates(k_rank, policy.ranker, contexts, candidates, policy.feed_length, tables, depth,
                            _shared_candidates(policy))


def _shared_candidates(policy: Policy) -> jax.Array | None:
    """The candidate ids i32[k] when they are the same for every context (`FixedCandidates` with one
    vector: positions then map to ids by a 1-D gather), else None."""
    if isinstance(policy.generator, FixedCandidates) and jnp.ndim(policy.generator.items) == 1:
        return jnp.asarray(policy.generator.items, jnp.int32)
    return None

"""Tie-aware top-N metrics over the full catalogue (DESIGN "Ranks and ties", "Top-N metrics").

For user u and a non-excluded item i, ``rank(i)`` is the number of non-excluded items i' != i with
a strictly greater score (0-based, Lim et al. RecSys'15) and ``ties(i)`` the number of other
non-excluded items with exactly the same score. Excluded items (e.g. training items) are neither
ranked nor counted, and an excluded item is never relevant. Every metric is the expected value of
its plain form when tied items are put in a uniformly random order (McSherry & Najork, ECIR'08),
so a relevant item's 0-based position p is uniform on {rank, ..., rank + ties}. With tie-free
scores each metric is exactly its plain form:

    DCG@K     = sum_{i in rel, p(i) < K} 1 / log2(p(i) + 2)                     (K=None: all)
    nDCG@K    = DCG@K / IDCG@K,  IDCG@K = sum_{j < min(K, |rel|)} 1 / log2(j + 2)
    ADG       = DCG / |rel|                                                      (Lim Def. 1)
    AP        = (1/|rel|) sum_{i in rel} hits(<= p(i)) / (p(i) + 1)
    Recall@K  = |{i in rel: p(i) < K}| / |rel|,   Precision@K = same count / K
    ATOP      = mean_{i in rel} (N - p(i)) / N,  N = number of non-excluded items   (Steck)
    AUC       = mean_{i in rel} (#irrelevant below i + #irrelevant tied with i / 2) / #irrelevant

Graded gains (`dcg` and `ndcg` with ``gains=``): relevant item i carries gain g(i) >= 0 instead of
1 (non-relevant items carry 0), e.g. a rating or 2^rating - 1, with imputed values for missing
ratings as in Steck (RecSys'13, §3.2). Tie-aware the same way, since an item's position is uniform
over its tie group whatever its gain:

    DCG@K  = sum_{i in rel} g(i) * mean_{p = rank(i)}^{rank(i) + ties(i)} [p < K] / log2(p + 2)
    nDCG@K = DCG@K / IDCG@K,  IDCG@K = sum_{j < min(K, |rel|)} g_(j) / log2(j + 2),

g_(0) >= g_(1) >= ... the relevant items' gains sorted descending. All gains 1 is the binary case.

A user with no relevant item gets NaN (AUC is also NaN when every non-excluded item is relevant);
`mean` skips NaN. A user whose every item is excluded is an error, and so is a NaN or infinite
score of a non-excluded item; excluded items' scores are never read (-inf there is fine). Scores
are compared in float32 (JAX's default precision): float64 scores that differ only beyond float32
precision are tied. Masks are boolean or 0/1 (`simrec.validate.relevance_mask`).

How it is computed. Every metric is a function of each relevant item's (rank, ties) and of the
relevant items' order among themselves, so one pass finds those and nothing else: per block of
users (blocks on all cores), each row is sorted once with its excluded items set aside (NaN sorts
last; numpy's vectorised sort), and every relevant item's rank and ties come from one binary search
vectorised over the block's relevant items (a second only for items that tie). Dense masks (numpy,
or JAX read in place on the CPU) are read block by block and never converted to CSR; sparse masks
are used as CSR. The per-item formulas then run in float64 on O(#relevant) numbers, in (user, item)
order whatever the input kind, so dense and sparse masks give bit-identical results. Memory stays
at a few user blocks: scores may also come from a function that scores one block of users at a
time, so a model never materialises U x I.

Why numpy and not XLA: on the CPU, XLA's sort and top-k are one to two orders of magnitude slower
than numpy's vectorised sort, and comparison-count reductions run at several ns per comparison, so
counting against a block's relevant scores (#relevant comparisons per item) loses to sorting.

Low-rank scores (`Factors`: s_ui = ⟨x_u, y_i⟩ + b_i, e.g. an MF model's parameters) are the
exception: there a user's score row is cheap to compute, so `evaluate` counts instead of sorting.
One jitted pass computes a user's row once for each slot of up to W of its relevant items (W the
mean count per user rounded up to a power of two), sets the user's excluded items to NaN and
counts the items above and level with each of the slot's scores: I comparisons per relevant pair
and one k·I row per slot (against I log I per user to sort), no U x I matrix, nothing on the host
but O(#relevant + #excluded) indices. With a few held-out items per user (a validation split) this
is several times faster than the sorting pass; the counts, and so the metrics, are the same.
"""
from __future__ import annotations

import functools
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import sharding, validate

__all__ = [
    "ranks", "dcg", "ndcg", "adg", "average_precision", "recall_at", "precision_at", "atop", "auc",
    "evaluate", "mean", "mean_and_se", "idcg", "ndcg_bias_factor", "METRICS", "Factors",
]

#: metric names understood by `evaluate` ("name" or "name@K")
METRICS = ("dcg", "ndcg", "adg", "ap", "recall", "precision", "atop", "auc")
_NEEDS_K = {"recall", "precision"}
_NO_K = {"adg", "ap", "atop", "auc"}
_DEFAULT_BLOCK_ELEMENTS = 1 << 22  # user-block size: about 4M scores (16 MB f32) per block


@dataclass(frozen=True)
class _Counts:
    """Flat over every (user, relevant item) pair, in (user, item) order, plus per-user totals."""
    user: np.ndarray       # i64[M]  the pair's user
    item: np.ndarray       # i64[M]  the pair's item
    above: np.ndarray      # i64[M]  rank(i): non-excluded items strictly above
    tied: np.ndarray       # i64[M]  ties(i): other non-excluded items with the same score
    rel_above: np.ndarray  # i64[M]  relevant items strictly above
    rel_tied: np.ndarray   # i64[M]  other relevant items tied with i
    n_items: np.ndarray    # i64[U]  non-excluded items N
    n_rel: np.ndarray      # i64[U]  |rel|

    def per_user(self, values: np.ndarray) -> np.ndarray:
        """Sum of a per-pair quantity over each user's relevant items.  f64[U]."""
        return np.bincount(self.user, weights=values, minlength=len(self.n_rel))


@dataclass(frozen=True)
class Factors:
    """Low-rank scores s_ui = ⟨x_u, y_i⟩ + b_i, ranked by `evaluate` without materialising U x I
    (module docstring, last paragraph). user: f32[U, k] (x_u); item: f32[I, k] (y_i);
    item_bias: f32[I] (b_i). An MF model's parameters are one: ``Factors(p.user, p.item,
    p.item_bias)``."""
    user: jax.Array
    item: jax.Array
    item_bias: jax.Array

    def __post_init__(self):
        n_users, dim = validate.matrix_shape("Factors.user", self.user, (None, None))
        n_items, _ = validate.matrix_shape("Factors.item", self.item, (None, dim))
        validate.matrix_shape("Factors.item_bias", self.item_bias, (n_items,))
        for name in ("user", "item", "item_bias"):
            if not np.all(np.isfinite(np.asarray(getattr(self, name)))):
                raise ValueError(f"Factors.{name} contains NaN or infinite values (a diverged "
                                 "model?); scores must be finite")

    @property
    def shape(self) -> tuple[int, int]:
        return self.user.shape[0], self.item.shape[0]


_PAIR_CHUNK = 128                  # relevant pairs counted at once (slots x width per chunk)
_MAX_SLOT_WIDTH = 128              # most relevant items of one user counted against one score row
#: catalogues below this size count the items above and level with a score in one int32 sum
#: (above + 2^16 · level, about twice as fast on a CPU as two sums): both counts are below 2^15, so
#: the sum stays below 2^31
_PACKED_ITEMS = 1 << 15


@functools.partial(jax.jit, static_argnames=("slots_per_chunk", "packed"))
def _factor_slot_counts(user, item, item_bias, slot_user, slot_items, slot_excluded, *,
                        slots_per_chunk: int, packed: bool):
    """Per slot s (one user u and up to W of u's relevant items) and item column w of it: the
    non-excluded items scored above s_ui, those level with it (i itself included) and s_ui, all
    from one row s_u· = x_u Yᵀ + b computed per slot, i.e. once per user for every W of its
    relevant items. slot_user: i32[S]; slot_items: i32[S, W] (padding: any item, its counts are
    dropped by the caller); slot_excluded: i32[S, L], the user's excluded items padded with I
    (dropped); S a multiple of slots_per_chunk. The chunks are split over the devices
    (`simrec.sharding.map_blocks`) and the counts made whole on every process (`collect`). packed:
    both counts from one int32 sum (`_PACKED_ITEMS`: needs I < 2^15).
    Returns (i32[S, W], i32[S, W], f32[S, W])."""
    def chunk(users, items, excluded):
        rows = user[users] @ item.T + item_bias                                     # [C, I]
        target = jnp.take_along_axis(rows, items, axis=1)                           # [C, W]
        rows = rows.at[jnp.arange(rows.shape[0])[:, None], excluded].set(jnp.nan, mode="drop")
        above, level = rows[:, None, :] > target[:, :, None], rows[:, None, :] == target[:, :, None]
        if packed:                             # both counts in one sum (`_PACKED_ITEMS`)
            both = jnp.sum(jnp.where(above, 1, 0) + jnp.where(level, 1 << 16, 0), axis=2, dtype=jnp.int32)
            return both & 0xFFFF, both >> 16, target
        return jnp.sum(above, axis=2, dtype=jnp.int32), jnp.sum(level, axis=2, dtype=jnp.int32), target

    width = slot_items.shape[1]
    counts = sharding.map_blocks(chunk, (slot_user, slot_items, slot_excluded), slots_per_chunk,
                                 slot_user.shape[0] // slots_per_chunk)
    return sharding.collect(tuple(x.reshape(-1, width) for x in counts))


def _require_ranked(n_ranked: np.ndarray, users: np.ndarray) -> None:
    """Every user (row r is user users[r]) keeps at least one non-excluded item to rank."""
    if np.any(n_ranked == 0):
        bad = int(users[np.flatnonzero(n_ranked == 0)[0]])
        raise ValueError(f"every item is excluded for user {bad}; a user needs at least one "
                         "non-excluded item to be ranked (drop the user or exclude fewer items)")


def _pow2(n: int, low: int) -> int:
    """The smallest power of two >= max(n, low) (padded sizes: few distinct compiled shapes)."""
    n = max(int(n), int(low), 1)
    return 1 << (n - 1).bit_length()


def _slot_width(n_rel: np.ndarray) -> int:
    """Relevant items per slot: the power of two at or above the mean count of the users with
    one, at most `_MAX_SLOT_WIDTH` (a user takes ⌈|rel|/W⌉ slots, each one score row and W
    comparisons per item: padding costs comparisons, more slots cost score rows)."""
    counts = n_rel[n_rel > 0]
    return min(_pow2(math.ceil(counts.mean()) if len(counts) else 1, 1), _MAX_SLOT_WIDTH)


def _factor_counts(f: Factors, relevant, exclude) -> _Counts:
    """`_Counts` of low-rank scores by counting (`_factor_slot_counts`): each user's relevant items
    in slots of `_slot_width`, so a score row serves up to that many relevant items."""
    n_users, n_items = shape = f.shape
    if n_users == 0 or n_items == 0:
        raise ValueError(f"scores must have at least one user and one item, got shape {shape}")
    pairs = _mask_entries(relevant, "relevant", shape)(0, n_users)
    excluded = (np.zeros(0, np.int64) if exclude is None
                else _mask_entries(exclude, "exclude", shape)(0, n_users))
    pairs = pairs[~np.isin(pairs, excluded, assume_unique=True)]   # an excluded item is never relevant
    n_ranked = n_items - np.bincount(excluded // n_items, minlength=n_users)
    _require_ranked(n_ranked, np.arange(n_users))
    pair_user, item = np.divmod(pairs, n_items)
    n_rel = np.bincount(pair_user, minlength=n_users).astype(np.int64)
    # slots: user u's relevant items (in item order) cut into ⌈n_rel[u] / width⌉ rows of width
    width = _slot_width(n_rel)
    user_slots = -(-n_rel // width)
    first_slot = np.cumsum(user_slots) - user_slots
    first_pair = np.cumsum(n_rel) - n_rel
    rank_in_user = np.arange(len(pairs)) - first_pair[pair_user]
    pair_slot = first_slot[pair_user] + rank_in_user // width
    pair_column = rank_in_user % width
    n_slots = int(user_slots.sum())
    per_chunk = max(1, _PAIR_CHUNK // width)
    size = per_chunk * _pow2(-(-max(n_slots, 1) // per_chunk), 1)
    slot_user = np.zeros(size, np.int32)
    slot_user[:n_slots] = np.repeat(np.arange(n_users), user_slots)
    slot_items = np.zeros((size, width), np.int32)
    slot_items[pair_slot, pair_column] = item
    # each slot's user's excluded items, padded with n_items (out of range: dropped)
    excluded_user, excluded_item = np.divmod(excluded, n_items)
    starts = np.searchsorted(excluded_user, slot_user[:n_slots], side="left")
    counts = np.searchsorted(excluded_user, slot_user[:n_slots], side="right") - starts
    excluded_width = _pow2(counts.max(initial=0), 1)
    padded = np.full((size, excluded_width), n_items, np.int32)
    inside = np.arange(excluded_width) < counts[:, None]
    padded[:n_slots][inside] = excluded_item[(starts[:, None] + np.arange(excluded_width))[inside]]
    above, level, target = (np.asarray(x)[pair_slot, pair_column] for x in _factor_slot_counts(
        f.user, f.item, f.item_bias, jnp.asarray(slot_user), jnp.asarray(slot_items),
        jnp.asarray(padded), slots_per_chunk=per_chunk, packed=n_items < _PACKED_ITEMS))
    above, level = above.astype(np.int64), level.astype(np.int64)
    less, less_equal = _count_in_rows(pair_user, target, pair_user, target)
    return _Counts(pair_user, item, above, level - 1, n_rel[pair_user] - less_equal,
                   less_equal - less - 1, n_ranked, n_rel)


def _is_sparse(x) -> bool:
    return sp.issparse(x)


def _host_rows(x):
    """``(start, stop) -> x[start:stop]`` as numpy, without copying x whole where avoidable: numpy
    slices are views, a JAX array on the CPU is read in place, and one on an accelerator moves to
    the host one block at a time (slicing a CPU JAX array per block would copy each block)."""
    if isinstance(x, jax.Array) and any(d.platform != "cpu" for d in x.devices()):
        return lambda start, stop: np.asarray(x[start:stop])
    whole = np.asarray(x)
    return lambda start, stop: whole[start:stop]


def _mask_entries(x, name: str, shape):
    """``(start, stop) -> i64[K]``: the true entries of rows start..stop-1 of a relevance-style
    mask (`validate.relevance_mask`: boolean or 0/1), as sorted flat indices into those rows
    (row-major). A dense (numpy or JAX) mask is validated and read block by block, never converted
    whole; a sparse one becomes a bool CSR matrix once (it is small)."""
    if _is_sparse(x):
        m = validate.relevance_mask(name, x, shape)

        def sparse_block(start: int, stop: int) -> np.ndarray:
            rows = m[start:stop]
            row = np.repeat(np.arange(stop - start), np.diff(rows.indptr))
            return row * shape[1] + rows.indices
        return sparse_block
    validate.matrix_shape(name, x, shape)
    read = _host_rows(x)

    def dense_block(start: int, stop: int) -> np.ndarray:
        values = read(start, stop)
        if values.dtype != bool:                       # a bool block needs no check (nor copy)
            values = validate.relevance_mask(name, values)
        return np.flatnonzero(values)
    return dense_block


def _dense_scores(scores):
    """A score matrix checked as `validate.real_array` (int or float, never bool or complex; a
    rectangular nested list becomes numpy, a ragged one is an error) and its (n_users, n_items)."""
    if _is_sparse(scores):
        raise ValueError("scores must be a dense [users, items] array (numpy or JAX), "
                         "not a sparse matrix; pass scores.toarray()")
    scores = validate.real_array("scores", scores, (None, None), what="[users, items]", bool_ok=False)
    return scores, tuple(scores.shape)


def _score_source(scores, relevant):
    """(n_users, n_items, block function users -> scores) for an array or a score function."""
    if callable(scores):
        n_users, n_items = validate.matrix_shape("relevant", relevant, (None, None))
        return n_users, n_items, scores
    scores, (n_users, n_items) = _dense_scores(scores)
    rows = _host_rows(scores)
    return n_users, n_items, lambda users: rows(users[0], users[-1] + 1)


def _block_scores(score_block, users: np.ndarray, n_items: int) -> np.ndarray:
    """f32[B, I] scores of a contiguous block of users (shape- and dtype-checked; maybe a
    read-only view)."""
    block = validate.real_array(f"scores of users {users[0]}..{users[-1]} (from the scoring function)",
                                score_block(users), (len(users), n_items), bool_ok=False)
    return np.asarray(block, dtype=np.float32)


def _sorted_rows(block: np.ndarray, excluded: np.ndarray | None, users: np.ndarray):
    """Each row's non-excluded scores sorted ascending, and how many there are.  (f32[B, I], i64[B])

    ``excluded``: flat indices into ``block`` (None: nothing excluded). Excluded entries are set
    to NaN, which sorts last, so row r's ranked items are its first N[r] entries and an excluded
    item's score is never looked at (it may be -inf or NaN).
    """
    ordered = np.array(block, dtype=np.float32)        # a copy: the caller's scores stay as given
    n_ranked = np.full(len(block), block.shape[1], np.int64)
    if excluded is not None:
        np.put(ordered, excluded, np.nan)
        n_ranked -= np.bincount(excluded // block.shape[1], minlength=len(block))
    _require_ranked(n_ranked, users)
    ordered.sort(axis=1)                               # NaN last, -inf first
    last = ordered[np.arange(len(block)), n_ranked - 1]
    finite = np.isfinite(ordered[:, 0]) & np.isfinite(last)
    if not finite.all():
        bad = int(users[np.flatnonzero(~finite)[0]])
        raise ValueError(f"scores contain NaN or infinite values (first at user {bad}); replace "
                         "them with finite numbers (e.g. a large negative score) or exclude "
                         "those items")
    return ordered, n_ranked


def _count_below(ordered: np.ndarray, n_ranked: np.ndarray, rows: np.ndarray,
                 targets: np.ndarray) -> np.ndarray:
    """For each query (row, target): how many of the first ``n_ranked[row]`` entries of that row
    of ``ordered`` (sorted ascending) are < target.  i64[M].

    One branch-free binary search over all queries of a block at once (log2(I) vectorised steps
    of a power-of-two stride), instead of an `np.searchsorted` call per user.
    """
    flat, width = ordered.reshape(-1), ordered.shape[1]
    limit = n_ranked[rows]
    last = rows * width - 1                            # + k: the row's k-th entry (1-based)
    count = np.zeros(len(targets), np.int64)
    step = 1 << (int(limit.max(initial=1)).bit_length() - 1)
    while step:
        candidate = count + step
        below = candidate <= limit
        below &= flat[last + np.minimum(candidate, limit)] < targets
        count += step * below
        step >>= 1
    return count


def _row_keys(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """u64 keys ordering pairs by (row, float32 value): row in the high word, value bits below."""
    bits = (values.astype(np.float32) + np.float32(0.0)).view(np.uint32)   # -0.0 -> +0.0
    order_bits = np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000))
    return (rows.astype(np.uint64) << np.uint64(32)) | order_bits.astype(np.uint64)


def _count_in_rows(q_rows, q_values, ref_rows, ref_values) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the number of references in its row with value < and <= its value."""
    ref = np.sort(_row_keys(ref_rows, ref_values))
    q = _row_keys(q_rows, q_values)
    start = np.searchsorted(ref, q_rows.astype(np.uint64) << np.uint64(32), side="left")
    return (np.searchsorted(ref, q, side="left") - start,
            np.searchsorted(ref, q, side="right") - start)


def _block_counts(score_block, users, n_items, relevant_entries, exclude_entries):
    """`_Counts` fields for one contiguous block of users (see `_mask_entries`)."""
    start, stop = int(users[0]), int(users[-1]) + 1
    block = _block_scores(score_block, users, n_items)
    relevant = relevant_entries(start, stop)           # flat, in (row, item) order
    excluded = None if exclude_entries is None else exclude_entries(start, stop)
    if excluded is not None:                           # an excluded item is never relevant
        relevant = relevant[~np.isin(relevant, excluded, assume_unique=True)]
    ordered, n_ranked = _sorted_rows(block, excluded, users)
    pair_row, item = np.divmod(relevant, n_items)
    rel_scores = block[pair_row, item]
    n_rel = np.bincount(pair_row, minlength=len(users)).astype(np.int64)
    less_all = _count_below(ordered, n_ranked, pair_row, rel_scores)
    # entries equal to an item's score start at less_all and include the item itself; only where
    # the next one is equal too (a tie) is the end of the run searched for: "<= v" is "< next(v)"
    less_equal_all = less_all + 1
    after = np.minimum(less_equal_all, n_ranked[pair_row] - 1)
    tie = np.flatnonzero((less_equal_all < n_ranked[pair_row])
                         & (ordered[pair_row, after] == rel_scores))
    less_equal_all[tie] = _count_below(ordered, n_ranked, pair_row[tie],
                                       np.nextafter(rel_scores[tie], np.float32(np.inf)))
    less, less_equal = _count_in_rows(pair_row, rel_scores, pair_row, rel_scores)
    return (users[pair_row], item, n_ranked[pair_row] - less_equal_all,
            less_equal_all - less_all - 1, n_rel[pair_row] - less_equal, less_equal - less - 1,
            n_ranked, n_rel)


def _counts(scores, relevant, exclude=None, block_size: int | None = None) -> _Counts:
    """The one pass every metric uses: (rank, ties) of each relevant item, blocks on all cores
    (low-rank `Factors`: by counting, `_factor_counts`)."""
    if isinstance(scores, Factors):
        return _factor_counts(scores, relevant, exclude)
    n_users, n_items, score_block = _score_source(scores, relevant)
    shape = (n_users, n_items)
    if n_users == 0 or n_items == 0:
        raise ValueError(f"scores must have at least one user and one item, got shape {shape}")
    relevant_entries = _mask_entries(relevant, "relevant", shape)
    exclude_entries = None if exclude is None else _mask_entries(exclude, "exclude", shape)
    if block_size is None:
        block_size = max(1, min(n_users, _DEFAULT_BLOCK_ELEMENTS // n_items))
    block_size = validate.integer("block_size", block_size, low=1)
    blocks = [np.arange(a, min(a + block_size, n_users)) for a in range(0, n_users, block_size)]
    work = functools.partial(_block_counts, score_block, n_items=n_items,
                             relevant_entries=relevant_entries, exclude_entries=exclude_entries)
    if len(blocks) == 1:
        parts = [work(blocks[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(len(blocks), os.cpu_count() or 1)) as pool:
            parts = list(pool.map(work, blocks))
    fields = [np.concatenate(f) for f in zip(*parts)]
    return _Counts(*fields)


@functools.lru_cache(maxsize=8)
def _discount_prefix(n: int) -> np.ndarray:
    """D(x) = sum_{p < x} 1 / log2(p + 2) for x = 0..n, float64[n + 1]."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(n, dtype=np.float64) + 2.0))])


@functools.lru_cache(maxsize=8)
def _harmonic(n: int) -> np.ndarray:
    """H(x) = sum_{j=1}^{x} 1/j for x = 0..n, float64[n + 1]."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))])


def _dcg_from(c: _Counts, k, gains: np.ndarray | None = None) -> np.ndarray:
    """Expected DCG@k: each relevant item's discount averaged over its tie positions, times its
    gain (f64[M] in pair order; None: gain 1)."""
    prefix = _discount_prefix(int(c.n_items.max()) + 1)
    cut = len(prefix) - 1 if k is None else int(k)
    hi = np.minimum(c.above + c.tied + 1, cut)
    lo = np.minimum(c.above, cut)
    discount = (prefix[hi] - prefix[lo]) / (c.tied + 1)
    return c.per_user(discount if gains is None else gains * discount)


def _hits_from(c: _Counts, k) -> np.ndarray:
    """Expected number of relevant items in the top k."""
    return c.per_user(np.clip(int(k) - c.above, 0, c.tied + 1) / (c.tied + 1))


def _idcg_from(c: _Counts, k) -> np.ndarray:
    n = c.n_rel if k is None else np.minimum(c.n_rel, int(k))
    return _discount_prefix(int(c.n_rel.max()) + 1)[n]


def _ap_from(c: _Counts) -> np.ndarray:
    """Expected AP over random orders within tie groups (McSherry & Najork, ECIR'08).

    For a relevant item in a tie group of g items starting at position s, with h relevant items
    above the group and r relevant items in it, uniform over its g positions j and the other r-1
    relevant items spread uniformly over the other g-1 slots:
        E = (1/g) sum_{j<g} (h + 1 + j (r-1)/(g-1)) / (s + j + 1)
          = (h+1)/g * (H(s+g) - H(s)) + (r-1)/((g-1) g) * (g - (s+1) (H(s+g) - H(s))).
    """
    harmonic = _harmonic(int(c.n_items.max()) + 1)
    s, g = c.above, c.tied + 1
    h, r = c.rel_above, c.rel_tied + 1
    window = harmonic[s + g] - harmonic[s]
    spread = np.where(g > 1, (r - 1) / np.maximum(g - 1, 1) / g * (g - (s + 1) * window), 0.0)
    return c.per_user((h + 1) / g * window + spread)


def _atop_from(c: _Counts) -> np.ndarray:
    n_items = c.n_items[c.user]
    return c.per_user((n_items - c.above - c.tied / 2.0) / n_items)


def _auc_from(c: _Counts) -> np.ndarray:
    """Per user: sum over relevant items of the share of irrelevant items below (ties 1/2)."""
    n_irrelevant = (c.n_items - c.n_rel)[c.user]
    below = c.n_items[c.user] - 1 - c.above - c.tied
    rel_below = c.n_rel[c.user] - 1 - c.rel_above - c.rel_tied
    irrelevant_tied = c.tied - c.rel_tied
    share = (below - rel_below + 0.5 * irrelevant_tied) / np.maximum(n_irrelevant, 1)
    return np.where(c.n_items > c.n_rel, c.per_user(share), np.nan)


def _metric_from(c: _Counts, name: str, k) -> np.ndarray:
    """One metric per user from the counts; NaN for users without relevant items."""
    n_rel = c.n_rel.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if name == "dcg":
            value = _dcg_from(c, k)
        elif name == "ndcg":
            value = _dcg_from(c, k) / _idcg_from(c, k)
        elif name == "adg":
            value = _dcg_from(c, None) / n_rel
        elif name == "ap":
            value = _ap_from(c) / n_rel
        elif name == "recall":
            value = _hits_from(c, k) / n_rel
        elif name == "precision":
            value = _hits_from(c, k) / int(k)
        elif name == "atop":
            value = _atop_from(c) / n_rel
        elif name == "auc":
            value = _auc_from(c) / n_rel
        else:
            raise AssertionError(name)
    return np.where(c.n_rel > 0, value, np.nan)


_NAME = re.compile(r"^(?P<name>[a-z_]+)(@(?P<k>\d+))?$")
_ALIASES = {"average_precision": "ap", "map": "ap", "recall_at": "recall", "precision_at": "precision"}


def _parse_metric(spec: str) -> tuple[str, int | None]:
    m = _NAME.match(spec.strip().lower()) if isinstance(spec, str) else None
    name = _ALIASES.get(m["name"], m["name"]) if m else None
    if name not in METRICS:
        raise ValueError(f"unknown metric {spec!r}; valid metrics: {', '.join(METRICS)} "
                         "(optionally with @K, e.g. ndcg@10; recall and precision need @K)")
    k = int(m["k"]) if m["k"] is not None else None
    _check_k(k, name)
    return name, k


def _check_k(k, name: str) -> None:
    if k is None:
        if name in _NEEDS_K:
            raise ValueError(f"{name} needs a cutoff k >= 1, e.g. k=10")
        return
    if name in _NO_K:
        raise ValueError(f"{name} takes no cutoff k; it is defined over the whole ranking")
    validate.integer("k", k, low=1)


def evaluate(scores, relevant, *, exclude=None, metrics: Iterable[str] = ("adg", "ndcg", "ap",
             "atop", "auc", "recall@10", "ndcg@10"), block_size: int | None = None
             ) -> dict[str, np.ndarray]:
    """Several metrics from one pass over the catalogue.

    scores: f32[U, I] (numpy or JAX), a function ``users: i64[B] -> f32[B, I]`` that scores a
    block of users (so a model never materialises U x I), or low-rank `Factors` (counted, not
    sorted: fastest with few relevant items per user); relevant, exclude: bool[U, I] dense or
    scipy.sparse. ``metrics``: names from `METRICS`, optionally with a cutoff ``@K``.
    Returns ``{spec: f64[U]}`` (NaN for users without relevant items).
    """
    parsed = {spec: _parse_metric(spec) for spec in metrics}
    if not parsed:
        raise ValueError("metrics is empty; ask for at least one, e.g. metrics=('ndcg@10',)")
    c = _counts(scores, relevant, exclude, block_size)
    return {spec: _metric_from(c, name, k) for spec, (name, k) in parsed.items()}


def _single(name: str, scores, relevant, k, exclude, block_size) -> np.ndarray:
    _check_k(k, name)
    c = _counts(scores, relevant, exclude, block_size)
    return _metric_from(c, name, k)


def _checked_gains(gains, shape):
    """Validated graded gains f64[U, I]: a dense array or a CSR matrix (only relevant entries are
    read, by `_pair_gains`)."""
    gains = sp.csr_matrix(gains) if _is_sparse(gains) else np.asarray(gains)
    values = gains.data if _is_sparse(gains) else gains
    validate.matrix_shape("gains (one per user and item)", gains, shape)
    values = validate.real_array("gains", values).astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("gains contain NaN or infinite values; give every relevant item a "
                         "finite gain (impute missing ratings, e.g. with Steck's low value)")
    if np.any(values < 0):
        raise ValueError(f"gains must be >= 0 (the ideal DCG sorts gains descending), got "
                         f"{values.min():g}; shift or clip them, e.g. 2**rating - 1")
    return gains


def _pair_gains(gains, c: _Counts) -> np.ndarray:
    """f64[M]: the gain of every (user, relevant item) pair of `c`, in its pair order."""
    return np.asarray(gains[c.user, c.item], np.float64).ravel()


def _graded_idcg_from(c: _Counts, gains: np.ndarray, k) -> np.ndarray:
    """IDCG@k = sum_{j < min(k, |rel|)} g_(j) / log2(j + 2), gains sorted descending per user."""
    order = np.lexsort((-gains, c.user))               # pairs are grouped by user already
    start = np.concatenate([[0], np.cumsum(c.n_rel)[:-1]])
    position = np.arange(len(order)) - start[c.user[order]]
    discount = 1.0 / np.log2(position + 2.0)
    if k is not None:
        discount = np.where(position < int(k), discount, 0.0)
    return np.bincount(c.user[order], weights=gains[order] * discount, minlength=len(c.n_rel))


def _graded(name: str, scores, relevant, gains, k, exclude, block_size) -> np.ndarray:
    """Graded DCG@k / nDCG@k (module docstring): the binary counts pass, gains per pair."""
    _check_k(k, name)
    shape = scores.shape if isinstance(scores, Factors) else _score_source(scores, relevant)[:2]
    gains = _checked_gains(gains, shape)
    c = _counts(scores, relevant, exclude, block_size)
    pair_gains = _pair_gains(gains, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = _dcg_from(c, k, pair_gains)
        if name == "ndcg":
            value = value / _graded_idcg_from(c, pair_gains, k)
    return np.where(c.n_rel > 0, value, np.nan)


def dcg(scores, relevant, *, k: int | None = None, exclude=None, block_size=None,
        gains=None) -> np.ndarray:
    """Expected DCG@k per user, sum_{i in rel, p(i) < k} g(i)/log2(p(i) + 2).  f64[U].

    gains: None (g = 1, binary) or f[U, I] >= 0 (dense or sparse; only relevant entries count).
    """
    if gains is None:
        return _single("dcg", scores, relevant, k, exclude, block_size)
    return _graded("dcg", scores, relevant, gains, k, exclude, block_size)


def ndcg(scores, relevant, *, k: int | None = None, exclude=None, block_size=None,
         gains=None) -> np.ndarray:
    """Expected nDCG@k = DCG@k / IDCG@k with IDCG@k over the min(k, |rel|) largest gains.  f64[U].

    gains: None (binary) or f[U, I] >= 0 as in `dcg`; NaN for a user whose relevant gains are all 0.
    """
    if gains is None:
        return _single("ndcg", scores, relevant, k, exclude, block_size)
    return _graded("ndcg", scores, relevant, gains, k, exclude, block_size)


def adg(scores, relevant, *, exclude=None, block_size=None) -> np.ndarray:
    """ADG = DCG / |rel| (Lim et al. RecSys'15, Def. 1); unbiased under SRS (Thm 1).  f64[U]."""
    return _single("adg", scores, relevant, None, exclude, block_size)


def average_precision(scores, relevant, *, exclude=None, block_size=None) -> np.ndarray:
    """Expected AP = (1/|rel|) sum_{i in rel} hits(<= p(i)) / (p(i)+1).  f64[U]."""
    return _single("ap", scores, relevant, None, exclude, block_size)


def recall_at(scores, relevant, *, k: int, exclude=None, block_size=None) -> np.ndarray:
    """Expected Recall@k = |{i in rel: p(i) < k}| / |rel|.  f64[U]."""
    return _single("recall", scores, relevant, k, exclude, block_size)


def precision_at(scores, relevant, *, k: int, exclude=None, block_size=None) -> np.ndarray:
    """Expected Precision@k = |{i in rel: p(i) < k}| / k.  f64[U]."""
    return _single("precision", scores, relevant, k, exclude, block_size)


def atop(scores, relevant, *, exclude=None, block_size=None) -> np.ndarray:
    """ATOP = mean_{i in rel} (N - p(i)) / N, the area under the top-N recall curve (Steck).  f64[U]."""
    return _single("atop", scores, relevant, None, exclude, block_size)


def auc(scores, relevant, *, exclude=None, block_size=None) -> np.ndarray:
    """AUC = mean_{i in rel} share of irrelevant items ranked below i (ties count 1/2).  f64[U]."""
    return _single("auc", scores, relevant, None, exclude, block_size)


def ranks(scores, *, exclude=None, block_size: int | None = None) -> np.ndarray:
    """rank(i) = #non-excluded items with a strictly greater score (0-based).  i32[U, I].

    scores: f[U, I], a dense numpy or JAX array (or a rectangular nested list). Unlike the metric
    functions, `ranks` takes no block-scoring function and no `Factors`: they get the shape
    [users, items] from ``relevant``, which `ranks` does not have (and it returns U x I anyway).
    Excluded entries get -1. Sorts each row (user blocks); the metric functions need far less.
    """
    if callable(scores) or isinstance(scores, Factors):
        what = "Factors" if isinstance(scores, Factors) else "a block-scoring function"
        raise validate.ArgumentTypeError(
            f"ranks needs scores as a dense [users, items] array (numpy or JAX), got {what}; "
            "evaluate and the metric functions accept it (they take the shape from relevant), ranks "
            "does not: pass the materialised matrix, e.g. ranks(score_fn(np.arange(n_users)))")
    n_users, n_items, score_block = _score_source(scores, None)
    shape = (n_users, n_items)
    exclude_entries = None if exclude is None else _mask_entries(exclude, "exclude", shape)
    block_size = block_size or max(1, min(n_users, _DEFAULT_BLOCK_ELEMENTS // max(n_items, 1)))
    out = np.empty(shape, np.int32)
    for start in range(0, n_users, block_size):
        users = np.arange(start, min(start + block_size, n_users))
        block = _block_scores(score_block, users, n_items)
        excluded = None if exclude_entries is None else exclude_entries(start, start + len(users))
        ordered, n_ranked = _sorted_rows(block, excluded, users)
        rows = out[start:start + len(users)]
        for r in range(len(users)):
            rows[r] = n_ranked[r] - np.searchsorted(ordered[r, :n_ranked[r]], block[r], side="right")
        if excluded is not None:
            np.put(rows, excluded, -1)
    return out


# --------------------------------------------------------------------------------------------
# Aggregates and observed-vs-complete helpers
# --------------------------------------------------------------------------------------------

def mean(values) -> float:
    """Mean over users, skipping NaN (users without relevant items). NaN if every value is NaN."""
    v = np.asarray(values, np.float64)
    ok = ~np.isnan(v)
    return float(v[ok].mean()) if ok.any() else float("nan")


def mean_and_se(values) -> tuple[float, float]:
    """NaN-skipping mean over users and its standard error (sample SD / sqrt(n))."""
    v = np.asarray(values, np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else float("nan")


def idcg(n_relevant, k: int | None = None) -> np.ndarray:
    """IDCG@k = sum_{j < min(k, n)} 1/log2(j + 2) for each count n.  f64[...].

    n_relevant: whole numbers >= 0, a scalar or an array (`validate.counts`: 2.7 is an error,
    never truncated)."""
    n = validate.counts("n_relevant", n_relevant)
    if k is not None:
        _check_k(k, "ndcg")
        n = np.minimum(n, int(k))
    return _discount_prefix(int(n.max(initial=0)) + 1)[n]


def ndcg_bias_factor(n_observed, n_prior) -> np.ndarray:
    """Lim et al. Thm 2: E[NDCG_obs] / NDCG_comp = |O| IDCG(|P|) / (|P| IDCG(|O|)) under SRS.

    With IDCG over the whole list (no cutoff). ``n_observed`` <= ``n_prior``, both >= 1.  f64[...].
    """
    o = validate.counts("n_observed", n_observed, low=1)
    p = validate.counts("n_prior", n_prior, low=1)
    if np.any(p < o):
        raise ValueError("need 1 <= n_observed <= n_prior for the Thm 2 factor (observed relevant "
                         "items are a subset of the prior's); pass the counts in that order")
    return o * idcg(p) / (p * idcg(o))

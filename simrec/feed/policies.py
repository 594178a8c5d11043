"""Ranking policies (candidate generator + ranker) and the exposure they give each item.

A policy for context x draws a candidate set a^k ~ G(x), orders it with a ranker R and shows the
first K = ``feed_length`` items (Jeunen, Potapov & Ustimenko, KDD'24 §3, two-stage notation; a
single-stage policy uses the whole catalogue as its candidate set). Its *exposure* of item a is
the expected number of views a gets under view model S(i) = P(V=1 | R=i) (KDD'24 Eq. 6):

    ε(x, a) = sum_{i=1}^{K} P(a at rank i | x) · S(i).

Generators: `FixedCandidates` (the same set for every context, `all_items` = single stage, or
one fixed set per context, e.g. `top_k_candidates` = a `TopK` retrieval computed once), `TopK`
(top-k by a retrieval score), `RandomSubset` (a uniform random k-subset).
Rankers: `Sort` (deterministic, descending score, ties broken by lower item id), `PlackettLuce`
(temperature T, sampled by Gumbel-top-K: Yellott 1977), `EpsilonGreedy` (with probability ε a
uniformly random order of the candidates, else its base ranker). With the per-context tables of
`context_tables` (what `simulate` uses), short PL and uniform feeds are instead drawn by first
appearances: i.i.d. draws from the softmax, O(1) each from Walker's alias tables (Walker 1977;
Vose 1991), keep each item's first appearance; by Luce's choice axiom the next new item follows
the softmax over the items not yet shown, so the order of first appearances is exactly
Plackett–Luce. Only the ranks the session views are needed, so few draws suffice; the rare
sessions without enough distinct draws are completed by Gumbel-top-K over the rest.

`exposure` is exact when the ranker is `Sort` or `EpsilonGreedy(Sort)` (closed forms below,
including a hypergeometric formula for `RandomSubset`), exact too for `PlackettLuce` and
`EpsilonGreedy(PlackettLuce)` on a deterministic generator when the exponential race is cheap
(`race_nodes`: a quadrature of the race of exponential arrival times that orders a PL ranking,
`_race_exposure`), and otherwise a seeded Monte Carlo mean with its standard error. The Monte
Carlo per-sample value for Plackett–Luce is the conditional placement probability of Oosterhuis
(SIGIR'21, PL-Rank): given a sampled ranking σ,

    ε̂(a) = sum_{i <= min(K, pos_σ(a))} S(i) · w_a / Z_i,   w_a = exp(s_a / T),
    Z_i = sum of w over the items not in σ_1..σ_{i-1},

which is unbiased for ε(a) and positive for every candidate (unless below float32's range). It is
computed in log space from differences of logits only (`_plackett_luce_sample`), so neither
extreme scores nor tiny probabilities lose precision, overflow or go negative.

Scores and qualities are `ItemFn` values: ``fn(params, contexts i32[N], items i32[N, K]) ->
f32[N, K]`` with array ``params`` (a pytree, traced under jit) and a static ``fn``; `from_table`
wraps a dense f32[X, A] table. Item ids are int32 everywhere.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jax.extend.random import threefry2x32_p, threefry_2x32

from simrec import sharding, validate
from simrec.feed.views import ViewModel, view_probability

__all__ = [
    "ItemFn", "from_table", "item_values", "FixedCandidates", "all_items", "top_k_candidates", "TopK",
    "RandomSubset", "Sort", "PlackettLuce", "EpsilonGreedy", "Policy", "Exposure", "num_items", "is_exact",
    "is_deterministic", "sample_candidates", "sample_ranking", "exposure", "exposure_of",
    "exposure_sample", "exact_exposure", "subset_weights", "monte_carlo", "race_nodes", "ContextTables",
    "context_tables", "random_words", "uniform_from_words", "lookup", "table_contexts", "check_contexts",
]


# --------------------------------------------------------------------------------------------
# Functions of (context, item) pairs
# --------------------------------------------------------------------------------------------

@functools.partial(jax.tree_util.register_dataclass, data_fields=["params"],
                   meta_fields=["fn", "num_items"])
@dataclass(frozen=True)
class ItemFn:
    """A score or quality function of (context, item) pairs over a catalogue of `num_items`.

    fn: static callable ``fn(params, contexts i32[N], items i32[N, K]) -> f32[N, K]`` (define it
    once at module level: a new function object means a new compilation). params: pytree of
    arrays. num_items: static catalogue size A (item ids are 0..A-1).
    """
    fn: Callable
    params: Any
    num_items: int

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"ItemFn.fn must be callable, got {self.fn!r}")
        validate.integer("ItemFn.num_items", self.num_items, low=1)


def lookup(table: jax.Array, rows: jax.Array, columns: jax.Array) -> jax.Array:
    """table[rows, columns] for broadcastable integer index arrays, as one gather from the
    flattened table when its size fits int32 (XLA's CPU gather is about twice as fast on flat
    indices as on index pairs). Indices must be in range."""
    num_rows, num_columns = table.shape
    if num_rows * num_columns < 2**31:
        return table.reshape(-1)[rows * num_columns + columns]
    return table[rows, columns]


def _table_lookup(values: jax.Array, contexts: jax.Array, items: jax.Array) -> jax.Array:
    return lookup(values, contexts[:, None], items)


def from_table(values) -> ItemFn:
    """An `ItemFn` reading a dense table: f(x, a) = values[x, a].  values: f32[X, A], finite."""
    arr = np.asarray(values)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"values must be a non-empty 2-D table [contexts, items], got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite (no NaN or inf)")
    return ItemFn(_table_lookup, jnp.asarray(arr, jnp.float32), int(arr.shape[1]))


def table_values(f: ItemFn):
    """The dense table behind `f` if it came from `from_table`, else None."""
    return f.params if f.fn is _table_lookup else None


def item_values(f: ItemFn, contexts: jax.Array, items: jax.Array) -> jax.Array:
    """f(x_n, a_nk) for contexts i32[N] and items i32[N, K].  Returns f32[N, K]."""
    return jnp.asarray(f.fn(f.params, contexts, items), jnp.float32)


def _catalogue(contexts: jax.Array, n: int) -> jax.Array:
    return jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (contexts.shape[0], n))


# --------------------------------------------------------------------------------------------
# Generators, rankers, policies
# --------------------------------------------------------------------------------------------

@functools.partial(jax.tree_util.register_dataclass, data_fields=["items"], meta_fields=["num_items"])
@dataclass(frozen=True)
class FixedCandidates:
    """Fixed candidate sets. items: i32[k], the same set for every context, or i32[X, k], the set
    of each context 0..X-1; distinct ids in [0, num_items) per set."""
    items: jax.Array
    num_items: int

    def __post_init__(self):
        validate.integer("FixedCandidates.num_items", self.num_items, low=1)
        if validate.is_concrete(self.items):
            arr = np.asarray(self.items)
            if arr.ndim not in (1, 2) or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"FixedCandidates.items must be a non-empty integer vector [k] or table "
                                 f"[contexts, k], got {arr.dtype}{list(arr.shape)}")
            rows = np.sort(arr.reshape(-1, arr.shape[-1]), axis=1)
            if arr.min() < 0 or arr.max() >= self.num_items or np.any(rows[:, 1:] == rows[:, :-1]):
                raise ValueError(f"FixedCandidates.items must be distinct ids in [0, {self.num_items}) "
                                 f"within each set")


def all_items(num_items: int) -> FixedCandidates:
    """Single-stage generation: every item of the catalogue is a candidate."""
    return FixedCandidates(jnp.arange(validate.integer("num_items", num_items, low=1), dtype=jnp.int32), num_items)


def top_k_candidates(retrieval: ItemFn, k: int, num_contexts: int, block_size: int = 1024) -> FixedCandidates:
    """The sets of `TopK(retrieval, k)` for contexts 0..num_contexts-1, computed once: a fixed
    two-stage generator G whose policies skip the per-call top-k over the catalogue (same sets,
    same order, hence the same rankings and exposures as `TopK`). Memory O(num_contexts * k)."""
    generator = TopK(retrieval, validate.integer("k", k, low=1))
    contexts = np.arange(validate.integer("num_contexts", num_contexts, low=1), dtype=np.int32)
    _check_table_rows(_tables_of(generator, None), contexts.shape[0], "contexts (num_contexts)")
    blocks = [_top_k_block(generator, jnp.asarray(contexts[s:s + block_size]))
              for s in range(0, contexts.shape[0], validate.integer("block_size", block_size, low=1))]
    return FixedCandidates(jnp.concatenate(blocks), retrieval.num_items)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["retrieval"], meta_fields=["k"])
@dataclass(frozen=True)
class TopK:
    """Candidates = the k items with the highest retrieval score (ties: lower id first)."""
    retrieval: ItemFn
    k: int

    def __post_init__(self):
        validate.integer("TopK.k", self.k, low=1)
        if isinstance(self.retrieval, ItemFn) and self.k > self.retrieval.num_items:
            raise ValueError(f"TopK.k = {self.k} exceeds the catalogue size {self.retrieval.num_items}")


@functools.partial(jax.tree_util.register_dataclass, data_fields=[], meta_fields=["num_items", "k"])
@dataclass(frozen=True)
class RandomSubset:
    """Candidates = a uniformly random k-subset of the catalogue, drawn anew for every session."""
    num_items: int
    k: int

    def __post_init__(self):
        validate.integer("RandomSubset.num_items", self.num_items, low=1)
        validate.integer("RandomSubset.k", self.k, low=1)
        if self.k > self.num_items:
            raise ValueError(f"RandomSubset.k = {self.k} exceeds num_items = {self.num_items}")


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Sort:
    """Deterministic ranker: descending score, ties broken by the lower item id."""
    scores: ItemFn


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class PlackettLuce:
    """Plackett–Luce ranker, P(σ) = prod_i w_{σ_i} / sum_{j >= i} w_{σ_j}, w = exp(score / T).

    temperature: f32[] > 0. Sampled as the top K of score / T + Gumbel noise (Yellott 1977).
    """
    scores: ItemFn
    temperature: jax.Array

    def __post_init__(self):
        if validate.is_concrete(self.temperature):
            validate.positive("PlackettLuce.temperature", self.temperature)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EpsilonGreedy:
    """With probability epsilon a uniformly random order of the candidates, else `base`.

    base: `Sort` or `PlackettLuce`. epsilon: f32[] in [0, 1].
    """
    base: Union[Sort, PlackettLuce]
    epsilon: jax.Array

    def __post_init__(self):
        if not isinstance(self.base, (Sort, PlackettLuce)):
            raise ValueError("EpsilonGreedy.base must be a Sort or PlackettLuce ranker")
        if validate.is_concrete(self.epsilon):
            validate.probability("EpsilonGreedy.epsilon", self.epsilon)


Generator = Union[FixedCandidates, TopK, RandomSubset]
Ranker = Union[Sort, PlackettLuce, EpsilonGreedy]


def _base_ranker(ranker: Ranker) -> Union[Sort, PlackettLuce]:
    return ranker.base if isinstance(ranker, EpsilonGreedy) else ranker


def _num_candidates(generator: Generator) -> int | None:
    """k, or None while a FixedCandidates' items are a JAX placeholder without a shape."""
    if isinstance(generator, FixedCandidates):
        shape = getattr(generator.items, "shape", None)
        return int(shape[-1]) if shape else None
    return generator.k


def _generator_items(generator: Generator) -> int:
    return generator.retrieval.num_items if isinstance(generator, TopK) else generator.num_items


def _tables_of(generator: Generator, ranker: Ranker | None) -> list[tuple[str, Any]]:
    """(argument name, array) of every lookup table indexed by context in a generator and a
    ranker: 2-D `FixedCandidates` items and the tables of `from_table` scores. JAX placeholders
    without a shape are left out."""
    found = []
    if isinstance(generator, FixedCandidates) and np.ndim(generator.items) == 2:
        found.append(("Policy.generator.items (candidates per context)", generator.items))
    if isinstance(generator, TopK) and isinstance(generator.retrieval, ItemFn):
        found.append(("Policy.generator.retrieval table", table_values(generator.retrieval)))
    if ranker is not None and isinstance(_base_ranker(ranker).scores, ItemFn):
        found.append(("Policy.ranker scores table", table_values(_base_ranker(ranker).scores)))
    return [(name, table) for name, table in found if validate.has_shape(table)]


def _check_table_rows(tables: list[tuple[str, Any]], n_contexts: int, what: str) -> None:
    for name, table in tables:
        validate.table_rows(name, table, n_contexts, what)


def table_contexts(policy: Policy) -> int | None:
    """The number of contexts X the policy's lookup tables cover (rows of its `from_table` scores
    and per-context candidate sets; `Policy` checks that they agree), or None when it has none
    (its functions then accept any context id; their range is the caller's responsibility)."""
    tables = _tables_of(policy.generator, policy.ranker)
    return int(tables[0][1].shape[0]) if tables else None


def check_contexts(policy: Policy, n_contexts: int, what: str = "contexts") -> None:
    """Raise ValueError unless every lookup table of `policy` has exactly `n_contexts` rows, one
    per context it will be asked about (`what` names them in the message). Called wherever a
    policy meets the contexts it ranks for (`context_tables`, `simulate`, `online_value`), so
    that no gather runs past a table's last row (JAX would silently clamp it)."""
    _check_table_rows(_tables_of(policy.generator, policy.ranker), n_contexts, what)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["generator", "ranker"],
                   meta_fields=["feed_length"])
@dataclass(frozen=True)
class Policy:
    """A two-stage ranking policy: candidates from `generator`, ordered by `ranker`, of which
    the first `feed_length` (K, static, <= number of candidates) are shown."""
    generator: Generator
    ranker: Ranker
    feed_length: int

    def __post_init__(self):
        validate.integer("Policy.feed_length", self.feed_length, low=1)
        if not isinstance(self.generator, (FixedCandidates, TopK, RandomSubset)):
            raise ValueError("Policy.generator must be FixedCandidates, TopK or RandomSubset")
        if not isinstance(self.ranker, (Sort, PlackettLuce, EpsilonGreedy)):
            raise ValueError("Policy.ranker must be Sort, PlackettLuce or EpsilonGreedy")
        k = _num_candidates(self.generator)
        if k is not None and self.feed_length > k:
            raise ValueError(f"Policy.feed_length = {self.feed_length} exceeds the number of "
                             f"candidates {_num_candidates(self.generator)}")
        scores = _base_ranker(self.ranker).scores
        if isinstance(scores, ItemFn) and scores.num_items != _generator_items(self.generator):
            raise ValueError(f"the ranker scores {scores.num_items} items but the generator's "
                             f"catalogue has {_generator_items(self.generator)}")
        tables = _tables_of(self.generator, self.ranker)
        if tables:
            first, table = tables[0]
            _check_table_rows(tables[1:], table.shape[0], f"contexts (the rows of {first})")


def num_items(policy: Policy) -> int:
    """Catalogue size A of a policy."""
    return _generator_items(policy.generator)


def is_exact(policy: Policy) -> bool:
    """Whether this policy's exposure has a closed form (ranker Sort or EpsilonGreedy(Sort)), as
    `exposure` and `online_value` compute it. A Plackett–Luce policy's exposure is exact in
    `exposure` when `race_nodes` accepts it, and a Monte Carlo estimate otherwise."""
    return isinstance(_base_ranker(policy.ranker), Sort)


def is_deterministic(policy: Policy) -> bool:
    """Whether the shown ranking is a function of the context alone."""
    return isinstance(policy.ranker, Sort) and not isinstance(policy.generator, RandomSubset)


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------

def _sort_permutation(scores: jax.Array, items: jax.Array) -> jax.Array:
    """Indices along axis 1 that order `items` by descending score, ties by ascending item id.
    i32[N, k]."""
    iota = jax.lax.broadcasted_iota(jnp.int32, items.shape, 1)
    return jax.lax.sort((-scores, items, iota), dimension=1, num_keys=2)[2]


def _inverse_permutation(perm: jax.Array) -> jax.Array:
    """position[n, perm[n, j]] = j.  i32[N, k]."""
    rows = jnp.arange(perm.shape[0])[:, None]
    iota = jax.lax.broadcasted_iota(jnp.int32, perm.shape, 1)
    return jnp.zeros(perm.shape, jnp.int32).at[rows, perm].set(iota)


def sample_candidates(key: jax.Array | None, generator: Generator, contexts: jax.Array) -> jax.Array:
    """Candidate sets for contexts i32[N].  Returns i32[N, k]. `key` may be None unless the
    generator is `RandomSubset`."""
    n = contexts.shape[0]
    if isinstance(generator, FixedCandidates):
        items = jnp.asarray(generator.items, jnp.int32)
        return items[contexts] if items.ndim == 2 else jnp.broadcast_to(items, (n, items.shape[0]))
    if isinstance(generator, TopK):
        scores = item_values(generator.retrieval, contexts, _catalogue(contexts, generator.retrieval.num_items))
        return jax.lax.top_k(scores, generator.k)[1].astype(jnp.int32)   # ties: lower index = id
    if isinstance(generator, RandomSubset):
        noise = jax.random.uniform(key, (n, generator.num_items))
        return jax.lax.top_k(noise, generator.k)[1].astype(jnp.int32)
    raise TypeError(f"unknown generator {type(generator).__name__}")


@jax.jit
def _top_k_block(generator: TopK, contexts: jax.Array) -> jax.Array:
    return sample_candidates(None, generator, contexts)


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


def _scaled_index(words: jax.Array, size: int) -> jax.Array:
    """floor(w · size / 2^32) for size < 2^16, without 64-bit integers: uniform on 0..size-1 up
    to a relative error below size / 2^32.  i32[...]."""
    high = (words >> 16) * jnp.uint32(size)
    low = ((words & 0xFFFF) * jnp.uint32(size)) >> 16
    return ((high + low) >> 16).astype(jnp.int32)


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


def _num_draws(feed_length: int, num_candidates: int) -> int | None:
    """Draws per session for sampling by first appearances (`_first_appearances`), or None when
    duplicates would be too frequent (then Gumbel-top-K is used): 1.5 K draws for feeds of up
    to 32 ranks from at least 4 K candidates; 48 draws, covering about the first 32 ranks, for
    longer feeds from at least 96 candidates, whose deeper sessions are then completed by
    Gumbel-top-K (`_complete_short`). The alias coin needs fewer than 2^16 candidates."""
    if num_candidates >= 2**16:
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
    words = random_words(k_draw, (_num_draws(feed_length, num_candidates), rows.shape[0]))
    if accept is None:
        draws = _scaled_index(words, num_candidates)
    else:
        coin_bits = 33 - accept.shape[1].bit_length()
        column = (words >> coin_bits).astype(jnp.int32)
        coin = words & jnp.uint32((1 << coin_bits) - 1)
        draws = jnp.where(coin < lookup(accept, rows[None, :], column), column, lookup(alias, rows[None, :], column))
    positions, count = _first_appearances(draws, feed_length)
    return _complete_short(k_rest, positions, count, need, logits_of, num_candidates)


def _rank_candidates(key, ranker: Ranker, contexts, candidates, feed_length: int,
                     tables: "ContextTables | None" = None, need=None, fixed=None) -> jax.Array:
    """The first `feed_length` of the ranked candidates (item ids).  i32[N, K].

    tables: `context_tables` of the policy (Sort order, alias tables). need: i32[N] or None
    (= K): only ranks 1..need[n] must be sampled; for rankers sampled by first appearances,
    later ranks may hold -1. fixed: i32[k], the candidates when they are the same for every
    context (positions then map to ids by a 1-D gather).
    """
    n, k = candidates.shape
    num_draws = _num_draws(feed_length, k)
    # by first appearances when the draws usually give every needed rank (else Gumbel-top-K)
    draws = key is not None and num_draws is not None and (need is not None or num_draws >= feed_length)
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
        perm = _sort_permutation(item_values(ranker.scores, contexts, candidates), candidates)
        return jnp.take_along_axis(candidates, perm[:, :feed_length], axis=1)
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
        if draws:
            positions = _draw_ranking(k_uniform, None, None, contexts, k, feed_length, need,
                                      lambda rows: jnp.zeros((rows.shape[0], k)))
            uniform = to_items(positions)
        else:
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
    base = _base_ranker(policy.ranker)
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
    base = _base_ranker(policy.ranker)
    k = _num_candidates(policy.generator)
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
    fixed = None                                     # one candidate set for every context
    if isinstance(policy.generator, FixedCandidates) and jnp.ndim(policy.generator.items) == 1:
        fixed = jnp.asarray(policy.generator.items, jnp.int32)
    return _rank_candidates(k_rank, policy.ranker, contexts, candidates, policy.feed_length, tables, depth, fixed)


# --------------------------------------------------------------------------------------------
# Exposure
# --------------------------------------------------------------------------------------------

class Exposure(NamedTuple):
    """Exposure table ε(x, a) for a block of contexts: mean f32[B, A] and its Monte Carlo
    standard error f32[B, A] (zeros where the exposure is exact)."""
    mean: jax.Array
    standard_error: jax.Array


def _padded(survival: jax.Array, length: int) -> jax.Array:
    return jnp.concatenate([survival, jnp.zeros(length - survival.shape[0], survival.dtype)])


def _sort_exposure(ranker_scores, survival, contexts, candidates) -> jax.Array:
    """Exact exposure of each candidate under `Sort`: S(position + 1).  f32[N, k]."""
    perm = _sort_permutation(item_values(ranker_scores, contexts, candidates), candidates)
    return _padded(survival, candidates.shape[1])[_inverse_permutation(perm)]


def _plackett_luce_sample(key, ranker: PlackettLuce, survival, contexts, candidates) -> jax.Array:
    """One PL-Rank sample of each candidate's exposure (module docstring).  f32[N, k].

    Computed from logit *differences* only, so that logits of any magnitude keep full float32
    precision: with σ the sampled top K, r_i = log(Z_i / w_{σ_i}) and
    D_p = log sum_{i<=p} exp(t_i - t_p), t_i = log S(i) - log Z_i, the recurrences

        r_K = log(1 + sum_{b not in σ} w_b / w_{σ_K}),  r_i = softplus(r_{i+1} + l_{σ_{i+1}} - l_{σ_i}),
        D_1 = 0,  D_p = softplus(D_{p-1} + t_{p-1} - t_p),

    give log ε̂(σ_p) = log S(p) - r_p + D_p and log ε̂(a) = l_a - l_{σ_K} + log S(K) - r_K + D_K
    for a outside the top K. S(i) = 0 is floored at 1e-30 (a change below 1e-29 per item).
    """
    n, k = candidates.shape
    K = survival.shape[0]
    logits = item_values(ranker.scores, contexts, candidates) / ranker.temperature          # [N, k]
    top = jax.lax.top_k(logits + jax.random.gumbel(key, (n, k)), K)[1]                    # [N, K]
    rows = jnp.arange(n)[:, None]
    in_top = jnp.zeros((n, k), bool).at[rows, top].set(True)
    top_logits = jnp.take_along_axis(logits, top, axis=1)                                 # [N, K]
    last = top_logits[:, -1]
    log_rest = jax.nn.logsumexp(jnp.where(in_top, -jnp.inf, logits - last[:, None]), axis=1)
    gaps = top_logits[:, 1:] - top_logits[:, :-1]                      # l_{σ_{i+1}} - l_{σ_i}

    def ratio_step(r_next, gap):
        r = jnp.logaddexp(0.0, r_next + gap)
        return r, r

    r_last = jnp.logaddexp(0.0, log_rest)
    _, r_head = jax.lax.scan(ratio_step, r_last, gaps.T, reverse=True)
    r = jnp.concatenate([r_head.T, r_last[:, None]], axis=1)                             # [N, K]
    log_s = jnp.log(jnp.maximum(survival, 1e-30))
    step_t = (log_s[:-1] - log_s[1:])[None, :] - r[:, :-1] + r[:, 1:] + gaps            # t_{p-1} - t_p

    def prefix_step(d_prev, delta):
        d = jnp.logaddexp(0.0, d_prev + delta)
        return d, d

    _, d_tail = jax.lax.scan(prefix_step, jnp.zeros(n), step_t.T)
    d = jnp.concatenate([jnp.zeros((n, 1)), d_tail.T], axis=1)                           # [N, K]
    log_top = log_s[None, :] - r + d                                                     # [N, K]
    log_other = logits - last[:, None] + (log_s[-1] - r[:, -1] + d[:, -1])[:, None]      # [N, k]
    log_exposure = jnp.where(in_top, 0.0, log_other).at[rows, top].set(log_top)
    return jnp.exp(log_exposure)


def _ranker_exposure_sample(key, ranker: Ranker, survival, contexts, candidates) -> jax.Array:
    """Unbiased (exact for Sort) exposure of each candidate given the candidate set.  f32[N, k]."""
    if isinstance(ranker, Sort):
        return _sort_exposure(ranker.scores, survival, contexts, candidates)
    if isinstance(ranker, PlackettLuce):
        return _plackett_luce_sample(key, ranker, survival, contexts, candidates)
    base = _ranker_exposure_sample(key, ranker.base, survival, contexts, candidates)
    uniform = jnp.sum(survival) / candidates.shape[1]         # each of k candidates: sum_i S(i) / k
    return (1.0 - ranker.epsilon) * base + ranker.epsilon * uniform


# Trapezoid rule of the exponential race in log time s = log t: nodes from s_lo = -log(sum w) -
# log(1e8) (the race's first 1e-8 of a unit of expected time) to s_hi = log(40) - log w_(K+1) (the
# (K+1)-th largest weight has arrived but for e^-40), at most _RACE_STEP / sqrt(K + 1) apart: the
# law of the number of arrivals by time t, whose first K terms the integrand holds, narrows like
# 1/sqrt(j) in log time. Rankers whose (K+1)-th largest logit lies more than _RACE_MAX_SPAN below
# the largest, or whose race costs more than _RACE_MAX_WORK = k * K per node, are left to Monte Carlo.
_RACE_LOWER, _RACE_UPPER = math.log(1e8), math.log(40.0)
_RACE_STEP, _RACE_MAX_SPAN, _RACE_MAX_WORK = 1.1, 60.0, 4096


def _race_exposure(logits: jax.Array, survival: jax.Array, num_nodes: int) -> jax.Array:
    """Exact Plackett–Luce exposure of each candidate, by the exponential race.  f32[N, k].

    With w = exp(logits), PL orders the candidates by independent arrival times T_b ~ Exp(w_b)
    (Luce 1959; Yellott 1977), so with p_b(t) = 1 - exp(-w_b t)

        ε(a) = ∫_0^∞ w_a e^{-w_a t} Σ_{j<K} S(j+1) P(j other candidates arrive before t) dt,

    a Poisson-binomial law. For every candidate a it is the truncated product of the candidates
    before a (forward scan) against Σ_m S(j+m+1) P(m of those after a arrive) (backward scan,
    V_b(j) = (1 - p_b) V_{b+1}(j) + p_b V_{b+1}(j+1), V = S past the last), both recursions of
    convex combinations, so O(k K) per node and no cancellation. The integral is a trapezoid rule
    in s = log t over `num_nodes` nodes (see _RACE_STEP), whose error falls exponentially in
    1/step (the integrand is smooth and decays fast at both ends): with the nodes of `race_nodes`
    it agrees with enumeration on small rankings and with a 600-node rule for k = 100, K = 10..30
    and k = K = 64 to float32 rounding (relative 3e-6 at most; tests). logits: f32[N, k], finite.
    survival: f32[K].
    """
    n, k = logits.shape
    K = survival.shape[0]
    logits = logits - jnp.max(logits, axis=1, keepdims=True)
    low = -jax.nn.logsumexp(logits, axis=1) - _RACE_LOWER
    high = _RACE_UPPER - jax.lax.top_k(logits, min(K + 1, k))[0][:, -1]
    step = (high - low) / (num_nodes - 1)
    log_time = low[:, None] + step[:, None] * jnp.arange(num_nodes)                       # [N, Q]
    log_rate = jnp.moveaxis(logits[:, :, None] + log_time[:, None, :], 1, 0)              # [k, N, Q]: log w_b t
    rate = jnp.exp(log_rate)
    stay, arrive = jnp.exp(-rate), -jnp.expm1(-rate)

    def forward(before, pair):          # before: P(j of the earlier candidates arrived) [N, K, Q]
        p, q = pair
        later = jnp.concatenate([jnp.zeros_like(before[:, :1]), before[:, :-1]], axis=1)
        return q[:, None] * before + p[:, None] * later, before

    start = jnp.zeros((n, K, num_nodes), jnp.float32).at[:, 0].set(1.0)
    _, before = jax.lax.scan(forward, start, (arrive, stay))                              # [k, N, K, Q]

    def backward(after, inputs):          # after: V(j) over the later candidates [N, K, Q]
        p, q, prefix = inputs
        value = jnp.sum(prefix * after, axis=1)
        sooner = jnp.concatenate([after[:, 1:], jnp.zeros_like(after[:, :1])], axis=1)
        return q[:, None] * after + p[:, None] * sooner, value

    end = jnp.broadcast_to(survival.astype(jnp.float32)[:, None], (n, K, num_nodes))
    _, value = jax.lax.scan(backward, end, (arrive, stay, before), reverse=True)          # [k, N, Q]
    density = jnp.exp(log_rate - rate)                                                    # t w_a e^{-w_a t}
    return jnp.moveaxis(jnp.sum(density * value, axis=-1), 0, 1) * step[:, None]


def _race_nodes(span: float, num_candidates: int, feed_length: int) -> int | None:
    """Nodes of the race's trapezoid rule (steps of at most _RACE_STEP / sqrt(K + 1) over the
    widest context, whose log(sum w) is at most log k; a multiple of 16, so that few shapes
    compile), given the largest span between a context's largest and (K+1)-th largest logit;
    None when that span exceeds _RACE_MAX_SPAN."""
    if not span <= _RACE_MAX_SPAN:
        return None
    width = _RACE_LOWER + _RACE_UPPER + math.log(num_candidates) + span
    return 16 * math.ceil((width * math.sqrt(feed_length + 1) / _RACE_STEP + 1) / 16)


@jax.jit
def _candidate_logits(policy: Policy, contexts):
    """Candidates i32[B, k] of a deterministic generator and their PL logits f32[B, k]."""
    candidates = sample_candidates(None, policy.generator, contexts)
    base = _base_ranker(policy.ranker)
    return candidates, item_values(base.scores, contexts, candidates) / base.temperature


@functools.partial(jax.jit, static_argnames=("rank",))
def _logit_span(policy: Policy, contexts, rank: int) -> jax.Array:
    """Largest logit minus the rank-th largest, maximised over the contexts.  f32[]."""
    top = jax.lax.top_k(_candidate_logits(policy, contexts)[1], rank)[0]
    return jnp.max(top[:, 0] - top[:, -1])


def race_nodes(policy: Policy, contexts, block_size: int = 1024) -> int | None:
    """The number of trapezoid nodes with which `exposure` computes a Plackett–Luce policy's
    exposure exactly for `contexts` (the exponential race of `_race_exposure`), or None when it
    uses Monte Carlo instead: for rankers other than PlackettLuce and EpsilonGreedy(PlackettLuce),
    a RandomSubset generator, k · K above _RACE_MAX_WORK (4096), or a context whose largest
    logit (score / T) lies more than _RACE_MAX_SPAN (60) above its (K+1)-th largest."""
    if not isinstance(_base_ranker(policy.ranker), PlackettLuce) or isinstance(policy.generator, RandomSubset):
        return None
    k, K = _num_candidates(policy.generator), policy.feed_length
    if k * K > _RACE_MAX_WORK:
        return None
    contexts = np.asarray(contexts)
    span = max(float(_logit_span(policy, jnp.asarray(contexts[s:s + block_size], jnp.int32), min(K + 1, k)))
               for s in range(0, contexts.shape[0], block_size))
    return _race_nodes(span, k, K)


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def _race_block(policy: Policy, survival, contexts, num_nodes: int) -> jax.Array:
    """Exact exposure table f32[B, A] of a PL (or ε-greedy PL) policy on a deterministic generator.
    Computed whole on one device: split over devices, its quadrature sums rounded differently in
    the last bit."""
    candidates, logits = _candidate_logits(policy, contexts)
    values = _race_exposure(logits, survival, num_nodes)
    if isinstance(policy.ranker, EpsilonGreedy):
        values = (1.0 - policy.ranker.epsilon) * values + policy.ranker.epsilon * jnp.sum(survival) / logits.shape[1]
    return _scatter(values, candidates, num_items(policy))


def _scatter(values: jax.Array, candidates: jax.Array, num: int) -> jax.Array:
    rows = jnp.arange(candidates.shape[0])[:, None]
    return jnp.zeros((candidates.shape[0], num), jnp.float32).at[rows, candidates].set(values)


def _random_subset_weights(num: int, k: int, survival: np.ndarray) -> np.ndarray:
    """g[r] = (k/A) sum_{j=0}^{K-1} Hyp(j; A-1, r, k-1) S(j+1) for r = 0..A-1, in float64.

    An item with r catalogue items ranked above it lands in a uniform k-subset with probability
    k/A, and then sits at 0-based position j where j ~ Hypergeometric(population A-1, r
    successes, k-1 draws) counts the subset members above it.
    """
    r = np.arange(num)
    weights = np.zeros(num)
    for j, s in enumerate(np.asarray(survival, np.float64)):
        if s > 0:
            weights += s * scipy.stats.hypergeom.pmf(j, num - 1, r, k - 1)
    return (k / num) * weights


def exact_exposure(policy: Policy, survival, weights, contexts) -> jax.Array:
    """Closed-form exposure table for `is_exact` policies.  Returns f32[B, A].

    Sort on fixed or top-k candidates: S(position + 1). RandomSubset + Sort: g[rank of a in the
    catalogue] with g = `weights` from `subset_weights`. EpsilonGreedy mixes in sum_i S(i) / k per candidate.
    """
    n_items = num_items(policy)
    ranker = policy.ranker
    epsilon = ranker.epsilon if isinstance(ranker, EpsilonGreedy) else 0.0
    scores = _base_ranker(ranker).scores
    if isinstance(policy.generator, RandomSubset):
        catalogue = _catalogue(contexts, n_items)
        rank = _inverse_permutation(_sort_permutation(item_values(scores, contexts, catalogue), catalogue))
        return (1.0 - epsilon) * weights[rank] + epsilon * jnp.sum(survival) / n_items
    candidates = sample_candidates(None, policy.generator, contexts)
    values = _ranker_exposure_sample(None, ranker, survival, contexts, candidates)
    return _scatter(values, candidates, n_items)


def monte_carlo(key: jax.Array, sample, num_samples: int):
    """Welford mean and standard error of ``sample(fold_in(key, r))`` over r < num_samples.

    sample: a jit-able function of a key returning f32[...]. Returns (mean, standard_error), each
    f32[...]; the standard error is sqrt(sample variance / num_samples), 0 for one sample.
    """
    def step(carry, index):
        mean, m2 = carry
        x = sample(jax.random.fold_in(key, index))
        delta = x - mean
        mean = mean + delta / (index + 1)
        return (mean, m2 + delta * (x - mean)), None

    zeros = jnp.zeros(jax.eval_shape(sample, key).shape, jnp.float32)
    (mean, m2), _ = jax.lax.scan(step, (zeros, zeros), jnp.arange(num_samples))
    return mean, jnp.sqrt(jnp.maximum(m2, 0.0) / max(num_samples - 1, 1) / num_samples)


def exposure_sample(key: jax.Array, policy: Policy, survival: jax.Array, contexts: jax.Array) -> jax.Array:
    """One unbiased sample of the exposure table, seeded per context by fold_in(key, context)
    (exact for Sort rankers given the candidate set).  Returns f32[B, A]."""
    def one(context):
        k_gen, k_rank = jax.random.split(jax.random.fold_in(key, context))
        candidates = sample_candidates(k_gen, policy.generator, context[None])
        values = _ranker_exposure_sample(k_rank, policy.ranker, survival, context[None], candidates)
        return _scatter(values, candidates, num_items(policy))[0]

    return jax.vmap(one)(contexts)


@functools.partial(jax.jit, static_argnames=("num_samples",))
def _monte_carlo_block(key, policy: Policy, survival, contexts, num_samples: int):
    contexts = sharding.batch(contexts)
    return sharding.collect(monte_carlo(key, lambda k: exposure_sample(k, policy, survival, contexts),
                                        num_samples))


def subset_weights(policy: Policy, survival) -> jax.Array:
    """The hypergeometric weights `exact_exposure` needs for a RandomSubset generator (computed
    on the host in float64), else a placeholder f32[1]."""
    if not isinstance(policy.generator, RandomSubset):
        return jnp.zeros(1, jnp.float32)
    return jnp.asarray(_random_subset_weights(num_items(policy), policy.generator.k,
                                              np.asarray(survival)), jnp.float32)


def exposure(key: jax.Array | None, policy: Policy, view: ViewModel, contexts, *,
             num_samples: int = 1000, block_size: int = 1024) -> Exposure:
    """Exposure ε(x, a) = sum_i P(a at rank i | x) S(i) of every catalogue item (KDD'24 Eq. 6).

    contexts: i32[B]. Returns `Exposure` with mean and standard_error f32[B, A]. Exact, with
    standard error 0 and `key` unused (it may be None):
    * in closed form when `is_exact(policy)` (Sort and EpsilonGreedy(Sort) rankers);
    * by the exponential race (`_race_exposure`, a deterministic quadrature accurate to float32
      rounding) for PlackettLuce and EpsilonGreedy(PlackettLuce) rankers on a deterministic
      generator whenever `race_nodes` accepts the policy (k · K <= 4096 and no context's
      largest logit more than 60 above its (K+1)-th largest).
    Otherwise the mean of num_samples PL-Rank samples seeded by fold_in(key, sample) and the
    context id, so a context's value does not depend on the block it is computed in, with its
    Monte Carlo standard error. A block's contexts are split over the devices (`simrec.sharding`)
    without changing any value. Memory: O(block_size * A).
    """
    validate.integer("block_size", block_size, low=1)
    contexts = np.asarray(contexts)
    if contexts.ndim != 1 or not np.issubdtype(contexts.dtype, np.integer):
        raise ValueError(f"contexts must be an integer vector [B], got {contexts.dtype}{list(contexts.shape)}")
    covered = table_contexts(policy)
    if covered is not None:
        validate.indices("contexts", contexts, covered, "contexts the policy's tables cover")
    exact = is_exact(policy)
    nodes = None if exact or contexts.shape[0] == 0 else race_nodes(policy, contexts, block_size)
    if not exact and nodes is None:
        validate.integer("num_samples", num_samples, low=2)
        if key is None:
            raise ValueError("the exposure of this stochastic ranker is a Monte Carlo estimate: pass a PRNG key")
    survival = view_probability(view, policy.feed_length)
    weights = subset_weights(policy, survival) if exact else None
    if nodes is not None:        # the race holds [k, block, nodes, K] floats: at most 2^21 (cache-sized)
        race_floats = _num_candidates(policy.generator) * nodes * policy.feed_length
        block_size = min(block_size, max(1, 2**21 // race_floats))
    means, errors = [], []
    for start in range(0, contexts.shape[0], block_size):
        block = jnp.asarray(contexts[start:start + block_size], jnp.int32)
        if exact:
            mean, se = _exact_block(policy, survival, weights, block), None
        elif nodes is not None:
            mean, se = _race_block(policy, survival, block, nodes), None
        else:
            mean, se = _monte_carlo_block(key, policy, survival, block, num_samples)
        means.append(mean)
        errors.append(jnp.zeros_like(mean) if se is None else se)
    means, errors = sharding.gather((means, errors))
    if len(means) == 1:
        return Exposure(means[0], errors[0])
    return Exposure(jnp.concatenate(means), jnp.concatenate(errors))


@jax.jit
def _exact_block(policy: Policy, survival, weights, contexts):
    return sharding.collect(exact_exposure(policy, survival, weights, sharding.batch(contexts)))


@jax.jit
def exposure_of(table: jax.Array, contexts: jax.Array, items: jax.Array) -> jax.Array:
    """Gather ε(x_n, a_nk) from an exposure table f32[X, A] for contexts i32[N] and items
    i32[N, K]; padded ids (-1) read 0.  Returns f32[N, K]."""
    safe = jnp.where(items >= 0, items, 0)
    return jnp.where(items >= 0, lookup(table, contexts[:, None], safe), 0.0)

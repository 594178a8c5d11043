"""Ranking policies (candidate generator + ranker) and the functions of (context, item) pairs they use.

A policy for context x draws a candidate set a^k ~ G(x), orders it with a ranker R and shows the
first K = ``feed_length`` items (Jeunen, Potapov & Ustimenko, KDD'24 §3, two-stage notation; a
single-stage policy uses the whole catalogue as its candidate set). This module holds the
policies as pytrees and what they are built from; drawing their rankings is
`simrec.feed.sampling`, the exposure they give each item `simrec.feed.exposure`.

Generators: `FixedCandidates` (the same set for every context, `all_items` = single stage, or
one fixed set per context, e.g. `top_k_candidates` = a `TopK` retrieval computed once), `TopK`
(top-k by a retrieval score), `RandomSubset` (a uniform random k-subset); `sample_candidates`
gives a generator's candidate sets.
Rankers: `Sort` (deterministic, descending score, ties broken by lower item id), `PlackettLuce`
(temperature T, sampled by Gumbel-top-K: Yellott 1977), `EpsilonGreedy` (with probability ε a
uniformly random order of the candidates, else its base ranker).

Scores and qualities are `ItemFn` values: ``fn(params, contexts i32[N], items i32[N, K]) ->
f32[N, K]`` with array ``params`` (a pytree, traced under jit) and a static ``fn``; `from_table`
wraps a dense f32[X, A] table. Item ids are int32 everywhere.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate

__all__ = [
    "ItemFn", "from_table", "table_values", "item_values", "lookup", "catalogue_items", "FixedCandidates",
    "all_items", "top_k_candidates", "TopK", "RandomSubset", "Sort", "PlackettLuce", "EpsilonGreedy", "Generator",
    "Ranker", "Policy", "base_ranker", "candidate_count", "num_items", "is_exact", "is_deterministic",
    "table_contexts", "check_contexts", "sample_candidates",
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


def catalogue_items(contexts: jax.Array, n: int) -> jax.Array:
    """Every item id 0..n-1 for each of contexts i32[N] (single-stage candidates).  i32[N, n]."""
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


def base_ranker(ranker: Ranker) -> Union[Sort, PlackettLuce]:
    """The ranker an `EpsilonGreedy` explores around (the ranker itself otherwise)."""
    return ranker.base if isinstance(ranker, EpsilonGreedy) else ranker


def candidate_count(generator: Generator) -> int | None:
    """The number k of candidates a generator gives each context, or None while a
    FixedCandidates' items are a JAX placeholder without a shape."""
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
    if ranker is not None and isinstance(base_ranker(ranker).scores, ItemFn):
        found.append(("Policy.ranker scores table", table_values(base_ranker(ranker).scores)))
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
        k = candidate_count(self.generator)
        if k is not None and self.feed_length > k:
            raise ValueError(f"Policy.feed_length = {self.feed_length} exceeds the number of "
                             f"candidates {candidate_count(self.generator)}")
        scores = base_ranker(self.ranker).scores
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
    return isinstance(base_ranker(policy.ranker), Sort)


def is_deterministic(policy: Policy) -> bool:
    """Whether the shown ranking is a function of the context alone."""
    return isinstance(policy.ranker, Sort) and not isinstance(policy.generator, RandomSubset)


# --------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------

def sample_candidates(key: jax.Array | None, generator: Generator, contexts: jax.Array) -> jax.Array:
    """Candidate sets for contexts i32[N].  Returns i32[N, k]. `key` may be None unless the
    generator is `RandomSubset`."""
    n = contexts.shape[0]
    if isinstance(generator, FixedCandidates):
        items = jnp.asarray(generator.items, jnp.int32)
        return items[contexts] if items.ndim == 2 else jnp.broadcast_to(items, (n, items.shape[0]))
    if isinstance(generator, TopK):
        scores = item_values(generator.retrieval, contexts, catalogue_items(contexts, generator.retrieval.num_items))
        return jax.lax.top_k(scores, generator.k)[1].astype(jnp.int32)   # ties: lower index = id
    if isinstance(generator, RandomSubset):
        noise = jax.random.uniform(key, (n, generator.num_items))
        return jax.lax.top_k(noise, generator.k)[1].astype(jnp.int32)
    raise TypeError(f"unknown generator {type(generator).__name__}")


@jax.jit
def _top_k_block(generator: TopK, contexts: jax.Array) -> jax.Array:
    return sample_candidates(None, generator, contexts)

"""Ranking policies (candidate generator + ranker) and the exposure they give each item.

A policy for context x draws a candidate set a^k ~ G(x), orders it with a ranker R and shows the
first K = ``feed_length`` items (Jeunen, Potapov & Ustimenko, KDD'24 §3, two-stage notation; a
single-stage policy uses the whole catalogue as its candidate set). Its *exposure* of item a is
the expected number of views a gets under view model S(i) = P(V=1 | R=i) (KDD'24 Eq. 6):

    ε(x, a) = sum_{i=1}^{K} P(a at rank i | x) · S(i).

Generators: `FixedCandidates` (the same set for every context; `all_items` = single stage),
`TopK` (top-k by a retrieval score), `RandomSubset` (a uniform random k-subset).
Rankers: `Sort` (deterministic, descending score, ties broken by lower item id), `PlackettLuce`
(temperature T, sampled by Gumbel-top-K: Yellott 1977), `EpsilonGreedy` (with probability ε a
uniformly random order of the candidates, else its base ranker).

`exposure` is exact when the ranker is `Sort` or `EpsilonGreedy(Sort)` (closed forms below,
including a hypergeometric formula for `RandomSubset`) and otherwise a seeded Monte Carlo mean
with its standard error. The Monte Carlo per-sample value for Plackett–Luce is the conditional
placement probability of Oosterhuis (SIGIR'21, PL-Rank): given a sampled ranking σ,

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
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from simrec.feed._validate import check_int, check_scalar, is_value
from simrec.feed.views import ViewModel, view_probability

__all__ = [
    "ItemFn", "from_table", "evaluate", "FixedCandidates", "all_items", "TopK", "RandomSubset",
    "Sort", "PlackettLuce", "EpsilonGreedy", "Policy", "Exposure", "num_items", "is_exact",
    "is_deterministic", "sample_candidates", "sample_ranking", "exposure", "exposure_of",
    "exposure_sample", "exact_exposure", "subset_weights", "monte_carlo", "ContextTables", "context_tables",
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
        check_int("ItemFn.num_items", self.num_items)


def _table_lookup(values: jax.Array, contexts: jax.Array, items: jax.Array) -> jax.Array:
    return values[contexts[:, None], items]


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


def evaluate(f: ItemFn, contexts: jax.Array, items: jax.Array) -> jax.Array:
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
    """The same candidate set for every context.  items: i32[k] distinct ids in [0, num_items)."""
    items: jax.Array
    num_items: int

    def __post_init__(self):
        check_int("FixedCandidates.num_items", self.num_items)
        if is_value(self.items):
            arr = np.asarray(self.items)
            if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"FixedCandidates.items must be a non-empty integer vector, got "
                                 f"{arr.dtype}{list(arr.shape)}")
            if arr.min() < 0 or arr.max() >= self.num_items or np.unique(arr).size != arr.size:
                raise ValueError(f"FixedCandidates.items must be distinct ids in [0, {self.num_items})")


def all_items(num_items: int) -> FixedCandidates:
    """Single-stage generation: every item of the catalogue is a candidate."""
    return FixedCandidates(jnp.arange(check_int("num_items", num_items), dtype=jnp.int32), num_items)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["retrieval"], meta_fields=["k"])
@dataclass(frozen=True)
class TopK:
    """Candidates = the k items with the highest retrieval score (ties: lower id first)."""
    retrieval: ItemFn
    k: int

    def __post_init__(self):
        check_int("TopK.k", self.k)
        if isinstance(self.retrieval, ItemFn) and self.k > self.retrieval.num_items:
            raise ValueError(f"TopK.k = {self.k} exceeds the catalogue size {self.retrieval.num_items}")


@functools.partial(jax.tree_util.register_dataclass, data_fields=[], meta_fields=["num_items", "k"])
@dataclass(frozen=True)
class RandomSubset:
    """Candidates = a uniformly random k-subset of the catalogue, drawn anew for every session."""
    num_items: int
    k: int

    def __post_init__(self):
        check_int("RandomSubset.num_items", self.num_items)
        check_int("RandomSubset.k", self.k)
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
        check_scalar("PlackettLuce.temperature", self.temperature, low=0.0, low_open=True,
                     high_open=True)


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
        check_scalar("EpsilonGreedy.epsilon", self.epsilon, low=0.0, high=1.0)


Generator = Union[FixedCandidates, TopK, RandomSubset]
Ranker = Union[Sort, PlackettLuce, EpsilonGreedy]


def _base_ranker(ranker: Ranker) -> Union[Sort, PlackettLuce]:
    return ranker.base if isinstance(ranker, EpsilonGreedy) else ranker


def _num_candidates(generator: Generator) -> int | None:
    """k, or None while a FixedCandidates' items are a JAX placeholder without a shape."""
    if isinstance(generator, FixedCandidates):
        shape = getattr(generator.items, "shape", None)
        return int(shape[0]) if shape else None
    return generator.k


def _generator_items(generator: Generator) -> int:
    return generator.retrieval.num_items if isinstance(generator, TopK) else generator.num_items


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
        check_int("Policy.feed_length", self.feed_length)
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


def num_items(policy: Policy) -> int:
    """Catalogue size A of a policy."""
    return _generator_items(policy.generator)


def is_exact(policy: Policy) -> bool:
    """Whether `exposure` computes this policy's exposure in closed form (ranker Sort or
    EpsilonGreedy(Sort)); otherwise it is a Monte Carlo estimate."""
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
        return jnp.broadcast_to(items, (n, items.shape[0]))
    if isinstance(generator, TopK):
        scores = evaluate(generator.retrieval, contexts, _catalogue(contexts, generator.retrieval.num_items))
        return jax.lax.top_k(scores, generator.k)[1].astype(jnp.int32)   # ties: lower index = id
    if isinstance(generator, RandomSubset):
        noise = jax.random.uniform(key, (n, generator.num_items))
        return jax.lax.top_k(noise, generator.k)[1].astype(jnp.int32)
    raise TypeError(f"unknown generator {type(generator).__name__}")


def _rank_candidates(key, ranker: Ranker, contexts, candidates, feed_length: int, sorted_top=None) -> jax.Array:
    """The first `feed_length` of the ranked candidates.  i32[N, K]. `sorted_top` (optional):
    the candidates' top K under the `Sort` base ranker, precomputed by `context_tables`."""
    if isinstance(ranker, Sort):
        if sorted_top is not None:
            return sorted_top
        perm = _sort_permutation(evaluate(ranker.scores, contexts, candidates), candidates)
        return jnp.take_along_axis(candidates, perm[:, :feed_length], axis=1)
    if isinstance(ranker, PlackettLuce):
        logits = evaluate(ranker.scores, contexts, candidates) / ranker.temperature
        perturbed = logits + jax.random.gumbel(key, candidates.shape)
        return jnp.take_along_axis(candidates, jax.lax.top_k(perturbed, feed_length)[1], axis=1)
    if isinstance(ranker, EpsilonGreedy):
        k_coin, k_uniform, k_base = jax.random.split(key, 3)
        explore = jax.random.uniform(k_coin, contexts.shape) < ranker.epsilon
        shuffle = jax.lax.top_k(jax.random.uniform(k_uniform, candidates.shape), feed_length)[1]
        uniform = jnp.take_along_axis(candidates, shuffle, axis=1)
        base = _rank_candidates(k_base, ranker.base, contexts, candidates, feed_length, sorted_top)
        return jnp.where(explore[:, None], uniform, base)
    raise TypeError(f"unknown ranker {type(ranker).__name__}")


class ContextTables(NamedTuple):
    """Per-context parts of a policy's ranking that do not depend on chance: candidates i32[X, k]
    (None for FixedCandidates, which are the same everywhere) and the top K of their Sort
    order i32[X, K]. See `context_tables`."""
    candidates: jax.Array | None
    sorted_top: jax.Array


@jax.jit
def _tables_block(policy: Policy, contexts):
    candidates = sample_candidates(None, policy.generator, contexts)
    sort = _base_ranker(policy.ranker)
    return candidates, _rank_candidates(None, sort, contexts, candidates, policy.feed_length)


def context_tables(policy: Policy, num_contexts: int, block_size: int = 1024) -> ContextTables | None:
    """Precompute, for contexts 0..num_contexts-1, the candidates and Sort order of a policy whose
    generator is deterministic (FixedCandidates, TopK) and whose base ranker is `Sort`, so that
    sampling a session only draws the exploration; None for other policies. Memory O(X (k + K))."""
    if isinstance(policy.generator, RandomSubset) or not is_exact(policy):
        return None
    contexts = np.arange(check_int("num_contexts", num_contexts), dtype=np.int32)
    blocks = [_tables_block(policy, jnp.asarray(contexts[s:s + block_size]))
              for s in range(0, contexts.shape[0], block_size)]
    keep = isinstance(policy.generator, TopK) and isinstance(policy.ranker, EpsilonGreedy)
    return ContextTables(jnp.concatenate([b[0] for b in blocks]) if keep else None,
                         jnp.concatenate([b[1] for b in blocks]))


def sample_ranking(key: jax.Array | None, policy: Policy, contexts: jax.Array,
                   tables: ContextTables | None = None) -> jax.Array:
    """The shown items in rank order for contexts i32[N].  Returns i32[N, K].

    `key` may be None for deterministic policies (`is_deterministic`). tables: the policy's
    `context_tables`, to skip recomputing the deterministic parts."""
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
    sorted_top = tables.sorted_top[contexts] if tables is not None else None
    return _rank_candidates(k_rank, policy.ranker, contexts, candidates, policy.feed_length, sorted_top)


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
    perm = _sort_permutation(evaluate(ranker_scores, contexts, candidates), candidates)
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
    logits = evaluate(ranker.scores, contexts, candidates) / ranker.temperature          # [N, k]
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
        rank = _inverse_permutation(_sort_permutation(evaluate(scores, contexts, catalogue), catalogue))
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
    return monte_carlo(key, lambda k: exposure_sample(k, policy, survival, contexts), num_samples)


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

    contexts: i32[B]. Returns `Exposure` with mean and standard_error f32[B, A]. Exact (standard
    error 0, `key` unused and may be None) when `is_exact(policy)`; otherwise the mean of
    num_samples PL-Rank samples seeded by fold_in(key, sample) and the context id, so a
    context's value does not depend on the block it is computed in. Memory: O(block_size * A).
    """
    exact = is_exact(policy)
    if not exact:
        check_int("num_samples", num_samples, low=2)
        if key is None:
            raise ValueError("the exposure of a stochastic ranker is a Monte Carlo estimate: pass a PRNG key")
    check_int("block_size", block_size)
    contexts = np.asarray(contexts)
    if contexts.ndim != 1 or not np.issubdtype(contexts.dtype, np.integer):
        raise ValueError(f"contexts must be an integer vector [B], got {contexts.dtype}{list(contexts.shape)}")
    survival = view_probability(view, policy.feed_length)
    weights = subset_weights(policy, survival) if exact else None
    means, errors = [], []
    for start in range(0, contexts.shape[0], block_size):
        block = jnp.asarray(contexts[start:start + block_size], jnp.int32)
        if exact:
            mean = _exact_block(policy, survival, weights, block)
            means.append(mean)
            errors.append(jnp.zeros_like(mean))
        else:
            mean, se = _monte_carlo_block(key, policy, survival, block, num_samples)
            means.append(mean)
            errors.append(se)
    if len(means) == 1:
        return Exposure(means[0], errors[0])
    return Exposure(jnp.concatenate(means), jnp.concatenate(errors))


_exact_block = jax.jit(exact_exposure)


@jax.jit
def exposure_of(table: jax.Array, contexts: jax.Array, items: jax.Array) -> jax.Array:
    """Gather ε(x_n, a_nk) from an exposure table f32[X, A] for contexts i32[N] and items
    i32[N, K]; padded ids (-1) read 0.  Returns f32[N, K]."""
    safe = jnp.where(items >= 0, items, 0)
    return jnp.where(items >= 0, table[contexts[:, None], safe], 0.0)

"""The probability that a policy shows a given ranking prefix, in closed form.

For a context x with candidate set c_1..c_C (a deterministic generator: `FixedCandidates` or `TopK`)
and a logged ranking s_1, s_2, ... (e.g. the viewed prefix of a feed), the prefix probability

    π(s_1:k | x) = P(σ_1 = s_1, ..., σ_k = s_k | x),   k = 1, 2, ...

is, per ranker of `simrec.feed.policies`:

* `Sort`: 1 if s_1:k are the first k candidates by descending score (ties: lower id first), else 0;
* `PlackettLuce`, w = exp(score / T): ∏_{j <= k} w(s_j) / Σ_{c not in s_1:j-1} w(c)
  (Plackett, Appl. Stat. 1975; Luce 1959);
* `EpsilonGreedy(base, ε)`: (1 − ε) π_base(s_1:k | x) + ε ∏_{j <= k} 1 / (C − j + 1), the second
  term being the uniformly random order of the C candidates that it shows with probability ε.

A prefix that repeats an item or holds an item outside the candidate set has probability 0.
These are the propensities of the slate estimators of `simrec.ope.slate`: π(s_1:k | x) /
π₀(s_1:k | x) is the likelihood ratio of what a user saw down to rank k. From the same pieces,
`next_item_mean` gives the mean of per-item values (a reward model) over the policy's next item
after a logged prefix, Σ_a π(σ_k = a | σ_1:k-1 = s_1:k-1, x) v(x, a): Cascade-DR's baseline. A
`RandomSubset` generator has none in closed form (its candidate set is a latent draw) and is
refused.

The candidate sets and scores are read once per distinct context on the device; the prefixes are
then O(N·K²) host work in float64, with the Plackett–Luce sums over the candidates not yet shown
taken without cancellation (`_remaining_sums`): a few candidates may hold almost all of the weight.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.feed.policies import (EpsilonGreedy, PlackettLuce, Policy, RandomSubset, Sort, base_ranker, item_values,
                                  num_items, sample_candidates, table_contexts)
from simrec.feed.sampling import sorted_prefix

__all__ = ["has_prefix_probability", "prefix_log_probability", "next_item_mean"]


def has_prefix_probability(policy: Policy) -> bool:
    """Whether `prefix_log_probability` has a closed form for the policy (any ranker on a
    deterministic generator)."""
    return isinstance(policy, Policy) and not isinstance(policy.generator, RandomSubset)


def _checked(policy: Policy, contexts, items) -> tuple[np.ndarray, np.ndarray]:
    """contexts i64[N] and items i64[N, K] after the checks of `prefix_log_probability`."""
    if not has_prefix_probability(policy):
        raise ValueError("policy must be a feed.Policy on a deterministic generator (FixedCandidates or TopK): "
                         "a RandomSubset's candidate set is a latent draw without a closed-form prefix probability")
    if not isinstance(policy.ranker, (Sort, PlackettLuce, EpsilonGreedy)):
        raise ValueError(f"unknown ranker {type(policy.ranker).__name__}")
    items = np.asarray(items)
    n, k = validate.matrix_shape("items", items, (None, None), "(sessions x ranks)")
    if not np.issubdtype(items.dtype, np.integer):
        raise ValueError(f"items must be integer item ids (-1 past the logged prefix), got dtype {items.dtype}")
    if k > policy.feed_length:
        raise ValueError(f"items has {k} ranks but the policy shows feed_length = {policy.feed_length}")
    if items.size and (items.min() < -1 or items.max() >= num_items(policy)):
        raise ValueError(f"items must be ids in [0, {num_items(policy)}) or -1 past the logged prefix")
    shown = items >= 0
    if np.any(shown[:, 1:] & ~shown[:, :-1]):
        raise ValueError("items must be a prefix: once a rank is -1 (not logged), every later rank is -1 too")
    contexts = np.asarray(contexts)
    if contexts.shape != (n,) or not np.issubdtype(contexts.dtype, np.integer):
        raise ValueError(f"contexts must be integer context ids i32[N] = i32[{n}], got {contexts.dtype}"
                         f"{list(contexts.shape)}")
    covered = table_contexts(policy)
    if covered is not None:
        validate.indices("contexts", contexts, covered, "contexts the policy's tables cover")
    return contexts.astype(np.int64), items.astype(np.int64)


def _positions(candidates: np.ndarray, rows: np.ndarray, items: np.ndarray, n_items: int) -> np.ndarray:
    """Column of each logged item in its context's candidate row, -1 where it is not a candidate (or
    not shown).  candidates: i64[X, C]; rows: i64[N] (row of each session); items: i64[N, K]."""
    order = np.argsort(candidates, axis=1, kind="stable")
    keys = (np.arange(candidates.shape[0])[:, None] * n_items + np.take_along_axis(candidates, order, 1)).ravel()
    wanted = rows[:, None] * n_items + np.maximum(items, 0)
    found = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = (keys[found] == wanted) & (items >= 0)
    column = order.ravel()[found]
    return np.where(hit, column, -1)


def _repeated(items: np.ndarray) -> np.ndarray:
    """bool[N, K]: the item at rank k already appears at an earlier rank (by a stable sort of each
    row: a repeat follows its first appearance).  O(N K log K)."""
    order = np.argsort(items, axis=1, kind="stable")
    ordered = np.take_along_axis(items, order, axis=1)
    again = np.concatenate([np.zeros((items.shape[0], 1), bool), ordered[:, 1:] == ordered[:, :-1]], axis=1)
    repeated = np.zeros(items.shape, bool)
    np.put_along_axis(repeated, order, again & (ordered >= 0), axis=1)
    return repeated


class _Read(NamedTuple):
    """What every formula here reads of a policy on logged rankings: each session's row i64[N] in the
    distinct contexts, their candidates i64[X, C] and base-ranker scores f32[X, C], the column of
    each logged item in its row's candidates i64[N, K] (-1: not a candidate or not shown)."""
    rows: np.ndarray
    candidates: np.ndarray
    scores: jnp.ndarray
    positions: np.ndarray


def _read(policy: Policy, contexts: np.ndarray, items: np.ndarray) -> _Read:
    distinct, rows = np.unique(contexts, return_inverse=True)
    device_contexts = jnp.asarray(distinct, jnp.int32)
    candidates = sample_candidates(None, policy.generator, device_contexts)
    scores = item_values(base_ranker(policy.ranker).scores, device_contexts, candidates)
    host_candidates = np.asarray(candidates, np.int64)
    return _Read(rows, host_candidates, scores, _positions(host_candidates, rows, items, num_items(policy)))


def _sorted_columns(read: _Read, depth: int) -> np.ndarray:
    """Columns of the first ``depth`` candidates of each session's context in the Sort ranker's order
    (descending score, ties by lower id: `simrec.feed.sampling.sorted_prefix`, the sampler's own
    order).  i64[N, depth]."""
    order = sorted_prefix(read.scores, jnp.asarray(read.candidates, jnp.int32), depth)
    return np.asarray(order).astype(np.int64)[read.rows]


def _weights(ranker: PlackettLuce, read: _Read) -> np.ndarray:
    """Plackett–Luce weights exp((s − max s) / T) of the candidates.  f64[X, C]."""
    logits = np.asarray(read.scores, np.float64) / float(ranker.temperature)
    return np.exp(logits - logits.max(axis=1, keepdims=True))


def _remaining_sums(weights: np.ndarray, quantities: np.ndarray, read: _Read) -> np.ndarray:
    """Σ_{c not in s_1:j-1} q(c) at every rank j, for each quantity q of the candidates ordered by
    ``weights`` (f64[X, C]): quantities f64[Q, X, C] -> f64[Q, N, K], without cancellation.

    The remaining sum is not the total minus the placed candidates (that cancels when the placed
    ones hold nearly all of it) but, with candidates ranked by weight, the suffix sum from the first
    rank t not yet placed, minus the placed candidates ranked below t: each of those weighs at most
    w_(t), which stays in the sum, so for q = w at most K−1 terms are subtracted from a sum K times
    larger than any of them (relative error ≲ K·2⁻⁵³), and for q = w·v with |v| <= V the absolute
    error of the remaining mean Σ w·v / Σ w is ≲ K·2⁻⁵³·V."""
    n_contexts, n_candidates = weights.shape
    rows, positions = read.rows, read.positions
    order = np.argsort(-weights, axis=1, kind="stable")                              # by weight, descending
    weight_rank = np.empty_like(order)
    np.put_along_axis(weight_rank, order, np.arange(n_candidates), axis=1)
    by_weight = np.take_along_axis(quantities, np.broadcast_to(order, quantities.shape), axis=2)
    suffix = np.concatenate([np.cumsum(by_weight[..., ::-1], axis=2)[..., ::-1],
                             np.zeros(quantities.shape[:2] + (1,))], axis=2)          # [Q, X, C + 1]
    valid = positions >= 0
    column = np.maximum(positions, 0)
    placed = np.where(valid, quantities[:, rows[:, None], column], 0.0)              # [Q, N, K]
    ranked = np.where(valid, weight_rank[rows[:, None], column], n_candidates)       # not shown: never placed
    sums = np.empty(placed.shape)
    first_free = _first_free(ranked)
    for j in range(positions.shape[1]):
        below = np.sum(np.where(ranked[None, :, :j] > first_free[None, :, j, None], placed[:, :, :j], 0.0), axis=2)
        sums[:, :, j] = suffix[:, rows, first_free[:, j]] - below
    return sums


def _first_free(places: np.ndarray) -> np.ndarray:
    """At every rank j, the first place (0, 1, ...) not held by the ranks above: places i64[N, K]
    of the ranks' items in an order (K or more: beyond the first K, never the first free one).
    i64[N, K], each <= j. O(N·K²)."""
    n, k = places.shape
    taken = np.zeros((n, k + 1), bool)
    first = np.empty((n, k), np.int64)
    for j in range(k):
        if j:
            taken[np.arange(n), np.minimum(places[:, j - 1], k)] = True
        first[:, j] = np.argmin(taken[:, :j + 1], axis=1)
    return first


def _base_terms(ranker, read: _Read, items: np.ndarray) -> np.ndarray:
    """log P(σ_j = s_j | σ_1:j-1 = s_1:j-1, x) of the Sort or Plackett–Luce ranker at every rank j
    (garbage where the item is impossible or not shown; masked by the caller).  f64[N, K]."""
    if isinstance(ranker, Sort):
        best = read.candidates[read.rows[:, None], _sorted_columns(read, items.shape[1])]
        return np.where(items == best, 0.0, -np.inf)
    weights = _weights(ranker, read)
    chosen = np.where(read.positions >= 0, weights[read.rows[:, None], np.maximum(read.positions, 0)], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(chosen) - np.log(_remaining_sums(weights, weights[None], read)[0])


def prefix_log_probability(policy: Policy, contexts, items) -> jnp.ndarray:
    """log π(s_1:k | x) of every prefix of logged rankings under `policy` (module docstring).

    contexts: i32[N]. items: i32[N, K] with K <= policy.feed_length, the shown items in rank
    order, -1 past the logged prefix (a `simrec.feed.Log`'s items: the viewed ranks). Returns
    f32[N, K]: entry [n, k] is log π(s_1:k+1 | x_n) inside the logged prefix and the whole logged
    prefix's value past it (so column K−1 is log π of the logged prefix; 0 for an empty one);
    -inf where the policy cannot show the prefix. Memory O(N·K + X·C) for X distinct contexts.
    """
    contexts, items = _checked(policy, contexts, items)
    n, k = items.shape
    if n == 0:
        return jnp.zeros((0, k), jnp.float32)
    return jnp.asarray(_log_prefixes(policy, _read(policy, contexts, items), items)[-1], jnp.float32)


def _log_prefixes(policy: Policy, read: _Read, items: np.ndarray) -> tuple[np.ndarray, ...]:
    """log π(s_1:k | x) (`prefix_log_probability`, f64[N, K]) of the base ranker, and for ε-greedy
    also of the policy itself: (base,) or (base, policy)."""
    n, k = items.shape
    shown = items >= 0
    possible = (read.positions >= 0) & ~_repeated(items)

    def prefix(terms):
        """Cumulative log-probability: -inf once a shown item is impossible, carried past the prefix
        (terms after an impossible rank may be undefined: they only add to -inf)."""
        terms = np.where(possible & (terms < np.inf), terms, -np.inf)                 # NaN, +inf: impossible
        return np.cumsum(np.where(shown, terms, 0.0), axis=1)

    with np.errstate(invalid="ignore"):
        base = prefix(_base_terms(base_ranker(policy.ranker), read, items))
        if not isinstance(policy.ranker, EpsilonGreedy):
            return (base,)
        epsilon = float(policy.ranker.epsilon)
        remaining = read.candidates.shape[1] - np.arange(k, dtype=np.float64)
        uniform = prefix(np.broadcast_to(-np.log(remaining), (n, k)))
        with np.errstate(divide="ignore"):
            return base, np.logaddexp(np.log1p(-epsilon) + base, np.log(epsilon) + uniform)


def _candidate_values(values, read: _Read, n_items: int) -> np.ndarray:
    """values f[A] per item or f[X, A] per distinct context, at each context's candidates.  f64[X, C]."""
    values = np.asarray(values, np.float64)
    n_contexts = read.candidates.shape[0]
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2 or values.shape[1] != n_items or values.shape[0] not in (1, n_contexts):
        raise ValueError(f"values must be f[{n_items}] per item or f[{n_contexts}, {n_items}] per distinct context "
                         f"of contexts (np.unique order), got shape {list(np.shape(values))}")
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite (no NaN or inf)")
    return np.take_along_axis(np.broadcast_to(values, (n_contexts, n_items)), read.candidates, axis=1)


def _base_next_mean(ranker, read: _Read, items: np.ndarray, candidate_values: np.ndarray) -> np.ndarray:
    """Σ_a P(σ_j = a | σ_1:j-1 = s_1:j-1, x) v(a) of the Sort or Plackett–Luce ranker at every rank j.
    f64[N, K]."""
    k = items.shape[1]
    if isinstance(ranker, Sort):                 # the best candidate not yet shown: among the first j + 1
        columns = _sorted_columns(read, k)                                            # [N, k]
        # each logged item's place in its context's sorted order (k: not among its first k)
        place = np.full((read.candidates.shape[0], int(read.candidates.max()) + 1), k)
        contexts = np.arange(read.candidates.shape[0])
        first_rows = np.unique(read.rows, return_index=True)[1]                       # a session of each context
        top = read.candidates[read.rows[first_rows, None], columns[first_rows]]       # [X, k] item ids
        place[contexts[:, None], top] = np.arange(k)
        placed = np.where(items >= 0, place[read.rows[:, None], np.maximum(items, 0)], k)   # [N, K]
        first = np.take_along_axis(columns, _first_free(placed), axis=1)             # the first not shown
        return candidate_values[read.rows[:, None], first]
    weights = _weights(ranker, read)
    weight, weighted_value = _remaining_sums(weights, np.stack([weights, weights * candidate_values]), read)
    return weighted_value / weight


def next_item_mean(policy: Policy, contexts, items, values) -> jnp.ndarray:
    """The mean of per-item values over the policy's choice at each rank after the logged prefix:

        v̄_k(x, s_1:k-1) = Σ_a π(σ_k = a | σ_1:k-1 = s_1:k-1, x) · v(x, a),   k = 1, 2, ...

    (the baseline of Cascade-DR, `simrec.ope.trajectory_cascade_dr`, for a reward model v). Per ranker:
    Sort gives v of the best candidate not in s_1:k-1; Plackett–Luce Σ_free w·v / Σ_free w over the
    candidates not in s_1:k-1 (`_remaining_sums`, no cancellation); ε-greedy the mixture
    α_k v̄_base + (1 − α_k) mean_free v with the posterior weight of its base ranker given the prefix,
    α_k = (1 − ε) π_base(s_1:k-1 | x) / π(s_1:k-1 | x) (1 − ε where π cannot show the prefix).

    contexts: i32[N]; items: i32[N, K] as `prefix_log_probability`; values: f[A] per item, or
    f[X, A] per distinct context of ``contexts`` in increasing id order (np.unique(contexts)).
    Returns f32[N, K]: v̄_k wherever s_1:k-1 is logged, 0 from two ranks past the logged prefix.
    Where the policy cannot show s_1:k-1, its rule applied to the candidates left (finite; an
    importance weight of 0 multiplies it). O(N·K²) host work in float64.
    """
    contexts, items = _checked(policy, contexts, items)
    n, k = items.shape
    if n == 0:
        return jnp.zeros((0, k), jnp.float32)
    read = _read(policy, contexts, items)
    candidate_values = _candidate_values(values, read, num_items(policy))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = _base_next_mean(base_ranker(policy.ranker), read, items, candidate_values)
        if isinstance(policy.ranker, EpsilonGreedy):
            epsilon = float(policy.ranker.epsilon)
            count, total = _remaining_sums(np.ones(candidate_values.shape),
                                           np.stack([np.ones(candidate_values.shape), candidate_values]), read)
            base, mixed = _log_prefixes(policy, read, items)
            posterior = np.exp(np.log1p(-epsilon) + base - mixed)                        # after s_1:k
            posterior = np.where(np.isfinite(mixed), posterior, 1.0 - epsilon)
            prior = np.concatenate([np.full((n, 1), 1.0 - epsilon), posterior[:, :-1]], axis=1)
            mean = prior * mean + (1.0 - prior) * total / count
    logged = np.concatenate([np.ones((n, 1), bool), items[:, :-1] >= 0], axis=1)       # s_1:k-1 logged
    return jnp.asarray(np.where(logged & np.isfinite(mean), mean, 0.0), jnp.float32)

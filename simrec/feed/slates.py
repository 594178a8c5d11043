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
π₀(s_1:k | x) is the likelihood ratio of what a user saw down to rank k. A `RandomSubset`
generator has none in closed form (its candidate set is a latent draw) and is refused.

The candidate sets and scores are read once per distinct context on the device; the prefixes are
then O(N·K²) host work in float64, with the Plackett–Luce denominators summed without cancellation
(`_plackett_luce_terms`): a few candidates may hold almost all of the weight.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.feed.policies import (EpsilonGreedy, PlackettLuce, Policy, RandomSubset, Sort, base_ranker, item_values,
                                  num_items, sample_candidates, table_contexts)

__all__ = ["has_prefix_probability", "prefix_log_probability"]


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
    """bool[N, K]: the item at rank k already appears at an earlier rank."""
    earlier = np.tril(np.ones((items.shape[1],) * 2, bool), -1)
    return np.any((items[:, :, None] == items[:, None, :]) & earlier & (items[:, :, None] >= 0), axis=2)


def _base_terms(ranker, candidates, scores, rows, items, positions) -> np.ndarray:
    """log P(σ_j = s_j | σ_1:j-1 = s_1:j-1, x) of the Sort or Plackett–Luce ranker at every rank j
    (garbage where the item is impossible or not shown; masked by the caller).  f64[N, K]."""
    if isinstance(ranker, Sort):
        order = np.lexsort((candidates, -scores), axis=1)[:, :items.shape[1]]         # ties: lower id
        top = np.take_along_axis(candidates, order, axis=1)[rows]
        return np.where(items == top, 0.0, -np.inf)
    logits = scores / float(ranker.temperature)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))                     # [X, C]
    return _plackett_luce_terms(weights, rows, positions)


def _plackett_luce_terms(weights: np.ndarray, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """log w(s_j) − log Σ_{c not in s_1:j-1} w(c) at every rank j (f64[N, K]), without cancellation.

    The remaining weight is not the total minus the placed weight (that cancels when the placed
    candidates hold nearly all of it) but, with candidates ranked by weight, the suffix sum from the
    first rank t not yet placed, minus the placed candidates ranked below t: each of those weighs at
    most w_(t), which stays in the sum, so at most K−1 terms are subtracted from a sum K times larger
    than any of them (relative error ≲ K·2⁻⁵³)."""
    n_contexts, n_candidates = weights.shape
    order = np.argsort(-weights, axis=1, kind="stable")                              # by weight, descending
    weight_rank = np.empty_like(order)
    np.put_along_axis(weight_rank, order, np.arange(n_candidates), axis=1)
    by_weight = np.take_along_axis(weights, order, axis=1)
    suffix = np.concatenate([np.cumsum(by_weight[:, ::-1], axis=1)[:, ::-1], np.zeros((n_contexts, 1))], axis=1)
    valid = positions >= 0
    column = np.maximum(positions, 0)
    chosen = np.where(valid, weights[rows[:, None], column], 0.0)                   # [N, K]
    ranked = np.where(valid, weight_rank[rows[:, None], column], n_candidates)       # not shown: never placed
    terms = np.empty(positions.shape)
    for j in range(positions.shape[1]):
        gap = np.sort(ranked[:, :j], axis=1) != np.arange(j)
        first_free = np.where(gap.any(axis=1), gap.argmax(axis=1), j) if j else np.zeros(len(rows), np.int64)
        below = np.sum(np.where(ranked[:, :j] > first_free[:, None], chosen[:, :j], 0.0), axis=1)
        remaining = suffix[rows, first_free] - below
        with np.errstate(divide="ignore", invalid="ignore"):
            terms[:, j] = np.log(chosen[:, j]) - np.log(remaining)
    return terms


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
    distinct, rows = np.unique(contexts, return_inverse=True)
    device_contexts = jnp.asarray(distinct, jnp.int32)
    candidates = sample_candidates(None, policy.generator, device_contexts)
    ranker = base_ranker(policy.ranker)
    scores = np.asarray(item_values(ranker.scores, device_contexts, candidates), np.float64)
    candidates = np.asarray(candidates, np.int64)
    positions = _positions(candidates, rows, items, num_items(policy))
    shown = items >= 0
    possible = (positions >= 0) & ~_repeated(items)

    def prefix(terms):
        """Cumulative log-probability: -inf once a shown item is impossible, carried past the prefix
        (terms after an impossible rank may be undefined: they only add to -inf)."""
        terms = np.where(possible & (terms < np.inf), terms, -np.inf)                 # NaN, +inf: impossible
        return np.cumsum(np.where(shown, terms, 0.0), axis=1)

    with np.errstate(invalid="ignore"):
        base = prefix(_base_terms(ranker, candidates, scores, rows, items, positions))
        if isinstance(policy.ranker, EpsilonGreedy):
            epsilon = float(policy.ranker.epsilon)
            uniform = prefix(np.broadcast_to(-np.log(candidates.shape[1] - np.arange(k, dtype=np.float64)), (n, k)))
            with np.errstate(divide="ignore"):
                base = np.logaddexp(np.log1p(-epsilon) + base, np.log(epsilon) + uniform)
    return jnp.asarray(base, jnp.float32)

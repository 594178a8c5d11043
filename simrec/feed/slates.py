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
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.feed.policies import (EpsilonGreedy, PlackettLuce, Policy, RandomSubset, Sort, base_ranker, item_values,
                                  num_items, sample_candidates, table_contexts)
from simrec.feed.sampling import sort_permutation

__all__ = ["has_prefix_probability", "prefix_log_probability"]


def has_prefix_probability(policy: Policy) -> bool:
    """Whether `prefix_log_probability` has a closed form for the policy (any ranker on a
    deterministic generator)."""
    return isinstance(policy, Policy) and not isinstance(policy.generator, RandomSubset)


def _base_terms(ranker, contexts, candidates, items, placed, match):
    """log P(σ_j = s_j | σ_1:j-1 = s_1:j-1, x) of the Sort or Plackett–Luce ranker at every rank
    j, given the items s: i32[B, K] (all shown and valid here).  f32[B, K]."""
    scores = item_values(ranker.scores, contexts, candidates)                        # [B, C]
    if isinstance(ranker, Sort):
        order = jnp.take_along_axis(candidates, sort_permutation(scores, candidates), axis=1)
        return jnp.where(items == order[:, :items.shape[1]], 0.0, -jnp.inf)
    logits = scores / ranker.temperature
    remaining = jnp.where(placed, -jnp.inf, logits[:, None, :])                       # [B, K, C]
    chosen = jnp.sum(jnp.where(match, logits[:, None, :], 0.0), axis=2)
    return chosen - jax.nn.logsumexp(remaining, axis=2)


@jax.jit
def _prefix_block(policy: Policy, contexts, items):
    """`prefix_log_probability` of one block: contexts i32[B], items i32[B, K].  f32[B, K]."""
    candidates = sample_candidates(None, policy.generator, contexts)                 # [B, C]
    n_candidates, n_ranks = candidates.shape[1], items.shape[1]
    shown = items >= 0
    match = (items[:, :, None] == candidates[:, None, :]) & shown[:, :, None]         # [B, K, C]
    placed = (jnp.cumsum(match, axis=1) - match) > 0                                 # placed above rank j
    earlier = jnp.tril(jnp.ones((n_ranks, n_ranks), bool), -1)
    repeated = jnp.any((items[:, :, None] == items[:, None, :]) & earlier, axis=2)
    possible = jnp.any(match, axis=2) & ~repeated
    ranker = policy.ranker

    def prefix(terms):
        """Cumulative log-probability; 0 past the logged prefix (carries its value), -inf once a
        shown item is impossible."""
        terms = jnp.where(shown, jnp.where(possible, terms, -jnp.inf), 0.0)
        return jnp.cumsum(terms, axis=1)

    base = prefix(_base_terms(base_ranker(ranker), contexts, candidates, items, placed, match))
    if not isinstance(ranker, EpsilonGreedy):
        return base
    uniform = prefix(jnp.broadcast_to(-jnp.log(n_candidates - jnp.arange(n_ranks, dtype=jnp.float32)),
                                      items.shape))
    epsilon = jnp.asarray(ranker.epsilon, jnp.float32)
    return jnp.logaddexp(jnp.log1p(-epsilon) + base, jnp.log(epsilon) + uniform)


def prefix_log_probability(policy: Policy, contexts, items, *, block_size: int = 256) -> jax.Array:
    """log π(s_1:k | x) of every prefix of logged rankings under `policy` (module docstring).

    contexts: i32[N]. items: i32[N, K] with K <= policy.feed_length, the shown items in rank
    order, -1 past the logged prefix (a `simrec.feed.Log`'s items: the viewed ranks). Returns
    f32[N, K]: entry [n, k] is log π(s_1:k+1 | x_n) inside the logged prefix and the whole logged
    prefix's value past it (so column K−1 is log π of the logged prefix; 0 for an empty one);
    -inf where the policy cannot show the prefix. Sessions are computed in blocks of
    `block_size` (memory O(block_size · K · C) for C candidates).
    """
    if not has_prefix_probability(policy):
        raise ValueError("policy must be a feed.Policy on a deterministic generator (FixedCandidates or TopK): "
                         "a RandomSubset's candidate set is a latent draw without a closed-form prefix probability")
    if not isinstance(policy.ranker, (Sort, PlackettLuce, EpsilonGreedy)):
        raise ValueError(f"unknown ranker {type(policy.ranker).__name__}")
    validate.integer("block_size", block_size, low=1)
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
    size = min(block_size, max(n, 1))
    blocks = []
    for start in range(0, n, size):
        rows = slice(start, start + size)
        pad = size - contexts[rows].shape[0]                     # one compiled shape for every block
        block = _prefix_block(policy, jnp.asarray(np.pad(contexts[rows], (0, pad)), jnp.int32),
                              jnp.asarray(np.pad(items[rows], ((0, pad), (0, 0)), constant_values=-1), jnp.int32))
        blocks.append(block[:size - pad])
    return jnp.concatenate(blocks) if blocks else jnp.zeros((0, k), jnp.float32)

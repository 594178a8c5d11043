"""The exposure a ranking policy gives each item: exact, by the exponential race, or by Monte Carlo.

A policy's *exposure* of item a in context x is the expected number of views a gets under view
model S(i) = P(V=1 | R=i) (Jeunen, Potapov & Ustimenko, KDD'24 Eq. 6):

    ε(x, a) = sum_{i=1}^{K} P(a at rank i | x) · S(i).

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

The package exports the function `exposure` as ``simrec.feed.exposure``, so that name is the
function, not this module; import the module's other names from it directly (``from
simrec.feed.exposure import monte_carlo``).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from simrec import sharding, validate
from simrec.feed.policies import (EpsilonGreedy, FixedCandidates, PlackettLuce, Policy, RandomSubset, Ranker, Sort,
                                  TopK, base_ranker, candidate_count, catalogue_items, is_exact, item_values, lookup,
                                  num_items, sample_candidates, table_contexts)
from simrec.feed.sampling import inverse_permutation, sort_permutation, sorted_prefix
from simrec.feed.views import ViewModel, view_probability

__all__ = [
    "Exposure", "exposure", "exposure_of", "exact_exposure", "exposure_sample", "subset_weights", "monte_carlo",
    "race_nodes", "Placement", "placement", "placement_exposure",
]


# --------------------------------------------------------------------------------------------
# Exposure of a ranker given the candidates
# --------------------------------------------------------------------------------------------

class Exposure(NamedTuple):
    """Exposure table ε(x, a) for a block of contexts: mean f32[B, A] and its Monte Carlo
    standard error f32[B, A] (zeros where the exposure is exact)."""
    mean: jax.Array
    standard_error: jax.Array


def _sort_exposure(ranker_scores, survival, contexts, candidates) -> jax.Array:
    """Exact exposure of each candidate under `Sort`: S(position + 1) for the first K, 0 after.
    f32[N, k]."""
    top = sorted_prefix(item_values(ranker_scores, contexts, candidates), candidates, survival.shape[0])
    rows = jnp.arange(candidates.shape[0])[:, None]
    return jnp.zeros(candidates.shape, survival.dtype).at[rows, top].set(survival[None, :])


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


# --------------------------------------------------------------------------------------------
# The exponential race (exact Plackett–Luce exposure)
# --------------------------------------------------------------------------------------------

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
    base = base_ranker(policy.ranker)
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
    if not isinstance(base_ranker(policy.ranker), PlackettLuce) or isinstance(policy.generator, RandomSubset):
        return None
    k, K = candidate_count(policy.generator), policy.feed_length
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


# --------------------------------------------------------------------------------------------
# Exposure tables
# --------------------------------------------------------------------------------------------

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
    scores = base_ranker(ranker).scores
    if isinstance(policy.generator, RandomSubset):
        catalogue = catalogue_items(contexts, n_items)
        rank = inverse_permutation(sort_permutation(item_values(scores, contexts, catalogue), catalogue))
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


def _checked_contexts(policy: Policy, contexts) -> np.ndarray:
    """contexts as an integer vector [B] of ids the policy's lookup tables cover (ValueError
    otherwise)."""
    contexts = np.asarray(contexts)
    if contexts.ndim != 1 or not np.issubdtype(contexts.dtype, np.integer):
        raise ValueError(f"contexts must be an integer vector [B], got {contexts.dtype}{list(contexts.shape)}")
    covered = table_contexts(policy)
    if covered is not None:
        validate.indices("contexts", contexts, covered, "contexts the policy's tables cover")
    return contexts


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
    contexts = _checked_contexts(policy, contexts)
    exact = is_exact(policy)
    nodes = None if exact or contexts.shape[0] == 0 else race_nodes(policy, contexts, block_size)
    if not exact and nodes is None:
        validate.integer("num_samples", num_samples, low=2)
        if key is None:
            raise ValueError("the exposure of this stochastic ranker is a Monte Carlo estimate: pass a PRNG key")
    survival = view_probability(view, policy.feed_length)
    weights = subset_weights(policy, survival) if exact else None
    if nodes is not None:        # the race holds [k, block, nodes, K] floats: at most 2^21 (cache-sized)
        race_floats = candidate_count(policy.generator) * nodes * policy.feed_length
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


# --------------------------------------------------------------------------------------------
# Placement: a policy's rank probabilities, for the exposure under any view model
# --------------------------------------------------------------------------------------------

class Placement(NamedTuple):
    """Where a policy shows each of its candidates: candidates i32[B, k] and probability
    f32[B, k, K], P(candidate at rank i | x) for each of the K shown ranks. Exposure is linear in
    the view model, ε(x, a) = Σ_i P(a at rank i | x) S(i), so one placement gives the exposure
    table under every view model (`placement_exposure`)."""
    candidates: jax.Array
    probability: jax.Array


def _rank_placement(key, ranker: Ranker, feed_length: int, contexts, candidates) -> jax.Array:
    """P(candidate at rank i) given the candidates: one-hot at the sorted position for `Sort`;
    for `PlackettLuce` one sample of 1[a not in σ_1..σ_{i−1}] · w_a / Z_i (`placement`);
    ε-greedy mixes in 1/k at every rank.  f32[N, k, K]."""
    ranks = jnp.arange(feed_length)
    if isinstance(ranker, Sort):
        top = sorted_prefix(item_values(ranker.scores, contexts, candidates), candidates, feed_length)
        rows = jnp.arange(candidates.shape[0])[:, None]
        return jnp.zeros((*candidates.shape, feed_length), jnp.float32).at[rows, top, ranks].set(1.0)
    if isinstance(ranker, PlackettLuce):
        logits = item_values(ranker.scores, contexts, candidates) / ranker.temperature      # [N, k]
        order = jnp.argsort(-(logits + jax.random.gumbel(key, logits.shape)), axis=1)
        ordered = jnp.take_along_axis(logits, order, axis=1)
        log_rest = jax.lax.cumlogsumexp(ordered[:, ::-1], axis=1)[:, ::-1][:, :feed_length]   # log Z_i [N, K]
        available = inverse_permutation(order)[:, :, None] >= ranks
        return jnp.where(available, jnp.exp(logits[:, :, None] - log_rest[:, None, :]), 0.0)
    base = _rank_placement(key, ranker.base, feed_length, contexts, candidates)
    return (1.0 - ranker.epsilon) * base + ranker.epsilon / candidates.shape[1]


@functools.partial(jax.jit, static_argnames=("num_samples",))
def _placement_block(key, policy: Policy, contexts, num_samples: int):
    candidates = sample_candidates(None, policy.generator, contexts)
    if is_exact(policy):
        return candidates, _rank_placement(None, policy.ranker, policy.feed_length, contexts, candidates)

    def one(context, items):          # seeded by the context id: a context's value is blocking-free
        context_key = jax.random.fold_in(key, context)
        sample = lambda r: _rank_placement(jax.random.fold_in(context_key, r), policy.ranker,  # noqa: E731
                                           policy.feed_length, context[None], items[None])[0]
        total = jax.lax.fori_loop(0, num_samples, lambda r, acc: acc + sample(r),
                                  jnp.zeros((items.shape[0], policy.feed_length)))
        return total / num_samples

    return candidates, jax.vmap(one)(contexts, candidates)


def placement(key: jax.Array | None, policy: Policy, contexts, *, num_samples: int = 1000,
              block_size: int = 1024) -> Placement:
    """P(a at rank i | x) for each context's candidates and each of the K shown ranks, for a
    policy on a deterministic generator (FixedCandidates or TopK).

    Exact for `Sort` (1 at the candidate's sorted position) and `EpsilonGreedy(Sort)`
    ((1 − ε) · that + ε / k: a uniform order puts each candidate at each rank with probability
    1/k); `key` is unused and may be None. For `PlackettLuce` (plain or ε-greedy) the mean over
    `num_samples` sampled rankings σ of the conditional placement probability

        1[a not in σ_1..σ_{i−1}] · w_a / Z_i,   w = exp(score / T),  Z_i = Σ w over the unplaced,

    unbiased for P(a at rank i) and positive at rank 1 for every candidate (Oosterhuis, SIGIR'21:
    PL-Rank's estimator with the view model factored out), seeded by fold_in(key, context) so that
    a context's value does not depend on its block. contexts: i32[B]. Returns `Placement`
    (candidates i32[B, k], probability f32[B, k, K]). Memory: O(B · k · K).
    """
    validate.integer("block_size", block_size, low=1)
    if not isinstance(policy.generator, (FixedCandidates, TopK)):
        raise ValueError(f"placement needs a deterministic generator (FixedCandidates or TopK), "
                         f"got {type(policy.generator).__name__}")
    contexts = _checked_contexts(policy, contexts)
    if not is_exact(policy):
        num_samples = validate.integer("num_samples", num_samples, low=1)
        if key is None:
            raise ValueError("the placement of a Plackett–Luce ranker is a Monte Carlo estimate: pass a PRNG key")
    blocks = [_placement_block(key, policy, jnp.asarray(contexts[s:s + block_size], jnp.int32),
                               num_samples if not is_exact(policy) else 0)
              for s in range(0, contexts.shape[0], block_size)]
    if len(blocks) == 1:
        return Placement(*blocks[0])
    return Placement(*(jnp.concatenate(parts) for parts in zip(*blocks)))


@functools.partial(jax.jit, static_argnames=("num_items",))
def _placement_table(candidates, probability, survival, num_items: int) -> jax.Array:
    return _scatter(jnp.einsum("bnk,k->bn", probability, survival), candidates, num_items)


def placement_exposure(placement_: Placement, view: ViewModel, num_items: int) -> jax.Array:
    """The exposure table ε(x, a) = Σ_i P(a at rank i | x) S(i) under `view` (KDD'24 Eq. 6) of a
    `placement`, 0 outside the candidates: equal to `exposure` of the policy (its Monte Carlo
    estimate for Plackett–Luce) without ranking anew for each view model.  f32[B, A]."""
    validate.integer("num_items", num_items, low=1)
    survival = view_probability(view, placement_.probability.shape[-1])
    return _placement_table(placement_.candidates, placement_.probability, survival, num_items)

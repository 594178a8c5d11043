"""Online ground truth: the exact expected reward of a policy and a simulated A/B test.

The online reward of policy R is the expected number of positive feedback events per session
(Jeunen, Potapov & Ustimenko, KDD'24 Eq. 2), per signal s. Under Asm. 1–5 (KDD'24 Eq. 5–6)

    V_s(R) = sum_x activity[x] sum_a q_s(x, a) ε_R(x, a),

which `online_value` computes over every context — exactly when the exposure is exact
(`is_exact`, or a Plackett–Luce policy whose exposure the exponential race gives exactly,
`race_nodes`), else with the Monte Carlo standard error of the exposure. With within-session
violations (a `Cascade` view model, satiation) it conditions on the ranking σ instead:

    V_s(R | x, σ) = sum_i S(i) · prod_{j<i} (1 - p q̃_stop(j)) · q̃_s(i),

with q̃ the satiated quality (`scenario_quality`: of the satiating contexts only, when the
scenario marks them) and p the cascade's stop probability; when the satiation comes from the
viewed neighbours or the viewed slate (`Scenario.satiated_by`, also context by context), q̃ depends
on the depth D too and
V_s(R | x, σ) = sum_d P(D = d) sum_{i<=d} q̃_{s,d}(i). Exact for
deterministic policies and averaged over sampled rankings otherwise. An epsilon-greedy policy
around a deterministic order is split by its definition,

    V(εG) = (1 - ε) V(base order) + ε V(uniform order),

with the first term exact and only the second sampled (its standard error scaled by ε). Fatigue makes the reward
depend on the session history, so only `ab_test` (independent sessions per arm) measures it.
A day d is a scenario whose quality functions are that day's (e.g. from `simrec.world.drift`).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.feed.exposure import exact_exposure, exposure, exposure_sample, monte_carlo, race_nodes, subset_weights
from simrec.feed.policies import EpsilonGreedy, Policy, Sort, is_deterministic, is_exact, item_values, num_items
from simrec.feed.sampling import sample_ranking
from simrec.feed.sessions import Scenario, check_policy, num_contexts, scenario_quality, session_chunks
from simrec.feed.views import Cascade, view_probability

__all__ = ["OnlineValue", "ABTest", "online_value", "ab_test"]


class OnlineValue(NamedTuple):
    """Expected reward per session, per signal: mean f64[S] and its Monte Carlo standard error
    f64[S] (0 when exact)."""
    mean: np.ndarray
    standard_error: np.ndarray
    signals: tuple


class ABTest(NamedTuple):
    """Per-arm mean reward per session and its standard error, f64[P, S] over P policies."""
    mean: np.ndarray
    standard_error: np.ndarray
    num_sessions: int
    signals: tuple


def _quality_stack(scenario: Scenario, contexts, items) -> jax.Array:
    return jnp.stack([item_values(q, contexts, items) for q in scenario.quality])


@functools.partial(jax.jit, static_argnames=("num_samples", "exact"))
def _exposure_value_block(key, scenario, policy, survival, weights, contexts, num_samples, exact):
    if exact:
        return _table_value_block(scenario, exact_exposure(policy, survival, weights, contexts), contexts)
    A = num_items(policy)
    catalogue = jnp.broadcast_to(jnp.arange(A, dtype=jnp.int32), (contexts.shape[0], A))
    quality = _quality_stack(scenario, contexts, catalogue)                          # [S, B, A]
    stats = monte_carlo(key, lambda k: jnp.einsum(
        "sba,ba->sb", quality, exposure_sample(k, policy, survival, contexts)), num_samples)
    return stats, jnp.min(quality), jnp.max(quality)


@jax.jit
def _table_value_block(scenario, table, contexts):
    quality = _quality_stack(scenario, contexts, jnp.broadcast_to(jnp.arange(table.shape[1], dtype=jnp.int32),
                                                                  table.shape))           # [S, B, A]
    value = jnp.einsum("sba,ba->sb", quality, table)
    return (value, jnp.zeros_like(value)), jnp.min(quality), jnp.max(quality)


@functools.partial(jax.jit, static_argnames=("num_samples",))
def _ranking_value_block(key, scenario, policy, survival, contexts, num_samples):
    def sample(k):
        rankings = jax.vmap(lambda x: sample_ranking(jax.random.fold_in(k, x), policy, x[None])[0])(contexts)
        quality = _quality_stack(scenario, contexts, rankings)                       # [S, B, K]
        return quality, _conditional_value(scenario, survival, contexts, quality)

    quality, _ = sample(key)
    return monte_carlo(key, lambda k: sample(k)[1], num_samples), jnp.min(quality), jnp.max(quality)


def _conditional_value(scenario: Scenario, survival, contexts, quality) -> jax.Array:
    """Expected reward per signal given the ranking (module docstring), from the quality of its
    items f32[S, B, K] before satiation (`scenario_quality`).  f32[S, B].

    Satiation by the items above does not depend on how far the user scrolls, so the reward at
    rank i is S(i) q̃(i); satiation by the viewed neighbours or the viewed slate does, so the value
    averages over the depth D (position-only views): Σ_d P(D = d) Σ_{i <= d} q̃_d(i), with
    P(D = d) = S(d) − S(d + 1) and q̃_d the quality satiated by the ranks 1..d."""
    if scenario.satiation > 0 and scenario.satiated_by != "above":
        K = quality.shape[-1]
        depth = jnp.arange(1, K + 1)
        viewed = jnp.arange(K)[None, :] < depth[:, None]                                # [D, K]
        at_depth = survival - jnp.concatenate([survival[1:], jnp.zeros_like(survival[:1])])
        by_depth = jnp.broadcast_to(quality[:, :, None, :], (*quality.shape[:2], K, K))  # [S, B, D, K]
        satiated = scenario_quality(scenario, contexts, by_depth, viewed)
        return jnp.einsum("sbdk,dk,d->sb", satiated, viewed.astype(satiated.dtype), at_depth)
    quality = scenario_quality(scenario, contexts, quality)
    reach = jnp.broadcast_to(survival, quality.shape[1:])
    if isinstance(scenario.view, Cascade):
        log_keep = jnp.log1p(-scenario.view.stop_probability * quality[scenario.view.stop_signal])
        before = jnp.cumsum(log_keep, axis=-1)[..., :-1]
        reach = reach * jnp.exp(jnp.concatenate([jnp.zeros_like(log_keep[..., :1]), before], axis=-1))
    return jnp.sum(reach[None] * quality, axis=-1)


def _splits(policy: Policy) -> bool:
    """Whether `online_value` splits the policy: epsilon-greedy with 0 < ε < 1 around a
    deterministic order (a Sort ranker on a deterministic generator)."""
    ranker = policy.ranker
    if not isinstance(ranker, EpsilonGreedy) or not isinstance(ranker.base, Sort):
        return False
    epsilon = float(ranker.epsilon)
    return 0.0 < epsilon < 1.0 and is_deterministic(dataclasses.replace(policy, ranker=ranker.base))


def online_value(key: jax.Array | None, scenario: Scenario, policy: Policy, *, num_samples: int = 1000,
                 block_size: int = 256) -> OnlineValue:
    """Expected positive feedback per session of `policy`, per signal, averaged exactly over the
    context distribution (module docstring). `key` may be None when the value is exact (an
    `is_exact` policy, or a Plackett–Luce one that `race_nodes` accepts, without within-session
    violations; a deterministic one with them).
    Raises ValueError with fatigue (use `ab_test`) or if a quality leaves [0, 1].
    """
    check_policy(scenario, policy)
    if scenario.fatigue > 0:
        raise ValueError("online_value: with fatigue the reward depends on earlier sessions, so it has "
                         "no closed form; measure it with ab_test")
    validate.integer("block_size", block_size, low=1)
    by_ranking = isinstance(scenario.view, Cascade) or scenario.satiation > 0
    if by_ranking and _splits(policy):
        epsilon = float(policy.ranker.epsilon)
        base = online_value(None, scenario, dataclasses.replace(policy, ranker=policy.ranker.base),
                            block_size=block_size)
        uniform = online_value(key, scenario, dataclasses.replace(
            policy, ranker=dataclasses.replace(policy.ranker, epsilon=jnp.float32(1.0))),
            num_samples=num_samples, block_size=block_size)
        return OnlineValue((1 - epsilon) * base.mean + epsilon * uniform.mean,
                           epsilon * uniform.standard_error, scenario.signals)
    exact = is_deterministic(policy) if by_ranking else is_exact(policy)
    raced = not (by_ranking or exact) and race_nodes(policy, np.arange(num_contexts(scenario)), block_size) is not None
    samples = 1 if exact or raced else validate.integer("num_samples", num_samples, low=2)
    if not (exact or raced) and key is None:
        raise ValueError("online_value needs a PRNG key for a stochastic policy")
    key = jax.random.key(0) if key is None else key           # unused by exact computations
    survival = view_probability(scenario.view, policy.feed_length)
    weights = subset_weights(policy, survival) if exact and not by_ranking else jnp.zeros(1)
    activity = np.asarray(scenario.activity, np.float64)
    total = np.zeros(len(scenario.signals))
    variance = np.zeros(len(scenario.signals))
    for start in range(0, activity.shape[0], block_size):
        contexts = jnp.arange(start, min(start + block_size, activity.shape[0]), dtype=jnp.int32)
        if by_ranking:
            (mean, se), low, high = _ranking_value_block(key, scenario, policy, survival, contexts, samples)
        elif raced:
            table = exposure(None, policy, scenario.view, contexts, block_size=block_size).mean
            (mean, se), low, high = _table_value_block(scenario, table, contexts)
        else:
            (mean, se), low, high = _exposure_value_block(key, scenario, policy, survival, weights,
                                                          contexts, samples, exact)
        if not (0.0 <= float(low) and float(high) <= 1.0):
            raise ValueError(f"quality must lie in [0, 1] (no NaN); contexts {start}.. give values in "
                             f"[{float(low)}, {float(high)}]")
        w = activity[start:start + contexts.shape[0]]
        total += np.asarray(mean, np.float64) @ w
        variance += np.asarray(se, np.float64) ** 2 @ w ** 2
    return OnlineValue(total, np.sqrt(variance), scenario.signals)


def ab_test(key: jax.Array, scenario: Scenario, policies: Sequence[Policy], num_sessions: int, *,
            chunk_size: int | None = None, round_size: int = 1024) -> ABTest:
    """A simulated online experiment: `num_sessions` independent sessions per arm (arm p seeded by
    fold_in(key, p), its own fatigue state), per-arm mean total reward per session and its
    standard error sqrt(sample variance / n), per signal."""
    num_sessions = validate.integer("num_sessions", num_sessions, low=2)
    means, errors = [], []
    for arm, policy in enumerate(policies):
        unused = jnp.zeros((num_contexts(scenario), num_items(policy)), jnp.float32)   # no ε₀ needed
        totals = np.concatenate([
            np.asarray(jnp.sum(chunk["rewards"], axis=2, dtype=jnp.int32), np.float64)
            for chunk in session_chunks(jax.random.fold_in(key, arm), scenario, policy, num_sessions,
                                        unused, chunk_size=chunk_size, round_size=round_size)], axis=1)
        means.append(totals.mean(axis=1))
        errors.append(totals.std(axis=1, ddof=1) / np.sqrt(num_sessions))
    return ABTest(np.array(means), np.array(errors), num_sessions, scenario.signals)

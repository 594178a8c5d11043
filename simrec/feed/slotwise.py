"""Slot-wise slates: the other slate model of ranking off-policy evaluation.

Open Bandit Pipeline's synthetic slates (Saito et al., NeurIPS'21 datasets track), on which
Cascade-DR (Kiyohara et al., WSDM'22) and adaptive IPS (Kiyohara et al., KDD'23) are evaluated,
fill each of K slots independently from a small set of A actions, with replacement (a slate may
repeat an action), and let the reward at a slot depend on the actions at other slots. Unlike the
feed (`simrec.feed.sessions`), every slot is observed and the value is the plain sum over slots.

A round: a context x ~ N(0, I_d); a user type c ~ P(c | x) = softmax_c(ω_c |θ_c · x|), one type
for every slot of the round; a slate a = (a_1..a_K) with a_k ~ π_k independently (a factorised,
context-free policy: ``probs`` f[A] shared by every slot or f[K, A] per slot, as in both papers);
and slot rewards with mean

    logistic:  q_k = σ(z(x, a_k) + Σ_{j ∈ R_c(k), j ≠ k} I_kj),     r_k ~ Bernoulli(q_k)      (WSDM'22)
    linear:    q_k = 1 + σ(z(x, a_k)) + Σ_{j ∈ R_c(k), j ≠ k} I_kj,  r_k = q_k + σ_r ε_k     (KDD'23)

with z(x, a) = x · u_a + b_a the base logit (`linear_logits`), R_c(k) the slots whose action the
reward at slot k depends on under type c (``relevance[c, k, j]``; the diagonal is the slot itself,
the action sets Φ(k) of `simrec.ope.trajectory_factorised_ips`), and the interaction
I_kj = W[a_k, a_j] (``additive``, W symmetric: `symmetric_pairs`) or −z(x, a_j)/(|k − j| + 1)
(``decay``). The value of a policy is

    V(π) = E_x Σ_c P(c | x) E_{a ~ π} Σ_k q_k(x, a, c),

and `context_values` gives its inner part exactly for each context: in closed form for the linear
reward (slots are independent, so E[W[a_k, a_j]] = π_kᵀ W π_j and E[z(x, a_j)] = π_j · z(x)), and
for the logistic one by enumerating, slot by slot, the actions of the slot and of the slots
its reward depends on (A^|R(k)| terms: all A^K under the standard structure, A for independent
slots). `recursive_reward_model` fits Cascade-DR's
recursive Q-function (WSDM'22 Eq. 7) on a log, for `simrec.ope.trajectory_cascade_dr`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["REWARDS", "INTERACTIONS", "SlotWorld", "SlotLog", "linear_logits", "symmetric_pairs", "base_logits",
           "type_probabilities", "reward_means", "simulate", "slot_log_probability", "context_values",
           "recursive_reward_model"]

#: the slot rewards (module docstring): Bernoulli with a logistic mean, or Gaussian around a linear one
REWARDS = ("logistic", "linear")
#: how the action at slot j moves the reward at slot k: W[a_k, a_j], or −z(x, a_j)/(|k − j| + 1)
INTERACTIONS = ("additive", "decay")


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["slopes", "intercepts", "pairs", "relevance", "type_directions", "type_scales",
                                "noise"],
                   meta_fields=["reward", "interaction"])
@dataclass(frozen=True)
class SlotWorld:
    """A slot-wise slate world (module docstring).

    slopes: f32[d, A] and intercepts: f32[A], the base logit z(x, a) = x · slopes[:, a] + intercepts[a].
    pairs: f32[A, A], W of the additive interaction (unused by ``decay``).
    relevance: bool[T, K, K], [c, k, j] True when the reward at slot k depends on the action at slot
    j under user type c (the diagonal True). type_directions: f32[T, d] θ_c and type_scales: f32[T]
    ω_c of P(c | x) = softmax_c(ω_c |θ_c · x|). noise: f32[], σ_r of the linear reward (0 for logistic).
    reward: static, one of `REWARDS`. interaction: static, one of `INTERACTIONS`.
    """
    slopes: jax.Array
    intercepts: jax.Array
    pairs: jax.Array
    relevance: jax.Array
    type_directions: jax.Array
    type_scales: jax.Array
    noise: jax.Array
    reward: str = field(default="logistic")
    interaction: str = field(default="additive")

    def __post_init__(self):
        if self.reward not in REWARDS or self.interaction not in INTERACTIONS:
            raise ValueError(f"SlotWorld.reward must be one of {REWARDS} and interaction one of {INTERACTIONS}, "
                             f"got {self.reward!r}, {self.interaction!r}")
        if isinstance(self.slopes, jax.core.Tracer):
            return
        d, a = np.shape(self.slopes) if np.ndim(self.slopes) == 2 else (None, None)
        t, k = (np.shape(self.relevance)[:2] if np.ndim(self.relevance) == 3 else (None, None))
        expected = {"slopes": (d, a), "intercepts": (a,), "pairs": (a, a), "relevance": (t, k, k),
                    "type_directions": (t, d), "type_scales": (t,), "noise": ()}
        for name, shape in expected.items():
            if d is None or t is None or np.shape(getattr(self, name)) != shape:
                raise ValueError(f"SlotWorld.{name} must have shape {list(shape)} (slopes [d, A], relevance "
                                 f"[T, K, K]), got {list(np.shape(getattr(self, name)))}")
        relevance = np.asarray(self.relevance)
        if relevance.dtype != np.bool_ or not relevance[:, np.arange(k), np.arange(k)].all():
            raise ValueError("SlotWorld.relevance must be a bool mask [T, K, K] whose diagonal is True (the reward "
                             "at a slot depends on its own action)")
        if not (np.isfinite(float(self.noise)) and float(self.noise) >= 0):
            raise ValueError(f"SlotWorld.noise must be a finite number >= 0, got {float(self.noise)}")

    @property
    def num_slots(self) -> int:
        return self.relevance.shape[1]

    @property
    def num_actions(self) -> int:
        return self.intercepts.shape[0]


class SlotLog(NamedTuple):
    """A log of slot-wise slates: contexts f32[N, d], each round's user type i32[N], the slates
    i32[N, K] (action ids, repeats allowed) and the slot rewards f32[N, K]."""
    contexts: jax.Array
    types: jax.Array
    slates: jax.Array
    rewards: jax.Array


def linear_logits(key: jax.Array, dim: int, num_actions: int) -> tuple[jax.Array, jax.Array]:
    """Open Bandit Pipeline's base logit (`logistic_reward_function` of degree 1 with one-hot
    action features): g(x, a) = θ_x·x + θ_a[a] + xᵀM[:, a] + constants with every coefficient
    ~ U(−1, 1), standardised over x ~ N(0, I_d) and a uniform action to mean 0 and variance 1 (OBP
    standardises over each batch instead). Returns (slopes f32[d, A], intercepts f32[A])."""
    k_shared, k_action, k_intercept = jax.random.split(key, 3)
    shared = jnp.sum(jax.random.uniform(k_shared, (2, dim), minval=-1.0, maxval=1.0), axis=0)   # θ_x and M's row
    slopes = shared[:, None] + jax.random.uniform(k_action, (dim, num_actions), minval=-1.0, maxval=1.0)
    intercepts = jnp.sum(jax.random.uniform(k_intercept, (2, num_actions), minval=-1.0, maxval=1.0), axis=0)
    centred = intercepts - jnp.mean(intercepts)
    scale = jnp.sqrt(jnp.mean(jnp.sum(slopes ** 2, axis=0) + centred ** 2))
    return slopes / scale, centred / scale


def symmetric_pairs(key: jax.Array, num_actions: int, scale: float = 1.0) -> jax.Array:
    """A symmetric interaction matrix W whose lower triangle (diagonal included) is N(0, scale²)
    (Open Bandit Pipeline's `generate_symmetric_matrix`).  f32[A, A]."""
    lower = jnp.tril(scale * jax.random.normal(key, (num_actions, num_actions)))
    return lower + jnp.tril(lower, -1).T


def base_logits(world: SlotWorld, contexts) -> jax.Array:
    """z(x, a) for every context and action.  contexts f32[N, d] -> f32[N, A]."""
    return contexts @ world.slopes + world.intercepts


def type_probabilities(world: SlotWorld, contexts) -> jax.Array:
    """P(c | x) = softmax_c(ω_c |θ_c · x|).  contexts f32[N, d] -> f32[N, T]."""
    return jax.nn.softmax(world.type_scales * jnp.abs(contexts @ world.type_directions.T), axis=-1)


def _distance_weights(num_slots: int) -> jax.Array:
    """1 / (|k − j| + 1) of every pair of slots.  f32[K, K]."""
    slots = jnp.arange(num_slots)
    return 1.0 / (jnp.abs(slots[:, None] - slots[None, :]) + 1.0)


def _others(world: SlotWorld) -> jax.Array:
    """The relevance without the diagonal, as weights.  f32[T, K, K]."""
    return (world.relevance & ~jnp.eye(world.num_slots, dtype=bool)).astype(jnp.float32)


def _means(world: SlotWorld, own, interaction) -> jax.Array:
    """q from the base logit at each slot's own action and the summed interaction (same shapes)."""
    if world.reward == "logistic":
        return jax.nn.sigmoid(own + interaction)
    return 1.0 + jax.nn.sigmoid(own) + interaction


def reward_means(world: SlotWorld, contexts, slates, types) -> jax.Array:
    """q_k(x, a, c) of logged rounds (module docstring).  contexts f32[N, d], slates i32[N, K],
    types i32[N] -> f32[N, K]."""
    logits = base_logits(world, contexts)                                            # [N, A]
    own = jnp.take_along_axis(logits, slates, axis=1)                                # [N, K]
    # the types' relevance by a one-hot product, not ``_others(world)[types]``: XLA on CPU (jax 0.10.2)
    # miscompiles that gather fused with the pairs' one at 20,000 rounds (tested)
    others = jnp.einsum("nt,tkj->nkj", jax.nn.one_hot(types, world.relevance.shape[0]), _others(world))
    if world.interaction == "additive":
        interaction = jnp.einsum("nkj,nkj->nk", others, world.pairs[slates[:, :, None], slates[:, None, :]])
    else:
        interaction = -jnp.einsum("nkj,nj->nk", others * _distance_weights(world.num_slots), own)
    return _means(world, own, interaction)


def _slot_probs(probs, num_slots: int, num_actions: int) -> jax.Array:
    """probs f[A] (every slot) or f[K, A] as f32[K, A], checked where concrete."""
    probs = jnp.asarray(probs, jnp.float32)
    if probs.ndim == 1:
        probs = jnp.broadcast_to(probs, (num_slots, probs.shape[0]))
    if probs.shape != (num_slots, num_actions):
        raise ValueError(f"probs must be f[A] = [{num_actions}] for every slot or f[K, A] = [{num_slots}, "
                         f"{num_actions}] per slot, got shape {list(probs.shape)}")
    if not isinstance(probs, jax.core.Tracer):
        values = np.asarray(probs, np.float64)
        if not (np.all(values >= 0) and np.allclose(values.sum(axis=1), 1.0, atol=1e-5)):
            raise ValueError("probs must be probabilities: non-negative, each slot's summing to 1")
    return probs


def simulate(key: jax.Array, world: SlotWorld, probs, num_rounds: int, shared_noise: bool = False) -> SlotLog:
    """Log ``num_rounds`` rounds of the factorised policy ``probs`` (f[A] or f[K, A]) in ``world``
    (module docstring). shared_noise: the linear reward's noise ε drawn once per round and shared
    by its slots (the AIPS paper's code does so) instead of once per slot."""
    if not (isinstance(num_rounds, (int, np.integer)) and num_rounds >= 1):
        raise ValueError(f"num_rounds must be an integer >= 1, got {num_rounds!r}")
    return _simulate(key, world, _slot_probs(probs, world.num_slots, world.num_actions), int(num_rounds),
                     bool(shared_noise))


@functools.partial(jax.jit, static_argnames=("num_rounds", "shared_noise"))
def _simulate(key, world: SlotWorld, probs, num_rounds: int, shared_noise: bool) -> SlotLog:
    k_context, k_type, k_slate, k_reward = jax.random.split(key, 4)
    contexts = jax.random.normal(k_context, (num_rounds, world.slopes.shape[0]))
    types = jax.random.categorical(k_type, jnp.log(type_probabilities(world, contexts)), axis=-1).astype(jnp.int32)
    slates = jax.random.categorical(k_slate, jnp.log(probs), axis=-1,
                                    shape=(num_rounds, world.num_slots)).astype(jnp.int32)
    means = reward_means(world, contexts, slates, types)
    if world.reward == "logistic":
        rewards = (jax.random.uniform(k_reward, means.shape) < means).astype(jnp.float32)
    else:
        noise_shape = (num_rounds, 1) if shared_noise else means.shape
        rewards = means + world.noise * jax.random.normal(k_reward, noise_shape)
    return SlotLog(contexts, types, slates, rewards)


def slot_log_probability(probs, slates) -> jax.Array:
    """log π_k(a_k) of each logged slot under the factorised policy ``probs`` (f[A] or f[K, A]);
    its cumulative sum along the slots is the prefix log-probability of `simrec.ope.trajectory_rips`.
    slates i32[N, K] -> f32[N, K]."""
    slates = jnp.asarray(slates, jnp.int32)
    probs = _slot_probs(probs, slates.shape[1], jnp.shape(probs)[-1])
    return jnp.log(probs[jnp.arange(slates.shape[1])[None, :], slates])


def _linear_values(world: SlotWorld, probs, contexts) -> jax.Array:
    """E_c E_a Σ_k q_k | x of the linear reward, in closed form.  f32[N]."""
    logits = base_logits(world, contexts)                                            # [N, A]
    own = 1.0 + jax.nn.sigmoid(logits) @ probs.T                                     # [N, K]: E[1 + σ(z(x, a_k))]
    others = _others(world)                                                          # [T, K, K]
    if world.interaction == "additive":
        by_type = jnp.einsum("tkj,kj->t", others, probs @ world.pairs @ probs.T)[None, :]          # [1, T]
    else:
        by_type = -jnp.einsum("tkj,kj,nj->nt", others, _distance_weights(world.num_slots), logits @ probs.T)
    return jnp.sum(own, axis=1) + jnp.sum(type_probabilities(world, contexts) * by_type, axis=1)


def _slate_block(start, size: int, num_slots: int, num_actions: int) -> jax.Array:
    """Assignments start..start+size-1 of A actions to K slots, of the A^K in lexicographic order
    (slot 1 the most significant).  i32[size, K]."""
    index = start + jnp.arange(size)
    powers = num_actions ** jnp.arange(num_slots - 1, -1, -1)
    return ((index[:, None] // powers[None, :]) % num_actions).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("slot", "related", "block"))
def _slot_value(world: SlotWorld, probs, contexts, slot: int, related: tuple, block: int) -> jax.Array:
    """E_c E_a[q_k | x] of slot k = ``slot`` by summing over the A^m actions of the m slots ``related``
    to it under some type (itself included; the other slots' actions do not move q_k), ``block``
    assignments at a time.  f32[N]."""
    num_actions, size = world.num_actions, len(related)
    total = num_actions ** size
    columns = jnp.asarray(related)
    position = related.index(slot)
    logits = base_logits(world, contexts)                                            # [N, A]
    types = type_probabilities(world, contexts)                                      # [N, T]
    others = _others(world)[:, slot, columns]                                        # [T, m]
    decay = others * _distance_weights(world.num_slots)[slot, columns]

    def add_block(b, value):
        actions = _slate_block(b * block, block, size, num_actions)                  # [B, m]
        weight = jnp.where(b * block + jnp.arange(block) < total,
                           jnp.prod(probs[columns[None, :], actions], axis=1), 0.0)  # [B]
        mine = actions[:, position]
        own = logits[:, mine]                                                        # [N, B]
        for c in range(others.shape[0]):
            if world.interaction == "additive":
                interaction = jnp.sum(others[c] * world.pairs[mine[:, None], actions], axis=1)[None]   # [1, B]
            else:
                interaction = -jnp.einsum("j,nbj->nb", decay[c], logits[:, actions])
            value = value + types[:, c] * (_means(world, own, interaction) @ weight)
        return value

    return jax.lax.fori_loop(0, -(-total // block), add_block, jnp.zeros(contexts.shape[0]))


def context_values(world: SlotWorld, probs, contexts, *, max_slates: int = 10 ** 6) -> jax.Array:
    """E[Σ_k q_k | x] of the factorised policy ``probs`` (f[A] or f[K, A]) for each context, over
    its slates and the user type (module docstring): in closed form for the linear reward, by
    enumerating each slot's actions and those of the slots its reward depends on (at most
    ``max_slates`` terms per slot) for the logistic one. Exact up to float32.
    contexts f32[N, d] -> f32[N]; the policy's value is their mean over x ~ N(0, I_d)."""
    probs = _slot_probs(probs, world.num_slots, world.num_actions)
    contexts = jnp.asarray(contexts, jnp.float32)
    if contexts.ndim != 2 or contexts.shape[1] != world.slopes.shape[0]:
        raise ValueError(f"contexts must be f32[N, d] with d = {world.slopes.shape[0]}, got shape "
                         f"{list(contexts.shape)}")
    if world.reward == "linear":
        return jax.jit(_linear_values)(world, probs, contexts)
    relevance = np.asarray(world.relevance).any(axis=0)                               # [K, K] under some type
    related = [tuple(int(j) for j in np.flatnonzero(relevance[k])) for k in range(world.num_slots)]
    widest = max(len(r) for r in related)
    if world.num_actions ** widest > max_slates:
        raise ValueError(f"context_values enumerates the A^m = {world.num_actions}^{widest} actions of a slot and "
                         f"the slots its reward depends on (logistic reward), more than max_slates = {max_slates}; "
                         f"raise max_slates or use fewer slots or actions")
    value = jnp.zeros(contexts.shape[0])
    for k, columns in enumerate(related):
        block = max(1, min(world.num_actions ** len(columns), 2 ** 22 // max(contexts.shape[0] * len(columns), 1)))
        value = value + _slot_value(world, probs, contexts, k, columns, block)
    return value


# ---- Cascade-DR's recursive reward model ----------------------------------------------------------

def _features(contexts: np.ndarray, slates: np.ndarray, slot: int, num_actions: int) -> np.ndarray:
    """φ_k(x, a_1:k) of a linear Q-function: 1, x, the one-hot of a_k, x ⊗ one-hot(a_k), the counts
    of each action at slots 1..k−1, and one-hot(a_k) ⊗ those counts.  f64[N, 1 + d + A(d + 2 + A)]."""
    own = np.eye(num_actions)[slates[:, slot]]                                       # [N, A]
    counts = np.eye(num_actions)[slates[:, :slot]].sum(axis=1) if slot else np.zeros_like(own)
    n = contexts.shape[0]
    return np.concatenate([np.ones((n, 1)), contexts, own, (contexts[:, :, None] * own[:, None, :]).reshape(n, -1),
                           counts, (own[:, :, None] * counts[:, None, :]).reshape(n, -1)], axis=1)


def _target_mean(contexts, slates, slot: int, coefficients: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Σ_a π_k(a) Q̂_k(x, a_1:k-1, a) at slot k = ``slot`` of each round (Q̂_k linear in φ_k).  f64[N]."""
    num_actions = target.shape[1]
    mean = np.zeros(contexts.shape[0])
    for action in range(num_actions):
        changed = slates.copy()
        changed[:, slot] = action
        mean += target[slot, action] * (_features(contexts, changed, slot, num_actions) @ coefficients)
    return mean


def _fit_chain(contexts, slates, rewards, weights, target, num_actions: int, ridge: float) -> list[np.ndarray]:
    """Coefficients of Q̂_K, ..., Q̂_1 (returned in slot order), each a weighted ridge regression of
    r_k + Σ_a π_k+1(a) Q̂_k+1(x, a_1:k, a) on φ_k with weights w_1:k."""
    num_slots = slates.shape[1]
    coefficients = [None] * num_slots
    later = np.zeros(contexts.shape[0])
    for slot in range(num_slots - 1, -1, -1):
        features = _features(contexts, slates, slot, num_actions)
        w = weights[:, slot] / max(float(np.mean(weights[:, slot])), 1e-300)
        gram = features.T @ (w[:, None] * features) + ridge * np.eye(features.shape[1])
        coefficients[slot] = np.linalg.solve(gram, features.T @ (w * (rewards[:, slot] + later)))
        later = _target_mean(contexts, slates, slot, coefficients[slot], target)    # slot − 1's later rewards
    return coefficients


def recursive_reward_model(log: SlotLog, logging_probs, target_probs, *, ridge: float = 1.0,
                           folds: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Cascade-DR's recursive Q-function on a slot-wise log (Kiyohara et al., WSDM'22 Eq. 7):
    Q̂_k(x, a_1:k) ≈ E[r_k + Σ_{l>k} r_l | x, a_1:k] with the later slots drawn by the target, fitted
    from slot K down to 1 by weighted ridge regression (weights w_1:k = Π_{j<=k} π_j(a_j)/π₀_j(a_j),
    the importance-weighted fit of Open Bandit Pipeline's SlateRegressionModel; features `_features`)
    on the targets r_k + Σ_a π_k+1(a) Q̂_k+1(x, a_1:k, a). Cross-fitted over ``folds`` folds (round
    τ in fold τ mod folds gets the model fitted on the other folds; folds = 1 fits and predicts on
    the whole log, as the paper's code does).

    Returns (predicted, baseline), f64[N, K]: Q̂_k at the logged prefix and Σ_a π_k(a) Q̂_k(x, a_1:k-1, a),
    Cascade-DR's q̂ and q̄ (`simrec.ope.trajectory_cascade_dr`, whose sum telescopes to the recursive
    form when every slot is observed)."""
    contexts, slates, rewards = (np.asarray(log.contexts, np.float64), np.asarray(log.slates),
                                 np.asarray(log.rewards, np.float64))
    n, num_slots = slates.shape
    num_actions = int(np.shape(target_probs)[-1])
    logging = np.asarray(_slot_probs(logging_probs, num_slots, num_actions), np.float64)
    target = np.asarray(_slot_probs(target_probs, num_slots, num_actions), np.float64)
    if not (isinstance(folds, int) and 1 <= folds <= max(n // 2, 1)) or not (np.isfinite(ridge) and ridge > 0):
        raise ValueError(f"folds must be an integer in 1..N/2 and ridge a finite number > 0, got {folds!r}, {ridge!r}")
    slot = np.arange(num_slots)[None, :]
    weights = np.exp(np.cumsum(np.log(target[slot, slates]) - np.log(logging[slot, slates]), axis=1))
    predicted, baseline = np.zeros((n, num_slots)), np.zeros((n, num_slots))
    fold = np.arange(n) % folds
    for f in range(folds):
        held = fold == f
        train = ~held if folds > 1 else held
        chain = _fit_chain(contexts[train], slates[train], rewards[train], weights[train], target, num_actions, ridge)
        for k in range(num_slots):
            predicted[held, k] = _features(contexts[held], slates[held], k, num_actions) @ chain[k]
            baseline[held, k] = _target_mean(contexts[held], slates[held], k, chain[k], target)
    return predicted, baseline

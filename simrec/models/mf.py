"""Matrix factorisation scores f(u, i) = <θᵤ, θᵢ> + bᵢ (Lim Eq. 1) and the pairwise loss of its trainers.

Every scoring model in `simrec.models` is an `MF`: OPT-ADG and MF-AUC learn all three tables,
truncated SVD and iALS leave the bias at zero, popularity has zero-width factors and the item
counts as bias. Models are scored in user blocks with `scores(params, users)`, e.g.
``simrec.metrics.evaluate(lambda users: scores(params, users), relevant, exclude=train)``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from simrec import validate
from simrec.models.positives import check_users

__all__ = ["MF", "init_mf", "scores", "pairwise_loss", "pair_rows_loss"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class MF:
    """Factor model parameters: user: f32[U, k], item: f32[I, k], item_bias: f32[I] (k may be 0);
    a grid of M models trained together stacks them on a leading axis: f32[M, U, k], ...
    (`simrec.models.training.train_epochs_grid`)."""
    user: jax.Array
    item: jax.Array
    item_bias: jax.Array

    def __post_init__(self):
        leaves = (self.user, self.item, self.item_bias)
        if any(isinstance(x, jax.core.Tracer) or not hasattr(x, "shape") for x in leaves):
            return  # traced, or pytree plumbing (e.g. optax masks) carrying non-array leaves
        user, item, bias = (x.shape for x in leaves)
        stack = user[:-2]
        if (len(user) < 2 or item[:-2] != stack or len(item) != len(user) or user[-1] != item[-1]
                or bias != item[:-1]):
            raise ValueError(f"MF needs user [U, k], item [I, k], item_bias [I] (or all with the "
                             f"same leading axes [M, ...]); got shapes user {user}, item {item}, "
                             f"item_bias {bias}")


def init_mf(key: jax.Array, n_users: int, n_items: int, dim: int, scale: float) -> MF:
    """Initial parameters: θᵤ, θᵢ ~ N(0, scale² I_k) independently, bᵢ = 0.  Returns MF (f32)."""
    sizes = [validate.integer(name, value, low=1)
             for name, value in (("n_users", n_users), ("n_items", n_items), ("dim", dim))]
    return _init_mf(key, jnp.float32(validate.finite("scale", scale, low=0.0)), *sizes)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _init_mf(key: jax.Array, scale: jax.Array, n_users: int, n_items: int, dim: int) -> MF:
    user_key, item_key = jax.random.split(key)
    return MF(user=scale * jax.random.normal(user_key, (n_users, dim), jnp.float32),
              item=scale * jax.random.normal(item_key, (n_items, dim), jnp.float32),
              item_bias=jnp.zeros((n_items,), jnp.float32))


@jax.jit
def _scores(params: MF, users: jax.Array) -> jax.Array:
    return params.user[users] @ params.item.T + params.item_bias


def scores(params: MF, users) -> jax.Array:
    """f(u, i) = <θᵤ, θᵢ> + bᵢ for the given users and every item.  users: i32[B] -> f32[B, I].

    Jit-friendly: traced `users` skip the (host) range check."""
    if not isinstance(users, jax.core.Tracer):
        users = check_users(users, params.user.shape[0])
    return _scores(params, jnp.asarray(users, jnp.int32))


def pairwise_loss(params: MF, users: jax.Array, positives: jax.Array, negatives: jax.Array,
                  weights: jax.Array, active: jax.Array, l2: jax.Array) -> jax.Array:
    """Loss of one training step over a batch of (u, i⁺, n) triples.  Returns f32[].

        L = Σ_b w_b [f(u_b, n_b) - f(u_b, i⁺_b) + 1]₊ + (λ/2) a_b (‖θ_{u_b}‖² + ‖θ_{i⁺_b}‖² + ‖θ_{n_b}‖²)

    (Lim §4 and §6: one λ on the user and item vectors of the rows a step touches; the item bias is
    not regularised). users, positives, negatives: i32[B]; weights: f32[B] (treated as constants);
    active: bool[B] (pairs that take a step); l2: f32[] = λ. The sum over the batch means one SGD
    step with rate η equals B per-pair SGD steps of rate η taken at the same parameters.
    """
    return pair_rows_loss(params.user[users], params.item[positives], params.item[negatives],
                          params.item_bias[positives], params.item_bias[negatives], weights, active,
                          l2)


def pair_rows_loss(user: jax.Array, positive: jax.Array, negative: jax.Array,
                   positive_bias: jax.Array, negative_bias: jax.Array, weights: jax.Array,
                   active: jax.Array, l2: jax.Array) -> jax.Array:
    """`pairwise_loss` on the rows of the batch: user, positive, negative: f32[B, k] (``θ_{u_b}``,
    ``θ_{i⁺_b}``, ``θ_{n_b}``); positive_bias, negative_bias: f32[B]. Returns f32[]."""
    margin = jnp.sum(user * (negative - positive), axis=-1) + negative_bias - positive_bias + 1.0
    ranking = jax.lax.stop_gradient(weights) * jnp.maximum(margin, 0.0)
    norms = jnp.sum(user**2 + positive**2 + negative**2, axis=-1)
    return jnp.sum(ranking + 0.5 * l2 * jnp.where(active, norms, 0.0))

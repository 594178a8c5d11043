"""Stochastic training of MF-ADG (OPT-ADG) and MF-AUC: one jitted `fori_loop` per epoch.

A step samples `batch_size` pairs (u, i⁺) (u uniform over users with positives, i⁺ uniform in
O⁺ᵤ; Lim Alg. 1 line 2), draws one negative per pair with the model's rule, and applies the
optax `optimizer` to the gradient of `simrec.models.mf.pairwise_loss`: the sum over the batch of
the weighted hinge plus (λ/2)(‖θᵤ‖² + ‖θᵢ⁺‖² + ‖θₙ‖²) for every pair that takes a step. An epoch
is ⌈nnz(train)/batch_size⌉ steps, i.e. about one sampled pair per training positive.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import optax

from simrec.models import mf_auc, opt_adg
from simrec.models.data import PositiveSets, as_positive_csr, positive_sets, sample_pairs
from simrec.models.mf import MF, init_mf, pairwise_loss

__all__ = ["train", "train_epoch"]

_NEGATIVE_RULES = {opt_adg.OptADG: opt_adg.draw_negatives, mf_auc.MFAUC: mf_auc.draw_negatives}


@functools.partial(jax.jit, static_argnames=("optimizer", "batch_size"))
def train_epoch(key: jax.Array, spec, params: MF, opt_state, sets: PositiveSets, l2: jax.Array,
                steps: jax.Array, *, optimizer: optax.GradientTransformation, batch_size: int):
    """`steps` training steps of `spec` (an `OptADG` or `MFAUC`); step s uses `fold_in(key, s)`.

    steps is traced (i32[]), so one compilation serves any number of steps. Returns (params,
    opt_state, mean_loss: f32[] per sampled pair, step_share: f32[]), where step_share is the
    share of sampled pairs that took a step (for OPT-ADG: that found a violator).
    """
    draw_negatives = _NEGATIVE_RULES[type(spec)]

    def step(index, carry):
        params, opt_state, loss_sum, active_sum = carry
        pair_key, negative_key = jax.random.split(jax.random.fold_in(key, index))
        users, positives = sample_pairs(pair_key, sets, batch_size)
        negatives, weights, active = draw_negatives(negative_key, spec, params, sets, users, positives)
        loss, grads = jax.value_and_grad(pairwise_loss)(params, users, positives, negatives, weights,
                                                        active, l2)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, loss_sum + loss,
                active_sum + jnp.sum(active))

    zero = jnp.zeros((), jnp.float32)
    params, opt_state, loss_sum, active_sum = jax.lax.fori_loop(
        0, steps, step, (params, opt_state, zero, zero))
    pairs = jnp.maximum(steps, 1) * batch_size
    return params, opt_state, loss_sum / pairs, active_sum / pairs


def train(key: jax.Array, model_spec, train_matrix, *, epochs: int, batch_size: int,
          optimizer: optax.GradientTransformation, l2: float,
          callback: Callable[[int, MF, dict], None] | None = None) -> MF:
    """Fit MF-ADG (`OptADG` spec) or MF-AUC (`MFAUC` spec) to the positives of `train_matrix`.

    train_matrix: scipy.sparse [U, I] of observed positives. Parameters start at
    `init_mf(split(key)[0], U, I, spec.dim, spec.init_scale)`, so both models start from the same
    point for the same key and dim (epochs=0 returns that point); epoch e uses
    `fold_in(split(key)[1], e)`. Same key => identical parameters. `optimizer` is any optax
    transformation (e.g. `optax.sgd(0.05)`, `optax.adagrad(0.1)`), applied to the dense gradient
    of the step's loss; pass the same object to reuse the compiled epoch. `callback(epoch, params,
    {"loss": per-pair mean loss, "step_share": share of pairs that took a step})` runs on the
    host after each epoch. Returns MF.
    """
    if type(model_spec) not in _NEGATIVE_RULES:
        raise ValueError(f"model_spec must be one of {[t.__name__ for t in _NEGATIVE_RULES]}, "
                         f"got {type(model_spec).__name__}")
    for name, value, least in (("epochs", epochs, 0), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or int(value) != value or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value}")
    if not math.isfinite(l2) or l2 < 0:
        raise ValueError(f"l2 must be a finite number >= 0, got {l2}")
    if not (callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, "
                         f"got {type(optimizer).__name__}")
    csr = as_positive_csr(train_matrix, "train_matrix")
    n_users, n_items = csr.shape
    if n_items < 2:
        raise ValueError(f"train_matrix needs at least 2 items to draw negatives, got {n_items}")
    sets = positive_sets(csr)
    init_key, loop_key = jax.random.split(key)
    params = init_mf(init_key, n_users, n_items, model_spec.dim, model_spec.init_scale)
    opt_state = optimizer.init(params)
    steps = -(-csr.nnz // int(batch_size))
    for epoch in range(int(epochs)):
        params, opt_state, loss, step_share = train_epoch(
            jax.random.fold_in(loop_key, epoch), model_spec, params, opt_state, sets,
            jnp.float32(l2), jnp.int32(steps), optimizer=optimizer, batch_size=int(batch_size))
        if callback is not None:
            callback(epoch, params, {"loss": float(loss), "step_share": float(step_share)})
    return params

"""Training on the planted world (conftest.py): MF-ADG, MF-AUC, iALS and SVD recover held-out items;
the row-sparse step against the dense optax step on the full tables.

The bar is the ADG of uniformly random scores (mean + 6 SD over 30 seeds) and popularity's ADG.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.sparse as sp

from simrec.models import MFAUC, OptADG, ials, init_mf, popularity, svd, train
from simrec.models.mf import pairwise_loss
from simrec.models.training import sparse_step


@pytest.mark.parametrize("model", ["adg", "auc"])
def test_mf_recovers_planted_preferences_and_is_reproducible(world, request, model):
    params = request.getfixturevalue(f"mf_{model}")
    spec = getattr(world, f"{model}_spec")
    quality = world.adg_of(params)
    assert quality > world.random_bar
    assert quality > world.adg_of(popularity(world.train))
    again = train(jax.random.key(0), spec, world.train, **world.training)
    other = train(jax.random.key(1), spec, world.train, **world.training)
    for name in ("user", "item", "item_bias"):
        np.testing.assert_array_equal(getattr(params, name), getattr(again, name))
        assert not np.array_equal(getattr(params, name), getattr(other, name))


def test_mf_adg_and_mf_auc_start_from_the_same_parameters(world):
    key = jax.random.key(3)
    settings = dict(epochs=0, batch_size=10, optimizer=world.optimizer, l2=0.0)
    adg = train(key, OptADG(dim=6, init_scale=0.2), world.train, **settings)
    auc = train(key, MFAUC(dim=6, init_scale=0.2), world.train, **settings)
    init = init_mf(jax.random.split(key)[0], world.n_users, world.n_items, 6, 0.2)
    for name in ("user", "item", "item_bias"):
        np.testing.assert_array_equal(getattr(adg, name), getattr(auc, name))
        np.testing.assert_array_equal(getattr(adg, name), getattr(init, name))
    assert float(np.std(init.user)) == pytest.approx(0.2, rel=0.05)


def test_ials_and_svd_recover_planted_preferences(world):
    popular = world.adg_of(popularity(world.train))
    factors = ials(jax.random.key(0), world.train, dim=8, l2=0.1, unobserved_weight=0.1, iterations=5)
    assert world.adg_of(factors) > max(world.random_bar, popular)
    assert world.adg_of(svd(world.train, 3)) > max(world.random_bar, popular)


def test_train_progress_callback(world):
    seen = []
    train(jax.random.key(0), world.adg_spec, world.train, **(world.training | dict(epochs=2)),
          callback=lambda epoch, params, stats: seen.append((epoch, stats)))
    assert [epoch for epoch, _ in seen] == [0, 1]
    assert all(0 < stats["step_share"] <= 1 and stats["loss"] > 0 for _, stats in seen)


@pytest.mark.parametrize("change, argument", [
    (dict(epochs=-1), "epochs"), (dict(batch_size=0), "batch_size"), (dict(l2=-1.0), "l2"),
    (dict(l2=float("nan")), "l2"), (dict(optimizer="sgd"), "optimizer"),
    (dict(model_spec="OptADG"), "model_spec"),
    (dict(train_matrix=sp.csr_matrix((5, 4))), "train_matrix"),
    (dict(train_matrix=sp.csr_matrix(np.ones((5, 1)))), "2 items"),
])
def test_train_validation_names_the_argument(world, change, argument):
    kwargs = dict(model_spec=OptADG(dim=2), train_matrix=sp.csr_matrix(np.eye(5)), epochs=1,
                  batch_size=4, optimizer=world.optimizer, l2=0.1) | change
    with pytest.raises(ValueError, match=argument):
        train(jax.random.key(0), **kwargs)


@pytest.mark.parametrize("field", ["dim", "init_scale"])
def test_mf_auc_spec_validation(field):
    with pytest.raises(ValueError, match=field):
        MFAUC(**{field: -1})


@pytest.mark.parametrize("optimizer", [optax.sgd(0.05), optax.adagrad(0.1)], ids=["sgd", "adagrad"])
def test_row_sparse_step_equals_the_dense_step(optimizer):
    """Five steps of `sparse_step` == five optax steps on the full tables with the gradient of
    `pairwise_loss` over all rows. Batches of 12 pairs over 6 items repeat items (also as positive
    and negative of one pair) and users; 20 users leave some rows untouched, which must not move.
    Tolerance: float32 rounding of the differently ordered sums of repeated rows' gradients."""
    n_users, n_items, batch, l2 = 20, 6, 12, jnp.float32(0.3)
    rng = np.random.default_rng(0)
    params = init_mf(jax.random.key(0), n_users, n_items, 3, 0.5)
    params = dataclasses.replace(params, item_bias=jnp.asarray(rng.normal(size=n_items), jnp.float32))
    dense, dense_state = params, optimizer.init(params)
    sparse, sparse_state = params, optimizer.init(params)
    owners = (jnp.full((n_users,), -1, jnp.int32), jnp.full((n_items,), -1, jnp.int32))
    step = jax.jit(sparse_step, static_argnums=0)
    touched = np.zeros(n_users, bool)
    for index in range(5):
        users = rng.integers(0, n_users // 2, batch)          # users 10..19 are never touched
        positives, negatives = rng.integers(0, n_items, (2, batch))
        active = rng.random(batch) < 0.8
        weights = np.where(active, rng.random(batch), 0.0).astype(np.float32)
        touched[users] = True
        grads = jax.grad(pairwise_loss)(dense, users, positives, negatives, weights, active, l2)
        updates, dense_state = optimizer.update(grads, dense_state, dense)
        dense = optax.apply_updates(dense, updates)
        sparse, sparse_state, owners, _ = step(optimizer, sparse, sparse_state, owners,
                                               jnp.int32(2 * batch * index), users, positives,
                                               negatives, weights, active, l2)
    for got, want in zip(jax.tree.leaves((sparse, sparse_state)), jax.tree.leaves((dense, dense_state))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sparse.user[~touched], params.user[~touched])
    assert not np.allclose(sparse.user[touched], params.user[touched])

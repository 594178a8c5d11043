"""Training on the planted world (conftest.py): MF-ADG, MF-AUC, iALS and SVD recover held-out items;
the row-sparse step against the dense optax step on the full tables; the pair-sampling option;
grids trained together (`train_epochs_grid`, `fit_grid`) against members trained alone.

The bar is the ADG of uniformly random scores (mean + 6 SD over 30 seeds) and popularity's ADG.
"""
import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.sparse as sp

from simrec import models
from simrec.models import MFAUC, OptADG, ials, init_mf, popularity, svd, train
from simrec.models.mf import pairwise_loss
from simrec.models.training import member, sparse_step, train_epochs, train_epochs_grid


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


@pytest.mark.parametrize("field", ["dim", "init_scale", "sampling"])
def test_mf_auc_spec_validation(field):
    with pytest.raises(ValueError, match=field):
        MFAUC(**{field: -1})


@pytest.mark.parametrize("model", ["adg", "auc"])
def test_positive_sampling_learns_and_differs_from_user_sampling(world, model):
    """sampling="positive" is a different run (other pairs) that also recovers the planted items."""
    spec = world.adg_spec if model == "adg" else world.auc_spec
    positive = dataclasses.replace(spec, sampling="positive")
    params = train(jax.random.key(0), positive, world.train, **world.training)
    assert world.adg_of(params) > world.random_bar
    user = train(jax.random.key(0), spec, world.train, **world.training)
    assert not np.allclose(params.user, user.user)


def _assert_close(a, b) -> None:
    """Equal up to float32 rounding of the batched vs the single program (bit-equal on this CPU
    for a few epochs; rounding grows with the rate and the epochs)."""
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("spec", [OptADG(dim=4, gamma=10.0, chunk_size=4, search_width=4),
                                  MFAUC(dim=4, sampling="positive")], ids=["adg", "auc-positive"])
def test_grid_members_equal_runs_alone(world, spec):
    """Member m of `train_epochs_grid` after every epoch == `train_epochs` with its λ and rate
    (float32 rounding only; the same program per member, batched)."""
    l2s, rates = [0.0, 0.05, 0.5], [0.2, 0.05, 0.1]
    grid = list(itertools.islice(train_epochs_grid(
        jax.random.key(1), spec, world.train, batch_size=64, make_optimizer=optax.adagrad, l2s=l2s,
        learning_rates=rates), 4))
    assert grid[0].loss.shape == (3,) and grid[-1].pairs == 3 * -(-world.train.nnz // 64) * 64
    for m, (l2, rate) in enumerate(zip(l2s, rates)):
        alone = itertools.islice(train_epochs(jax.random.key(1), spec, world.train, batch_size=64,
                                              optimizer=optax.adagrad(rate), l2=l2), 4)
        for together, single in zip(grid, alone):
            _assert_close(member(together.params, m), single.params)
            np.testing.assert_allclose(together.loss[m], single.loss, rtol=1e-5)


@pytest.mark.parametrize("change, argument", [
    (dict(l2s=[0.1, -1.0], learning_rates=[0.1, 0.1]), r"l2s\[1\]"),
    (dict(l2s=[0.1], learning_rates=[0.1, 0.2]), "equal length"),
    (dict(l2s=[], learning_rates=[]), "non-empty"),
    (dict(learning_rates=[float("nan")]), r"learning_rates\[0\]"),
    (dict(make_optimizer=0.1), "make_optimizer"),
    (dict(batch_size=0), "batch_size"),
])
def test_train_epochs_grid_validation_names_the_argument(world, change, argument):
    kwargs = dict(batch_size=4, make_optimizer=optax.sgd, l2s=[0.1], learning_rates=[0.1]) | change
    with pytest.raises(ValueError, match=argument):
        train_epochs_grid(jax.random.key(0), OptADG(dim=2), world.train, **kwargs)


def _specs(early_stopping=None):
    base = models.MFSpec(OptADG(dim=4, gamma=10.0, chunk_size=4, search_width=4), l2=0.0,
                         learning_rate=0.1, batch_size=64, early_stopping=early_stopping)
    return [dataclasses.replace(base, l2=l2, learning_rate=rate)
            for l2, rate in [(0.001, 0.3), (0.03, 0.1), (1.0, 0.03), (0.1, 1.0)]]


def test_fit_grid_trains_mf_members_together_equal_to_fit(world):
    """`fit_grid` on MFSpecs differing in l2 / learning_rate (plus an MF-AUC spec, fitted alone)
    == `fit` of each, parameters within float32 rounding."""
    specs = _specs() + [models.MFSpec(MFAUC(dim=4), l2=0.01, learning_rate=0.1, batch_size=64)]
    pairs = 3 * world.train.nnz
    grid = models.fit_grid(jax.random.key(2), specs, world.train, pairs=pairs)
    for spec, model in zip(specs, grid):
        alone = models.fit(jax.random.key(2), spec, world.train, pairs=pairs)
        assert model.spec == spec and model.curve == ()
        _assert_close(model.params, alone.params)


def test_fit_grid_early_stops_each_member_on_its_own_curve(world):
    """With early stopping every member gets the curve and best checkpoint `fit` gives it alone,
    although the members stop at different epochs (checked: not all curves have one length)."""
    valid = sp.csr_matrix(world.held_out)
    rule = models.EarlyStopping(every=world.train.nnz, metric="adg", patience=2)
    specs = _specs(rule)
    pairs = 12 * world.train.nnz
    grid = models.fit_grid(jax.random.key(3), specs, world.train, validation=valid, pairs=pairs)
    for spec, model in zip(specs, grid):
        alone = models.fit(jax.random.key(3), spec, world.train, validation=valid, pairs=pairs)
        assert [p for p, _ in model.curve] == [p for p, _ in alone.curve]
        # float rounding can swap near-tied scores: a few 1e-6 of ADG
        np.testing.assert_allclose([v for _, v in model.curve], [v for _, v in alone.curve],
                                   atol=1e-4)
        _assert_close(model.params, alone.params)
    assert len({len(model.curve) for model in grid}) > 1
    with pytest.raises(ValueError, match="needs validation"):
        models.fit_grid(jax.random.key(3), specs, world.train, pairs=pairs)


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

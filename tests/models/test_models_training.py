"""Training on the planted world (conftest.py): MF-ADG, MF-AUC, iALS and SVD recover held-out items.

The bar is the ADG of uniformly random scores (mean + 6 SD over 30 seeds) and popularity's ADG.
"""
import jax
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models import MFAUC, OptADG, ials, init_mf, popularity, svd, train


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

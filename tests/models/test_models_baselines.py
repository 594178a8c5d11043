"""Popularity, truncated SVD, iALS and fold-in against dense closed-form references; MF scoring."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models import MF, fold_in, ials, init_mf, popularity, scores, svd


def _binary(seed, shape=(30, 20), density=0.2):
    rng = np.random.default_rng(seed)
    dense = rng.random(shape) < density
    dense[0, :3] = True  # no empty matrix
    return dense


def test_scores_are_inner_products_plus_bias():
    rng = np.random.default_rng(0)
    params = MF(jnp.asarray(rng.standard_normal((5, 3)), jnp.float32),
                jnp.asarray(rng.standard_normal((7, 3)), jnp.float32), jnp.arange(7.0))
    users = np.array([4, 0, 4])
    expected = np.asarray(params.user)[users] @ np.asarray(params.item).T + np.arange(7.0)
    np.testing.assert_allclose(scores(params, users), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="users"):
        scores(params, np.array([5]))
    with pytest.raises(ValueError, match="users"):
        scores(params, np.array([[0]]))
    with pytest.raises(ValueError, match="item_bias"):
        MF(params.user, params.item, jnp.zeros(6))
    with pytest.raises(ValueError, match="dim"):
        init_mf(jax.random.key(0), 5, 7, 0, 1.0)


def test_popularity_scores_are_item_counts():
    dense = _binary(0)
    model = popularity(sp.csr_matrix(dense.astype(float)))
    counts = dense.sum(axis=0)
    np.testing.assert_array_equal(scores(model, np.arange(30)), np.broadcast_to(counts, dense.shape))


def test_svd_matches_dense_numpy_reconstruction():
    dense = _binary(1).astype(float)
    left, singular, right_t = np.linalg.svd(dense)
    for rank in (1, 4):
        expected = (left[:, :rank] * singular[:rank]) @ right_t[:rank]
        got = scores(svd(sp.csr_matrix(dense), rank), np.arange(dense.shape[0]))
        np.testing.assert_allclose(got, expected, atol=1e-5)
    with pytest.raises(ValueError, match="dim"):
        svd(sp.csr_matrix(dense), 20)


def _weighted_least_squares(item_factors, row, l2, unobserved_weight, alpha):
    """argmin_x Σ_i w_i (p_i - x·y_i)² + λ‖x‖², from the full dense weighted normal equations."""
    y = np.asarray(item_factors, np.float64)
    target = row.astype(float)
    weight = np.where(row, 1.0 + alpha, unobserved_weight)
    lhs = y.T @ (weight[:, None] * y) + l2 * np.eye(y.shape[1])
    return np.linalg.solve(lhs, y.T @ (weight * target))


@pytest.mark.parametrize("unobserved_weight, alpha", [(0.1, 0.0), (1.0, 9.0), (0.0, 0.5)])
def test_fold_in_solves_the_dense_weighted_least_squares(unobserved_weight, alpha):
    dense = _binary(2)
    dense[5] = False  # an empty row folds in to the zero vector
    item_factors = jax.random.normal(jax.random.key(0), (20, 4))
    got = fold_in(item_factors, sp.csr_matrix(dense), 0.3, unobserved_weight=unobserved_weight,
                  alpha=alpha, block_entries=8)  # small blocks: several blocks per degree group
    expected = np.stack([_weighted_least_squares(item_factors, row, 0.3, unobserved_weight, alpha)
                         for row in dense])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got)[5] == 0)


def _ials_objective(params, dense, l2, unobserved_weight, alpha):
    prediction = np.asarray(params.user, np.float64) @ np.asarray(params.item, np.float64).T
    weight = np.where(dense, 1.0 + alpha, unobserved_weight)
    return (np.sum(weight * (dense - prediction) ** 2)
            + l2 * (np.sum(np.asarray(params.user, np.float64) ** 2)
                    + np.sum(np.asarray(params.item, np.float64) ** 2)))


def test_ials_decreases_its_objective_and_fold_in_reproduces_users():
    dense = _binary(3)
    settings = dict(l2=0.2, unobserved_weight=0.05, alpha=2.0)
    objective = []
    model = ials(jax.random.key(0), sp.csr_matrix(dense), dim=5, iterations=6,
                 callback=lambda _, params: objective.append(_ials_objective(params, dense,
                                                                             **settings)),
                 **settings)
    assert len(objective) == 6
    assert np.all(np.diff(objective) <= 1e-6 * objective[0])
    assert np.all(np.asarray(model.item_bias) == 0)
    for user in (0, 7, 29):
        folded = fold_in(model.item, sp.csr_matrix(dense[user:user + 1]), **settings)
        np.testing.assert_allclose(folded[0], model.user[user], rtol=1e-5, atol=1e-6)
    again = ials(jax.random.key(0), sp.csr_matrix(dense), dim=5, iterations=6, **settings)
    np.testing.assert_array_equal(again.user, model.user)


@pytest.mark.parametrize("change, argument", [
    (dict(l2=0.0), "l2"), (dict(unobserved_weight=-0.1), "unobserved_weight"),
    (dict(alpha=-1.0), "alpha"), (dict(iterations=0), "iterations"), (dict(dim=0), "dim"),
    (dict(train=sp.csr_matrix((3, 3))), "train"),
])
def test_ials_validation_names_the_argument(change, argument):
    kwargs = dict(train=sp.csr_matrix(np.eye(3)), dim=2, l2=0.1) | change
    with pytest.raises(ValueError, match=argument):
        ials(jax.random.key(0), **kwargs)


def test_fold_in_validation():
    with pytest.raises(ValueError, match="item_factors"):
        fold_in(np.ones((4, 2)), sp.csr_matrix(np.eye(3)), 0.1)
    with pytest.raises(ValueError, match="item_factors"):
        fold_in(np.full((3, 2), np.nan), sp.csr_matrix(np.eye(3)), 0.1)
    with pytest.raises(ValueError, match="l2"):
        fold_in(np.ones((3, 2)), sp.csr_matrix(np.eye(3)), -0.1)

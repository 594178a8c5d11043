"""MF-RMSE and AllRank (Steck RecSys'13 Eq. 11-12) by weighted ALS, checked against a dense
brute-force weighted least-squares solve written here from the objective."""
import jax
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models import scores
from simrec.models.explicit import allrank, fold_in_ratings, mf_rmse, weighted_als


def _ratings(seed=0, users=30, items=20, density=0.3):
    rng = np.random.default_rng(seed)
    observed = rng.random((users, items)) < density
    observed[0] = False                                  # one user without ratings
    values = rng.integers(1, 6, (users, items)).astype(np.float64)
    return sp.csr_matrix(np.where(observed, values, 0.0)), observed, values


def _brute_force_rows(item_factors, observed, values, l2, offset, imputed, missing_weight):
    """argmin_x Σ_i W_i [(R*_i − r0 − x·y_i)² + λ‖x‖²] per row, from the dense weights and
    targets (normal equations of the weighted ridge regression, float64)."""
    y = np.asarray(item_factors, np.float64)
    out = []
    for row_observed, row_values in zip(observed, values):
        weight = np.where(row_observed, 1.0, missing_weight)
        target = np.where(row_observed, row_values, imputed) - offset
        if weight.sum() == 0:
            out.append(np.zeros(y.shape[1]))
            continue
        lhs = (y * weight[:, None]).T @ y + l2 * weight.sum() * np.eye(y.shape[1])
        out.append(np.linalg.solve(lhs, (y * weight[:, None]).T @ target))
    return np.array(out)


@pytest.mark.parametrize("missing_weight, imputed, offset", [(0.0, 0.0, 3.2), (0.05, 2.0, 2.0),
                                                             (0.2, 1.0, 3.0)])
def test_fold_in_matches_dense_weighted_least_squares(missing_weight, imputed, offset):
    matrix, observed, values = _ratings()
    items = np.random.default_rng(1).normal(size=(20, 4))
    got = fold_in_ratings(items, matrix, l2=0.3, offset=offset, imputed=imputed,
                          missing_weight=missing_weight)
    expected = _brute_force_rows(items, observed, values, 0.3, offset, imputed, missing_weight)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fit", [lambda k, r: mf_rmse(k, r, dim=4, l2=0.1, iterations=4),
                                 lambda k, r: allrank(k, r, dim=4, l2=0.1, missing_weight=0.05,
                                                      iterations=4)])
def test_fold_in_of_a_training_user_reproduces_its_trained_vector(fit):
    matrix, _, _ = _ratings(2)
    model = fit(jax.random.key(0), matrix)
    offset = float(model.item_bias[0])
    weight = 0.0 if offset == pytest.approx(matrix.data.mean()) else 0.05
    imputed = offset if weight else 0.0
    again = fold_in_ratings(model.item, matrix[5:12], l2=0.1, offset=offset, imputed=imputed,
                            missing_weight=weight)
    np.testing.assert_allclose(np.asarray(again), np.asarray(model.user[5:12]), rtol=1e-4,
                               atol=1e-5)


def _objective(model, observed, values, l2, imputed, missing_weight):
    pred = np.asarray(model.user, np.float64) @ np.asarray(model.item, np.float64).T \
        + np.asarray(model.item_bias, np.float64)
    weight = np.where(observed, 1.0, missing_weight)
    target = np.where(observed, values, imputed)
    reg = l2 * (weight.sum(1) @ (np.asarray(model.user, np.float64) ** 2).sum(1)
                + weight.sum(0) @ (np.asarray(model.item, np.float64) ** 2).sum(1))
    return float((weight * (target - pred) ** 2).sum() + reg)


def test_als_objective_never_increases_and_mf_rmse_fits_observed_ratings():
    matrix, observed, values = _ratings(3, users=40, items=25, density=0.5)
    losses = [_objective(allrank(jax.random.key(0), matrix, dim=3, l2=0.05, missing_weight=0.05,
                                 iterations=n), observed, values, 0.05, 2.0, 0.05)
              for n in (1, 2, 4, 8)]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(losses, losses[1:]))
    model = mf_rmse(jax.random.key(0), matrix, dim=8, l2=0.01, iterations=15)
    pred = np.asarray(scores(model, np.arange(40)))
    rmse = np.sqrt(np.mean((pred[observed] - values[observed]) ** 2))
    baseline = np.sqrt(np.mean((values[observed] - values[observed].mean()) ** 2))
    assert rmse < 0.5 * baseline                   # a rank-8 fit of 12 ratings per user


def test_allrank_scores_rated_items_above_unrated_ones_on_average():
    """Imputing 2 stars on missing pairs makes 'who rated what' visible in the scores (Steck §2.5)."""
    matrix, observed, _ = _ratings(4, users=60, items=40, density=0.2)
    model = allrank(jax.random.key(0), matrix, dim=6, l2=0.04, missing_weight=0.05, iterations=6)
    pred = np.asarray(scores(model, np.arange(60)))
    assert pred[observed].mean() > pred[~observed].mean() + 0.5


@pytest.mark.parametrize("kwargs", [dict(l2=0.0), dict(missing_weight=1.5), dict(offset=np.nan)])
def test_bad_arguments_raise(kwargs):
    matrix, _, _ = _ratings()
    args = dict(dim=2, l2=0.1, offset=3.0, missing_weight=0.1) | kwargs
    with pytest.raises(ValueError):
        weighted_als(jax.random.key(0), matrix, **args)


def test_mismatched_catalogue_and_duplicates_raise():
    matrix, _, _ = _ratings()
    with pytest.raises(ValueError, match="same catalogue"):
        fold_in_ratings(np.ones((7, 2)), matrix, l2=0.1, offset=3.0)
    duplicated = sp.coo_matrix(([4.0, 5.0], ([0, 0], [1, 1])), shape=(2, 3))
    with pytest.raises(ValueError, match="repeated"):
        mf_rmse(jax.random.key(0), duplicated, dim=2)
    with pytest.raises(ValueError, match="missing_weight > 0"):
        allrank(jax.random.key(0), matrix, missing_weight=0.0)

"""MF-RMSE and AllRank (Steck RecSys'13 Eq. 11-12) by weighted ALS, checked against a dense
brute-force weighted least-squares solve written here from the objective."""
import jax
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models import init_mf, scores
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


# ---- biased MF-RMSE (Koren, Bell & Volinsky 2009): R̂ = r0 + b_u + b_i + x_u·y_i ----------------

def _biased_objective(model, observed, values, l2):
    """Σ_obs (r − R̂)² + λ Σ_u |O_u| (‖x_u‖² + b_u²) + λ Σ_i |O_i| (‖y_i‖² + b_i²), read from the
    rank-(k + 2) layout user (x, b_u, 1), item (y, 1, b_i)."""
    user, item = np.asarray(model.user, np.float64), np.asarray(model.item, np.float64)
    x, b_u, y, b_i = user[:, :-2], user[:, -2], item[:, :-2], item[:, -1]
    pred = float(model.item_bias[0]) + b_u[:, None] + b_i[None, :] + x @ y.T
    reg = l2 * (observed.sum(1) @ ((x ** 2).sum(1) + b_u ** 2) + observed.sum(0) @ ((y ** 2).sum(1) + b_i ** 2))
    return float((observed * (values - pred) ** 2).sum() + reg)


def test_biased_mf_rmse_stores_its_biases_as_two_extra_ranks_and_each_half_step_is_the_exact_solve():
    matrix, observed, values = _ratings(5, users=30, items=20, density=0.4)
    key, l2 = jax.random.key(3), 0.2
    offset = matrix.data.mean()
    one = mf_rmse(key, matrix, dim=3, l2=l2, iterations=1, biases=True)
    user, item = np.asarray(one.user, np.float64), np.asarray(one.item, np.float64)
    np.testing.assert_array_equal(user[:, -1], 1.0)
    np.testing.assert_array_equal(item[:, -2], 1.0)                             # (y, 1, b_i)
    np.testing.assert_allclose(np.asarray(one.item_bias), offset, rtol=1e-6)
    # the first item step solves (y_i, b_i) against the initial users (x_u, 1) with b_u = 0
    x0 = np.asarray(init_mf(key, 30, 20, 3, 0.1).user, np.float64)
    expected_item = _brute_force_rows(np.column_stack([x0, np.ones(30)]), observed.T, values.T, l2, offset, 0.0, 0.0)
    np.testing.assert_allclose(np.column_stack([item[:, :-2], item[:, -1]]), expected_item, rtol=1e-4, atol=1e-5)
    # then (x_u, b_u) against the items' (y_i, 1) and the targets r − r0 − b_i
    items_with_ones = np.column_stack([item[:, :-2], np.ones(20)])
    expected_user = _brute_force_rows(items_with_ones, observed, values - item[:, -1][None, :], l2, offset, 0.0, 0.0)
    np.testing.assert_allclose(user[:, :-1], expected_user, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(user[0, :-1], 0.0)                         # no ratings: no vector, no bias
    # fold_in_ratings with the items' biases is that user solve
    again = fold_in_ratings(items_with_ones, matrix, l2=l2, offset=float(one.item_bias[0]), item_bias=item[:, -1])
    np.testing.assert_allclose(np.asarray(again), user[:, :-1], rtol=1e-4, atol=1e-5)


def test_biased_als_objective_never_increases_and_biases_fit_what_rank_one_cannot():
    rng = np.random.default_rng(6)
    users, items = 60, 40
    observed = rng.random((users, items)) < 0.5
    values = np.clip(3.5 + rng.normal(0, 0.8, (users, 1)) + rng.normal(0, 0.8, (1, items))
                     + rng.normal(0, 0.3, (users, items)), 1, 5)
    matrix = sp.csr_matrix(np.where(observed, values, 0.0))
    losses = [_biased_objective(mf_rmse(jax.random.key(0), matrix, dim=1, l2=0.01, iterations=n, biases=True),
                                observed, values, 0.01) for n in (1, 2, 4, 8)]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(losses, losses[1:]))

    def rmse(model):
        pred = np.asarray(scores(model, np.arange(users)))
        return np.sqrt(np.mean((pred[observed] - values[observed]) ** 2))
    biased = rmse(mf_rmse(jax.random.key(0), matrix, dim=1, l2=0.01, iterations=20, biases=True))
    plain = rmse(mf_rmse(jax.random.key(0), matrix, dim=1, l2=0.01, iterations=20))
    # b_u + b_i is a rank-2 pattern: rank 1 with biases fits it to the noise (sd 0.3), rank 1 without cannot
    assert biased < 0.35 < plain


def test_biases_need_observed_ratings_only():
    matrix, _, _ = _ratings()
    with pytest.raises(ValueError, match="missing_weight=0"):
        weighted_als(jax.random.key(0), matrix, dim=2, l2=0.1, offset=3.0, missing_weight=0.1, biases=True)
    with pytest.raises(ValueError, match="missing_weight=0"):
        fold_in_ratings(np.ones((20, 2)), matrix, l2=0.1, offset=3.0, missing_weight=0.1, item_bias=np.zeros(20))

import math

import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models.knn import item_knn, item_knn_scores, kunn, kunn_grid, kunn_scores


def _inverse_root(count: int) -> float:
    return 0.0 if count == 0 else 1.0 / math.sqrt(count)


def _nearest(similarity_row, k: int, me: int) -> list[int]:
    """The k largest positive similarities of a row except `me`, compared as float32, ties to the
    lower index (the documented rule)."""
    candidates = [(-np.float32(s), j) for j, s in enumerate(similarity_row) if j != me and s > 0]
    return [j for _, j in sorted(candidates)[:k]]


def _brute_force_kunn(r: np.ndarray, user_k: int, item_k: int) -> np.ndarray:
    """Verstrepen & Goethals' KUNN in RecPack's form, written out with loops."""
    n_users, n_items = r.shape
    c_user, c_item = r.sum(axis=1), r.sum(axis=0)
    user_sim = np.zeros((n_users, n_users))
    for u in range(n_users):
        for v in range(n_users):
            if u != v:
                user_sim[u, v] = sum(r[u, i] * r[v, i] * _inverse_root(c_user[u])
                                     * _inverse_root(c_user[v]) * _inverse_root(c_item[i])
                                     for i in range(n_items))
    item_sim = np.zeros((n_items, n_items))
    for i in range(n_items):
        for j in range(n_items):
            if i != j:
                item_sim[i, j] = sum(r[u, i] * r[u, j] * _inverse_root(c_item[i])
                                     * _inverse_root(c_item[j]) * _inverse_root(c_user[u])
                                     for u in range(n_users))
    scores = np.zeros((n_users, n_items))
    for u in range(n_users):
        for i in range(n_items):
            user_term = sum(r[v, i] * user_sim[u, v] * _inverse_root(c_item[i])
                            for v in _nearest(user_sim[u], user_k, u))
            item_term = sum(r[u, j] * item_sim[i, j] * _inverse_root(c_user[u])
                            for j in _nearest(item_sim[i], item_k, i))
            scores[u, i] = user_term + item_term
    return scores


def _binary(seed: int, n_users: int, n_items: int, density: float = 0.35) -> np.ndarray:
    r = (np.random.default_rng(seed).random((n_users, n_items)) < density).astype(np.float64)
    r[:, 3] = 0.0                               # an item nobody holds
    r[5] = 0.0                                  # a user without history
    return r


@pytest.mark.parametrize("seed, user_k, item_k", [(0, 2, 3), (1, 1, 1), (2, 4, 20), (3, 30, 2)])
def test_kunn_matches_brute_force(seed, user_k, item_k):
    r = _binary(seed, 8, 10)
    model = kunn(sp.csr_matrix(r), user_k, item_k)
    users = np.array([7, 0, 5, 2])
    expected = _brute_force_kunn(r, user_k, item_k)[users]
    got = kunn_scores(model, users)
    assert got.dtype == np.float32 and got.shape == (4, 10)
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_kunn_grid_models_equal_single_models():
    r = _binary(4, 9, 11, density=0.45)
    grid = kunn_grid(r.astype(bool), [1, 3], [2, 5])
    assert sorted(grid) == [(1, 2), (1, 5), (3, 2), (3, 5)]
    users = np.arange(9)
    for (user_k, item_k), model in grid.items():
        assert (model.user_k, model.item_k) == (user_k, item_k)
        np.testing.assert_array_equal(kunn_scores(model, users),
                                      kunn_scores(kunn(r.astype(bool), user_k, item_k), users))
        np.testing.assert_allclose(kunn_scores(model, users),
                                   _brute_force_kunn(r, user_k, item_k), atol=1e-6)


def _brute_force_item_knn(r: np.ndarray, k: int) -> np.ndarray:
    n_users, n_items = r.shape
    c_item = r.sum(axis=0)
    sim = np.zeros((n_items, n_items))
    for i in range(n_items):
        for j in range(n_items):
            if i != j:
                sim[i, j] = sum(r[u, i] * r[u, j] for u in range(n_users)) \
                    * _inverse_root(c_item[i]) * _inverse_root(c_item[j])
    scores = np.zeros((n_users, n_items))
    for u in range(n_users):
        for j in np.flatnonzero(r[u]):
            for i in _nearest(sim[j], k, j):
                scores[u, i] += sim[j, i]
    return scores


@pytest.mark.parametrize("seed, k", [(0, 1), (1, 3), (2, 50)])
def test_item_knn_matches_brute_force(seed, k):
    r = _binary(seed, 9, 8, density=0.4)
    model = item_knn(sp.csr_matrix(r), k)
    users = np.arange(9)
    np.testing.assert_allclose(item_knn_scores(model, users), _brute_force_item_knn(r, k),
                               atol=1e-6)


def test_neighbour_ties_go_to_the_lower_index():
    # items 1 and 2 are equally similar to item 0 (cosine 1/sqrt(2)); with k = 1 item 0 keeps 1
    r = np.array([[1, 1, 0], [1, 0, 1]], dtype=bool)
    model = item_knn(r, 1)
    neighbours = model.neighbours.toarray()
    assert neighbours[0, 1] > 0 and neighbours[0, 2] == 0
    np.testing.assert_allclose(item_knn_scores(model, np.array([0]))[0],
                               [neighbours[1, 0], neighbours[0, 1], 0.0], atol=1e-7)


@pytest.mark.parametrize("k", [0, -2, 1.5, True])
def test_neighbourhood_sizes_are_validated(k):
    r = np.eye(3, dtype=bool)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        item_knn(r, k)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        kunn(r, 2, k)


def test_knn_inputs_are_validated():
    r = np.eye(3, dtype=bool)
    with pytest.raises(ValueError, match="at least one neighbourhood size"):
        kunn_grid(r, [], [2])
    with pytest.raises(ValueError, match=r"users must hold ids in \[0, 3\)"):
        kunn_scores(kunn(r, 1, 1), np.array([3]))
    with pytest.raises(ValueError, match="users must have shape"):
        item_knn_scores(item_knn(r, 1), np.array([[0]]))

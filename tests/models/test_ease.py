import numpy as np
import pytest
import scipy.sparse as sp

from simrec.metrics import evaluate
from simrec.models.ease import ease, ease_grid, ease_scores, ease_weights, gram_eigen


def _direct_ease(x: np.ndarray, l2: float) -> np.ndarray:
    """Steck's closed form by a direct float64 solve: B = I - P / diag(P), P = (XᵀX + λI)^-1."""
    n_items = x.shape[1]
    p = np.linalg.inv(x.T @ x + l2 * np.eye(n_items))
    b = np.eye(n_items) - p / np.diag(p)[None, :]
    np.fill_diagonal(b, 0.0)
    return b


def _matrix(seed: int, n_users: int, n_items: int) -> np.ndarray:
    """A random binary matrix with an empty item and two identical users (rank-deficient)."""
    x = (np.random.default_rng(seed).random((n_users, n_items)) < 0.4).astype(np.float64)
    x[:, 2] = 0.0
    x[1] = x[0]
    return x


@pytest.mark.parametrize("n_users, n_items", [(7, 12), (15, 6)])    # X Xᵀ and XᵀX branches
def test_ease_matches_direct_solve_on_a_grid(n_users, n_items):
    x = _matrix(n_users, n_users, n_items)
    l2s = [0.3, 2.0, 25.0]
    models = ease_grid(sp.csr_matrix(x), l2s)
    users = np.array([4, 0, 1])
    for l2, model in zip(l2s, models):
        reference = _direct_ease(x, l2)
        scale = np.abs(reference).max()
        weights = np.asarray(ease_weights(model))
        np.testing.assert_allclose(weights, reference, atol=2e-6 * scale)
        assert np.all(np.diag(weights) == 0)
        np.testing.assert_allclose(np.asarray(ease_scores(model, users)), x[users] @ reference,
                                   atol=1e-5 * scale)
        assert model.l2 == l2


def test_gram_eigen_reconstructs_the_gram_matrix():
    x = _matrix(3, 6, 10)
    eigen = gram_eigen(sp.csr_matrix(x))
    assert eigen.eigenvalues.shape == (np.linalg.matrix_rank(x),)
    reconstructed = (eigen.eigenvectors * eigen.eigenvalues) @ eigen.eigenvectors.T
    np.testing.assert_allclose(reconstructed, x.T @ x, atol=1e-10)
    np.testing.assert_allclose(eigen.eigenvectors.T @ eigen.eigenvectors,
                               np.eye(len(eigen.eigenvalues)), atol=1e-10)


def test_single_model_equals_grid_member_and_evaluates_in_blocks():
    x = _matrix(5, 9, 8)
    single = ease(x.astype(bool), 1.5)
    from_grid = ease_grid(x.astype(bool), [0.5, 1.5])[1]
    users = np.arange(9)
    np.testing.assert_array_equal(np.asarray(ease_scores(single, users)),
                                  np.asarray(ease_scores(from_grid, users)))
    relevant = np.random.default_rng(0).random((9, 8)) < 0.3
    relevant &= x == 0
    blocked = evaluate(lambda block: ease_scores(single, block), relevant, exclude=x.astype(bool),
                       metrics=("ndcg", "dcg@3"), block_size=4)
    dense = evaluate(np.asarray(ease_scores(single, users)), relevant, exclude=x.astype(bool),
                     metrics=("ndcg", "dcg@3"))
    for name in dense:
        np.testing.assert_array_equal(blocked[name], dense[name])


@pytest.mark.parametrize("l2", [0.0, -1.0, float("nan"), float("inf"), True])
def test_ease_rejects_bad_l2(l2):
    with pytest.raises(ValueError, match="l2"):
        ease(np.eye(3, dtype=bool), l2)


def test_ease_rejects_bad_inputs():
    with pytest.raises(ValueError, match="l2s is empty"):
        ease_grid(np.eye(3, dtype=bool), [])
    model = ease(np.eye(3, dtype=bool), 1.0)
    with pytest.raises(ValueError, match=r"users must hold ids in \[0, 3\)"):
        ease_scores(model, np.array([0, 3]))
    with pytest.raises(ValueError, match="users must hold integer ids"):
        ease_scores(model, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="train must be boolean"):
        ease(-np.eye(3), 1.0)

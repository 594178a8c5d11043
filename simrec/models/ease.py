"""EASE^R (Steck, WWW'19, "Embarrassingly Shallow Autoencoders for Sparse Data"), closed form.

With X the binary training matrix [U, I] and G = XᵀX, EASE^R's item-item weights are

    B(λ) = I - P diag(1 / diag(P)),   P = (G + λI)⁻¹,   so diag(B) = 0,

and user u's scores are X_u B. A grid of λ (Jeunen App. A sweeps 111 values) shares one
eigendecomposition: G has rank r <= min(U, I), G = V diag(w) Vᵀ over its r positive eigenvalues
(V: [I, r] orthonormal), and on the complement of span(V) G vanishes, so

    λ P(λ) = I - V diag(ρ) Vᵀ,   ρ_k = w_k / (w_k + λ),   λ P_jj = 1 - Σ_k V_jk² ρ_k.

The eigenpairs come from the smaller Gram matrix (X Xᵀ when U < I, via V = Xᵀ Q diag(w^-1/2)),
so the factorisation costs O(min(U, I)³) once, and scoring a block of B users costs
O(B · I · r) per λ without ever forming the [I, I] matrix B.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.sparse as sp

from simrec import validate
from simrec.models.positives import as_history_csr, as_positive_csr, check_users

__all__ = ["GramEigen", "EASE", "gram_eigen", "ease", "ease_grid", "ease_weights", "ease_scores",
           "ease_history_scores"]


@dataclass(frozen=True)
class GramEigen:
    """G = XᵀX = V diag(w) Vᵀ over G's positive eigenvalues (float64, host).

    eigenvalues: f64[r] = w > 0; eigenvectors: f64[I, r] = V with orthonormal columns.
    """
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray


@dataclass(frozen=True)
class EASE:
    """EASE^R at one λ in eigen form, for the users of `train` (rows = user histories X_u).

    train: bool CSR [U, I]; eigenvectors: f32[I, r] = V; shrinkage: f32[r] = ρ = w / (w + λ);
    self_weight: f32[I] = λ diag(P) (computed in float64); l2: λ.
    """
    train: sp.csr_matrix
    eigenvectors: jax.Array
    shrinkage: jax.Array
    self_weight: jax.Array
    l2: float


def gram_eigen(train) -> GramEigen:
    """Eigenpairs of G = XᵀX with eigenvalue > max(w) · max(U, I) · eps (numerical rank, as in
    numpy.linalg.matrix_rank).  train: bool [U, I] (sparse or dense).  Returns `GramEigen`.

    Uses the eigendecomposition of X Xᵀ = Q diag(w) Qᵀ when U < I (then V = Xᵀ Q w^-1/2), of G
    itself otherwise; both in float64 (LAPACK's MRRR driver).
    """
    x = as_positive_csr(train).astype(np.float64)
    n_users, n_items = x.shape
    small_gram = (x @ x.T if n_users < n_items else x.T @ x).toarray()
    values, vectors = scipy.linalg.eigh(small_gram, driver="evr")
    keep = values > values.max() * max(n_users, n_items) * np.finfo(np.float64).eps
    values, vectors = values[keep], vectors[:, keep]
    if n_users < n_items:
        vectors = (x.T @ vectors) / np.sqrt(values)
    return GramEigen(eigenvalues=values, eigenvectors=vectors)


def ease_grid(train, l2s: Sequence[float]) -> list[EASE]:
    """EASE^R models for every λ in l2s from one `gram_eigen` (see the module docstring).

    train: bool [U, I]. Returns one `EASE` per λ, in the order given, sharing the eigenvectors.
    """
    l2s = [validate.positive("l2 (λ)", l2) for l2 in l2s]
    if not l2s:
        raise ValueError("l2s is empty; pass at least one λ > 0")
    train = as_positive_csr(train)
    eigen = gram_eigen(train)
    squared = eigen.eigenvectors ** 2
    eigenvectors = jnp.asarray(eigen.eigenvectors, jnp.float32)
    models = []
    for l2 in l2s:
        shrinkage = eigen.eigenvalues / (eigen.eigenvalues + l2)
        models.append(EASE(train=train, eigenvectors=eigenvectors,
                           shrinkage=jnp.asarray(shrinkage, jnp.float32),
                           self_weight=jnp.asarray(1.0 - squared @ shrinkage, jnp.float32),
                           l2=l2))
    return models


def ease(train, l2: float) -> EASE:
    """The EASE^R model B(λ) of `train` (bool [U, I]) at λ = l2.  Returns `EASE`."""
    return ease_grid(train, [l2])[0]


@jax.jit
def _weights(eigenvectors, shrinkage, self_weight):
    scaled_p = jnp.eye(eigenvectors.shape[0]) - (eigenvectors * shrinkage) @ eigenvectors.T
    return jnp.fill_diagonal(jnp.eye(eigenvectors.shape[0]) - scaled_p / self_weight, 0.0,
                             inplace=False)


def ease_weights(model: EASE) -> jax.Array:
    """B = I - P diag(1 / diag(P)) with its diagonal set to exactly 0.  Returns f32[I, I].

    Memory O(I²): for inspection and small catalogues; `ease_scores` never forms B.
    """
    return _weights(model.eigenvectors, model.shrinkage, model.self_weight)


@jax.jit
def _scores(eigenvectors, shrinkage, self_weight, history):
    scaled_xp = history - ((history @ eigenvectors) * shrinkage) @ eigenvectors.T   # λ X P
    return history - scaled_xp / self_weight                                        # X B


def ease_scores(model: EASE, users) -> jax.Array:
    """X_u B(λ) for the given training users.  users: int[B] -> f32[B, I].

    Computed as X_u - λ X_u P diag(1 / (λ diag P)) with λ X_u P = X_u - ((X_u V) ρ) Vᵀ, in
    O(B I r).
    Use with ``simrec.metrics.evaluate(lambda users: ease_scores(model, users), test,
    exclude=model.train)``.
    """
    users = check_users(users, model.train.shape[0])
    history = jnp.asarray(model.train[users].toarray(), jnp.float32)
    return _scores(model.eigenvectors, model.shrinkage, model.self_weight, history)


def ease_history_scores(model: EASE, history) -> jax.Array:
    """X B(λ) for users given by their histories X (bool [B, I], rows may be empty), e.g. new
    users (strong generalisation): `ease_scores` with the rows of `history` in place of the
    training rows.  Returns f32[B, I]."""
    history = as_history_csr(history, model.train.shape[1])
    return _scores(model.eigenvectors, model.shrinkage, model.self_weight,
                   jnp.asarray(history.toarray(), jnp.float32))

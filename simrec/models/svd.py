"""Rank-k truncated SVD of the training matrix (the baseline Lim §6 mention and do not report)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse.linalg

from simrec import validate
from simrec.models.positives import as_positive_csr
from simrec.models.mf import MF

__all__ = ["svd"]


def svd(train, dim: int) -> MF:
    """f(u, i) = (U_k S_k V_kᵀ)_{ui}, the best rank-k approximation of the binary training matrix.

    train: scipy.sparse [U, I] of observed positives; 1 <= dim < min(U, I) (ARPACK, float64, fixed
    start vector, so the result is deterministic). Returns MF(user = U_k S_k f32[U, k],
    item = V_k f32[I, k], item_bias = 0).
    """
    csr = as_positive_csr(train)
    dim = validate.integer(f"dim (a truncated SVD of shape {csr.shape} has rank < min(U, I))", dim,
                           low=1, high=min(csr.shape) - 1)
    start = np.random.default_rng(0).standard_normal(min(csr.shape))
    left, singular, right_t = scipy.sparse.linalg.svds(csr.astype(np.float64), k=dim, v0=start)
    order = np.argsort(-singular)
    return MF(user=jnp.asarray(left[:, order] * singular[order], jnp.float32),
              item=jnp.asarray(right_t[order].T, jnp.float32),
              item_bias=jnp.zeros((csr.shape[1],), jnp.float32))

"""Rank-k truncated SVD of the training matrix (the baseline Lim §6 mention and do not report)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse.linalg

from simrec.models.data import as_positive_csr
from simrec.models.mf import MF

__all__ = ["svd"]


def svd(train, dim: int) -> MF:
    """f(u, i) = (U_k S_k V_kᵀ)_{ui}, the best rank-k approximation of the binary training matrix.

    train: scipy.sparse [U, I] of observed positives; 1 <= dim < min(U, I) (ARPACK, float64, fixed
    start vector, so the result is deterministic). Returns MF(user = U_k S_k f32[U, k],
    item = V_k f32[I, k], item_bias = 0).
    """
    csr = as_positive_csr(train)
    if isinstance(dim, bool) or int(dim) != dim or not 1 <= dim < min(csr.shape):
        raise ValueError(f"dim must be an integer in [1, min(U, I) - 1] = [1, {min(csr.shape) - 1}] "
                         f"for a truncated SVD of shape {csr.shape}, got {dim}")
    start = np.random.default_rng(0).standard_normal(min(csr.shape))
    left, singular, right_t = scipy.sparse.linalg.svds(csr.astype(np.float64), k=int(dim), v0=start)
    order = np.argsort(-singular)
    return MF(user=jnp.asarray(left[:, order] * singular[order], jnp.float32),
              item=jnp.asarray(right_t[order].T, jnp.float32),
              item_bias=jnp.zeros((csr.shape[1],), jnp.float32))

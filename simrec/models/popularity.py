"""Popularity baseline: every user gets the items ranked by their number of training positives."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simrec.models.positives import as_positive_csr
from simrec.models.mf import MF

__all__ = ["popularity"]


def popularity(train) -> MF:
    """f(u, i) = |{u' : i ∈ O⁺_{u'}}|, the item's training count, as an MF with k = 0.

    train: scipy.sparse [U, I] of observed positives. Returns MF(user f32[U, 0], item f32[I, 0],
    item_bias = counts f32[I]).
    """
    csr = as_positive_csr(train)
    n_users, n_items = csr.shape
    counts = np.bincount(csr.indices, minlength=n_items).astype(np.float32)
    return MF(user=jnp.zeros((n_users, 0), jnp.float32), item=jnp.zeros((n_items, 0), jnp.float32),
              item_bias=jnp.asarray(counts))

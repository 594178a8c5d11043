"""Training data for the models: validated positive sets and the pair samplers built on them.

A training matrix is a `scipy.sparse` matrix [U, I] whose stored non-zero entries are the observed
positives O⁺ᵤ (Lim §2). `as_positive_csr` validates it once on the host; `positive_sets` moves its
CSR arrays to the device, where the samplers draw (u, i⁺) pairs and negatives without host
round-trips, so training never needs a dense [U, I] matrix.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

__all__ = [
    "PositiveSets", "as_positive_csr", "positive_sets", "sample_pairs", "other_items",
    "nth_unobserved", "unobserved_items", "search_steps",
]


def as_positive_csr(matrix, name: str = "train", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Validated binary CSR copy of a positives matrix: sorted, unique indices, explicit zeros dropped.

    `matrix` is a scipy.sparse matrix or a dense 2-D array [U, I] (bool or real, non-negative,
    finite); every non-zero entry is an observed positive. A matrix without positives is an
    error unless allow_empty. Returns csr_matrix bool[U, I] with int32 indices.
    """
    if not sp.issparse(matrix):
        if not hasattr(matrix, "shape") or not hasattr(matrix, "dtype"):
            raise ValueError(f"{name} must be a scipy.sparse matrix or 2-D array [users, items] of "
                             f"observed positives, got {type(matrix).__name__}")
        matrix = np.asarray(matrix)
    if matrix.ndim != 2 or min(matrix.shape) < 1:
        raise ValueError(f"{name} must be 2-D [users, items] with at least one user and one item, "
                         f"got shape {matrix.shape}")
    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()
    values = np.asarray(csr.data)
    if values.dtype != bool:
        if not np.issubdtype(values.dtype, np.number) or np.iscomplexobj(values):
            raise ValueError(f"{name} must hold bool or real numbers, got dtype {values.dtype}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or infinite entries; positives must be finite")
        if np.any(values < 0):
            raise ValueError(f"{name} contains negative entries; store observed positives as 1/True")
    csr.eliminate_zeros()
    if csr.nnz == 0 and not allow_empty:
        raise ValueError(f"{name} has no positives (nnz == 0); a model needs at least one observed pair")
    if max(csr.shape) >= 2**31 - 1 or csr.nnz >= 2**31 - 1:
        raise ValueError(f"{name} is too large for int32 indices: shape {csr.shape}, nnz {csr.nnz}")
    positives = sp.csr_matrix(
        (np.ones(csr.nnz, bool), csr.indices.astype(np.int32), csr.indptr.astype(np.int32)),
        shape=csr.shape)
    positives.has_sorted_indices = True
    return positives


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class PositiveSets:
    """The observed positives O⁺ᵤ in CSR form on the device.

    indptr: i32[U+1], indices: i32[nnz] (sorted within each row), active_users: i32[A] (users with
    at least one positive); n_items and max_degree (largest |O⁺ᵤ|) are static.
    """
    indptr: jax.Array
    indices: jax.Array
    active_users: jax.Array
    n_items: int = field(metadata=dict(static=True))
    max_degree: int = field(metadata=dict(static=True))


def positive_sets(train) -> PositiveSets:
    """Device copy of a validated positives matrix (see `as_positive_csr`)."""
    csr = as_positive_csr(train)
    degree = np.diff(csr.indptr)
    return PositiveSets(
        indptr=jnp.asarray(csr.indptr, jnp.int32),
        indices=jnp.asarray(csr.indices, jnp.int32),
        active_users=jnp.asarray(np.flatnonzero(degree > 0), jnp.int32),
        n_items=int(csr.shape[1]),
        max_degree=int(degree.max()),
    )


def sample_pairs(key: jax.Array, sets: PositiveSets, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """(u, i⁺) pairs as in Lim Alg. 1 line 2: u uniform over users with |O⁺ᵤ| >= 1, i⁺ uniform in O⁺ᵤ.

    Returns users: i32[batch_size], positives: i32[batch_size].
    """
    user_key, item_key = jax.random.split(key)
    pick = jax.random.randint(user_key, (batch_size,), 0, sets.active_users.shape[0])
    users = sets.active_users[pick]
    start, stop = sets.indptr[users], sets.indptr[users + 1]
    offsets = jax.random.randint(item_key, (batch_size,), 0, stop - start)
    return users, sets.indices[start + offsets]


def other_items(key: jax.Array, excluded: jax.Array, n_items: int, n_draws: int) -> jax.Array:
    """n_draws items uniform on I∖{excluded}: j uniform in [0, |I|-1), mapped to j + [j >= excluded].

    excluded: i32[*S]. Returns i32[*S, n_draws].
    """
    draws = jax.random.randint(key, excluded.shape + (n_draws,), 0, n_items - 1)
    return draws + (draws >= excluded[..., None]).astype(draws.dtype)


def search_steps(max_degree: int) -> int:
    """Iterations a bisection over a sorted row of length <= max_degree needs: ceil(log2(max_degree + 1))."""
    return max(1, int(max_degree).bit_length())


def nth_unobserved(sets: PositiveSets, users: jax.Array, rank: jax.Array) -> jax.Array:
    """The rank-th (0-based) item of I∖O⁺ᵤ in increasing order, for 0 <= rank < |I| - |O⁺ᵤ|.

    With a_0 < a_1 < ... the sorted row O⁺ᵤ, a_j - j counts the unobserved items below a_j and is
    non-decreasing, so the answer is rank + m with m = #{j : a_j - j <= rank}, found by bisection.
    users, rank: i32[B]. Returns i32[B].
    """
    start = sets.indptr[users]
    degree = sets.indptr[users + 1] - start

    def bisect(_, bounds):
        low, high = bounds
        mid = (low + high) // 2
        open_ = low < high
        below = sets.indices[jnp.where(open_, start + mid, 0)] - mid <= rank
        return jnp.where(open_ & below, mid + 1, low), jnp.where(open_ & ~below, mid, high)

    count, _ = jax.lax.fori_loop(0, search_steps(sets.max_degree), bisect,
                                 (jnp.zeros_like(degree), degree))
    return rank + count


def unobserved_items(key: jax.Array, sets: PositiveSets,
                     users: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One item uniform on I∖O⁺ᵤ per user, exactly (no rejection): `nth_unobserved` of a uniform rank.

    users: i32[B]. Returns items: i32[B] and has_unobserved: bool[B] (False when O⁺ᵤ = I; the item
    is then meaningless).
    """
    n_unobserved = sets.n_items - (sets.indptr[users + 1] - sets.indptr[users])
    rank = jax.random.randint(key, users.shape, 0, jnp.maximum(n_unobserved, 1))
    return nth_unobserved(sets, users, rank), n_unobserved > 0

"""Training data for the models: validated positive sets and the pair samplers built on them.

A training matrix is a `scipy.sparse` matrix [U, I] whose True (or 1) entries are the observed
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

from simrec import validate

__all__ = [
    "PositiveSets", "as_positive_csr", "as_history_csr", "check_users", "positive_sets",
    "sample_pairs", "sample_positives", "SAMPLINGS", "nth_unobserved",
    "unobserved_items", "search_steps",
]


def as_positive_csr(matrix, name: str = "train", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Validated binary CSR copy of a positives matrix: sorted, unique indices, explicit zeros dropped.

    `matrix` is a scipy.sparse matrix or a dense 2-D array [U, I] of booleans or 0/1 (the
    relevance rule of `simrec.validate.relevance_mask`: ratings or counts must be binarised by the
    caller); every True entry is an observed positive. A matrix without positives is an error
    unless allow_empty. Returns csr_matrix bool[U, I] with int32 indices.
    """
    if not sp.issparse(matrix) and not (hasattr(matrix, "shape") and hasattr(matrix, "dtype")):
        raise ValueError(f"{name} must be a scipy.sparse matrix or 2-D array [users, items] of "
                         f"observed positives, got {type(matrix).__name__}")
    if len(matrix.shape) != 2 or min(matrix.shape) < 1:
        raise ValueError(f"{name} must be 2-D [users, items] with at least one user and one item, "
                         f"got shape {tuple(matrix.shape)}")
    csr = sp.csr_matrix(validate.relevance_mask(name, matrix))
    if csr.nnz == 0 and not allow_empty:
        raise ValueError(f"{name} has no positives (nnz == 0); a model needs at least one observed pair")
    if max(csr.shape) >= 2**31 - 1 or csr.nnz >= 2**31 - 1:
        raise ValueError(f"{name} is too large for int32 indices: shape {csr.shape}, nnz {csr.nnz}")
    positives = sp.csr_matrix(
        (np.ones(csr.nnz, bool), csr.indices.astype(np.int32), csr.indptr.astype(np.int32)),
        shape=csr.shape)
    positives.has_sorted_indices = True
    return positives


def as_history_csr(history, n_items: int) -> sp.csr_matrix:
    """Validated bool CSR [B, I] of users' histories (`as_positive_csr`; rows may be empty) over
    the model's catalogue of n_items items."""
    history = as_positive_csr(history, "history", allow_empty=True)
    if history.shape[1] != n_items:
        raise ValueError(f"history has {history.shape[1]} items but the model has {n_items}; "
                         f"both must index the same catalogue")
    return history


def check_users(users, n_users: int) -> np.ndarray:
    """`users` as a 1-D integer numpy array of training rows in [0, n_users).  Returns int[B]."""
    validate.matrix_shape("users", users, (None,))
    return validate.indices("users", users, n_users, "users in the training matrix")


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class PositiveSets:
    """The observed positives O⁺ᵤ in CSR form on the device.

    indptr: i32[U+1], indices: i32[P] (sorted within each row; entries from nnz on are padding),
    active_users: i32[A'] (the users with at least one positive, then padding), nnz: i32[] and
    n_active: i32[] (the real lengths); n_items and max_degree (an upper bound of the largest
    |O⁺ᵤ| of the form 2ᵏ − 1) are static. The padded lengths P and A' are powers of two, so
    training data of one catalogue that differ a little in size (the folds or splits of one data
    set) share every compiled program: the samplers read only the real entries, and draw exactly
    what they would draw from unpadded arrays.
    """
    indptr: jax.Array
    indices: jax.Array
    active_users: jax.Array
    nnz: jax.Array
    n_active: jax.Array
    n_items: int = field(metadata=dict(static=True))
    max_degree: int = field(metadata=dict(static=True))


def _power_of_two(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def _padded(values: np.ndarray) -> jax.Array:
    """i32 device copy of `values` followed by zeros up to a power-of-two length."""
    out = np.zeros(_power_of_two(values.size), np.int32)
    out[:values.size] = values
    return jnp.asarray(out)


def positive_sets(train) -> PositiveSets:
    """Device copy of a validated positives matrix (see `as_positive_csr`), padded (`PositiveSets`)."""
    csr = as_positive_csr(train)
    degree = np.diff(csr.indptr)
    active = np.flatnonzero(degree > 0)
    return PositiveSets(
        indptr=jnp.asarray(csr.indptr, jnp.int32),
        indices=_padded(csr.indices),
        active_users=_padded(active),
        nnz=jnp.int32(csr.nnz),
        n_active=jnp.int32(active.size),
        n_items=int(csr.shape[1]),
        max_degree=_power_of_two(int(degree.max()) + 1) - 1,
    )


def sample_pairs(key: jax.Array, sets: PositiveSets, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """(u, i⁺) pairs as in Lim Alg. 1 line 2: u uniform over users with |O⁺ᵤ| >= 1, i⁺ uniform in O⁺ᵤ.

    Returns users: i32[batch_size], positives: i32[batch_size].
    """
    user_key, item_key = jax.random.split(key)
    pick = jax.random.randint(user_key, (batch_size,), 0, sets.n_active)
    users = sets.active_users[pick]
    start, stop = sets.indptr[users], sets.indptr[users + 1]
    offsets = jax.random.randint(item_key, (batch_size,), 0, stop - start)
    return users, sets.indices[start + offsets]


def sample_positives(key: jax.Array, sets: PositiveSets,
                     batch_size: int) -> tuple[jax.Array, jax.Array]:
    """(u, i⁺) pairs uniform over the observed positives, with replacement: P(u, i⁺) = 1/nnz, so a
    user is drawn with probability |O⁺ᵤ|/nnz (LightFM's visiting rate of one per positive and epoch;
    Lim draw u uniformly instead, `sample_pairs`). Returns users: i32[batch_size], positives:
    i32[batch_size]."""
    entry = jax.random.randint(key, (batch_size,), 0, sets.nnz)
    users = jnp.searchsorted(sets.indptr, entry, side="right") - 1
    return users.astype(jnp.int32), sets.indices[entry]


#: pair-sampling rules of the MF objectives (`OptADG.sampling`, `MFAUC.sampling`): "user" = Lim
#: Alg. 1 line 2 (u uniform over users with positives, then i⁺ uniform in O⁺ᵤ), "positive" = (u, i⁺)
#: uniform over the training positives
SAMPLINGS = {"user": sample_pairs, "positive": sample_positives}


def search_steps(max_degree: int) -> int:
    """Iterations a bisection over a sorted row of length <= max_degree needs: ceil(log2(max_degree + 1))
    (extra iterations change nothing: the bisection has converged)."""
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

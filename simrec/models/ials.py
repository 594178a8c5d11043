"""iALS / WMF with every missing entry as a weak zero (Hu, Koren, Volinsky ICDM'08; Steck's AllRank).

Minimises Σ_{u,i} w_ui (p_ui - xᵤ·yᵢ)² + λ (Σᵤ ‖xᵤ‖² + Σᵢ ‖yᵢ‖²) with p_ui = 1, w_ui = 1 + α on
observed pairs and p_ui = 0, w_ui = w₀ on all others, by alternating exact least squares (solved
in float64 with numpy; the factors are returned as f32). With the Gram trick a row's normal
equations only touch its observed items:
(w₀ YᵀY + (1 + α - w₀) Σ_{i∈Oᵤ} yᵢyᵢᵀ + λI) xᵤ = (1 + α) Σ_{i∈Oᵤ} yᵢ, so no dense [U, I] matrix
is ever formed. `fold_in` is that solve; it is also how new users get vectors with the item
factors fixed (strong generalisation, FastML "Evaluating recommender systems").
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.models.positives import as_positive_csr
from simrec.models.mf import MF, init_mf

__all__ = ["ials", "ials_sweeps", "fold_in"]


def _check_weights(l2: float, unobserved_weight: float, alpha: float) -> None:
    validate.positive("l2 (the normal equations need l2 > 0)", l2)
    validate.finite("unobserved_weight", unobserved_weight, low=0.0)
    validate.finite("alpha (observed weight 1 + alpha > 0)", alpha, low=-1.0, low_open=True)


def fold_in(item_factors, observed, l2: float, *, unobserved_weight: float = 0.1, alpha: float = 0.0,
            block_entries: int = 2**16) -> jax.Array:
    """Least-squares user vectors with the item factors fixed (one half-step of iALS).

    xᵤ = argmin_x Σᵢ w_ui (p_ui - x·yᵢ)² + λ‖x‖² with the weights and targets of the module
    docstring, solved exactly per row in float64 (numpy). item_factors: f32[I, k]; observed:
    scipy.sparse or dense [R, I] of the rows' observed items (rows may be empty: their vector is
    0); l2 = λ > 0. Rows are grouped by degree (padded to the next power of two) and solved in
    blocks of at most block_entries / max(width, k) rows, so memory stays at O(block_entries·k).
    Returns f32[R, k].
    """
    _check_weights(l2, unobserved_weight, alpha)
    factors = np.asarray(item_factors, np.float64)
    validate.matrix_shape("item_factors [items, k]", factors, (None, None))
    validate.finite_values("item_factors", factors)
    csr = as_positive_csr(observed, "observed", allow_empty=True)
    if csr.shape[1] != factors.shape[0]:
        raise ValueError(f"observed has {csr.shape[1]} items but item_factors has {factors.shape[0]} "
                         f"rows; both must index the same catalogue")
    validate.integer("block_entries", block_entries, low=1)
    dim = factors.shape[1]
    observed_weight = 1.0 + alpha
    base = unobserved_weight * (factors.T @ factors) + l2 * np.eye(dim)
    degree = np.diff(csr.indptr)
    width_of = 1 << np.ceil(np.log2(np.maximum(degree, 1))).astype(np.int64)
    indices = np.append(csr.indices, 0)  # position nnz: the item of padded entries
    result = np.zeros((csr.shape[0], dim), np.float64)
    for width in np.unique(width_of):
        rows = np.flatnonzero(width_of == width)
        rows_per_block = max(1, int(block_entries) // max(int(width), dim))
        for start in range(0, rows.size, rows_per_block):
            block = rows[start:start + rows_per_block]
            mask = np.arange(width) < degree[block][:, None]
            items = indices[np.where(mask, csr.indptr[block][:, None] + np.arange(width), csr.nnz)]
            vectors = factors[items] * mask[..., None]
            lhs = base + (observed_weight - unobserved_weight) * (vectors.transpose(0, 2, 1) @ vectors)
            rhs = observed_weight * vectors.sum(axis=1)
            result[block] = np.linalg.solve(lhs, rhs[..., None])[..., 0]
    return jnp.asarray(result, jnp.float32)


def ials_sweeps(key: jax.Array, train, *, dim: int, l2: float, unobserved_weight: float = 0.1,
                alpha: float = 0.0, init_scale: float = 0.1) -> Iterator[MF]:
    """The run of `ials` one sweep at a time, without an end: validates the arguments at once,
    then returns an iterator of parameters, first `init_mf(key, U, I, dim, init_scale)` (whose
    user factors start ALS), then the parameters after every sweep 1, 2, ... (exactly what `ials`
    returns for that many iterations). The consumer decides when to stop, e.g. on a validation
    metric."""
    _check_weights(l2, unobserved_weight, alpha)
    csr = as_positive_csr(train)
    start = init_mf(key, *csr.shape, dim, init_scale)
    return _sweeps(start, csr, l2, dict(unobserved_weight=unobserved_weight, alpha=alpha))


def _sweeps(start: MF, csr, l2: float, weights: dict) -> Iterator[MF]:
    """`ials_sweeps`' iterator: each sweep solves the items given the users, then the users."""
    yield start
    user, transposed = start.user, csr.T.tocsr()
    bias = jnp.zeros((csr.shape[1],), jnp.float32)
    while True:
        item = fold_in(user, transposed, l2, **weights)
        user = fold_in(item, csr, l2, **weights)
        yield MF(user=user, item=item, item_bias=bias)


def ials(key: jax.Array, train, *, dim: int, l2: float, unobserved_weight: float = 0.1,
         alpha: float = 0.0, iterations: int = 10, init_scale: float = 0.1,
         callback: Callable[[int, MF], None] | None = None) -> MF:
    """Alternating least squares for the objective of the module docstring.

    train: scipy.sparse [U, I] of observed positives. User factors start at
    `init_mf(key, U, I, dim, init_scale).user`; every iteration (sweep) solves the items given the
    users, then the users given the items, so the returned user vectors equal
    `fold_in(item, train, ...)`. `callback(iteration, params)` runs after each iteration. Returns
    MF(user f32[U, k], item f32[I, k], item_bias = 0). One sweep at a time: `ials_sweeps`.
    """
    iterations = validate.integer("iterations", iterations, low=1)
    run = ials_sweeps(key, train, dim=dim, l2=l2, unobserved_weight=unobserved_weight,
                      alpha=alpha, init_scale=init_scale)
    for iteration, params in enumerate(itertools.islice(run, 1, iterations + 1)):
        if callback is not None:
            callback(iteration, params)
    return params

"""Explicit-rating matrix factorisation by weighted ALS: MF-RMSE and AllRank (Steck, RecSys'13 §2.5;
Steck, KDD'10, "Training and testing of recommender systems on data missing not at random").

Predicted ratings are R̂_ui = r₀ + xᵤ·yᵢ (Steck Eq. 11, r₀ a global offset), fitted by minimising
(Steck Eq. 12)

    Σ_{u,i} W_ui [ (R*_ui − R̂_ui)² + λ (‖xᵤ‖² + ‖yᵢ‖²) ],

where R*_ui is the observed rating where there is one and the imputed value r_m elsewhere, and
W_ui = 1 on observed pairs and w_m on all others. So a row's regularisation is λ times its total
weight n_u = |Oᵤ| + w_m (I − |Oᵤ|). Two settings:

* MF-RMSE: w_m = 0 (observed ratings only), r₀ = the mean observed training rating (λ 0.07);
* AllRank: w_m > 0 and r₀ = r_m, imputed rating 2, w_m = 0.005, λ 0.04, rank 50 (Steck's Netflix
  values; rescale λ with the data).

Biased MF-RMSE (``biases=True``; Koren, Bell & Volinsky, IEEE Computer 2009, Eq. 4) adds a user and
an item bias, R̂_ui = r₀ + bᵤ + bᵢ + xᵤ·yᵢ, with w_m = 0 and each bias regularised as its factors
(λ |Oᵤ| bᵤ², λ |Oᵢ| bᵢ²). ALS then solves (xᵤ, bᵤ) against the items' (yᵢ, 1) and the targets
r_ui − r₀ − bᵢ, and (yᵢ, bᵢ) against the users' (xᵤ, 1) and r_ui − r₀ − bᵤ; the model is stored as
an `MF` of rank k + 2, user (xᵤ, bᵤ, 1) and item (yᵢ, 1, bᵢ), so its scores are R̂ as above.

Every half-step of ALS solves, per row u with the other side's factors Y fixed,

    (w_m YᵀY + (1 − w_m) Σ_{i∈Oᵤ} yᵢyᵢᵀ + λ n_u I) xᵤ
        = Σ_{i∈Oᵤ} (r_ui − r₀) yᵢ + w_m (r_m − r₀) (Σ_i yᵢ − Σ_{i∈Oᵤ} yᵢ),

touching only the row's observed entries (the Gram trick of Hu et al., ICDM'08). A row with
n_u = 0 (MF-RMSE, no ratings) gets xᵤ = 0. `fold_in_ratings` is that solve for new users with
the item factors fixed (strong generalisation). Solves run in float64 numpy; factors are f32.
Models are `MF` pytrees with item_bias = r₀, so `simrec.models.scores` gives R̂.
"""
from __future__ import annotations

import itertools
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import validate
from simrec.models.mf import MF, init_mf

__all__ = ["as_rating_csr", "weighted_als", "weighted_als_sweeps", "fold_in_ratings", "biased_parts", "mf_rmse",
           "mf_rmse_sweeps", "allrank", "allrank_sweeps"]


def as_rating_csr(ratings, name: str = "ratings", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Validated f64 CSR copy of an explicit-rating matrix [U, I]: every stored entry is an
    observed rating (finite), duplicates are an error. Dense input: non-zero entries are ratings.
    """
    if not sp.issparse(ratings):
        array = np.asarray(ratings, dtype=np.float64)
        if array.ndim != 2:
            raise ValueError(f"{name} must be 2-D [users, items], got shape {array.shape}")
        ratings = sp.csr_matrix(array)
    coo = sp.coo_matrix(ratings, dtype=np.float64)
    if coo.ndim != 2 or min(coo.shape) < 1:
        raise ValueError(f"{name} must be 2-D with at least one user and item, got {coo.shape}")
    pairs = coo.row.astype(np.int64) * coo.shape[1] + coo.col
    if len(np.unique(pairs)) != len(pairs):
        raise ValueError(f"{name} has repeated (user, item) entries; store one rating per pair")
    csr = sp.csr_matrix(coo)
    csr.sort_indices()
    validate.finite_values(f"{name} (the observed ratings)", csr.data)
    if csr.nnz == 0 and not allow_empty:
        raise ValueError(f"{name} has no observed ratings")
    return csr


def _check(l2: float, missing_weight: float, offset: float, imputed: float) -> None:
    validate.positive("l2", l2)
    validate.probability("missing_weight (observed entries weigh 1)", missing_weight)
    validate.finite("offset", offset)
    validate.finite("imputed", imputed)


def _solve_rows(factors: np.ndarray, csr: sp.csr_matrix, l2: float, offset: float, imputed: float,
                missing_weight: float, column_bias: np.ndarray | None = None,
                block_entries: int = 2**16) -> np.ndarray:
    """The per-row solve of the module docstring for every row of `csr` (f64 [R, k]); with
    column_bias f64[C] (the other side's biases, w_m = 0 only) the target of entry (r, c) is
    value − offset − column_bias[c]."""
    n_cols, dim = factors.shape
    base = missing_weight * (factors.T @ factors)
    total = factors.sum(axis=0)
    degree = np.diff(csr.indptr)
    width_of = 1 << np.ceil(np.log2(np.maximum(degree, 1))).astype(np.int64)
    indices = np.append(csr.indices, 0)
    values = np.append(csr.data - (0.0 if column_bias is None else column_bias[csr.indices]), 0.0)
    result = np.zeros((csr.shape[0], dim))
    for width in np.unique(width_of):
        rows = np.flatnonzero(width_of == width)
        per_block = max(1, block_entries // max(int(width), dim))
        for start in range(0, rows.size, per_block):
            block = rows[start:start + per_block]
            mask = np.arange(width) < degree[block][:, None]
            where = np.where(mask, csr.indptr[block][:, None] + np.arange(width), csr.nnz)
            vectors = factors[indices[where]] * mask[..., None]           # [B, width, k]
            n_weight = degree[block] + missing_weight * (n_cols - degree[block])
            ridge = l2 * n_weight + (n_weight == 0)                       # empty row: x = 0
            lhs = (base + (1 - missing_weight) * (vectors.transpose(0, 2, 1) @ vectors)
                   + ridge[:, None, None] * np.eye(dim))
            observed_sum = vectors.sum(axis=1)
            rhs = (np.einsum("bw,bwk->bk", values[where] - offset, vectors)
                   + missing_weight * (imputed - offset) * (total - observed_sum))
            result[block] = np.linalg.solve(lhs, rhs[..., None])[..., 0]
    return result


def fold_in_ratings(item_factors, ratings, *, l2: float, offset: float, imputed: float = 0.0,
                    missing_weight: float = 0.0, item_bias=None) -> jax.Array:
    """User vectors xᵤ for the rows of `ratings` with the item factors fixed (module docstring).

    item_factors: f32[I, k]; ratings: sparse or dense [R, I] of the rows' observed ratings (rows
    may be empty). Use the model's own l2, offset (= item_bias), imputed and missing_weight.
    item_bias: f[I] the items' biases bᵢ of a biased MF-RMSE (w_m = 0), whose item_factors are
    then its (yᵢ, 1), so that each row's last coordinate is its bias bᵤ (`biased_parts`).
    Returns f32[R, k].
    """
    _check(l2, missing_weight, offset, imputed)
    factors = np.asarray(item_factors, np.float64)
    validate.matrix_shape("item_factors", factors, (None, None))
    validate.finite_values("item_factors", factors)
    csr = as_rating_csr(ratings, allow_empty=True)
    if csr.shape[1] != factors.shape[0]:
        raise ValueError(f"ratings has {csr.shape[1]} items but item_factors has "
                         f"{factors.shape[0]} rows; both must index the same catalogue")
    if item_bias is not None:
        item_bias = np.asarray(item_bias, np.float64)
        validate.matrix_shape("item_bias", item_bias, (factors.shape[0],))
        validate.finite_values("item_bias", item_bias)
        if missing_weight != 0:
            raise ValueError(f"item_bias is the biased MF-RMSE's, on observed ratings only; got "
                             f"missing_weight={missing_weight}: pass missing_weight=0")
    return jnp.asarray(_solve_rows(factors, csr, l2, offset, imputed, missing_weight, item_bias),
                       jnp.float32)


def biased_parts(params: MF) -> tuple[np.ndarray, np.ndarray]:
    """(item factors with their column of ones (yᵢ, 1) f64[I, k + 1], item biases bᵢ f64[I]) of a
    biased MF-RMSE stored as the module docstring says: the inputs of `fold_in_ratings`."""
    item = np.asarray(params.item, np.float64)
    return item[:, :-1], item[:, -1]


def weighted_als_sweeps(key: jax.Array, ratings, *, dim: int, l2: float, offset: float,
                        imputed: float = 0.0, missing_weight: float = 0.0,
                        init_scale: float = 0.1, biases: bool = False) -> Iterator[MF]:
    """The run of `weighted_als` one sweep at a time, without an end: validates the arguments at
    once, then returns an iterator of parameters, first `init_mf(key, U, I, dim, init_scale)` with
    item_bias = offset (its user factors start ALS; with biases, the biases start at 0 in the
    rank-(k + 2) layout of the module docstring), then the parameters after every sweep 1, 2, ...
    (exactly what `weighted_als` returns for that many iterations)."""
    _check(l2, missing_weight, offset, imputed)
    if biases and missing_weight != 0:
        raise ValueError(f"biases=True is the biased MF-RMSE, on observed ratings only; got "
                         f"missing_weight={missing_weight}: pass missing_weight=0")
    csr = as_rating_csr(ratings)
    start = init_mf(key, *csr.shape, dim, init_scale)
    weights = dict(l2=l2, offset=offset, imputed=imputed, missing_weight=missing_weight)
    offsets = jnp.full((csr.shape[1],), offset, jnp.float32)
    if biases:
        start = _biased(np.asarray(start.user, np.float64), np.zeros(csr.shape[0]),
                        np.asarray(start.item, np.float64), np.zeros(csr.shape[1]), offsets)
        return _biased_sweeps(start, csr, weights)
    return _sweeps(MF(user=start.user, item=start.item, item_bias=offsets), csr, weights)


def _sweeps(start: MF, csr: sp.csr_matrix, weights: dict) -> Iterator[MF]:
    """`weighted_als_sweeps`' iterator: each sweep solves the items given the users, then the
    users given the items (the factors stay float64 between sweeps)."""
    yield start
    user, transposed = np.asarray(start.user, np.float64), csr.T.tocsr()
    while True:
        item = _solve_rows(user, transposed, **weights)
        user = _solve_rows(item, csr, **weights)
        yield MF(user=jnp.asarray(user, jnp.float32), item=jnp.asarray(item, jnp.float32),
                 item_bias=start.item_bias)


def _with_ones(factors: np.ndarray) -> np.ndarray:
    return np.concatenate([factors, np.ones((factors.shape[0], 1))], axis=1)


def _biased(user, user_bias, item, item_bias, offsets) -> MF:
    """The rank-(k + 2) `MF` of a biased MF-RMSE: user (xᵤ, bᵤ, 1), item (yᵢ, 1, bᵢ)."""
    return MF(user=jnp.asarray(np.column_stack([user, user_bias, np.ones(len(user))]), jnp.float32),
              item=jnp.asarray(np.column_stack([item, np.ones(len(item)), item_bias]), jnp.float32),
              item_bias=offsets)


def _biased_sweeps(start: MF, csr: sp.csr_matrix, weights: dict) -> Iterator[MF]:
    """`_sweeps` of the biased MF-RMSE (module docstring): (yᵢ, bᵢ) given the users' (xᵤ, 1) and
    biases, then (xᵤ, bᵤ) given the items' (yᵢ, 1) and biases."""
    yield start
    user = np.asarray(start.user, np.float64)[:, :-2]
    user_bias, transposed = np.zeros(csr.shape[0]), csr.T.tocsr()
    while True:
        item = _solve_rows(_with_ones(user), transposed, **weights, column_bias=user_bias)
        item, item_bias = item[:, :-1], item[:, -1]
        user = _solve_rows(_with_ones(item), csr, **weights, column_bias=item_bias)
        user, user_bias = user[:, :-1], user[:, -1]
        yield _biased(user, user_bias, item, item_bias, start.item_bias)


def _after(run: Iterator[MF], iterations: int) -> MF:
    """The parameters after `iterations` >= 1 sweeps of a `weighted_als_sweeps` run."""
    return next(itertools.islice(run, validate.integer("iterations", iterations, low=1), None))


def weighted_als(key: jax.Array, ratings, *, dim: int, l2: float, offset: float,
                 imputed: float = 0.0, missing_weight: float = 0.0, iterations: int = 10,
                 init_scale: float = 0.1, biases: bool = False) -> MF:
    """ALS for Steck's Eq. 12 (module docstring). User factors start at
    `init_mf(key, U, I, dim, init_scale).user`; each iteration (sweep) solves the items given the
    users, then the users given the items, so the returned user vectors equal
    `fold_in_ratings(item, ratings, ...)`. Returns MF(user f32[U, k], item f32[I, k],
    item_bias = offset f32[I]); with biases (w_m = 0), the rank-(k + 2) layout of the module
    docstring. One sweep at a time: `weighted_als_sweeps`.
    """
    return _after(weighted_als_sweeps(key, ratings, dim=dim, l2=l2, offset=offset,
                                      imputed=imputed, missing_weight=missing_weight,
                                      init_scale=init_scale, biases=biases), iterations)


def mf_rmse_sweeps(key: jax.Array, ratings, *, dim: int = 50, l2: float = 0.07,
                   init_scale: float = 0.1, biases: bool = False) -> Iterator[MF]:
    """`mf_rmse` one sweep at a time (`weighted_als_sweeps`: the initial parameters first)."""
    csr = as_rating_csr(ratings)
    return weighted_als_sweeps(key, csr, dim=dim, l2=l2, offset=float(csr.data.mean()),
                               init_scale=init_scale, biases=biases)


def mf_rmse(key: jax.Array, ratings, *, dim: int = 50, l2: float = 0.07, iterations: int = 10,
            init_scale: float = 0.1, biases: bool = False) -> MF:
    """MF-RMSE: observed ratings only (w_m = 0), offset r₀ = mean observed rating (Steck §2.5);
    with biases, also a user and an item bias (module docstring: an `MF` of rank dim + 2).
    One sweep at a time: `mf_rmse_sweeps`."""
    return _after(mf_rmse_sweeps(key, ratings, dim=dim, l2=l2, init_scale=init_scale, biases=biases),
                  iterations)


def allrank_sweeps(key: jax.Array, ratings, *, dim: int = 50, l2: float = 0.04,
                   imputed: float = 2.0, missing_weight: float = 0.005,
                   init_scale: float = 0.1) -> Iterator[MF]:
    """`allrank` one sweep at a time (`weighted_als_sweeps`: the initial parameters first)."""
    if missing_weight <= 0:
        raise ValueError(f"AllRank needs missing_weight > 0 (w_m = 0 is MF-RMSE), got {missing_weight}")
    return weighted_als_sweeps(key, ratings, dim=dim, l2=l2, offset=imputed, imputed=imputed,
                               missing_weight=missing_weight, init_scale=init_scale)


def allrank(key: jax.Array, ratings, *, dim: int = 50, l2: float = 0.04, imputed: float = 2.0,
            missing_weight: float = 0.005, iterations: int = 10, init_scale: float = 0.1) -> MF:
    """AllRank: every missing rating imputed as r_m with weight w_m, offset r₀ = r_m (Steck §2.5;
    defaults are Steck's Netflix settings). One sweep at a time: `allrank_sweeps`."""
    return _after(allrank_sweeps(key, ratings, dim=dim, l2=l2, imputed=imputed,
                                 missing_weight=missing_weight, init_scale=init_scale), iterations)

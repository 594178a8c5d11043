"""Nearest-neighbour recommenders on binary data: item-kNN (cosine) and KUNN.

R is the binary training matrix [U, I], c(u) = |R_u.| and c(i) = |R_.i| its row and column
counts (1/sqrt(0) is taken as 0, so empty users and items contribute nothing).

Item-kNN (Deshpande & Karypis, TOIS'04; Sarwar et al., WWW'01) with cosine similarity
sim(i, j) = Σ_u R_ui R_uj / sqrt(c(i) c(j)): every item j keeps its k most similar other items,
and s(u, i) = Σ_{j ∈ R_u} sim(j, i) [i ∈ kNN(j)].

KUNN (Verstrepen & Goethals, RecSys'14, "Unifying nearest neighbors collaborative filtering"),
in the form RecPack implements (`recpack.algorithms.KUNN`, used by Jeunen et al. KDD'24 App. A):

    sim(u, v) = Σ_i R_ui R_vi / sqrt(c(u) c(v) c(i)),
    sim(i, j) = Σ_u R_ui R_uj / sqrt(c(i) c(j) c(u)),
    s(u, i)   = Σ_{v ∈ kNN(u)} R_vi sim(u, v) / sqrt(c(i))
              + Σ_{j ∈ kNN(i)} R_uj sim(i, j) / sqrt(c(u)),

with kNN(u) the Ku users most similar to u and kNN(i) the Ki items most similar to i (self
excluded). Neighbourhoods hold the k largest positive similarities; ties at the k-th place go to
the lower index. Similarities are computed in float64 and ranked after rounding to float32.
The two terms are separable, so a (Ku, Ki) grid needs one similarity matrix and one top-k pass
per side (`kunn_grid`): a neighbourhood of size k is the first k entries of the largest one.

Users outside the training data are scored from their histories with everything trained kept
fixed (`item_knn_history_scores`, `kunn_history_scores`: a new user's kNN(u) are the training
users most similar to the history, c(u) its size, all other counts the training counts).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import validate
from simrec.models.positives import as_history_csr, as_positive_csr, check_users

__all__ = ["KUNN", "ItemKNN", "kunn", "kunn_grid", "kunn_scores", "kunn_history_scores", "item_knn",
           "item_knn_scores", "item_knn_history_scores"]

_RANK_BLOCK_ELEMENTS = 1 << 22        # rows of a similarity matrix ranked together (16 MB f32)


@dataclass(frozen=True)
class KUNN:
    """KUNN with Ku user and Ki item neighbours (see the module docstring).

    user_neighbours: f32 CSR [U, U], entry (u, v) = sim(u, v) for v ∈ kNN(u);
    item_neighbours: f32 CSR [I, I], entry (j, i) = sim(i, j) for j ∈ kNN(i) (transposed, so
        that the item term is a product with the user rows);
    by_item_count: f32 CSR [U, I] = R_vi / sqrt(c(i)); by_user_count: f32 CSR [U, I] =
    R_uj / sqrt(c(u)); user_k, item_k: Ku, Ki; train: bool CSR [U, I] = R (the neighbours of
    new users, `kunn_history_scores`).
    """
    user_neighbours: sp.csr_matrix
    item_neighbours: sp.csr_matrix
    by_item_count: sp.csr_matrix
    by_user_count: sp.csr_matrix
    user_k: int
    item_k: int
    train: sp.csr_matrix


@dataclass(frozen=True)
class ItemKNN:
    """Item-kNN: train bool CSR [U, I] (the histories); neighbours f32 CSR [I, I], entry
    (j, i) = sim(j, i) for i among the k most similar items of j; k."""
    train: sp.csr_matrix
    neighbours: sp.csr_matrix
    k: int


def _inverse_sqrt(counts: np.ndarray) -> np.ndarray:
    """f64: 1/sqrt(count), 0 where count = 0."""
    root = np.sqrt(counts.astype(np.float64))
    return np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)


def _scale(matrix: sp.csr_matrix, rows=None, cols=None) -> sp.csr_matrix:
    """diag(rows) matrix diag(cols) in float64 (None = identity)."""
    scaled = sp.csr_matrix(matrix, dtype=np.float64)
    if rows is not None:
        scaled = sp.diags(rows) @ scaled
    if cols is not None:
        scaled = scaled @ sp.diags(cols)
    return sp.csr_matrix(scaled)


def _without_diagonal(similarity) -> sp.csr_matrix:
    similarity = sp.csr_matrix(similarity)
    similarity.setdiag(0.0)
    similarity.eliminate_zeros()
    return similarity


@partial(jax.jit, static_argnums=1)
def _top_k(block: jax.Array, k: int):
    return jax.lax.top_k(block, k)


def _ranked_neighbours(similarity: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k largest similarities, largest first (ties: lower column first), rounded to
    float32.  Returns index i32[N, k'] and value f32[N, k'] with k' = min(k, N)."""
    n_rows, n_cols = similarity.shape
    k = min(k, n_cols)
    width = max(1, min(n_rows, _RANK_BLOCK_ELEMENTS // n_cols))
    indices, values = [], []
    for start in range(0, n_rows, width):
        block = similarity[start:start + width].toarray().astype(np.float32)
        padded = np.pad(block, ((0, width - len(block)), (0, 0)))      # one compiled shape
        value, index = _top_k(jnp.asarray(padded), k)
        values.append(np.asarray(value)[:len(block)])
        indices.append(np.asarray(index)[:len(block)])
    return np.concatenate(indices), np.concatenate(values)


def _neighbour_matrix(ranked: tuple[np.ndarray, np.ndarray], k: int,
                      n_cols: int | None = None) -> sp.csr_matrix:
    """f32 CSR [N, n_cols] (n_cols = N by default): row r holds the first k ranked neighbours of r
    with positive similarity."""
    index, value = ranked[0][:, :k], ranked[1][:, :k]
    rows = np.broadcast_to(np.arange(len(index))[:, None], index.shape)
    positive = value > 0
    return sp.csr_matrix((value[positive], (rows[positive], index[positive])),
                         shape=(len(index), len(index) if n_cols is None else n_cols),
                         dtype=np.float32)


def kunn_grid(train, user_ks: Sequence[int], item_ks: Sequence[int]) -> dict[tuple[int, int], KUNN]:
    """KUNN models for every (Ku, Ki) in user_ks x item_ks (Jeunen App. A: 70..110 step 5 each).

    One similarity matrix and one top-max(k) pass per side; each model shares the scaled
    training matrices. train: bool [U, I]. Returns {(Ku, Ki): KUNN}.
    """
    user_ks = [validate.integer("user_ks entries", k, low=1) for k in user_ks]
    item_ks = [validate.integer("item_ks entries", k, low=1) for k in item_ks]
    if not user_ks or not item_ks:
        raise ValueError("user_ks and item_ks must each hold at least one neighbourhood size")
    train = as_positive_csr(train)
    inv_user = _inverse_sqrt(np.diff(train.indptr))
    inv_item = _inverse_sqrt(np.bincount(train.indices, minlength=train.shape[1]))
    by_user = _scale(train, rows=inv_user)                           # R_ui / sqrt(c(u))
    by_item = _scale(train, cols=inv_item)                           # R_ui / sqrt(c(i))
    by_both = _scale(by_user, cols=inv_item)
    user_ranked = _ranked_neighbours(_without_diagonal(by_both @ by_user.T), max(user_ks))
    item_ranked = _ranked_neighbours(_without_diagonal(by_both.T @ by_item), max(item_ks))
    user_parts = {k: _neighbour_matrix(user_ranked, k) for k in user_ks}
    item_parts = {k: _neighbour_matrix(item_ranked, k).T.tocsr() for k in item_ks}
    by_item32, by_user32 = by_item.astype(np.float32), by_user.astype(np.float32)
    return {(ku, ki): KUNN(user_neighbours=user_parts[ku], item_neighbours=item_parts[ki],
                           by_item_count=by_item32, by_user_count=by_user32, user_k=ku, item_k=ki,
                           train=train)
            for ku in user_ks for ki in item_ks}


def kunn(train, user_k: int, item_k: int) -> KUNN:
    """KUNN of `train` (bool [U, I]) with Ku = user_k and Ki = item_k neighbours."""
    return kunn_grid(train, [user_k], [item_k])[(user_k, item_k)]


def kunn_scores(model: KUNN, users) -> np.ndarray:
    """s(u, i) of the module docstring for the given training users.  users: int[B] -> f32[B, I].

    Two sparse products, O(B (Ku + Ki) d) for mean degree d, then a dense [B, I] block.
    """
    users = check_users(users, model.by_item_count.shape[0])
    scores = (model.user_neighbours[users] @ model.by_item_count).toarray()
    scores += (model.by_user_count[users] @ model.item_neighbours).toarray()
    return scores


def kunn_history_scores(model: KUNN, history, users=None) -> np.ndarray:
    """s(u, i) of the module docstring for users given by their histories, the training data fixed.

    history: bool [B, I], row b the items R_b. of user b; c(b) = |R_b.| while R_vi, c(v) and c(i)
    stay the training counts; kNN(b) are the Ku training users most similar to the history, and
    kNN(i) the trained item neighbourhoods. users: None (new users), or int[B] the training rows
    the histories belong to, which are then not their own neighbours, so that
    `kunn_history_scores(model, train[users], users)` equals `kunn_scores(model, users)`.
    Returns f32[B, I].
    """
    n_users, n_items = model.train.shape
    history = as_history_csr(history, n_items)
    inv_user = _inverse_sqrt(np.diff(model.train.indptr))
    inv_item = _inverse_sqrt(np.bincount(model.train.indices, minlength=n_items))
    by_user = _scale(history, rows=_inverse_sqrt(np.diff(history.indptr)))
    similarity = (_scale(by_user, cols=inv_item) @ _scale(model.train, rows=inv_user).T).tocoo()
    if users is not None:
        users = check_users(users, n_users)
        if len(users) != history.shape[0]:
            raise ValueError(f"users has {len(users)} entries but history has {history.shape[0]} "
                             f"rows; pass one training user per history row (or users=None)")
        own = similarity.col == users[similarity.row]
        similarity.data[own] = 0.0
    similarity = sp.csr_matrix(similarity)
    similarity.eliminate_zeros()
    neighbours = _neighbour_matrix(_ranked_neighbours(similarity, model.user_k), model.user_k,
                                   n_users)
    scores = (neighbours @ model.by_item_count).toarray()
    scores += (by_user.astype(np.float32) @ model.item_neighbours).toarray()
    return scores


def item_knn(train, k: int) -> ItemKNN:
    """Item-kNN with cosine similarity and k neighbours per item (module docstring).

    train: bool [U, I]. Returns `ItemKNN`.
    """
    k = validate.integer("k", k, low=1)
    train = as_positive_csr(train)
    normalised = _scale(train, cols=_inverse_sqrt(np.bincount(train.indices,
                                                              minlength=train.shape[1])))
    ranked = _ranked_neighbours(_without_diagonal(normalised.T @ normalised), k)
    return ItemKNN(train=train, neighbours=_neighbour_matrix(ranked, k), k=k)


def item_knn_scores(model: ItemKNN, users) -> np.ndarray:
    """s(u, i) = Σ_{j ∈ R_u} sim(j, i) [i ∈ kNN(j)] for the given users.
    users: int[B] -> f32[B, I]."""
    users = check_users(users, model.train.shape[0])
    return (model.train[users].astype(np.float32) @ model.neighbours).toarray()


def item_knn_history_scores(model: ItemKNN, history) -> np.ndarray:
    """s(b, i) = Σ_{j ∈ R_b} sim(j, i) [i ∈ kNN(j)] for users given by their histories
    (bool [B, I], rows may be empty), the trained neighbourhoods fixed.  Returns f32[B, I]."""
    history = as_history_csr(history, model.train.shape[1])
    return (history.astype(np.float32) @ model.neighbours).toarray()

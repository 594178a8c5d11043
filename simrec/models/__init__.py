"""Recommendation models that score every item for a user: MF-ADG, MF-AUC and baselines.

Every model is an `MF` pytree scored by `scores(params, users) -> f32[B, I]`:

* `train(key, OptADG(...) | MFAUC(...), train_matrix, ...)`: MF-ADG (Lim Alg. 1) and MF-AUC;
* `ials(key, train_matrix, ...)`: iALS / WMF (AllRank), with `fold_in` for new users;
* `svd(train_matrix, dim)`: rank-k truncated SVD;
* `popularity(train_matrix)`: item counts.

Neighbourhood and linear autoencoder models have their own score functions:

* `ease_grid(train, l2s)` / `ease_scores(model, users)`: EASE^R over a grid of lambda;
* `kunn_grid(train, user_ks, item_ks)` / `kunn_scores`: KUNN; `item_knn` / `item_knn_scores`.
"""
from simrec.models.data import as_positive_csr
from simrec.models.ease import EASE, GramEigen, ease, ease_grid, ease_scores, ease_weights, gram_eigen
from simrec.models.explicit import allrank, fold_in_ratings, mf_rmse
from simrec.models.ials import fold_in, ials
from simrec.models.knn import KUNN, ItemKNN, item_knn, item_knn_scores, kunn, kunn_grid, kunn_scores
from simrec.models.mf import MF, init_mf, scores
from simrec.models.mf_auc import MFAUC
from simrec.models.opt_adg import OptADG
from simrec.models.popularity import popularity
from simrec.models.svd import svd
from simrec.models.training import train

__all__ = ["MF", "init_mf", "scores", "OptADG", "MFAUC", "train", "ials", "fold_in", "svd",
           "popularity", "as_positive_csr", "EASE", "GramEigen", "ease", "ease_grid", "ease_scores",
           "ease_weights", "gram_eigen", "KUNN", "ItemKNN", "item_knn", "item_knn_scores", "kunn",
           "kunn_grid", "kunn_scores", "mf_rmse", "allrank", "fold_in_ratings"]

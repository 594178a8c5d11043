"""Recommendation models that score every item for a user: MF-ADG, MF-AUC and baselines.

One API for every family (`simrec.models.api`): a typed spec per family, `fit` dispatched on the
spec's type and `score` for training users or, from their histories, new users:

    model = fit(key, MFSpec(OptADG(dim=50), l2=0.01, learning_rate=0.1), train, pairs=400_000)
    metrics.evaluate(lambda users: score(model, users), test, exclude=train)

Specs: `MFSpec` (objective `OptADG` or `MFAUC`; `FoldIn`, `EarlyStopping`), `SVDSpec`,
`IALSSpec`, `EASESpec`, `KUNNSpec`, `ItemKNNSpec`, `PopularitySpec`, `MFRMSESpec`,
`AllRankSpec`; `spec_id` hashes one for cache addresses, `fit_grid` fits many sharing work.
`EarlyStopping` in a trained family's spec stops it on a validation metric (`best_checkpoint`
reads where); `select(grid, values)`
picks a grid point and flags hyperparameters selected at the edge of their grid (`Selection`).
`tune(key, grid, spec_of, train, validation=...)` is the one tuning loop (fit, score, select;
`simrec.models.tuning`), and `fitted` is `fit` through a content-addressed store of fitted models
that studies share (`store(folder)`; the runner opens one in its cache folder).

The trainers and scorers underneath stay public:

* `train(key, OptADG(...) | MFAUC(...), train_matrix, ...)`: MF-ADG (Lim Alg. 1) and MF-AUC,
  scored by `scores(params, users) -> f32[B, I]` like every `MF`;
* `ials(key, train_matrix, ...)`: iALS / WMF (AllRank), with `fold_in` for new users
  (`ials_sweeps`: one sweep at a time);
* `svd(train_matrix, dim)`: rank-k truncated SVD; `popularity(train_matrix)`: item counts;
* `ease_grid(train, l2s)` / `ease_scores(model, users)`: EASE^R over a grid of lambda;
* `kunn_grid(train, user_ks, item_ks)` / `kunn_scores`: KUNN; `item_knn` / `item_knn_scores`;
* `mf_rmse`, `allrank`, `fold_in_ratings`: explicit-rating MF (`simrec.models.explicit`;
  `mf_rmse_sweeps`, `allrank_sweeps`: one sweep at a time).
"""
from simrec.models.api import (OPTIMIZERS, SPECS, AllRankSpec, EarlyStopping, EASESpec, FoldIn,
                               IALSSpec, ItemKNNSpec, KUNNSpec, MFRMSESpec, MFSpec, Model,
                               PopularitySpec, Spec, SVDSpec, best_checkpoint, fit, fit_grid,
                               score, spec_id)
from simrec.models.positives import as_positive_csr
from simrec.models.ease import (EASE, GramEigen, ease, ease_grid, ease_history_scores, ease_scores,
                                ease_weights, gram_eigen)
from simrec.models.explicit import (allrank, allrank_sweeps, fold_in_ratings, mf_rmse,
                                    mf_rmse_sweeps)
from simrec.models.ials import fold_in, ials, ials_sweeps
from simrec.models.knn import (KUNN, ItemKNN, item_knn, item_knn_history_scores, item_knn_scores,
                               kunn, kunn_grid, kunn_history_scores, kunn_scores)
from simrec.models.mf import MF, init_mf, scores
from simrec.models.mf_auc import MFAUC
from simrec.models.opt_adg import OptADG
from simrec.models.popularity import popularity
from simrec.models.selection import Selection, select
from simrec.models.svd import svd
from simrec.models.training import train
from simrec.models.tuning import Trial, Tuning, data_digest, fit_address, fitted, store, tune

__all__ = ["fit", "fit_grid", "score", "spec_id", "Model", "Spec", "SPECS", "OPTIMIZERS", "MFSpec",
           "FoldIn", "EarlyStopping", "SVDSpec", "IALSSpec", "EASESpec", "KUNNSpec", "ItemKNNSpec",
           "PopularitySpec", "MFRMSESpec", "AllRankSpec", "best_checkpoint", "select", "Selection",
           "MF", "init_mf", "scores", "OptADG", "MFAUC", "train", "ials", "ials_sweeps", "fold_in",
           "svd",
           "popularity", "as_positive_csr", "EASE", "GramEigen", "ease", "ease_grid", "ease_scores",
           "ease_history_scores", "ease_weights", "gram_eigen", "KUNN", "ItemKNN", "item_knn",
           "item_knn_scores", "item_knn_history_scores", "kunn", "kunn_grid", "kunn_scores",
           "kunn_history_scores", "mf_rmse", "mf_rmse_sweeps", "allrank", "allrank_sweeps",
           "fold_in_ratings", "Trial", "Tuning", "tune", "fitted", "store", "data_digest", "fit_address"]

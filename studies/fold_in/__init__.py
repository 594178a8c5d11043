"""Study ``fold_in``: NDCG@K of new users as they reveal more interactions (FastML, "Evaluating
recommender systems"), with every model's hyperparameters tuned on validation users.

Strong generalisation: the users are split into training users, validation users and test users
(held out). For each held-out user the items are put in a uniformly random order and the first
L = 1 .. max_known are revealed (nested: the L-th reveal adds one item); the model gets the L
revealed items, ranks every item not revealed, and NDCG@K is computed on the user's remaining
items. Models need no retraining; each is a `simrec.models` spec (`model_spec`), fitted by
`simrec.models.fit_grid` and scored from a history by `simrec.models.score(model, None, history)`:

* popularity: training counts (the same list for everyone);
* iALS (Hu et al. ICDM'08; `simrec.models.ials`): the user vector is the ridge-regularised least
  squares solve with the item factors fixed (the model function `simrec.models.fold_in`, one ALS
  half-step; not to be confused with `jax.random.fold_in` or this study):
  x = (w0 YᵀY + (1 - w0) Y_Lᵀ Y_L + λI)⁻¹ Y_Lᵀ 1, Y_L the factors of the L revealed items; the
  fold-in λ is iALS's own λ (the half-step of its training), searched as one hyperparameter;
* MF-ADG (Lim et al. RecSys'15, OPT-ADG; `simrec.models.MFSpec` with a `FoldIn`): the same ridge
  solve with the item factors θᵢ of the OPT-ADG-trained MF fixed, scored by x·θᵢ (the trained item
  bias bᵢ is left out: it is on the scale of the trained user vectors, and a probe on the weak
  split scored NDCG@50 0.12 without it vs 0.09 with it on the simulated data, 0.25 vs 0.20 on
  ml-latest-small); its training λ (`l2`) and its fold-in λ (`fold_in_l2`) are searched jointly;
  the fold-in is not part of training, so one fit serves every fold-in λ;
* EASE^R (Steck WWW'19) and item-kNN (cosine): the scores are a product of the revealed history
  with the item-item weights, so a new history is simply scored.

Tuning: every hyperparameter grid is log-spaced and wide (`FoldInConfig`); each grid point is
scored by its MANDCG on the validation users (the strong protocol above), and
`simrec.models.select` picks the best (values equal to 4 decimals are ties, won by the smaller
value) and flags a hyperparameter selected at the smallest or largest value of its grid ("at grid
edge": the optimum may lie beyond it). MF-ADG's training λ follows the one-standard-error rule
(`selection`). Two grids end on a plateau by construction: as the fold-in λ grows, the fold-in
ranking tends to that of Σ_(j revealed) θⱼ·θᵢ (x → Y_Lᵀ1 / λ), and k at or above the number of
items makes every item a neighbour; the top two values of each lie on the plateau, so a tie there
selects the smaller. The trained models stop
early (`simrec.models.EarlyStopping`, NDCG@10 on a per-user validation part of the training
users' interactions): MF-ADG every `stop_every` sampled pairs up to `pairs`, iALS every sweep up to
`ials_sweeps`; each keeps its best checkpoint, and its curve is recorded.

Data sources: a simulated world, MovieLens ml-latest-small (ratings >= min_rating are positives)
and the HetRec 2011 last.fm listening data (Cantador, Brusilovsky, Kuflik, HetRec 2011;
non-commercial use only; every artist a user listened to is a positive, artists with fewer than
`lastfm_min_item` listeners are dropped). A real source whose file is absent is skipped.

The held-out users (test and validation) are drawn among the users with at least
max_known + min_rest interactions, so every point of a curve averages the same users, and every
other user trains; the curves reach L = 50 (FastML's crossing lies near there), except on HetRec
last.fm, whose file lists at most 50 artists per user (`lastfm_max_known` = 30 keeps about 1,000
eligible users). The curves are mean NDCG@K against L with normal confidence
bands over users; crossing points are the L where the order of two models' means changes;
MANDCG (FastML) is the mean over users of the per-user average over L = 1 .. max_known, with its
standard error over users. Weak generalisation for comparison: the training users' interactions
are split per user (train / early-stopping validation / weak_test_fraction test); every model is
fitted on the training part and that one fit serves both protocols — new users folded in
(strong) and the training users scored on their test part with training items excluded (weak;
for the fold-in models the training user's vector is the same ridge solve on their training
items, which for iALS is its trained vector). All L are evaluated in
one metrics pass per model: the L = 1 .. max_known histories of every evaluated user are stacked
as rows of one sparse matrix, and fold-in solves run batched over those rows.

`setup` prepares every data source (positives, the user split, the stacked reveals, the weak
split); a cell is (data source, model): it fits the model's grid (every fit through
`simrec.models.fitted`, the content-addressed store of fits the runner opens in its cache folder),
selects on the validation users and evaluates the selected setting under both protocols.

The package: this module holds the configuration (`FoldInConfig`, `PRESETS`), the record schema
(`COLUMNS`) and `STUDY`; `compute` the data sources, models, selection and evaluation (cells,
setup, compute); `report` the tables, figures, the FastML note's claims beside ours and the prose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.config import ConfigError
from simrec.runner import Study
from simrec.world import WorldConfig
from simrec_studies.common.configs import checked
from simrec_studies.fold_in.compute import cells, compute, data_files, setup
from simrec_studies.fold_in.report import report

__all__ = ["FoldInConfig", "COLUMNS", "PRESETS", "STUDY"]

#: the record schema: one row per (data, model) and
#: - protocol "validation", measure "mandcg": MANDCG of one grid point on the validation users;
#: - protocol "stopping", measure STOP_METRIC: one point of a grid fit's early-stopping curve;
#: - at the selected grid point: protocol "strong", measure "ndcg" (curve point L), protocol
#:   "strong", measure "mandcg" (L = 0) and protocol "weak", measure "ndcg" (L = 0), on test users;
#: statistics over the users averaged
COLUMNS = {"data": str, "model": str, "protocol": str, "measure": str,
           "L": int,                                        # revealed items (0: not on the curve)
           "l2": float, "fold_in_l2": float, "k": float,    # the grid point (NaN: not a parameter)
           "budget": int,                                   # MF-ADG sampled pairs, iALS sweeps:
           # at the curve point (stopping) or the best checkpoint (else); 0 for untrained models
           "mean": float, "low": float, "high": float,      # mean NDCG@k and its confidence interval
           "se": float,                                     # standard error over users
           "users": int,                                    # users averaged
           "seconds": float}                                # wall time of the cell (grid + evaluation)


def _log_grid(low: float, high: float, per_decade: int = 1) -> tuple[float, ...]:
    """Log-spaced values low .. high, `per_decade` per factor of 10 (rounded to 3 digits)."""
    n = round(math.log10(high / low) * per_decade)
    return tuple(float(f"{low * 10 ** (i / per_decade):.3g}") for i in range(n + 1))


@dataclass(frozen=True)
class FoldInConfig:
    """Data, protocols, grids and model settings of the fold-in study."""
    #: MovieLens ratings below the data folder ("" skips them)
    ratings_file: str = "ml-latest-small/ratings.csv"
    min_rating: float = 4.0                 # MovieLens: ratings >= this are positives
    min_item: int = 5                       # MovieLens: keep items with >= this many positive users
    #: HetRec last.fm user-artist listening counts below the data folder ("" skips them)
    lastfm_file: str = "hetrec-lastfm-2k/user_artists.dat"
    lastfm_min_item: int = 10               # last.fm: keep artists with >= this many listeners
    #: the simulated world
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1500,
                                                                   offset=-4.0))
    observation_rate: float = 0.5           # SRS rate of the simulated observed sets
    #: share of the eligible users (>= L + min_rest interactions) held out as test users (strong
    #: generalisation); the users neither test nor validation users train
    held_out_fraction: float = 0.5
    validation_fraction: float = 0.15       # share of the eligible users held out for tuning
    max_known: int = 50                     # largest number L of revealed interactions
    #: HetRec last.fm's largest L: its file lists at most 50 artists per user, and after the
    #: listener filter about 1,000 users keep >= 35, 300 >= 45
    lastfm_max_known: int = 30
    min_rest: int = 5                       # held-out users need L + min_rest interactions
    k: int = 50                             # NDCG cutoff
    weak_test_fraction: float = 0.2         # per-user test share of the training users (weak)
    stop_fraction: float = 0.1              # per-user early-stopping share of the training users
    ials_dim: int = 32                      # iALS and MF-ADG dimension k
    ials_l2s: tuple[float, ...] = _log_grid(0.1, 100.0)         # iALS λ grid (also its fold-in)
    ials_unobserved_weight: float = 0.05    # iALS weight of unobserved pairs, also of both fold-ins
    ials_sweeps: int = 16                   # iALS: most ALS sweeps (early stopping every sweep)
    pairs: int = 3_000_000                  # MF-ADG (γ = 100): most sampled (u, i⁺) pairs
    stop_every: int = 100_000               # MF-ADG: sampled pairs between early-stopping checks
    patience: int = 3                       # early stopping: checks without improvement
    batch_size: int = 256                   # MF-ADG: sampled pairs per step
    adg_learning_rate: float = 0.1          # MF-ADG: adagrad learning rate
    adg_l2s: tuple[float, ...] = _log_grid(1e-3, 1.0)           # MF-ADG training λ grid
    #: MF-ADG fold-in λ grid; as λ grows the ranking tends to that of Σ_(j revealed) θⱼ·θᵢ, which
    #: the top values reach (a plateau: equal values select the smaller λ)
    fold_in_l2s: tuple[float, ...] = _log_grid(1.0, 1e6)
    ease_l2s: tuple[float, ...] = _log_grid(10.0, 1e4)          # EASE λ grid
    #: item-kNN neighbours grid; k >= the number of items makes every item a neighbour, which
    #: the top two values do for these data (a plateau: equal values select the smaller k)
    knn_ks: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000, 10000)
    level: float = 0.95                     # confidence level of the bands

    def __post_init__(self):
        for name in ("max_known", "lastfm_max_known", "min_rest", "k", "ials_dim", "ials_sweeps", "pairs",
                     "stop_every", "patience", "batch_size", "min_item", "lastfm_min_item"):
            checked(validate.integer, name, getattr(self, name), low=1)
        for name in ("held_out_fraction", "validation_fraction", "weak_test_fraction",
                     "stop_fraction", "level"):
            checked(validate.probability, name, getattr(self, name), low_open=True, high_open=True)
        checked(validate.probability, "observation_rate", self.observation_rate, low_open=True)
        checked(validate.positive, "adg_learning_rate", self.adg_learning_rate)
        checked(validate.finite, "ials_unobserved_weight", self.ials_unobserved_weight, low=0.0)
        checked(validate.finite, "held_out_fraction + validation_fraction (some users must train)",
                self.held_out_fraction + self.validation_fraction, high=1.0, high_open=True)
        checked(validate.finite, "weak_test_fraction + stop_fraction (some interactions must train)",
                self.weak_test_fraction + self.stop_fraction, high=1.0, high_open=True)
        for name in ("ials_l2s", "adg_l2s", "fold_in_l2s", "ease_l2s", "knn_ks"):
            grid = getattr(self, name)
            checked(validate.numbers, name, grid, low=0.0, low_open=True)
            if not grid or len(set(grid)) != len(grid):
                raise ConfigError(f"{name} must be a non-empty grid of distinct values > 0, got {grid}")
        for k in self.knn_ks:
            checked(validate.integer, "knn_ks", k, low=1)


PRESETS = {
    "smoke": FoldInConfig(ratings_file="", lastfm_file="",
                          world=WorldConfig(n_users=200, n_items=150, offset=-2.5),
                          max_known=5, lastfm_max_known=5, min_rest=3, k=10, ials_dim=8, ials_sweeps=3,
                          pairs=40_000, stop_every=10_000, ials_l2s=(1.0, 10.0, 100.0),
                          adg_l2s=(0.01, 0.1, 1.0), fold_in_l2s=(0.1, 1.0, 10.0),
                          ease_l2s=(5.0, 50.0, 500.0), knn_ks=(5, 20, 80)),
    "default": FoldInConfig(),
    "paper": FoldInConfig(world=WorldConfig(n_users=6000, n_items=3000, offset=-4.6), ials_dim=64,
                          ials_sweeps=20, pairs=10_000_000,
                          ials_l2s=_log_grid(0.03, 300.0, 2), adg_l2s=_log_grid(1e-4, 1.0, 2),
                          fold_in_l2s=_log_grid(0.1, 1e6, 2), ease_l2s=_log_grid(3.0, 3e4, 2),
                          knn_ks=(10, 30, 100, 300, 1000, 3000, 10000)),
}

STUDY = Study(
    name="fold_in",
    description="FastML: NDCG@K of new users vs the number L of revealed interactions "
                "(fold-in, strong generalisation), crossing points and MANDCG, next to weak "
                "generalisation, for popularity, iALS and MF-ADG fold-in, EASE and item-kNN, "
                "every hyperparameter tuned on validation users (simulated, ml-latest-small, "
                "HetRec last.fm)",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=data_files, expected_seconds={"smoke": 30, "default": 75, "paper": 1800})

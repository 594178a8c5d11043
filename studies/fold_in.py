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

Only held-out users with at least max_known + min_rest interactions are evaluated, so every point
of a curve averages the same users. The curves are mean NDCG@K against L with normal confidence
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
split); a cell is (data source, model): it fits the model's grid, selects on the validation users
and evaluates the selected setting under both protocols.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world
from simrec.datafiles import data_file, skipped_note

MODELS = ("popularity", "iALS", "MF-ADG", "EASE", "item-kNN")
SIMULATED, MOVIELENS, LASTFM = "simulated", "ml-latest-small", "hetrec-lastfm"
#: the early-stopping metric of the trained models (a `simrec.metrics.evaluate` name)
STOP_METRIC = "ndcg@10"
#: the hyperparameter columns of the records (NaN where a model has no such hyperparameter)
HYPERPARAMETERS = ("l2", "fold_in_l2", "k")
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
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=1000, n_items=1500,
                                                                   offset=-4.0))
    observation_rate: float = 0.5           # SRS rate of the simulated observed sets
    held_out_fraction: float = 0.25         # share of users held out as test users (strong)
    validation_fraction: float = 0.1        # share of users held out as validation users (tuning)
    max_known: int = 30                     # largest number L of revealed interactions
    min_rest: int = 5                       # held-out users need max_known + min_rest interactions
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
        for name in ("max_known", "min_rest", "k", "ials_dim", "ials_sweeps", "pairs",
                     "stop_every", "patience", "batch_size", "min_item", "lastfm_min_item"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("held_out_fraction", "validation_fraction", "weak_test_fraction",
                     "stop_fraction", "level"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if not 0 < self.observation_rate <= 1:
            raise ValueError(f"observation_rate must be in (0, 1], got {self.observation_rate}")
        if self.held_out_fraction + self.validation_fraction >= 1:
            raise ValueError("held_out_fraction + validation_fraction must be < 1 (some users "
                             f"train), got {self.held_out_fraction} + {self.validation_fraction}")
        if self.weak_test_fraction + self.stop_fraction >= 1:
            raise ValueError("weak_test_fraction + stop_fraction must be < 1, got "
                             f"{self.weak_test_fraction} + {self.stop_fraction}")
        for name in ("adg_learning_rate",):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be finite and > 0, got {getattr(self, name)}")
        if not (math.isfinite(self.ials_unobserved_weight) and self.ials_unobserved_weight >= 0):
            raise ValueError(f"ials_unobserved_weight must be finite and >= 0, got "
                             f"{self.ials_unobserved_weight}")
        for name in ("ials_l2s", "adg_l2s", "fold_in_l2s", "ease_l2s", "knn_ks"):
            grid = getattr(self, name)
            if not grid or not all(math.isfinite(v) and v > 0 for v in grid) \
                    or len(set(grid)) != len(grid):
                raise ValueError(f"{name} must be a non-empty grid of distinct finite values > 0, "
                                 f"got {grid}")
        if not all(isinstance(v, int) for v in self.knn_ks):
            raise ValueError(f"knn_ks must hold integers, got {self.knn_ks}")


PRESETS = {
    "smoke": FoldInConfig(ratings_file="", lastfm_file="",
                          world=WorldConfig(n_users=200, n_items=150, offset=-2.5),
                          max_known=5, min_rest=3, k=10, ials_dim=8, ials_sweeps=3,
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


# ---- setup: every data source, split for both protocols ---------------------------------------

@dataclass(frozen=True)
class Reveals:
    """Evaluated held-out users, stacked: bool CSR [R * max_known, I] `known` (row
    r * max_known + L - 1: user r's first L revealed items) and `rest` (the others)."""
    known: sp.csr_matrix
    rest: sp.csr_matrix


@dataclass(frozen=True)
class Source:
    """A data source split for both protocols. Strong: the test users' (`test`) and the validation
    users' (`validation`) stacked reveals; weak: the training users' per-user split `weak_train`
    (fits the models), `weak_stop` (early stopping) and `weak_test` [U_train, I]."""
    test: Reveals
    validation: Reveals
    weak_train: sp.csr_matrix
    weak_stop: sp.csr_matrix
    weak_test: sp.csr_matrix


@dataclass(frozen=True)
class Shared:
    """Every data source of the run, by name (`sources`)."""
    sources: dict[str, Source]


def data_files(config: FoldInConfig) -> list[str]:
    """The MovieLens and HetRec files a run reads ("" entries disable one)."""
    return list(_real_files(config).values())


def _real_files(config: FoldInConfig) -> dict[str, str]:
    return {MOVIELENS: config.ratings_file, LASTFM: config.lastfm_file}


def sources(config: FoldInConfig) -> list[str]:
    """The data sources of a run: the simulated world, and each real data set whose file exists."""
    return [SIMULATED] + [name for name, path in _real_files(config).items()
                          if data_file(path)]


def _source_key(key: jax.Array, source: str) -> jax.Array:
    """The key of a data source's splits and fits: ``cell_key(key, {"data": source})``."""
    return cell_key(key, {"data": source})


def _positives(key, config: FoldInConfig, source: str) -> sp.csr_matrix:
    """Observed positives O+ [U, I] of a real data set or of the simulated world."""
    if source == MOVIELENS:
        raw = data.load_interactions(data_file(config.ratings_file))
        return data.filter_min_counts(data.filter_ratings(raw, config.min_rating),
                                      min_item=config.min_item).ratings.astype(bool)
    if source == LASTFM:                                  # every listened artist is a positive
        raw = data.load_interactions(data_file(config.lastfm_file))
        return data.filter_min_counts(raw, min_item=config.lastfm_min_item).ratings.astype(bool)
    world = make_world(shared_key(key, "world"), config.world)
    prior = missing.prior_relevant(shared_key(key, "prior"), world)
    return missing.observe_srs(shared_key(key, "observe"), prior, config.observation_rate)


def _reveal_positions(key, held_out: sp.csr_matrix) -> np.ndarray:
    """i64[nnz]: each entry's 0-based position in its row under a uniformly random order; an
    entry is revealed at L known items iff its position < L (so reveals are nested in L)."""
    rows = np.repeat(np.arange(held_out.shape[0]), np.diff(held_out.indptr))
    order = np.lexsort((np.asarray(jax.random.uniform(key, (held_out.nnz,))), rows))
    positions = np.empty(held_out.nnz, np.int64)
    positions[order] = np.arange(held_out.nnz) - held_out.indptr[rows[order]]
    return positions


def _stacked_reveals(held_out: sp.csr_matrix, positions: np.ndarray, max_known: int):
    """(known, rest): bool CSR [R * max_known, I], row r * max_known + L - 1 holding user r's
    first L revealed items (known) and the others (rest), for L = 1 .. max_known, so one
    metrics pass covers every L."""
    n_rows = held_out.shape[0]
    reveals = np.arange(1, max_known + 1)
    entry_rows = np.repeat(np.arange(n_rows), np.diff(held_out.indptr))
    stacked_rows = entry_rows[:, None] * max_known + reveals - 1         # [nnz, max_known]
    is_known = positions[:, None] < reveals                               # [nnz, max_known]
    items = np.broadcast_to(held_out.indices[:, None], is_known.shape)
    shape = (n_rows * max_known, held_out.shape[1])

    def csr(keep):
        return sp.csr_matrix((np.ones(int(keep.sum()), bool), (stacked_rows[keep], items[keep])),
                             shape=shape)
    return csr(is_known), csr(~is_known)


def _reveals(key, config: FoldInConfig, held_out: sp.csr_matrix, what: str) -> Reveals:
    """The stacked reveals of the held-out users with >= max_known + min_rest interactions."""
    counts = np.diff(held_out.indptr)
    evaluated = held_out[counts >= config.max_known + config.min_rest]
    if evaluated.shape[0] < 2:
        raise ValueError(f"fewer than 2 {what} users have >= max_known + min_rest = "
                         f"{config.max_known + config.min_rest} interactions; lower max_known")
    return Reveals(*_stacked_reveals(evaluated, _reveal_positions(key, evaluated),
                                     config.max_known))


def prepare(key: jax.Array, config: FoldInConfig, source: str) -> Source:
    """A data source's positives split for both protocols; `key` is `_source_key` (fold_in 0:
    held-out users, 1: test reveal order, 3: weak split, 4: validation users among the held-out
    ones, 5: validation reveal order; 2 is the models')."""
    observed = _positives(key, config, source)
    held = config.held_out_fraction + config.validation_fraction
    users = missing.split_users(jax.random.fold_in(key, 0), observed, held)
    held_out = missing.split_users(jax.random.fold_in(key, 4), users.held_out,
                                   config.validation_fraction / held)
    weak = missing.split_per_user(
        jax.random.fold_in(key, 3), users.train,
        (1 - config.stop_fraction - config.weak_test_fraction, config.stop_fraction,
         config.weak_test_fraction), n_folds=1)[0]
    return Source(test=_reveals(jax.random.fold_in(key, 1), config, held_out.train,
                                f"{source}: test"),
                  validation=_reveals(jax.random.fold_in(key, 5), config, held_out.held_out,
                                      f"{source}: validation"),
                  weak_train=weak.train, weak_stop=weak.valid, weak_test=weak.test)


def setup(key: jax.Array, config: FoldInConfig) -> Shared:
    """Every data source of the run (`prepare`), from the run's root key."""
    return Shared(sources={name: prepare(_source_key(key, name), config, name)
                           for name in sources(config)})


# ---- models ---------------------------------------------------------------------------------

#: the fold_in index of the key of each model that starts from random parameters
MODEL_KEYS = {"iALS": 0, "MF-ADG": 1}


def _stopping(config: FoldInConfig, model: str) -> models.EarlyStopping:
    """Early stopping of a trained model: every `stop_every` pairs (MF-ADG) or every sweep (iALS)."""
    every = config.stop_every if model == "MF-ADG" else 1
    return models.EarlyStopping(every=every, metric=STOP_METRIC, patience=config.patience)


def model_grid(config: FoldInConfig, model: str) -> list[dict[str, float]]:
    """The hyperparameter grid points {name: value} of `model` (one of `MODELS`; names from
    `HYPERPARAMETERS`); [{}] for popularity. MF-ADG's grid is the product of its training λ
    grid and its fold-in λ grid."""
    if model == "popularity":
        return [{}]
    if model == "iALS":
        return [{"l2": v} for v in config.ials_l2s]
    if model == "MF-ADG":
        return [{"l2": v, "fold_in_l2": w} for v in config.adg_l2s for w in config.fold_in_l2s]
    if model == "EASE":
        return [{"l2": v} for v in config.ease_l2s]
    if model == "item-kNN":
        return [{"k": float(v)} for v in config.knn_ks]
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def model_spec(config: FoldInConfig, model: str, point: dict[str, float]):
    """The `simrec.models` spec of `model` (one of `MODELS`) at grid point `point`
    (`model_grid`). iALS and MF-ADG score a history by the ridge fold-in with their item factors
    fixed (module docstring) and stop early, the other models score by their item-item weights
    or counts."""
    if model == "popularity":
        return models.PopularitySpec()
    if model == "iALS":
        return models.IALSSpec(dim=config.ials_dim, l2=point["l2"],
                               unobserved_weight=config.ials_unobserved_weight,
                               sweeps=config.ials_sweeps, early_stopping=_stopping(config, model))
    if model == "MF-ADG":
        return models.MFSpec(models.OptADG(dim=config.ials_dim), l2=point["l2"],
                             learning_rate=config.adg_learning_rate, optimizer="adagrad",
                             batch_size=config.batch_size,
                             fold_in=models.FoldIn(l2=point["fold_in_l2"],
                                                   unobserved_weight=config.ials_unobserved_weight),
                             early_stopping=_stopping(config, model))
    if model == "EASE":
        return models.EASESpec(l2=point["l2"])
    if model == "item-kNN":
        return models.ItemKNNSpec(k=int(point["k"]))
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def _with_fold_in(fitted: models.Model, spec) -> models.Model:
    """`fitted` scoring new users by `spec`'s fold-in: the fold-in is not part of training, so the
    trained parameters serve every fold-in λ."""
    return models.Model(spec, fitted.params, fitted.curve)


def fit_grid(key, config: FoldInConfig, source: Source, model: str) -> list[models.Model]:
    """`model` fitted at every point of `model_grid` on `source.weak_train` (trained models stop
    early on `source.weak_stop`); iALS draws from fold_in(key, 0), MF-ADG from fold_in(key, 1)
    (`MODEL_KEYS`), every grid point from the same key. MF-ADG is trained once per training λ."""
    grid = model_grid(config, model)
    specs = [model_spec(config, model, point) for point in grid]
    own = jax.random.fold_in(key, MODEL_KEYS[model]) if model in MODEL_KEYS else None
    trained = model in MODEL_KEYS
    options = {"validation": source.weak_stop if trained else None,
               "pairs": config.pairs if model == "MF-ADG" else None}
    if model != "MF-ADG":
        return models.fit_grid(own, specs, source.weak_train, **options)
    fits = dict(zip(config.adg_l2s, models.fit_grid(
        own, [specs[i * len(config.fold_in_l2s)] for i in range(len(config.adg_l2s))],
        source.weak_train, **options)))
    return [_with_fold_in(fits[point["l2"]], spec) for point, spec in zip(grid, specs)]


def _history_scorer(model: models.Model):
    """score(history bool CSR [R, I]) -> f32[R, I] of users given by their histories."""
    return lambda history: np.asarray(models.score(model, None, history))


# ---- cells ----------------------------------------------------------------------------------

def cells(config: FoldInConfig) -> list[dict]:
    return [{"data": name, "model": model} for name in sources(config) for model in MODELS]


def _block_scorer(score, histories: sp.csr_matrix):
    """A `metrics.evaluate` score function: a contiguous block of rows -> f32[B, I]."""
    return lambda rows: score(histories[rows[0]:rows[-1] + 1])


def _strong(config: FoldInConfig, score, reveals: Reveals) -> np.ndarray:
    """NDCG@k of every evaluated user (row) at every L (column).  f64[R, max_known]."""
    spec = f"ndcg@{config.k}"
    return metrics.evaluate(_block_scorer(score, reveals.known), reveals.rest,
                            exclude=reveals.known, metrics=(spec,))[spec].reshape(
                                -1, config.max_known)


#: validation MANDCG values equal to this many decimals are ties (far below their standard
#: errors); `simrec.models.select` gives a tie to the earlier grid point (the smaller value)
TIE_DECIMALS = 4


def selection(model: str, points: list[dict[str, float]], means, ses) -> models.Selection | None:
    """The selected grid point of `model` from the validation MANDCG `means` (f[P]) and their
    standard errors `ses` (f[P]) at `points` (`model_grid`): `simrec.models.select` over the
    means rounded to `TIE_DECIMALS`, which also flags grid edges. MF-ADG's training λ follows the
    one-standard-error rule (Hastie, Tibshirani & Friedman, ESL §7.10): the largest training λ
    with a point within one standard error of the best point, then its best fold-in λ (early
    stopping already regularises, and towards small λ the validation MANDCG flattens within its
    standard error, so the plain maximum there is decided by noise). None for a model without
    hyperparameters (popularity)."""
    if not points[0]:
        return None
    values = np.round(np.asarray(means, np.float64), TIE_DECIMALS)
    if model == "MF-ADG":
        best = int(np.argmax(values))
        floor = values[best] - float(ses[best])
        l2 = max(point["l2"] for point, value in zip(points, values) if value >= floor)
        values = np.where([point["l2"] == l2 for point in points], values, np.nan)
    return models.select(points, values)


def compute(key, config: FoldInConfig, cell: dict, shared: Shared) -> list[dict]:
    """Fit the cell's model grid on the weak split's training part (key fold_in(`_source_key`,
    2)); score every grid point by MANDCG on the validation users; at the selected point, strong
    generalisation on the test users (NDCG@k per L with CI, and MANDCG) and weak generalisation
    (NDCG@k on the test part of the training users)."""
    started = time.perf_counter()
    source = shared.sources[cell["data"]]
    grid = model_grid(config, cell["model"])
    fitted = fit_grid(jax.random.fold_in(_source_key(key, cell["data"]), 2), config, source,
                      cell["model"])
    rows = []

    def row(point, budget, protocol, measure, reveals, values):
        mean, low, high, se = (stats.mean_ci(values, config.level) if protocol != "stopping"
                               else (float(values[0]), math.nan, math.nan, math.nan))
        return {**cell, "protocol": protocol, "measure": measure, "L": reveals,
                **{name: point.get(name, math.nan) for name in HYPERPARAMETERS}, "budget": budget,
                "mean": mean, "low": low, "high": high, "se": se, "users": len(values)}

    stop_users = int(np.count_nonzero(np.diff(source.weak_stop.indptr)))
    seen_curves = set()
    for point, model in zip(grid, fitted):
        curve_id = (point.get("l2"), point.get("k"))
        if model.curve and curve_id not in seen_curves:      # one curve per trained fit
            seen_curves.add(curve_id)
            rows += [{**row(point, int(budget), "stopping", STOP_METRIC, 0, [value]),
                      "users": stop_users} for budget, value in model.curve]
    validation = [_strong(config, _history_scorer(model), source.validation).mean(axis=1)
                  for model in fitted]
    scored = [row(point, (models.best_checkpoint(model) or (0,))[0], "validation", "mandcg", 0, values)
              for point, model, values in zip(grid, fitted, validation)]
    rows += scored
    choice = selection(cell["model"], grid, [r["mean"] for r in scored], [r["se"] for r in scored])
    index = 0 if choice is None else choice.index
    point, model = grid[index], fitted[index]
    score = _history_scorer(model)
    strong = _strong(config, score, source.test)
    spec = f"ndcg@{config.k}"
    weak = metrics.evaluate(_block_scorer(score, source.weak_train), source.weak_test,
                            exclude=source.weak_train, metrics=(spec,))[spec]
    samples = [("strong", "ndcg", j + 1, strong[:, j]) for j in range(config.max_known)]
    samples += [("strong", "mandcg", 0, strong.mean(axis=1)),
                ("weak", "ndcg", 0, weak[np.isfinite(weak)])]
    rows += [row(point, (models.best_checkpoint(model) or (0,))[0], protocol, measure, reveals, values)
             for protocol, measure, reveals, values in samples]
    seconds = time.perf_counter() - started
    return [{**r, "seconds": seconds} for r in rows]


# ---- report ---------------------------------------------------------------------------------

def _crossings(curves: pd.DataFrame) -> list[dict]:
    """Per pair of models, the L at which the sign of the difference of mean NDCG changes
    (reported as the first L after the change) and which model leads before and after. A
    crossing is "clear" when the model leading before it is significantly ahead (its confidence
    interval entirely above the other's) at some smaller L and the model leading after it at
    some L at or beyond it; otherwise the order change is within noise."""
    out = []
    for data_name, part in curves.groupby("data", sort=False):
        wide = {v: part.pivot(index="L", columns="model", values=v) for v in ("mean", "low", "high")}
        for i, a in enumerate(MODELS):
            for b in MODELS[i + 1:]:
                diff = (wide["mean"][a] - wide["mean"][b]).to_numpy()
                ahead = {a: (wide["low"][a] > wide["high"][b]).to_numpy(),
                         b: (wide["low"][b] > wide["high"][a]).to_numpy()}
                for j in np.flatnonzero(np.sign(diff[1:]) * np.sign(diff[:-1]) < 0):
                    before, after = (a, b) if diff[j] > 0 else (b, a)
                    out.append({"data": data_name, "model a": a, "model b": b,
                                "L": int(wide["mean"].index[j + 1]),
                                "leader before": before, "leader after": after,
                                "clear": bool(ahead[before][:j + 1].any()
                                              and ahead[after][j + 1:].any())})
    return out


def _tables(config: FoldInConfig, records: pd.DataFrame):
    """(curves, MANDCG table) from the records: the strong NDCG@k curve points on the test users,
    and per data source and model MANDCG, the curve's ends, weak NDCG@k, users and wall time."""
    curves = records[(records.protocol == "strong") & (records.measure == "ndcg")]
    curves = curves[["data", "model", "L", "mean", "low", "high", "se"]].reset_index(drop=True)
    rows = []
    for (name, model), part in records.groupby(["data", "model"], sort=False):
        strong = part[(part.protocol == "strong") & (part.measure == "ndcg")].set_index("L")
        mandcg = part[(part.protocol == "strong") & (part.measure == "mandcg")].iloc[0]
        weak = part[part.protocol == "weak"].iloc[0]
        rows.append({"data": name, "model": model,
                     "MANDCG (strong)": mandcg["mean"], "MANDCG se": mandcg["se"],
                     f"NDCG@{config.k} strong L=1": strong.loc[1, "mean"],
                     f"NDCG@{config.k} strong L={config.max_known}":
                         strong.loc[config.max_known, "mean"],
                     f"NDCG@{config.k} weak": weak["mean"], "weak se": weak["se"],
                     "evaluated users": mandcg["users"], "cell wall time (s)": mandcg["seconds"]})
    return curves, pd.DataFrame(rows)


def _point(row) -> dict[str, float]:
    """A record's grid point {name: value} (its non-NaN `HYPERPARAMETERS`)."""
    return {name: float(row[name]) for name in HYPERPARAMETERS if not math.isnan(row[name])}


def selected_table(config: FoldInConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Per data source and model, the grid point selected by validation MANDCG (`selection` over
    the "validation" records), its validation MANDCG, the users behind it, the budget at its best
    early-stopping checkpoint and whether its training ran to the maximum budget (the safety
    net: `pairs` for MF-ADG, `ials_sweeps` for iALS) without stopping early, the grid size, and
    the hyperparameters at the edge of their grid ("at grid edge") or searched at fewer than 3
    values ("not searched")."""
    rows = []
    for (name, model), part in records.groupby(["data", "model"], sort=False):
        valid = part[part.protocol == "validation"]
        points = [_point(r) for _, r in valid.iterrows()]
        choice = selection(model, points, valid["mean"].to_numpy(), valid["se"].to_numpy())
        best = valid.iloc[0 if choice is None else choice.index]
        test = part[(part.protocol == "strong") & (part.measure == "mandcg")].iloc[0]
        curve = part[(part.protocol == "stopping") & (part.l2 == best["l2"])]
        maximum = config.pairs if model == "MF-ADG" else config.ials_sweeps
        rows.append({"data": name, "model": model,
                     "selected": ", ".join(f"{k} = {v:g}" for k, v in _point(best).items()),
                     "validation MANDCG": best["mean"], "validation se": best["se"],
                     "grid points": len(valid), "validation users": int(best["users"]),
                     "test users": int(test["users"]),
                     "best checkpoint": int(best["budget"]),
                     "ran to maximum": ("" if curve.empty else
                                        "yes" if curve.budget.max() >= maximum else "no"),
                     "at grid edge": "" if choice is None else ", ".join(choice.edges),
                     "not searched": "" if choice is None else ", ".join(choice.unsearched)})
    return pd.DataFrame(rows)


def _stopping_figure(records: pd.DataFrame):
    """Validation NDCG@10 of the training users against sampled pairs, one panel per data source,
    one line per MF-ADG training λ (iALS's curves, in sweeps, are in `table_stopping`)."""
    import matplotlib.pyplot as plt

    curves = records[(records.protocol == "stopping") & (records.model == "MF-ADG")]
    names = list(dict.fromkeys(curves.data))
    fig, axes = plt.subplots(1, max(len(names), 1), figsize=(4.6 * max(len(names), 1), 3.4),
                             squeeze=False)
    for ax, name in zip(axes[0], names):
        part = curves[curves.data == name]
        for l2, line in part.groupby("l2"):
            ax.plot(line.budget, line["mean"], marker=".", label=f"λ = {l2:g}")
        ax.set_xlabel("sampled pairs")
        ax.set_ylabel(f"validation {STOP_METRIC}")
        ax.set_title(f"{name}: MF-ADG early stopping", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def report(config: FoldInConfig, records: pd.DataFrame) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    curves, table = _tables(config, records)
    crossings = pd.DataFrame(_crossings(curves),
                             columns=["data", "model a", "model b", "L", "leader before",
                                      "leader after", "clear"])
    chosen = selected_table(config, records)
    stopping = records[records.protocol == "stopping"][
        ["data", "model", "l2", "budget", "mean"]].rename(columns={"mean": STOP_METRIC})

    sns.set_theme(style="whitegrid", context="paper")
    names = list(dict.fromkeys(table.data))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 3.9), squeeze=False)
    palette = dict(zip(MODELS, sns.color_palette("tab10", len(MODELS))))
    for ax, name in zip(axes[0], names):
        part = curves[curves.data == name]
        for model in MODELS:
            line = part[part.model == model]
            ax.plot(line.L, line["mean"], color=palette[model], label=model)
            ax.fill_between(line.L, line.low, line.high, color=palette[model], alpha=0.2)
        ax.set_xlabel("L (revealed interactions of a new user)")
        ax.set_ylabel(f"mean NDCG@{config.k} on the rest")
        users = int(table[table.data == name]["evaluated users"].iloc[0])
        ax.set_title(f"{name} ({users} held-out users, {config.level:.0%} CI)", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return Report(tables={"table_mandcg": table, "table_selected": chosen,
                          "table_crossings": crossings, "table_curves": curves,
                          "table_stopping": stopping},
                  figures={"fig_ndcg_vs_L": fig, "fig_early_stopping": _stopping_figure(records)},
                  summary=_summary_text(config, table, crossings, chosen))


def _summary_text(config, table, crossings, chosen) -> str:
    lines = [f"Strong generalisation: NDCG@{config.k} of held-out test users after revealing "
             f"L = 1..{config.max_known} interactions (fold-in, no retraining); MANDCG = mean over "
             f"L (± standard error over users). Every model's hyperparameters are selected by "
             f"MANDCG on separate validation users (grids in `manifest.json`, selections in "
             f"`table_selected`; MF-ADG's training λ by the one-standard-error rule, the largest λ "
             f"within one standard error of the best); MF-ADG and iALS stop early on {STOP_METRIC} of a per-user "
             f"{config.stop_fraction:.0%} part of the training users (`fig_early_stopping`). "
             f"Weak generalisation: the same fitted models on a per-user "
             f"{config.weak_test_fraction:.0%} test split of the training users. "
             f"Crossings marked * are within noise: the leader before it is never "
             f"significantly ahead ({config.level:.0%} CIs apart) at a smaller L, or the leader "
             "after it never at a larger one.",
             ""]
    for data_name, part in table.groupby("data", sort=False):
        ranked = part.sort_values("MANDCG (strong)", ascending=False)
        picked = chosen[chosen.data == data_name].set_index("model")
        lines.append(f"- {data_name} ({int(part['evaluated users'].iloc[0])} held-out test users, "
                     f"{int(picked['validation users'].iloc[0])} validation users; fitted, tuned "
                     f"and evaluated in {part['cell wall time (s)'].sum():.0f} s): "
                     "MANDCG " + ", ".join(
                         f"{row.model} {row['MANDCG (strong)']:.3f} ± {row['MANDCG se']:.3f}"
                         for _, row in ranked.iterrows())
                     + f"; weak NDCG@{config.k} " + ", ".join(
                         f"{row.model} {row[f'NDCG@{config.k} weak']:.3f}"
                         for _, row in ranked.iterrows()))
        lines.append("  selected: " + "; ".join(
            f"{model} {row.selected}" for model, row in picked.iterrows() if row.selected))
        cross = crossings[crossings.data == data_name]
        if len(cross):
            lines.append("  crossings: " + "; ".join(
                f"{c['leader before']} -> {c['leader after']} at L = {c['L']}"
                + ("" if c["clear"] else "*") for c in cross.to_dict("records")))
        else:
            lines.append("  no crossings of mean curves")
    edges = chosen[chosen["at grid edge"] != ""]
    net = chosen[chosen["ran to maximum"] == "yes"]
    lines += ["", "Convergence: " + (
        "every selected trained model stopped early (patience) before its maximum budget."
        if net.empty else "the selected " + "; ".join(f"{r.data} {r.model}" for _, r in
                                                      net.iterrows())
        + " ran to the maximum budget without stopping early (raise `pairs` / `ials_sweeps`).")
        + " MF-ADG's training λ and fold-in λ interact: a smaller training λ gives larger item "
        "factors, so the best fold-in λ is larger; the top fold-in values rank by summed item "
        "similarity (the λ → ∞ limit), the top k values make every item a neighbour."]
    lines += ["", "Grid edges (`table_selected`, column 'at grid edge'): " + (
        "none — every selected value is inside its grid." if edges.empty else "; ".join(
            f"{r.data} {r.model}: {r['at grid edge']} (widen that grid)"
            for _, r in edges.iterrows()))]
    for name, path in _real_files(config).items():
        if not data_file(path):
            lines.append(skipped_note(path) if path else f"- {name} disabled (its file is \"\")")
    if data_file(config.lastfm_file):
        lines.append(f"- {LASTFM}: HetRec 2011 last.fm data (Cantador, Brusilovsky, Kuflik, "
                     "HetRec 2011), for non-commercial use only; every listened artist is a "
                     f"positive, artists with fewer than {config.lastfm_min_item} listeners "
                     "dropped.")
    return "\n".join(lines)


STUDY = Study(
    name="fold_in",
    description="FastML: NDCG@K of new users vs the number L of revealed interactions "
                "(fold-in, strong generalisation), crossing points and MANDCG, next to weak "
                "generalisation, for popularity, iALS and MF-ADG fold-in, EASE and item-kNN, "
                "every hyperparameter tuned on validation users (simulated, ml-latest-small, "
                "HetRec last.fm)",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=data_files, expected_seconds={"smoke": 30, "default": 80, "paper": 1800})

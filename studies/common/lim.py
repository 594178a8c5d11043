"""The experiment of Lim, McAuley & Lanckriet (RecSys'15, §6), shared by the studies ``opt_adg``
(their Table 1) and ``valid_vs_test`` (their Table 2): its datasets, model grids, training to
convergence, hyper-parameter search and evaluation protocols, i.e. everything a cell computes.

Datasets (`setup`, `make_dataset`): a paper-like world of `simrec.world.PRESETS` sub-sampled to
``data.n_users`` users with its prior-relevant set P⁺, the SRS-observed O⁺ and the unobserved
relevant items P⁺∖O⁺, or a real dataset (MovieLens ml-latest-small, ratings >= 4 relevant; HetRec
2011 last.fm, every listened artist relevant), each split into per-user folds.

A cell is (dataset, method) (`cells`); `compute` searches the method's grid on fold 0 by held-out
validation ADG (a coordinate search that may step past a float grid's edge, `beyond_edge`),
retrains the best setting on every other fold, and evaluates the selected models under two
protocols (`evaluate_model`). Every trained model stops early on its validation ADG. Models are
fitted through `simrec.models.fitted`, the content-addressed store the runner opens in its cache
folder: the two studies run the same cells on the same data, so the second finds the first's fits
instead of training them again (its records, fit times included, are the same).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import data as real_data, metrics, missing, models
from simrec.datafiles import data_file
from simrec.runner import shared_key
from simrec.world import PRESETS as WORLD_PRESETS, World, make_world, quality_logit

METRICS = ("atop", "ap", "ndcg", "recall@10", "adg")
#: recorded beside `METRICS` for Lim §6's remark that ATOP and AUC differ negligibly (< 0.1 %), so
#: that only ATOP is reported; no table ranks the models by it
CHECKED = ("auc",)
REAL = "ml-latest-small"
HETREC = "hetrec-lastfm"
REAL_DATASETS = (REAL, HETREC)
METHODS = ("oracle", "popularity", "svd", "ials", "mf_auc", "mf_adg")
MF_METHODS = ("mf_auc", "mf_adg")
#: the validation metric of early stopping and of the selection (a `simrec.metrics.evaluate` name)
STOP_METRIC = "adg"
#: evaluation protocols (the `protocol` column of the records): every held-out set ranked in its
#: own list with the other held-out items excluded, averaged over the users with an item in it;
#: or all sets ranked in one list with only train excluded, averaged over the users with items in
#: every set (given the model, the sets are then uniform random subsets of each user's P⁺∖train)
HELD_OUT, COMMON = "held-out excluded", "train excluded, common users"
PROTOCOLS = (HELD_OUT, COMMON)
#: the early-stopping curve rows: validation `STOP_METRIC` (training items excluded) at `budget`
CURVE = "validation curve"
SETS = ("valid", "test", "unobserved")
#: grid axes of each searched method: (primary, secondary); `grid_point` names the record columns
AXES = {"mf_auc": ("l2", "lr"), "mf_adg": ("l2", "lr"), "ials": ("l2", "weight"), "svd": ("rank",)}
#: the methods whose axes are continuous, so a search may step past the grid's edge (`beyond_edge`)
FLOAT_AXES = ("mf_auc", "mf_adg", "ials")
#: the record schema (one row per model, protocol, evaluation set and metric, and one per point of
#: a model's validation curve); also `valid_vs_test`'s
COLUMNS = {"dataset": str, "fold": int, "method": str,
           "l2": float, "lr": float, "rank": int, "weight": float,   # the grid point (0 where unused)
           # at the returned checkpoint (curve rows: at the point): MF sampled pairs / nnz(train)
           # or iALS sweeps; sampled pairs (MF) or sweeps (iALS); 0 for untrained methods
           "epochs": int, "budget": int,
           "net_hit": bool,                              # the safety-net budget ended training
           "train_seconds": float,                       # fit time (a stage's time / its settings)
           "protocol": str, "set": str, "metric": str,   # `PROTOCOLS` or `CURVE`, `SETS`, `METRICS`
           "value": float,                               # mean of the metric over the users
           "size": float}                                # mean |set| over those users with one




@dataclass(frozen=True)
class DataConfig:
    """How every dataset is built and split (shared with `valid_vs_test`)."""
    #: users drawn without replacement from each paper-like world (0 = all; the item catalogue
    #: and the per-user density are kept)
    n_users: int = 3000
    #: SRS rate |O⁺|/|P⁺| (the rate the world presets' offsets are calibrated for)
    observation_rate: float = missing.DEFAULT_OBSERVATION_RATE
    n_folds: int = 4                                   # per-user splits (Lim: 4)
    fractions: tuple[float, ...] = (0.7, 0.1, 0.2)     # (train, valid, test) share of each user
    #: ml-latest-small ratings below the data folder (skipped when absent, "" disables)
    ratings_file: str = "ml-latest-small/ratings.csv"
    real_threshold: float = 4.0                        # ratings >= this are relevant (ml-latest-small)
    #: HetRec 2011 last.fm user-artist listening counts below the data folder; every listed
    #: (user, artist) pair is relevant (skipped when absent, "" disables)
    hetrec_file: str = "hetrec-lastfm-2k/user_artists.dat"
    hetrec_min_listeners: int = 10                     # HetRec: keep artists with >= this many users

    def __post_init__(self):
        if self.n_users < 0:
            raise ValueError(f"data.n_users must be >= 0 (0 = every user), got {self.n_users}")
        if self.hetrec_min_listeners < 1:
            raise ValueError("data.hetrec_min_listeners must be >= 1 (1 keeps every artist), got "
                             f"{self.hetrec_min_listeners}")
        if not 0 < self.observation_rate <= 1:
            raise ValueError(f"data.observation_rate must be in (0, 1], got {self.observation_rate}")
        if self.n_folds < 2:
            raise ValueError(f"data.n_folds must be >= 2 (a paired test needs two), got {self.n_folds}")
        if len(self.fractions) != 3 or min(self.fractions) <= 0 or abs(sum(self.fractions) - 1) > 1e-9:
            raise ValueError(f"data.fractions must be (train, valid, test), each > 0, summing to 1; "
                             f"got {self.fractions}")


@dataclass(frozen=True)
class TrainConfig:
    """Model settings (shared with `valid_vs_test`). MF-ADG, MF-AUC and iALS train until their
    validation ADG has not improved for `patience` evaluations (MF: every `eval_epochs` epochs of
    ⌈nnz(train)/batch_size⌉ steps; iALS: every sweep) and return the best checkpoint; `pairs` and
    `ials_sweeps` are only the safety net. The validation split selects from the grids."""
    dim: int = 50                                      # k of MF-ADG, MF-AUC and iALS
    gamma: float = 100.0                               # γ of OPT-ADG: at most (|I|-1)/γ negative draws
    pairs: int = 50_000_000                            # safety net: most sampled (u, i⁺) pairs per MF model
    eval_epochs: int = 3                               # MF epochs between validation evaluations
    #: evaluations without a strict improvement before stopping (3 stopped slowly rising MF runs
    #: on validation noise: amazon-like λ = 0.01 at 81 epochs, still rising by ~0.0003 per check)
    patience: int = 5
    batch_size: int = 256                              # sampled pairs per MF step
    optimizer: str = "adagrad"                         # MF optax optimizer: adagrad, sgd or adam
    #: MF learning-rate grid (secondary axis, searched at the best λ)
    learning_rates: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)
    #: MF L2 λ grid (primary axis, searched at the middle learning rate)
    l2s: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
    svd_ranks: tuple[int, ...] = (5, 10, 20, 50, 100, 200)   # truncated-SVD rank grid
    ials_l2s: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)    # iALS λ grid (primary axis)
    #: iALS weight w₀ of the unobserved pairs (secondary axis, searched at the best λ)
    ials_weights: tuple[float, ...] = (0.01, 0.1, 1.0)
    ials_sweeps: int = 30                              # safety net: most iALS sweeps
    #: steps a search may take past the edge of a float grid axis while the best value is on it
    #: (MF λ and learning rate, iALS λ and weight; `beyond_edge`); a value still selected at the
    #: edge of what was searched is flagged in table_selected
    edge_steps: int = 2

    def __post_init__(self):
        if self.edge_steps < 0:
            raise ValueError(f"training.edge_steps must be >= 0 (0: search the grids only), got "
                             f"{self.edge_steps}")
        if min(self.dim, self.pairs, self.eval_epochs, self.patience, self.batch_size,
               self.ials_sweeps) < 1:
            raise ValueError("training.dim, pairs, eval_epochs, patience, batch_size, ials_sweeps "
                             f"must be >= 1; got {self.dim}, {self.pairs}, {self.eval_epochs}, "
                             f"{self.patience}, {self.batch_size}, {self.ials_sweeps}")
        if not (math.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"training.gamma must be finite and > 0, got {self.gamma}")
        if self.optimizer not in models.OPTIMIZERS:
            raise ValueError(f"training.optimizer must be one of {sorted(models.OPTIMIZERS)}, "
                             f"got {self.optimizer!r}")
        for name in ("learning_rates", "l2s", "ials_l2s", "ials_weights"):
            grid = getattr(self, name)
            if not grid or any(not (math.isfinite(v) and v > 0) for v in grid) \
                    or len(set(grid)) != len(grid):
                raise ValueError(f"training.{name} must be a non-empty grid of distinct finite "
                                 f"numbers > 0, got {grid}")
        if not self.svd_ranks or min(self.svd_ranks) < 1 or len(set(self.svd_ranks)) != len(self.svd_ranks):
            raise ValueError(f"training.svd_ranks must be a non-empty grid of distinct ranks >= 1, "
                             f"got {self.svd_ranks}")



#: the data and training settings of each preset, the same for both studies so that they share
#: their fits: smoke is a seconds-long check; default sub-samples each world to 2,000 users; paper
#: trains on every user with a safety net of 2.5x the default's sampled pairs for the 5-9x larger
#: training sets (same grids and stopping rule)
PRESET_DATA = {"smoke": DataConfig(n_users=0, n_folds=2), "default": DataConfig(n_users=2000),
               "paper": DataConfig(n_users=0)}
PRESET_TRAINING = {
    "smoke": TrainConfig(dim=4, pairs=20_000, batch_size=32, eval_epochs=1, patience=2, svd_ranks=(2, 3, 5),
                         learning_rates=(0.05, 0.1, 0.2), l2s=(0.001, 0.01, 0.1, 1.0)),
    # pairs: every fit of this preset stops early below 20M sampled pairs but the slowest edge step
    # (movielens-like MF-ADG, lr 0.0027), which is still rising where the net ends it (flagged net_hit)
    "default": TrainConfig(eval_epochs=2, patience=4, learning_rates=(0.03, 0.1, 0.3), l2s=(0.001, 0.01, 0.1, 1.0),
                           pairs=25_000_000),
}
PRESET_TRAINING["paper"] = dataclasses.replace(PRESET_TRAINING["default"], pairs=125_000_000)

def check_datasets(worlds, methods) -> None:
    """Raise ValueError for unknown world presets or methods."""
    unknown = [w for w in worlds if w not in WORLD_PRESETS]
    if unknown:
        raise ValueError(f"worlds: unknown presets {unknown}; choose from {sorted(WORLD_PRESETS)}")
    if not methods or any(m not in METHODS for m in methods):
        raise ValueError(f"methods must be a non-empty subset of {METHODS}, got {methods}")



# ---- setup: every dataset of the run (a sub-sampled world, P⁺, O⁺, P⁺∖O⁺ and the folds) ----------

@dataclass(frozen=True)
class Dataset:
    """Observed O⁺ (bool CSR [U, I]) and its folds; for a simulated world also the unobserved
    relevant items P⁺∖O⁺ [U, I] and the world (None for real data)."""
    observed: sp.csr_matrix
    splits: tuple[missing.Split, ...]
    unobserved: sp.csr_matrix | None
    world: World | None


@dataclass(frozen=True)
class Shared:
    """State shared by the cells of a run: the datasets by name (`datasets`)."""
    datasets: dict[str, Dataset]


def user_subsample(key: jax.Array, world: World, n_users: int) -> World:
    """The world restricted to `n_users` users drawn uniformly without replacement (0 or
    n_users >= U: all). Items, their factors and biases, scale and offset are unchanged."""
    if n_users == 0 or n_users >= world.n_users:
        return world
    users = jnp.sort(jax.random.choice(key, world.n_users, (n_users,), replace=False))
    return dataclasses.replace(world, user_factors=world.user_factors[users],
                               user_log_activity=world.user_log_activity[users], n_users=n_users)


def listened(path, min_listeners: int = 1) -> sp.csr_matrix:
    """HetRec 2011 last.fm ``user_artists.dat`` (or any interaction file) as positives: every
    listed (user, item) pair, whatever its count, of the artists with >= `min_listeners` users
    (`simrec.data.filter_min_counts`).  Returns bool CSR [U, I]."""
    ratings = real_data.filter_min_counts(real_data.load_interactions(path),
                                          min_item=min_listeners).ratings
    return sp.csr_matrix((np.ones(ratings.nnz, bool), ratings.indices, ratings.indptr),
                         shape=ratings.shape)


def _real_file(data: DataConfig, name: str) -> str:
    return data.ratings_file if name == REAL else data.hetrec_file


def make_dataset(key: jax.Array, data: DataConfig, name: str) -> Dataset:
    """The dataset `name` (a world preset or one of `REAL_DATASETS`) of the run with root key
    `key`; every draw comes from ``shared_key(key, f"{part}:{name}")``, so a dataset does not
    depend on the others."""
    if name not in REAL_DATASETS:
        return world_dataset(key, data, name, WORLD_PRESETS[name])
    observed = (real_data.binarize(real_data.load_interactions(data_file(data.ratings_file)), data.real_threshold)
                if name == REAL else listened(data_file(data.hetrec_file), data.hetrec_min_listeners))
    return Dataset(observed=observed, splits=_splits(key, data, name, observed), unobserved=None, world=None)


def world_dataset(key: jax.Array, data: DataConfig, name: str, config) -> Dataset:
    """The dataset of a world drawn from the `simrec.world.WorldConfig` `config` under the name
    `name` (`make_dataset` with a world preset's own config): the world, sub-sampled to
    ``data.n_users`` users, its P⁺, the SRS-observed O⁺, P⁺∖O⁺ and the folds."""
    world = user_subsample(shared_key(key, f"users:{name}"),
                           make_world(shared_key(key, f"world:{name}"), config), data.n_users)
    prior = missing.prior_relevant(shared_key(key, f"prior:{name}"), world)
    observed = missing.observe_srs(shared_key(key, f"observe:{name}"), prior, data.observation_rate)
    return Dataset(observed=observed, splits=_splits(key, data, name, observed),
                   unobserved=_relative_complement(prior, observed), world=world)


def _splits(key: jax.Array, data: DataConfig, name: str, observed: sp.csr_matrix) -> tuple[missing.Split, ...]:
    return tuple(missing.split_per_user(shared_key(key, f"split:{name}"), observed, data.fractions,
                                        data.n_folds))


def _relative_complement(whole: sp.csr_matrix, part: sp.csr_matrix) -> sp.csr_matrix:
    """whole ∖ part for bool CSR matrices with part ⊆ whole."""
    difference = whole.astype(np.int8) - part.astype(np.int8)
    difference.eliminate_zeros()
    return (difference > 0).tocsr()


def data_files(config) -> list[str]:
    """The real-data files a run reads (none without ``config.real``); `config` is an
    `OptADGConfig` or any config with its real and data fields (`valid_vs_test`'s)."""
    return [_real_file(config.data, name) for name in REAL_DATASETS] if config.real else []


def datasets(worlds, real: bool, data: DataConfig) -> list[str]:
    """The dataset names of a run: the worlds, plus the `REAL_DATASETS` asked for and present."""
    present = [name for name in REAL_DATASETS
               if real and data_file(_real_file(data, name)) is not None]
    return list(worlds) + present


def setup(key: jax.Array, config) -> Shared:
    """Every dataset of the run (`make_dataset`); `config` is an `OptADGConfig` or any config with
    the same worlds, real and data fields (`valid_vs_test`'s)."""
    return Shared(datasets={name: make_dataset(key, config.data, name)
                            for name in datasets(config.worlds, config.real, config.data)})


# ---- cells: (dataset, fold, method); each searches the method's grid ----------------------------

_UNUSED = {"l2": 0.0, "lr": 0.0, "rank": 0, "weight": 0.0}


def _axis_values(method: str, training: TrainConfig) -> tuple[tuple, tuple]:
    """(primary values, secondary values) of a searched method's grid axes (`AXES`)."""
    if method in MF_METHODS:
        return training.l2s, training.learning_rates
    if method == "ials":
        return training.ials_l2s, training.ials_weights
    return training.svd_ranks, ()


def middle(values: tuple) -> float:
    return sorted(values)[(len(values) - 1) // 2]


def grid(method: str, training: TrainConfig) -> list[dict]:
    """First search stage of a method: every primary value (`AXES`) at the middle secondary
    value; one setting {"l2", "lr", "rank", "weight"} (0 where unused) for unsearched methods."""
    if method not in AXES:
        return [dict(_UNUSED)]
    primary, secondary = _axis_values(method, training)
    names = AXES[method]
    fixed = {names[1]: middle(secondary)} if secondary else {}
    return [{**_UNUSED, names[0]: value, **fixed} for value in primary]


def refine(method: str, training: TrainConfig, best: dict) -> list[dict]:
    """Second search stage: the other secondary values (`AXES`) at the primary value of `best`
    (the best setting of `grid`); [] for methods with one axis or none."""
    if method not in AXES or len(AXES[method]) < 2:
        return []
    _, secondary = _axis_values(method, training)
    name = AXES[method][1]
    return [{**best, name: value} for value in secondary if value != best[name]]


def beyond_edge(method: str, settings: list[dict], best: dict, axis: int) -> list[dict]:
    """One more value of a float grid axis (`AXES`) when `best` sits at an edge of the values
    `settings` searched on it: the next step of the grid's own ratio past that edge (the ratio of
    the two values nearest the edge), at best's other values; [] when best is inside, the axis
    has fewer than 2 values searched, or the method has no such float axis (SVD ranks)."""
    if method not in FLOAT_AXES or axis >= len(AXES[method]):
        return []
    name = AXES[method][axis]
    values = sorted({setting[name] for setting in settings})
    if len(values) < 2 or values[0] < best[name] < values[-1]:
        return []
    step = values[1] / values[0] if best[name] == values[0] else values[-1] / values[-2]
    return [{**best, name: best[name] / step if best[name] == values[0] else best[name] * step}]


def method_cells(names, methods) -> list[dict]:
    """Every (dataset, method) cell; the oracle only where the truth is known."""
    return [{"dataset": name, "method": method} for name in names for method in methods
            if not (method == "oracle" and name in REAL_DATASETS)]



def cells(config) -> list[dict]:
    """Every (dataset, method) cell of a config with ``worlds``, ``real``, ``data`` and ``methods``."""
    return method_cells(datasets(config.worlds, config.real, config.data), config.methods)



def early_stopping(method: str, training: TrainConfig, train: sp.csr_matrix):
    """The `simrec.models.EarlyStopping` rule of a trained method (None for the others): validation
    `STOP_METRIC` every `eval_epochs` epochs (MF, in sampled pairs) or every sweep (iALS)."""
    if method in MF_METHODS:
        every = training.eval_epochs * train.nnz
    elif method == "ials":
        every = 1
    else:
        return None
    return models.EarlyStopping(every=every, metric=STOP_METRIC, patience=training.patience)


def model_spec(method: str, setting: dict, training: TrainConfig, train: sp.csr_matrix):
    """The `simrec.models` spec of `method` (not the oracle) at a grid `setting`."""
    if method == "popularity":
        return models.PopularitySpec()
    if method == "svd":
        return models.SVDSpec(dim=min(setting["rank"], min(train.shape) - 1))
    stopping = early_stopping(method, training, train)
    if method == "ials":
        return models.IALSSpec(dim=training.dim, l2=setting["l2"], unobserved_weight=setting["weight"],
                               sweeps=training.ials_sweeps, early_stopping=stopping)
    objective = (models.OptADG(dim=training.dim, gamma=training.gamma) if method == "mf_adg"
                 else models.MFAUC(dim=training.dim))
    return models.MFSpec(objective, l2=setting["l2"], learning_rate=setting["lr"],
                         optimizer=training.optimizer, batch_size=training.batch_size,
                         early_stopping=stopping)


@dataclass(frozen=True)
class Fitted:
    """One trained setting of a cell: its score function users: i32[B] -> f32[B, I], its share of
    fit time, the validation curve ((budget, metric), ...) of early stopping and its returned
    checkpoint (`simrec.models.best_checkpoint`, None without early stopping)."""
    setting: dict
    score_block: object
    seconds: float
    curve: tuple[tuple[int, float], ...] = ()
    best: tuple[int, float] | None = None


def fit_settings(key: jax.Array, ds: Dataset, training: TrainConfig, cell: dict, fold: int,
                 settings: list[dict]) -> list[Fitted]:
    """Train `cell["method"]` at every setting on the fold's train part, one after another
    (`simrec.models.fitted`: a fit another study or cell made on the same data is read from the
    store, with the seconds it took; an early-stopped MF grid trained as one vmapped program would
    keep training its stopped members; the oracle scores the true quality logit)."""
    if cell["method"] == "oracle":
        return [Fitted(s, lambda users: quality_logit(ds.world, users), 0.0) for s in settings]
    split = ds.splits[fold]
    stopping = early_stopping(cell["method"], training, split.train)
    # same initial parameters for every method and setting (Lim §6), per dataset and fold
    init_key = jax.random.fold_in(shared_key(key, f"init:{cell['dataset']}"), fold)
    fitted = []
    for setting in settings:
        model, seconds = models.fitted(init_key, model_spec(cell["method"], setting, training, split.train),
                                       split.train, validation=split.valid if stopping else None,
                                       pairs=training.pairs if cell["method"] in MF_METHODS else None,
                                       seconds=True)
        fitted.append(Fitted(setting, lambda users, m=model: models.score(m, users), seconds,
                             tuple(model.curve), models.best_checkpoint(model)))
    return fitted


def convergence(method: str, fitted: Fitted, train: sp.csr_matrix, training: TrainConfig) -> dict:
    """{"epochs", "budget", "net_hit"} of a trained setting: the budget at the returned (best)
    checkpoint of its curve in epochs (MF: sampled pairs / nnz(train), rounded; iALS: sweeps) and
    in the family's unit, and whether training ended without `patience` evaluations after it (so
    the safety-net budget, not early stopping, ended it)."""
    if fitted.best is None:
        return {"epochs": 0, "budget": 0, "net_hit": False}
    budget = fitted.best[0]
    after = sum(point > budget for point, _ in fitted.curve)
    return {"epochs": _epochs(method, budget, train), "budget": budget,
            "net_hit": after < training.patience}


def _epochs(method: str, budget, train: sp.csr_matrix) -> int:
    """A training budget in epochs: MF sampled pairs / nnz(train), rounded; iALS sweeps as they are."""
    return round(budget / train.nnz) if method in MF_METHODS else int(budget)


def evaluation_sets(ds: Dataset, fold: int) -> list[tuple[str, str, sp.csr_matrix, sp.csr_matrix]]:
    """(protocol, set, relevant, exclude) of every evaluation of a fold's model: held-out
    excluded — valid without train and test, test without train and valid, P⁺∖O⁺ without O⁺
    (simulation only); train excluded — the same sets with only train excluded. The first entry
    (held-out valid) is the selection set."""
    split = ds.splits[fold]
    held_out = [("valid", split.valid, split.train + split.test),
                ("test", split.test, split.train + split.valid)]
    common = [("valid", split.valid, split.train), ("test", split.test, split.train)]
    if ds.unobserved is not None:
        held_out.append(("unobserved", ds.unobserved, ds.observed))
        common.append(("unobserved", ds.unobserved, split.train))
    return ([(HELD_OUT, *entry) for entry in held_out] + [(COMMON, *entry) for entry in common])


def evaluate_model(score_block, sets) -> list[dict]:
    """Records {protocol, set, metric, value, size} of one model on (some of) `evaluation_sets`:
    the mean of each metric of `METRICS` and `CHECKED` over the users with an item in the set (`HELD_OUT`) or
    over the users with items in every `COMMON` set given (given the model, the sets are then
    uniform random subsets of P⁺∖train of each user, so Lim §5's exchangeability argument applies
    exactly), and the mean set size over those users."""
    common_sets = [relevant for protocol, _, relevant, _ in sets if protocol == COMMON]
    common = (np.logical_and.reduce([np.diff(r.indptr) > 0 for r in common_sets])
              if common_sets else None)
    rows = []
    for protocol, set_name, relevant, exclude in sets:
        values = metrics.evaluate(score_block, relevant, exclude=exclude, metrics=METRICS + CHECKED)
        users = common if protocol == COMMON else slice(None)
        counts = np.diff(relevant.indptr)[users]
        size = float(counts[counts > 0].mean())
        rows += [{"protocol": protocol, "set": set_name, "metric": spec,
                  "value": metrics.mean(values[spec][users]), "size": size} for spec in METRICS + CHECKED]
    return rows


def _validation_adg(rows: list[dict]) -> float:
    return next(r["value"] for r in rows if r["metric"] == STOP_METRIC)


def _validated(key, ds: Dataset, training: TrainConfig, cell: dict, fold: int,
               settings: list[dict], sets) -> list[tuple[Fitted, list[dict]]]:
    """Each setting trained on the fold (`fit_settings`) with its records on the selection set
    (`sets[0]`)."""
    if not settings:
        return []
    return [(fitted, evaluate_model(fitted.score_block, sets[:1]))
            for fitted in fit_settings(key, ds, training, cell, fold, settings)]


def _best(searched) -> int:
    """Index of the best validation ADG (the first among equals)."""
    return int(np.argmax([_validation_adg(rows) for _, rows in searched]))


def _fold_rows(cell: dict, fold: int, searched, best: int, sets, train: sp.csr_matrix,
               training: TrainConfig) -> list[dict]:
    """Records of a fold: every trained setting on the selection set with its curve, the best
    one on every other set of `sets` too."""
    method, rows = cell["method"], []
    for index, (fitted, valid_rows) in enumerate(searched):
        base = {**cell, "fold": fold, **fitted.setting,
                **convergence(method, fitted, train, training), "train_seconds": fitted.seconds}
        evaluated = valid_rows + (evaluate_model(fitted.score_block, sets[1:]) if index == best else [])
        rows += [{**base, **row} for row in evaluated]
        rows += [{**base, "epochs": _epochs(method, budget, train), "budget": int(budget),
                  "protocol": CURVE, "set": "valid", "metric": STOP_METRIC, "value": float(value),
                  "size": valid_rows[0]["size"]}
                 for budget, value in fitted.curve]
    return rows


def search(key: jax.Array, ds: Dataset, training: TrainConfig, cell: dict) -> tuple[list, int]:
    """The cell's method searched on fold 0 (`grid`, then `refine` at its best setting, each stage
    followed by up to `edge_steps` steps past the grid's edge while the best value sits on it,
    `beyond_edge`), each setting evaluated on the held-out validation split: every searched
    (`Fitted`, validation records) and the index of the best (validation ADG, the first among
    equals)."""
    method = cell["method"]
    sets = evaluation_sets(ds, 0)
    searched = []
    for axis, stage in enumerate((lambda best: grid(method, training),
                                  lambda best: refine(method, training, best))):
        best = searched[_best(searched)][0].setting if searched else None
        searched += _validated(key, ds, training, cell, 0, stage(best), sets)
        for _ in range(training.edge_steps):          # the optimum past the grid's edge?
            best = searched[_best(searched)][0].setting
            more = beyond_edge(method, [fitted.setting for fitted, _ in searched], best, axis)
            if not more:
                break
            searched += _validated(key, ds, training, cell, 0, more, sets)
    return searched, _best(searched)


def compute(key: jax.Array, config, cell: dict, shared: Shared) -> list[dict]:
    """Search the cell's method on fold 0 (`search`); the best setting is evaluated on every set
    of `evaluation_sets` and retrained (with early stopping on its own validation split) and
    evaluated on every other fold. One record per trained setting,
    fold, protocol, set and metric (`COLUMNS`), plus one `CURVE` record per point of each
    validation curve. `key` is the run's root key: a model's initial parameters come from
    ``fold_in(shared_key(key, "init:DATASET"), fold)``, the same for every method and setting."""
    ds = shared.datasets[cell["dataset"]]
    training = config.training
    searched, best = search(key, ds, training, cell)
    rows = _fold_rows(cell, 0, searched, best, evaluation_sets(ds, 0), ds.splits[0].train, training)
    for fold in range(1, len(ds.splits)):
        sets = evaluation_sets(ds, fold)
        retrained = _validated(key, ds, training, cell, fold, [searched[best][0].setting], sets)
        rows += _fold_rows(cell, fold, retrained, 0, sets, ds.splits[fold].train, training)
    return rows

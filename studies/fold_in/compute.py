"""The computation of study ``fold_in``: the data sources split for both protocols (`setup`,
`prepare`), the models and their grids (`model_grid`, `model_spec`, `fit_grid`: every fit through
`simrec.models.fitted`), the selection on the validation users (`selection`) and the evaluation of
the selected model under strong and weak generalisation (`compute`); the package docstring says
what the study asks."""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import numpy as np
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.datafiles import data_file
from simrec.runner import cell_key, shared_key
from simrec.world import make_world

if TYPE_CHECKING:
    from simrec_studies.fold_in import FoldInConfig

MODELS = ("popularity", "iALS", "MF-ADG", "EASE", "item-kNN")
SIMULATED, MOVIELENS, LASTFM = "simulated", "ml-latest-small", "hetrec-lastfm"
#: the early-stopping metric of the trained models (a `simrec.metrics.evaluate` name)
STOP_METRIC = "ndcg@10"
#: the hyperparameter columns of the records (NaN where a model has no such hyperparameter)
HYPERPARAMETERS = ("l2", "fold_in_l2", "k")
# ---- setup: every data source, split for both protocols ---------------------------------------

@dataclass(frozen=True)
class Reveals:
    """Evaluated held-out users, stacked: bool CSR [R * max_known, I] `known` (row
    r * max_known + L - 1: user r's first L revealed items) and `rest` (the others)."""
    known: sp.csr_matrix
    rest: sp.csr_matrix
    max_known: int                                  # the largest L revealed

    @property
    def users(self) -> int:
        return self.known.shape[0] // self.max_known


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
    return list(real_files(config).values())


def real_files(config: FoldInConfig) -> dict[str, str]:
    """{data source: its file below the data folder} of the real data sets ("" disables one)."""
    return {MOVIELENS: config.ratings_file, LASTFM: config.lastfm_file}


def sources(config: FoldInConfig) -> list[str]:
    """The data sources of a run: the simulated world, and each real data set whose file exists."""
    return [SIMULATED] + [name for name, path in real_files(config).items()
                          if data_file(path)]


def max_known(config: FoldInConfig, source: str) -> int:
    """The largest L of a data source's curves: `lastfm_max_known` for HetRec last.fm (its file
    lists at most 50 artists per user), `max_known` otherwise."""
    return config.lastfm_max_known if source == LASTFM else config.max_known


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


def _reveals(key, held_out: sp.csr_matrix, reveals: int, what: str) -> Reveals:
    """The stacked reveals L = 1 .. `reveals` of the held-out users (each has more interactions)."""
    if held_out.shape[0] < 2:
        raise ValueError(f"{what}: fewer than 2 users; raise held_out_fraction / "
                         "validation_fraction or lower max_known")
    return Reveals(*_stacked_reveals(held_out, _reveal_positions(key, held_out), reveals), reveals)


def prepare(key: jax.Array, config: FoldInConfig, source: str) -> Source:
    """A data source's positives split for both protocols; `key` is `_source_key` (fold_in 0:
    held-out users, 1: test reveal order, 3: weak split, 4: validation users among the held-out
    ones, 5: validation reveal order; 2 is the models').

    The held-out users (test and validation) are drawn among the eligible users, those with at
    least L + min_rest interactions (L = `max_known` of the source), so every point of a curve
    averages the same users; every other user trains."""
    observed = _positives(key, config, source)
    reveals = max_known(config, source)
    eligible = np.diff(observed.indptr) >= reveals + config.min_rest
    if eligible.sum() < 4:
        raise ValueError(f"{source}: only {eligible.sum()} users have >= L + min_rest = "
                         f"{reveals + config.min_rest} interactions; lower max_known"
                         + (" / lastfm_max_known" if source == LASTFM else "") + " or min_rest")
    held = config.held_out_fraction + config.validation_fraction
    users = missing.split_users(jax.random.fold_in(key, 0), observed[eligible], held)
    held_out = missing.split_users(jax.random.fold_in(key, 4), users.held_out,
                                   config.validation_fraction / held)
    training = sp.vstack([observed[~eligible], users.train], format="csr")
    weak = missing.split_per_user(
        jax.random.fold_in(key, 3), training,
        (1 - config.stop_fraction - config.weak_test_fraction, config.stop_fraction,
         config.weak_test_fraction), n_folds=1)[0]
    return Source(test=_reveals(jax.random.fold_in(key, 1), held_out.train, reveals,
                                f"{source}: test users"),
                  validation=_reveals(jax.random.fold_in(key, 5), held_out.held_out, reveals,
                                      f"{source}: validation users"),
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
    early on `source.weak_stop`), each through `simrec.models.fitted` (a fit of the same spec on
    the same data is read from the runner's store of fits); iALS draws from fold_in(key, 0),
    MF-ADG from fold_in(key, 1) (`MODEL_KEYS`), every grid point from the same key. MF-ADG is
    trained once per training λ (its spec without the fold-in, which is not part of training)."""
    grid = model_grid(config, model)
    specs = [model_spec(config, model, point) for point in grid]
    own = jax.random.fold_in(key, MODEL_KEYS[model]) if model in MODEL_KEYS else None
    options = {"validation": source.weak_stop if model in MODEL_KEYS else None,
               "pairs": config.pairs if model == "MF-ADG" else None}
    if model != "MF-ADG":
        return [models.fitted(own, spec, source.weak_train, **options) for spec in specs]
    trained = {}
    for point, spec in zip(grid, specs):
        if point["l2"] not in trained:
            trained[point["l2"]] = models.fitted(own, dataclasses.replace(spec, fold_in=None),
                                                 source.weak_train, **options)
    return [_with_fold_in(trained[point["l2"]], spec) for point, spec in zip(grid, specs)]


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
    """NDCG@k of every evaluated user (row) at every L (column).  f64[R, reveals.max_known]."""
    spec = f"ndcg@{config.k}"
    return metrics.evaluate(_block_scorer(score, reveals.known), reveals.rest,
                            exclude=reveals.known, metrics=(spec,))[spec].reshape(
                                -1, reveals.max_known)


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


def _row(config: FoldInConfig, cell: dict, point: dict, budget: int, protocol: str, measure: str,
         reveals: int, values) -> dict:
    """One record (`COLUMNS` but the wall time): the mean of `values` over the users with its
    confidence interval at `config.level` and standard error (`simrec.stats.mean_ci`; a
    "stopping" record holds its one curve value, without an interval)."""
    mean, low, high, se = (stats.mean_ci(values, config.level) if protocol != "stopping"
                           else (float(values[0]), math.nan, math.nan, math.nan))
    return {**cell, "protocol": protocol, "measure": measure, "L": reveals,
            **{name: point.get(name, math.nan) for name in HYPERPARAMETERS}, "budget": budget,
            "mean": mean, "low": low, "high": high, "se": se, "users": len(values)}


def _best_budget(model: models.Model) -> int:
    """The budget at the best early-stopping checkpoint (0 for a model without early stopping)."""
    return (models.best_checkpoint(model) or (0,))[0]


def _stopping_rows(config, cell, source: Source, grid, fitted) -> list[dict]:
    """The early-stopping curve of every trained fit (one per training λ: the grid points of one
    MF-ADG fit share it), over the users with an early-stopping part."""
    users = int(np.count_nonzero(np.diff(source.weak_stop.indptr)))
    rows, seen = [], set()
    for point, model in zip(grid, fitted):
        curve_id = (point.get("l2"), point.get("k"))
        if model.curve and curve_id not in seen:
            seen.add(curve_id)
            rows += [{**_row(config, cell, point, int(budget), "stopping", STOP_METRIC, 0, [value]),
                      "users": users} for budget, value in model.curve]
    return rows


def _evaluated_rows(config, cell, source: Source, point, model: models.Model) -> list[dict]:
    """The selected grid point on the test users: strong NDCG@k per L and MANDCG, and weak NDCG@k
    of the training users on their test part (training items excluded)."""
    score = _history_scorer(model)
    strong = _strong(config, score, source.test)
    spec = f"ndcg@{config.k}"
    weak = metrics.evaluate(_block_scorer(score, source.weak_train), source.weak_test,
                            exclude=source.weak_train, metrics=(spec,))[spec]
    samples = [("strong", "ndcg", j + 1, strong[:, j]) for j in range(strong.shape[1])]
    samples += [("strong", "mandcg", 0, strong.mean(axis=1)),
                ("weak", "ndcg", 0, weak[np.isfinite(weak)])]
    return [_row(config, cell, point, _best_budget(model), protocol, measure, reveals, values)
            for protocol, measure, reveals, values in samples]


def compute(key, config: FoldInConfig, cell: dict, shared: Shared) -> list[dict]:
    """Fit the cell's model grid on the weak split's training part (key fold_in(`_source_key`,
    2)); score every grid point by MANDCG on the validation users; at the `selection`, strong
    generalisation on the test users (NDCG@k per L with CI, and MANDCG) and weak generalisation
    (NDCG@k on the test part of the training users)."""
    started = time.perf_counter()
    source = shared.sources[cell["data"]]
    grid = model_grid(config, cell["model"])
    fitted = fit_grid(jax.random.fold_in(_source_key(key, cell["data"]), 2), config, source,
                      cell["model"])
    scored = [_row(config, cell, point, _best_budget(model), "validation", "mandcg", 0,
                   _strong(config, _history_scorer(model), source.validation).mean(axis=1))
              for point, model in zip(grid, fitted)]
    choice = selection(cell["model"], grid, [r["mean"] for r in scored], [r["se"] for r in scored])
    index = 0 if choice is None else choice.index
    rows = (_stopping_rows(config, cell, source, grid, fitted) + scored
            + _evaluated_rows(config, cell, source, grid[index], fitted[index]))
    seconds = time.perf_counter() - started
    return [{**r, "seconds": seconds} for r in rows]

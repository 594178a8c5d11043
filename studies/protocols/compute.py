"""The protocols study's computation: the simulated MNAR ratings (or ml-latest-small), Steck's
(a) and (b) splits and candidate sets, both models tuned on validation (`simrec.models.tune`) and
refitted through the store of fits (`simrec.models.fitted`), and their RMSE and ranking metrics
over all test users and per user part (the package docstring states the design)."""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import numpy as np
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats, validate
from simrec.datafiles import data_file
from simrec.runner import cell_key, shared_key
from simrec.world import make_world, quality_logit, user_blocks
from simrec_studies.common.rated import exclude_unrated

if TYPE_CHECKING:
    from simrec_studies.protocols import ProtocolsConfig

MODELS = ("MF-RMSE", "AllRank")
EXPOSURE_CELL = "simulated, item exposure"
REAL_DATA = "ml-latest-small"
#: gain functions of the graded nDCG, rating -> gain
GAINS = {"linear": lambda r: r, "exponential": lambda r: 2.0 ** r - 1.0}
PROTOCOLS = ("a1 all items", "a2 unrated items", "b rated test items", "complete ratings")
OFFLINE = PROTOCOLS[:3]
#: the metrics: {label: (`simrec.metrics.evaluate` name with "{N}" for the cutoff, graded?)}
METRICS = {"P@N": ("precision@{N}", False), "R@N": ("recall@{N}", False), "MAP": ("ap", False),
           "ATOP": ("atop", False), "nDCG@N": ("ndcg@{N}", False), "nDCG": ("ndcg", False),
           "graded nDCG@N": ("ndcg@{N}", True), "graded nDCG": ("ndcg", True)}
#: the log-spaced λ grid of both models (1e-3 .. 10, factor 10^(2/3) ≈ 4.6)
L2_GRID = (0.001, 0.0046, 0.022, 0.1, 0.46, 2.2, 10.0)
ALL_USERS = -1                                   # `user_part` of a value over all test users
#: how users are averaged: each user alike, or (Steck §3.3) each weighted by their relevant test items
WEIGHTINGS = ("uniform", "relevant ratings")
WORST = "worst order"                            # the `model` of the worst possible ranking's values
DENSE_CELL = "ml-latest-small, dense core"


# ---- data (setup) ---------------------------------------------------------------------------

def _item_exposure(key, n_items: int, sigma: float) -> np.ndarray:
    """e_i = exp(sigma z_i - sigma²/2), z_i ~ N(0, 1): log-normal with mean 1.  f64[I]."""
    z = np.asarray(jax.random.normal(shared_key(key, "exposure"), (n_items,)), np.float64)
    return np.exp(sigma * z - sigma ** 2 / 2)


def _stars(key, config: ProtocolsConfig) -> np.ndarray:
    """The complete ratings: the world's true logit cut at its `star_shares` quantiles.
    f32[U, I] in 1..5."""
    n_users, n_items, cuts = config.world.n_users, config.world.n_items, len(config.star_shares) - 1
    validate.fits_in_memory(f"protocols: the complete ratings of {n_users:,} users x {n_items:,} items "
                            "(f32 logit, its bool comparisons with the cuts, their i64 count, f32 stars)",
                            (4 + cuts + 8 + 4) * n_users * n_items)
    world = make_world(shared_key(key, "world"), config.world)
    logit = np.concatenate([np.asarray(quality_logit(world, users))
                            for users in user_blocks(world.n_users, 512)])
    thresholds = np.quantile(logit, np.cumsum(config.star_shares)[:-1])
    return 1 + (logit[..., None] > thresholds).sum(-1).astype(np.float32)


def _observe(key, config: ProtocolsConfig, stars: np.ndarray,
             exposure_sigma: float = 0.0) -> sp.csr_matrix:
    """Observed ratings CSR [U, I]: P(observed) = min(observe_probability[r - 1] e_i, 1) with
    e = `_item_exposure` (1 when exposure_sigma = 0); the same uniforms for every sigma."""
    validate.fits_in_memory(f"protocols: observing {stars.shape[0]:,} users x {stars.shape[1]:,} items "
                            "(f64 probabilities, f32 uniforms, bool mask, f64 observed)",
                            (8 + 4 + 1 + 8) * stars.size)
    probability = np.asarray(config.observe_probability)[stars.astype(int) - 1]
    if exposure_sigma > 0:
        probability = np.minimum(probability * _item_exposure(key, stars.shape[1], exposure_sigma), 1)
    uniforms = np.asarray(jax.random.uniform(shared_key(key, "observe"), stars.shape))
    return sp.csr_matrix(np.where(uniforms < probability, stars, 0.0))


def _movielens(config: ProtocolsConfig, min_count: int = 1) -> sp.csr_matrix:
    """The MovieLens ratings, or their core in which every user and item has >= min_count."""
    raw = data.load_interactions(data_file(config.ratings_file))
    return data.filter_min_counts(raw, min_user=min_count, min_item=min_count).ratings


def _split(key, ratings: sp.csr_matrix, test_fraction: float):
    """Per-user random split of the ratings: (train CSR, test CSR), ratings kept."""
    split = missing.split_per_user(key, ratings.astype(bool), (1 - test_fraction, 0.0,
                                                              test_fraction), n_folds=1)[0]
    return ratings.multiply(split.train).tocsr(), ratings.multiply(split.test).tocsr()


@dataclass(frozen=True)
class Ratings:
    """One cell's data: observed ratings, their (a) and (b) splits, the (a) candidates, and the
    complete ratings if known."""
    observed: sp.csr_matrix                           # f[U, I], observed stars (0 = unrated)
    train: sp.csr_matrix                              # f[U, I], (a) training part of observed
    test: sp.csr_matrix                               # f[U, I], (a) test part of observed
    fit: sp.csr_matrix                                # f[U, I], train minus validation (tuning)
    valid: sp.csr_matrix                              # f[U, I], per-user validation part of train
    train_b: sp.csr_matrix                            # f[U, I], (b) training ratings (`split_steck`)
    test_b: sp.csr_matrix                             # f[U, I], (b) test ratings, n_test per user
    unrated: sp.csr_matrix                            # bool[U, I], (a)'s sampled unrated items
    stars: np.ndarray | None                          # f32[U, I] complete stars (simulated only)


@dataclass(frozen=True)
class Shared:
    """Every cell's ratings, by the cell's ``data`` name."""
    ratings: Mapping[str, Ratings]


def cells(config: ProtocolsConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if config.exposure_sigma > 0:
        out.append({"data": EXPOSURE_CELL})
    if data_file(config.ratings_file):
        out.append({"data": REAL_DATA})
        if config.dense_core:
            out.append({"data": DENSE_CELL})
    return out


def _ratings(key, config: ProtocolsConfig, observed: sp.csr_matrix, stars) -> Ratings:
    """The splits of one cell, each drawn from its own ``fold_in(key, j)``: (a) split 0,
    validation 1, (b) split 2, sampled unrated items 3."""
    train, test = _split(jax.random.fold_in(key, 0), observed, config.test_fraction)
    fit, valid = _split(jax.random.fold_in(key, 1), train, config.valid_fraction)
    train_b, test_b = missing.split_steck(jax.random.fold_in(key, 2), observed,
                                          min_ratings=config.min_ratings, n_test=config.n_test)
    unrated = missing.sample_unrated(jax.random.fold_in(key, 3), observed.astype(bool),
                                     config.n_unrated)
    return Ratings(observed=observed, train=train, test=test, fit=fit, valid=valid,
                   train_b=train_b, test_b=test_b, unrated=unrated, stars=stars)


def setup(key, config: ProtocolsConfig) -> Shared:
    """The simulated complete ratings (one world for both simulated cells), every cell's observed
    ratings and its splits, drawn from ``cell_key(key, cell)`` (`_ratings`)."""
    out, stars = {}, None
    for cell in cells(config):
        if cell["data"] in ("simulated", EXPOSURE_CELL):
            stars = _stars(key, config) if stars is None else stars
            sigma = config.exposure_sigma if cell["data"] == EXPOSURE_CELL else 0.0
            observed, complete = _observe(key, config, stars, sigma), stars
        else:
            observed = _movielens(config, config.dense_core if cell["data"] == DENSE_CELL else 1)
            complete = None
        out[cell["data"]] = _ratings(cell_key(key, cell), config, observed, complete)
    return Shared(ratings=out)


# ---- models: tuning and fitting -------------------------------------------------------------

def _relevant(ratings: sp.csr_matrix, config: ProtocolsConfig) -> sp.csr_matrix:
    """bool CSR [U, I]: the ratings >= relevant_rating."""
    return sp.csr_matrix(ratings.multiply(ratings >= config.relevant_rating)).astype(bool)


def _spec(config: ProtocolsConfig, name: str, point: dict, sweeps: int, stopping=None):
    """The model at a grid point {"l2"} (MF-RMSE) or {"l2", "imputed"} (AllRank)."""
    if name == "MF-RMSE":
        return models.MFRMSESpec(dim=config.dim, l2=point["l2"], sweeps=sweeps, early_stopping=stopping)
    return models.AllRankSpec(dim=config.dim, l2=point["l2"], imputed=point["imputed"],
                              missing_weight=config.missing_weight, sweeps=sweeps,
                              early_stopping=stopping)


def grid(config: ProtocolsConfig, name: str) -> list[dict]:
    """The tuning grid of a model: MF-RMSE's λ; AllRank's λ x imputed rating r_m (Steck tunes r_m)."""
    if name == "MF-RMSE":
        return [{"l2": l2} for l2 in config.mf_l2_grid]
    return [{"l2": l2, "imputed": r} for r in config.imputed_grid for l2 in config.allrank_l2_grid]


def _tune(key, config: ProtocolsConfig, name: str, ratings: Ratings) -> models.Tuning:
    """Every point of the model's `grid` fitted on ``ratings.fit`` with early stopping on the
    validation ratings (one sweep per check, patience 2, at most `sweeps`) and the best selected
    (`simrec.models.tune`): MF-RMSE by their RMSE (lowest), AllRank by nDCG@n (highest) of the
    5-star ones ranked among every item outside the fitting part."""
    if name == "MF-RMSE":
        stopping = models.EarlyStopping(every=1, metric="rmse", patience=2)
    else:
        stopping = models.EarlyStopping(every=1, metric=config.validation_metric, patience=2,
                                        relevant_rating=config.relevant_rating)
    return models.tune(key, grid(config, name), lambda point: _spec(config, name, point, config.sweeps, stopping),
                       ratings.fit, validation=ratings.valid)


def _sweeps(trial: models.Trial) -> int:
    """The sweeps of a trial's best checkpoint, at least 1 (the refit's budget)."""
    return max(trial.budget, 1)


# ---- metrics ---------------------------------------------------------------------------------

def _squared_errors(model, ratings: sp.csr_matrix, stars: np.ndarray | None = None,
                    unrated: np.ndarray | None = None):
    """Per user, (sum of squared errors f64[U], count f64[U]) of the model's predictions on the
    stored ratings, or with `stars` on the complete ratings of the pairs where `unrated`."""
    predicted = np.asarray(models.score(model, np.arange(ratings.shape[0])), np.float64)
    if stars is not None:
        errors = np.where(unrated, (predicted - stars) ** 2, 0.0)
        return errors.sum(axis=1), unrated.sum(axis=1).astype(np.float64)
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    errors = (predicted[rows, ratings.indices] - ratings.data) ** 2
    return (np.bincount(rows, errors, ratings.shape[0]),
            np.bincount(rows, minlength=ratings.shape[0]).astype(np.float64))


def _candidates(ratings: Ratings, protocol: str) -> np.ndarray | None:
    """bool[U, I]: the items a user ranks under an offline (a) protocol (module docstring)."""
    items = ratings.unrated + ratings.test.astype(bool)
    if protocol == "a1 all items":
        items = items + ratings.train.astype(bool)
    return items.toarray()


def _settings(config: ProtocolsConfig, ratings: Ratings) -> dict:
    """{protocol: (split "a" | "b", relevant bool[U, I], exclude bool[U, I], gains f64[U, I] of
    the graded nDCG, the items carrying those gains bool[U, I])}."""
    gain = GAINS[config.graded_gain]

    def gains(test):
        out = np.full(test.shape, gain(config.graded_imputed))
        rows = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
        out[rows, test.indices] = gain(test.data)
        return out

    imputed_a, everything = gains(ratings.test), np.ones(ratings.observed.shape, bool)
    out = {p: ("a", _relevant(ratings.test, config), ~_candidates(ratings, p), imputed_a,
               everything) for p in ("a1 all items", "a2 unrated items")}
    out["b rated test items"] = ("b", _relevant(ratings.test_b, config),
                                 exclude_unrated(ratings.test_b), gains(ratings.test_b),
                                 ratings.test_b.astype(bool))
    if ratings.stars is not None:
        out["complete ratings"] = ("a", sp.csr_matrix(ratings.stars >= config.relevant_rating),
                                   ratings.train.astype(bool).toarray(),
                                   gain(ratings.stars.astype(np.float64)), everything)
    return out


def _protocol_metrics(config: ProtocolsConfig, protocol: str, setting, score, graded_score=None) -> dict:
    """{label: per-user values f64[U]} of every metric in `METRICS` under one protocol; `score`
    ranks for the binary metrics and `graded_score` (default `score`) for the graded ones: a
    function of a block of users (a model's scores) or f32[U, I]."""
    _, relevant, exclude, gains, graded_relevant = setting
    graded_score = score if graded_score is None else graded_score
    cutoff = config.cutoff(protocol)
    binary = {label: spec.format(N=cutoff) for label, (spec, graded) in METRICS.items()
              if not graded}
    values = metrics.evaluate(score, relevant, exclude=exclude, metrics=tuple(binary.values()))
    out = {label: values[spec] for label, spec in binary.items()}
    for label, (spec, graded) in METRICS.items():
        if graded:
            out[label] = metrics.ndcg(graded_score, graded_relevant, k=cutoff if "@" in spec else None,
                                      exclude=exclude, gains=gains)
    return out


def worst_order(config: ProtocolsConfig, protocol: str, setting) -> dict:
    """{label: per-user values f64[U]} of the worst possible ranking of each user's candidates
    (Steck's "worst" values): relevant items below every other (binary metrics), items in
    increasing gain (graded). Ties within a group cannot change a metric, so the tie-aware metrics
    give the worst order's value exactly."""
    _, relevant, _, gains, _ = setting
    return _protocol_metrics(config, protocol, setting, -relevant.toarray().astype(np.float32),
                             -np.asarray(gains, np.float32))


def user_weights(setting) -> np.ndarray:
    """Steck's user weight under a protocol: the user's relevant items among their candidates
    (relevant test ratings; relevant complete ratings outside training).  f64[U]."""
    _, relevant, exclude, _, _ = setting
    return np.asarray((relevant.toarray() & ~exclude).sum(axis=1), np.float64)


def weighted_mean_and_se(values, weights) -> tuple[float, float]:
    """x̄_w = Σ_u w_u x_u / Σ_u w_u over the users with a value and w_u > 0, and its standard error
    sqrt(n / (n - 1) Σ_u w_u² (x_u - x̄_w)²) / Σ_u w_u (linearised ratio estimator; with equal
    weights it is `simrec.metrics.mean_and_se`)."""
    x, w = np.asarray(values, np.float64), np.asarray(weights, np.float64)
    use = ~np.isnan(x) & (w > 0)
    x, w = x[use], w[use]
    if x.size == 0:
        return math.nan, math.nan
    mean = float((w * x).sum() / w.sum())
    if x.size == 1:
        return mean, math.nan
    return mean, float(math.sqrt(x.size / (x.size - 1) * ((w * (x - mean)) ** 2).sum()) / w.sum())


def weighted_part_means(values, weights, part_of, parts: int) -> np.ndarray:
    """Per part k, Σ w_u x_u / Σ w_u over its users with a value and w_u > 0 (`stats.part_means`
    weighted; NaN for a part without weight).  f64[K]."""
    x, w, part_of = np.asarray(values, np.float64), np.asarray(weights, np.float64), np.asarray(part_of)
    use = (part_of >= 0) & (w > 0) & ~np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(part_of[use], w[use] * x[use], parts) / np.bincount(part_of[use], w[use], parts)


def _record(cell: dict, part: str, metric: str, value, se=math.nan, *, model: str = "",
            protocol: str = "", weighting: str = "", cutoff: int = 0, user_part: int = ALL_USERS,
            l2=math.nan, imputed=math.nan, sweeps: int = 0) -> dict:
    return {"data": cell["data"], "part": part, "model": model, "protocol": protocol,
            "weighting": weighting, "metric": metric, "cutoff": int(cutoff), "user_part": int(user_part),
            "l2": float(l2), "imputed": float(imputed), "sweeps": int(sweeps), "value": float(value),
            "se": float(se)}


def _metric_records(cell, config, protocol, per_user_values, weights, parts_key, *, per_part: bool = True,
                    **kw) -> list[dict]:
    """Each metric's mean and SE over all users under each weighting (`WEIGHTINGS`), and, with
    ``per_part``, its mean per user part (`stats.user_parts` of the users with a value and,
    weighted, a positive weight)."""
    out = []
    for label, per_user in per_user_values.items():
        cutoff = config.cutoff(protocol) if label.endswith("@N") else 0
        for weighting in WEIGHTINGS:
            uniform = weighting == "uniform"
            whole = metrics.mean_and_se(per_user) if uniform else weighted_mean_and_se(per_user, weights)
            out.append(_record(cell, "model", label, *whole, protocol=protocol, weighting=weighting,
                               cutoff=cutoff, **kw))
            if not per_part:
                continue
            # the parts deal out the users who count: those with a value (and a weight)
            part_of = stats.user_parts(parts_key, ~np.isnan(per_user) & (uniform | (weights > 0)), config.parts)
            means = (stats.part_means(per_user, part_of, config.parts) if uniform
                     else weighted_part_means(per_user, weights, part_of, config.parts))
            out += [_record(cell, "model", label, value, protocol=protocol, weighting=weighting, cutoff=cutoff,
                            user_part=k, **kw) for k, value in enumerate(means)]
    return out


def _rmse_records(cell, config, name, protocol, sse, count, part_of, **kw) -> list[dict]:
    """RMSE over all users and over each part of the users with ratings."""
    rows = [_record(cell, "model", "RMSE", math.sqrt(sse.sum() / count.sum()), model=name,
                    protocol=protocol, **kw)]
    use = part_of >= 0
    for k in range(config.parts):
        mine = use & (part_of == k)
        rows.append(_record(cell, "model", "RMSE", math.sqrt(sse[mine].sum() / count[mine].sum()),
                            model=name, protocol=protocol, user_part=k, **kw))
    return rows


def compute(key, config: ProtocolsConfig, cell: dict, shared: Shared) -> list[dict]:
    """Tune each model (λ; AllRank also r_m), refit it on the (a) and (b) training splits, and
    record its RMSE and its ranking metrics under each protocol, over all test users (uniform and
    Steck's weighting) and per part; the worst order's values under each protocol; plus the data
    sizes and the validation value of every grid point."""
    ratings = shared.ratings[cell["data"]]
    key = cell_key(key, cell)
    sizes = {"users": ratings.observed.shape[0], "items": ratings.observed.shape[1],
             "train ratings": ratings.train.nnz, "test ratings": ratings.test.nnz,
             "relevant test ratings": _relevant(ratings.test, config).nnz,
             "(b) users": int((np.diff(ratings.test_b.indptr) > 0).sum()),
             "observed mean rating": ratings.observed.data.mean()}
    if ratings.stars is not None:
        sizes["complete mean rating"] = ratings.stars.mean()
    out = [_record(cell, "data", metric, value) for metric, value in sizes.items()]
    settings = _settings(config, ratings)
    weights = {protocol: user_weights(setting) for protocol, setting in settings.items()}
    parts_key = jax.random.fold_in(key, 5)
    fit_key = jax.random.fold_in(key, 4)                     # the same start for every fit
    for protocol, setting in settings.items():
        out += _metric_records(cell, config, protocol, worst_order(config, protocol, setting), weights[protocol],
                               parts_key, per_part=False, model=WORST)
    for name in MODELS:
        tuning = _tune(fit_key, config, name, ratings)
        point, sweeps = tuning.selection.point, _sweeps(tuning.best)
        out += [_record(cell, "tuning", "RMSE" if name == "MF-RMSE" else config.validation_metric,
                        trial.value, model=name, protocol="validation", l2=trial.point["l2"],
                        imputed=trial.point.get("imputed", math.nan), sweeps=_sweeps(trial))
                for trial in tuning.trials]
        spec = _spec(config, name, point, sweeps)
        fitted = {"a": models.fitted(fit_key, spec, ratings.train),
                  "b": models.fitted(fit_key, spec, ratings.train_b)}
        kw = {"l2": point["l2"], "imputed": point.get("imputed", math.nan), "sweeps": sweeps}
        for protocol, split, test in (("observed test", "a", ratings.test),
                                      ("b rated test items", "b", ratings.test_b)):
            sse, count = _squared_errors(fitted[split], test)
            part_of = stats.user_parts(parts_key, count > 0, config.parts)
            out += _rmse_records(cell, config, name, protocol, sse, count, part_of, **kw)
        if ratings.stars is not None:
            unrated = ~ratings.train.astype(bool).toarray()
            sse, count = _squared_errors(fitted["a"], ratings.train, ratings.stars, unrated)
            part_of = stats.user_parts(parts_key, count > 0, config.parts)
            out += _rmse_records(cell, config, name, "complete ratings", sse, count, part_of, **kw)
        for protocol, setting in settings.items():
            values = _protocol_metrics(config, protocol, setting, functools.partial(models.score, fitted[setting[0]]))
            out += _metric_records(cell, config, protocol, values, weights[protocol], parts_key, model=name, **kw)
    return out

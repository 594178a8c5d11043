"""The coat study's computation: the random MNAR splits, the six models tuned on validation
(`simrec.models.tune`) and refitted on train + validation through the store of fits
(`simrec.models.fitted`), their values under every protocol, and Kendall's τ of each protocol's
ordering with the MCAR truth, with its bootstrap draws (the package docstring states the design)."""
from __future__ import annotations

import functools
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import numpy as np
import scipy.sparse as sp
import scipy.stats

from simrec import data, metrics, missing, models, stats
from simrec.datafiles import data_file
from simrec.runner import cell_key
from simrec_studies.common.rated import exclude_unrated

if TYPE_CHECKING:
    from simrec_studies.coat import CoatConfig

MODELS = ("popularity", "EASE", "iALS", "MF-ADG", "MF-RMSE", "AllRank")
EXPLICIT = ("MF-RMSE", "AllRank")                 # trained on the ratings; the others on positives
A1, A2, B = "a1 all items", "a2 unrated items", "b rated held-out items"
A1_IPS, A2_IPS = "a1 all items, IPS", "a2 unrated items, IPS"
OFFLINE = (A1, A2, B, A1_IPS, A2_IPS)
UNWEIGHTED = (A1, A2, B)                          # the protocols scored on every metric
MEAN_TAU = "mean τ over the metrics"              # part "bootstrap": a resample's mean τ
TRUTH, TRUTH_RANDOM = "MCAR, all items outside fit", "MCAR, random items only"
PROTOCOLS = (*OFFLINE, TRUTH, TRUTH_RANDOM)
#: {label: `simrec.metrics.evaluate` name, "{N}" the protocol's cutoff}
METRICS = {"P@N": "precision@{N}", "R@N": "recall@{N}", "nDCG@N": "ndcg@{N}", "nDCG": "ndcg",
           "MAP": "ap", "ATOP": "atop", "DCG@N": "dcg@{N}", "DCG": "dcg"}
IPS_METRICS = ("DCG@N", "DCG")                    # sums over items: IPS applies (docstring)
ALL_USERS = -1                                    # `user_part` of a value over all users
#: log-spaced grids (a decade in two or three steps)
L2_GRID = (0.001, 0.0046, 0.022, 0.1, 0.46, 2.2, 10.0)
WEIGHT_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)


# ---- data -----------------------------------------------------------------------------------

def data_files(config: CoatConfig) -> list[str]:
    """The three Coat files `simrec.data.load_coat` reads ("" disables the study)."""
    return [f"{config.folder}/{name}" for name in data.COAT_FILES.values()] if config.folder else []


def _coat(config: CoatConfig) -> data.Coat | None:
    """The Coat data, or None when `folder` is "" or its files are absent (with a warning)."""
    path = data_file(f"{config.folder}/{data.COAT_FILES['train']}" if config.folder else "")
    return None if path is None else data.load_coat(path.parent)


@dataclass(frozen=True)
class Split:
    """One random split of the MNAR ratings (f64 CSR [U, I], ratings kept), disjoint per user."""
    train: sp.csr_matrix                          # what the grid points are fitted on
    valid: sp.csr_matrix                          # selects the grid point and the budget
    test: sp.csr_matrix                           # the held-out MNAR ratings

    @property
    def fit(self) -> sp.csr_matrix:
        """train + valid: what the selected point is refitted on."""
        return (self.train + self.valid).tocsr()


@dataclass(frozen=True)
class Shared:
    coat: data.Coat | None


#: the `split` of the cell (and records) that pools every split: values averaged over the splits
POOLED = -1


def cells(config: CoatConfig) -> list[dict]:
    """One cell per random split, then the pooled cell (`POOLED`), when the data are present."""
    return [{"split": s} for s in (*range(config.splits), POOLED)] if _coat_present(config) else []


def _coat_present(config: CoatConfig) -> bool:
    return bool(config.folder) and data_file(
        f"{config.folder}/{data.COAT_FILES['train']}") is not None


def setup(key, config: CoatConfig) -> Shared:
    return Shared(coat=_coat(config))


def split(key, config: CoatConfig, ratings: sp.csr_matrix) -> Split:
    """`n_test` then `n_valid` random ratings per user (users with fewer than n_test + n_valid + 1
    ratings have empty rows everywhere)."""
    rest, test = missing.split_steck(jax.random.fold_in(key, 0), ratings, n_test=config.n_test,
                                     min_ratings=config.n_test + config.n_valid + 1)
    train, valid = missing.split_steck(jax.random.fold_in(key, 1), rest, n_test=config.n_valid,
                                       min_ratings=config.n_valid + 1)
    return Split(train=train, valid=valid, test=test)


def _positives(ratings: sp.csr_matrix, config: CoatConfig) -> sp.csr_matrix:
    """bool CSR [U, I]: the ratings >= relevant_rating."""
    return sp.csr_matrix(ratings.multiply(ratings >= config.relevant_rating)).astype(bool)


# ---- models ---------------------------------------------------------------------------------

def grid(config: CoatConfig, name: str) -> list[dict[str, float]]:
    """The model's hyper-parameter grid points."""
    def product(**axes):
        return [dict(zip(axes, p)) for p in itertools.product(*axes.values())]
    return {"popularity": [{}],
            "EASE": product(l2=config.ease_l2s),
            "iALS": product(l2=config.ials_l2s, w0=config.ials_weights),
            "MF-ADG": product(l2=config.adg_l2s, lr=config.adg_learning_rates),
            "MF-RMSE": product(l2=config.mf_rmse_l2s),
            "AllRank": product(l2=config.allrank_l2s, wm=config.allrank_weights)}[name]


def spec(config: CoatConfig, name: str, point: dict, budget: int | None = None):
    """The model spec at a grid point: early stopping on validation when budget is None (the
    maximum budget then is the config's), else a fixed budget (sweeps, or MF-ADG pairs)."""
    stop = None
    if budget is None and name in ("iALS", "MF-RMSE"):
        stop = models.EarlyStopping(every=1, metric="rmse" if name == "MF-RMSE"
                                    else config.validation_metric, patience=config.patience)
    if budget is None and name == "AllRank":                 # validation ratings >= 4 relevant
        stop = models.EarlyStopping(every=1, metric=config.validation_metric,
                                    patience=config.patience,
                                    relevant_rating=config.relevant_rating)
    sweeps = config.sweeps if budget is None else budget
    if name == "popularity":
        return models.PopularitySpec()
    if name == "EASE":
        return models.EASESpec(l2=point["l2"])
    if name == "iALS":
        return models.IALSSpec(dim=config.dim, l2=point["l2"], unobserved_weight=point["w0"],
                               sweeps=sweeps, early_stopping=stop)
    if name == "MF-RMSE":
        return models.MFRMSESpec(dim=config.dim, l2=point["l2"], sweeps=sweeps,
                                 early_stopping=stop, biases=config.mf_rmse_biases)
    if name == "AllRank":
        return models.AllRankSpec(dim=config.dim, l2=point["l2"], imputed=config.imputed,
                                  missing_weight=point["wm"], sweeps=sweeps, early_stopping=stop)
    if budget is None:
        stop = models.EarlyStopping(every=config.check_pairs, metric=config.validation_metric,
                                    patience=config.patience)
    return models.MFSpec(models.OptADG(dim=config.dim, gamma=config.gamma), l2=point["l2"],
                         learning_rate=point["lr"], batch_size=config.batch_size,
                         early_stopping=stop)


def _training_data(config: CoatConfig, name: str, ratings: sp.csr_matrix) -> sp.csr_matrix:
    return ratings.astype(np.float32) if name in EXPLICIT else _positives(ratings, config)


def _validation_value(config: CoatConfig, name: str, model, part: Split) -> float:
    """MF-RMSE: RMSE on the validation ratings; others: user-mean validation nDCG (whole list) of the
    positive validation ratings ranked among every item outside train."""
    if name == "MF-RMSE":
        return _rmse(model, part.valid)
    values = metrics.evaluate(functools.partial(models.score, model),
                              _positives(part.valid, config), exclude=part.train.astype(bool),
                              metrics=(config.validation_metric,))
    return metrics.mean(values[config.validation_metric])


def _rmse(model, ratings: sp.csr_matrix) -> float:
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    predicted = np.asarray(models.score(model, np.arange(ratings.shape[0])))[rows, ratings.indices]
    return float(np.sqrt(np.mean((predicted - ratings.data) ** 2)))


def _pairs(config: CoatConfig, name: str, budget: int | None = None) -> int | None:
    """MF-ADG's pair budget: the refit's `budget`, else the config's maximum (None for the others)."""
    return (budget or config.pairs) if name == "MF-ADG" else None


def tune(key, config: CoatConfig, name: str, part: Split) -> models.Tuning:
    """Every grid point fitted on train with early stopping, scored on validation
    (`_validation_value`) and the best selected (`simrec.models.tune`; `simrec.models.select`
    flags a value at a grid edge; popularity has nothing to select)."""
    return models.tune(key, grid(config, name), lambda point: spec(config, name, point),
                       _training_data(config, name, part.train),
                       validation=_training_data(config, name, part.valid), pairs=_pairs(config, name),
                       value=lambda model: _validation_value(config, name, model, part),
                       higher_is_better=name != "MF-RMSE")


def refit(key, config: CoatConfig, name: str, part: Split, point: dict, budget: int | None):
    """The selected point fitted on train + valid for its best checkpoint's budget (MF-ADG: the
    same number of epochs, so pairs scale with the positives), through the store of fits
    (`simrec.models.fitted`)."""
    fit = part.fit
    if name == "MF-ADG" and budget is not None:
        epochs = -(-budget // _positives(part.train, config).nnz)
        budget = epochs * _positives(fit, config).nnz
    return models.fitted(key, spec(config, name, point, budget), _training_data(config, name, fit),
                         pairs=_pairs(config, name, budget))


# ---- protocols ------------------------------------------------------------------------------

def settings(config: CoatConfig, coat: data.Coat, part: Split) -> dict:
    """{protocol: (relevant bool[U, I], exclude bool[U, I] or None, gains f64[U, I] or None,
    cutoff N)} (module docstring)."""
    fit = part.fit.toarray() != 0
    held_out = part.test.toarray() >= config.relevant_rating
    mcar = coat.test.toarray()
    rated = np.diff(coat.train.indptr).astype(np.float64)      # n_u, the user's MNAR ratings
    weights = (rated / config.n_test)[:, None] / coat.propensities   # 1 / P(held out)
    random_items = sp.csr_matrix((mcar != 0) & ~fit)           # MCAR items outside the fit part
    lengths = np.diff(random_items.indptr)
    n, n_b = config.cutoff, config.short_cutoff(config.n_test)
    n_random = config.short_cutoff(np.median(lengths[lengths > 0]) if lengths.any() else 1)
    return {A1: (held_out, None, None, n), A2: (held_out, fit, None, n),
            B: (held_out, exclude_unrated(part.test), None, n_b),
            A1_IPS: (held_out, None, weights, n), A2_IPS: (held_out, fit, weights, n),
            TRUTH: (mcar >= config.relevant_rating, fit, None, n),
            TRUTH_RANDOM: (random_items.toarray() & (mcar >= config.relevant_rating),
                           exclude_unrated(random_items), None, n_random)}


def protocol_values(model, setting) -> dict[str, np.ndarray]:
    """{metric label: per-user values f64[U]} of a protocol's metrics (IPS: `IPS_METRICS`)."""
    relevant, exclude, gains, n = setting
    score = functools.partial(models.score, model)
    if gains is not None:
        return {label: metrics.dcg(score, relevant, k=n if "@" in label else None,
                                   exclude=exclude, gains=gains) for label in IPS_METRICS}
    names = {label: name.format(N=n) for label, name in METRICS.items()}
    values = metrics.evaluate(score, relevant, exclude=exclude, metrics=tuple(names.values()))
    return {label: values[name] for label, name in names.items()}


# ---- agreement ------------------------------------------------------------------------------

def _tau_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b, NaN when either ordering is constant (all models tied)."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return stats.kendall_tau(x, y)[0]


def _resampled_means(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """User means of values f64[M, U] (NaN skipped) under user multiplicities counts[B, U].
    Returns f64[B, M]."""
    present = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts @ np.where(present, values, 0.0).T) / (counts @ present.T)


def bootstrap_taus(key, config: CoatConfig, offline: np.ndarray, truth: np.ndarray,
                   memo: dict | None = None) -> np.ndarray:
    """Kendall's τ between the models' user means of offline f64[M, U] and of truth f64[M, U] on
    each of `bootstrap` resamples of the users (with replacement; the same resamples for both
    sides, and for every call with the same key). Returns f64[bootstrap], NaN where a side is
    constant or a model has no user. τ-b depends only on the two rankings (ties included), and not
    on the order of the models, so it is computed once per distinct multiset of (rank in offline,
    rank in truth) pairs: in `memo` when given (shared by the calls of a cell), else per call.
    The value is the same whichever pair of rankings stands for a multiset: `simrec.stats.
    kendall_tau` forms τ-b from the integer counts of concordant, discordant and tied pairs."""
    n_users = offline.shape[1]
    draws = np.asarray(jax.random.randint(key, (config.bootstrap, n_users), 0, n_users))
    counts = np.zeros((config.bootstrap, n_users))
    np.add.at(counts, (np.arange(config.bootstrap)[:, None], draws), 1.0)
    a, b = _resampled_means(offline, counts), _resampled_means(truth, counts)
    usable = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    ranks_a = scipy.stats.rankdata(np.where(usable[:, None], a, 0.0), method="min", axis=1)
    ranks_b = scipy.stats.rankdata(np.where(usable[:, None], b, 0.0), method="min", axis=1)
    taus, known = np.full(config.bootstrap, math.nan), {} if memo is None else memo
    for i in np.flatnonzero(usable):
        order = np.lexsort((ranks_b[i], ranks_a[i]))            # the models by (rank a, rank b)
        x, y = ranks_a[i][order], ranks_b[i][order]
        pair = (x.tobytes(), y.tobytes())
        if pair not in known:
            known[pair] = _tau_or_nan(x, y)
        taus[i] = known[pair]
    return taus


def agreement(key, config: CoatConfig, offline: np.ndarray, truth: np.ndarray, memo: dict | None = None):
    """Kendall's τ between the models' user means of offline f64[M, U] and of truth f64[M, U],
    and its percentile bootstrap interval at `level` over `bootstrap_taus` (resamples where τ is
    undefined are skipped; `memo` as there). Returns (τ, low, high, the bootstrap τs
    f64[bootstrap])."""
    point = _tau_or_nan(np.nanmean(offline, axis=1), np.nanmean(truth, axis=1))
    taus = bootstrap_taus(key, config, offline, truth, memo)
    low, high = interval(config, taus)
    return point, low, high, taus


def interval(config: CoatConfig, draws: np.ndarray) -> tuple[float, float]:
    """The percentile interval at `level` of bootstrap draws (NaN draws skipped; NaN if none)."""
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = (1 - config.level) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))



# ---- records --------------------------------------------------------------------------------

#: the empty coordinates of a record (`simrec_studies.coat.COLUMNS`)
_EMPTY = {"model": "", "protocol": "", "truth": "", "cutoff": 0, "user_part": ALL_USERS,
          "se": math.nan, "low": math.nan, "high": math.nan, "point": "", "budget": 0, "edges": "",
          "unsearched": ""}


def _record(cell: dict, part: str, metric: str, value, **fields) -> dict:
    return {"split": cell["split"], "part": part, **_EMPTY, "metric": metric,
            "value": float(value), **fields}


def _point_text(point: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in point.items()) or "(none)"


def _sizes(coat: data.Coat, part: Split, config: CoatConfig) -> dict[str, float]:
    return {"users": coat.train.shape[0], "items": coat.train.shape[1],
            "train ratings": part.train.nnz, "validation ratings": part.valid.nnz,
            "held-out MNAR ratings": part.test.nnz, "MCAR ratings": coat.test.nnz,
            "relevant held-out MNAR": _positives(part.test, config).nnz,
            "relevant MCAR": _positives(coat.test, config).nnz,
            "users with relevant MCAR": int((np.diff(_positives(coat.test, config).indptr) > 0).sum())}


def split_values(key, config: CoatConfig, coat: data.Coat, index: int) -> tuple[list[dict], dict]:
    """Split `index` (key ``cell_key(key, {"split": index})``): tune, select and refit every model
    and evaluate it under every protocol. Returns (records: the data sizes, the tuning, the
    selection and the user means over all users and over each of `parts` user parts; values:
    {(protocol, metric): per-user values f64[M, U] of the models in `MODELS` order})."""
    cell = {"split": index}
    root = cell_key(key, cell)
    part = split(jax.random.fold_in(root, 0), config, coat.train)
    out = [_record(cell, "data", name, value) for name, value in _sizes(coat, part, config).items()]
    fit_key, parts_key = jax.random.fold_in(root, 1), jax.random.fold_in(root, 2)
    protocol_settings = settings(config, coat, part)
    values = {}
    for name in MODELS:
        tuning = tune(fit_key, config, name, part)
        chosen, budget = tuning.selection, tuning.best.budget
        label = "validation RMSE" if name == "MF-RMSE" else "validation nDCG"
        out += [_record(cell, "tuning", label, t.value, model=name, point=_point_text(t.point),
                        budget=t.budget or 0) for t in tuning.trials]
        out.append(_record(cell, "selected", label, chosen.value, model=name,
                           point=_point_text(chosen.point), budget=budget or 0,
                           edges=", ".join(chosen.edges),
                           unsearched=", ".join(chosen.unsearched)))
        model = refit(fit_key, config, name, part, dict(chosen.point), budget)
        for protocol, setting in protocol_settings.items():
            for metric, per_user in protocol_values(model, setting).items():
                values.setdefault((protocol, metric), []).append(per_user)
                mean, se = metrics.mean_and_se(per_user)
                n = setting[3] if "@" in metric else 0
                out.append(_record(cell, "model", metric, mean, se=se, model=name,
                                   protocol=protocol, cutoff=n))
                user_part = stats.user_parts(parts_key, ~np.isnan(per_user), config.parts)
                means = stats.part_means(per_user, user_part, config.parts)
                out += [_record(cell, "model", metric, v, model=name, protocol=protocol, cutoff=n,
                                user_part=k) for k, v in enumerate(means)]
    return out, {pair: np.stack(rows) for pair, rows in values.items()}


def _agreement_records(key, config: CoatConfig, cell: dict, values: dict) -> list[dict]:
    """Kendall's τ of every offline protocol x metric against both MCAR truths with its bootstrap
    interval (one resample set for every comparison, from `key`), and per truth and unweighted
    protocol the bootstrap draws of τ averaged over the metrics (part "bootstrap": paired over
    the protocols, as they share the resamples)."""
    out, draws, memo = [], {}, {}                         # memo: τ-b per multiset of rank pairs
    for (protocol, metric), offline in values.items():
        if protocol in (TRUTH, TRUTH_RANDOM):
            continue
        for truth in (TRUTH, TRUTH_RANDOM):
            tau, low, high, taus = agreement(key, config, offline, values[truth, metric], memo)
            out.append(_record(cell, "agreement", metric, tau, protocol=protocol, truth=truth,
                               low=low, high=high))
            if protocol in UNWEIGHTED:
                draws.setdefault((protocol, truth), []).append(taus)
    for (protocol, truth), taus in draws.items():
        out += [_record(cell, "bootstrap", MEAN_TAU, v, protocol=protocol, truth=truth,
                        user_part=b) for b, v in enumerate(np.mean(taus, axis=0))]
    return out


def compute(key, config: CoatConfig, cell: dict, shared: Shared) -> list[dict]:
    """A split's cell: its `split_values` records and the agreement of its values with both MCAR
    truths (`_agreement_records`). The pooled cell (`POOLED`): every split's values again (the fits
    come from the store of fits, where the split cells left them), averaged per user over the
    splits, and their agreement: the models' values pooled before τ, so split-to-split noise in
    the fits does not pull τ towards 0 as averaging the splits' τ does."""
    bootstrap_key = jax.random.fold_in(cell_key(key, cell), 3)
    if cell["split"] != POOLED:
        out, values = split_values(key, config, shared.coat, cell["split"])
        return out + _agreement_records(bootstrap_key, config, cell, values)
    per_split = [split_values(key, config, shared.coat, s)[1] for s in range(config.splits)]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # a user without a value in any split
        pooled = {pair: np.nanmean([values[pair] for values in per_split], axis=0) for pair in per_split[0]}
    return _agreement_records(bootstrap_key, config, cell, pooled)

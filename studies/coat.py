"""Study ``coat``: which offline protocol orders models as a missing-at-random truth does?

Steck (RecSys'13, "Evaluation of recommendations: rating-prediction and ranking") showed that the
ranking protocol — rank all items, rank the unrated items, or rank only the rated test items —
can decide which model wins when ratings are missing not at random (MNAR), and argued for the
protocols that rank unrated items. Simulation (`protocols`) can only say which protocol is right
in the world it simulates. The Coat shopping data (Schnabel, Swaminathan, Singh, Chandak,
Joachims, ICML'16, "Recommendations as treatments: debiasing learning and evaluation") can say it
on real people: each of its 290 users rated 24 coats they chose (MNAR) and 16 coats drawn for them
uniformly at random (missing completely at random, MCAR). On the MCAR ratings a metric is an
unbiased sample of what the user thinks of the items, so the model ordering they give is the
truth an offline protocol should reproduce.

Design. Per random split (`splits`, each from its own key), the MNAR ratings of every user are cut
into `n_test` held-out ratings, `n_valid` validation ratings and the rest (train), uniformly at
random (`simrec.missing.split_steck` twice). Six models are trained on the train part: MF-RMSE and
AllRank on the ratings (Steck's two; AllRank imputes `imputed` stars with weight w_m on every
unrated pair), popularity, iALS, EASE and MF-ADG (Lim et al., RecSys'15) on the positives
(ratings >= `relevant_rating`). Each hyper-parameter grid point is fitted with early stopping on
its validation metric (MF-RMSE: validation RMSE; the others: validation nDCG (whole list) of the positive
validation ratings ranked among every item outside train), `simrec.models.select` picks the
point (and flags a value at the edge of its grid), and the selected point is refitted on train +
validation (the "fit" part) for the budget of its best checkpoint (ALS sweeps; MF-ADG epochs).
Every protocol below evaluates these six fitted models, so the protocols disagree only in how
they measure.

Protocols (relevant = rating >= `relevant_rating`, 4 stars; metrics tie-aware, `simrec.metrics`):

- (a1) all items: rank all 300 coats; relevant = the held-out MNAR ratings >= 4; fit items stay
  in the list as non-relevant;
- (a2) unrated items: the same without the fit items;
- (b) rated held-out items: rank only the user's `n_test` held-out MNAR items;
- (a1)/(a2) with IPS: the inverse-propensity-scored DCG of Schnabel et al. (§3.2): a held-out
  relevant item i of user u contributes its rank discount times 1 / P(held out), P = p_ui n_test
  / n_u with p_ui the shipped propensity of (u, i) being rated and n_u the user's MNAR ratings
  (`simrec.metrics.dcg(..., gains=)`). Unbiased for the user's DCG over every relevant coat if
  the propensities are right, and only for metrics that are sums over items (DCG@N, DCG): nDCG,
  P@N, R@N, MAP and ATOP normalise by or rank against the observed set, which IPS does not
  correct;
- the truth, MCAR: the same metrics with relevant = the MCAR ratings >= 4, ranking all coats
  outside the fit part; and beside it, ranking only the user's random coats outside the fit part.

Cutoffs. N = `cutoff` (5) for lists over the catalogue: about 3 of a user's 16 MCAR ratings are
relevant (and 6.6 of the 24 MNAR ones), so a top 5 of 300 is a short page that those few items
can fill, while a top 10 or 20 would hold mostly unlabelled coats. Lists of rated items only are
short (8 held-out items under (b), 16 MCAR items), so there N = round(`short_share` x length),
the top 20 % as in Steck's (b) (2 of 10): 2 of 8 and 3 of 16. Whole-list metrics (nDCG, MAP,
ATOP, DCG) need no cutoff.

Agreement. For each protocol x metric, Kendall's tau-b (`simrec.stats.kendall_tau`) between the
six models' user-mean values and their MCAR-truth values of the same metric, with a percentile
bootstrap interval at `level`: users resampled with replacement `bootstrap` times (one fixed
key per split, the same resample for every model, protocol and the truth). And noise-aware
inversions: a pair of models is inverted only when the protocol and the truth both name a winner
beyond `z` standard errors of the paired difference, over `parts` disjoint parts of the users
(`simrec.stats.user_parts`, `simrec.stats.paired_winner`), and the winners differ. Which protocol
to trust: the unweighted protocol (a1, a2, b) with the highest τ averaged over the metrics and
splits, and its lead over each other one with a paired bootstrap interval (the same user
resamples for every protocol; a lead is significant when the interval excludes 0).

Grids. On Coat MF-ADG's validation optimum lies near λ 0.3..1 with learning rate 0.3..3 (λ >= 1
leaves mostly the item biases, a popularity-like model: larger λ is a plateau, not an optimum),
and iALS's near λ 1..3 with w0 1e-3..1e-1 (at λ >= 3 the factors shrink to the leading direction
and w0 hardly matters). The validation metric rests on about one relevant validation rating per
user, so the validation metric is nDCG over the whole list (every validation positive's rank
counts); with nDCG@5 neighbouring grid points were within noise of each other and the selected
point moved to whichever grid edge was widened. The selected-hyperparameter table flags every
edge.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd
import scipy.sparse as sp
import scipy.stats

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key
from simrec.datafiles import data_file, skipped_note
from simrec_studies.common.rated import exclude_unrated

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


@dataclass(frozen=True)
class CoatConfig:
    """The splits, the six models and their grids, the protocols' cutoffs and the agreement
    statistics (module docstring)."""
    #: the Coat folder below the data folder (`simrec.datafiles.data_root`; "" skips the study)
    folder: str = "coat"
    splits: int = 3                               # random MNAR held-out splits (one cell each)
    n_test: int = 8                               # MNAR ratings per user held out for testing
    n_valid: int = 4                              # MNAR ratings per user for validation (of the rest)
    relevant_rating: float = 4.0                  # ratings >= this are relevant (positives)
    cutoff: int = 5                               # N of P@N, R@N, nDCG@N, DCG@N over the catalogue
    short_share: float = 0.2                      # N = round(share x length) for rated-only lists
    dim: int = 10                                 # rank of every factor model
    sweeps: int = 30                              # maximum ALS sweeps (early stopping)
    pairs: int = 400_000                          # maximum sampled (u, i+) pairs of MF-ADG
    check_pairs: int = 10_000                     # MF-ADG early-stopping check every this many pairs
    patience: int = 3                             # checks without improvement before stopping
    gamma: float = 10.0                           # OPT-ADG γ: at most (I - 1) / γ negative draws
    batch_size: int = 256                         # MF-ADG pairs per step
    mf_rmse_l2s: tuple[float, ...] = L2_GRID      # MF-RMSE's λ grid (validation RMSE)
    allrank_l2s: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)     # AllRank's λ grid
    allrank_weights: tuple[float, ...] = WEIGHT_GRID  # AllRank's w_m grid of the imputed ratings
    imputed: float = 2.0                          # AllRank's imputed rating r_m (Steck)
    ials_l2s: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)         # iALS λ grid
    ials_weights: tuple[float, ...] = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)  # iALS w0 of unobserved pairs
    ease_l2s: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0, 1e6, 1e7)  # EASE λ grid
    adg_l2s: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)     # MF-ADG λ grid
    adg_learning_rates: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)      # MF-ADG adagrad step grid
    parts: int = 5                                # disjoint user parts for the paired SE
    z: float = 2.0                                # a winner needs |difference| > z SE
    bootstrap: int = 500                          # user resamples for the CI of Kendall's τ
    level: float = 0.95                           # level of that percentile interval

    def __post_init__(self):
        for name in ("splits", "n_test", "n_valid", "cutoff", "dim", "sweeps", "pairs",
                     "check_pairs", "patience", "batch_size", "bootstrap"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.parts < 5:
            raise ValueError(f"parts must be >= 5 (Steck's five parts of the test users), got "
                             f"{self.parts}")
        for name in ("relevant_rating", "imputed"):
            if not 1 <= getattr(self, name) <= 5:
                raise ValueError(f"{name} must be a rating in 1..5, got {getattr(self, name)}")
        for name in ("short_share", "level"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        for name in ("gamma", "z"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be finite and > 0, got {getattr(self, name)}")
        for name in ("mf_rmse_l2s", "allrank_l2s", "allrank_weights", "ials_l2s", "ials_weights",
                     "ease_l2s", "adg_l2s", "adg_learning_rates"):
            grid = getattr(self, name)
            if not grid or len(set(grid)) != len(grid) \
                    or any(not (math.isfinite(v) and v > 0) for v in grid):
                raise ValueError(f"{name} must be distinct finite values > 0 (log-spaced, e.g. "
                                 f"{L2_GRID}), got {grid}")
        if max(self.allrank_weights) > 1:
            raise ValueError(f"allrank_weights must be in (0, 1], got {self.allrank_weights}")

    def short_cutoff(self, length: float) -> int:
        """The N of P@N, R@N, nDCG@N, DCG@N on a list of `length` rated items (module docstring)."""
        return max(1, round(self.short_share * length))

    @property
    def validation_metric(self) -> str:
        """The ranking models' validation metric (a `simrec.metrics.evaluate` name): nDCG over
        the whole list, which uses the rank of every validation positive; with about one relevant
        validation rating per user a top-N cutoff makes it too noisy to tell grid points apart."""
        return "ndcg"


PRESETS = {
    "smoke": CoatConfig(splits=1, n_test=4, n_valid=2, dim=3, sweeps=4, pairs=4000,
                        check_pairs=1000, batch_size=64, mf_rmse_l2s=(0.01, 0.1, 1.0),
                        allrank_l2s=(0.1, 1.0), allrank_weights=(0.01, 0.1),
                        ials_l2s=(0.1, 1.0), ials_weights=(0.1,), ease_l2s=(10.0, 100.0),
                        adg_l2s=(0.01, 0.1), adg_learning_rates=(0.1,), bootstrap=50),
    "default": CoatConfig(),
    "paper": CoatConfig(splits=10, dim=20, sweeps=50, pairs=1_000_000, bootstrap=2000,
                        adg_learning_rates=(0.03, 0.1, 0.3, 1.0, 3.0)),
}


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


def cells(config: CoatConfig) -> list[dict]:
    return [{"split": s} for s in range(config.splits)] if _coat_present(config) else []


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
                                 early_stopping=stop)
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


def _fit(key, config: CoatConfig, name: str, point: dict, train, validation, budget=None):
    model_spec = spec(config, name, point, budget)
    early = getattr(model_spec, "early_stopping", None) is not None
    pairs = (budget or config.pairs) if name == "MF-ADG" else None
    return models.fit(key, model_spec, train, validation=validation if early else None,
                      pairs=pairs)


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


def tune(key, config: CoatConfig, name: str, part: Split):
    """Every grid point fitted on train with early stopping and scored on validation.
    Returns ([(point, validation value, best budget or None)], `simrec.models.Selection`)."""
    train = _training_data(config, name, part.train)
    validation = _training_data(config, name, part.valid)
    tuning = []
    for point in grid(config, name):
        model = _fit(key, config, name, point, train, validation)
        tuning.append((point, _validation_value(config, name, model, part),
                       (models.best_checkpoint(model) or (None,))[0]))
    if tuning[0][0]:
        chosen = models.select([p for p, _, _ in tuning], [v for _, v, _ in tuning],
                               higher_is_better=name != "MF-RMSE")
    else:                                             # popularity: nothing to select
        chosen = models.Selection(index=0, point={}, value=tuning[0][1], edges=(), unsearched=())
    return tuning, chosen


def refit(key, config: CoatConfig, name: str, part: Split, point: dict, budget: int | None):
    """The selected point fitted on train + valid for its best checkpoint's budget (MF-ADG: the
    same number of epochs, so pairs scale with the positives)."""
    fit = part.fit
    if name == "MF-ADG" and budget is not None:
        epochs = -(-budget // _positives(part.train, config).nnz)
        budget = epochs * _positives(fit, config).nnz
    return _fit(key, config, name, point, _training_data(config, name, fit), None, budget)


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


def bootstrap_taus(key, config: CoatConfig, offline: np.ndarray, truth: np.ndarray
                   ) -> np.ndarray:
    """Kendall's τ between the models' user means of offline f64[M, U] and of truth f64[M, U] on
    each of `bootstrap` resamples of the users (with replacement; the same resamples for both
    sides, and for every call with the same key). Returns f64[bootstrap], NaN where a side is
    constant or a model has no user. τ-b depends only on the two rankings (ties included), so it
    is computed once per distinct pair of rankings."""
    n_users = offline.shape[1]
    draws = np.asarray(jax.random.randint(key, (config.bootstrap, n_users), 0, n_users))
    counts = np.zeros((config.bootstrap, n_users))
    np.add.at(counts, (np.arange(config.bootstrap)[:, None], draws), 1.0)
    a, b = _resampled_means(offline, counts), _resampled_means(truth, counts)
    usable = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    ranks_a = scipy.stats.rankdata(np.where(usable[:, None], a, 0.0), method="min", axis=1)
    ranks_b = scipy.stats.rankdata(np.where(usable[:, None], b, 0.0), method="min", axis=1)
    taus, known = np.full(config.bootstrap, math.nan), {}
    for i in np.flatnonzero(usable):
        pair = (ranks_a[i].tobytes(), ranks_b[i].tobytes())
        if pair not in known:
            known[pair] = _tau_or_nan(ranks_a[i], ranks_b[i])
        taus[i] = known[pair]
    return taus


def agreement(key, config: CoatConfig, offline: np.ndarray, truth: np.ndarray):
    """Kendall's τ between the models' user means of offline f64[M, U] and of truth f64[M, U],
    and its percentile bootstrap interval at `level` over `bootstrap_taus` (resamples where τ is
    undefined are skipped). Returns (τ, low, high, the bootstrap τs f64[bootstrap])."""
    point = _tau_or_nan(np.nanmean(offline, axis=1), np.nanmean(truth, axis=1))
    taus = bootstrap_taus(key, config, offline, truth)
    low, high = _interval(config, taus)
    return point, low, high, taus


def _interval(config: CoatConfig, draws: np.ndarray) -> tuple[float, float]:
    """The percentile interval at `level` of bootstrap draws (NaN draws skipped; NaN if none)."""
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = (1 - config.level) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


# ---- records --------------------------------------------------------------------------------

#: the record schema (unused coordinates hold "", NaN or -1)
COLUMNS = {
    "split": int,           # the random MNAR split
    "part": str,            # "model": a model's metric; "tuning": a grid point's validation value;
                            # "selected": the chosen point; "agreement": Kendall's τ; "data": a size;
                            # "bootstrap": a resample's τ vs the MCAR truth, mean over the metrics
    "model": str,           # `MODELS` ("" for "agreement" and "data")
    "protocol": str,        # `PROTOCOLS` ("model", "agreement"); "" otherwise
    "truth": str,           # part "agreement": the MCAR protocol compared with
    "metric": str,          # a label of `METRICS`; "validation RMSE" / "validation nDCG"
                            # (tuning, selected); a data size name (data)
    "cutoff": int,          # N of the @N metrics under the protocol (0 where none)
    "user_part": int,       # part "model": the disjoint user part 0..parts-1, or -1 = all users;
                            # part "bootstrap": the user resample 0..bootstrap-1
    "value": float,         # user mean, validation value, τ or size
    "se": float,            # part "model", all users: standard error of the user mean
    "low": float,           # part "agreement": the bootstrap interval of τ
    "high": float,
    "point": str,           # parts "tuning", "selected": the grid point, e.g. "l2=0.1, wm=0.01"
    "budget": int,          # best checkpoint's sweeps / MF-ADG pairs (0 without early stopping)
    "edges": str,           # part "selected": hyper-parameters at the edge of their grid
    "unsearched": str,      # part "selected": hyper-parameters with < 3 grid values (no edge test)
}
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


def compute(key, config: CoatConfig, cell: dict, shared: Shared) -> list[dict]:
    """One split: tune, select and refit every model; evaluate it under every protocol (user means
    over all users and over each of `parts` user parts); Kendall's τ of every offline protocol x
    metric against both MCAR truths, with bootstrap intervals."""
    coat, root = shared.coat, cell_key(key, cell)
    part = split(jax.random.fold_in(root, 0), config, coat.train)
    out = [_record(cell, "data", name, value) for name, value in _sizes(coat, part, config).items()]
    fit_key, parts_key = jax.random.fold_in(root, 1), jax.random.fold_in(root, 2)
    protocol_settings = settings(config, coat, part)
    values = {}                                           # (protocol, metric) -> f64[M, U]
    for name in MODELS:
        tuning, chosen = tune(fit_key, config, name, part)
        label = "validation RMSE" if name == "MF-RMSE" else "validation nDCG"
        out += [_record(cell, "tuning", label, v, model=name, point=_point_text(p), budget=b or 0)
                for p, v, b in tuning]
        budget = tuning[chosen.index][2]
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
    bootstrap_key = jax.random.fold_in(root, 3)           # one resample set for every comparison
    draws = {}                                            # unweighted protocol -> [f64[B] per metric]
    for (protocol, metric), offline in values.items():
        if protocol in (TRUTH, TRUTH_RANDOM):
            continue
        for truth in (TRUTH, TRUTH_RANDOM):
            tau, low, high, taus = agreement(bootstrap_key, config, np.stack(offline),
                                             np.stack(values[truth, metric]))
            out.append(_record(cell, "agreement", metric, tau, protocol=protocol, truth=truth,
                               low=low, high=high))
            if truth == TRUTH and protocol in UNWEIGHTED:
                draws.setdefault(protocol, []).append(taus)
    for protocol, taus in draws.items():                  # paired over protocols: same resamples
        out += [_record(cell, "bootstrap", MEAN_TAU, v, protocol=protocol, truth=TRUTH,
                        user_part=b) for b, v in enumerate(np.mean(taus, axis=0))]
    return out


# ---- report ---------------------------------------------------------------------------------

def inversions(config: CoatConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Per split, offline protocol, metric and MCAR truth: of the model pairs, how many the
    protocol and the truth each decide beyond z SE (`simrec.stats.paired_winner` over the user
    parts), how many both decide, and how many of those they decide oppositely (inverted)."""
    parts = records[(records.part == "model") & (records.user_part >= 0)]
    table = {key: group.sort_values("user_part").value.to_numpy()
             for key, group in parts.groupby(["split", "protocol", "metric", "model"])}
    rows = []
    for (split_index, protocol, metric), _ in parts.groupby(["split", "protocol", "metric"]):
        if protocol in (TRUTH, TRUTH_RANDOM):
            continue
        for truth in (TRUTH, TRUTH_RANDOM):
            counts = dict.fromkeys(("offline decided", "truth decided", "both decided",
                                    "inverted"), 0)
            for a, b in itertools.combinations(MODELS, 2):
                verdicts = []
                for p in (protocol, truth):
                    difference = table[split_index, p, metric, a] - table[split_index, p, metric, b]
                    verdicts.append(stats.TIE if np.isnan(difference).any() else
                                    stats.paired_winner(difference, names=(a, b),
                                                        z=config.z).winner)
                offline, true = verdicts
                counts["offline decided"] += offline != stats.TIE
                counts["truth decided"] += true != stats.TIE
                both = offline != stats.TIE and true != stats.TIE
                counts["both decided"] += both
                counts["inverted"] += both and offline != true
            rows.append({"split": split_index, "protocol": protocol, "truth": truth,
                         "metric": metric, **counts})
    return pd.DataFrame(rows)


def agreement_table(records: pd.DataFrame, flips: pd.DataFrame) -> pd.DataFrame:
    """Per offline protocol x metric x truth: τ and its bootstrap interval averaged over the
    splits, τ's range over the splits, and the noise-aware inversions summed over the splits."""
    tau = records[records.part == "agreement"]
    summary = tau.groupby(["truth", "protocol", "metric"], sort=False).agg(
        tau=("value", "mean"), ci_low=("low", "mean"), ci_high=("high", "mean"),
        tau_min=("value", "min"), tau_max=("value", "max"), splits=("value", "size"))
    counted = flips.groupby(["truth", "protocol", "metric"], sort=False)[
        ["offline decided", "truth decided", "both decided", "inverted"]].sum()
    out = summary.join(counted).reset_index()
    rank = {name: i for i, name in enumerate((TRUTH, TRUTH_RANDOM, *OFFLINE, *METRICS))}
    return out.sort_values(["truth", "protocol", "metric"],
                           key=lambda column: column.map(rank)).reset_index(drop=True)


def values_table(records: pd.DataFrame) -> pd.DataFrame:
    """Model x protocol x metric user means (mean over splits) and the split-0 standard error."""
    scored = records[(records.part == "model") & (records.user_part == ALL_USERS)]
    wide = scored.groupby(["protocol", "metric", "model"], sort=False).value.mean().unstack("model")
    return wide[[m for m in MODELS if m in wide.columns]].reset_index()


def protocol_differences(config: CoatConfig, agree: pd.DataFrame,
                         records: pd.DataFrame) -> pd.DataFrame:
    """The unweighted protocol with the highest mean τ over the metrics vs the MCAR truth (τ
    averaged over splits) against each other one: the difference of mean τ and its paired
    percentile bootstrap interval at `level` (resample b of every protocol shares its users; the
    split means of resample b are averaged over the splits, whose resamples are independent). A
    difference is significant when its interval excludes 0."""
    main = agree[(agree.truth == TRUTH) & agree.protocol.isin(UNWEIGHTED)]
    point = main.groupby("protocol").tau.mean().reindex(UNWEIGHTED)
    best = point.idxmax()
    boot = records[records.part == "bootstrap"]
    draws = boot.pivot_table(index="user_part", columns="protocol", values="value",
                             aggfunc="mean", dropna=False)
    rows = []
    for other in (p for p in UNWEIGHTED if p != best):
        low, high = _interval(config, (draws[best] - draws[other]).to_numpy())
        rows.append({"best": best, "other": other, "difference": point[best] - point[other],
                     "low": low, "high": high,
                     "significant": "yes" if low > 0 or high < 0 else "no"})
    return pd.DataFrame(rows)


def selected_table(records: pd.DataFrame) -> pd.DataFrame:
    chosen = records[records.part == "selected"]
    return pd.DataFrame({"split": chosen.split, "model": chosen.model, "selected": chosen.point,
                         "selected by": chosen.metric, "validation value": chosen.value,
                         "budget (sweeps or pairs)": chosen.budget,
                         "at grid edge": chosen.edges,
                         "not searched (< 3 values)": chosen.unsearched}).reset_index(drop=True)


def _figure(table: pd.DataFrame):
    import matplotlib.pyplot as plt
    import seaborn as sns

    main = table[table.truth == TRUTH]
    with sns.axes_style("whitegrid"), sns.plotting_context("paper"):
        figure, ax = plt.subplots(figsize=(8, 3.8))
        labels = [m for m in METRICS if m in set(main.metric)]
        width = 0.8 / max(len(OFFLINE), 1)
        for j, protocol in enumerate(OFFLINE):
            rows = main[main.protocol == protocol].set_index("metric").reindex(labels)
            x = np.arange(len(labels)) + (j - (len(OFFLINE) - 1) / 2) * width
            # a percentile interval need not contain the point estimate: draw it as it is
            ax.vlines(x, rows.ci_low, rows.ci_high, color=f"C{j}", lw=1)
            ax.plot(x, rows.tau, "o", color=f"C{j}", label=protocol)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(np.arange(len(labels)), labels)
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel(f"Kendall τ vs {TRUTH}")
        ax.legend(fontsize=7, ncol=3, loc="lower left")
        figure.tight_layout()
    return figure


def report(config: CoatConfig, records: pd.DataFrame) -> Report:
    if records.empty:
        return Report(summary=_skipped_text(config))
    flips = inversions(config, records)
    agree = agreement_table(records, flips)
    selected = selected_table(records)
    differences = protocol_differences(config, agree, records)
    tables = {"table_agreement": agree, "table_values": values_table(records),
              "table_selected": selected, "table_inversions": flips,
              "table_best_protocol": differences}
    return Report(tables=tables, figures={"fig_agreement": _figure(agree)},
                  summary=summary_text(config, records, agree, selected, differences))


def _skipped_text(config: CoatConfig) -> str:
    relative = f"{config.folder}/{data.COAT_FILES['train']}" if config.folder else ""
    return "No Coat data, nothing computed.\n" + skipped_note(relative)


def summary_text(config: CoatConfig, records: pd.DataFrame, agree: pd.DataFrame,
                 selected: pd.DataFrame, differences: pd.DataFrame) -> str:
    sizes = records[(records.part == "data") & (records.split == records.split.min())]
    v = sizes.set_index("metric").value
    cutoffs = records[records.metric == "P@N"].groupby("protocol").cutoff.first()
    lines = [f"Coat (Schnabel et al., ICML'16): {int(v['users'])} users x {int(v['items'])} "
             f"items; per split {int(v['train ratings'])} train / {int(v['validation ratings'])} "
             f"validation / {int(v['held-out MNAR ratings'])} held-out MNAR ratings "
             f"({int(v['relevant held-out MNAR'])} relevant), {int(v['MCAR ratings'])} MCAR "
             f"ratings ({int(v['relevant MCAR'])} relevant, {int(v['users with relevant MCAR'])} "
             f"users with one). {config.splits} random splits; relevant = rating >= "
             f"{config.relevant_rating:g}; N = {config.cutoff} over the catalogue, "
             f"{cutoffs[B]} under (b), {cutoffs[TRUTH_RANDOM]} among the random items.", "",
             f"Kendall τ of each protocol's model ordering ({len(MODELS)} models) with the MCAR "
             f"truth ({TRUTH}), mean over splits, [mean {config.level:.0%} bootstrap interval "
             f"over users]; inverted = pairs both decide beyond {config.z:g} SE "
             f"({config.parts} user parts) but oppositely, summed over splits:", ""]
    main = agree[agree.truth == TRUTH]
    for protocol in OFFLINE:
        rows = main[main.protocol == protocol]
        cells = "; ".join(f"{r.metric} {r.tau:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}], "
                          f"{int(r.inverted)}/{int(r['both decided'])} inverted"
                          for _, r in rows.iterrows())
        lines.append(f"- {protocol}: {cells}")
    lines.append("")
    common = main[main.metric.isin(IPS_METRICS)]
    by_protocol = main.groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
    on_dcg = common.groupby("protocol", sort=False).tau.mean().reindex(OFFLINE)
    best = differences.best.iloc[0]
    lines.append("Mean τ over the metrics: " + ", ".join(
        f"{p} {t:+.2f}" for p, t in by_protocol.items() if t == t) + "; on DCG@N and DCG only "
        "(where IPS applies): " + ", ".join(f"{p} {t:+.2f}" for p, t in on_dcg.items() if t == t)
        + ".")
    leads = "; ".join(f"over {r.other} {r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}]"
                      for r in differences.itertuples())
    significant = differences[differences.significant == "yes"]
    if len(significant) == len(differences):
        strength = "significantly better than each other unweighted protocol"
    elif len(significant):
        strength = ("significantly better only than " + ", ".join(significant.other)
                    + "; its lead over the others is not significant")
    else:
        strength = ("not significantly better than the others: the differences between the "
                    "unweighted protocols are not significant")
    lines.append(f"Verdict: on Coat the unweighted protocol whose model ordering is closest to the "
                 f"MCAR truth is {best} (mean τ {by_protocol[best]:+.2f}), {strength} (lead in "
                 f"mean τ, paired bootstrap {config.level:.0%} interval over users and splits: "
                 f"{leads}); IPS weighting "
                 + ("helps" if on_dcg[[A1_IPS, A2_IPS]].max() > on_dcg[[A1, A2]].max() else
                    "does not help") + " on the DCG metrics it applies to (no test of that "
                 "difference). Trust it only as far as the intervals allow:")
    lines += [
        f"- {int(v['users'])} users with 16 random ratings each, of which about 3 are relevant "
        f"(and {int(v['users']) - int(v['users with relevant MCAR'])} users have none), so the "
        "truth itself is noisy: with six models τ moves in steps of 2/15 = 0.13 per swapped "
        "pair, and the bootstrap intervals span several such steps; models closer than the "
        "truth's 2-SE resolution are ties, which the inversion counts leave out.",
        "- IPS is only as good as the shipped propensities, which are the authors' estimates "
        "(Schnabel et al. §6 say how they were fitted); if their estimate drew on the random "
        "ratings, IPS borrows from the truth it is scored against.",
        "- One catalogue of 300 coats and one kind of user: a verdict about protocols on this data, "
        "not a law; the simulated cells of `protocols` show how it can change with the "
        "observation process."]
    edges = selected[selected["at grid edge"] != ""]
    if len(edges):
        lines.append("- Selected at a grid edge: " + "; ".join(
            f"split {r['split']} {r['model']} ({r['at grid edge']})"
            for _, r in edges.iterrows()) + ".")
    else:
        lines.append("- No selected hyper-parameter is at the edge of its grid.")
    return "\n".join(lines)


STUDY = Study(
    name="coat",
    description="Coat (Schnabel et al. ICML'16): which offline protocol (all items, unrated "
                "items, rated held-out items, IPS) orders six models as the missing-at-random "
                "ratings do — Steck's question answered on real MNAR/MCAR data",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=data_files, expected_seconds={"smoke": 30, "default": 105, "paper": 1800})

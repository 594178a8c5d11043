"""One model API: a typed hyperparameter spec per model family, `fit` dispatched on its type, `score`.

A spec is a frozen dataclass of one family's hyperparameters, validated when it is built and equal
and hashable by value; `spec_id(spec)` is a stable hash of its values for cache addresses.
`fit(key, spec, train, *, validation=None, pairs=None) -> Model` fits it with the family's trainer
in this package (the same function, key and arguments as calling it directly, so the parameters
are identical), and `score(model, users, history=None) -> f32[B, I]` scores a block of users:
training users by row index, or users given by their histories (fold-in with the item side fixed,
strong generalisation).

    family           spec             trainer (module)     budget   fold-in of a history h [B, I]
    MF-ADG, MF-AUC   MFSpec           training.train       pairs    `FoldIn` ridge solve, ials.fold_in
    truncated SVD    SVDSpec          svd.svd              -        projection (h V) Vᵀ
    iALS / WMF       IALSSpec         ials.ials            sweeps   ials.fold_in, the model's weights
    EASE^R           EASESpec         ease.ease            -        h B(λ)
    KUNN             KUNNSpec         knn.kunn             -        knn.kunn_history_scores
    item-kNN         ItemKNNSpec      knn.item_knn         -        knn.item_knn_history_scores
    popularity       PopularitySpec   popularity           -        none: the item counts
    MF-RMSE          MFRMSESpec       explicit.mf_rmse     sweeps   explicit.fold_in_ratings
    AllRank          AllRankSpec      explicit.allrank     sweeps   explicit.fold_in_ratings

`train` is the bool [U, I] matrix of observed positives (explicit-rating families: the rating
matrix). The training budget of the sampled-pair trainer is `pairs`, the number of sampled
(u, i⁺) pairs: ⌈pairs / nnz(train)⌉ epochs of ⌈nnz(train) / batch_size⌉ steps of batch_size pairs
(what the studies called iterations, r0_iterations / rt_iterations and adg_pairs); ALS families
count `sweeps` in their spec, closed-form families have no budget. Deterministic families ignore
the key (None is allowed); the others need one. `validation`, the held-out data of the training
users (bool [U, I] positives; explicit-rating families: ratings [U, I]), drives the
`EarlyStopping` of the trained families (MFSpec, IALSSpec, MFRMSESpec, AllRankSpec), whose own
budget is then the maximum.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
import optax
import scipy.sparse as sp

from simrec import metrics, validate
from simrec.models import ease, explicit, ials, knn, mf, popularity, svd, training
from simrec.models.positives import as_history_csr, as_positive_csr, check_users
from simrec.models.mf_auc import MFAUC
from simrec.models.opt_adg import OptADG

__all__ = ["OPTIMIZERS", "FoldIn", "EarlyStopping", "MFSpec", "SVDSpec", "IALSSpec", "EASESpec",
           "KUNNSpec", "ItemKNNSpec", "PopularitySpec", "MFRMSESpec", "AllRankSpec", "Spec", "SPECS",
           "Model", "spec_id", "fit", "fit_grid", "score", "best_checkpoint"]

#: optax optimizers of MFSpec.optimizer, called with the learning rate
OPTIMIZERS = {"adagrad": optax.adagrad, "sgd": optax.sgd, "adam": optax.adam}


def _set(spec, name: str, value) -> None:
    """Store a validated, canonical value (int / float) in a frozen spec."""
    object.__setattr__(spec, name, value)


def _integer(spec, name: str, low: int, high: int | None = None) -> None:
    _set(spec, name, validate.integer(f"{type(spec).__name__}.{name}", getattr(spec, name),
                                      low=low, high=high))


def _real(spec, name: str, low: float | None = None, *, low_open: bool = False,
          high: float | None = None) -> None:
    _set(spec, name, validate.finite(f"{type(spec).__name__}.{name}", getattr(spec, name),
                                     low=low, low_open=low_open, high=high))


def _instance(spec, name: str, types: tuple, optional: bool = False) -> None:
    value = getattr(spec, name)
    if not (isinstance(value, types) or (optional and value is None)):
        names = " or ".join(t.__name__ for t in types) + (" or None" if optional else "")
        raise validate.ArgumentTypeError(f"{type(spec).__name__}.{name} must be {names}, got "
                                         f"{type(value).__name__}")


# ---- specs ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FoldIn:
    """How a factor model scores a new user from a history h: x = argmin Σᵢ w_i (h_i - x·θᵢ)² + λ‖x‖²
    with the item factors θ fixed, w_i = 1 + alpha on h and unobserved_weight elsewhere
    (`simrec.models.fold_in`, one iALS half-step), then x·θᵢ, plus the trained item bias bᵢ when
    item_bias (the fold-in study leaves it out: it is on the scale of the trained user vectors)."""
    l2: float
    unobserved_weight: float = 0.1
    alpha: float = 0.0
    item_bias: bool = False

    def __post_init__(self):
        _real(self, "l2", 0, low_open=True)
        _real(self, "unobserved_weight", 0)
        _real(self, "alpha", -1, low_open=True)
        _instance(self, "item_bias", (bool,))


#: the early-stopping metric of explicit-rating families that is not a ranking metric
RMSE = "rmse"


@dataclass(frozen=True)
class EarlyStopping:
    """Early stopping of a trained family on `fit`'s validation set (MFSpec, IALSSpec, MFRMSESpec,
    AllRankSpec: their field early_stopping).

    every: evaluation interval in the family's budget unit, sampled pairs for MFSpec (⌈every /
    nnz(train)⌉ epochs) and ALS sweeps for the others; the metric is also evaluated after the last
    step of the spec's own budget (`pairs` / `sweeps`, the maximum). metric: a
    `simrec.metrics.evaluate` name (e.g. "ndcg@10"; user mean over the validation users, training
    items excluded; higher is better) or "rmse" (explicit-rating families only: √mean (r − r̂)²
    over the validation ratings; lower is better). relevant_rating: explicit-rating families with
    a ranking metric count the validation ratings >= relevant_rating as relevant (None: every
    validation rating); None for the positives families and "rmse". Training stops after
    `patience` evaluations in a row without a strict improvement, and `fit` returns the parameters
    of the best evaluation (the earliest among equals) with the curve ((budget, metric), ...).
    """
    every: int
    metric: str = "ndcg@10"
    patience: int = 3
    relevant_rating: float | None = None

    def __post_init__(self):
        _integer(self, "every", 1)
        _integer(self, "patience", 1)
        if not isinstance(self.metric, str):
            raise validate.ArgumentTypeError(f"EarlyStopping.metric must be a metric name such as "
                                             f"'ndcg@10' or 'rmse', got "
                                             f"{type(self.metric).__name__}")
        if self.relevant_rating is not None:
            _real(self, "relevant_rating")
        if self.metric == RMSE:
            if self.relevant_rating is not None:
                raise ValueError(f"EarlyStopping.relevant_rating is {self.relevant_rating:g} but "
                                 f"metric 'rmse' uses every validation rating; leave "
                                 f"relevant_rating=None or choose a ranking metric")
            return
        # the metrics module's own parser names the valid metrics; a 1 x 2 problem is enough
        metrics.evaluate(np.zeros((1, 2), np.float32), np.array([[True, False]]),
                         metrics=(self.metric,))


def _early_stopping_field(spec, *, ratings: bool) -> None:
    """spec.early_stopping is None or an `EarlyStopping` that fits the family: "rmse" and
    relevant_rating need explicit ratings (ratings=True)."""
    _instance(spec, "early_stopping", (EarlyStopping,), optional=True)
    rule, name = spec.early_stopping, type(spec).__name__
    if rule is None or ratings:
        return
    if rule.metric == RMSE:
        raise ValueError(f"{name}.early_stopping.metric is 'rmse', which needs explicit ratings "
                         f"(MFRMSESpec, AllRankSpec); {name} is trained on positives: use a "
                         f"ranking metric such as 'ndcg@10'")
    if rule.relevant_rating is not None:
        raise ValueError(f"{name}.early_stopping.relevant_rating is {rule.relevant_rating:g}, but "
                         f"{name} is trained on positives and every validation positive is "
                         f"relevant; leave relevant_rating=None")


@dataclass(frozen=True)
class MFSpec:
    """MF f(u, i) = <θᵤ, θᵢ> + bᵢ trained on sampled (u, i⁺) pairs (`simrec.models.train`).

    objective: `OptADG` (MF-ADG, Lim Alg. 1) or `MFAUC` (the AUC hinge), which also hold dim and
    init_scale; optimizer: a name in `OPTIMIZERS`, applied row-sparsely with learning_rate; l2: λ of
    the step's loss; batch_size: pairs per step. fold_in: how users given by a history are scored
    (None: they cannot be). early_stopping: None, or `EarlyStopping` (then `fit` needs validation).
    """
    objective: OptADG | MFAUC
    l2: float
    learning_rate: float
    optimizer: str = "adagrad"
    batch_size: int = 256
    fold_in: FoldIn | None = None
    early_stopping: EarlyStopping | None = None

    def __post_init__(self):
        _instance(self, "objective", (OptADG, MFAUC))
        _real(self, "l2", 0)
        _real(self, "learning_rate", 0)
        validate.choice("MFSpec.optimizer", self.optimizer, tuple(OPTIMIZERS))
        _integer(self, "batch_size", 1)
        _instance(self, "fold_in", (FoldIn,), optional=True)
        _early_stopping_field(self, ratings=False)


@dataclass(frozen=True)
class SVDSpec:
    """Rank-dim truncated SVD of the binary training matrix (`simrec.models.svd`; dim < min(U, I))."""
    dim: int

    def __post_init__(self):
        _integer(self, "dim", 1)


@dataclass(frozen=True)
class IALSSpec:
    """iALS / WMF (`simrec.models.ials`): rank dim, ridge l2 > 0, weight unobserved_weight (w₀) on
    unobserved pairs and 1 + alpha on observed ones, `sweeps` ALS sweeps from N(0, init_scale²)
    (the maximum with early_stopping: None, or `EarlyStopping` on validation positives)."""
    dim: int
    l2: float
    unobserved_weight: float = 0.1
    alpha: float = 0.0
    sweeps: int = 10
    init_scale: float = 0.1
    early_stopping: EarlyStopping | None = None

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _real(self, "unobserved_weight", 0)
        _real(self, "alpha", -1, low_open=True)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)
        _early_stopping_field(self, ratings=False)


@dataclass(frozen=True)
class EASESpec:
    """EASE^R (`simrec.models.ease`) with ridge λ = l2 > 0."""
    l2: float

    def __post_init__(self):
        _real(self, "l2", 0, low_open=True)


@dataclass(frozen=True)
class KUNNSpec:
    """KUNN (`simrec.models.kunn`) with Ku = user_k user and Ki = item_k item neighbours."""
    user_k: int
    item_k: int

    def __post_init__(self):
        _integer(self, "user_k", 1)
        _integer(self, "item_k", 1)


@dataclass(frozen=True)
class ItemKNNSpec:
    """Item-kNN with cosine similarity and k neighbours per item (`simrec.models.item_knn`)."""
    k: int

    def __post_init__(self):
        _integer(self, "k", 1)


@dataclass(frozen=True)
class PopularitySpec:
    """Popularity: every user gets the items' training counts (`simrec.models.popularity`)."""


@dataclass(frozen=True)
class MFRMSESpec:
    """MF-RMSE on explicit ratings (`simrec.models.explicit.mf_rmse`): rank dim, λ = l2, `sweeps`
    ALS sweeps from N(0, init_scale²) (the maximum with early_stopping: None, or `EarlyStopping`
    on validation ratings); offset r₀ = the mean training rating; with biases, a user and an item
    bias too (Koren et al.'s biased MF; parameters of rank dim + 2)."""
    dim: int = 50
    l2: float = 0.07
    sweeps: int = 10
    init_scale: float = 0.1
    early_stopping: EarlyStopping | None = None
    biases: bool = False

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)
        _early_stopping_field(self, ratings=True)
        _instance(self, "biases", (bool,))


@dataclass(frozen=True)
class AllRankSpec:
    """Steck's AllRank on explicit ratings (`simrec.models.explicit.allrank`): every missing rating
    imputed as `imputed` with weight missing_weight in (0, 1]; rank dim, λ = l2, `sweeps` sweeps
    (the maximum with early_stopping: None, or `EarlyStopping` on validation ratings)."""
    dim: int = 50
    l2: float = 0.04
    imputed: float = 2.0
    missing_weight: float = 0.005
    sweeps: int = 10
    init_scale: float = 0.1
    early_stopping: EarlyStopping | None = None

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _real(self, "imputed")
        _real(self, "missing_weight", 0, low_open=True, high=1)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)
        _early_stopping_field(self, ratings=True)


Spec = (MFSpec | SVDSpec | IALSSpec | EASESpec | KUNNSpec | ItemKNNSpec | PopularitySpec
        | MFRMSESpec | AllRankSpec)
#: every model family's spec type
SPECS = (MFSpec, SVDSpec, IALSSpec, EASESpec, KUNNSpec, ItemKNNSpec, PopularitySpec, MFRMSESpec,
         AllRankSpec)


def _check_spec(spec) -> None:
    if not isinstance(spec, SPECS):
        raise validate.ArgumentTypeError(
            f"spec must be a model spec ({', '.join(t.__name__ for t in SPECS)}), got "
            f"{type(spec).__name__}")


def _canonical(value) -> str:
    """Text that determines a spec's value: class names, field names and values; numbers as
    floats (so 1 and 1.0, equal fields, give the same text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ",".join(f"{f.name}={_canonical(getattr(value, f.name))}"
                         for f in dataclasses.fields(value))
        return f"{type(value).__name__}({inner})"
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return repr(float(value))
    if isinstance(value, tuple):
        return "(" + ",".join(_canonical(v) for v in value) + ")"
    raise validate.ArgumentTypeError(f"spec field values must be numbers, strings, None, tuples or "
                                     f"specs, got {type(value).__name__}")


def spec_id(spec: Spec) -> str:
    """Stable identifier of a spec's value: ``"<class>-<16 hex digits of SHA-256>"`` over its class and
    field names and values (nested specs included). Equal specs get equal ids, in any process."""
    _check_spec(spec)
    digest = hashlib.sha256(_canonical(spec).encode()).hexdigest()[:16]
    return f"{type(spec).__name__}-{digest}"


# ---- fitted models --------------------------------------------------------------------------

@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Model:
    """A fitted model: its spec (static) and parameters — `MF` (MF, SVD, iALS, popularity, MF-RMSE,
    AllRank), `EASE`, `KUNN` or `ItemKNN`. curve: the validation curve of early stopping,
    ((budget used: sampled pairs for MFSpec, sweeps for the ALS families, metric), ...), empty
    without it."""
    spec: Spec = field(metadata=dict(static=True))
    params: Any
    curve: tuple[tuple[int, float], ...] = field(default=(), metadata=dict(static=True))


def best_checkpoint(model: Model) -> tuple[int, float] | None:
    """(budget, value) of the checkpoint early stopping returned: the first best point of
    `model.curve` (the lowest for ``EarlyStopping.metric == "rmse"``, the highest otherwise, as
    the stopping rule keeps it); None for a model fitted without early stopping."""
    if not model.curve:
        return None
    sign = -1.0 if model.spec.early_stopping.metric == RMSE else 1.0
    budget, value = max(model.curve, key=lambda point: sign * point[1])   # max keeps the first
    return int(budget), float(value)


@dataclass(frozen=True, eq=False)
class _RateInState:
    """The optax transformation ``OPTIMIZERS[name](learning_rate)`` with its rate kept in its state
    (`optax.inject_hyperparams`: an f32[] the update reads, bit-identical to the rate as a
    constant). Equal, and hash-equal, for every rate of one name: the jitted epoch takes the
    optimizer as a static argument, so it compiles once per optimizer and data shape instead of
    once per rate (a few seconds per fit of a grid)."""
    name: str
    learning_rate: float

    def _transformation(self) -> optax.GradientTransformation:
        return optax.inject_hyperparams(OPTIMIZERS[self.name])(learning_rate=self.learning_rate)

    def init(self, params):
        return self._transformation().init(params)

    def update(self, updates, state, params=None):
        return self._transformation().update(updates, state, params)

    def __eq__(self, other) -> bool:
        return isinstance(other, _RateInState) and other.name == self.name

    def __hash__(self) -> int:
        return hash((_RateInState, self.name))


def _optimizer(name: str, learning_rate: float) -> _RateInState:
    """The optimizer of an MFSpec fit (`_RateInState`): every fit with the same optimizer name
    reuses the compiled epoch, whatever its rate."""
    return _RateInState(name, learning_rate)


def _require_key(key, spec) -> None:
    if key is None:
        raise ValueError(f"key is None but {type(spec).__name__} starts from random parameters; "
                         f"pass a jax.random key")


def _no_budget(spec, pairs, validation) -> None:
    """Families without sampled pairs reject `pairs`; `validation` goes only with early stopping
    (the ALS families' spec.early_stopping), the other families reject it."""
    name = type(spec).__name__
    if pairs is not None:
        own = "its field `sweeps`" if hasattr(spec, "sweeps") else "none (closed form)"
        raise ValueError(f"pairs is the budget of sampled-pair trainers (MFSpec); "
                         f"{name}'s budget is {own}: leave pairs=None")
    if validation is not None and getattr(spec, "early_stopping", None) is None:
        fix = (f"set {name}.early_stopping=EarlyStopping(...) or leave validation=None"
               if hasattr(spec, "early_stopping") else
               f"{name} does not use it: leave validation=None")
        raise ValueError(f"validation is only used for early stopping (the early_stopping field "
                         f"of MFSpec, IALSSpec, MFRMSESpec and AllRankSpec); {fix}")


def fit(key: jax.Array | None, spec: Spec, train, *, validation=None, pairs: int | None = None
        ) -> Model:
    """Fit the model family of `spec`'s type to `train` (module docstring).

    key: jax.random key (None allowed for deterministic families); train: bool [U, I] positives
    (scipy.sparse or dense; explicit-rating specs: the ratings); pairs: sampled (u, i⁺) pairs of
    an MFSpec (required there, an error elsewhere); validation: bool [U, I] held-out positives
    (explicit-rating specs: held-out ratings [U, I]) of the training users, required with and
    only with spec.early_stopping. Returns `Model`.
    """
    _check_spec(spec)
    return _fit(spec, key, train, validation, pairs)


@functools.singledispatch
def _fit(spec, key, train, validation, pairs):
    raise AssertionError(f"no trainer registered for {type(spec).__name__}")


def _mf_budget(spec: MFSpec, key, train, validation, pairs):
    """Validated arguments of an MFSpec fit: (train CSR, epochs = ⌈pairs / nnz(train)⌉, validation
    CSR or None)."""
    _require_key(key, spec)
    if pairs is None:
        raise ValueError("MFSpec is trained on sampled (u, i⁺) pairs: pass the budget, e.g. "
                         "pairs=400_000")
    pairs = validate.integer("pairs", pairs, low=0)
    csr = as_positive_csr(train)
    if spec.early_stopping is None:
        if validation is not None:
            raise ValueError("validation is only used for early stopping; set "
                             "MFSpec.early_stopping=EarlyStopping(...) or leave validation=None")
    else:
        validation = _validation(spec, validation, csr, as_positive_csr,
                                 "the held-out positives (bool [U, I])")
    return csr, -(-pairs // csr.nnz), validation


@_fit.register
def _(spec: MFSpec, key, train, validation, pairs):
    csr, epochs, validation = _mf_budget(spec, key, train, validation, pairs)
    optimizer = _optimizer(spec.optimizer, spec.learning_rate)
    if spec.early_stopping is None:
        params = training.train(key, spec.objective, csr, epochs=epochs,
                                batch_size=spec.batch_size, optimizer=optimizer, l2=spec.l2)
        return Model(spec, params)
    run = training.train_epochs(key, spec.objective, csr, batch_size=spec.batch_size,
                                optimizer=optimizer, l2=spec.l2)
    rule = spec.early_stopping
    params, curve = _early_stopping(((state.pairs, state.params) for state in run), rule, epochs,
                                    -(-rule.every // csr.nnz),
                                    _ranking_value(rule.metric, validation, csr))
    return Model(spec, params, curve)


def _fit_mf_grid(key, specs: list[MFSpec], train, validation, pairs) -> list[Model]:
    """MFSpecs equal but for l2 and learning_rate, trained together (`training.train_epochs_grid`:
    one vmapped epoch for all), each early-stopped on its own curve. Equals, up to float rounding,
    `[fit(key, spec, ...) for spec in specs]`."""
    first = specs[0]
    csr, epochs, validation = _mf_budget(first, key, train, validation, pairs)
    run = training.train_epochs_grid(key, first.objective, csr, batch_size=first.batch_size,
                                     make_optimizer=OPTIMIZERS[first.optimizer],
                                     l2s=[s.l2 for s in specs],
                                     learning_rates=[s.learning_rate for s in specs])
    if first.early_stopping is None:
        final = next(itertools.islice(run, epochs, None)).params
        return [Model(spec, training.member(final, m)) for m, spec in enumerate(specs)]
    rule = first.early_stopping
    stopped = _early_stopping_grid(((state.pairs, state.params) for state in run), rule, epochs,
                                   -(-rule.every // csr.nnz),
                                   _ranking_value(rule.metric, validation, csr), len(specs))
    return [Model(spec, params, curve) for spec, (params, curve) in zip(specs, stopped)]


class _Stopper:
    """The early-stopping state of one run under `rule`: the best evaluated params so far (the
    earliest among equals; initially `initial`), the curve ((budget, value), ...), and whether
    rule.patience evaluations in a row brought no strict improvement."""

    def __init__(self, rule: EarlyStopping, initial):
        self.sign = -1.0 if rule.metric == RMSE else 1.0
        self.patience, self.best, self.best_value = rule.patience, initial, -math.inf
        self.since, self.curve, self.stopped = 0, [], False

    def record(self, budget, current: float, params) -> None:
        if math.isnan(current):
            raise ValueError("validation has no positives outside train, so the early-stopping "
                             "metric is undefined; pass held-out positives of the training users "
                             "(explicit ratings: some >= EarlyStopping.relevant_rating)")
        self.curve.append((budget, current))
        if self.sign * current > self.best_value:
            self.best, self.best_value, self.since = params, self.sign * current, 0
        else:
            self.since += 1
            self.stopped = self.since >= self.patience


def _early_stopping_grid(run, rule: EarlyStopping, steps: int, every: int, value, members: int):
    """`_early_stopping` of `members` runs stacked on a leading axis (`training.train_epochs_grid`):
    each member is evaluated and stopped on its own curve; training goes on while some member is
    still running (stopped members keep training, unevaluated). Returns [(best params, curve)]."""
    _, initial = next(run)
    stoppers = [_Stopper(rule, training.member(initial, m)) for m in range(members)]
    for step, (budget, params) in enumerate(itertools.islice(run, steps), start=1):
        if step % every and step != steps:
            continue
        for m, stopper in enumerate(stoppers):
            if not stopper.stopped:
                current = training.member(params, m)
                stopper.record(budget, value(current), current)
        if all(stopper.stopped for stopper in stoppers):
            break
    return [(stopper.best, tuple(stopper.curve)) for stopper in stoppers]


def _early_stopping(run, rule: EarlyStopping, steps: int, every: int, value):
    """Early stopping of any trainer under `rule` (the one loop of every family).

    run: iterator of (budget used, params), first the initial parameters, then the state after
    each training step (an MF epoch, an ALS sweep); steps: the most steps to take; every: steps
    between evaluations (also after step `steps`); value(params) -> float: the validation metric,
    lower is better for "rmse", higher otherwise. Stops after rule.patience evaluations in a row
    without a strict improvement. Returns (the best evaluated params, the earliest among equals,
    or the initial ones when steps = 0; ((budget, value), ...) of every evaluation)."""
    _, initial = next(run)
    stopper = _Stopper(rule, initial)
    for step, (budget, params) in enumerate(itertools.islice(run, steps), start=1):
        if step % every and step != steps:
            continue
        stopper.record(budget, value(params), params)
        if stopper.stopped:
            break
    return stopper.best, tuple(stopper.curve)


def _ranking_value(metric: str, relevant, train):
    """params -> the user mean of `metric` of `mf.scores(params)` (relevant, train: bool CSR
    [U, I]; training items excluded), counted on the low-rank factors (`metrics.Factors`)."""
    def value(params) -> float:
        factors = metrics.Factors(params.user, params.item, params.item_bias)
        return metrics.mean(metrics.evaluate(factors, relevant, exclude=train,
                                             metrics=(metric,))[metric])
    return value


def _rmse_value(ratings):
    """params -> √mean (r_ui − r̂_ui)² over the stored entries of ratings (f64 CSR [U, I]),
    r̂ = `mf.scores`."""
    users = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    items = ratings.indices

    def value(params) -> float:
        user, item = (np.asarray(x, np.float64) for x in (params.user, params.item))
        predicted = (np.einsum("nk,nk->n", user[users], item[items])
                     + np.asarray(params.item_bias, np.float64)[items])
        return float(np.sqrt(np.mean((ratings.data - predicted) ** 2)))
    return value


def _validation(spec, validation, train, convert, what: str):
    """The validation matrix of spec.early_stopping, converted like train (`convert`), of the
    same shape."""
    if validation is None:
        raise ValueError(f"{type(spec).__name__}.early_stopping needs validation: pass {what} of "
                         f"the training users")
    validation = convert(validation, "validation")
    if validation.shape != train.shape:
        raise ValueError(f"validation has shape {validation.shape} but train has {train.shape}; "
                         f"both hold the same users and items")
    return validation


def _sweeps_model(spec, run, value) -> Model:
    """An ALS family fitted under spec.early_stopping: `run` yields the initial parameters, then
    those after every sweep (`ials.ials_sweeps`, `explicit.weighted_als_sweeps`)."""
    params, curve = _early_stopping(enumerate(run), spec.early_stopping, spec.sweeps,
                                    spec.early_stopping.every, value)
    return Model(spec, params, curve)


@_fit.register
def _(spec: SVDSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, svd.svd(train, spec.dim))


@_fit.register
def _(spec: IALSSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    _require_key(key, spec)
    settings = dict(dim=spec.dim, l2=spec.l2, unobserved_weight=spec.unobserved_weight,
                    alpha=spec.alpha, init_scale=spec.init_scale)
    if spec.early_stopping is None:
        return Model(spec, ials.ials(key, train, iterations=spec.sweeps, **settings))
    train = as_positive_csr(train)
    validation = _validation(spec, validation, train, as_positive_csr,
                             "the held-out positives (bool [U, I])")
    return _sweeps_model(spec, ials.ials_sweeps(key, train, **settings),
                         _ranking_value(spec.early_stopping.metric, validation, train))


@_fit.register
def _(spec: EASESpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, ease.ease(train, spec.l2))


@_fit.register
def _(spec: KUNNSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, knn.kunn(train, spec.user_k, spec.item_k))


@_fit.register
def _(spec: ItemKNNSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, knn.item_knn(train, spec.k))


@_fit.register
def _(spec: PopularitySpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, popularity.popularity(train))


@_fit.register
def _(spec: MFRMSESpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    _require_key(key, spec)
    settings = dict(dim=spec.dim, l2=spec.l2, init_scale=spec.init_scale, biases=spec.biases)
    if spec.early_stopping is None:
        return Model(spec, explicit.mf_rmse(key, train, iterations=spec.sweeps, **settings))
    return _explicit_model(spec, train, validation,
                           functools.partial(explicit.mf_rmse_sweeps, key, **settings))


@_fit.register
def _(spec: AllRankSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    _require_key(key, spec)
    settings = dict(dim=spec.dim, l2=spec.l2, imputed=spec.imputed,
                    missing_weight=spec.missing_weight, init_scale=spec.init_scale)
    if spec.early_stopping is None:
        return Model(spec, explicit.allrank(key, train, iterations=spec.sweeps, **settings))
    return _explicit_model(spec, train, validation,
                           functools.partial(explicit.allrank_sweeps, key, **settings))


def _explicit_model(spec, train, validation, sweeps) -> Model:
    """An explicit-rating family fitted under spec.early_stopping on the validation ratings:
    "rmse" on all of them, a ranking metric with the ratings >= rule.relevant_rating (all when
    None) relevant and the rated training items excluded. sweeps(ratings) -> the sweep iterator."""
    rule = spec.early_stopping
    train = explicit.as_rating_csr(train)
    validation = _validation(spec, validation, train, explicit.as_rating_csr,
                             "the held-out ratings [U, I]")
    if rule.metric == RMSE:
        value = _rmse_value(validation)
    else:
        relevant = (np.ones(validation.nnz, bool) if rule.relevant_rating is None
                    else validation.data >= rule.relevant_rating)
        value = _ranking_value(rule.metric, _stored(validation, relevant),
                               _stored(train, np.ones(train.nnz, bool)))
    return _sweeps_model(spec, sweeps(train), value)


def _stored(csr, keep):
    """bool CSR [U, I] of the stored entries of csr where keep (bool[nnz])."""
    return as_positive_csr(sp.csr_matrix((keep, csr.indices, csr.indptr), shape=csr.shape),
                           allow_empty=True)


def fit_grid(key: jax.Array | None, specs: Sequence[Spec], train, *, validation=None,
             pairs: int | None = None) -> list[Model]:
    """`[fit(key, spec, train, validation=validation, pairs=pairs) for spec in specs]`, with the
    same parameters, sharing work within a family: all EASESpec share one eigendecomposition
    (`ease.ease_grid`), all KUNNSpec one similarity pass per side (`knn.kunn_grid`), and MFSpecs
    that differ only in l2 and learning_rate train together in one vmapped epoch
    (`training.train_epochs_grid`), each early-stopped on its own validation curve (equal to
    fitting each alone up to float rounding; the sampled pairs are drawn once for all; members
    that stopped keep training until the last one stops, so with early stopping this can be slower
    than fitting one by one). Every spec
    gets the same key (grid members start from the same initial parameters, as Lim §6)."""
    specs = list(specs)
    for spec in specs:
        _check_spec(spec)
    fitted: list[Model | None] = [None] * len(specs)
    shared = {EASESpec: [i for i, s in enumerate(specs) if type(s) is EASESpec],
              KUNNSpec: [i for i, s in enumerate(specs) if type(s) is KUNNSpec]}
    for members in shared.values():
        if members:
            _no_budget(specs[members[0]], pairs, validation)
    if shared[EASESpec]:
        members = shared[EASESpec]
        for i, params in zip(members, ease.ease_grid(train, [specs[i].l2 for i in members])):
            fitted[i] = Model(specs[i], params)
    if shared[KUNNSpec]:
        members = shared[KUNNSpec]
        grid = knn.kunn_grid(train, sorted({specs[i].user_k for i in members}),
                             sorted({specs[i].item_k for i in members}))
        for i in members:
            fitted[i] = Model(specs[i], grid[(specs[i].user_k, specs[i].item_k)])
    groups: dict[MFSpec, list[int]] = {}    # MFSpecs equal but for l2 and learning_rate
    for i, spec in enumerate(specs):
        if type(spec) is MFSpec:
            groups.setdefault(dataclasses.replace(spec, l2=0.0, learning_rate=0.0), []).append(i)
    for members in groups.values():
        if len(members) > 1:
            for i, model in zip(members, _fit_mf_grid(key, [specs[i] for i in members], train,
                                                      validation, pairs)):
                fitted[i] = model
    return [model if model is not None else fit(key, spec, train, validation=validation, pairs=pairs)
            for spec, model in zip(specs, fitted)]


# ---- scoring --------------------------------------------------------------------------------

def score(model: Model, users, history=None):
    """Scores of every item for a block of users.  Returns f32[B, I].

    users: int[B] rows of the training matrix, or None when `history` gives new users. history:
    None, or scipy.sparse [B, I] of the B users' known items (explicit-rating families: their
    ratings), one row per user, rows may be empty: the users are then scored from it with the
    item side of the model fixed (module docstring), e.g. users held out of training; with both,
    the history replaces the training row of each user (KUNN then keeps a user out of its own
    neighbours, so a user's training row scores as without history). The result is a jax.Array
    for the JAX-scored families (MF factors, EASE) and a numpy array otherwise; without history
    MF-factor models are jit-friendly (a traced `users` skips the host range check).
    """
    if not isinstance(model, Model):
        raise validate.ArgumentTypeError(f"model must be a Model from simrec.models.fit, got "
                                         f"{type(model).__name__}")
    if history is None:
        if users is None:
            raise ValueError("users is None and history is None: pass training rows as users, or "
                             "the histories of new users as history")
        return _score(model.spec, model.params, users, None)
    if not hasattr(history, "shape") or len(history.shape) != 2:
        raise ValueError("history must be a scipy.sparse matrix [users, items], one row per user")
    if users is not None:
        users = check_users(users, _n_users(model.params))
        if len(users) != history.shape[0]:
            raise ValueError(f"users has {len(users)} entries but history has {history.shape[0]} "
                             f"rows; pass one row per user (or users=None for new users)")
    return _score(model.spec, model.params, users, history)


def _n_users(params) -> int:
    return params.user.shape[0] if isinstance(params, mf.MF) else params.train.shape[0]


@functools.singledispatch
def _score(spec, params, users, history):
    raise AssertionError(f"no scorer registered for {type(spec).__name__}")


def _fold_in_scores(params: mf.MF, history, *, l2: float, unobserved_weight: float, alpha: float,
                    item_bias: bool) -> np.ndarray:
    """x·θᵢ (+ bᵢ) with x the ridge fold-in (`ials.fold_in`) of each history row.  f32[B, I]."""
    item = np.asarray(params.item)
    users = np.asarray(ials.fold_in(item, history, l2, unobserved_weight=unobserved_weight,
                                    alpha=alpha))
    scores = users @ item.T
    return scores + np.asarray(params.item_bias) if item_bias else scores


@_score.register
def _(spec: MFSpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    if spec.fold_in is None:
        raise ValueError("this MFSpec has fold_in=None, so users cannot be scored from a history; "
                         "set MFSpec.fold_in=FoldIn(l2=...) or pass history=None")
    rule = spec.fold_in
    return _fold_in_scores(params, history, l2=rule.l2, unobserved_weight=rule.unobserved_weight,
                           alpha=rule.alpha, item_bias=rule.item_bias)


@_score.register
def _(spec: IALSSpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    return _fold_in_scores(params, history, l2=spec.l2, unobserved_weight=spec.unobserved_weight,
                           alpha=spec.alpha, item_bias=False)


@_score.register
def _(spec: SVDSpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    item = np.asarray(params.item)                  # V_k; a training row x has U_k S_k = x V_k
    history = as_history_csr(history, item.shape[0]).astype(np.float32)
    return np.asarray(history @ item) @ item.T


@_score.register
def _(spec: PopularitySpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    counts = np.asarray(params.item_bias)
    return np.broadcast_to(counts, (as_history_csr(history, counts.shape[0]).shape[0],
                                    counts.shape[0]))


def _rating_fold_in_scores(params: mf.MF, history, *, l2: float, offset: float, imputed: float,
                           missing_weight: float) -> np.ndarray:
    """r₀ + x·θᵢ with x the weighted ridge fold-in (`explicit.fold_in_ratings`) of each row of
    ratings.  f32[B, I]."""
    item = np.asarray(params.item)
    users = np.asarray(explicit.fold_in_ratings(item, history, l2=l2, offset=offset,
                                                imputed=imputed, missing_weight=missing_weight))
    return users @ item.T + np.asarray(params.item_bias)


@_score.register
def _(spec: MFRMSESpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    # r₀ as the model stores it (f32); training solved with the float64 mean rating
    offset = float(params.item_bias[0])
    if not spec.biases:
        return _rating_fold_in_scores(params, history, l2=spec.l2, offset=offset, imputed=0.0,
                                      missing_weight=0.0)
    item, item_bias = explicit.biased_parts(params)
    users = np.asarray(explicit.fold_in_ratings(item, history, l2=spec.l2, offset=offset,
                                                item_bias=item_bias), np.float64)
    return np.asarray(users @ item.T + item_bias + offset, np.float32)


@_score.register
def _(spec: AllRankSpec, params, users, history):
    if history is None:
        return mf.scores(params, users)
    return _rating_fold_in_scores(params, history, l2=spec.l2, offset=spec.imputed,
                                  imputed=spec.imputed, missing_weight=spec.missing_weight)


@_score.register
def _(spec: EASESpec, params, users, history):
    if history is None:
        return ease.ease_scores(params, users)
    return ease.ease_history_scores(params, history)


@_score.register
def _(spec: KUNNSpec, params, users, history):
    if history is None:
        return knn.kunn_scores(params, users)
    return knn.kunn_history_scores(params, history, users)


@_score.register
def _(spec: ItemKNNSpec, params, users, history):
    if history is None:
        return knn.item_knn_scores(params, users)
    return knn.item_knn_history_scores(params, history)

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
the key (None is allowed); the others need one. `validation` (bool [U, I] held-out positives of
the training users) drives `EarlyStopping` of MFSpec.
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

from simrec import metrics, validate
from simrec.models import ease, explicit, ials, knn, mf, popularity, svd, training
from simrec.models.positives import as_history_csr, as_positive_csr, check_users
from simrec.models.mf_auc import MFAUC
from simrec.models.opt_adg import OptADG

__all__ = ["OPTIMIZERS", "FoldIn", "EarlyStopping", "MFSpec", "SVDSpec", "IALSSpec", "EASESpec",
           "KUNNSpec", "ItemKNNSpec", "PopularitySpec", "MFRMSESpec", "AllRankSpec", "Spec", "SPECS",
           "Model", "spec_id", "fit", "fit_grid", "score"]

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


@dataclass(frozen=True)
class EarlyStopping:
    """Early stopping of a sampled-pair trainer on `fit`'s validation set: every ⌈every_pairs /
    nnz(train)⌉ epochs (and after the last) the user mean of `metric` (a `simrec.metrics.evaluate`
    name, e.g. "ndcg@10"; training items excluded) is computed on the validation positives; training
    stops after `patience` evaluations in a row without a strict improvement, and `fit` returns the
    parameters of the best evaluation (the earliest among equals)."""
    every_pairs: int
    metric: str = "ndcg@10"
    patience: int = 3

    def __post_init__(self):
        _integer(self, "every_pairs", 1)
        _integer(self, "patience", 1)
        if not isinstance(self.metric, str):
            raise validate.ArgumentTypeError(f"EarlyStopping.metric must be a metric name such as "
                                             f"'ndcg@10', got {type(self.metric).__name__}")
        # the metrics module's own parser names the valid metrics; a 1 x 2 problem is enough
        metrics.evaluate(np.zeros((1, 2), np.float32), np.array([[True, False]]),
                         metrics=(self.metric,))


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
        _instance(self, "early_stopping", (EarlyStopping,), optional=True)


@dataclass(frozen=True)
class SVDSpec:
    """Rank-dim truncated SVD of the binary training matrix (`simrec.models.svd`; dim < min(U, I))."""
    dim: int

    def __post_init__(self):
        _integer(self, "dim", 1)


@dataclass(frozen=True)
class IALSSpec:
    """iALS / WMF (`simrec.models.ials`): rank dim, ridge l2 > 0, weight unobserved_weight (w₀) on
    unobserved pairs and 1 + alpha on observed ones, `sweeps` ALS sweeps from N(0, init_scale²)."""
    dim: int
    l2: float
    unobserved_weight: float = 0.1
    alpha: float = 0.0
    sweeps: int = 10
    init_scale: float = 0.1

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _real(self, "unobserved_weight", 0)
        _real(self, "alpha", -1, low_open=True)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)


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
    ALS sweeps from N(0, init_scale²); offset r₀ = the mean training rating."""
    dim: int = 50
    l2: float = 0.07
    sweeps: int = 10
    init_scale: float = 0.1

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)


@dataclass(frozen=True)
class AllRankSpec:
    """Steck's AllRank on explicit ratings (`simrec.models.explicit.allrank`): every missing rating
    imputed as `imputed` with weight missing_weight in (0, 1]; rank dim, λ = l2, `sweeps` sweeps."""
    dim: int = 50
    l2: float = 0.04
    imputed: float = 2.0
    missing_weight: float = 0.005
    sweeps: int = 10
    init_scale: float = 0.1

    def __post_init__(self):
        _integer(self, "dim", 1)
        _real(self, "l2", 0, low_open=True)
        _real(self, "imputed")
        _real(self, "missing_weight", 0, low_open=True, high=1)
        _integer(self, "sweeps", 1)
        _real(self, "init_scale", 0)


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
    """Stable identifier of a spec's value: "<class>-<16 hex digits of SHA-256>" over its class and
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
    ((sampled pairs, metric), ...), empty without it."""
    spec: Spec = field(metadata=dict(static=True))
    params: Any
    curve: tuple[tuple[int, float], ...] = field(default=(), metadata=dict(static=True))


@functools.cache
def _optimizer(name: str, learning_rate: float) -> optax.GradientTransformation:
    """One optax object per (name, rate), so every fit with them reuses the compiled epoch."""
    return OPTIMIZERS[name](learning_rate)


def _require_key(key, spec) -> None:
    if key is None:
        raise ValueError(f"key is None but {type(spec).__name__} starts from random parameters; "
                         f"pass a jax.random key")


def _no_budget(spec, pairs, validation) -> None:
    """Families without sampled pairs and without early stopping reject both arguments."""
    if pairs is not None:
        own = "its field `sweeps`" if hasattr(spec, "sweeps") else "none (closed form)"
        raise ValueError(f"pairs is the budget of sampled-pair trainers (MFSpec); "
                         f"{type(spec).__name__}'s budget is {own}: leave pairs=None")
    if validation is not None:
        raise ValueError(f"validation is only used for early stopping (MFSpec.early_stopping); "
                         f"{type(spec).__name__} does not use it: leave validation=None")


def fit(key: jax.Array | None, spec: Spec, train, *, validation=None, pairs: int | None = None
        ) -> Model:
    """Fit the model family of `spec`'s type to `train` (module docstring).

    key: jax.random key (None allowed for deterministic families); train: bool [U, I] positives
    (scipy.sparse or dense; explicit-rating specs: the ratings); pairs: sampled (u, i⁺) pairs of
    an MFSpec (required there, an error elsewhere); validation: bool [U, I] held-out positives,
    only with MFSpec.early_stopping. Returns `Model`.
    """
    _check_spec(spec)
    return _fit(spec, key, train, validation, pairs)


@functools.singledispatch
def _fit(spec, key, train, validation, pairs):
    raise AssertionError(f"no trainer registered for {type(spec).__name__}")


@_fit.register
def _(spec: MFSpec, key, train, validation, pairs):
    _require_key(key, spec)
    if pairs is None:
        raise ValueError("MFSpec is trained on sampled (u, i⁺) pairs: pass the budget, e.g. "
                         "pairs=400_000")
    pairs = validate.integer("pairs", pairs, low=0)
    csr = as_positive_csr(train)
    epochs = -(-pairs // csr.nnz)
    optimizer = _optimizer(spec.optimizer, spec.learning_rate)
    if spec.early_stopping is None:
        if validation is not None:
            raise ValueError("validation is only used for early stopping; set "
                             "MFSpec.early_stopping=EarlyStopping(...) or leave validation=None")
        params = training.train(key, spec.objective, csr, epochs=epochs,
                                batch_size=spec.batch_size, optimizer=optimizer, l2=spec.l2)
        return Model(spec, params)
    if validation is None:
        raise ValueError("MFSpec.early_stopping needs validation: pass the held-out positives "
                         "(bool [U, I]) of the training users")
    validation = as_positive_csr(validation, "validation")
    if validation.shape != csr.shape:
        raise ValueError(f"validation has shape {validation.shape} but train has {csr.shape}; "
                         f"both hold the same users and items")
    run = training.train_epochs(key, spec.objective, csr, batch_size=spec.batch_size,
                                optimizer=optimizer, l2=spec.l2)
    params, curve = _early_stopping(run, spec.early_stopping, epochs, csr, validation)
    return Model(spec, params, curve)


def _early_stopping(run, rule: EarlyStopping, epochs: int, train, validation):
    """Consume the `training.Epoch` states of `run` up to `epochs` under `rule`.
    Returns (best params, ((pairs, metric), ...))."""
    every = -(-rule.every_pairs // train.nnz)
    state = next(run)                                     # the initial parameters
    best, best_value, since, curve = state.params, -math.inf, 0, []
    for state in itertools.islice(run, epochs):
        if state.epochs % every and state.epochs != epochs:
            continue
        values = metrics.evaluate(functools.partial(mf.scores, state.params), validation,
                                  exclude=train, metrics=(rule.metric,))[rule.metric]
        value = metrics.mean(values)
        if math.isnan(value):
            raise ValueError("validation has no positives outside train, so the early-stopping "
                             "metric is undefined; pass held-out positives of the training users")
        curve.append((state.pairs, value))
        if value > best_value:
            best, best_value, since = state.params, value, 0
        else:
            since += 1
            if since >= rule.patience:
                break
    return best, tuple(curve)


@_fit.register
def _(spec: SVDSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    return Model(spec, svd.svd(train, spec.dim))


@_fit.register
def _(spec: IALSSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    _require_key(key, spec)
    return Model(spec, ials.ials(key, train, dim=spec.dim, l2=spec.l2,
                                 unobserved_weight=spec.unobserved_weight, alpha=spec.alpha,
                                 iterations=spec.sweeps, init_scale=spec.init_scale))


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
    return Model(spec, explicit.mf_rmse(key, train, dim=spec.dim, l2=spec.l2,
                                        iterations=spec.sweeps, init_scale=spec.init_scale))


@_fit.register
def _(spec: AllRankSpec, key, train, validation, pairs):
    _no_budget(spec, pairs, validation)
    _require_key(key, spec)
    return Model(spec, explicit.allrank(key, train, dim=spec.dim, l2=spec.l2,
                                        imputed=spec.imputed, missing_weight=spec.missing_weight,
                                        iterations=spec.sweeps, init_scale=spec.init_scale))


def fit_grid(key: jax.Array | None, specs: Sequence[Spec], train, *, validation=None,
             pairs: int | None = None) -> list[Model]:
    """`[fit(key, spec, train, validation=validation, pairs=pairs) for spec in specs]`, with the
    same parameters, sharing work within a family: all EASESpec share one eigendecomposition
    (`ease.ease_grid`), all KUNNSpec one similarity pass per side (`knn.kunn_grid`). Every spec
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
    return _rating_fold_in_scores(params, history, l2=spec.l2, offset=float(params.item_bias[0]),
                                  imputed=0.0, missing_weight=0.0)


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

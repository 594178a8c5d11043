"""The one model API (simrec.models.api): specs, fit, score, fold-in through history, spec ids.

Every `fit` is checked bit for bit against the trainer it wraps, called as the studies call it
with the same key (so porting a study to the API cannot change its results), and every fold-in
through `score(..., history=...)` against the fold-in the studies compute by hand.
"""
import dataclasses
import hashlib
import math
import pickle

import jax
import numpy as np
import optax
import pytest
import scipy.sparse as sp

from simrec import metrics, models
from simrec.models import (SPECS, AllRankSpec, EarlyStopping, EASESpec, FoldIn, IALSSpec,
                           ItemKNNSpec, KUNNSpec, MFRMSESpec, MFSpec, Model, PopularitySpec,
                           SVDSpec, api, fit, fit_grid, score, spec_id)
from simrec.models.explicit import allrank, fold_in_ratings, mf_rmse

N_USERS, N_ITEMS = 40, 25
KEY = jax.random.key(3)
ADG = models.OptADG(dim=4, gamma=10.0, chunk_size=4, search_width=4)


def _positives(seed: int = 0, shape=(N_USERS, N_ITEMS), density: float = 0.25) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.random(shape) < density
    dense[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] = True   # no empty user
    return sp.csr_matrix(dense)


def _ratings(seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    observed = _positives(seed).toarray()
    return sp.csr_matrix(np.where(observed, rng.integers(1, 6, observed.shape), 0).astype(float))


TRAIN = _positives()
RATINGS = _ratings()
#: histories of 6 users not in the training data (strong generalisation), one of them empty
NEW = sp.csr_matrix(np.vstack([_positives(7, (5, N_ITEMS), 0.3).toarray(),
                               np.zeros((1, N_ITEMS), bool)]))
NEW_RATINGS = sp.csr_matrix(np.vstack([_ratings(7).toarray()[:5], np.zeros((1, N_ITEMS))]))

#: (spec, fit keyword arguments, training data) of every family
CASES = {
    "mf-adg": (MFSpec(ADG, l2=0.01, learning_rate=0.1, batch_size=32, fold_in=FoldIn(l2=1.0)),
               dict(pairs=1000), TRAIN),
    "mf-auc": (MFSpec(models.MFAUC(dim=4), l2=0.05, learning_rate=0.05, optimizer="sgd",
                      batch_size=16, fold_in=FoldIn(l2=2.0, unobserved_weight=0.05,
                                                    item_bias=True)),
               dict(pairs=700), TRAIN),
    "svd": (SVDSpec(dim=3), {}, TRAIN),
    "ials": (IALSSpec(dim=4, l2=1.0, unobserved_weight=0.05, alpha=0.5, sweeps=3), {}, TRAIN),
    "ease": (EASESpec(l2=5.0), {}, TRAIN),
    "kunn": (KUNNSpec(user_k=4, item_k=3), {}, TRAIN),
    "item-knn": (ItemKNNSpec(k=5), {}, TRAIN),
    "popularity": (PopularitySpec(), {}, TRAIN),
    "mf-rmse": (MFRMSESpec(dim=3, l2=0.1, sweeps=3), {}, RATINGS),
    "mf-rmse-biased": (MFRMSESpec(dim=3, l2=0.1, sweeps=3, biases=True), {}, RATINGS),
    "allrank": (AllRankSpec(dim=3, l2=0.05, imputed=2.0, missing_weight=0.05, sweeps=3), {},
                RATINGS),
}


#: the optimizers of the direct calls: fresh optax objects (so `fit`'s own cached ones are not
#: reused), one per rate so that each compiles its training epoch once
DIRECT = {"adagrad": optax.adagrad(0.1), "sgd": optax.sgd(0.05)}


@pytest.fixture(scope="module")
def fitted():
    return {name: fit(KEY, spec, data, **kwargs) for name, (spec, kwargs, data) in CASES.items()}


def test_cases_cover_every_family():
    assert {type(spec) for spec, _, _ in CASES.values()} == set(SPECS)


# ---- fit reproduces the trainers ------------------------------------------------------------

def _direct(name):
    """The trainer of each case called directly, as the studies call it today."""
    spec, kwargs, data = CASES[name]
    if name.startswith("mf-") and isinstance(spec, MFSpec):
        assert spec.learning_rate == {"adagrad": 0.1, "sgd": 0.05}[spec.optimizer]
        return models.train(KEY, spec.objective, data, epochs=-(-kwargs["pairs"] // data.nnz),
                            batch_size=spec.batch_size, optimizer=DIRECT[spec.optimizer],
                            l2=spec.l2)
    return {
        "svd": lambda: models.svd(data, spec.dim),
        "ials": lambda: models.ials(KEY, data, dim=spec.dim, l2=spec.l2,
                                    unobserved_weight=spec.unobserved_weight, alpha=spec.alpha,
                                    iterations=spec.sweeps),
        "ease": lambda: models.ease(data, spec.l2),
        "kunn": lambda: models.kunn(data, spec.user_k, spec.item_k),
        "item-knn": lambda: models.item_knn(data, spec.k),
        "popularity": lambda: models.popularity(data),
        "mf-rmse": lambda: mf_rmse(KEY, data, dim=spec.dim, l2=spec.l2, iterations=spec.sweeps),
        "mf-rmse-biased": lambda: mf_rmse(KEY, data, dim=spec.dim, l2=spec.l2, iterations=spec.sweeps,
                                          biases=True),
        "allrank": lambda: allrank(KEY, data, dim=spec.dim, l2=spec.l2, imputed=spec.imputed,
                                   missing_weight=spec.missing_weight, iterations=spec.sweeps),
    }[name]()


def _assert_same_params(got, expected):
    """Identical parameters: every array (sparse matrices compared entry for entry) bit for bit."""
    assert type(got) is type(expected)
    for f in dataclasses.fields(expected):
        a, b = getattr(got, f.name), getattr(expected, f.name)
        if sp.issparse(b):
            assert a.shape == b.shape and (a != b).nnz == 0 and a.dtype == b.dtype
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f.name)


@pytest.mark.parametrize("name", list(CASES))
def test_fit_reproduces_the_wrapped_trainer(fitted, name):
    model = fitted[name]
    assert isinstance(model, Model) and model.spec == CASES[name][0] and model.curve == ()
    _assert_same_params(model.params, _direct(name))


def test_pairs_map_to_epochs_as_the_studies_do():
    """pairs P -> ⌈P / nnz⌉ epochs (the epochs the studies report)."""
    spec = CASES["mf-adg"][0]
    for pairs in (TRAIN.nnz, TRAIN.nnz + 1, 2 * TRAIN.nnz):
        expected = models.train(KEY, ADG, TRAIN, epochs=-(-pairs // TRAIN.nnz), batch_size=32,
                                optimizer=DIRECT["adagrad"], l2=0.01)
        _assert_same_params(fit(KEY, spec, TRAIN, pairs=pairs).params, expected)
    start = models.train(KEY, ADG, TRAIN, epochs=0, batch_size=32, optimizer=DIRECT["adagrad"],
                         l2=0.01)
    _assert_same_params(fit(KEY, spec, TRAIN, pairs=0).params, start)


def test_fits_at_other_learning_rates_reuse_the_compiled_epoch_and_equal_the_trainer():
    """The rate lives in the optimizer's state, so fits of one optimizer at three rates compile the
    epoch once, and each is bit for bit the trainer with that rate as a constant."""
    from simrec.models import training

    spec = dataclasses.replace(CASES["mf-adg"][0], optimizer="sgd")
    rates, fitted, compiled = (0.3, 0.05, 0.3001), [], []
    for rate in rates:
        fitted.append(fit(KEY, dataclasses.replace(spec, learning_rate=rate), TRAIN, pairs=2 * TRAIN.nnz).params)
        compiled.append(training.train_epoch._cache_size())
    assert compiled[0] == compiled[-1]                      # the second and third rate compiled nothing
    for rate, got in zip(rates, fitted):
        expected = models.train(KEY, ADG, TRAIN, epochs=2, batch_size=32, optimizer=optax.sgd(rate), l2=0.01)
        _assert_same_params(got, expected)


def test_fit_grid_equals_single_fits():
    specs = [EASESpec(l2=50.0), KUNNSpec(3, 2), PopularitySpec(), EASESpec(l2=5.0),
             KUNNSpec(1, 4), ItemKNNSpec(k=3), KUNNSpec(3, 4)]
    grid = fit_grid(KEY, specs, TRAIN)
    assert [m.spec for m in grid] == specs
    for model, spec in zip(grid, specs):
        _assert_same_params(model.params, fit(KEY, spec, TRAIN).params)
    assert grid[0].params.eigenvectors is grid[3].params.eigenvectors      # one decomposition
    with pytest.raises(ValueError, match="pairs"):
        fit_grid(KEY, [EASESpec(l2=1.0)], TRAIN, pairs=10)


# ---- score ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_score_blocks_of_training_users_and_new_users(fitted, name):
    model = fitted[name]
    full = np.asarray(score(model, np.arange(N_USERS)))
    assert full.shape == (N_USERS, N_ITEMS) and full.dtype == np.float32
    assert np.all(np.isfinite(full))
    block = np.array([7, 0, 7, 39])
    np.testing.assert_array_equal(np.asarray(score(model, block)), full[block])
    new = NEW_RATINGS if isinstance(model.spec, (MFRMSESpec, AllRankSpec)) else NEW
    by_history = np.asarray(score(model, None, new))
    assert by_history.shape == (NEW.shape[0], N_ITEMS) and by_history.dtype == np.float32
    assert np.all(np.isfinite(by_history))


@pytest.mark.parametrize("name", ["ease", "item-knn", "kunn", "popularity", "svd", "ials",
                                  "mf-rmse", "mf-rmse-biased", "allrank"])
def test_training_rows_as_history_score_as_the_training_users(fitted, name):
    """A training user's own row as history gives the user's scores: exactly for the models that
    score histories (EASE, item-kNN, KUNN, popularity); for the factor models whose trained user
    vectors are the fold-in solve (iALS, MF-RMSE, AllRank) or the projection (SVD) up to a few
    float32 roundings (products in numpy vs XLA; MF-RMSE's r₀ enters the fold-in as stored, f32,
    while training used the float64 mean rating)."""
    model = fitted[name]
    users = np.array([3, 11, 0, 25])
    data = CASES[name][2]
    expected = np.asarray(score(model, users))
    got = np.asarray(score(model, users, data[users]))
    if name in ("ease", "item-knn", "kunn", "popularity"):
        np.testing.assert_array_equal(got, expected)
    else:
        ulps = 8 * np.finfo(np.float32).eps * np.abs(expected).max()
        np.testing.assert_allclose(got, expected, rtol=0, atol=ulps)


def test_mf_fold_in_equals_the_least_squares_fold_in(fitted):
    for name in ("mf-adg", "mf-auc"):
        model, rule = fitted[name], CASES[name][0].fold_in
        item = np.asarray(model.params.item)
        users = np.asarray(models.fold_in(item, NEW, rule.l2,
                                          unobserved_weight=rule.unobserved_weight,
                                          alpha=rule.alpha))
        expected = users @ item.T
        if rule.item_bias:
            expected = expected + np.asarray(model.params.item_bias)
        np.testing.assert_array_equal(score(model, None, NEW), expected)


def test_ials_fold_in_uses_the_model_weights(fitted):
    spec, model = CASES["ials"][0], fitted["ials"]
    item = np.asarray(model.params.item)
    users = np.asarray(models.fold_in(item, NEW, spec.l2, unobserved_weight=spec.unobserved_weight,
                                      alpha=spec.alpha))
    np.testing.assert_array_equal(score(model, None, NEW), users @ item.T)


def test_explicit_fold_in_equals_fold_in_ratings(fitted):
    for name in ("mf-rmse", "allrank"):
        spec, model = CASES[name][0], fitted[name]
        item = np.asarray(model.params.item)
        offset = float(model.params.item_bias[0])
        weights = (dict(imputed=spec.imputed, missing_weight=spec.missing_weight)
                   if name == "allrank" else {})
        users = np.asarray(fold_in_ratings(item, NEW_RATINGS, l2=spec.l2, offset=offset, **weights))
        np.testing.assert_array_equal(score(model, None, NEW_RATINGS),
                                      users @ item.T + np.asarray(model.params.item_bias))


def test_history_models_equal_the_fold_in_study_formulation(fitted):
    """EASE and item-kNN score new users by swapping their histories in for the training rows."""
    ease, knn = fitted["ease"].params, fitted["item-knn"].params
    rows = np.arange(NEW.shape[0])
    np.testing.assert_array_equal(
        score(fitted["ease"], None, NEW),
        models.ease_scores(dataclasses.replace(ease, train=NEW), rows))
    np.testing.assert_array_equal(
        score(fitted["item-knn"], None, NEW),
        models.item_knn_scores(dataclasses.replace(knn, train=NEW), rows))
    pop = np.asarray(fitted["popularity"].params.item_bias)
    np.testing.assert_array_equal(score(fitted["popularity"], None, NEW),
                                  np.broadcast_to(pop, NEW.shape))


def _inverse_root(count) -> float:
    return 0.0 if count == 0 else 1.0 / math.sqrt(count)


def test_kunn_new_users_match_brute_force(fitted):
    """KUNN of a new user h (module docstring of knn.py), training counts fixed, written out."""
    spec = CASES["kunn"][0]
    r, h = TRAIN.toarray().astype(float), NEW.toarray().astype(float)
    c_user, c_item = r.sum(axis=1), r.sum(axis=0)
    item_sim = np.array([[0.0 if i == j else sum(r[u, i] * r[u, j] * _inverse_root(c_user[u])
                                                 for u in range(N_USERS))
                          * _inverse_root(c_item[i]) * _inverse_root(c_item[j])
                          for j in range(N_ITEMS)] for i in range(N_ITEMS)])
    expected = np.zeros(h.shape)
    for b, row in enumerate(h):
        sim = np.array([sum(row[i] * r[v, i] * _inverse_root(c_item[i]) for i in range(N_ITEMS))
                        * _inverse_root(row.sum()) * _inverse_root(c_user[v])
                        for v in range(N_USERS)])
        ranked = sorted((-np.float32(s), v) for v, s in enumerate(sim) if s > 0)[:spec.user_k]
        for i in range(N_ITEMS):
            neighbours = sorted((-np.float32(s), j) for j, s in enumerate(item_sim[i])
                                if j != i and s > 0)[:spec.item_k]
            expected[b, i] = (sum(-s * r[v, i] * _inverse_root(c_item[i]) for s, v in ranked)
                              + sum(-s * row[j] * _inverse_root(row.sum()) for s, j in neighbours))
    np.testing.assert_allclose(score(fitted["kunn"], None, NEW), expected, atol=1e-6)


def test_score_is_jit_friendly_for_factor_models(fitted):
    model = fitted["mf-adg"]
    users = np.array([1, 5, 9])
    assert jax.tree.leaves(model) == jax.tree.leaves(model.params)       # the spec is static
    np.testing.assert_allclose(jax.jit(score)(model, users), score(model, users), rtol=1e-6)


@pytest.mark.parametrize("name", ["mf-adg", "ease", "kunn"])
def test_models_pickle(fitted, name):
    """Studies cache fitted models on disk (e.g. the scenarios' platforms)."""
    model = fitted[name]
    again = pickle.loads(pickle.dumps(model))
    assert again.spec == model.spec and spec_id(again.spec) == spec_id(model.spec)
    users = np.arange(6)
    np.testing.assert_array_equal(np.asarray(score(again, users)), np.asarray(score(model, users)))


def test_score_rejects_bad_input(fitted):
    model = fitted["ease"]
    with pytest.raises(ValueError, match="users is None"):
        score(model, None)
    with pytest.raises(ValueError, match=r"users must hold ids in \[0, 40\)"):
        score(model, np.array([40]))
    with pytest.raises(ValueError, match="one row per user"):
        score(model, np.array([0, 1]), TRAIN[:3])
    with pytest.raises(ValueError, match="same catalogue"):
        score(model, None, sp.csr_matrix((2, N_ITEMS + 1), dtype=bool))
    with pytest.raises(ValueError, match="history must be boolean"):
        score(model, None, RATINGS[:2])
    with pytest.raises(TypeError, match="Model"):
        score(model.params, np.array([0]))
    no_fold_in = Model(dataclasses.replace(CASES["mf-adg"][0], fold_in=None),
                       fitted["mf-adg"].params)
    with pytest.raises(ValueError, match="fold_in=FoldIn"):
        score(no_fold_in, None, NEW)


# ---- dispatch, validation and ids -----------------------------------------------------------

@pytest.mark.parametrize("not_a_spec", ["mf_adg", ADG, {"l2": 1.0}, None])
def test_fit_dispatches_on_spec_types_only(not_a_spec):
    with pytest.raises(TypeError, match="spec must be a model spec"):
        fit(KEY, not_a_spec, TRAIN)


def test_fit_argument_errors():
    mf = CASES["mf-adg"][0]
    with pytest.raises(ValueError, match="pass the budget"):
        fit(KEY, mf, TRAIN)
    with pytest.raises(ValueError, match="pairs must be an integer >= 0"):
        fit(KEY, mf, TRAIN, pairs=-1)
    with pytest.raises(ValueError, match="field `sweeps`"):
        fit(KEY, IALSSpec(dim=2, l2=1.0), TRAIN, pairs=100)
    with pytest.raises(ValueError, match="closed form"):
        fit(KEY, EASESpec(l2=1.0), TRAIN, pairs=100)
    with pytest.raises(ValueError, match="early_stopping"):
        fit(KEY, mf, TRAIN, pairs=100, validation=TRAIN)
    with pytest.raises(ValueError, match="early_stopping"):
        fit(KEY, SVDSpec(dim=2), TRAIN, validation=TRAIN)
    with pytest.raises(ValueError, match="needs validation"):
        fit(KEY, dataclasses.replace(mf, early_stopping=EarlyStopping(100)), TRAIN, pairs=100)
    with pytest.raises(ValueError, match="key is None"):
        fit(None, IALSSpec(dim=2, l2=1.0), TRAIN)
    with pytest.raises(ValueError, match="dim"):
        fit(None, SVDSpec(dim=N_ITEMS), TRAIN)
    fit(None, EASESpec(l2=1.0), TRAIN)                                   # deterministic: no key


@pytest.mark.parametrize("build, match", [
    (lambda: EASESpec(l2=0.0), r"EASESpec.l2 must be a finite number > 0"),
    (lambda: EASESpec(l2=float("nan")), r"EASESpec.l2"),
    (lambda: KUNNSpec(user_k=0, item_k=5), r"KUNNSpec.user_k must be an integer >= 1"),
    (lambda: ItemKNNSpec(k=2.5), r"ItemKNNSpec.k must be an integer"),
    (lambda: SVDSpec(dim=True), r"SVDSpec.dim must be an integer"),
    (lambda: IALSSpec(dim=4, l2=1.0, sweeps=0), r"IALSSpec.sweeps must be an integer >= 1"),
    (lambda: IALSSpec(dim=4, l2=1.0, alpha=-1.0), r"IALSSpec.alpha must be a finite number > -1"),
    (lambda: IALSSpec(dim=4, l2=1.0, unobserved_weight=-0.1), r"IALSSpec.unobserved_weight"),
    (lambda: MFSpec("adg", l2=0.1, learning_rate=0.1), r"MFSpec.objective must be OptADG or MFAUC"),
    (lambda: MFSpec(ADG, l2=-0.1, learning_rate=0.1), r"MFSpec.l2 must be a finite number >= 0"),
    (lambda: MFSpec(ADG, l2=0.1, learning_rate=0.1, optimizer="rmsprop"),
     r"MFSpec.optimizer must be one of 'adagrad', 'sgd', 'adam'"),
    (lambda: MFSpec(ADG, l2=0.1, learning_rate=0.1, batch_size=0), r"MFSpec.batch_size"),
    (lambda: MFSpec(ADG, l2=0.1, learning_rate=0.1, fold_in=1.0), r"MFSpec.fold_in must be FoldIn"),
    (lambda: FoldIn(l2=0.0), r"FoldIn.l2 must be a finite number > 0"),
    (lambda: FoldIn(l2=1.0, item_bias=1), r"FoldIn.item_bias must be bool"),
    (lambda: EarlyStopping(every=0), r"EarlyStopping.every must be an integer >= 1"),
    (lambda: EarlyStopping(every=10, metric="nope@3"), r"unknown metric 'nope@3'"),
    (lambda: EarlyStopping(every=10, metric="recall"), r"recall needs a cutoff"),
    (lambda: EarlyStopping(every=1, relevant_rating=float("nan")),
     r"EarlyStopping.relevant_rating must be a finite number"),
    (lambda: EarlyStopping(every=1, metric="rmse", relevant_rating=4.0),
     r"metric 'rmse' uses every validation rating; leave relevant_rating=None"),
    (lambda: IALSSpec(dim=4, l2=1.0, early_stopping=EarlyStopping(1, metric="rmse")),
     r"IALSSpec.early_stopping.metric is 'rmse', which needs explicit ratings .*'ndcg@10'"),
    (lambda: MFSpec(ADG, l2=0.1, learning_rate=0.1, early_stopping=EarlyStopping(1, "rmse")),
     r"MFSpec.early_stopping.metric is 'rmse'.* use a ranking metric"),
    (lambda: IALSSpec(dim=4, l2=1.0, early_stopping=EarlyStopping(1, relevant_rating=4.0)),
     r"IALSSpec.early_stopping.relevant_rating is 4.*leave relevant_rating=None"),
    (lambda: MFRMSESpec(early_stopping=1), r"MFRMSESpec.early_stopping must be EarlyStopping"),
    (lambda: MFRMSESpec(l2=0.0), r"MFRMSESpec.l2"),
    (lambda: AllRankSpec(missing_weight=0.0),
     r"AllRankSpec.missing_weight must be a finite number in \(0, 1\]"),
    (lambda: AllRankSpec(imputed=float("inf")), r"AllRankSpec.imputed"),
])
def test_specs_are_validated_when_built(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_specs_are_frozen_and_canonical():
    spec = IALSSpec(dim=np.int64(4), l2=1, sweeps=3)
    assert type(spec.dim) is int and type(spec.l2) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.l2 = 2.0


def test_spec_id_is_stable_and_value_based():
    # pinned: a changed id silently invalidates every cache address built from it
    assert spec_id(EASESpec(l2=300.0)) == "EASESpec-" + _sha("EASESpec(l2=300.0)")
    assert spec_id(CASES["mf-adg"][0]) == "MFSpec-" + _sha(
        "MFSpec(objective=OptADG(dim=4.0,gamma=10.0,init_scale=0.1,chunk_size=4.0,"
        "search_width=4.0,sampling='user'),l2=0.01,learning_rate=0.1,optimizer='adagrad',batch_size=32.0,"
        "fold_in=FoldIn(l2=1.0,unobserved_weight=0.1,alpha=0.0,item_bias=False),"
        "early_stopping=None)")
    assert spec_id(EASESpec(l2=300.0)) == "EASESpec-de3a12359c07c754"
    equal = [IALSSpec(dim=4, l2=1.0), IALSSpec(dim=np.int32(4), l2=1), IALSSpec(4, np.float64(1.0))]
    assert len({spec_id(s) for s in equal}) == 1 and len(set(equal)) == 1
    assert spec_id(MFSpec(models.OptADG(dim=4, gamma=100), l2=0.1, learning_rate=0.1)) == \
        spec_id(MFSpec(models.OptADG(dim=4, gamma=100.0), l2=0.1, learning_rate=0.1))
    different = [IALSSpec(dim=4, l2=1.0), IALSSpec(dim=4, l2=1.0, sweeps=11), IALSSpec(dim=5, l2=1.0),
                 EASESpec(l2=1.0), KUNNSpec(1, 2), KUNNSpec(2, 1), PopularitySpec(),
                 MFSpec(ADG, l2=0.1, learning_rate=0.1),
                 MFSpec(dataclasses.replace(ADG, gamma=20.0), l2=0.1, learning_rate=0.1),
                 MFSpec(models.MFAUC(dim=4), l2=0.1, learning_rate=0.1)]
    assert len({spec_id(s) for s in different}) == len(different)
    with pytest.raises(TypeError, match="spec must be a model spec"):
        spec_id(ADG)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- early stopping -------------------------------------------------------------------------

def _validation(seed=11) -> sp.csr_matrix:
    held = _positives(seed, density=0.2).toarray() & ~TRAIN.toarray()
    return sp.csr_matrix(held)


def test_early_stopping_keeps_the_best_checkpoint():
    base = MFSpec(ADG, l2=0.0, learning_rate=0.5, optimizer="sgd", batch_size=32)
    valid = _validation()
    epochs = 6
    rule = EarlyStopping(every=TRAIN.nnz, metric="ndcg@5", patience=epochs)  # never stops
    model = fit(KEY, dataclasses.replace(base, early_stopping=rule), TRAIN, validation=valid,
                pairs=epochs * TRAIN.nnz)
    steps = -(-TRAIN.nnz // 32)
    assert [p for p, _ in model.curve] == [e * steps * 32 for e in range(1, epochs + 1)]
    for e, (_, value) in enumerate(model.curve, start=1):   # the curve is the metric at epoch e
        params = fit(KEY, base, TRAIN, pairs=e * TRAIN.nnz).params
        expected = metrics.mean(metrics.ndcg(np.asarray(models.scores(params, np.arange(N_USERS))),
                                             valid, k=5, exclude=TRAIN))
        assert value == pytest.approx(expected, abs=1e-12)
    values = [v for _, v in model.curve]
    best = int(np.argmax(values)) + 1                        # first maximum
    _assert_same_params(model.params, fit(KEY, base, TRAIN, pairs=best * TRAIN.nnz).params)
    # patience 1 stops at the first evaluation that does not improve on the best so far
    stop = next((e for e in range(2, epochs + 1) if values[e - 1] <= max(values[:e - 1])), epochs)
    assert stop < epochs, "the fixture should make the validation metric fall at least once"
    impatient = fit(KEY, dataclasses.replace(base, early_stopping=dataclasses.replace(
        rule, patience=1)), TRAIN, validation=valid, pairs=epochs * TRAIN.nnz)
    assert impatient.curve == model.curve[:stop]
    best_before = int(np.argmax(values[:stop])) + 1
    _assert_same_params(impatient.params,
                        fit(KEY, base, TRAIN, pairs=best_before * TRAIN.nnz).params)


def test_best_checkpoint_is_the_first_best_point_of_the_curve_in_the_metric_s_direction():
    curve = ((10, 0.5), (20, 0.7), (30, 0.3), (40, 0.7), (50, 0.6))
    higher = MFSpec(ADG, 0.1, 0.1, early_stopping=EarlyStopping(every=10, metric="adg"))
    lower = MFRMSESpec(early_stopping=EarlyStopping(every=1, metric="rmse"))
    assert models.best_checkpoint(Model(higher, None, curve)) == (20, 0.7)   # first of the equals
    assert models.best_checkpoint(Model(lower, None, curve)) == (30, 0.3)
    assert models.best_checkpoint(Model(MFSpec(ADG, 0.1, 0.1), None)) is None   # no early stopping
    # on a real fit it names the checkpoint the stopping rule returned
    rule = EarlyStopping(every=TRAIN.nnz, metric="ndcg@5", patience=2)
    base = MFSpec(ADG, l2=0.0, learning_rate=0.5, optimizer="sgd", batch_size=32)
    model = fit(KEY, dataclasses.replace(base, early_stopping=rule), TRAIN,
                validation=_validation(), pairs=6 * TRAIN.nnz)
    budget, value = models.best_checkpoint(model)
    assert value == max(v for _, v in model.curve)
    epochs = [b for b, _ in model.curve].index(budget) + 1       # one evaluation per epoch
    _assert_same_params(model.params, fit(KEY, base, TRAIN, pairs=epochs * TRAIN.nnz).params)


def test_early_stopping_evaluates_every_n_pairs_and_at_the_end():
    rule = EarlyStopping(every=2 * TRAIN.nnz - 5, metric="adg", patience=10)   # 2 epochs
    spec = dataclasses.replace(CASES["mf-adg"][0], early_stopping=rule)
    model = fit(KEY, spec, TRAIN, validation=_validation(), pairs=5 * TRAIN.nnz)
    steps = -(-TRAIN.nnz // 32)
    assert [p for p, _ in model.curve] == [e * steps * 32 for e in (2, 4, 5)]
    with pytest.raises(ValueError, match="no positives outside train"):
        fit(KEY, spec, TRAIN, validation=TRAIN, pairs=TRAIN.nnz)


# ---- early stopping: the one loop and the ALS families -------------------------------------

def _planted_run(steps):
    """(budget, params) of a planted run: budget 10 per step, params names the step."""
    return iter([(10 * step, f"after step {step}") for step in range(steps + 1)])


def _planted_value(values):
    return lambda params: values[int(params.split()[-1]) - 1]


def test_early_stopping_loop_stops_after_patience_evaluations_on_a_plateau():
    values = [0.1, 0.3, 0.5, 0.5, 0.4, 0.5, 0.9, 1.0]       # plateau at 0.5 from step 3
    run = _planted_run(len(values))
    params, curve = api._early_stopping(run, EarlyStopping(every=1, patience=3), len(values), 1,
                                        _planted_value(values))
    assert params == "after step 3"                            # the earliest of the equal best
    assert curve == tuple((10 * s, v) for s, v in enumerate(values[:6], start=1))
    assert next(run) == (70, "after step 7")                   # nothing trained past the stop
    # one evaluation more of patience sees the later improvement, and takes it
    params, curve = api._early_stopping(_planted_run(len(values)),
                                        EarlyStopping(every=1, patience=4), len(values), 1,
                                        _planted_value(values))
    assert params == "after step 8" and len(curve) == len(values)


def test_early_stopping_loop_minimises_rmse_and_evaluates_every_and_at_the_end():
    values = [2.0, 1.5, 1.2, 1.3, 1.2, 1.1, 1.4]
    params, curve = api._early_stopping(_planted_run(7), EarlyStopping(every=3, metric="rmse"),
                                        7, 3, _planted_value(values))
    assert params == "after step 6" and curve == ((30, 1.2), (60, 1.1), (70, 1.4))
    params, curve = api._early_stopping(_planted_run(7), EarlyStopping(1, "rmse", patience=1),
                                        7, 1, _planted_value(values))
    assert params == "after step 3" and [b for b, _ in curve] == [10, 20, 30, 40]
    assert api._early_stopping(_planted_run(0), EarlyStopping(1), 0, 1, None) == (
        "after step 0", ())                                    # no budget: the initial state
    with pytest.raises(ValueError, match="undefined"):
        api._early_stopping(_planted_run(2), EarlyStopping(1), 2, 1, lambda params: math.nan)


def _assert_best_sweep(model, base, train, value, *, lower_is_better=False, **kwargs):
    """model.curve is value(fit of base with s sweeps) at every sweep s = 1, 2, ...; the model
    has the parameters of the best sweep (no early stopping, same key); it stopped after
    `patience` evaluations without improvement, before the maximum."""
    budgets, values = zip(*model.curve)
    assert budgets == tuple(range(1, len(budgets) + 1))
    for sweeps, got in model.curve:    # value may round the scores to f32 (`models.scores`)
        params = fit(KEY, dataclasses.replace(base, sweeps=sweeps), train, **kwargs).params
        assert got == pytest.approx(value(params), rel=1e-6)
    best = int(np.argmin(values) if lower_is_better else np.argmax(values)) + 1
    patience = model.spec.early_stopping.patience
    assert len(budgets) == best + patience < base.sweeps
    _assert_same_params(model.params,
                        fit(KEY, dataclasses.replace(base, sweeps=best), train, **kwargs).params)


def _ranking(name, relevant, exclude):
    """The user mean of metric `name` of a factor model, from its dense scores."""
    def value(params):
        dense = np.asarray(models.scores(params, np.arange(relevant.shape[0])))
        return metrics.mean(metrics.evaluate(dense, relevant, exclude=exclude,
                                             metrics=(name,))[name])
    return value


def test_ials_early_stopping_returns_the_best_sweep():
    base = IALSSpec(dim=4, l2=1.0, unobserved_weight=0.05, alpha=0.5, sweeps=12)
    rule = EarlyStopping(every=1, metric="ndcg@5", patience=2)
    valid = _validation()
    model = fit(KEY, dataclasses.replace(base, early_stopping=rule), TRAIN, validation=valid)
    assert model.spec.early_stopping == rule
    _assert_best_sweep(model, base, TRAIN, _ranking("ndcg@5", valid, TRAIN))
    sparse = fit(KEY, dataclasses.replace(base, early_stopping=EarlyStopping(5, "ndcg@5", 9)),
                 TRAIN, validation=valid)
    assert [b for b, _ in sparse.curve] == [5, 10, 12]         # every 5 sweeps and the last


def _low_rank_ratings():
    """Star ratings of a rank-2 truth with noise, 60 x 40: 30 % train, 15 % validation."""
    rng = np.random.default_rng(1)
    truth = 3 + rng.normal(size=(60, 2)) @ rng.normal(size=(40, 2)).T
    stars = np.clip(np.round(truth + 0.5 * rng.normal(size=truth.shape)), 1, 5)
    split = rng.random(truth.shape)
    return (sp.csr_matrix(np.where(split < 0.3, stars, 0)),
            sp.csr_matrix(np.where((split >= 0.3) & (split < 0.45), stars, 0)))


def test_mf_rmse_early_stopping_on_validation_rmse_returns_the_best_sweep():
    train, valid = _low_rank_ratings()
    base = MFRMSESpec(dim=2, l2=0.03, sweeps=15)
    model = fit(KEY, dataclasses.replace(base, early_stopping=EarlyStopping(1, "rmse", 2)), train,
                validation=valid)
    observed = valid.toarray() != 0

    def rmse(params):
        predicted = np.asarray(models.scores(params, np.arange(60)), np.float64)
        return np.sqrt(np.mean((predicted - valid.toarray())[observed] ** 2))
    _assert_best_sweep(model, base, train, rmse, lower_is_better=True)


def test_allrank_early_stopping_ranks_the_validation_ratings_above_a_threshold():
    held = _ratings(11).toarray()
    valid = sp.csr_matrix(np.where(RATINGS.toarray() != 0, 0, held))
    base = AllRankSpec(dim=3, l2=0.05, missing_weight=0.05, sweeps=12)
    rule = EarlyStopping(every=1, metric="ndcg@5", patience=2, relevant_rating=4.0)
    model = fit(KEY, dataclasses.replace(base, early_stopping=rule), RATINGS, validation=valid)
    _assert_best_sweep(model, base, RATINGS, _ranking("ndcg@5", valid.toarray() >= 4,
                                                      RATINGS.toarray() != 0))
    anything = fit(KEY, dataclasses.replace(base, early_stopping=dataclasses.replace(
        rule, relevant_rating=None)), RATINGS, validation=valid)
    expected = _ranking("ndcg@5", valid.toarray() != 0, RATINGS.toarray() != 0)(
        fit(KEY, dataclasses.replace(base, sweeps=1), RATINGS).params)
    assert anything.curve[0] == (1, pytest.approx(expected, rel=1e-12))


def test_als_early_stopping_argument_errors():
    ials_rule = IALSSpec(dim=2, l2=1.0, early_stopping=EarlyStopping(1))
    with pytest.raises(ValueError, match=r"set IALSSpec.early_stopping=EarlyStopping\(...\)"):
        fit(KEY, IALSSpec(dim=2, l2=1.0), TRAIN, validation=_validation())
    with pytest.raises(ValueError, match=r"IALSSpec.early_stopping needs validation: pass the "
                                         r"held-out positives"):
        fit(KEY, ials_rule, TRAIN)
    with pytest.raises(ValueError, match="field `sweeps`"):
        fit(KEY, ials_rule, TRAIN, validation=_validation(), pairs=100)
    with pytest.raises(ValueError, match="validation must be boolean"):
        fit(KEY, ials_rule, TRAIN, validation=RATINGS)
    rmse_rule = MFRMSESpec(dim=2, early_stopping=EarlyStopping(1, "rmse"))
    with pytest.raises(ValueError, match=r"MFRMSESpec.early_stopping needs validation: pass the "
                                         r"held-out ratings"):
        fit(KEY, rmse_rule, RATINGS)
    with pytest.raises(ValueError, match="same users and items"):
        fit(KEY, rmse_rule, RATINGS, validation=RATINGS[:5])
    with pytest.raises(ValueError, match="set MFRMSESpec.early_stopping"):
        fit(KEY, MFRMSESpec(dim=2), RATINGS, validation=RATINGS)
    nothing_relevant = AllRankSpec(dim=2, early_stopping=EarlyStopping(1, relevant_rating=6.0))
    with pytest.raises(ValueError, match="relevant_rating"):
        fit(KEY, nothing_relevant, RATINGS, validation=_ratings(11))

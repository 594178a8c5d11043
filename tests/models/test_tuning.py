"""simrec.models.tuning: the tuning loop against a hand loop, and the content-addressed store."""
import jax
import numpy as np
import pytest
import scipy.sparse as sp

from simrec import models
from simrec.models import tuning


def _ratings(seed=0, users=40, items=30):
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(users, 2)) @ rng.normal(size=(items, 2)).T
    observed = rng.uniform(size=truth.shape) < 0.3
    stars = np.clip(np.round(3 + truth), 1, 5) * observed
    train = sp.csr_matrix(np.where(rng.uniform(size=truth.shape) < 0.8, stars, 0).astype(np.float32))
    valid = sp.csr_matrix((stars - train.toarray()).astype(np.float32))
    return train, valid


def _spec(point):
    return models.MFRMSESpec(dim=2, l2=point["l2"], sweeps=6,
                             early_stopping=models.EarlyStopping(every=1, metric="rmse", patience=2))


GRID = [{"l2": v} for v in (0.01, 0.1, 1.0, 10.0)]


def test_tune_equals_the_hand_written_loop():
    train, valid = _ratings()
    key = jax.random.key(0)
    result = models.tune(key, GRID, _spec, train, validation=valid)
    by_hand = [models.best_checkpoint(models.fit(key, _spec(p), train, validation=valid)) for p in GRID]
    assert [t.value for t in result.trials] == [value for _, value in by_hand]
    assert [t.budget for t in result.trials] == [budget for budget, _ in by_hand]
    expected = models.select(GRID, [value for _, value in by_hand], higher_is_better=False)   # RMSE: lower
    assert result.selection == expected and result.best is result.trials[expected.index]
    assert all(t.curve for t in result.trials)


def test_tune_with_a_value_function_and_with_nothing_to_tune():
    train = _ratings()[0] > 0
    spec_of = lambda point: models.SVDSpec(dim=int(point["dim"]))  # noqa: E731
    result = models.tune(None, [{"dim": d} for d in (1, 2, 3)], spec_of, train,
                         value=lambda model: -float(model.spec.dim))
    assert result.selection.point == {"dim": 1.0} and result.selection.edges == ("dim",)
    alone = models.tune(None, [{}], lambda point: models.PopularitySpec(), train, value=lambda model: 0.5)
    assert alone.selection.point == {} and alone.best.value == 0.5 and alone.best.budget is None
    with pytest.raises(ValueError, match="no early stopping, so tune needs value="):
        models.tune(None, [{}], lambda point: models.PopularitySpec(), train)


def test_the_store_shares_fits_by_content(tmp_path, monkeypatch):
    train, valid = _ratings()
    calls = []
    real_fit = tuning.fit
    monkeypatch.setattr(tuning, "fit", lambda *a, **k: calls.append(a[1]) or real_fit(*a, **k))
    key, spec = jax.random.key(1), _spec({"l2": 0.1})
    with models.store(tmp_path):
        first = models.fitted(key, spec, train, validation=valid)
        again = models.fitted(key, spec, sp.csr_matrix(train.toarray()), validation=valid)   # same content
        assert len(calls) == 1
        np.testing.assert_array_equal(np.asarray(first.params.user), np.asarray(again.params.user))
        assert again.curve == first.curve
        # the seconds of the fit that made the model, also when it is read from the store
        (model, seconds), (_, seconds_again) = (models.fitted(key, spec, train, validation=valid, seconds=True)
                                                for _ in range(2))
        assert len(calls) == 1 and seconds > 0 and seconds_again == seconds
        assert isinstance(model, models.Model)
        models.fitted(jax.random.key(2), spec, train, validation=valid)                     # another key
        changed = train.copy()
        changed.data[0] += 1.0
        models.fitted(key, spec, changed, validation=valid)                                 # other data
        assert len(calls) == 3
        (victim,) = [p for p in tmp_path.iterdir() if p.name.endswith(".pkl")][:1]
        victim.write_bytes(b"not a pickle")
        for p in tmp_path.iterdir():
            p.write_bytes(b"garbage")
        models.fitted(key, spec, train, validation=valid)                                   # refitted
        assert len(calls) == 4
    models.fitted(key, spec, train, validation=valid)                                       # no store: fits
    assert len(calls) == 5


def test_data_digests_see_content_not_layout():
    dense = np.eye(3, dtype=np.float32)
    assert models.data_digest(sp.csr_matrix(dense)) == models.data_digest(sp.coo_matrix(dense))
    other = dense.copy()
    other[0, 1] = 1e-7
    assert models.data_digest(sp.csr_matrix(dense)) != models.data_digest(sp.csr_matrix(other))
    assert models.data_digest(dense) != models.data_digest(dense.astype(np.float64))
    assert models.data_digest(None) == models.data_digest(None)

"""The fold_in study (FastML strong generalisation) at its smoke preset, and the fold-in paths it
relies on: iALS fold-in of a training user gives its trained vector, EASE and item-kNN score a
new history exactly as history x weights, and reveals are nested random orders."""
import dataclasses
import json

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import models, runner
from studies import fold_in


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fold_in")
    runner.run(fold_in.STUDY, fold_in.PRESETS["smoke"], seed=0, out=out, preset="smoke",
               progress=False)
    return out


def _train(seed=0, users=40, items=30):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.random((users, items)) < 0.25)


def test_smoke_outputs_and_crossings_match_the_curves(smoke_run):
    config = fold_in.PRESETS["smoke"]
    manifest = json.loads((smoke_run / "manifest.json").read_text())
    assert manifest["study"] == "fold_in"
    assert (smoke_run / "fig_ndcg_vs_L.png").exists()
    curves = pd.read_csv(smoke_run / "table_curves.csv")
    assert len(curves) == len(fold_in.MODELS) * config.max_known
    assert np.all((curves["low"] <= curves["mean"]) & (curves["mean"] <= curves["high"]))
    wide = curves.pivot(index="L", columns="model", values="mean")
    expected = set()
    for i, a in enumerate(fold_in.MODELS):                # brute force: sign changes, pair by pair
        for b in fold_in.MODELS[i + 1:]:
            for L in range(2, config.max_known + 1):
                before, after = wide.loc[L - 1, a] - wide.loc[L - 1, b], wide.loc[L, a] - wide.loc[L, b]
                if before * after < 0:
                    expected.add((a, b, L))
    crossings = pd.read_csv(smoke_run / "table_crossings.csv")
    assert {(r["model a"], r["model b"], r["L"]) for _, r in crossings.iterrows()} == expected
    table = pd.read_csv(smoke_run / "table_mandcg.csv")
    for model in fold_in.MODELS:                           # MANDCG = mean over L of the curve
        curve = curves[curves.model == model]["mean"].mean()
        assert table.set_index("model").loc[model, "MANDCG (strong)"] == pytest.approx(curve, rel=1e-9)


def test_ials_fold_in_of_training_users_reproduces_trained_vectors():
    config = fold_in.PRESETS["smoke"]
    train = _train()
    model = models.ials(jax.random.key(0), train, dim=4, l2=config.ials_l2,
                        unobserved_weight=config.ials_unobserved_weight, iterations=3)
    again = models.fold_in(model.item, train, config.ials_l2,
                           unobserved_weight=config.ials_unobserved_weight)
    np.testing.assert_allclose(np.asarray(again), np.asarray(model.user), rtol=1e-4, atol=1e-5)


def test_new_histories_are_scored_with_the_trained_item_weights():
    config = dataclasses.replace(fold_in.PRESETS["smoke"], ease_l2=5.0, knn_k=5)
    train = _train(1)
    scorers = fold_in._fit(jax.random.key(0), config, train)
    history = _train(2, users=7)
    ease = models.ease(train, 5.0)
    expected = history.toarray().astype(np.float64) @ np.asarray(models.ease_weights(ease), np.float64)
    np.testing.assert_allclose(scorers["EASE"](history), expected, rtol=1e-3, atol=1e-3)
    knn = models.item_knn(train, 5)
    expected = history.toarray().astype(np.float32) @ knn.neighbours.toarray()
    np.testing.assert_allclose(scorers["item-kNN"](history), expected, rtol=1e-5, atol=1e-6)
    counts = train.sum(axis=0).A1
    np.testing.assert_array_equal(scorers["popularity"](history), np.broadcast_to(counts, (7, 30)))


def test_reveal_positions_are_a_permutation_within_each_row():
    held_out = _train(3)
    positions = fold_in._reveal_positions(jax.random.key(0), held_out)
    for row in range(held_out.shape[0]):
        part = positions[held_out.indptr[row]:held_out.indptr[row + 1]]
        assert sorted(part) == list(range(len(part)))
    revealed = [fold_in._entries(held_out, positions < n).toarray() for n in (1, 2, 3)]
    assert np.all(revealed[0] <= revealed[1]) and np.all(revealed[1] <= revealed[2])   # nested
    assert np.array_equal(revealed[1].sum(1), np.minimum(held_out.sum(1).A1, 2))


@pytest.mark.parametrize("overrides", [{"max_known": 0}, {"held_out_fraction": 1.0},
                                       {"ials_l2": 0.0}, {"level": 1.5}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(fold_in.PRESETS["default"], **overrides)


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(fold_in.PRESETS["default"], ratings_file="no/such.csv")
    assert fold_in.cells(config) == [{"data": "simulated"}]

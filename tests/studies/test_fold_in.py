"""The fold_in study (FastML strong generalisation) at its smoke preset, and the fold-in paths it
relies on: iALS fold-in of a training user gives its trained vector, EASE and item-kNN score a
new history exactly as history x weights, MF-ADG's fold-in is the ridge solve with its item
factors, and reveals are nested random orders stacked as one row per (user, L)."""
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


def test_crossings_flag_clear_order_changes_against_hand_made_curves():
    """popularity leads clearly at L = 1, 2, flickers around L = 3..5, iALS leads clearly from
    L = 5; the other models stay far apart. CI half-width 0.05: leads > 0.1 are significant."""
    means = {"popularity": [0.5] * 6, "iALS": [0.1, 0.3, 0.55, 0.48, 0.9, 0.9],
             "MF-ADG": [2.0] * 6, "EASE": [3.0] * 6, "item-kNN": [4.0] * 6}
    curves = pd.DataFrame([{"data": "d", "model": m, "L": L + 1, "mean": v,
                            "low": v - 0.05, "high": v + 0.05}
                           for m, values in means.items() for L, v in enumerate(values)])
    got = {(c["L"], c["leader before"], c["leader after"]): c["clear"]
           for c in fold_in._crossings(curves)}
    assert got == {(3, "popularity", "iALS"): True,      # pop ahead at L <= 2, iALS at L >= 5
                   (4, "iALS", "popularity"): False,     # iALS never significantly ahead before
                   (5, "popularity", "iALS"): True}


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


def test_stacked_reveals_hold_every_L_nested():
    """Row r * max_known + L - 1 reveals user r's items at positions < L; the rest are the others."""
    held_out = _train(3)
    positions = fold_in._reveal_positions(jax.random.key(0), held_out)
    max_known = 4
    known, rest = fold_in._stacked_reveals(held_out, positions, max_known)
    dense, known, rest = held_out.toarray(), known.toarray(), rest.toarray()
    position = np.full(dense.shape, -1)
    rows = np.repeat(np.arange(dense.shape[0]), np.diff(held_out.indptr))
    position[rows, held_out.indices] = positions
    for r in range(dense.shape[0]):
        for L in range(1, max_known + 1):
            row = r * max_known + L - 1
            np.testing.assert_array_equal(known[row], dense[r] & (position[r] < L))
            np.testing.assert_array_equal(rest[row], dense[r] & (position[r] >= L))
            assert known[row].sum() == min(L, dense[r].sum())
            if L > 1:
                assert np.all(known[row - 1] <= known[row])                   # nested in L


def test_fold_in_scorer_is_the_ridge_solve_with_the_item_factors_fixed():
    """The iALS and MF-ADG curves: x = (w0 YᵀY + (1 - w0) Y_LᵀY_L + λI)⁻¹ Y_Lᵀ1, scores x·Y."""
    config = fold_in.PRESETS["smoke"]
    y = np.random.default_rng(4).standard_normal((30, 3)).astype(np.float32)
    history = _train(5, users=6)
    w0, l2 = config.ials_unobserved_weight, config.ials_l2
    factors = y.astype(np.float64)
    expected = []
    for row in history.toarray():
        seen = factors[row]
        lhs = w0 * factors.T @ factors + (1 - w0) * seen.T @ seen + l2 * np.eye(3)
        expected.append(np.linalg.solve(lhs, seen.sum(axis=0)) @ factors.T)
    np.testing.assert_allclose(fold_in._fold_in_scorer(y, config)(history), np.array(expected),
                               rtol=1e-4, atol=1e-5)


def test_fit_scores_every_model_including_mf_adg():
    scorers = fold_in._fit(jax.random.key(0), fold_in.PRESETS["smoke"], _train(6))
    assert set(scorers) == set(fold_in.MODELS)
    history = _train(7, users=5)
    for name, score in scorers.items():
        values = np.asarray(score(history))
        assert values.shape == (5, 30) and np.all(np.isfinite(values)), name


@pytest.mark.parametrize("overrides", [{"max_known": 0}, {"held_out_fraction": 1.0},
                                       {"ials_l2": 0.0}, {"level": 1.5}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(fold_in.PRESETS["default"], **overrides)


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(fold_in.PRESETS["default"], ratings_file="no/such.csv")
    assert fold_in.cells(config) == [{"data": "simulated"}]

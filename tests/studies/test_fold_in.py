"""The fold_in study (FastML strong generalisation) at its smoke preset, and the fold-in paths it
relies on: iALS fold-in of a training user gives its trained vector, EASE and item-kNN score a
new history exactly as history x weights, MF-ADG's fold-in is the ridge solve with its item
factors, and reveals are nested random orders stacked as one row per (user, L). The study module
is imported as `study` (`fold_in` also names the model function and `jax.random.fold_in`)."""
import dataclasses
import inspect
import json

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import models, runner
from simrec_studies import fold_in as study


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fold_in")
    runner.run(study.STUDY, study.PRESETS["smoke"], seed=0, out=out, preset="smoke",
               progress=False)
    return out


def _train(seed=0, users=40, items=30):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.random((users, items)) < 0.25)


def _scorers(config, train) -> dict:
    """{model: score(history)} of every model fitted on train."""
    return {name: study._history_scorer(study._fit(jax.random.key(0), config, train, name))
            for name in study.MODELS}


def test_smoke_outputs_and_crossings_match_the_curves(smoke_run):
    config = study.PRESETS["smoke"]
    manifest = json.loads((smoke_run / "manifest.json").read_text())
    assert manifest["study"] == "fold_in"
    assert (smoke_run / "fig_ndcg_vs_L.png").exists()
    curves = pd.read_csv(smoke_run / "table_curves.csv")
    assert len(curves) == len(study.MODELS) * config.max_known
    assert np.all((curves["low"] <= curves["mean"]) & (curves["mean"] <= curves["high"]))
    wide = curves.pivot(index="L", columns="model", values="mean")
    expected = set()
    for i, a in enumerate(study.MODELS):                # brute force: sign changes, pair by pair
        for b in study.MODELS[i + 1:]:
            for L in range(2, config.max_known + 1):
                before, after = wide.loc[L - 1, a] - wide.loc[L - 1, b], wide.loc[L, a] - wide.loc[L, b]
                if before * after < 0:
                    expected.add((a, b, L))
    crossings = pd.read_csv(smoke_run / "table_crossings.csv")
    assert {(r["model a"], r["model b"], r["L"]) for _, r in crossings.iterrows()} == expected
    table = pd.read_csv(smoke_run / "table_mandcg.csv")
    for model in study.MODELS:                           # MANDCG = mean over L of the curve
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
           for c in study._crossings(curves)}
    assert got == {(3, "popularity", "iALS"): True,      # pop ahead at L <= 2, iALS at L >= 5
                   (4, "iALS", "popularity"): False,     # iALS never significantly ahead before
                   (5, "popularity", "iALS"): True}


def test_ials_fold_in_of_training_users_reproduces_trained_vectors():
    config = study.PRESETS["smoke"]
    train = _train()
    model = models.ials(jax.random.key(0), train, dim=4, l2=config.ials_l2,
                        unobserved_weight=config.ials_unobserved_weight, iterations=3)
    again = models.fold_in(model.item, train, config.ials_l2,
                           unobserved_weight=config.ials_unobserved_weight)
    np.testing.assert_allclose(np.asarray(again), np.asarray(model.user), rtol=1e-4, atol=1e-5)


def test_new_histories_are_scored_with_the_trained_item_weights():
    config = dataclasses.replace(study.PRESETS["smoke"], ease_l2=5.0, knn_k=5)
    train = _train(1)
    scorers = _scorers(config, train)
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
    positions = study._reveal_positions(jax.random.key(0), held_out)
    for row in range(held_out.shape[0]):
        part = positions[held_out.indptr[row]:held_out.indptr[row + 1]]
        assert sorted(part) == list(range(len(part)))


def test_stacked_reveals_hold_every_L_nested():
    """Row r * max_known + L - 1 reveals user r's items at positions < L; the rest are the others."""
    held_out = _train(3)
    positions = study._reveal_positions(jax.random.key(0), held_out)
    max_known = 4
    known, rest = study._stacked_reveals(held_out, positions, max_known)
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


@pytest.mark.parametrize("name", ["iALS", "MF-ADG"])
def test_fold_in_models_score_by_the_ridge_solve_with_their_item_factors_fixed(name):
    """The iALS and MF-ADG curves: x = (w0 YᵀY + (1 - w0) Y_LᵀY_L + λI)⁻¹ Y_Lᵀ1, scores x·Y,
    Y the trained item factors (MF-ADG's item bias left out)."""
    config = dataclasses.replace(study.PRESETS["smoke"], ials_dim=3, pairs=500)
    model = study._fit(jax.random.key(0), config, _train(4), name)
    history = _train(5, users=6)
    w0, l2 = config.ials_unobserved_weight, config.ials_l2
    factors = np.asarray(model.params.item, np.float64)
    expected = []
    for row in history.toarray():
        seen = factors[row]
        lhs = w0 * factors.T @ factors + (1 - w0) * seen.T @ seen + l2 * np.eye(3)
        expected.append(np.linalg.solve(lhs, seen.sum(axis=0)) @ factors.T)
    np.testing.assert_allclose(study._history_scorer(model)(history), np.array(expected),
                               rtol=1e-4, atol=1e-5)


def test_fit_scores_every_model_including_mf_adg():
    scorers = _scorers(study.PRESETS["smoke"], _train(6))
    assert set(scorers) == set(study.MODELS)
    history = _train(7, users=5)
    for name, score in scorers.items():
        values = np.asarray(score(history))
        assert values.shape == (5, 30) and np.all(np.isfinite(values)), name


def test_mf_adg_takes_its_budget_and_batch_from_the_config():
    config = dataclasses.replace(study.PRESETS["smoke"], batch_size=64, adg_l2=0.02)
    spec = study.model_spec(config, "MF-ADG")
    assert (spec.batch_size, spec.l2, spec.learning_rate) == (64, 0.02, config.adg_learning_rate)
    assert spec.fold_in == models.FoldIn(l2=config.ials_l2,
                                         unobserved_weight=config.ials_unobserved_weight)
    assert study.FoldInConfig().batch_size == 256
    with pytest.raises(ValueError, match="model must be one of"):
        study.model_spec(config, "BPR")


def test_compute_matches_the_run_records_and_the_declared_columns(smoke_run):
    """compute(root key, config, cell, setup(root key, config)) gives the run's records again
    (the cell's wall time aside) and they pass the runner's column check."""
    config = study.PRESETS["smoke"]
    root = jax.random.key(0)
    shared = study.STUDY.setup(root, config)
    stored = runner.records_frame(study.STUDY,
                                  pd.read_csv(smoke_run / "records.csv").to_numpy().tolist())
    for cell in ({"data": "simulated", "model": "EASE"}, {"data": "simulated", "model": "iALS"}):
        rows = runner.check_records(study.STUDY, cell, study.compute(root, config, cell, shared))
        fresh = runner.records_frame(study.STUDY, rows)
        theirs = stored[stored.model == cell["model"]].reset_index(drop=True)
        columns = [c for c in study.COLUMNS if c != "seconds"]
        pd.testing.assert_frame_equal(fresh[columns], theirs[columns], check_exact=True)
        assert len(fresh) == config.max_known + 2                  # the curve, MANDCG, weak


def test_the_module_keeps_no_state():
    """No memo of shared state and no key round trips: state comes from setup, keys from the runner."""
    assert not [name for name, value in vars(study).items() if hasattr(value, "cache_info")]
    source = inspect.getsource(study)
    for banned in ("lru_cache", "functools.cache", "wrap_key_data", "key_id"):
        assert banned not in source, banned


def test_every_config_field_is_documented():
    """The study's own fields (the nested `WorldConfig` is documented in simrec.world)."""
    assert all(meaning for name, _, _, meaning in runner.config_help(study.PRESETS["default"])
               if not name.startswith("world."))


@pytest.mark.parametrize("overrides", [{"max_known": 0}, {"held_out_fraction": 1.0},
                                       {"ials_l2": 0.0}, {"level": 1.5}, {"pairs": 0},
                                       {"batch_size": 0}, {"ials_sweeps": 0}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(study.PRESETS["default"], **overrides)


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(study.PRESETS["default"], ratings_file="no/such.csv")
    assert study.cells(config) == [{"data": "simulated", "model": m} for m in study.MODELS]

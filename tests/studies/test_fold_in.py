"""The fold_in study (FastML strong generalisation) on a tiny config, and the fold-in paths it
relies on: iALS fold-in of a training user gives its trained vector, EASE and item-kNN score a
new history exactly as history x weights, MF-ADG's fold-in is the ridge solve with its item
factors, reveals are nested random orders stacked as one row per (user, L), grids are selected on
validation users with the grid-edge flag, the fits go through the store of fits, the FastML note's
claims are decided by the verdict rule, and the last.fm positives are the listened artists. The
package is imported as `study`, its compute module as `fold` (`fold_in` also names the model
function and `jax.random.fold_in`) and its report module as `rep`."""
import dataclasses
import importlib
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import models, runner
from simrec.config import ConfigError
from simrec.world import WorldConfig
from simrec_studies import fold_in as study

fold = importlib.import_module("simrec_studies.fold_in.compute")
rep = importlib.import_module("simrec_studies.fold_in.report")

#: the study end to end in seconds: a small world, 3 reveals, 2-point grids, short training
TINY = dataclasses.replace(study.PRESETS["smoke"], world=WorldConfig(n_users=120, n_items=80, offset=-2.5),
                           max_known=3, min_rest=2, k=5, ials_dim=4, ials_sweeps=2, pairs=6_000,
                           stop_every=2_000, patience=2, ials_l2s=(1.0, 10.0), adg_l2s=(0.01, 0.1),
                           fold_in_l2s=(1.0, 10.0), ease_l2s=(5.0, 50.0), knn_ks=(5, 20))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fold_in")
    runner.run(study.STUDY, TINY, seed=0, out=out, preset="tiny", progress=False)
    return out


def _train(seed=0, users=40, items=30):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.random((users, items)) < 0.25)


@pytest.fixture(scope="module")
def tiny_shared():
    """The tiny run's data sources (`setup` from the run's root key)."""
    return study.STUDY.setup(jax.random.key(0), TINY)


@pytest.fixture(scope="module")
def tiny_source(tiny_shared) -> "fold.Source":
    """The simulated source of the tiny run: the unit tests fit on its shapes, so they reuse the
    run's compiled training and scoring."""
    return tiny_shared.sources["simulated"]


def _fit(config, source, name):
    """`name` fitted on the source's weak split at its first grid point."""
    return fold.fit_grid(jax.random.key(0), config, source, name)[0]


@pytest.fixture(scope="module")
def unit_fits(tiny_source) -> dict:
    """{model: every model fitted on the tiny source at its first grid point of `TINY`}."""
    return {name: _fit(TINY, tiny_source, name) for name in fold.MODELS}


ITEMS = TINY.world.n_items


def test_smoke_outputs_and_crossings_match_the_curves(tiny_run):
    config = TINY
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["study"] == "fold_in"
    assert (tiny_run / "fig_ndcg_vs_L.png").exists()
    assert (tiny_run / "fig_early_stopping.png").exists()
    readme = (tiny_run / "README.md").read_text()
    assert "held-out test users" in readme and "validation users" in readme
    assert "Grid edges" in readme and "the issue" not in readme.lower()
    assert "## Claims" in readme and "FastML" in readme
    claims = pd.read_csv(tiny_run / "table_claims.csv")
    assert len(claims) == 3 * len(fold.sources(config)) + 2
    curves = pd.read_csv(tiny_run / "table_curves.csv")
    assert len(curves) == len(fold.MODELS) * config.max_known
    assert np.all((curves["low"] <= curves["mean"]) & (curves["mean"] <= curves["high"]))
    wide = curves.pivot(index="L", columns="model", values="mean")
    expected = set()
    for i, a in enumerate(fold.MODELS):                # brute force: sign changes, pair by pair
        for b in fold.MODELS[i + 1:]:
            for L in range(2, config.max_known + 1):
                before, after = wide.loc[L - 1, a] - wide.loc[L - 1, b], wide.loc[L, a] - wide.loc[L, b]
                if before * after < 0:
                    expected.add((a, b, L))
    crossings = pd.read_csv(tiny_run / "table_crossings.csv")
    assert {(r["model a"], r["model b"], r["L"]) for _, r in crossings.iterrows()} == expected
    table = pd.read_csv(tiny_run / "table_mandcg.csv")
    for model in fold.MODELS:                           # MANDCG = mean over L of the curve
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
           for c in rep._crossings(curves)}
    assert got == {(3, "popularity", "iALS"): True,      # pop ahead at L <= 2, iALS at L >= 5
                   (4, "iALS", "popularity"): False,     # iALS never significantly ahead before
                   (5, "popularity", "iALS"): True}


def test_ials_fold_in_of_training_users_reproduces_trained_vectors(tiny_source):
    config = TINY
    train, l2 = tiny_source.weak_train, config.ials_l2s[0]
    model = models.ials(jax.random.key(0), train, dim=config.ials_dim, l2=l2,
                        unobserved_weight=config.ials_unobserved_weight, iterations=3)
    again = models.fold_in(model.item, train, l2,
                           unobserved_weight=config.ials_unobserved_weight)
    np.testing.assert_allclose(np.asarray(again), np.asarray(model.user), rtol=1e-4, atol=1e-5)


def test_new_histories_are_scored_with_the_trained_item_weights(unit_fits, tiny_source):
    train = tiny_source.weak_train
    scorers = {name: fold._history_scorer(model) for name, model in unit_fits.items()}
    history = _train(2, users=7, items=ITEMS)
    assert (TINY.ease_l2s[0], TINY.knn_ks[0]) == (5.0, 5)
    ease = models.ease(train, 5.0)
    expected = history.toarray().astype(np.float64) @ np.asarray(models.ease_weights(ease), np.float64)
    np.testing.assert_allclose(scorers["EASE"](history), expected, rtol=1e-3, atol=1e-3)
    knn = models.item_knn(train, 5)
    expected = history.toarray().astype(np.float32) @ knn.neighbours.toarray()
    np.testing.assert_allclose(scorers["item-kNN"](history), expected, rtol=1e-5, atol=1e-6)
    counts = train.sum(axis=0).A1
    np.testing.assert_array_equal(scorers["popularity"](history), np.broadcast_to(counts, (7, ITEMS)))


def test_reveal_positions_are_a_permutation_within_each_row():
    held_out = _train(3)
    positions = fold._reveal_positions(jax.random.key(0), held_out)
    for row in range(held_out.shape[0]):
        part = positions[held_out.indptr[row]:held_out.indptr[row + 1]]
        assert sorted(part) == list(range(len(part)))


@pytest.mark.parametrize("source", ["simulated", "hetrec-lastfm"])
def test_held_out_users_are_drawn_among_the_eligible_ones_and_every_other_user_trains(monkeypatch, source):
    """Users with >= L + min_rest interactions (L: max_known, lastfm_max_known on HetRec) are
    split into test and validation users by the configured shares; every other user trains."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 30, size=200)
    observed = sp.csr_matrix([[j < n for j in range(40)] for n in sizes])
    monkeypatch.setattr(fold, "_positives", lambda key, config, name: observed)
    config = dataclasses.replace(TINY, max_known=12, lastfm_max_known=6, min_rest=3,
                                 held_out_fraction=0.5, validation_fraction=0.2)
    L = 6 if source == "hetrec-lastfm" else 12
    assert fold.max_known(config, source) == L
    prepared = fold.prepare(jax.random.key(1), config, source)
    eligible = int((sizes >= L + 3).sum())
    test, validation = prepared.test, prepared.validation
    assert test.max_known == validation.max_known == L
    assert test.users == round(0.5 * eligible) and validation.users == round(0.2 * eligible)
    held_sizes = []
    for reveals in (test, validation):                  # row r*L + L-1: all L revealed, the rest left
        full = reveals.known[L - 1::L] + reveals.rest[L - 1::L]
        held_sizes += np.diff(full.indptr).tolist()
    assert min(held_sizes) >= L + 3
    trained = prepared.weak_train + prepared.weak_stop + prepared.weak_test
    remaining = list(sizes)
    for n in held_sizes:
        remaining.remove(n)
    assert sorted(np.diff(trained.indptr)) == sorted(remaining)


def test_stacked_reveals_hold_every_L_nested():
    """Row r * max_known + L - 1 reveals user r's items at positions < L; the rest are the others."""
    held_out = _train(3)
    positions = fold._reveal_positions(jax.random.key(0), held_out)
    max_known = 4
    known, rest = fold._stacked_reveals(held_out, positions, max_known)
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
def test_fold_in_models_score_by_the_ridge_solve_with_their_item_factors_fixed(name, unit_fits):
    """The iALS and MF-ADG curves: x = (w0 YᵀY + (1 - w0) Y_LᵀY_L + λI)⁻¹ Y_Lᵀ1, scores x·Y,
    Y the trained item factors (MF-ADG's item bias left out)."""
    config, model = TINY, unit_fits[name]
    history = _train(5, users=6, items=ITEMS)
    w0 = config.ials_unobserved_weight
    l2 = config.ials_l2s[0] if name == "iALS" else config.fold_in_l2s[0]
    factors = np.asarray(model.params.item, np.float64)
    expected = []
    for row in history.toarray():
        seen = factors[row]
        lhs = w0 * factors.T @ factors + (1 - w0) * seen.T @ seen + l2 * np.eye(config.ials_dim)
        expected.append(np.linalg.solve(lhs, seen.sum(axis=0)) @ factors.T)
    np.testing.assert_allclose(fold._history_scorer(model)(history), np.array(expected),
                               rtol=1e-4, atol=1e-5)


def test_fit_scores_every_model_including_mf_adg(unit_fits):
    scorers = {name: fold._history_scorer(model) for name, model in unit_fits.items()}
    assert set(scorers) == set(fold.MODELS)
    history = _train(7, users=5, items=ITEMS)
    for name, score in scorers.items():
        values = np.asarray(score(history))
        assert values.shape == (5, ITEMS) and np.all(np.isfinite(values)), name


def test_mf_adg_takes_its_grid_point_budget_and_batch_from_the_config():
    config = dataclasses.replace(study.PRESETS["smoke"], batch_size=64)
    spec = fold.model_spec(config, "MF-ADG", {"l2": 0.02, "fold_in_l2": 30.0})
    assert (spec.batch_size, spec.l2, spec.learning_rate) == (64, 0.02, config.adg_learning_rate)
    assert spec.fold_in == models.FoldIn(l2=30.0, unobserved_weight=config.ials_unobserved_weight)
    assert spec.early_stopping == models.EarlyStopping(every=config.stop_every,
                                                       metric=fold.STOP_METRIC,
                                                       patience=config.patience)
    assert fold.model_spec(config, "iALS", {"l2": 3.0}).early_stopping.every == 1
    assert study.FoldInConfig().batch_size == 256
    with pytest.raises(ValueError, match="model must be one of"):
        fold.model_spec(config, "BPR", {})


def test_grids_are_log_spaced_wide_and_products_for_mf_adg():
    config = study.PRESETS["default"]
    assert study._log_grid(1e-3, 1.0) == (0.001, 0.01, 0.1, 1.0)
    assert study._log_grid(1e-3, 1.0, 2) == (0.001, 0.00316, 0.01, 0.0316, 0.1, 0.316, 1.0)
    assert min(config.adg_l2s) <= 1e-3 and max(config.adg_l2s) >= 1.0
    grid = fold.model_grid(config, "MF-ADG")
    assert grid == [{"l2": a, "fold_in_l2": b} for a in config.adg_l2s for b in config.fold_in_l2s]
    assert fold.model_grid(config, "popularity") == [{}]
    assert fold.model_grid(config, "item-kNN") == [{"k": float(k)} for k in config.knn_ks]


def test_mf_adg_grid_trains_once_per_training_l2_and_scores_with_each_fold_in_l2(tmp_path, tiny_source):
    """The fold-in is not part of training: the grid points of one training λ share the trained
    parameters (and the early-stopping curve) and differ only in their FoldIn; the fits go through
    the store of fits, one per training λ (stored without the fold-in), and are read back from it."""
    config = dataclasses.replace(TINY, fold_in_l2s=(1.0, 10.0, 100.0))
    with models.store(tmp_path):
        fits = fold.fit_grid(jax.random.key(0), config, tiny_source, "MF-ADG")
        stored = sorted(tmp_path.glob("*.pkl"))
        assert len(stored) == 2 and all(path.name.startswith("MFSpec-") for path in stored)
        again = fold.fit_grid(jax.random.key(0), config, tiny_source, "MF-ADG")
    assert sorted(tmp_path.glob("*.pkl")) == stored
    np.testing.assert_array_equal(np.asarray(again[3].params.item), np.asarray(fits[3].params.item))
    assert again[3].spec == fits[3].spec and again[3].curve == fits[3].curve
    assert len(fits) == 6
    for i, point in enumerate(fold.model_grid(config, "MF-ADG")):
        assert fits[i].spec.l2 == point["l2"] and fits[i].spec.fold_in.l2 == point["fold_in_l2"]
        assert fits[i].params is fits[3 * (i // 3)].params and fits[i].curve
    assert fits[0].params is not fits[3].params
    budgets = [budget for budget, _ in fits[0].curve]
    nnz = tiny_source.weak_train.nnz              # the safety net: ⌈pairs / nnz⌉ epochs of whole batches
    assert budgets == sorted(budgets)
    assert budgets[-1] <= -(-config.pairs // nnz) * -(-nnz // config.batch_size) * config.batch_size


def test_large_fold_in_l2_ranks_by_summed_item_similarity(tiny_source):
    """x = (A + λI)⁻¹ Y_Lᵀ1 -> Y_Lᵀ1 / λ as λ grows, so the ranking tends to that of
    Σ_(j revealed) θⱼ·θᵢ (the plateau at the top of the fold-in grid)."""
    config = dataclasses.replace(TINY, adg_l2s=(0.01,), fold_in_l2s=(1e7,))
    model = _fit(config, tiny_source, "MF-ADG")
    history = _train(5, users=6, items=ITEMS)
    factors = np.asarray(model.params.item, np.float64)
    limit = history.toarray() @ factors @ factors.T
    got = fold._history_scorer(model)(history)
    for row in range(6):
        np.testing.assert_array_equal(np.argsort(-got[row], kind="stable")[:5],
                                      np.argsort(-limit[row], kind="stable")[:5])


def _validation_records(values: dict[float, float]) -> pd.DataFrame:
    """Hand-made records of one EASE cell: validation MANDCG per λ and the strong MANDCG row."""
    rows = [{"data": "d", "model": "EASE", "protocol": "validation", "measure": "mandcg", "L": 0,
             "l2": l2, "fold_in_l2": np.nan, "k": np.nan, "budget": 0, "mean": v, "low": v,
             "high": v, "se": 0.01, "users": 40, "seconds": 1.0} for l2, v in values.items()]
    rows.append({**rows[0], "protocol": "strong", "users": 90})
    return pd.DataFrame(rows)


def test_selected_table_flags_a_planted_optimum_outside_the_grid():
    """The validation value rises towards the grid's top (a cut-off optimum): flagged; the
    optimum inside the grid: not flagged. Users come from the validation and test rows."""
    smoke = study.PRESETS["smoke"]
    cut = rep.selected_table(smoke, _validation_records({1.0: 0.1, 10.0: 0.2, 100.0: 0.3}))
    assert cut.loc[0, "selected"] == "l2 = 100" and cut.loc[0, "at grid edge"] == "l2"
    inside = rep.selected_table(smoke, _validation_records({1.0: 0.1, 10.0: 0.3, 100.0: 0.2}))
    assert inside.loc[0, "selected"] == "l2 = 10" and inside.loc[0, "at grid edge"] == ""
    assert (inside.loc[0, "validation users"], inside.loc[0, "test users"]) == (40, 90)
    plateau = rep.selected_table(smoke, _validation_records({1.0: 0.1, 10.0: 0.3, 100.0: 0.3}))
    assert plateau.loc[0, "selected"] == "l2 = 10" and plateau.loc[0, "at grid edge"] == ""


def test_selection_rounds_ties_and_takes_mf_adg_training_l2_by_the_one_se_rule():
    """Values equal to TIE_DECIMALS go to the earlier (smaller) point; MF-ADG's training λ is the
    largest with a point within one SE of the best, then its best fold-in λ."""
    points = [{"l2": v} for v in (1.0, 10.0, 100.0, 1000.0)]
    tied = fold.selection("EASE", points, [0.1, 0.30001, 0.30004, 0.2], [0.01] * 4)
    assert tied.point == {"l2": 10.0} and tied.edges == ()
    grid = [{"l2": a, "fold_in_l2": b} for a in (1e-4, 1e-3, 1e-2, 1e-1) for b in (1.0, 10.0, 100.0)]
    means = [0.40, 0.45, 0.45,    # λ = 1e-4: the best (0.45), flat in the fold-in λ at the top
             0.39, 0.44, 0.43,    # λ = 1e-3
             0.38, 0.41, 0.44,    # λ = 1e-2: 0.44 is within one SE (0.02) of 0.45
             0.20, 0.25, 0.30]    # λ = 1e-1: not within
    choice = fold.selection("MF-ADG", grid, means, [0.02] * 12)
    assert choice.point == {"l2": 1e-2, "fold_in_l2": 100.0}
    assert choice.edges == ("fold_in_l2",)
    plain = fold.selection("MF-ADG", grid, means, [0.001] * 12)      # tiny SE: the plain maximum
    assert plain.point == {"l2": 1e-4, "fold_in_l2": 10.0} and plain.edges == ("l2",)


def test_the_selected_grid_point_is_the_one_evaluated_on_test_users(tiny_run):
    records = pd.read_csv(tiny_run / "records.csv")
    chosen = pd.read_csv(tiny_run / "table_selected.csv", keep_default_na=False).set_index("model")
    for model in fold.MODELS:
        part = records[records.model == model]
        valid = part[part.protocol == "validation"]
        choice = fold.selection(model, [rep._point(r) for _, r in valid.iterrows()],
                                 valid["mean"].to_numpy(), valid["se"].to_numpy())
        best = {} if choice is None else choice.point
        strong = part[part.protocol == "strong"]
        assert strong.shape[0] == TINY.max_known + 1
        assert rep._point(strong.iloc[0]) == best
        assert chosen.loc[model, "selected"] == ", ".join(f"{k} = {v:g}" for k, v in best.items())
        if model in fold.MODEL_KEYS:                               # trained: curve recorded
            assert (part.protocol == "stopping").any()


def test_claims_decide_the_notes_statements_by_the_verdict_rule():
    """Hand-made tables: iALS rises by 0.2 ± 0.05 (holds), beats popularity by 0.01 ± 0.014 (a
    tie); one clear crossing; MANDCG is the mean of each curve."""
    config = dataclasses.replace(TINY, max_known=2)
    curve = {"popularity": [0.30, 0.28], "iALS": [0.20, 0.40], "MF-ADG": [0.1, 0.1], "EASE": [0.1, 0.1],
             "item-kNN": [0.1, 0.1]}       # popularity's MANDCG is not the best but it is not judged
    curves = pd.DataFrame([{"data": "d", "model": m, "L": L + 1, "mean": v, "low": v - 0.01,
                            "high": v + 0.01, "se": 0.03 if m == "iALS" else 0.01}
                           for m, values in curve.items() for L, v in enumerate(values)])
    table = pd.DataFrame([{"data": "d", "model": m, "MANDCG (strong)": np.mean(v),
                           "MANDCG se": 0.01, "evaluated users": 40} for m, v in curve.items()])
    crossings = pd.DataFrame(rep._crossings(curves))
    assert len(crossings) == 1 and crossings.clear.all()
    rise, cross, fold_in, area, size = rep.claims(config, table, curves, crossings)
    assert "iALS" in rise.claim and rise.ours == pytest.approx(0.2)
    assert rise.se == pytest.approx(math.hypot(0.03, 0.03)) and rise.verdict == "reproduced"
    assert cross.verdict == "reproduced" and cross.ours == "popularity → iALS at L = 2"
    assert fold_in.ours == pytest.approx(0.01) and fold_in.verdict == "tie"
    assert area.verdict == "reproduced" and area.ours < 1e-12
    assert size.verdict == "differs in setting" and size.ours == "d 40"
    table["evaluated users"] = rep.NOTE_TEST_USERS // 2                # half the note's test set
    assert rep.claims(config, table, curves, crossings)[-1].verdict == "reproduced"


def test_lastfm_positives_are_listened_artists_with_enough_listeners(tmp_path, monkeypatch):
    folder = tmp_path / "hetrec-lastfm-2k"
    folder.mkdir()
    rows = [(2, 51, 13883), (2, 52, 11690), (3, 51, 5), (4, 51, 1), (4, 52, 7), (4, 53, 3)]
    (folder / "user_artists.dat").write_text(
        "userID\tartistID\tweight\n" + "".join(f"{u}\t{a}\t{w}\n" for u, a, w in rows))
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path))
    config = dataclasses.replace(study.PRESETS["smoke"], lastfm_min_item=2)
    assert fold.sources(dataclasses.replace(config, lastfm_file="hetrec-lastfm-2k/user_artists.dat")
                         ) == ["simulated", fold.LASTFM]
    positives = fold._positives(jax.random.key(0), dataclasses.replace(
        config, lastfm_file="hetrec-lastfm-2k/user_artists.dat"), fold.LASTFM)
    # artist 53 has one listener and is dropped; every other listened pair is a positive
    assert positives.dtype == bool and positives.shape == (3, 2) and positives.nnz == 5


def test_compute_matches_the_run_records_and_the_declared_columns(tiny_run, tiny_shared):
    """compute(root key, config, cell, setup(root key, config)) gives the run's records again
    (the cell's wall time aside) and they pass the runner's column check."""
    config, root, shared = TINY, jax.random.key(0), tiny_shared
    stored = runner.records_frame(study.STUDY,
                                  pd.read_csv(tiny_run / "records.csv").to_numpy().tolist())
    for cell in ({"data": "simulated", "model": "EASE"}, {"data": "simulated", "model": "iALS"}):
        rows = runner.check_records(study.STUDY, cell, fold.compute(root, config, cell, shared))
        fresh = runner.records_frame(study.STUDY, rows)
        theirs = stored[stored.model == cell["model"]].reset_index(drop=True)
        columns = [c for c in study.COLUMNS if c != "seconds"]
        pd.testing.assert_frame_equal(fresh[columns], theirs[columns], check_exact=True)
        evaluated = fresh[fresh.protocol.isin(["strong", "weak"])]
        assert len(evaluated) == config.max_known + 2              # the curve, MANDCG, weak
        assert (fresh.protocol == "validation").sum() == len(fold.model_grid(config, cell["model"]))


def test_every_config_field_is_documented():
    """The study's own fields (the nested `WorldConfig` is documented in simrec.world)."""
    assert all(meaning for name, _, _, meaning in runner.config_help(study.PRESETS["default"])
               if not name.startswith("world."))


@pytest.mark.parametrize("overrides", [{"max_known": 0}, {"lastfm_max_known": 0}, {"held_out_fraction": 1.0},
                                       {"held_out_fraction": 0.6, "validation_fraction": 0.4},
                                       {"ials_l2s": (0.0,)}, {"level": 1.5}, {"pairs": 0},
                                       {"batch_size": 0}, {"ials_sweeps": 0}, {"knn_ks": ()},
                                       {"adg_l2s": (0.1, 0.1)}, {"knn_ks": (10.5,)},
                                       {"stop_every": 0}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ConfigError, match=next(iter(overrides))):
        dataclasses.replace(study.PRESETS["default"], **overrides)


def test_too_few_eligible_users_name_the_setting_to_lower(monkeypatch):
    monkeypatch.setattr(fold, "_positives", lambda key, config, name: _train(users=10, items=12))
    with pytest.raises(ValueError, match="hetrec-lastfm: only 0 users .* lower max_known / lastfm_max_known"):
        fold.prepare(jax.random.key(0), dataclasses.replace(TINY, lastfm_max_known=20), "hetrec-lastfm")


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(study.PRESETS["default"], ratings_file="no/such.csv",
                                 lastfm_file="no/such.dat")
    assert fold.cells(config) == [{"data": "simulated", "model": m} for m in fold.MODELS]

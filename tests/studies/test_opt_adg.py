"""Study opt_adg (Lim Table 1): smoke run structure and invariants, the records of a cell,
selection by validation ADG, the paired-test marking, the model specs, and byte-identical reruns
from the cell cache."""
import dataclasses
import importlib
import math
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import models, runner
from simrec_studies import opt_adg
from simrec_studies.common import lim, lim_report

opt_adg_report = importlib.import_module("simrec_studies.opt_adg.report")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("opt_adg")
    config = opt_adg.PRESETS["smoke"]
    first = runner.run(opt_adg.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return config, out, first


def _records(out) -> pd.DataFrame:
    rows = pd.read_csv(out / "records.csv").to_numpy().tolist()
    return runner.records_frame(opt_adg.STUDY, rows)


def test_smoke_tables_have_one_row_per_dataset_and_metric(smoke_run):
    config, out, first = smoke_run
    assert first.cells_computed == first.cells_total == len(lim.cells(config))
    main = pd.read_csv(out / "table_main.csv")
    assert list(main.metric) == [lim_report.LABELS[m] for m in lim.METRICS]
    assert set(config.methods) <= set(main.columns)
    long = pd.read_csv(out / "table_long.csv")
    assert len(long) == len(config.methods) * len(lim.METRICS)
    assert long["mean"].between(0, 1).all() and (long.se >= 0).all()
    assert (long.folds == config.data.n_folds).all()
    for name in ("table_main.md", "table_main.tex", "fig_metrics.png", "manifest.json", "records.csv",
                 "table_lim.csv", "table_convergence.csv", "fig_curves_tiny.png"):
        assert (out / name).exists(), name
    selected = pd.read_csv(out / "table_selected.csv", keep_default_na=False)
    assert {"at grid edge", "not searched", "epochs", "budget", "net_hit"} <= set(selected.columns)
    assert len(selected) == len(lim.cells(config)) * config.data.n_folds
    beside_lim = pd.read_csv(out / "table_lim.csv")
    assert len(beside_lim) == len(lim.METRICS)
    assert set(beside_lim["MF-ADG vs MF-AUC"]) <= {"better", "worse", "n.s."}
    convergence = pd.read_csv(out / "table_convergence.csv")
    assert set(convergence.method) == {"mf_auc", "mf_adg"}
    # Lim §6's ATOP ≈ AUC: AUC is recorded beside the metrics, and the gap is the exact affine relation's
    gap = pd.read_csv(out / "table_atop_auc.csv")
    assert set(gap.method) == set(config.methods) and (gap.AUC.between(0, 1)).all()
    np.testing.assert_allclose(gap["ATOP − AUC"], gap.ATOP - gap.AUC, atol=1e-8)
    assert "table_atop_auc" in set(pd.read_csv(out / "table_claims.csv").evidence)


def _replayed_search(method, training, value):
    """The settings the search visits, in order (`lim.compute`'s procedure: `grid`, then
    `refine`, each followed by up to `edge_steps` `beyond_edge` steps), given value[(l2, lr, rank,
    weight)] -> validation ADG."""
    key = lambda s: (s["l2"], s["lr"], s["rank"], s["weight"])
    searched = []
    best = lambda: max(searched, key=lambda s: value[key(s)])   # max keeps the first of equals
    for axis in (0, 1):
        searched += lim.grid(method, training) if axis == 0 else \
            lim.refine(method, training, best())
        for _ in range(training.edge_steps):
            more = lim.beyond_edge(method, searched, best(), axis)
            if not more:
                break
            searched += more
    return [key(s) for s in searched]


def test_a_cell_records_its_search_the_selected_models_and_their_curves(smoke_run):
    """One cell per (dataset, method): on fold 0 every searched setting on the held-out validation
    split, then the best one (validation ADG) retrained on every other fold; each fold's selected
    model on both protocols and every set, and one curve record per early-stopping evaluation of
    the trained methods, as declared columns."""
    config, out, _ = smoke_run
    records = _records(out)
    assert list(records.columns) == list(lim.COLUMNS)
    n_metrics = len(lim.METRICS + lim.CHECKED)
    full = len(lim.PROTOCOLS) * len(lim.SETS) * n_metrics
    for cell in lim.cells(config):
        part = records[(records.dataset == cell["dataset"]) & (records.method == cell["method"])]
        assert set(part.fold) == set(range(config.data.n_folds))
        evaluated = part[part.protocol != lim.CURVE]
        search = evaluated[evaluated.fold == 0]
        first = lim.grid(cell["method"], config.training)
        points = list(dict.fromkeys(zip(search.l2, search.lr, search["rank"], search.weight)))
        assert points[:len(first)] == [(s["l2"], s["lr"], s["rank"], s["weight"]) for s in first]
        valid = search[(search.set == "valid") & (search.protocol == lim.HELD_OUT)
                       & (search.metric == "adg")]
        assert points == _replayed_search(cell["method"], config.training, dict(zip(
            zip(valid.l2, valid.lr, valid["rank"], valid.weight), valid.value)))
        assert len(search) == len(points) * n_metrics + full - n_metrics
        best = valid.iloc[int(np.argmax(valid.value.to_numpy()))]
        for fold in range(config.data.n_folds):
            mine = evaluated[evaluated.fold == fold]
            tested = mine[mine.set == "test"]
            assert set(zip(tested.l2, tested.lr, tested["rank"])) == {(best.l2, best.lr, best["rank"])}
            assert set(mine.protocol) == set(lim.PROTOCOLS) and set(mine.set) == set(lim.SETS)
            if fold:
                assert len(mine) == full
        curve = part[part.protocol == lim.CURVE]
        if cell["method"] in lim.MF_METHODS:
            for fold, point in [(0, p) for p in points] + [(f, tuple(best[["l2", "lr", "rank", "weight"]]))
                                                          for f in range(1, config.data.n_folds)]:
                mine = curve[(curve.fold == fold) & (curve.l2 == point[0]) & (curve.lr == point[1])]
                assert len(mine) >= 1 and (mine.metric == "adg").all()
                assert mine.budget.is_monotonic_increasing
        else:
            assert curve.empty and (part.epochs == 0).all() and (~part.net_hit).all()


def test_search_steps_past_the_edge_its_best_value_sits_on():
    settings = [{"l2": l2, "lr": 0.1, "rank": 0, "weight": 0.0} for l2 in (0.001, 0.01, 0.1)]
    low, inside, high = settings
    assert lim.beyond_edge("mf_adg", settings, inside, 0) == []
    assert lim.beyond_edge("mf_adg", settings, high, 0) == [{**high, "l2": pytest.approx(1.0)}]
    assert lim.beyond_edge("mf_auc", settings, low, 0) == [{**low, "l2": pytest.approx(1e-4)}]
    # the learning-rate axis: the ratio of the two values nearest the edge (0.1 / 0.03), at the best λ
    rates = [{**inside, "lr": lr} for lr in (0.03, 0.1, 0.3)]
    assert lim.beyond_edge("mf_adg", rates, rates[0], 1) == [{**inside, "lr": pytest.approx(0.009)}]
    assert lim.beyond_edge("mf_adg", rates[:1], rates[0], 1) == []        # one value: no ratio
    assert lim.beyond_edge("svd", [{"rank": 5}, {"rank": 10}], {"rank": 10}, 0) == []
    with pytest.raises(ValueError, match="edge_steps"):
        lim.TrainConfig(edge_steps=-1)


def test_convergence_is_read_off_the_curve():
    """Epochs and budget of the returned checkpoint (`simrec.models.best_checkpoint`); the net
    ended training when fewer than `patience` evaluations follow it."""
    training = lim.TrainConfig(patience=2)
    train = sp.csr_matrix(np.eye(10, 40, dtype=bool))             # nnz 10
    fitted = lim.Fitted({}, None, 0.0, ((20, 0.1), (40, 0.3), (60, 0.3), (80, 0.2)), (40, 0.3))
    assert lim.convergence("mf_adg", fitted, train, training) == \
        {"epochs": 4, "budget": 40, "net_hit": False}
    rising = lim.Fitted({}, None, 0.0, ((20, 0.1), (40, 0.2), (60, 0.25), (80, 0.3)), (80, 0.3))
    assert lim.convergence("mf_auc", rising, train, training)["net_hit"]
    assert lim.convergence("ials", rising, train, training) == \
        {"epochs": 80, "budget": 80, "net_hit": True}
    assert lim.convergence("svd", lim.Fitted({}, None, 0.0), train, training) == \
        {"epochs": 0, "budget": 0, "net_hit": False}


def test_grid_is_searched_primary_axis_first_then_secondary():
    training = lim.TrainConfig(l2s=(0.001, 0.01, 0.1, 1.0), learning_rates=(0.03, 0.1, 0.3),
                                   ials_l2s=(1.0, 10.0, 100.0), ials_weights=(0.01, 0.1, 1.0))
    first = lim.grid("mf_adg", training)
    assert [(s["l2"], s["lr"]) for s in first] == [(0.001, 0.1), (0.01, 0.1), (0.1, 0.1), (1.0, 0.1)]
    second = lim.refine("mf_adg", training, first[2])
    assert [(s["l2"], s["lr"]) for s in second] == [(0.1, 0.03), (0.1, 0.3)]
    assert [(s["l2"], s["weight"]) for s in lim.grid("ials", training)] == \
        [(1.0, 0.1), (10.0, 0.1), (100.0, 0.1)]
    assert [s["rank"] for s in lim.grid("svd", training)] == list(training.svd_ranks)
    assert lim.refine("svd", training, lim.grid("svd", training)[0]) == []
    assert lim.grid("popularity", training) == [{"l2": 0.0, "lr": 0.0, "rank": 0, "weight": 0.0}]


def test_default_grids_are_wide_and_log_spaced():
    training = opt_adg.PRESETS["default"].training
    assert min(training.l2s) <= 1e-3 and max(training.l2s) >= 1.0
    assert max(training.learning_rates) / min(training.learning_rates) >= 10 - 1e-9
    assert len(training.l2s) >= 4 and len(training.learning_rates) >= 3 and len(training.svd_ranks) >= 3
    ratios = np.diff(np.log(sorted(training.l2s)))
    assert ratios.max() <= math.log(10) + 1e-9          # at most a decade between λ values


def test_grid_edges_flag_a_selection_at_the_end_of_an_axis():
    """`grid_edges` runs `simrec.models.select` over each cell's validation ADG: here the best λ
    is the largest searched (an edge) and the learning rate is inside its grid."""
    rows = []
    for l2, value in ((0.01, 0.1), (0.1, 0.2), (1.0, 0.3)):
        rows += _fake("mf_adg", 0, l2, value, [0.0] * 5)
    for lr, value in ((0.03, 0.25), (0.3, 0.2)):
        rows += _fake("mf_adg", 0, 1.0, value, [0.0] * 5, lr=lr)
    edges = opt_adg_report.grid_edges(_frame(rows))
    assert edges.loc[0, "at grid edge"] == "l2" and edges.loc[0, "not searched"] == ""


def test_hetrec_loads_every_listened_artist_as_a_positive(tmp_path, monkeypatch):
    """A HetRec-format fixture (tab-separated, header userID artistID weight): every listed pair
    is a positive whatever its count, and the dataset gets its folds; absent files are skipped."""
    folder = tmp_path / "hetrec-lastfm-2k"
    folder.mkdir()
    lines = ["userID\tartistID\tweight"] + [f"{u}\t{a}\t{1 + (u * a) % 7}"
                                            for u in range(2, 22) for a in range(50, 80) if (u + a) % 3]
    (folder / "user_artists.dat").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path))
    data = lim.DataConfig(n_folds=2, ratings_file="")
    observed = lim.listened(folder / "user_artists.dat")
    assert observed.dtype == bool and observed.shape == (20, 30) and observed.nnz == len(lines) - 1
    listeners = np.asarray(observed.sum(axis=0)).ravel()             # 13 or 14 per artist
    popular = lim.listened(folder / "user_artists.dat", min_listeners=14)
    assert popular.shape[1] == int((listeners >= 14).sum()) < observed.shape[1]   # users left
    assert np.diff(popular.indptr).min() >= 1                          # without artists go too
    assert popular.nnz == int(listeners[listeners >= 14].sum())
    assert lim.datasets((), True, data) == [lim.HETREC]
    ds = lim.make_dataset(jax.random.key(0), data, lim.HETREC)
    assert ds.world is None and ds.unobserved is None and len(ds.splits) == 2
    assert (ds.observed != observed).nnz == 0
    config = opt_adg.OptADGConfig(worlds=(), methods=("oracle", "popularity"), data=data)
    assert lim.cells(config) == [{"dataset": lim.HETREC, "method": "popularity"}]
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path / "nowhere"))
    with pytest.warns(UserWarning, match="hetrec-lastfm-2k"):
        assert lim.datasets((), True, data) == []


@pytest.mark.skipif(not (Path(__file__).resolve().parents[3] / "shared/data/hetrec-lastfm-2k/user_artists.dat").is_file(),
                    reason="HetRec last.fm data not present")
def test_hetrec_shipped_file_has_the_documented_size():
    observed = lim.listened(Path(__file__).resolve().parents[3] / "shared/data/hetrec-lastfm-2k/user_artists.dat")
    assert observed.shape == (1892, 17632) and observed.nnz == 92834
    kept = lim.listened(Path(__file__).resolve().parents[3] / "shared/data/hetrec-lastfm-2k/user_artists.dat",
                            lim.DataConfig().hetrec_min_listeners)
    listeners = np.asarray(observed.sum(axis=0)).ravel()
    assert kept.shape[1] == int((listeners >= 10).sum()) and kept.nnz == int(listeners[listeners >= 10].sum())


def test_oracle_beats_popularity_on_the_tiny_world(smoke_run):
    _, out, _ = smoke_run
    long = pd.read_csv(out / "table_long.csv").set_index(["method", "metric"])["mean"]
    assert long["oracle", "ADG"] > long["popularity", "ADG"]
    assert long["oracle", "ATOP"] > long["popularity", "ATOP"]


def test_rerun_comes_from_the_cache_and_is_identical(smoke_run):
    config, out, first = smoke_run
    before = {f: (out / f).read_bytes() for f in first.files if f.endswith((".csv", ".md", ".tex"))}
    second = runner.run(opt_adg.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    assert second.cells_computed == 0
    after = {f: (out / f).read_bytes() for f in before}
    assert {f: v for f, v in after.items() if f != "README.md"} == \
        {f: v for f, v in before.items() if f != "README.md"}


def test_compute_matches_the_cached_records_and_the_declared_columns(smoke_run):
    """compute(root key, config, cell, setup(root key, config)) gives the run's records again
    (except the fit time), and they pass the runner's column check."""
    config, out, _ = smoke_run
    root = jax.random.key(0)
    shared = opt_adg.STUDY.setup(root, config)
    cell = {"dataset": "tiny", "method": "mf_auc"}
    rows = lim.compute(root, config, cell, shared)
    fresh = runner.records_frame(opt_adg.STUDY, runner.check_records(opt_adg.STUDY, cell, rows))
    stored = _records(out)
    stored = stored[stored.method == "mf_auc"].reset_index(drop=True)
    columns = [c for c in lim.COLUMNS if c != "train_seconds"]
    pd.testing.assert_frame_equal(fresh[columns], stored[columns], check_exact=True)


def _fake(method, fold, l2, valid_adg, test_values, protocol=lim.HELD_OUT, lr=0.1):
    """Records of one fake model: validation ADG and test values per metric."""
    base = {"dataset": "d", "fold": fold, "method": method, "l2": l2, "lr": lr, "rank": 0,
            "weight": 0.0, "epochs": 1, "budget": 10, "net_hit": False, "train_seconds": 0.0,
            "protocol": protocol}
    return ([{**base, "set": "valid", "metric": m, "value": valid_adg, "size": 1.0}
             for m in lim.METRICS]
            + [{**base, "set": "test", "metric": m, "value": v, "size": 2.0}
               for m, v in zip(lim.METRICS, test_values)])


def _frame(rows) -> pd.DataFrame:
    return runner.records_frame(opt_adg.STUDY, runner.check_records(opt_adg.STUDY, {}, rows))


def test_selection_takes_the_best_validation_adg_and_marks_significant_wins():
    rows = []
    for fold in range(4):
        noise = 0.001 * fold
        # MF-ADG: the larger λ validates better, and its test values are clearly higher
        rows += (_fake("mf_adg", fold, 0.01, 0.2, [0.0] * 5)
                 + _fake("mf_adg", fold, 0.1, 0.3, [0.5 + noise, 0.3 + noise, 0.4, 0.2 + 2 * noise, 0.3])
                 + _fake("mf_auc", fold, 0.01, 0.25, [0.5 + noise, 0.1, 0.2 - noise, 0.1, 0.1 + noise])
                 + _fake("mf_auc", fold, 0.1, 0.1, [0.9] * 5)
                 # the other protocol never decides the selection
                 + _fake("mf_auc", fold, 0.1, 0.9, [0.9] * 5, protocol=lim.COMMON))
    chosen = lim_report.selected(_frame(rows))
    test = chosen[chosen.set == "test"]
    assert set(test[test.method == "mf_adg"].l2) == {0.1}
    assert set(test[test.method == "mf_auc"].l2) == {0.01}
    config = opt_adg.OptADGConfig(worlds=(), methods=("mf_auc", "mf_adg"), real=False)
    wide, long, settings = opt_adg_report._tables(config, _frame(rows))
    wide = wide.set_index("metric")
    assert wide.loc["ATOP", "better"] == "–"            # identical values: p = 1
    assert wide.loc["ATOP", "p (ADG vs AUC)"] == 1.0
    for label in ("MAP", "NDCG", "Recall@10", "ADG"):
        assert wide.loc[label, "better"] == "mf_adg"
        assert wide.loc[label, "mf_adg"].startswith("**")
    # the standard error is the sample SD over folds / sqrt(folds)
    recall = long[(long.method == "mf_adg") & (long.metric == "Recall@10")].iloc[0]
    values = 0.2 + 2 * 0.001 * np.arange(4)
    assert recall["mean"] == pytest.approx(values.mean())
    assert recall.se == pytest.approx(values.std(ddof=1) / math.sqrt(4))
    assert len(settings) == 2 * 4 and set(settings.l2[settings.method == "mf_auc"]) == {0.01}
    # the claims set Lim's Table 1 beside ours on a paper-like world (dataset "d" renamed "amazon")
    amazon = _frame(rows).assign(dataset="amazon")
    claims = {c.claim.split(": ")[0]: c for c in opt_adg_report.claims(amazon, opt_adg_report.lim_comparison(amazon))}
    assert claims["Amazon Games (amazon-like world), ATOP"].verdict == "reproduced"       # identical: n.s.
    assert claims["Amazon Games (amazon-like world), MAP"].verdict == "reproduced"        # MF-ADG better
    assert claims["Amazon Games (amazon-like world), MAP"].source_value == "MF-ADG 0.0124 vs MF-AUC 0.0104"
    differences = (0.3 + 0.001 * np.arange(4)) - 0.1
    assert claims["Amazon Games (amazon-like world), MAP"].se == pytest.approx(differences.std(ddof=1) / 2)


def test_selection_ties_go_to_the_first_setting_of_the_grid():
    rows = _fake("svd", 0, 0.0, 0.3, [0.1] * 5) + _fake("svd", 0, 0.5, 0.3, [0.2] * 5)
    chosen = lim_report.selected(_frame(rows))
    assert set(chosen.l2) == {0.0}


def test_paired_p_value_matches_the_t_formula():
    a, b = np.array([0.30, 0.32, 0.29, 0.35]), np.array([0.28, 0.31, 0.29, 0.30])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    from scipy.stats import t as student
    assert opt_adg_report._paired(a, b) == pytest.approx(2 * student.sf(abs(t), len(d) - 1))


def test_relative_complement_is_set_difference():
    whole = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 1, 1, 0]], bool))
    part = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 0, 1, 0]], bool))
    np.testing.assert_array_equal(lim._relative_complement(whole, part).toarray(),
                                  [[False, True, False, False], [False, True, False, False]])


def test_model_specs_carry_the_grid_point_and_the_training_config():
    training = lim.TrainConfig(dim=8, gamma=20.0, batch_size=64, optimizer="sgd", ials_sweeps=3,
                                   eval_epochs=3, patience=4)
    train = sp.csr_matrix(np.eye(6, 40, dtype=bool))               # nnz 6
    setting = {"l2": 0.05, "lr": 0.2, "rank": 50, "weight": 0.3}
    stopping = models.EarlyStopping(every=18, metric="adg", patience=4)   # 3 epochs of pairs
    adg = lim.model_spec("mf_adg", setting, training, train)
    assert adg == models.MFSpec(models.OptADG(dim=8, gamma=20.0), l2=0.05, learning_rate=0.2,
                                optimizer="sgd", batch_size=64, early_stopping=stopping)
    auc = lim.model_spec("mf_auc", setting, training, train)
    assert auc.objective == models.MFAUC(dim=8) and auc.l2 == 0.05 and auc.early_stopping == stopping
    assert lim.model_spec("ials", setting, training, train) == models.IALSSpec(
        dim=8, l2=0.05, unobserved_weight=0.3, sweeps=3,
        early_stopping=models.EarlyStopping(every=1, metric="adg", patience=4))
    # the SVD rank is clipped below min(U, I)
    assert lim.model_spec("svd", setting, training, train) == models.SVDSpec(dim=5)
    assert lim.model_spec("popularity", setting, training, train) == models.PopularitySpec()


@pytest.mark.parametrize("kwargs, word", [(dict(worlds=("nowhere",)), "worlds"),
                                          (dict(methods=("bpr",)), "methods")])
def test_config_rejects_unknown_names(kwargs, word):
    with pytest.raises(ValueError, match=word):
        opt_adg.OptADGConfig(**kwargs)


def test_data_and_training_configs_validate():
    with pytest.raises(ValueError, match="n_folds"):
        lim.DataConfig(n_folds=1)
    with pytest.raises(ValueError, match="fractions"):
        lim.DataConfig(fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="optimizer"):
        lim.TrainConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match="l2s"):
        lim.TrainConfig(l2s=())
    with pytest.raises(ValueError, match="pairs"):
        lim.TrainConfig(pairs=0)
    with pytest.raises(ValueError, match="ials_sweeps"):
        lim.TrainConfig(ials_sweeps=0)
    with pytest.raises(ValueError, match="patience"):
        lim.TrainConfig(patience=0)
    with pytest.raises(ValueError, match="learning_rates"):
        lim.TrainConfig(learning_rates=(0.1, 0.1))
    with pytest.raises(ValueError, match="ials_weights"):
        lim.TrainConfig(ials_weights=(0.0,))


def test_every_config_field_is_documented():
    assert all(meaning for _, _, _, meaning in runner.config_help(opt_adg.PRESETS["default"]))


def test_ials_cell_searches_lambda_then_weight_with_early_stopping():
    """iALS: λ at the middle unobserved weight, then the other weights at the best λ; every
    setting stops early on validation ADG (curves in sweeps) within the sweep safety net."""
    smoke = opt_adg.PRESETS["smoke"]
    training = dataclasses.replace(smoke.training, ials_l2s=(0.1, 1.0, 10.0),
                                   ials_weights=(0.01, 0.1, 1.0), ials_sweeps=6)
    config = dataclasses.replace(smoke, methods=("ials",), training=training)
    root = jax.random.key(0)
    rows = pd.DataFrame(lim.compute(root, config, {"dataset": "tiny", "method": "ials"},
                                        opt_adg.STUDY.setup(root, config)))
    search = rows[(rows.fold == 0) & (rows.protocol == lim.HELD_OUT) & (rows.set == "valid")
                  & (rows.metric == "adg")]
    assert list(zip(search.l2, search.weight))[:3] == [(0.1, 0.1), (1.0, 0.1), (10.0, 0.1)]
    best_l2 = search.l2.iloc[int(np.argmax(search.value.to_numpy()[:3]))]
    assert list(zip(search.l2, search.weight))[3:] == [(best_l2, 0.01), (best_l2, 1.0)]
    curve = rows[rows.protocol == lim.CURVE]
    assert not curve.empty and curve.budget.between(1, 6).all()
    assert (curve.epochs == curve.budget).all()           # iALS budget: sweeps


@pytest.mark.parametrize("name", ["opt_adg", "valid_vs_test"])
def test_a_report_only_edit_changes_no_cell_address(name):
    """Both studies compute with the shared experiment (`simrec_studies.common.lim`); their code
    version hashes that side only, so an edit of a report (or of what only the reports import: the
    shared report helpers, the report kit) re-renders from the cached cells, and the two studies
    have one code version."""
    study = importlib.import_module(f"simrec_studies.{name}").STUDY
    assert study.module == "simrec_studies.common.lim"
    assert runner.report_module(study) == f"simrec_studies.{name}.report"
    closure = runner.module_closure(study.module, ("simrec_studies", "simrec"), [runner.report_module(study)])
    assert "simrec_studies.common.lim" in closure
    assert not {f"simrec_studies.{name}.report", "simrec_studies.common.lim_report", "simrec.reporting"} & set(closure)
    assert runner.code_version(study) == runner.code_version(opt_adg.STUDY)

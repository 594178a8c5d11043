"""Study opt_adg (Lim Table 1): smoke run structure and invariants, the records of a cell,
selection by validation ADG, the paired-test marking, the model specs, and byte-identical reruns
from the cell cache."""
import inspect
import math

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import models, runner
from simrec_studies import opt_adg


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
    assert first.cells_computed == first.cells_total == len(opt_adg.cells(config))
    main = pd.read_csv(out / "table_main.csv")
    assert list(main.metric) == [opt_adg.LABELS[m] for m in opt_adg.METRICS]
    assert set(config.methods) <= set(main.columns)
    long = pd.read_csv(out / "table_long.csv")
    assert len(long) == len(config.methods) * len(opt_adg.METRICS)
    assert long["mean"].between(0, 1).all() and (long.se >= 0).all()
    assert (long.folds == config.data.n_folds).all()
    for name in ("table_main.md", "table_main.tex", "fig_metrics.png", "manifest.json", "records.csv"):
        assert (out / name).exists(), name


def test_a_cell_records_every_setting_protocol_set_and_metric(smoke_run):
    """One cell per (dataset, fold, method); it holds the method's whole grid, both protocols,
    valid/test/unobserved (a simulated world) and every metric, as declared columns."""
    config, out, _ = smoke_run
    records = _records(out)
    assert list(records.columns) == list(opt_adg.COLUMNS)
    for cell in opt_adg.cells(config):
        part = records[(records.dataset == cell["dataset"]) & (records.fold == cell["fold"])
                       & (records.method == cell["method"])]
        settings = opt_adg.grid(cell["method"], config.training)
        per_setting = len(opt_adg.PROTOCOLS) * len(opt_adg.SETS) * len(opt_adg.METRICS)
        assert len(part) == len(settings) * per_setting
        assert set(zip(part.l2, part.lr, part["rank"])) == \
            {(s["l2"], s["lr"], s["rank"]) for s in settings}
        assert set(part.protocol) == set(opt_adg.PROTOCOLS) and set(part.set) == set(opt_adg.SETS)
    shared = opt_adg.STUDY.setup(jax.random.key(0), config)
    mf = records.method.isin(["mf_auc", "mf_adg"])
    for fold, split in enumerate(shared.datasets["tiny"].splits):      # ⌈pairs / nnz(train)⌉
        assert (records[mf & (records.fold == fold)].epochs
                == opt_adg.epochs(config.training, split.train)).all()
    assert (records[~mf].epochs == 0).all()


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
    cell = {"dataset": "tiny", "fold": 1, "method": "mf_auc"}
    rows = opt_adg.compute(root, config, cell, shared)
    fresh = runner.records_frame(opt_adg.STUDY, runner.check_records(opt_adg.STUDY, cell, rows))
    stored = _records(out)
    stored = stored[(stored.fold == 1) & (stored.method == "mf_auc")].reset_index(drop=True)
    columns = [c for c in opt_adg.COLUMNS if c != "train_seconds"]
    pd.testing.assert_frame_equal(fresh[columns], stored[columns], check_exact=True)


def test_the_module_keeps_no_state():
    """No memo of shared state and no key round trips: state comes from setup, keys from the runner."""
    assert not [name for name, value in vars(opt_adg).items() if hasattr(value, "cache_info")]
    source = inspect.getsource(opt_adg)
    for banned in ("lru_cache", "functools.cache", "wrap_key_data", "key_id"):
        assert banned not in source, banned


def _fake(method, fold, l2, valid_adg, test_values, protocol=opt_adg.HELD_OUT):
    """Records of one fake model: validation ADG and test values per metric."""
    base = {"dataset": "d", "fold": fold, "method": method, "l2": l2, "lr": 0.1, "rank": 0,
            "epochs": 1, "train_seconds": 0.0, "protocol": protocol}
    return ([{**base, "set": "valid", "metric": m, "value": valid_adg, "size": 1.0}
             for m in opt_adg.METRICS]
            + [{**base, "set": "test", "metric": m, "value": v, "size": 2.0}
               for m, v in zip(opt_adg.METRICS, test_values)])


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
                 + _fake("mf_auc", fold, 0.1, 0.9, [0.9] * 5, protocol=opt_adg.COMMON))
    chosen = opt_adg.selected(_frame(rows))
    test = chosen[chosen.set == "test"]
    assert set(test[test.method == "mf_adg"].l2) == {0.1}
    assert set(test[test.method == "mf_auc"].l2) == {0.01}
    config = opt_adg.OptADGConfig(worlds=(), methods=("mf_auc", "mf_adg"), real=False)
    wide, long, settings = opt_adg._tables(config, _frame(rows))
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


def test_selection_ties_go_to_the_first_setting_of_the_grid():
    rows = _fake("svd", 0, 0.0, 0.3, [0.1] * 5) + _fake("svd", 0, 0.5, 0.3, [0.2] * 5)
    chosen = opt_adg.selected(_frame(rows))
    assert set(chosen.l2) == {0.0}


def test_paired_p_value_matches_the_t_formula():
    a, b = np.array([0.30, 0.32, 0.29, 0.35]), np.array([0.28, 0.31, 0.29, 0.30])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    from scipy.stats import t as student
    assert opt_adg._paired(a, b) == pytest.approx(2 * student.sf(abs(t), len(d) - 1))


def test_relative_complement_is_set_difference():
    whole = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 1, 1, 0]], bool))
    part = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 0, 1, 0]], bool))
    np.testing.assert_array_equal(opt_adg._relative_complement(whole, part).toarray(),
                                  [[False, True, False, False], [False, True, False, False]])


def test_model_specs_carry_the_grid_point_and_the_training_config():
    training = opt_adg.TrainConfig(dim=8, gamma=20.0, batch_size=64, optimizer="sgd", ials_sweeps=3)
    train = sp.csr_matrix(np.eye(6, 40, dtype=bool))
    setting = {"l2": 0.05, "lr": 0.2, "rank": 50}
    adg = opt_adg.model_spec("mf_adg", setting, training, train)
    assert adg == models.MFSpec(models.OptADG(dim=8, gamma=20.0), l2=0.05, learning_rate=0.2,
                                optimizer="sgd", batch_size=64)
    auc = opt_adg.model_spec("mf_auc", setting, training, train)
    assert auc.objective == models.MFAUC(dim=8) and auc.l2 == 0.05
    assert opt_adg.model_spec("ials", setting, training, train) == \
        models.IALSSpec(dim=8, l2=0.05, sweeps=3)
    # the SVD rank is clipped below min(U, I)
    assert opt_adg.model_spec("svd", setting, training, train) == models.SVDSpec(dim=5)
    assert opt_adg.model_spec("popularity", setting, training, train) == models.PopularitySpec()


@pytest.mark.parametrize("kwargs, word", [(dict(worlds=("nowhere",)), "worlds"),
                                          (dict(methods=("bpr",)), "methods")])
def test_config_rejects_unknown_names(kwargs, word):
    with pytest.raises(ValueError, match=word):
        opt_adg.OptADGConfig(**kwargs)


def test_data_and_training_configs_validate():
    with pytest.raises(ValueError, match="n_folds"):
        opt_adg.DataConfig(n_folds=1)
    with pytest.raises(ValueError, match="fractions"):
        opt_adg.DataConfig(fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="optimizer"):
        opt_adg.TrainConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match="l2s"):
        opt_adg.TrainConfig(l2s=())
    with pytest.raises(ValueError, match="pairs"):
        opt_adg.TrainConfig(pairs=0)
    with pytest.raises(ValueError, match="ials_sweeps"):
        opt_adg.TrainConfig(ials_sweeps=0)


def test_every_config_field_is_documented():
    assert all(meaning for _, _, _, meaning in runner.config_help(opt_adg.PRESETS["default"]))


def test_epochs_cover_the_pair_budget():
    training = opt_adg.TrainConfig(pairs=1000)
    train = sp.csr_matrix(np.eye(30, 40, dtype=bool))            # 30 positives
    assert opt_adg.epochs(training, train) == 34                 # ceil(1000 / 30)
    assert opt_adg.epochs(opt_adg.TrainConfig(pairs=30), train) == 1

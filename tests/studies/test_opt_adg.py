"""Study opt_adg (Lim Table 1): smoke run structure and invariants, selection by validation ADG,
the paired-test marking, and byte-identical reruns from the cell cache."""
import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import runner
from simrec.runner import CellResult
from studies import opt_adg


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("opt_adg")
    config = opt_adg.PRESETS["smoke"]
    first = runner.run(opt_adg.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return config, out, first


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
    for name in ("table_main.md", "table_main.tex", "fig_metrics.png", "manifest.json"):
        assert (out / name).exists(), name


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


def _fake(method, fold, l2, valid_adg, test_values):
    value = {"valid": {m: valid_adg for m in opt_adg.METRICS},
             "test": dict(zip(opt_adg.METRICS, test_values)),
             "sizes": {"valid": 1.0, "test": 2.0}, "train_seconds": 0.0, "train_positives": 1}
    return CellResult(cell={"dataset": "d", "fold": fold, "method": method, "l2": l2, "lr": 0.1,
                            "rank": 0}, value=value)


def test_selection_takes_the_best_validation_adg_and_marks_significant_wins():
    results = []
    for fold in range(4):
        noise = 0.001 * fold
        # MF-ADG: the larger λ validates better, and its test values are clearly higher
        results += [_fake("mf_adg", fold, 0.01, 0.2, [0.0] * 5),
                    _fake("mf_adg", fold, 0.1, 0.3, [0.5 + noise, 0.3 + noise, 0.4, 0.2 + 2 * noise, 0.3]),
                    _fake("mf_auc", fold, 0.01, 0.25, [0.5 + noise, 0.1, 0.2 - noise, 0.1, 0.1 + noise]),
                    _fake("mf_auc", fold, 0.1, 0.1, [0.9] * 5)]
    chosen = opt_adg.selected(results)
    test = chosen[chosen.set == "test"]
    assert set(test[test.method == "mf_adg"].l2) == {0.1}
    assert set(test[test.method == "mf_auc"].l2) == {0.01}
    config = opt_adg.OptADGConfig(worlds=(), methods=("mf_auc", "mf_adg"), real=False)
    wide, long, _ = opt_adg._tables(config, results)
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
    with pytest.raises(ValueError, match="iterations"):
        opt_adg.TrainConfig(iterations=0)


def test_epochs_cover_the_iteration_budget():
    training = opt_adg.TrainConfig(iterations=1000)
    train = sp.csr_matrix(np.eye(30, 40, dtype=bool))            # 30 positives
    assert opt_adg.epochs(training, train) == 34                 # ceil(1000 / 30)
    assert opt_adg.epochs(opt_adg.TrainConfig(iterations=30), train) == 1


def test_benchmark_runs_without_lightfm(capsys):
    from studies import bench_opt_adg
    code = bench_opt_adg.main(["--presets", "tiny", "--epochs", "1", "--dim", "4",
                               "--scaling-items", "--lightfm-python", "/nonexistent/python"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "simrec OPT-ADG" in printed and "LightFM not found" in printed

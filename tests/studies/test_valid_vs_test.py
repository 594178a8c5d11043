"""Study valid_vs_test (Lim Table 2 extended): smoke structure, Diff% against an independent
recomputation, selection shared with opt_adg, and identical reruns from the cache."""
import numpy as np
import pandas as pd
import pytest

from simrec import runner
from simrec.runner import CellResult
from studies import opt_adg, valid_vs_test


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("valid_vs_test")
    config = valid_vs_test.PRESETS["smoke"]
    first = runner.run(valid_vs_test.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return config, out, first


def test_smoke_table_structure_and_ranges(smoke_run):
    config, out, first = smoke_run
    assert first.cells_total == len(config.methods) * config.data.n_folds
    diff = pd.read_csv(out / "table_diff.csv")
    assert len(diff) == len(valid_vs_test.PROTOCOLS) * len(config.methods) * len(opt_adg.METRICS)
    assert set(diff.protocol) == set(valid_vs_test.PROTOCOLS)
    for column in ("valid", "test", "unobserved"):
        assert diff[column].between(0, 1).all(), column
    assert set(diff.UBM[diff.metric.isin(["ATOP", "ADG", "Recall@10"])]) == {"yes"}
    assert set(diff.UBM[diff.metric.isin(["MAP", "NDCG"])]) == {"no"}
    sizes = pd.read_csv(out / "table_sizes.csv")
    assert (sizes.unobserved > sizes.test).all()          # P+∖O+ is the larger set at rate 1/2
    assert (out / "fig_diff.png").exists()


def test_diff_percent_is_relative_difference_of_fold_means(smoke_run):
    _, out, _ = smoke_run
    diff = pd.read_csv(out / "table_diff.csv")
    for other in ("valid", "unobserved"):
        expected = 100 * (diff[other] - diff.test) / diff.test
        np.testing.assert_allclose(diff[f"Diff% {other}"], expected, rtol=1e-7)  # CSV keeps 10 significant digits


def test_rerun_from_cache_is_identical(smoke_run):
    config, out, first = smoke_run
    before = (out / "table_diff.csv").read_bytes()
    second = runner.run(valid_vs_test.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    assert second.cells_computed == 0
    assert (out / "table_diff.csv").read_bytes() == before


def test_selected_model_is_the_one_opt_adg_selects(smoke_run):
    """Same seed and settings: valid_vs_test's per-fold choice equals opt_adg's selection."""
    config, out, _ = smoke_run
    import jax
    root = jax.random.key(0)
    cells = [c for c in opt_adg.method_cells(["tiny"], ("mf_adg",), config.data, config.training)]
    results = [CellResult(c, opt_adg.fit_and_evaluate(runner.key_id(root), config.data,
                                                       config.training, c["dataset"], c["fold"],
                                                       c["method"], c["l2"], c["lr"], c["rank"]))
               for c in cells]
    chosen = opt_adg.selected(results)
    for fold in range(config.data.n_folds):
        mine = valid_vs_test.compute(root, config, {"dataset": "tiny", "fold": fold, "method": "mf_adg"})
        theirs = chosen[(chosen.fold == fold) & (chosen.set == "test")]
        assert mine["setting"]["l2"] == theirs.l2.iloc[0]
        for spec in opt_adg.METRICS:
            assert mine["test"][spec] == theirs[theirs.metric == spec].value.iloc[0]


def test_diff_table_on_hand_made_results():
    results = []
    for fold, (valid, test, unobserved) in enumerate([(0.2, 0.25, 0.3), (0.3, 0.25, 0.5)]):
        values = {"valid": {m: valid for m in opt_adg.METRICS},
                  "test": {m: test for m in opt_adg.METRICS},
                  "unobserved": {m: unobserved for m in opt_adg.METRICS},
                  "sizes": {"valid": 1.0, "test": 2.0, "unobserved": 9.0}}
        results.append(CellResult({"dataset": "d", "fold": fold, "method": "m"}, values))
    diff = valid_vs_test._diff_table(valid_vs_test._rows(None, results))
    row = diff[diff.metric == "ADG"].iloc[0]
    assert row["Diff% valid"] == pytest.approx(0.0)
    assert row["Diff% unobserved"] == pytest.approx(100 * (0.4 - 0.25) / 0.25)
    # per-fold differences 0.05 and 0.25: mean 0.15, SE = SD/sqrt(2) = 0.1
    assert row["z unobserved"] == pytest.approx(0.15 / 0.1)

"""Study valid_vs_test (Lim Table 2 extended): smoke structure, Diff% against an independent
recomputation, the same fitted models and selection as opt_adg, and identical reruns from the
cache."""
import dataclasses
import importlib
import inspect

import numpy as np
import pandas as pd
import pytest

from simrec import runner
from simrec.models import tuning
from simrec_studies import opt_adg, valid_vs_test
from simrec_studies.common import lim, lim_report

vvt_report = importlib.import_module("simrec_studies.valid_vs_test.report")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("valid_vs_test")
    config = valid_vs_test.PRESETS["smoke"]
    first = runner.run(valid_vs_test.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return config, out, first


def test_smoke_table_structure_and_ranges(smoke_run):
    config, out, first = smoke_run
    assert first.cells_total == len(config.methods)
    diff = pd.read_csv(out / "table_diff.csv")
    assert len(diff) == len(lim.PROTOCOLS) * len(config.methods) * len(lim.METRICS)
    assert set(diff.protocol) == set(lim.PROTOCOLS)
    for column in ("valid", "test", "unobserved"):
        assert diff[column].between(0, 1).all(), column
    assert set(diff.UBM[diff.metric.isin(["ATOP", "ADG", "Recall@10"])]) == {"yes"}
    assert set(diff.UBM[diff.metric.isin(["MAP", "NDCG"])]) == {"no"}
    sizes = pd.read_csv(out / "table_sizes.csv")
    assert (sizes.unobserved > sizes.test).all()          # P+∖O+ is the larger set at rate 1/2
    assert (out / "fig_diff.png").exists() and (out / "records.csv").exists()


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


def test_fits_are_read_from_opt_adgs_store(tmp_path, monkeypatch):
    """After opt_adg (same seed, data, training and cache folder) valid_vs_test trains no model:
    every fit of the shared cell is read from the store of fitted models, and its records equal
    opt_adg's, fit times included."""
    config = valid_vs_test.PRESETS["smoke"]
    theirs = opt_adg.OptADGConfig(worlds=config.worlds, methods=("mf_adg",), real=False, data=config.data,
                                  training=config.training)
    mine = dataclasses.replace(config, methods=("mf_adg",))
    fits = []
    real_fit = tuning.fit
    monkeypatch.setattr(tuning, "fit", lambda *a, **k: fits.append(a[1]) or real_fit(*a, **k))
    runs = {}
    for name, study, study_config in (("opt_adg", opt_adg.STUDY, theirs), ("valid_vs_test", valid_vs_test.STUDY, mine)):
        runner.run(study, study_config, seed=0, out=tmp_path / name, cache_dir=tmp_path / "cache", progress=False)
        runs[name] = pd.read_csv(tmp_path / name / "records.csv")
        if name == "opt_adg":
            trained = len(fits)
    assert trained >= len(lim.grid("mf_adg", config.training)) and len(fits) == trained
    pd.testing.assert_frame_equal(runs["valid_vs_test"], runs["opt_adg"], check_exact=True)


def test_selection_is_opt_adgs(smoke_run):
    """The report selects per fold the setting with the best held-out validation ADG, as opt_adg's."""
    config, out, _ = smoke_run
    stored = pd.read_csv(out / "records.csv")
    frame = runner.records_frame(valid_vs_test.STUDY, stored.to_numpy().tolist())
    chosen = lim_report.selected(frame)
    for fold in range(config.data.n_folds):
        part = frame[(frame.fold == fold) & (frame.method == "mf_adg") & (frame.set == "valid")
                     & (frame.metric == "adg") & (frame.protocol == lim.HELD_OUT)]
        best = part[part.value == part.value.max()].iloc[0]
        mine = chosen[(chosen.fold == fold) & (chosen.method == "mf_adg")]
        assert set(zip(mine.l2, mine.lr)) == {(best.l2, best.lr)}


def _records(fold, valid, test, unobserved) -> list[dict]:
    base = {"dataset": "d", "fold": fold, "method": "m", "l2": 0.0, "lr": 0.0, "rank": 0,
            "weight": 0.0, "epochs": 0, "budget": 0, "net_hit": False, "train_seconds": 0.0,
            "protocol": lim.HELD_OUT}
    return [{**base, "set": name, "metric": m, "value": value, "size": size}
            for name, value, size in (("valid", valid, 1.0), ("test", test, 2.0),
                                      ("unobserved", unobserved, 9.0))
            for m in lim.METRICS]


def test_diff_table_on_hand_made_records():
    rows = _records(0, 0.2, 0.25, 0.3) + _records(1, 0.3, 0.25, 0.5)
    frame = runner.records_frame(valid_vs_test.STUDY,
                                 runner.check_records(valid_vs_test.STUDY, {}, rows))
    diff = vvt_report._diff_table(frame)
    row = diff[diff.metric == "ADG"].iloc[0]
    assert row["Diff% valid"] == pytest.approx(0.0)
    assert row["Diff% unobserved"] == pytest.approx(100 * (0.4 - 0.25) / 0.25)
    # per-fold differences 0.05 and 0.25: mean 0.15, SE = SD/sqrt(2) = 0.1
    assert row["z unobserved"] == pytest.approx(0.15 / 0.1)
    sizes = vvt_report._sizes(frame).set_index("dataset")
    assert sizes.loc["d", "unobserved"] == 9.0 and sizes.loc["d", "test"] == 2.0


def test_report_figure_is_reproducible_and_leaves_numpys_rng_alone(smoke_run):
    """seaborn jitters strips with numpy's global RNG; the figure seeds it and restores it."""
    import io
    import matplotlib.pyplot as plt
    config, out, _ = smoke_run
    frame = runner.records_frame(valid_vs_test.STUDY,
                                 pd.read_csv(out / "records.csv").to_numpy().tolist())
    images = []
    for seed in (1, 2):
        np.random.seed(seed)
        expected = np.random.random()
        np.random.seed(seed)
        figure = vvt_report.report(config, frame).figures["fig_diff"]
        assert np.random.random() == expected
        buf = io.BytesIO()
        figure.savefig(buf, format="png", metadata={"Software": None})
        plt.close(figure)
        images.append(buf.getvalue())
    assert images[0] == images[1]


def test_the_module_keeps_no_state():
    """No memo of shared state and no key round trips: state comes from setup, keys from the runner."""
    for module in (valid_vs_test, vvt_report):
        assert not [name for name, value in vars(module).items() if hasattr(value, "cache_info")]
        source = inspect.getsource(module)
        for banned in ("lru_cache", "functools.cache", "wrap_key_data", "key_id"):
            assert banned not in source, (module.__name__, banned)
    assert valid_vs_test.STUDY.columns == lim.COLUMNS


def test_every_config_field_is_documented():
    assert all(meaning for _, _, _, meaning in runner.config_help(valid_vs_test.PRESETS["default"]))


def test_claims_set_lims_table2_beside_ours():
    """Lim's Table 2 Diff% beside ours on the MovieLens-like world; the verdicts follow the one rule
    (2 SE): a UBM measure is reproduced by a tie, MAP and NDCG by a difference beyond 2 SE below 0."""
    rows = [("ATOP", "yes", -0.1, -0.5), ("ADG", "yes", 5.0, 3.0), ("MAP", "no", -20.0, -5.0),
            ("NDCG", "no", 3.0, 4.0), ("Recall@10", "yes", 0.5, 1.0)]
    diff = pd.DataFrame([{"protocol": lim.PROTOCOLS[0], "dataset": "movielens", "method": "mf_auc", "metric": m,
                          "UBM": u, "Diff% valid": d, "z valid": z} for m, u, d, z in rows]
                        + [{"protocol": lim.PROTOCOLS[1], "dataset": "movielens", "method": "mf_auc", "metric": "MAP",
                            "UBM": "no", "Diff% valid": 1.0, "z valid": 0.1}])
    claims = vvt_report.claims(diff)
    assert [c.verdict for c in claims] == ["reproduced", "not reproduced", "reproduced", "not reproduced",
                                           "reproduced", "tie"]                 # the last: the other protocol
    assert claims[2].source_value == "-24.38 %" and claims[2].ours.startswith("-20.00 %")
    assert claims[-1].ours.endswith(f"{lim.PROTOCOLS[1]})")
    np.testing.assert_allclose([c.se for c in claims], [0.2, 5 / 3, 4.0, 0.75, 0.5, 10.0])

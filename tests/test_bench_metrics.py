"""The metrics benchmark stays runnable, and its numpy baseline agrees with simrec on tie-free data."""
import numpy as np
import pytest

from simrec import cli, metrics
from simrec_studies import bench_metrics


def test_numpy_baseline_matches_simrec_on_tie_free_scores():
    scores, relevant, excluded = bench_metrics.make_data(300, 400, 8, 20, seed=1)
    tie_free = np.array([len(np.unique(row)) == len(row) for row in scores])
    assert tie_free.sum() > 250
    ours = metrics.evaluate(scores, relevant, exclude=excluded, metrics=bench_metrics.SPECS)
    for masks in ((relevant, excluded), (relevant.toarray(), excluded.toarray())):
        base = bench_metrics.numpy_baseline(scores, *masks, block=64)
        for spec in bench_metrics.SPECS:
            np.testing.assert_allclose(ours[spec][tie_free], base[spec][tie_free], rtol=1e-9,
                                       err_msg=spec)


def test_numpy_baseline_gives_nan_to_users_without_relevant_items():
    scores, relevant, excluded = bench_metrics.make_data(20, 50, 3, 5, seed=2)
    relevant = relevant.tolil()
    relevant[4] = 0
    base = bench_metrics.numpy_baseline(scores, relevant.tocsr(), excluded, block=8)
    for spec in bench_metrics.SPECS:
        assert np.isnan(base[spec][4]) and not np.isnan(base[spec][np.arange(20) != 4]).any(), spec


def test_benchmark_main_runs_small_and_times_dense_and_csr_masks(capsys):
    assert bench_metrics.main(["--users", "200", "--items", "300", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for line in ("simrec, dense bool masks", "simrec, CSR masks", "numpy row sort + searchsorted",
                 "dense and CSR masks give identical values: yes", "RecPack unavailable",
                 "numpy baseline / simrec dense ="):
        assert line in out, line


@pytest.mark.parametrize("argv, message", [
    (["--users", "0"], "argument --users: expected an integer >= 1, got 0"),
    (["--items", "0"], "argument --items: expected an integer >= 1, got 0"),
    (["--items", "-5"], "argument --items: expected an integer >= 1, got -5"),
    (["--repeats", "0"], "argument --repeats: expected an integer >= 1, got 0"),
    (["--relevant", "0"], "argument --relevant: expected an integer >= 1, got 0"),
    (["--excluded", "-1"], "argument --excluded: expected an integer >= 0, got -1"),
    (["--users", "ten"], "argument --users: expected an integer >= 1, got 'ten'"),
    (["--items", "10", "--relevant", "8", "--excluded", "5"], "--relevant 8 + --excluded 5 exceeds --items 10"),
])
def test_bad_arguments_are_one_line_with_exit_status_2(capsys, argv, message):
    """`simrec bench metrics --users 0` used to crash inside numpy with a traceback."""
    assert cli.main(["bench", "metrics", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"simrec bench metrics: error: {message}"), captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err

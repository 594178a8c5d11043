"""The metrics benchmark stays runnable, and its numpy baseline agrees with simrec on tie-free data."""
import numpy as np

from simrec import metrics
from studies import bench_metrics


def test_numpy_baseline_matches_simrec_on_tie_free_scores():
    scores, relevant, excluded = bench_metrics.make_data(300, 400, 8, 20, seed=1)
    tie_free = np.array([len(np.unique(row)) == len(row) for row in scores])
    assert tie_free.sum() > 250
    ours = metrics.evaluate(scores, relevant, exclude=excluded, metrics=bench_metrics.SPECS)
    base = bench_metrics.numpy_baseline(scores, relevant, excluded, block=64)
    for spec in bench_metrics.SPECS:
        np.testing.assert_allclose(ours[spec][tie_free], base[spec][tie_free], rtol=1e-9, err_msg=spec)


def test_benchmark_main_runs_small(capsys):
    assert bench_metrics.main(["--users", "200", "--items", "300", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "numpy argsort baseline" in out and "RecPack unavailable" in out

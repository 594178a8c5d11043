import json

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import ope
from simrec_studies import bench_scale


def test_exponents_table_per_stage():
    work = np.array([1e4, 1e5, 1e6])
    points = pd.concat([
        pd.DataFrame({"stage": "simulate", "work": work, "seconds": 1e-6 * work, "baseline_rss_mb": 200.0,
                      "peak_rss_mb": 200 + 1e-3 * work, "work_mb": 1e-4 * work}),
        pd.DataFrame({"stage": "sweep", "work": work, "seconds": 1e-9 * work ** 2, "baseline_rss_mb": 200.0,
                      "peak_rss_mb": 300 + 0 * work, "work_mb": 0.5 + 0 * work})])
    table = bench_scale.exponents_table(points).set_index("stage")
    assert table.loc["simulate", "time_exponent"] == pytest.approx(1.0)
    assert table.loc["simulate", "memory_exponent"] == pytest.approx(1.0)
    assert table.loc["simulate", "work_memory_exponent"] == pytest.approx(1.0)
    assert table.loc["sweep", "time_exponent"] == pytest.approx(2.0)
    assert table.loc["sweep", "memory_exponent"] == pytest.approx(0.0)
    assert table.loc["sweep", "work_memory_exponent"] == pytest.approx(0.0)           # floored at 1 MB
    assert table.loc["simulate", "seconds_at_max"] == pytest.approx(1.0)
    assert table.loc["simulate", "us_per_unit_at_max"] == pytest.approx(1.0)


def test_paper_estimate_follows_its_formula():
    demo = {"users": 1000, "sessions": 1000, "setup_s": 2.0, "sessions_s": 10.0}
    table = bench_scale.paper_estimate(demo, 1.0, users=10_000, sessions=100_000, days=3, speedups=(10.0,),
                                       hosts_gpus=((2, 4),))
    cpu, gpus = table.iloc[0], table.iloc[1]
    assert cpu.setup_s == pytest.approx(20.0) and cpu.day_s == pytest.approx(20.0 + 1000.0)
    assert cpu.basis == "extrapolated by b"
    assert gpus.devices == 8 and gpus.day_s == pytest.approx(20.0 / 10 + 1000.0 / 80)
    assert gpus.study_h == pytest.approx((2.0 + 3 * 1000.0 / 80) / 3600)
    measured = bench_scale.paper_estimate({**demo, "users": 10_000, "sessions": 100_000}, 1.3, users=10_000,
                                          sessions=100_000)
    assert measured.iloc[0].basis == "measured" and measured.iloc[0].day_s == pytest.approx(12.0)
    larger = bench_scale.paper_estimate({**demo, "users": 10_000, "sessions": 400_000}, 1.0, users=10_000,
                                        sessions=100_000)
    assert larger.iloc[0].basis.startswith("measured larger") and larger.iloc[0].day_s == pytest.approx(2.0 + 2.5)


def test_sessions_within_inverts_the_scaling():
    demo = {"sessions": 1000, "setup_s": 10.0, "sessions_s": 20.0}
    assert bench_scale.sessions_within(demo, 90.0, 1.0) == pytest.approx(4000.0)
    assert bench_scale.sessions_within(demo, 90.0, 2.0) == pytest.approx(2000.0)
    assert bench_scale.sessions_within(demo, 5.0, 1.0) == 0.0


def test_scaled_seconds_rejects_bad_sizes():
    assert bench_scale.scaled_seconds(2.0, 10, 1000, 0.5) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="positive work"):
        bench_scale.scaled_seconds(2.0, 0, 1000, 1.0)


def test_pooled_estimate_equals_the_sweep_of_the_whole_log_in_mean():
    key = jax.random.key(3)
    n, k = 3000, 5
    viewed = np.arange(k)[None] < np.asarray(jax.random.randint(key, (n, 1), 1, k + 1))
    rewards = np.asarray(jax.random.uniform(jax.random.fold_in(key, 1), (n, k)) < 0.3) & viewed
    logging = np.where(viewed, np.asarray(jax.random.uniform(jax.random.fold_in(key, 2), (n, k), minval=0.1)), 0)
    target = np.where(viewed, np.asarray(jax.random.uniform(jax.random.fold_in(key, 3), (n, k))), 0)
    m = np.array([1.0, 5.0, np.inf])
    whole = ope.dcg_sweep(rewards, logging, target, viewed, m)
    cuts = [(0, 1000), (1000, 2500), (2500, 3000)]
    parts = [ope.dcg_sweep(rewards[a:b], logging[a:b], target[a:b], viewed[a:b], m) for a, b in cuts]
    value, error = bench_scale.pooled_estimate([b - a for a, b in cuts], [p.value for p in parts],
                                               [p.standard_error for p in parts])
    np.testing.assert_allclose(value, whole.value, rtol=1e-5)
    np.testing.assert_allclose(error, whole.standard_error, rtol=0.05)     # within-chunk variances only
    with pytest.raises(ValueError, match="positive sizes"):
        bench_scale.pooled_estimate([0, 3], [[1.0], [2.0]], [[0.1], [0.1]])


def test_candidate_slots_are_distinct_items_in_range():
    key = jax.random.key(0)
    params = (key, np.int32(bench_scale.SLOT_STRIDE), np.int32(1000))
    contexts = np.arange(500, dtype=np.int32)
    slots = np.broadcast_to(np.arange(10, dtype=np.int32), (500, 10))
    items = np.asarray(bench_scale._slot_items(params, contexts, slots))
    assert items.min() >= 0 and items.max() < 1000
    assert all(len(set(row)) == 10 for row in items)
    again = np.asarray(bench_scale._slot_items(params, contexts[::-1], slots))
    np.testing.assert_array_equal(again, items[::-1])                  # a user's slots do not depend on the batch


def test_paper_feed_rejects_a_catalogue_sharing_a_factor_with_the_stride():
    with pytest.raises(ValueError, match="coprime"):
        bench_scale.paper_feed(jax.random.key(0), 10, 7919 * 2)


def test_arrays_digest_sees_values_dtypes_and_shapes():
    a = np.arange(6, dtype=np.int32)
    assert bench_scale.arrays_digest([a]) == bench_scale.arrays_digest([a.copy()])
    assert bench_scale.arrays_digest([a]) != bench_scale.arrays_digest([a.astype(np.int64)])
    assert bench_scale.arrays_digest([a]) != bench_scale.arrays_digest([a.reshape(2, 3)])


def test_quick_bench_writes_the_results_folder(tmp_path, capsys):
    out = tmp_path / "scale"
    assert bench_scale.main(["--quick", "--stages", "sweep", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["study"] == "scale" and manifest["preset"] == "quick"
    for name in ("table_points", "table_exponents", "table_devices", "table_paper_demo", "table_paper_estimate"):
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").exists()
    assert (out / "fig_loglog.png").exists() and "identical across device counts" in (out / "README.md").read_text()
    devices = pd.read_csv(out / "table_devices.csv")
    assert list(devices.devices) == [1, 2] and devices.digest.nunique() == 1
    demo = pd.read_csv(out / "table_paper_demo.csv").iloc[0]
    assert abs(demo.estimate_m_inf - demo.online_target) < 5 * demo.se_m_inf     # unbiased at m = inf

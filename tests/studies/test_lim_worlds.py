"""Study lim_worlds (Lim Table 1's SVD claim across generator worlds): the dataset statistics
against a dense brute-force computation, the offset calibration against the expected |O⁺|, the
paired differences against the test means, smoke structure and identical reruns from the cache."""
import dataclasses
import importlib

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import missing, reporting, runner
from simrec.world import PAPER_OBSERVED_POSITIVES, make_world
from simrec_studies import lim_worlds
from simrec_studies.common import lim

compute = importlib.import_module("simrec_studies.lim_worlds.compute")
report = importlib.import_module("simrec_studies.lim_worlds.report")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lim_worlds")
    config = lim_worlds.PRESETS["smoke"]
    first = runner.run(lim_worlds.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return config, out, first


def test_statistics_match_a_dense_computation():
    rng = np.random.default_rng(0)
    dense = rng.random((40, 60)) < np.linspace(0.02, 0.5, 60)[None, :] * rng.random((40, 1)) * 2
    dense[:, 0] = True                                        # every user has a positive
    observed = sp.csr_matrix(dense)
    got = compute.statistics(observed)
    per_user = dense.sum(axis=1)
    assert got["positives per user"] == pytest.approx(per_user.mean())
    assert got["user activity CV"] == pytest.approx(per_user.std() / per_user.mean())
    counts = np.sort(dense.sum(axis=0))[::-1]
    counts = counts[counts > 0]
    slope = np.polyfit(np.log10(np.arange(1, counts.size + 1)), np.log10(counts), 1)[0]
    assert got["popularity slope"] == pytest.approx(slope, rel=1e-9)
    squares = np.linalg.svd(dense.astype(float), compute_uv=False) ** 2
    held = np.cumsum(squares) / dense.sum()
    assert got["effective rank"] == int(np.argmax(held >= compute.ENERGY)) + 1
    assert got["top singular share"] == pytest.approx(held[0], rel=1e-6)


def test_a_world_is_calibrated_to_lims_observed_positives():
    cell = {"dataset": "lastfm", "dim": 16, "popularity_exponent": 1.0, "affinity_scale": 4.0}
    key = jax.random.key(3)
    config = compute.calibrated(key, cell, missing.DEFAULT_OBSERVATION_RATE)
    assert (config.dim, config.popularity_exponent, config.affinity_scale) == (16, 1.0, 4.0)
    world = make_world(runner.shared_key(key, "world:lastfm"), config)
    users = np.arange(0, config.n_users, 4)
    expected = missing.expected_observed_count(world, missing.DEFAULT_OBSERVATION_RATE, users=users)
    assert expected * config.n_users / users.size == pytest.approx(PAPER_OBSERVED_POSITIVES["lastfm"], rel=1e-3)
    tiny = {"dataset": "tiny", "dim": 2, "popularity_exponent": 0.8, "affinity_scale": 3.0}
    assert compute.calibrated(key, tiny, 0.5).offset == compute.world_config(tiny).offset   # no Lim size


def test_smoke_structure(smoke_run):
    config, out, first = smoke_run
    assert first.cells_total == len(config.dims)
    stats = pd.read_csv(out / "table_statistics.csv")
    assert list(stats.dim) == list(config.dims) and stats[list(compute.STATISTICS[:-1])].notna().all().all()
    models = pd.read_csv(out / "table_models.csv")
    assert len(models) == len(config.dims) * len(config.methods) * len(lim.METRICS)
    gate = pd.read_csv(out / "table_gate.csv")
    assert len(gate) == len(config.dims) and (gate["MF comparisons"] == 2 * len(lim.METRICS)).all()
    claims = pd.read_csv(out / "table_claims.csv")
    assert set(claims.verdict) <= set(reporting.CLAIM_VERDICTS) and len(claims) == 1
    assert (out / "fig_ndcg.png").exists()


def test_paired_differences_are_the_differences_of_the_test_means(smoke_run):
    """Every model is tested on the same users, so the mean per-user difference from a baseline is
    the difference of the two test means, and each verdict follows the 2-SE rule."""
    _, out, _ = smoke_run
    records = pd.read_csv(out / "records.csv")
    models = records[records.method != compute.DATA]
    for baseline in compute.BASELINES:
        base = models[models.method == baseline][["dataset", "dim", "metric", "value"]]
        merged = models[models.method != baseline].merge(base, on=["dataset", "dim", "metric"], suffixes=("", "_b"))
        np.testing.assert_allclose(merged[f"vs_{baseline}"], merged.value - merged.value_b, atol=1e-9)
        assert models[models.method == baseline][f"vs_{baseline}"].isna().all()
    table = pd.read_csv(out / "table_models.csv").dropna(subset=["vs_svd"])
    z = table.vs_svd / table.vs_svd_se
    expected = np.where(z > reporting.Z, "better", np.where(z < -reporting.Z, "worse", "tie"))
    assert (table["vs svd"].to_numpy() == expected).all()


def test_rerun_from_cache_is_identical(smoke_run):
    config, out, _ = smoke_run
    before = {name: (out / name).read_bytes() for name in ("table_gate.csv", "table_models.csv", "records.csv")}
    again = runner.run(lim_worlds.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    assert again.cells_computed == 0
    assert {name: (out / name).read_bytes() for name in before} == before


@pytest.mark.parametrize("change, message", [
    ({"bases": ("narnia",)}, "unknown world presets"),
    ({"dims": (0,)}, "dims must be taste dimensions >= 1"),
    ({"affinity_scales": (-1.0,)}, "affinity_scales must be finite numbers >= 0"),
    ({"methods": ("svd", "mf_adg")}, "holding svd, popularity and an MF model"),
])
def test_bad_configs_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(lim_worlds.PRESETS["default"], **change)

"""The slate_papers study: config validation, every config field documented, the KDD'23 user types,
the papers' numbers consistent with themselves, and a tiny run end to end (records against the
declared columns, one truth per run, AIPS with the true behaviour equal to the IPS of the matching
sets, tables, orderings, claims and README)."""
import dataclasses
import importlib
import math

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import runner
from simrec.runner import ConfigError
from simrec_studies import slate_papers

compute = importlib.import_module("simrec_studies.slate_papers.compute")
report = importlib.import_module("simrec_studies.slate_papers.report")

TINY = slate_papers.SlatePapersConfig(
    aips=slate_papers.AipsConfig(runs=3, truth_contexts=2_000, rounds=500, rounds_grid=(200, 500), slots_grid=(4,),
                                 delta_grid=(0.5,)),
    cascade_dr=slate_papers.CascadeDrConfig(runs=3, rounds=200, slots=3, rounds_grid=(100, 200), slots_grid=(3,),
                                            similarity_grid=(0.5,), structures=("cascade", "independent")))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("slate_papers") / "tiny"
    summary = runner.run(slate_papers.STUDY, TINY, seed=0, out=out, preset="smoke", progress=False)
    return out, summary


def test_every_config_field_is_documented():
    rows = runner.config_help(slate_papers.PRESETS["default"])
    undocumented = [key for key, _, _, meaning in rows if not meaning]
    assert not undocumented, undocumented


@pytest.mark.parametrize("part, change, message", [
    ("aips", {"runs": 1}, "runs must be"),
    ("aips", {"delta": 1.5}, "delta must be"),
    ("aips", {"delta_grid": (0.5, 1.5)}, "delta_grid must lie"),
    ("aips", {"rounds_grid": (100, 100)}, "rounds_grid must be"),
    ("aips", {"pairs": ((1.0, 2.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))}, "pairs must be"),
    ("aips", {"logger": (0.5, 0.6, 0.1)}, "logger must be"),
    ("aips", {"noise": -1.0}, "noise must be"),
    ("cascade_dr", {"structures": ("below",)}, "structures must be"),
    ("cascade_dr", {"interactions": ("multiplicative",)}, "interactions must be"),
    ("cascade_dr", {"slots_grid": (9,)}, "10\\^6"),
    ("cascade_dr", {"ridge": 0.0}, "ridge must be"),
    ("cascade_dr", {"similarity_grid": (math.inf,)}, "similarity_grid must be"),
])
def test_config_validation_names_the_field(part, change, message):
    base = getattr(slate_papers.PRESETS["default"], part)
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(base, **change)
    with pytest.raises(ConfigError, match="at least one"):
        slate_papers.SlatePapersConfig(aips=None, cascade_dr=None)


def test_cells_cover_every_sweep_once_per_structure():
    config = slate_papers.PRESETS["default"]
    cells = slate_papers.cells(config)
    aips = [c for c in cells if c["paper"] == "aips"]
    cdr = [c for c in cells if c["paper"] == "cascade_dr"]
    assert len(aips) == sum(len(v) for v in config.aips.sweeps().values())
    assert len(cdr) == len(config.cascade_dr.structures) * sum(len(v) for v in config.cascade_dr.sweeps().values())
    assert len({tuple(sorted(c.items())) for c in cells}) == len(cells)


def test_the_kdd23_user_types():
    """Each type's relevance has the slot itself; the neighbour and cascade types are the stated
    bands; a random row has 1 to 1 + draws slots; δ = 0.5 weighs the types alike and δ = 0
    favours independent_neighbour_1."""
    relevance = compute.aips_relevance(jax.random.PRNGKey(0), 8)
    assert relevance.shape == (6, 8, 8) and relevance[:, np.arange(8), np.arange(8)].all()
    by = dict(zip(compute.AIPS_TYPES, relevance))
    k, j = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(by["independent_neighbour_1"], np.abs(k - j) <= 1)
    np.testing.assert_array_equal(by["cascade_neighbour_2"], j <= k + 2)
    assert by["standard"].all()
    for name, draws in (("random_3", 3), ("random_6", 6)):
        assert np.all((by[name].sum(axis=1) >= 2) & (by[name].sum(axis=1) <= 1 + draws))
    np.testing.assert_allclose(compute.aips_type_scales(0.5), np.ones(6))
    scales = compute.aips_type_scales(0.0)
    assert np.argmax(scales) == compute.AIPS_TYPES.index("independent_neighbour_1")


def test_the_papers_numbers_agree_at_their_default_points():
    """KDD'23's default point (N = 8,000, K = 8, δ = 0.6) is on all three figures (each its own runs):
    the readings agree within 15 % (10 % but for the data-driven AIPS, 0.0109 to 0.0120); every
    Cascade-DR reading has the three estimators."""
    by = report.PAPER_AIPS
    for a, b in ((("rounds", 8000), ("slots", 8)), (("rounds", 8000), ("delta", 0.6))):
        np.testing.assert_allclose(by[a], by[b], rtol=0.15)
    for structure in report.PAPER_CASCADE_DR.values():
        for sweep in structure.values():
            assert all(len(numbers) == 3 for numbers in sweep.values())


def test_a_tiny_run_end_to_end(run):
    out, summary = run
    records = pd.read_csv(out / "records.csv")
    assert set(records.columns) == set(slate_papers.COLUMNS)
    # one truth per run and point, shared by every estimator
    per_run = records.groupby(["paper", "sweep", "value", "structure", "run"], dropna=False).truth.nunique()
    assert (per_run == 1).all()
    assert set(records[records.paper == "aips"].estimator) == set(slate_papers.AIPS_ESTIMATORS)
    assert set(records[records.paper == "cascade_dr"].estimator) == set(slate_papers.CASCADE_DR_ESTIMATORS)
    assert np.all(np.isfinite(records.estimate)) and np.all(records.truth > 0)
    for name in ("table_aips", "table_cascade_dr", "table_orderings", "table_claims"):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists()
    assert (out / "fig_aips.png").exists() and (out / "fig_cascade_dr.png").exists()
    readme = (out / "README.md").read_text()
    assert "## Claims" in readme and "Where and why our numbers differ" in readme
    table = pd.read_csv(out / "table_cascade_dr.csv")
    np.testing.assert_allclose(table[table.estimator == "cascade_dr"].mse_ratio, 1.0)


def test_aips_with_the_true_behaviour_is_ips_over_each_rounds_type():
    """At δ = 1 with every type but standard switched off the true behaviour is the standard one for
    every round: AIPS (true) equals IPS run by run."""
    config = dataclasses.replace(TINY.aips, runs=2, delta_grid=(1.0,))
    shared = compute.setup(jax.random.PRNGKey(0), slate_papers.SlatePapersConfig(aips=config, cascade_dr=None))
    world = compute._aips_world(shared.aips_key, config, 4, 1.0)
    world = dataclasses.replace(world, type_scales=world.type_scales.at[:-1].set(-1e4))
    rows = pd.DataFrame(compute._aips_run(jax.random.PRNGKey(1), config, shared, world, 300, (1.0, 0.0)))
    by = rows.set_index("estimator").estimate
    assert by["aips_true"] == pytest.approx(by["ips"], rel=1e-6)

"""Lim et al. Thm 1-2 through simrec's own metrics and observation model: exactly (by enumerating
every observed subset) and by Monte Carlo with an SE-derived tolerance; plus the study itself."""
import itertools
import json

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from simrec import metrics, missing, runner
from simrec.world import WorldConfig
from simrec_studies import unbiasedness

UNBIASED = ("adg", "recall@3", "atop")


def test_thm1_and_thm2_exactly_by_enumerating_every_subset():
    rng = np.random.default_rng(0)
    n_items, prior_items = 9, [0, 2, 3, 5, 7, 8]
    scores = rng.integers(0, 4, (1, n_items)).astype(np.float32)    # ties on purpose
    prior = np.zeros((1, n_items), bool)
    prior[0, prior_items] = True
    complete = metrics.evaluate(scores, prior, metrics=UNBIASED + ("ndcg",))
    for size in range(1, len(prior_items) + 1):
        subsets = list(itertools.combinations(prior_items, size))
        masks = np.zeros((len(subsets), n_items), bool)
        for row, subset in enumerate(subsets):
            masks[row, list(subset)] = True
        observed = metrics.evaluate(np.repeat(scores, len(subsets), 0), masks,
                                    metrics=UNBIASED + ("ndcg",))
        for spec in UNBIASED:                                       # Thm 1 and siblings: exact
            assert observed[spec].mean() == pytest.approx(complete[spec][0], rel=1e-12)
        factor = metrics.ndcg_bias_factor(size, len(prior_items))   # Thm 2: exact
        assert observed["ndcg"].mean() == pytest.approx(factor * complete["ndcg"][0], rel=1e-12)


def test_thm1_and_thm2_by_monte_carlo_through_observe_srs():
    """Mean over SRS draws within 4 standard errors of the claim (fails ~6e-5 of seeds per check)."""
    rng = np.random.default_rng(1)
    n_users, n_items, draws = 40, 60, 300
    prior = sp.csr_matrix(rng.random((n_users, n_items)) < 0.2)
    scores = rng.standard_normal((n_users, n_items)).astype(np.float32)
    specs = UNBIASED + ("ndcg",)
    complete = metrics.evaluate(scores, prior, metrics=specs)
    samples = {s: [] for s in specs}
    for key in jax.random.split(jax.random.key(7), draws):
        observed = missing.observe_srs(key, prior, 0.3)
        values = metrics.evaluate(scores, observed, metrics=specs)
        for s in specs:
            samples[s].append(metrics.mean(values[s]))
    n_obs = np.diff(observed.indptr)
    n_prior = np.diff(prior.indptr)
    seen = n_obs > 0
    for spec in UNBIASED:
        draws_ = np.asarray(samples[spec])
        se = draws_.std(ddof=1) / np.sqrt(draws)
        assert abs(draws_.mean() - metrics.mean(complete[spec][seen])) <= 4 * se, spec
    thm2 = np.mean(metrics.ndcg_bias_factor(n_obs[seen], n_prior[seen]) * complete["ndcg"][seen])
    ndcg = np.asarray(samples["ndcg"])
    se = ndcg.std(ddof=1) / np.sqrt(draws)
    assert abs(ndcg.mean() - thm2) <= 4 * se
    assert ndcg.mean() < metrics.mean(complete["ndcg"][seen]) - 10 * se     # and it is biased


def test_smoke_preset_runs_and_rerun_from_cache_is_identical(tmp_path):
    config = unbiasedness.PRESETS["smoke"]
    first = runner.run(unbiasedness.STUDY, config, seed=0, out=tmp_path, progress=False)
    tables = {p.name: p.read_bytes() for p in tmp_path.glob("table*")}
    again = runner.run(unbiasedness.STUDY, config, seed=0, out=tmp_path, progress=False)
    assert first.cells_computed == len(unbiasedness.cells(config)) and again.cells_computed == 0
    assert tables == {p.name: p.read_bytes() for p in tmp_path.glob("table*")}
    summary = (tmp_path / "table_summary.csv").read_text()
    for metric in ("adg", "ndcg", "recall@10", "atop"):
        assert metric in summary
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["cells"]["cached"] == len(unbiasedness.cells(config))
    assert (tmp_path / "fig_ratio_srs.png").stat().st_size > 1000


def test_records_match_the_declared_columns_and_the_module_keeps_no_state():
    """compute(root key, config, cell, setup(root key, config)) gives one "observed" record per
    (metric, draw), one "complete" per metric, the Thm 2 prediction and the set sizes."""
    config = unbiasedness.UnbiasednessConfig(world=WorldConfig(n_users=40, n_items=30, offset=-2.0),
                                             rates=(0.5,), draws=3, mnar_betas=(1.0,))
    root = jax.random.key(0)
    shared = unbiasedness.setup(root, config)
    specs = config.metric_specs
    for cell in unbiasedness.cells(config):
        records = unbiasedness.compute(root, config, cell, shared)
        frame = runner.records_frame(unbiasedness.STUDY,
                                     runner.check_records(unbiasedness.STUDY, cell, records))
        observed = frame[frame.statistic == "observed"]
        assert len(observed) == config.draws * len(specs)
        assert sorted(set(observed.draw)) == list(range(config.draws))
        assert list(frame[frame.statistic == "complete"].metric) == list(specs)
        assert list(frame[frame.statistic == "thm2"].metric) == ["ndcg"]
        users = frame[frame.statistic == "users"].value.iloc[0]
        assert users == int(users) and 0 < users <= config.world.n_users
        assert (frame.scorer == cell["scorer"]).all() and (frame.param == cell["param"]).all()
    assert records == unbiasedness.compute(root, config, cell, unbiasedness.setup(root, config))
    assert not [name for name, value in vars(unbiasedness).items() if hasattr(value, "cache_info")]


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="rates must be"):
        unbiasedness.UnbiasednessConfig(rates=(0.0, 0.5))
    with pytest.raises(ValueError, match="draws must be >= 2"):
        unbiasedness.UnbiasednessConfig(draws=1)

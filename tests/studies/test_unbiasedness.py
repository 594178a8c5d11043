"""Lim et al. Thm 1-2 through simrec's own metrics and observation model: exactly (by enumerating
every observed subset) and by Monte Carlo with an SE-derived tolerance; plus the study itself on a
tiny config (one run per module), its verdicts and its claims."""
import dataclasses
import itertools
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import metrics, missing, runner
from simrec.config import ConfigError
from simrec.world import WorldConfig
from simrec_studies import unbiasedness

UNBIASED = ("adg", "recall@3", "atop")
#: the study end to end in seconds: 40 users x 30 items, two rates, one MNAR strength, 3 draws
TINY = dataclasses.replace(unbiasedness.PRESETS["smoke"], world=WorldConfig(n_users=40, n_items=30, offset=-2.0),
                           rates=(0.5, 1.0), draws=3, mnar_betas=(1.0,))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(output folder, the run, the same run again from the cache)."""
    out = tmp_path_factory.mktemp("unbiasedness")
    first = runner.run(unbiasedness.STUDY, TINY, seed=0, out=out, progress=False)
    tables = {p.name: p.read_bytes() for p in out.glob("table*")}
    again = runner.run(unbiasedness.STUDY, TINY, seed=0, out=out, progress=False)
    assert tables == {p.name: p.read_bytes() for p in out.glob("table*")}
    return out, first, again


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
    n_users, n_items, draws = 40, 30, 120
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


def test_the_study_runs_and_reruns_from_cache_identically(tiny_run):
    out, first, again = tiny_run
    assert first.cells_computed == len(unbiasedness.cells(TINY)) and again.cells_computed == 0
    summary = (out / "table_summary.csv").read_text()
    for metric in ("adg", "ndcg", "recall@10", "atop"):
        assert metric in summary
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cells"]["cached"] == len(unbiasedness.cells(TINY))
    assert (out / "fig_ratio_srs.png").stat().st_size > 1000
    claims = pd.read_csv(out / "table_claims.csv")
    assert len(claims) == 2 * 5 and set(claims.verdict) <= {"reproduced", "not reproduced"}
    assert "## Claims" in (out / "README.md").read_text()


def test_verdicts_agree_within_z_limit_standard_errors_and_at_round_off():
    """`agrees`: the kit's verdict at Z_LIMIT SE is a tie; an SE and a difference below round-off
    of the scale are zero (rate 1: every draw sees all of P+), a real difference with no SE is not."""
    limit = unbiasedness.Z_LIMIT
    assert unbiasedness.agrees(0.29, 0.1, 1.0) and unbiasedness.agrees(-limit * 0.1 + 1e-9, 0.1, 1.0)
    assert not unbiasedness.agrees(0.31, 0.1, 1.0) and not unbiasedness.agrees(-0.31, 0.1, 1.0)
    assert unbiasedness.agrees(1e-15, 1e-17, 0.5) and not unbiasedness.agrees(1e-6, 0.0, 0.5)
    assert unbiasedness._z(1e-15, 1e-17, 0.5) == 0.0 and unbiasedness._z(1e-6, 0.0, 0.5) == math.inf
    assert unbiasedness._z(0.2, 0.1, 1.0) == pytest.approx(2.0)


def test_claims_put_lims_statements_beside_ours():
    """Hand-made SRS rows: ADG agrees at both rates (reproduced), nDCG's Thm 2 prediction does not
    at one (not reproduced), and nDCG on O+ is far below nDCG on P+ at the smallest rate."""
    config = dataclasses.replace(TINY, rates=(0.2, 1.0))
    rows = []
    for rate, adg, ndcg, thm2 in ((0.2, 0.501, 0.30, 0.36), (1.0, 0.5, 0.6, 0.6)):
        rows += [{"scorer": "noisy_oracle", "metric": "adg", "rate": rate, "comp": 0.5, "obs": adg,
                  "se": 0.001, "thm2": np.nan, "ratio": adg / 0.5},
                 {"scorer": "noisy_oracle", "metric": "ndcg", "rate": rate, "comp": 0.6, "obs": ndcg,
                  "se": 0.001, "thm2": thm2, "ratio": ndcg / 0.6}]
    srs = pd.DataFrame(rows)
    srs["z_vs_comp"] = (srs.obs - srs.comp) / srs.se
    srs["z_vs_thm2"] = (srs.obs - srs.thm2) / srs.se
    summary = unbiasedness._summary(config, srs)
    assert list(summary.holds) == ["yes", "**no**"]
    adg, ndcg, biased = unbiasedness.claims(config, summary, srs)
    assert adg.verdict == "reproduced" and adg.ours == pytest.approx(1.002) and adg.se == pytest.approx(0.002)
    assert ndcg.verdict == "not reproduced" and ndcg.ours == pytest.approx(0.30 / 0.36)
    assert biased.verdict == "reproduced" and biased.ours == pytest.approx(0.5) and "rate 0.2" in biased.claim


def test_records_match_the_declared_columns_and_the_module_keeps_no_state():
    """compute(root key, config, cell, setup(root key, config)) gives one "observed" record per
    (metric, draw), one "complete" per metric, the Thm 2 prediction and the set sizes."""
    config = TINY
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


@pytest.mark.parametrize("overrides, field", [({"rates": (0.0, 0.5)}, "rates"), ({"rates": ()}, "rates"),
                                             ({"draws": 1}, "draws"), ({"oracle_noise": -1.0}, "oracle_noise"),
                                             ({"k": 0}, "k"), ({"mnar_rate": 0.0}, "mnar_rate"),
                                             ({"mnar_betas": (math.inf,)}, "mnar_betas")])
def test_config_validation_names_the_field(overrides, field):
    with pytest.raises(ConfigError, match=f"^{field}"):
        dataclasses.replace(unbiasedness.PRESETS["default"], **overrides)

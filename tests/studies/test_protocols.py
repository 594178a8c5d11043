"""The protocols study (Steck RecSys'13 Table 1) at its smoke preset, its MNAR rating simulator
(star shares and per-star observation rates against their configured values, 4-SE tolerance) and
its winner bookkeeping against a brute-force count, the item-exposure observation model and
the graded-nDCG gains (test ratings kept, unrated items imputed)."""
import dataclasses
import itertools
import json

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import metrics, runner
from simrec_studies import protocols


TINY = protocols.ProtocolsConfig(ratings_file="", world=protocols.WorldConfig(n_users=40, n_items=30, dim=2),
                                 observe_probability=(0.05, 0.1, 0.2, 0.3, 0.5), n=3, dim=2,
                                 missing_weight=0.2, sweeps=1)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocols")
    runner.run(protocols.STUDY, protocols.PRESETS["smoke"], seed=0, out=out, preset="smoke",
               progress=False)
    return out


def test_smoke_outputs_and_winners(smoke_run):
    assert json.loads((smoke_run / "manifest.json").read_text())["study"] == "protocols"
    assert (smoke_run / "fig_protocols.png").exists()
    table = pd.read_csv(smoke_run / "table_protocols.csv")
    assert set(table.protocol) >= set(protocols.PROTOCOLS)
    ranking = table[table.metric != "RMSE"]
    for _, row in ranking.iterrows():                  # winner = larger value, equal = tie
        expected = ("tie" if row["MF-RMSE"] == row["AllRank"]
                    else "MF-RMSE" if row["MF-RMSE"] > row["AllRank"] else "AllRank")
        assert row.winner == expected
    rmse = table[table.metric == "RMSE"].iloc[0]
    assert rmse.winner == ("MF-RMSE" if rmse["MF-RMSE"] < rmse["AllRank"] else "AllRank")
    claim = pd.read_csv(smoke_run / "table_claim.csv")
    part = ranking[ranking.data == "simulated"]
    wide = part.pivot(index="metric", columns="protocol", values="winner")[list(protocols.OFFLINE)]
    across_protocols = [a != b for m in wide.index
                        for a, b in itertools.combinations(wide.loc[m], 2)]
    across_metrics = [a != b for p in wide.columns for a, b in itertools.combinations(wide[p], 2)]
    row = claim.set_index("data").loc["simulated"]
    assert row["P(winner differs | two protocols, same metric)"] == pytest.approx(np.mean(across_protocols))
    assert row["P(winner differs | two metrics, same protocol)"] == pytest.approx(np.mean(across_metrics))
    truth = part.pivot(index="metric", columns="protocol", values="winner")["complete ratings"]
    for protocol in protocols.OFFLINE:
        assert row[f"names true winner {protocol}"] == pytest.approx(np.mean(wide[protocol] == truth))
    graded = set(protocols.PRESETS["smoke"].graded_specs)
    assert graded <= set(ranking.metric)
    assert set(table.data) == {"simulated", protocols.EXPOSURE_CELL}


def test_simulated_ratings_follow_the_configured_shares_and_mnar_rates():
    config = protocols.PRESETS["smoke"]
    key = jax.random.key(0)
    stars = protocols._stars(key, config)
    observed = protocols._observe(key, config, stars)
    n = stars.size
    shares = np.array([(stars == r).mean() for r in range(1, 6)])
    assert np.all(np.abs(shares - np.array(config.star_shares)) <= 2 / n + 1e-12)  # quantile cut
    dense = observed.toarray()
    assert np.all((dense == 0) | (dense == stars))                     # observed = true stars
    for r, p in zip(range(1, 6), config.observe_probability):
        pool = stars == r
        rate = (dense[pool] > 0).mean()
        se = np.sqrt(p * (1 - p) / pool.sum())
        assert abs(rate - p) <= 4 * se


def test_item_exposure_scales_the_observation_rates():
    """P(observed | r, i) = min(p_r e_i, 1): observed counts per star match their expectation."""
    config = protocols.PRESETS["smoke"]
    key = jax.random.key(0)
    stars = protocols._stars(key, config)
    observed = protocols._observe(key, config, stars, 1.0)
    exposure = protocols._item_exposure(key, stars.shape[1], 1.0)
    probability = np.minimum(np.array(config.observe_probability)[stars.astype(int) - 1]
                             * exposure[None, :], 1)
    seen = observed.toarray() > 0
    for r in range(1, 6):
        pool = stars == r
        expected, variance = probability[pool].sum(), (probability * (1 - probability))[pool].sum()
        assert abs(seen[pool].sum() - expected) <= 4 * np.sqrt(variance)


def test_setup_shares_one_world_and_splits_with_each_cells_key():
    """Both simulated cells see the same complete stars and the same uniforms (exposure only
    changes the observation probabilities); each split draws from fold_in(cell_key(root, cell), 0)."""
    root = jax.random.key(0)
    shared = protocols.setup(root, TINY)
    plain, exposed = shared.ratings["simulated"], shared.ratings[protocols.EXPOSURE_CELL]
    assert plain.stars is exposed.stars
    np.testing.assert_array_equal(plain.stars, protocols._stars(root, TINY))
    for cell, sigma in (("simulated", 0.0), (protocols.EXPOSURE_CELL, TINY.exposure_sigma)):
        ratings = shared.ratings[cell]
        assert (ratings.observed != protocols._observe(root, TINY, ratings.stars, sigma)).nnz == 0
        key = jax.random.fold_in(runner.cell_key(root, {"data": cell}), 0)
        train, test = protocols._split(key, ratings.observed, TINY.test_fraction)
        assert (ratings.train != train).nnz == 0 and (ratings.test != test).nnz == 0
        assert (ratings.train + ratings.test != ratings.observed).nnz == 0
    # where both cells observe a pair it carries the same (true) rating
    both = plain.observed.multiply(exposed.observed.astype(bool))
    assert (both != exposed.observed.multiply(plain.observed.astype(bool))).nnz == 0


def test_records_match_the_declared_columns_and_the_module_keeps_no_state():
    root = jax.random.key(0)
    shared = protocols.setup(root, TINY)
    cell = {"data": "simulated"}
    frame = runner.records_frame(protocols.STUDY, runner.check_records(
        protocols.STUDY, cell, protocols.compute(root, TINY, cell, shared)))
    scored = frame[frame.part == "model"]
    assert set(scored.model) == set(protocols.MODELS)
    ranking = scored[scored.metric != "RMSE"]
    assert len(ranking) == len(protocols.MODELS) * len(protocols.PROTOCOLS) * len(TINY.all_specs)
    assert ranking.se.notna().all() and scored[scored.metric == "RMSE"].se.isna().all()
    assert (np.diff(shared.ratings["simulated"].test.indptr) == 0).any()   # protocol (b) copes
    sizes = frame[frame.part == "data"].set_index("metric").value
    assert sizes["users"] == TINY.world.n_users and sizes["items"] == TINY.world.n_items
    assert sizes["train ratings"] + sizes["test ratings"] == shared.ratings["simulated"].observed.nnz
    assert not [name for name, value in vars(protocols).items() if hasattr(value, "cache_info")]


def test_graded_gains_impute_unrated_items_and_keep_test_ratings():
    config = protocols.PRESETS["smoke"]
    test = sp.csr_matrix(np.array([[0, 5, 0, 3], [1, 0, 0, 0]], np.float64))
    train_mask = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 1, 0]], bool))
    settings = protocols._graded_settings(config, train_mask, test, None)
    _, _, gains = settings["a2 unrated items"]
    np.testing.assert_array_equal(gains, [[2, 5, 2, 3], [1, 2, 2, 2]])   # linear gain, Y0 = 2
    relevant, exclude, _ = settings["b rated test items"]
    np.testing.assert_array_equal(relevant.toarray(), test.toarray() > 0)
    np.testing.assert_array_equal(exclude, test.toarray() == 0)
    exponential = dataclasses.replace(config, graded_gain="exponential")
    _, _, gains = protocols._graded_settings(exponential, train_mask, test, None)["a1 all items"]
    np.testing.assert_array_equal(gains[0], [3, 31, 3, 7])


def test_protocol_b_leaves_users_without_test_ratings_out():
    """(b) ranks only a user's rated test items; a user without any has nothing to rank, so
    nothing of theirs is excluded and their metrics are NaN (skipped by the user means)."""
    test = sp.csr_matrix(np.array([[0, 4, 0, 5], [0, 0, 0, 0]], np.float64))
    exclude = protocols._unrated_in_test(test)
    np.testing.assert_array_equal(exclude, [[True, False, True, False], [False] * 4])
    scores = np.array([[0.9, 0.1, 0.8, 0.5], [0.3, 0.2, 0.1, 0.0]], np.float32)
    ap = metrics.evaluate(scores, test.astype(bool), exclude=exclude, metrics=("ap",))["ap"]
    assert ap[0] == 1.0 and np.isnan(ap[1])                 # item 3 above item 1: both relevant


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(protocols.PRESETS["default"], ratings_file="no/such.csv")
    assert protocols.cells(config) == [{"data": "simulated"}, {"data": protocols.EXPOSURE_CELL}]
    assert protocols.cells(dataclasses.replace(config, exposure_sigma=0.0)) == [{"data": "simulated"}]


@pytest.mark.parametrize("overrides", [{"star_shares": (0.5, 0.5, 0.1, 0.1, 0.1)},
                                       {"observe_probability": (0.0, 0.1, 0.1, 0.1, 0.1)},
                                       {"test_fraction": 0.0}, {"missing_weight": 0.0},
                                       {"dim": 0}, {"sweeps": 0}, {"exposure_sigma": -1.0},
                                       {"graded_gain": "quadratic"}, {"graded_imputed": np.nan}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(protocols.PRESETS["default"], **overrides)

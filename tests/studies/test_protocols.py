"""The protocols study (Steck RecSys'13 Table 1) on a tiny config run once: its MNAR rating
simulator (star shares and per-star observation rates against their configured values, 4-SE
tolerance), Steck's splits and candidate sets, the user parts behind the paired SE, its noise-aware
winners against a brute-force recount from the records, the λ selection of `simrec.models.tune`,
the claims beside Steck's numbers, the item-exposure observation model and the graded-nDCG gains
(test ratings kept, unrated items imputed)."""
import dataclasses
import importlib
import itertools
import json

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import metrics, models, runner, stats
from simrec_studies import protocols
from simrec_studies.common import rated

compute = importlib.import_module("simrec_studies.protocols.compute")
report = importlib.import_module("simrec_studies.protocols.report")

#: the run of this module (one, shared by every test that reads outputs): the smallest world whose
#: every user part has a relevant test item under each protocol, two cells (plain and exposure)
TINY = protocols.ProtocolsConfig(ratings_file="", world=protocols.WorldConfig(n_users=60, n_items=30, dim=2),
                                 observe_probability=(0.1, 0.2, 0.3, 0.4, 0.6), min_ratings=8,
                                 n_test=4, n_unrated=5, n=3, dim=2, missing_weight=0.2,
                                 mf_l2_grid=(0.01, 0.1, 1.0), allrank_l2_grid=(0.01, 0.1, 1.0),
                                 imputed_grid=(1.0, 2.0), sweeps=2)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocols") / "tiny"
    runner.run(protocols.STUDY, TINY, seed=0, out=out, preset="tiny", progress=False)
    return out


@pytest.fixture(scope="module")
def shared():
    """setup(key 0, TINY): the run's shared state again (the world's programs are compiled by then)."""
    return compute.setup(jax.random.key(0), TINY)


def _records(out) -> pd.DataFrame:
    rows = pd.read_csv(out / "records.csv", keep_default_na=False, na_values=[""])
    return runner.records_frame(protocols.STUDY, rows.to_numpy().tolist())


def test_smoke_outputs_and_noise_aware_winners(smoke_run):
    assert json.loads((smoke_run / "manifest.json").read_text())["study"] == "protocols"
    assert (smoke_run / "fig_protocols.png").exists()
    config = TINY
    table = pd.read_csv(smoke_run / "table_protocols.csv")
    records = pd.read_csv(smoke_run / "records.csv", keep_default_na=False, na_values=[""])
    assert set(table.protocol) >= set(protocols.PROTOCOLS)
    scored = records[(records.part == "model") & (records.model != protocols.WORST)].fillna({"weighting": ""})
    assert set(table.weighting.dropna()) == set(protocols.WEIGHTINGS)
    table["weighting"] = table.weighting.fillna("")
    for _, row in table.iterrows():                    # recount every verdict from the parts
        group = scored[(scored.data == row.data) & (scored.protocol == row.protocol)
                       & (scored.weighting == row.weighting) & (scored.metric == row.metric) & (scored.user_part >= 0)]
        wide = group.pivot(index="user_part", columns="model", values="value")
        assert len(wide) == config.parts
        d = (wide["MF-RMSE"] - wide["AllRank"]).to_numpy() * (-1 if row.metric == "RMSE" else 1)
        mean, se = d.mean(), d.std(ddof=1) / np.sqrt(len(d))
        expected = "MF-RMSE" if mean > 2 * se else "AllRank" if mean < -2 * se else "tie"
        assert row.winner == expected, row
        assert row["MF-RMSE better by"] == pytest.approx(mean, abs=1e-9)   # csv: 10 digits
    claim = pd.read_csv(smoke_run / "table_claim.csv")
    ranking = table[table.metric != "RMSE"]
    part = ranking[(ranking.data == "simulated") & (ranking.weighting == "relevant ratings")]
    wide = part.pivot(index="metric", columns="protocol", values="winner")[list(protocols.OFFLINE)]
    across_protocols = [a != b for m in wide.index
                        for a, b in itertools.combinations(wide.loc[m], 2)]
    across_metrics = [a != b for p in wide.columns for a, b in itertools.combinations(wide[p], 2)]
    row = claim.set_index(["data", "weighting"]).loc[("simulated", "relevant ratings")]
    assert row["P(verdict differs | two protocols, same metric)"] == pytest.approx(np.mean(across_protocols))
    assert row["P(verdict differs | two metrics, same protocol)"] == pytest.approx(np.mean(across_metrics))
    for protocol in protocols.OFFLINE:                 # every count includes ties
        counts = {w: int(wide[protocol].eq(w).sum()) for w in ("MF-RMSE", "AllRank", "tie")}
        assert row[f"verdicts {protocol}"] == ", ".join(f"{w} {n}" for w, n in counts.items())
    truth = part.pivot(index="metric", columns="protocol", values="winner")["complete ratings"]
    for protocol in protocols.OFFLINE:
        assert row[f"gives complete-data verdict {protocol}"] == pytest.approx(
            np.mean(wide[protocol] == truth))
    assert set(ranking.metric) == set(protocols.METRICS)
    assert (ranking[ranking.protocol == "b rated test items"].cutoff.isin([0, config.n_b])).all()
    assert set(table.data) == {"simulated", protocols.EXPOSURE_CELL}
    selected = pd.read_csv(smoke_run / "table_selected.csv", keep_default_na=False)
    assert len(selected) == 2 * len(protocols.MODELS) and "at grid edge" in selected.columns
    for _, r in selected.iterrows():                   # the edge flag of simrec.models.select
        grid = [float(v) for v in r.grid.split()]
        assert r.l2 in grid and ("l2" in r["at grid edge"].split(", ")) == (r.l2 in (min(grid), max(grid)))
        assert "imputed" not in r["at grid edge"]      # two values: unsearched, no edge test
    gate = pd.read_csv(smoke_run / "table_calibration.csv")
    rmse = table[(table.protocol == "b rated test items") & (table.metric == "RMSE")].set_index("data")
    for _, r in gate.iterrows():
        assert r.gate == ("passes" if rmse.loc[r.data, "winner"] == "MF-RMSE" else "fails")
        assert r["RMSE MF-RMSE"] == pytest.approx(rmse.loc[r.data, "MF-RMSE"])
    readme = (smoke_run / "README.md").read_text()
    assert "until Steck's pattern appeared" in readme and "tie" in readme
    assert "Verdict — Steck's reversal" in readme and "Calibration gate" in readme


def test_paired_winner_rule_on_the_table_matches_stats():
    """The study's verdicts are exactly `simrec.stats.paired_winner` over the parts."""
    records = pd.DataFrame([
        {"data": "d", "part": "model", "model": m, "protocol": "a1 all items", "weighting": "uniform",
         "metric": "MAP", "cutoff": 0, "user_part": k, "l2": 0.1, "imputed": np.nan, "sweeps": 1, "value": v,
         "se": np.nan}
        for m, values in (("MF-RMSE", [0.30, 0.31, 0.29, 0.30, 0.32, 0.30]),
                          ("AllRank", [0.29, 0.30, 0.30, 0.28, 0.30, 0.30]))
        for k, v in zip(range(-1, 5), values)])
    row = report._rows(TINY, records).iloc[0]
    verdict = stats.paired_winner([0.01, -0.01, 0.02, 0.02, 0.0], names=protocols.MODELS)
    assert (row.winner, row.z) == (verdict.winner, pytest.approx(verdict.z))
    assert row.winner == "tie"                               # z = 1.37


def test_simulated_ratings_follow_the_configured_shares_and_mnar_rates(shared):
    config = TINY
    stars = shared.ratings["simulated"].stars
    observed = shared.ratings["simulated"].observed
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


def test_item_exposure_scales_the_observation_rates(shared):
    """P(observed | r, i) = min(p_r e_i, 1): observed counts per star match their expectation."""
    config = TINY
    key = jax.random.key(0)
    stars = shared.ratings["simulated"].stars
    observed = compute._observe(key, config, stars, 1.0)
    exposure = compute._item_exposure(key, stars.shape[1], 1.0)
    probability = np.minimum(np.array(config.observe_probability)[stars.astype(int) - 1]
                             * exposure[None, :], 1)
    seen = observed.toarray() > 0
    for r in range(1, 6):
        pool = stars == r
        expected, variance = probability[pool].sum(), (probability * (1 - probability))[pool].sum()
        assert abs(seen[pool].sum() - expected) <= 4 * np.sqrt(variance)


def test_setup_shares_one_world_and_draws_each_split_from_the_cells_key(shared):
    """Both simulated cells see the same complete stars and the same uniforms (exposure only
    changes the observation probabilities); each cell's splits come from cell_key(root, cell)."""
    root = jax.random.key(0)
    plain, exposed = shared.ratings["simulated"], shared.ratings[protocols.EXPOSURE_CELL]
    assert plain.stars is exposed.stars
    np.testing.assert_array_equal(plain.stars, compute._stars(root, TINY))
    for cell, sigma in (("simulated", 0.0), (protocols.EXPOSURE_CELL, TINY.exposure_sigma)):
        ratings = shared.ratings[cell]
        assert (ratings.observed != compute._observe(root, TINY, ratings.stars, sigma)).nnz == 0
        key = runner.cell_key(root, {"data": cell})
        train, test = compute._split(jax.random.fold_in(key, 0), ratings.observed,
                                       TINY.test_fraction)
        assert (ratings.train != train).nnz == 0 and (ratings.test != test).nnz == 0
        assert (ratings.train + ratings.test != ratings.observed).nnz == 0
        assert (ratings.fit + ratings.valid != ratings.train).nnz == 0
        assert ratings.fit.multiply(ratings.valid).nnz == 0
    # where both cells observe a pair it carries the same (true) rating
    both = plain.observed.multiply(exposed.observed.astype(bool))
    assert (both != exposed.observed.multiply(plain.observed.astype(bool))).nnz == 0


def test_protocol_b_is_steck_split_and_a_ranks_sampled_unrated_items(shared):
    """(b): users with >= min_ratings ratings, n_test test ratings each (`split_steck`); (a2):
    the sampled unrated items plus the rated test items; (a1): those plus the training items."""
    ratings = shared.ratings["simulated"]
    counts = np.diff(ratings.observed.indptr)
    eligible = counts >= TINY.min_ratings
    assert eligible.any() and (~eligible).any()
    np.testing.assert_array_equal(np.diff(ratings.test_b.indptr), np.where(eligible, TINY.n_test, 0))
    kept = sp.csr_matrix(ratings.observed.multiply(eligible[:, None]))
    assert (ratings.train_b + ratings.test_b != kept).nnz == 0
    observed = ratings.observed.toarray() > 0
    unrated = ratings.unrated.toarray()
    assert not (unrated & observed).any()
    np.testing.assert_array_equal(unrated.sum(1), np.minimum(TINY.n_unrated, (~observed).sum(1)))
    test, train = ratings.test.toarray() > 0, ratings.train.toarray() > 0
    np.testing.assert_array_equal(compute._candidates(ratings, "a2 unrated items"), unrated | test)
    np.testing.assert_array_equal(compute._candidates(ratings, "a1 all items"),
                                  unrated | test | train)


def test_records_match_the_declared_columns_and_the_module_keeps_no_state(smoke_run, shared):
    frame = _records(smoke_run)
    assert list(frame.columns) == list(protocols.COLUMNS)
    frame = frame[frame.data == "simulated"]
    scored = frame[frame.part == "model"]
    assert set(scored.model) == {*protocols.MODELS, protocols.WORST}
    worst, scored = scored[scored.model == protocols.WORST], scored[scored.model != protocols.WORST]
    ranking = scored[scored.metric != "RMSE"]
    assert len(ranking) == (len(protocols.MODELS) * len(protocols.PROTOCOLS) * len(protocols.METRICS)
                            * len(protocols.WEIGHTINGS) * (1 + TINY.parts))
    assert len(worst) == len(protocols.PROTOCOLS) * len(protocols.METRICS) * len(protocols.WEIGHTINGS)
    assert (worst.user_part == protocols.ALL_USERS).all() and worst.l2.isna().all()
    assert scored[scored.metric == "RMSE"].weighting.isna().all()      # "" in the CSV
    whole = ranking[ranking.user_part == protocols.ALL_USERS]
    assert whole.se.notna().all() and scored[scored.metric == "RMSE"].se.isna().all()
    rmse = scored[scored.metric == "RMSE"]
    assert set(rmse.protocol) == {"observed test", "b rated test items", "complete ratings"}
    tuning = frame[frame.part == "tuning"]
    assert sorted(tuning[tuning.model == "MF-RMSE"].l2) == sorted(TINY.mf_l2_grid)
    allrank = tuning[tuning.model == "AllRank"]
    assert sorted(zip(allrank.l2, allrank.imputed)) == sorted(itertools.product(TINY.allrank_l2_grid,
                                                                                 TINY.imputed_grid))
    assert tuning[tuning.model == "MF-RMSE"].imputed.isna().all()
    assert (tuning.sweeps.between(1, TINY.sweeps)).all()
    sizes = frame[frame.part == "data"].set_index("metric").value
    assert sizes["users"] == TINY.world.n_users and sizes["items"] == TINY.world.n_items
    assert sizes["train ratings"] + sizes["test ratings"] == shared.ratings["simulated"].observed.nnz
    for module in (protocols, compute, report):
        assert not [name for name, value in vars(module).items() if hasattr(value, "cache_info")]


def test_each_model_is_refitted_at_the_lambda_and_sweeps_its_tuning_selected(smoke_run):
    """The λ of every model record is `simrec.models.select`'s choice over the tuning records (lowest
    validation RMSE for MF-RMSE, highest nDCG@n for AllRank), refitted for the sweeps of that λ's best
    checkpoint (at least one)."""
    frame = _records(smoke_run)
    for (data_name, name), tuning in frame[frame.part == "tuning"].groupby(["data", "model"]):
        points = [{"l2": v} if name == "MF-RMSE" else {"l2": v, "imputed": r}
                  for v, r in zip(tuning.l2, tuning.imputed)]
        chosen = models.select(points, tuning.value.tolist(), higher_is_better=name == "AllRank")
        best = tuning.iloc[chosen.index]
        used = frame[(frame.part == "model") & (frame.data == data_name) & (frame.model == name)]
        assert set(used.l2) == {best.l2} and set(used.sweeps) == {max(int(best.sweeps), 1)}
        assert np.array_equal(used.imputed.unique(), [best.imputed], equal_nan=True)
        assert (tuning.metric == ("RMSE" if name == "MF-RMSE" else f"ndcg@{TINY.n}")).all()


def test_claims_set_stecks_table_beside_ours(smoke_run):
    claims = pd.read_csv(smoke_run / "table_claims.csv", keep_default_na=False)
    table = pd.read_csv(smoke_run / "table_protocols.csv")
    table = table[table.weighting == "relevant ratings"].set_index(["data", "protocol", "metric"])
    per_data = 2 * len(report.STECK_A) + 2 + len(protocols.WEIGHTINGS)     # (a), (b), (b) RMSE, protocol
    assert len(claims) == per_data * 2 and set(claims.source) == {report.STECK}
    assert set(claims.verdict) <= {"reproduced", "not reproduced", "tie", "not testable"}
    for _, row in claims.iterrows():                    # each (a) claim: AllRank ahead beyond 2 SE?
        if "ranks better than MF-RMSE by" not in row.claim:
            continue
        data_name, rest = row.claim.split(", (", 1)
        protocol, label = rest.split("): AllRank ranks better than MF-RMSE by ")
        winner = table.loc[(data_name, protocol, label), "winner"]
        assert row.verdict == {"AllRank": "reproduced", "MF-RMSE": "not reproduced", "tie": "tie"}[winner]
        assert row.ours.startswith("MF-RMSE 0.") and "Netflix" in row["source's number"] and "(worst 0." in row.ours
    readme = (smoke_run / "README.md").read_text()
    assert "## Claims" in readme and "Against Steck's Table 1" in readme


def test_claim_verdicts_follow_the_rule_on_the_paired_difference():
    rows = [{"data": "d", "weighting": "" if m == "RMSE" else "relevant ratings", "protocol": p, "metric": m,
             "cutoff": 0, "MF-RMSE": 0.2, "AllRank": 0.3, "worst": 0.0, "se MF-RMSE": 0.01, "se AllRank": 0.01,
             "MF-RMSE better by": diff, "se (parts)": 0.01, "z": diff / 0.01, "winner": w}
            for p, m, diff, w in (("a1 all items", "MAP", -0.1, "AllRank"), ("a2 unrated items", "MAP", 0.01, "tie"),
                                  ("b rated test items", "MAP", 0.1, "MF-RMSE"),
                                  ("b rated test items", "RMSE", -0.1, "AllRank"))
            for m in ((m, "ATOP") if m != "RMSE" else (m,))]
    frame = pd.DataFrame(rows)
    claim = report._claim(frame)
    got = {c.claim: c.verdict for c in report.claims(TINY, frame, claim)}
    assert len(got) == 2 * 2 + 3 and got.items() >= {
                   "d, (a1 all items): AllRank ranks better than MF-RMSE by MAP": "reproduced",
                   "d, (a2 unrated items): AllRank ranks better than MF-RMSE by MAP": "tie",
                   "d, (b rated test items): MF-RMSE ranks better than AllRank": "reproduced",
                   "d, (b) split: MF-RMSE has the lower RMSE on the observed test ratings": "not reproduced",
                   "d, users weighted by their relevant ratings (Steck): the protocol changes the winner more "
                   "often than the metric does": "reproduced"}.items()


def test_graded_gains_impute_unrated_items_and_keep_test_ratings():
    config = TINY
    test = sp.csr_matrix(np.array([[0, 5, 0, 3], [1, 0, 0, 0]], np.float64))
    train = sp.csr_matrix(np.array([[4, 0, 0, 0], [0, 0, 2, 0]], np.float64))
    empty = sp.csr_matrix((2, 4), dtype=bool)
    ratings = protocols.Ratings(observed=train + test, train=train, test=test, fit=train,
                                valid=empty, train_b=train, test_b=test, unrated=empty, stars=None)
    settings = compute._settings(config, ratings)
    _, _, exclude, gains, _ = settings["a2 unrated items"]
    np.testing.assert_array_equal(gains, [[2, 5, 2, 3], [1, 2, 2, 2]])   # linear gain, Y0 = 2
    np.testing.assert_array_equal(exclude, test.toarray() == 0)       # nothing sampled here
    _, relevant, exclude, _, graded = settings["b rated test items"]
    np.testing.assert_array_equal(relevant.toarray(), test.toarray() >= 5)
    np.testing.assert_array_equal(graded.toarray(), test.toarray() > 0)
    np.testing.assert_array_equal(exclude, test.toarray() == 0)
    exponential = dataclasses.replace(config, graded_gain="exponential")
    _, _, exclude, gains, _ = compute._settings(exponential, ratings)["a1 all items"]
    np.testing.assert_array_equal(gains[0], [3, 31, 3, 7])
    np.testing.assert_array_equal(exclude, (train + test).toarray() == 0)


def test_protocol_b_leaves_users_without_test_ratings_out():
    """(b) ranks only a user's rated test items; a user without any has nothing to rank, so
    nothing of theirs is excluded and their metrics are NaN (skipped by the user means)."""
    test = sp.csr_matrix(np.array([[0, 4, 0, 5], [0, 0, 0, 0]], np.float64))
    exclude = rated.exclude_unrated(test)
    np.testing.assert_array_equal(exclude, [[True, False, True, False], [False] * 4])
    scores = np.array([[0.9, 0.1, 0.8, 0.5], [0.3, 0.2, 0.1, 0.0]], np.float32)
    ap = metrics.evaluate(scores, test.astype(bool), exclude=exclude, metrics=("ap",))["ap"]
    assert ap[0] == 1.0 and np.isnan(ap[1])                 # item 3 above item 1: both relevant


def test_real_data_cells_only_when_the_file_exists(tmp_path, monkeypatch):
    config = dataclasses.replace(protocols.PRESETS["default"], ratings_file="no/such.csv")
    assert compute.cells(config) == [{"data": "simulated"}, {"data": protocols.EXPOSURE_CELL}]
    assert compute.cells(dataclasses.replace(config, exposure_sigma=0.0)) == [{"data": "simulated"}]
    (tmp_path / "ml").mkdir()
    (tmp_path / "ml" / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,5,0\n")
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path))
    real = dataclasses.replace(config, ratings_file="ml/ratings.csv")
    assert compute.cells(real)[2:] == [{"data": protocols.REAL_DATA}, {"data": protocols.DENSE_CELL}]
    assert compute.cells(dataclasses.replace(real, dense_core=0))[2:] == [{"data": protocols.REAL_DATA}]


def test_the_dense_cell_is_the_core_of_users_and_items_with_enough_ratings(tmp_path, monkeypatch):
    """Every user and item of the dense cell has >= dense_core ratings, and no user or item of the
    whole file that could join while keeping that is left out (checked against the fixed point)."""
    rng = np.random.default_rng(0)
    rows = [(u, i, int(rng.integers(1, 6))) for u in range(40) for i in range(30) if rng.random() < 0.02 + u / 80]
    (tmp_path / "ml").mkdir()
    (tmp_path / "ml" / "ratings.csv").write_text("userId,movieId,rating,timestamp\n"
                                                  + "".join(f"{u},{i},{r},0\n" for u, i, r in rows))
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path))
    config = dataclasses.replace(TINY, ratings_file="ml/ratings.csv", dense_core=6)
    dense, whole = compute._movielens(config, 6), compute._movielens(config, 1)
    assert dense.nnz < whole.nnz and (np.diff(dense.indptr) >= 6).all() and (dense.getnnz(axis=0) >= 6).all()
    matrix = np.zeros((40, 30))
    for u, i, r in rows:
        matrix[u, i] = r
    users, items = np.ones(40, bool), np.ones(30, bool)
    while True:                                         # brute force: peel users and items below 6
        sub = matrix[np.ix_(users, items)] > 0
        bad_users, bad_items = sub.sum(1) < 6, sub.sum(0) < 6
        if not bad_users.any() and not bad_items.any():
            break
        users[np.flatnonzero(users)[bad_users]] = False
        items[np.flatnonzero(items)[bad_items]] = False
    assert dense.shape == (users.sum(), items.sum()) and dense.nnz == (matrix[np.ix_(users, items)] > 0).sum()


def test_weighted_means_against_repetition_and_the_uniform_case():
    """With integer weights the weighted mean is the mean of each value repeated w times; with
    equal weights mean and SE are `metrics.mean_and_se`; scaling the weights changes neither; the
    SE is the linearised ratio estimator's, written out by hand."""
    rng = np.random.default_rng(1)
    x, w = rng.random(50), rng.integers(0, 5, 50).astype(float)
    x[3] = np.nan
    mean, se = compute.weighted_mean_and_se(x, w)
    use = ~np.isnan(x) & (w > 0)
    assert mean == pytest.approx(np.repeat(x[use], w[use].astype(int)).mean())
    n, total = use.sum(), w[use].sum()
    assert se == pytest.approx(np.sqrt(n / (n - 1) * np.sum((w[use] * (x[use] - mean)) ** 2)) / total)
    assert compute.weighted_mean_and_se(x, np.ones(50)) == pytest.approx(metrics.mean_and_se(x))
    assert compute.weighted_mean_and_se(x, 3 * w) == pytest.approx((mean, se))
    part = np.arange(50) % 5 - (np.arange(50) == 7)             # user 7 in no part
    parts = compute.weighted_part_means(x, w, part, 5)
    for k in range(5):
        mine = use & (part == k)
        assert parts[k] == pytest.approx(np.sum(w[mine] * x[mine]) / w[mine].sum())
    np.testing.assert_allclose(compute.weighted_part_means(x, ~np.isnan(x) * 1.0, part, 5),
                               stats.part_means(np.where(np.isnan(x), 0, x), np.where(np.isnan(x), -1, part), 5))
    assert np.isnan(compute.weighted_mean_and_se(x, np.zeros(50))).all()


def test_worst_order_and_user_weights_against_a_hand_ranking():
    """The worst order ranks relevant items last (binary) and items by increasing gain (graded):
    its values equal the metrics of an explicit such ranking; the user weight counts the relevant
    candidates."""
    test = sp.csr_matrix(np.array([[0, 5, 0, 3, 5], [1, 0, 5, 0, 0], [2, 0, 0, 0, 1]], np.float64))
    train = sp.csr_matrix(np.array([[4, 0, 0, 0, 0], [0, 0, 0, 2, 0], [0, 3, 0, 0, 0]], np.float64))
    unrated = sp.csr_matrix(np.array([[0, 0, 1, 0, 0], [0, 1, 0, 0, 1], [0, 0, 1, 1, 0]], bool))
    ratings = protocols.Ratings(observed=train + test, train=train, test=test, fit=train, valid=train,
                                train_b=train, test_b=test, unrated=unrated, stars=None)
    config = dataclasses.replace(TINY, n=2, n_b=1)
    for protocol, setting in compute._settings(config, ratings).items():
        _, relevant, exclude, gains, graded = setting
        worst = compute.worst_order(config, protocol, setting)
        hand = compute._protocol_metrics(config, protocol, setting,
                                         -relevant.toarray().astype(float) + 1e-3 * np.arange(5)[None],
                                         -np.asarray(gains) + 1e-3 * np.arange(5)[None])
        for label in protocols.METRICS:
            np.testing.assert_allclose(worst[label], hand[label], err_msg=f"{protocol} {label}")
        np.testing.assert_array_equal(compute.user_weights(setting), (relevant.toarray() & ~exclude).sum(1))
    assert list(compute.user_weights(compute._settings(config, ratings)["a2 unrated items"])) == [2, 1, 0]


def test_allrank_tunes_lambda_and_the_imputed_rating():
    assert compute.grid(TINY, "MF-RMSE") == [{"l2": v} for v in TINY.mf_l2_grid]
    assert compute.grid(TINY, "AllRank") == [{"l2": v, "imputed": r} for r in TINY.imputed_grid
                                             for v in TINY.allrank_l2_grid]
    spec = compute._spec(TINY, "AllRank", {"l2": 0.1, "imputed": 1.0}, 3)
    assert (spec.l2, spec.imputed, spec.sweeps, spec.missing_weight) == (0.1, 1.0, 3, TINY.missing_weight)


@pytest.mark.parametrize("overrides", [{"star_shares": (0.5, 0.5, 0.1, 0.1, 0.1)},
                                       {"observe_probability": (0.0, 0.1, 0.1, 0.1, 0.1)},
                                       {"test_fraction": 0.0}, {"valid_fraction": 1.0},
                                       {"missing_weight": 0.0}, {"dim": 0}, {"sweeps": 0},
                                       {"exposure_sigma": -1.0}, {"graded_gain": "quadratic"},
                                       {"graded_imputed": np.nan}, {"parts": 4},
                                       {"min_ratings": 10, "n_test": 10}, {"n_b": 11},
                                       {"mf_l2_grid": (0.1, 0.0)}, {"allrank_l2_grid": ()},
                                       {"mf_l2_grid": (0.1, 0.1)}, {"z": 0.0}, {"imputed_grid": ()},
                                       {"imputed_grid": (1.0, 1.0)}, {"imputed_grid": (-1.0,)},
                                       {"dense_core": -1}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(protocols.PRESETS["default"], **overrides)

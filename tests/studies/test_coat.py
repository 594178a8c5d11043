"""The coat study (protocol agreement with a missing-at-random truth, Schnabel et al. ICML'16) on a
synthetic Coat-like folder (one tiny run per module), its skip when the data is absent, and its
pieces against independent references: the per-user split sizes, the protocols' masks and the
IPS gains (a brute-force DCG), the selection of `simrec.models.tune`, Kendall's τ with its
bootstrap interval on planted orderings, the noise-aware inversion count on hand-made user parts,
the claim and the report-only edit."""
import dataclasses
import importlib
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import data, metrics, models, runner, stats
from simrec import datafiles as _data
from simrec_studies import coat
from tests.test_data import write_coat

compute = importlib.import_module("simrec_studies.coat.compute")
report = importlib.import_module("simrec_studies.coat.report")

#: the smoke preset with one point per grid where a grid's selection is not what is checked (MF-RMSE
#: keeps three λ, so an edge flag is exercised) and fewer bootstrap resamples
TINY = dataclasses.replace(coat.PRESETS["smoke"], splits=2, allrank_l2s=(1.0,), allrank_weights=(0.1,),
                           ials_l2s=(1.0,), ease_l2s=(100.0,), adg_l2s=(0.1,), bootstrap=20)


def coat_like(key: int = 0, n_users: int = 40, n_items: int = 30, n_rated: int = 12,
              n_random: int = 6):
    """A small Coat-like data set: 1..5 stars from a rank-2 taste model; each user rates the
    n_rated items of highest stars + noise (self-selected, MNAR) and n_random uniform items (MCAR);
    propensities are the empirical rating rate of each item among the users (clipped to (0, 1])."""
    rng = np.random.default_rng(key)
    taste = rng.normal(size=(n_users, 2)) @ rng.normal(size=(2, n_items)) + rng.normal(size=n_items)
    stars = np.clip(np.round(3 + taste), 1, 5)
    choice = np.argsort(-(stars + rng.normal(scale=1.5, size=stars.shape)), axis=1)[:, :n_rated]
    train, test = np.zeros_like(stars), np.zeros_like(stars)
    np.put_along_axis(train, choice, np.take_along_axis(stars, choice, axis=1), axis=1)
    for u in range(n_users):
        items = rng.choice(n_items, n_random, replace=False)
        test[u, items] = stars[u, items]
    rate = np.clip((train > 0).mean(axis=0), 0.02, 1.0)
    return train, test, np.broadcast_to(rate, stars.shape).copy()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """TINY run once on a Coat-like folder (the data folder set only for the run)."""
    root = tmp_path_factory.mktemp("coat")
    train, test, propensities = coat_like()
    write_coat(root / "coat", train, test, propensities)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(_data.DATA_ENV, str(root))
        runner.run(coat.STUDY, TINY, seed=0, out=root / "out", preset="tiny", progress=False)
    return root / "out"


def test_smoke_run_on_a_coat_like_folder(smoke_run):
    out = smoke_run
    assert json.loads((out / "manifest.json").read_text())["study"] == "coat"
    assert (out / "fig_agreement.png").exists()
    table = pd.read_csv(out / "table_agreement.csv")
    expected = {(t, p, m) for t in (coat.TRUTH, coat.TRUTH_RANDOM) for p in coat.OFFLINE
                for m in (coat.IPS_METRICS if "IPS" in p else coat.METRICS)}
    assert set(zip(table.truth, table.protocol, table.metric)) == expected
    finite = table.dropna(subset=["tau", "low", "high", "split_tau"])
    assert len(finite) > len(table) / 2
    assert ((finite.tau.abs() <= 1) & (finite.low <= finite.high) & (finite.split_tau.abs() <= 1)).all()
    assert (table.splits == TINY.splits).all()
    assert (table.inverted <= table["both decided"]).all()
    assert (table["both decided"] <= table[["offline decided", "truth decided"]].min(axis=1)).all()
    selected = pd.read_csv(out / "table_selected.csv", keep_default_na=False)
    assert list(selected.model) == list(coat.MODELS) * TINY.splits and "at grid edge" in selected.columns
    records = pd.read_csv(out / "records.csv")
    values = records[(records.part == "model") & (records.user_part == coat.ALL_USERS)]
    assert set(values.protocol) == set(coat.PROTOCOLS) and set(values.split) == set(range(TINY.splits))
    pooled = records[records.split == coat.POOLED]                  # the pooled cell: agreement only
    assert set(pooled.part) == {"agreement", "bootstrap"} and set(pooled.truth) == {coat.TRUTH, coat.TRUTH_RANDOM}
    readme = (out / "README.md").read_text()
    assert "Verdict" in readme and "Kendall" in readme and "## Claims" in readme
    claims = pd.read_csv(out / "table_claims.csv")
    assert len(claims) == 4 and set(claims.verdict) <= {"reproduced", "not reproduced", "tie"}


def test_each_model_is_refitted_at_the_point_its_tuning_selected(smoke_run):
    """The "selected" record of a model is `simrec.models.select`'s choice over its "tuning" records
    (lowest validation RMSE for MF-RMSE, highest validation nDCG for the others), with that point's
    budget and the edge flags; a grid of one point is never flagged."""
    records = pd.read_csv(smoke_run / "records.csv", keep_default_na=False)
    for name in coat.MODELS:
        tuning = records[(records.part == "tuning") & (records.model == name) & (records.split == 0)]
        (chosen,) = records[(records.part == "selected") & (records.model == name)
                            & (records.split == 0)].itertuples()
        points = compute.grid(TINY, name)
        assert [compute._point_text(p) for p in points] == list(tuning.point)
        if name == "popularity":
            assert chosen.point == "(none)" and chosen.edges == ""
            continue
        selection = models.select(points, tuning.value.astype(float).tolist(), higher_is_better=name != "MF-RMSE")
        assert chosen.point == compute._point_text(selection.point) and chosen.edges == ", ".join(selection.edges)
        assert int(chosen.budget) == int(tuning.budget.iloc[selection.index])


def test_the_study_skips_cleanly_without_the_data(tmp_path, monkeypatch):
    monkeypatch.setenv(_data.DATA_ENV, str(tmp_path / "nothing"))
    config = coat.PRESETS["smoke"]
    with pytest.warns(_data.MissingDataWarning, match="coat/train.ascii not found"):
        assert compute.cells(config) == []
    skipped = report.report(config, pd.DataFrame(columns=list(coat.COLUMNS)))
    assert "coat skipped" in skipped.summary and not skipped.tables
    assert compute.cells(dataclasses.replace(config, folder="")) == []


def test_every_config_field_says_what_it_means():
    assert all(meaning for _, _, _, meaning in runner.config_help(coat.PRESETS["default"]))
    with pytest.raises(ValueError, match=r"parts .*must be an integer >= 5"):
        coat.CoatConfig(parts=4)
    with pytest.raises(ValueError, match="ease_l2s must be distinct finite values > 0"):
        coat.CoatConfig(ease_l2s=(1.0, 1.0))


def test_split_holds_out_exact_counts_per_user():
    train, _, _ = coat_like()
    ratings = sp.csr_matrix(train)
    config = coat.PRESETS["smoke"]
    part = compute.split(jax.random.key(3), config, ratings)
    for matrix, count in ((part.test, config.n_test), (part.valid, config.n_valid),
                          (part.train, 12 - config.n_test - config.n_valid)):
        assert np.all(np.diff(matrix.indptr) == count)
    assert (part.train + part.valid + part.test != ratings).nnz == 0       # disjoint, the whole
    assert (part.fit != part.train + part.valid).nnz == 0


def _tiny():
    """One user, 5 items: MNAR ratings on items 0..3, MCAR on items 2 and 4."""
    coat_data = data.Coat(train=sp.csr_matrix(np.array([[5, 4, 2, 5, 0]], np.float32)),
                          test=sp.csr_matrix(np.array([[0, 0, 4, 0, 5]], np.float32)),
                          propensities=np.array([[0.5, 0.25, 0.1, 0.2, 0.05]]))
    part = coat.Split(train=sp.csr_matrix(np.array([[5.0, 0, 0, 0, 0]])),
                      valid=sp.csr_matrix(np.array([[0, 0, 2.0, 0, 0]])),
                      test=sp.csr_matrix(np.array([[0, 4.0, 0, 5.0, 0]])))
    return coat_data, part


def test_protocol_masks_and_ips_gains():
    coat_data, part = _tiny()
    config = dataclasses.replace(coat.PRESETS["smoke"], n_test=2)
    settings = compute.settings(config, coat_data, part)
    fit = [[True, False, True, False, False]]
    relevant, exclude, gains, _ = settings[coat.A1]
    np.testing.assert_array_equal(relevant, [[False, True, False, True, False]])
    assert exclude is None and gains is None
    np.testing.assert_array_equal(settings[coat.A2][1], fit)
    np.testing.assert_array_equal(settings[coat.B][1], [[True, False, True, False, True]])
    # the truth ranks everything outside fit; the random-only list drops the fit item 2
    relevant, exclude, _, _ = settings[coat.TRUTH]
    np.testing.assert_array_equal(relevant, [[False, False, True, False, True]])
    np.testing.assert_array_equal(exclude, fit)
    relevant, exclude, _, _ = settings[coat.TRUTH_RANDOM]
    np.testing.assert_array_equal(relevant, [[False, False, False, False, True]])
    np.testing.assert_array_equal(exclude, [[True, True, True, True, False]])
    # IPS: weight n_u / (n_test p) = 4 / (2 p); DCG = sum over held-out relevant of w / log2(p + 2)
    _, _, gains, _ = settings[coat.A1_IPS]
    np.testing.assert_allclose(gains, 2 / coat_data.propensities)
    scores = np.array([[0.0, 3.0, 1.0, 2.0, 4.0]])           # positions: 4, 1, 3, 2, 0 -> rank 0..4
    position = {1: 1, 3: 2}                                   # held-out relevant item -> position
    expected = sum(2 / coat_data.propensities[0, i] / math.log2(p + 2) for i, p in position.items())
    got = metrics.dcg(scores, settings[coat.A1_IPS][0], gains=gains)
    assert got[0] == pytest.approx(expected)


def test_agreement_of_planted_orderings():
    config = dataclasses.replace(coat.PRESETS["smoke"], bootstrap=200)
    rng = np.random.default_rng(0)
    level = np.arange(6.0)[:, None]                            # six models, clearly ordered
    truth = level + rng.normal(scale=0.1, size=(6, 50))
    truth[:, :5] = np.nan                                      # users without relevant items
    offline = level + rng.normal(scale=0.1, size=(6, 50))
    key = jax.random.key(0)
    tau, low, high, draws = compute.agreement(key, config, offline, truth)
    assert (tau, low, high) == (1.0, 1.0, 1.0) and draws.shape == (200,) and (draws == 1).all()
    tau, low, high, _ = compute.agreement(key, config, offline[::-1], truth)
    assert (tau, low, high) == (-1.0, -1.0, -1.0)
    # pure noise: τ's interval covers 0 and is the same for the same key
    noise = rng.normal(size=(6, 50))
    first = compute.agreement(key, config, noise, truth)
    again = compute.agreement(key, config, noise, truth)
    assert first[:3] == again[:3] and np.array_equal(first[3], again[3], equal_nan=True)
    assert first[1] <= 0 <= first[2]
    # the memo over rankings changes nothing: every draw equals τ-b of its resampled means
    counts = np.zeros((config.bootstrap, 50))
    np.add.at(counts, (np.arange(config.bootstrap)[:, None],
                       np.asarray(jax.random.randint(key, (config.bootstrap, 50), 0, 50))), 1.0)
    for b in range(0, config.bootstrap, 37):
        x = noise @ counts[b] / counts[b].sum()
        y = np.array([np.average(t[~np.isnan(t)], weights=counts[b][~np.isnan(t)]) for t in truth])
        assert first[3][b] == pytest.approx(stats.kendall_tau(x, y)[0], abs=1e-12)


def _part_records(protocol: str, metric: str, by_model: dict) -> list[dict]:
    return [{"split": 0, "part": "model", "protocol": protocol, "metric": metric, "model": model,
             "user_part": k, "value": v} for model, parts in by_model.items()
            for k, v in enumerate(parts)]


def test_inversions_count_only_pairs_both_sides_decide():
    config = coat.PRESETS["smoke"]
    base = {m: np.full(5, 0.5) + 0.01 * np.arange(5) for m in coat.MODELS}
    offline = dict(base, **{"EASE": base["EASE"] + 0.2, "iALS": base["iALS"] + 0.1})
    truth = dict(base, **{"EASE": base["EASE"] - 0.2,                     # EASE inverted vs all
                          "iALS": base["iALS"] + np.array([0.3, -0.3, 0.3, -0.3, 0.05])})  # tie
    records = pd.DataFrame(_part_records(coat.A1, "MAP", offline)
                           + _part_records(coat.TRUTH, "MAP", truth)
                           + _part_records(coat.TRUTH_RANDOM, "MAP", truth))
    table = report.inversions(config, records)
    row = table[(table.protocol == coat.A1) & (table.truth == coat.TRUTH)].iloc[0]
    # offline decides EASE vs the 5 others and iALS vs the 4 others (the EASE pair once): 9;
    # the truth decides EASE vs the 4 models other than the noisy iALS (EASE - iALS has mean
    # -0.21 but SE 0.13 over the parts: a tie), all 4 inverted
    assert (row["offline decided"], row["truth decided"], row["both decided"],
            row["inverted"]) == (9, 4, 4, 4)
    diff = truth["iALS"] - truth["popularity"]
    assert stats.paired_winner(diff, names=("iALS", "popularity")).winner == stats.TIE


def test_the_pooled_cell_takes_tau_of_the_values_averaged_over_the_splits(monkeypatch):
    """The pooled cell re-evaluates every split and takes τ (and its bootstrap) of each model's
    per-user values averaged over the splits (a user without a value in a split averages the
    others): planted values whose single splits disagree with the truth but whose average agrees."""
    config = dataclasses.replace(coat.PRESETS["smoke"], splits=2, bootstrap=50)
    truth = np.tile(np.arange(4.0)[:, None], (1, 30))                   # models 0 < 1 < 2 < 3
    offline = [truth + np.array([[0.0], [3.0], [0.0], [0.0]]), truth + np.array([[0.0], [-3.0], [0.0], [0.0]])]
    offline[1][2, 5] = np.nan                                           # model 2, user 5: one split only
    def split_values(key, config, data, index):
        values = {(protocol, metric): offline[index] for protocol in coat.OFFLINE for metric in coat.METRICS}
        values |= {(t, metric): truth for t in (coat.TRUTH, coat.TRUTH_RANDOM) for metric in coat.METRICS}
        return [], values
    monkeypatch.setattr(compute, "split_values", split_values)
    rows = pd.DataFrame(compute.compute(jax.random.key(0), config, {"split": coat.POOLED}, compute.Shared(None)))
    agreement = rows[rows.part == "agreement"]
    assert set(agreement.split) == {coat.POOLED} and (agreement.value == 1.0).all()
    singles = [compute.agreement(jax.random.key(0), config, o, truth)[0] for o in offline]
    assert singles == [pytest.approx(1 / 3), pytest.approx(2 / 3)]           # each split alone swaps models
    boot = rows[rows.part == "bootstrap"]
    assert len(boot) == len(coat.UNWEIGHTED) * 2 * config.bootstrap and (boot.value == 1.0).all()


def _bootstrap_records(level: dict, spread: dict, shared: np.ndarray, rng, truths=(coat.TRUTH,)) -> pd.DataFrame:
    """The pooled cell's bootstrap records: resample b of protocol p is level[p] + shared[b] + noise."""
    return pd.DataFrame([{"split": coat.POOLED, "part": "bootstrap", "protocol": p, "truth": t, "user_part": b,
                          "value": level[p] + shared[b] + spread[p] * rng.normal()}
                         for t in truths for p in coat.UNWEIGHTED for b in range(len(shared))])


def test_protocol_differences_pair_the_bootstrap_draws_of_the_best_protocol():
    config = coat.PRESETS["smoke"]
    rng = np.random.default_rng(0)
    shared = rng.normal(scale=0.3, size=400)              # common to every protocol: cancels
    level = {coat.A1: 0.1, coat.A2: 0.45, coat.B: 0.5}
    spread = {coat.A1: 0.01, coat.A2: 0.2, coat.B: 0.01}
    records = _bootstrap_records(level, spread, shared, rng, truths=(coat.TRUTH, coat.TRUTH_RANDOM))
    records = pd.concat([records, records.assign(split=0, value=0.0)])   # a single split's draws are not read
    agree = pd.DataFrame([{"truth": t, "protocol": p, "metric": m, "tau": level[p] if t == coat.TRUTH else -level[p]}
                          for t in (coat.TRUTH, coat.TRUTH_RANDOM) for p in coat.UNWEIGHTED for m in ("MAP", "nDCG")])
    table = report.protocol_differences(config, agree, records)
    main = table[table.truth == coat.TRUTH].set_index("other")
    assert set(main.best) == {coat.B} and set(main.index) == {coat.A1, coat.A2}
    assert main.difference[coat.A1] == pytest.approx(0.4)
    assert main.significant[coat.A1] == "yes" and main.significant[coat.A2] == "no"
    assert main.low[coat.A2] < 0 < main.high[coat.A2] < 0.05 + 3 * 0.2
    assert set(table[table.truth == coat.TRUTH_RANDOM].best) == {coat.A1}   # each truth its own best


def test_the_claim_is_the_lead_of_a1_and_a2_over_b_against_each_truth():
    """Steck's claim, (a) closer to the MCAR truth than (b): the mean-τ lead and its paired bootstrap
    interval, the same numbers `protocol_differences` gives for the best protocol, per truth."""
    config = coat.PRESETS["smoke"]
    rng = np.random.default_rng(1)
    shared = rng.normal(scale=0.3, size=200)
    level = {coat.A1: 0.6, coat.A2: 0.52, coat.B: 0.5}
    records = _bootstrap_records(level, dict.fromkeys(level, 0.002), shared, rng,
                                 truths=(coat.TRUTH, coat.TRUTH_RANDOM))
    agree = pd.DataFrame([{"truth": t, "protocol": p, "metric": "MAP", "tau": level[p]}
                          for t in (coat.TRUTH, coat.TRUTH_RANDOM) for p in coat.UNWEIGHTED])
    a1, a2, a1_random, a2_random = report.claims(config, agree, records)
    assert a1.verdict == "reproduced" and a1.ours.startswith("mean Kendall τ a1 minus b: +0.10")
    assert coat.TRUTH in a1.claim and coat.TRUTH_RANDOM in a1_random.claim
    assert a2.verdict == a1_random.verdict == a2_random.verdict == "reproduced"   # +0.02, draws sd 0.003
    table = report.protocol_differences(config, agree, records)
    row = table[table.truth == coat.TRUTH].set_index("other").loc[coat.B]
    assert report._lead(config, agree, records, coat.A1, coat.B, coat.TRUTH) == (row.difference, row.low, row.high)
    worse = agree.assign(tau=agree.tau.where(agree.protocol != coat.A2, 0.2))
    records.loc[records.protocol == coat.A2, "value"] -= 0.32
    assert report.claims(config, worse, records)[1].verdict == "not reproduced"

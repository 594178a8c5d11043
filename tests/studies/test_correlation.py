"""The correlation study (Jeunen et al. KDD'24 Table 2) and its scenarios on a tiny platform:
output structure, records against the declared columns, the cached setup, p-values, the m = 1
identity, the Table 2 estimates against numpy, Pearson against scipy, typed rankers, the claims
beside the paper's numbers, the verdicts and spreads of the report, the report-only edit, and
byte-identical tables when a run is repeated from its cell cache."""
import dataclasses
import importlib
import json
import math
import pickle

import jax
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from simrec import feed, ope, reporting, runner, stats
from simrec_studies import correlation
from simrec_studies.common import scenarios
from simrec_studies.common import table2, table2_estimates
from simrec_studies.common.scenarios import NoisyOracle, Popularity, Trained

compute_module = importlib.import_module("simrec_studies.correlation.compute")
report_module = importlib.import_module("simrec_studies.correlation.report")

#: the smoke platform with fewer and shorter days and smaller samples and rankers: two 3-day
#: experiments (the fewest a Pearson test and a paired verdict accept), for speed. The run is
#: bound by XLA compilation, so the rt slot trains MF-AUC as r0 does (longer): one compiled
#: training epoch instead of two (MF-ADG training is tested with study opt_adg).
CONFIG = dataclasses.replace(
    correlation.PRESETS["smoke"], long_days=3, replications=2,
    scenario=dataclasses.replace(correlation.PRESETS["smoke"].scenario, days=3, log_sessions=512, ab_sessions=512,
                                 rankers=scenarios.RankerConfig(retrieval_dim=8, dim=8, r0_pairs=2_000,
                                                                rt_method="mf_auc", rt_pairs=6_000)))


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """The tiny config run twice with one cache: the second run reads every cell back (its report
    without figures, which are not compared: a report-only change, so the cells' addresses stay)."""
    cache = tmp_path_factory.mktemp("cache")
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    summaries = [runner.run(correlation.STUDY, CONFIG, seed=0, out=first, preset="smoke", cache_dir=cache,
                            progress=False)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_module, "_figures", lambda daily, corr: {})
        summaries.append(runner.run(correlation.STUDY, CONFIG, seed=0, out=second, preset="smoke", cache_dir=cache,
                                    progress=False))
    return first, second, summaries, cache


@pytest.fixture(scope="module")
def shared(smoke_runs):
    """The smoke run's setup, read back from the runner's setup cache (cache_setup=True)."""
    cache = smoke_runs[3]
    (path,) = (cache / "correlation").glob("setup-*.pkl")
    return pickle.loads(path.read_bytes())


@pytest.fixture(scope="module")
def smoke_day(shared):
    """One level-2 day of the smoke platform: its log, policies and exposures under the learnt pbm."""
    platform = shared.platforms[0]
    today = scenarios.day(platform, "level2", 3)
    logger = scenarios.logging_policy(platform, "level2", scenarios.scores(platform, Trained("r0")))
    target = scenarios.target_policy(platform, "level2", scenarios.scores(platform, Trained("rt")))
    log = feed.simulate(jax.random.key(1), today.scenario, logger, CONFIG.scenario.log_sessions, day=3,
                        logging_exposure=scenarios.logging_exposure(today.scenario, logger))
    pbm = feed.fit_view_model(log.viewed)
    e0, et = compute_module._exposures(log, {"R0": logger, "Rt": target}, pbm, CONFIG.scenario.world.n_users).values()
    return platform, today, log, pbm, np.asarray(e0), np.asarray(et)


def test_smoke_writes_table2_spread_figures_and_manifest(smoke_runs):
    out, _, (summary, _), _ = smoke_runs
    for name in ("table_2", "table_2_long", "table_2_single_week", "table_2_exact_online", "table_2_paper",
                 "table_spread", "table_claims", "table_claims_detail", "table_mechanism", "table_mechanism_bins",
                 "table_mechanism_partial", "table_noise", "table_daily"):
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").exists(), name
    for fig in ("fig_days", "fig_spread", "fig_mechanism"):
        assert (out / f"{fig}.png").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["study"] == "correlation" and manifest["preset"] == "smoke"
    assert summary.cells_total == CONFIG.replications * CONFIG.long_days
    table = pd.read_csv(out / "table_2.csv")
    assert list(table.estimator) == list(correlation.ESTIMATORS.values())
    assert table.shape[1] == 1 + len(scenarios.LEVELS) * len(scenarios.SignalConfig().names) * len(correlation.POLICIES)
    assert all(sum("**" in str(v) for v in table[c]) >= 1 for c in table.columns[1:])     # a best per column
    daily = pd.read_csv(out / "table_daily.csv")
    assert len(daily) == summary.cells_total * 2 * 2 * 2        # levels x signals x policies per cell
    assert list(daily.columns) == ["replication", "day", "level", "signal", "policy", *correlation.DAILY_COLUMNS]
    readme = (out / "README.md").read_text()
    for claim in ("(a)", "(b)", "(c)", "Mechanism", "## Claims"):
        assert claim in readme
    detail = pd.read_csv(out / "table_claims_detail.csv")
    assert list(detail.setting) == [table2.setting_label(*s) for s in table2.SETTINGS]
    assert set(detail["(b) vs nDCG skip"]) | set(detail["(c) vs log,C"]) <= {"better", "worse", "tie", "unclear"}
    claims = pd.read_csv(out / "table_claims.csv", keep_default_na=False)
    assert len(claims) == 4 * len(table2.SETTINGS)
    assert set(claims.verdict) <= set(reporting.CLAIM_VERDICTS)
    assert claims["source's number"].iloc[0] == f"r = {table2.PAPER['dcg_pbm_q'][0]:.2f} (p < 0.01)"


def test_records_match_the_declared_columns_and_rebuild_the_daily_table(smoke_runs, shared):
    """A cell computed from the cached setup gives exactly the records of the run (check_records
    validates them against `COLUMNS`), and `daily_frame` of all records is `table_daily`."""
    out, _, _, cache = smoke_runs
    cell = {"replication": 1, "day": 2}
    rows = runner.check_records(correlation.STUDY, cell,
                                correlation.compute(jax.random.key(0), CONFIG, cell, shared))
    cached = [json.loads(p.read_text()) for p in (cache / "correlation").glob("*.json")]
    assert {c["cell"]["replication"] * 100 + c["cell"]["day"] for c in cached} == \
        {r * 100 + d for r in range(CONFIG.replications) for d in range(CONFIG.long_days)}
    stored = next(c for c in cached if c["cell"] == cell)
    assert stored["columns"] == list(correlation.COLUMNS)
    pd.testing.assert_frame_equal(pd.DataFrame(rows), pd.DataFrame(stored["rows"]))
    records = pd.read_csv(out / "records.csv", keep_default_na=False, na_values={"value": [""]})
    assert list(records.columns) == list(correlation.COLUMNS)
    daily = correlation.daily_frame(records)
    pd.testing.assert_frame_equal(daily, pd.read_csv(out / "table_daily.csv"), check_dtype=False)


def test_setup_is_one_trained_platform_per_index_and_pickles(shared):
    assert len(shared.platforms) == CONFIG.platforms
    platform = shared.platforms[0]
    assert set(platform.trained) == {"r0", "rt"}
    again = pickle.loads(pickle.dumps(platform))
    for slot in ("r0", "rt"):
        np.testing.assert_array_equal(np.asarray(scenarios.scores(again, Trained(slot)).params),
                                      np.asarray(scenarios.scores(platform, Trained(slot)).params))


def test_p_values_in_unit_interval_and_spread_counts_experiments(smoke_runs):
    out = smoke_runs[0]
    daily = pd.read_csv(out / "table_daily.csv")
    corr = report_module.correlations(daily, CONFIG.scenario.days)
    finite = corr.dropna()
    assert len(finite) > 0.9 * len(corr)
    assert finite.p.between(0, 1).all() and finite.r.between(-1, 1).all()
    weeks = CONFIG.replications * (CONFIG.long_days // CONFIG.scenario.days)
    spread = pd.read_csv(out / "table_spread.csv")
    assert set(spread[spread.variant == "week"].experiments) <= set(range(weeks + 1))
    assert spread[spread.variant == "long"].experiments.max() == CONFIG.replications
    assert spread["share_p<0.05"].between(0, 1).all()


def test_pearson_matches_scipy_on_the_daily_series(smoke_runs):
    out = smoke_runs[0]
    daily = pd.read_csv(out / "table_daily.csv")
    part = daily[(daily.replication == 0) & (daily.level == "level1") & (daily.signal == "watch")
                 & (daily.policy == "Rt")].sort_values("day")
    for key in ("dcg_pbm_q", "dcg_log_c", "ndcg_skip"):
        r, p = stats.pearson(part[key].to_numpy(), part.online_ab.to_numpy())
        want = scipy.stats.pearsonr(part[key].to_numpy(), part.online_ab.to_numpy())
        assert r == pytest.approx(want.statistic, abs=1e-12) and p == pytest.approx(want.pvalue, rel=1e-9)
    corr = report_module.correlations(daily, CONFIG.scenario.days)
    long = corr[(corr.variant == "long") & (corr.replication == 0) & (corr.level == "level1")
                & (corr.signal == "watch") & (corr.policy == "Rt") & (corr.estimator == "dcg_pbm_q")]
    assert float(long.r.iloc[0]) == pytest.approx(
        scipy.stats.pearsonr(part.dcg_pbm_q, part.online_ab).statistic, abs=1e-12)


def test_partial_and_hac_columns_match_independent_references(smoke_runs):
    """table_mechanism_partial's partial r and p against residual correlations (lstsq) and the t
    distribution on days − 3 df; table_mechanism's HAC column against statsmodels per replication."""
    from statsmodels.regression.linear_model import OLS
    out = smoke_runs[0]
    daily = pd.read_csv(out / "table_daily.csv")
    group = daily[(daily.level == "level2") & (daily.signal == "like") & (daily.policy == "Rt")]
    partial = pd.read_csv(out / "table_mechanism_partial.csv")
    row = partial[(partial.level == "level2") & (partial.signal == "like")
                  & (partial.estimator == correlation.ESTIMATORS["ndcg_skip"])].iloc[0]
    days = CONFIG.replications * CONFIG.long_days
    assert row.df == days - 3
    z = group.session.to_numpy()
    design = np.column_stack([np.ones(days), z])

    def residual(v):
        return v - design @ np.linalg.lstsq(design, v, rcond=None)[0]

    r = np.corrcoef(residual(group.ndcg_skip.to_numpy()), residual(group.online_ab.to_numpy()))[0, 1]
    assert row["partial r given z_s"] == pytest.approx(r, abs=1e-3)          # csv keeps 3-4 digits
    t = r * np.sqrt((days - 3) / (1 - r * r))
    assert row["p given z_s"] == pytest.approx(2 * scipy.stats.t.sf(abs(t), days - 3), rel=2e-2, abs=1e-4)
    assert partial[["p given z_s", "p given z_e"]].stack().between(0, 1).all()
    mech = pd.read_csv(out / "table_mechanism.csv")
    se = mech[(mech.level == "level2") & (mech.signal == "like") & (mech.quantity == "online (A/B)")].iloc[0]
    per_rep = [OLS(g.sort_values("day").online_ab.to_numpy(), np.ones(CONFIG.long_days)).fit(
        cov_type="HAC", cov_kwds={"maxlags": stats.newey_west_lags(CONFIG.long_days), "use_correction": True}).bse[0]
        for _, g in group.groupby("replication")]
    assert se["se of mean (HAC)"] == pytest.approx(np.sqrt(np.sum(np.square(per_rep))) / len(per_rep), rel=1e-3)


def test_rerun_from_cache_gives_identical_tables(smoke_runs):
    first, second, (_, again), _ = smoke_runs
    assert again.cells_computed == 0
    for name in sorted(p.name for p in first.glob("table_*")):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert (first / "records.csv").read_bytes() == (second / "records.csv").read_bytes()


def _table2(smoke_day, signal: int):
    """`table2_estimates.contributions` and `.estimates` of the smoke day's level-2 log (clip 200)
    for R₀ and R_t, with the pbm's exposures under both views (the log view is not needed here)."""
    _, _, log, pbm, e0, et = smoke_day
    discount = feed.view_probability(pbm, CONFIG.scenario.level2.feed_length)
    exposures = {view: {"R0": e0, "Rt": et} for view in ("log", "pbm")}
    data, targets = table2_estimates.inputs(log.rewards[signal], log.viewed, exposures, discount)
    parts = table2_estimates.contributions(data, targets, CONFIG.scenario.level2.clip)
    return parts, table2_estimates.estimates(parts), np.asarray(discount, np.float64)


def test_dcg_at_m1_is_the_raw_label_estimate(smoke_day):
    """m = 1 clips every inverse propensity to 1 (ε₀ <= 1): DCG = mean_τ Σ c · ε, no IPS at all."""
    _, _, log, _, _, et = smoke_day
    viewed, clicks = np.asarray(log.viewed), np.asarray(log.rewards[1], np.float64)
    raw = np.where(viewed, clicks * et, 0.0).sum(axis=1)
    parts, estimates, _ = _table2(smoke_day, 1)
    np.testing.assert_allclose(parts["dcg_pbm_c", "Rt"].numerator[0], raw, rtol=1e-5, atol=1e-7)
    assert estimates["dcg_pbm_c", "Rt"][0] == pytest.approx(raw.mean(), rel=1e-5)
    assert estimates["dcg_pbm_q", "Rt"][0] > estimates["dcg_pbm_c", "Rt"][0]      # IPS weights >= 1 on viewed clicks


def test_table2_estimates_match_a_direct_computation(smoke_day):
    """Every Table 2 estimate of the study (`table2_estimates`, through the registry) against
    numpy, in `table2.ESTIMATORS`' order: DCG_τ = Σ_viewed c · min(m, 1/ε₀) · ε, iDCG_τ = the
    sorted debiased labels · the pbm discount, nDCG skip / zero, pnDCG = mean DCG / mean iDCG,
    SE = sd / √n (pnDCG's: the delta method)."""
    _, _, log, _, e0, et = smoke_day
    clip = CONFIG.scenario.level2.clip
    parts, estimates, discount = _table2(smoke_day, 0)
    assert list(dict.fromkeys(key for key, _ in parts)) == list(table2.ESTIMATORS)
    viewed, c = np.asarray(log.viewed), np.asarray(log.rewards[0], np.float64)
    weight = np.where(viewed, 1.0 / np.where(viewed, e0, 1.0), 0.0)
    labels = -np.sort(-(c * np.minimum(clip, weight)), axis=1)
    idcg = labels @ np.concatenate([discount, np.zeros(max(0, labels.shape[1] - discount.size))])[:labels.shape[1]]
    for policy, e in (("R0", e0), ("Rt", et)):
        dcg = {m: (c * np.minimum(m, weight) * e).sum(axis=1) for m in (1.0, clip)}
        ndcg = np.where(idcg > 0, dcg[clip] / np.where(idcg > 0, idcg, 1.0), np.nan)
        kept = ndcg[~np.isnan(ndcg)]
        ratio = dcg[clip].mean() / idcg.mean()
        want = {"dcg_pbm_c": (dcg[1.0].mean(), dcg[1.0].std(ddof=1) / math.sqrt(c.shape[0])),
                "dcg_pbm_q": (dcg[clip].mean(), dcg[clip].std(ddof=1) / math.sqrt(c.shape[0])),
                "ndcg_skip": (kept.mean(), kept.std(ddof=1) / math.sqrt(kept.size)),
                "ndcg_zero": (np.nan_to_num(ndcg).mean(), np.nan_to_num(ndcg).std(ddof=1) / math.sqrt(c.shape[0])),
                "pndcg": (ratio, ((dcg[clip] - ratio * idcg) / idcg.mean()).std(ddof=1) / math.sqrt(c.shape[0]))}
        for key, (value, se) in want.items():
            assert estimates[key, policy][0] == pytest.approx(value, rel=1e-5), (key, policy)
            assert estimates[key, policy][1] == pytest.approx(se, rel=1e-4), (key, policy)
        np.testing.assert_array_equal(np.isnan(parts["ndcg_skip", policy].numerator[0]), idcg == 0)
    assert estimates["pndcg", "Rt"][0] == pytest.approx(
        float(ope.post_normalised_dcg(log.rewards[0], e0, et, log.viewed, discount, clip).value), rel=1e-5)


def test_logging_exposure_supports_the_target(smoke_day):
    """Asm. 5: the epsilon-greedy logger exposes every candidate, so every target item is covered;
    the logged propensities are the true-view exposures of the shown items."""
    platform, today, log, _, _, _ = smoke_day
    logger = scenarios.logging_policy(platform, "level2", scenarios.scores(platform, Trained("r0")))
    table = np.asarray(scenarios.logging_exposure(today.scenario, logger))
    candidates = np.asarray(platform.candidates["level2"].items)
    rows = np.arange(candidates.shape[0])[:, None]
    assert np.all(table[rows, candidates] > 0)
    oracle = scenarios.target_policy(platform, "level2", scenarios.scores(platform, NoisyOracle(1.0)))
    target = np.asarray(feed.exposure(None, oracle, today.scenario.view, np.arange(table.shape[0])).mean)
    assert np.all(ope.support_loss(table, target) == 0)
    viewed = np.asarray(log.viewed)
    shown = np.asarray(log.items)
    np.testing.assert_allclose(np.asarray(log.logging_exposure)[viewed],
                               table[np.asarray(log.users)[:, None].repeat(shown.shape[1], 1)[viewed], shown[viewed]],
                               rtol=1e-6)


def test_days_are_reproducible_and_drift(smoke_day):
    platform, today, _, _, _, _ = smoke_day
    again = scenarios.day(platform, "level2", 3)
    other = scenarios.day(platform, "level2", 4)
    q = [np.asarray(d.scenario.quality[1].params) for d in (today, again, other)]
    np.testing.assert_array_equal(q[0], q[1])
    assert not np.allclose(q[0], q[2])
    assert (today.session, today.engagement) == scenarios.day_factors(platform, 3)
    # level 1 sees the same day factors; the levels' views differ as configured
    level1 = scenarios.day(platform, "level1", 3)
    assert (level1.session, level1.engagement) == (today.session, today.engagement)
    assert isinstance(today.scenario.view, feed.Cascade) and isinstance(level1.scenario.view, feed.ScrollBudget)


@pytest.mark.parametrize("change, field", [
    (dict(long_days=2), "long_days"), (dict(replications=0), "replications"),
    (dict(platforms=3), "platforms"),
    (dict(scenario=dataclasses.replace(CONFIG.scenario, days=2)), "scenario.days"),
])
def test_config_validation_names_the_field(change, field):
    with pytest.raises(runner.ConfigError, match=field):
        dataclasses.replace(CONFIG, **change)


@pytest.mark.parametrize("make, field", [
    (lambda: scenarios.LevelConfig(view="log"), "level.view"),
    (lambda: scenarios.LevelConfig(view_parameter=0.9), "level.view_parameter"),
    (lambda: scenarios.LevelConfig(view="exponential", view_parameter=1.5), "level.view_parameter"),
    (lambda: scenarios.LevelConfig(feed_length=500), "level.feed_length"),
    (lambda: scenarios.LevelConfig(clip=0.5), "level.clip"),
    (lambda: scenarios.LevelConfig(epsilon=2.0), "level.epsilon"),
    (lambda: scenarios.DriftConfig(session=-1.0), "drift.session"),
    (lambda: scenarios.RankerConfig(r0_method="svd"), "rankers.r0_method"),
    (lambda: scenarios.ScenarioConfig(log_sessions=1), "scenario.log_sessions"),
    (lambda: dataclasses.replace(CONFIG.scenario, level1=scenarios.LevelConfig(candidates=500, feed_length=10)),
     "scenario.level1.candidates"),
    (lambda: Trained("r1"), "Trained.slot"),
    (lambda: NoisyOracle(-1.0), "NoisyOracle.scale"),
    (lambda: NoisyOracle(float("nan")), "NoisyOracle.scale"),
    (lambda: NoisyOracle(1.0, draw=-1), "NoisyOracle.draw"),
])
def test_scenario_validation_names_the_field(make, field):
    with pytest.raises(runner.ConfigError, match=field):
        make()


def test_ranker_labels_round_trip():
    rankers = (Trained("r0"), Trained("rt"), Popularity(), NoisyOracle(2.0), NoisyOracle(0.5, 3), NoisyOracle(0.0))
    labels = [scenarios.ranker_label(r) for r in rankers]
    assert labels == ["r0", "rt", "popularity", "oracle@2", "oracle@0.5#3", "oracle@0"]
    assert tuple(scenarios.parse_ranker(label) for label in labels) == rankers
    assert NoisyOracle(2) == NoisyOracle(2.0) and isinstance(NoisyOracle(2).scale, float)
    for bad in ("oracle2", "oracle@-1", "oracle@1#x", "oracle@inf", "mf", ""):
        with pytest.raises(runner.ConfigError, match="improving: cannot read ranker"):
            scenarios.parse_ranker(bad, "improving")


def test_noisy_oracles_and_untrained_slots(shared):
    platform = shared.platforms[0]
    exact = np.asarray(scenarios.scores(platform, NoisyOracle(0.0)).params)
    noisy = np.asarray(scenarios.scores(platform, NoisyOracle(2.0, 1)).params)
    assert np.std(noisy - exact) == pytest.approx(2.0, rel=0.02)    # 30k N(0, 4) draws: 4 SE of the sd = 1.6 %
    np.testing.assert_array_equal(noisy, np.asarray(scenarios.scores(platform, NoisyOracle(2.0, 1)).params))
    assert not np.array_equal(noisy, np.asarray(scenarios.scores(platform, NoisyOracle(2.0, 0)).params))
    counts = np.asarray(scenarios.scores(platform, Popularity()).params)
    np.testing.assert_array_equal(counts[0], np.asarray(platform.observed.sum(axis=0)).ravel())
    untrained = dataclasses.replace(platform, trained={"r0": platform.trained["r0"]})
    with pytest.raises(ValueError, match="slot 'rt' was not trained"):
        scenarios.scores(untrained, Trained("rt"))


def _corr(r_by_estimator: dict, p: float = 0.01) -> pd.DataFrame:
    """A `correlations` frame of one setting's weekly experiments: {estimator: [r per week]}."""
    rows = [("week", 0, w, "level1", "like", "Rt", key, r, p)
            for key, values in r_by_estimator.items() for w, r in enumerate(values)]
    return pd.DataFrame(rows, columns=["variant", "replication", "window", "level", "signal", "policy",
                                       "estimator", "r", "p"])


def test_paired_comparisons_and_spread_follow_the_report_kit():
    """`_compare` is `reporting.paired_verdict` on r(better) − r(worse) per experiment; `spread`'s
    mean r ± SE is `reporting.mean_se` over the experiments with an r (a NaN r is left out)."""
    corr = _corr({"dcg_pbm_q": [0.9, 0.8, 0.85], "ndcg_skip": [0.1, -0.2, math.nan], "dcg_log_c": [0.88, 0.85, 0.8]})
    clear = report_module._compare(corr, "dcg_pbm_q", "ndcg_skip")
    assert clear.verdict == "holds" and clear.mean == pytest.approx(0.9) and clear.se == pytest.approx(0.1)
    close = report_module._compare(corr, "dcg_pbm_q", "dcg_log_c")
    want = reporting.paired_verdict(np.array([0.02, -0.05, 0.05]))
    assert close.verdict == want.verdict == "tie"
    assert (close.mean, close.se) == (pytest.approx(want.mean), pytest.approx(want.se))
    assert report_module._compare(corr.iloc[[0, 3]], "dcg_pbm_q", "ndcg_skip").verdict == "unclear"   # one week
    summary = report_module.spread(corr).set_index("estimator")
    assert summary.loc["ndcg_skip", "experiments"] == 2
    assert summary.loc["ndcg_skip", "mean_r"] == pytest.approx(-0.05)
    assert summary.loc["ndcg_skip", "se_r"] == pytest.approx(np.std([0.1, -0.2], ddof=1) / math.sqrt(2))
    assert summary.loc["dcg_pbm_q", "share_p<0.05_positive"] == 1.0


def test_claims_set_table2_beside_our_mean_r(smoke_runs):
    """Four claims per Table 2 setting, the paper's r (and p) beside ours: our number is the mean r
    of `table_spread` (or the paired difference of `table_claims_detail`), the verdict the report
    kit's rule in the claimed direction."""
    out = smoke_runs[0]
    daily = pd.read_csv(out / "table_daily.csv")
    corr = report_module.correlations(daily, CONFIG.scenario.days)
    summary = report_module.spread(corr)
    claims = report_module.claims(corr, summary)
    assert len(claims) == 4 * len(table2.SETTINGS)
    detail = report_module.setting_claims(corr, summary)
    week = summary[summary.variant == "week"]
    for i, setting in enumerate(table2.SETTINGS):
        positive, worse, negative, learnt = claims[4 * i: 4 * i + 4]
        label = table2.setting_label(*setting)
        assert all(c.claim.startswith(label) for c in (positive, worse, negative, learnt))
        cell = week[(week.level == setting[0]) & (week.signal == setting[1]) & (week.policy == setting[2])]
        dcg = cell[cell.estimator == "dcg_pbm_q"].iloc[0]
        assert positive.ours == dcg.mean_r and positive.se == dcg.se_r
        assert positive.verdict == report_module.CLAIM_VERDICT[reporting.verdict(dcg.mean_r, dcg.se_r).verdict]
        assert positive.source_value.startswith(f"r = {table2.PAPER['dcg_pbm_q'][i]:.2f} (p ")
        ndcg = cell[cell.estimator == "ndcg_skip"].iloc[0]
        assert negative.verdict == report_module.CLAIM_VERDICT[
            reporting.verdict(ndcg.mean_r, ndcg.se_r, expect="less").verdict]
        row = detail.iloc[i]
        assert worse.ours == row["(b) DCG - nDCG skip"] and learnt.ours == row["(c) pbm,Q̂ - log,C"]
        assert report_module.WORDS[{v: k for k, v in report_module.CLAIM_VERDICT.items()}[learnt.verdict]] == \
            row["(c) vs log,C"]
        assert worse.source_value == report_module.paper_difference(i, "dcg_pbm_q", "ndcg_skip")
    assert report_module.paper_difference(0, "dcg_pbm_q", "ndcg_skip") == "Δr = +1.89 (0.98 vs -0.91)"


def test_the_summary_names_the_logging_regime_and_points_to_the_other():
    deployed = report_module._regime_text(correlation.PRESETS["deployed"].scenario)
    default = report_module._regime_text(correlation.PRESETS["default"].scenario)
    assert "deterministic" in deployed and "K = N = 60, 60" in deployed and "`results/correlation`" in deployed
    assert "ε-greedy around r0 (ε = 0.05, 0.01)" in default and "`results/correlation_deployed`" in default

"""The sensitivity study (Jeunen et al. KDD'24 Fig. 1, extended): its per-setting computations on
small hand-built feeds against independent references, typed ranker configs and their overrides,
and a tiny run end to end — structure, rates in [0, 1], records against the declared columns, the
claims beside the paper's, a byte-identical rerun from the cache, and a sweep over m via the CLI
that reads the same cache."""
import dataclasses
import importlib
import json
import math
import pickle

import jax
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from simrec import cli, feed, reporting, runner
from simrec_studies import sensitivity
from simrec_studies.common import differences
from simrec_studies.common import scenarios
from simrec_studies.common.scenarios import NoisyOracle, Popularity, Trained
from tests.studies.hand_feed import A, K, X, hand_feed

sensitivity_report = importlib.import_module("simrec_studies.sensitivity.report")  # the module, not the function

# ---- a hand-built feed: PBM with the log discount, no violations, an epsilon-greedy logger ----------

N = 10_000
QUALITY, ACTIVITY, SCENARIO, LOGGER_SCORES, LOGGER, BETTER, WORSE = hand_feed(3)
M = np.array([1.0, 2.0, 8.0, math.inf])


@pytest.fixture(scope="module")
def scored():
    log = feed.simulate(jax.random.key(1), SCENARIO, LOGGER, N)
    targets = {"aa": LOGGER, "better": BETTER, "worse": WORSE}
    return log, differences.offline_differences(log, LOGGER, targets, SCENARIO.view, M)


def _sort_exposure(scores):
    """ε(x, a) of Sort under the log discount, from an argsort (independent of simrec.feed)."""
    survival = 1.0 / np.log2(np.arange(2, K + 2))
    out = np.zeros((X, A))
    for x in range(X):
        for rank, a in enumerate(np.argsort(-scores[x], kind="stable")[:K]):
            out[x, a] = survival[rank]
    return out


def test_at_m_1_the_dcg_difference_is_the_raw_label_one(scored):
    """m = 1: min(1, 1/ε₀) = 1, so Δ_τ = Σ_viewed c (ε_t − ε₀), plain DCG with raw labels C."""
    log, out = scored
    survival = 1.0 / np.log2(np.arange(2, K + 2))
    logging = 0.8 * _sort_exposure(LOGGER_SCORES) + 0.2 * survival.sum() / A
    target = _sort_exposure(QUALITY)
    users, items = np.asarray(log.users), np.asarray(log.items)
    clicks, viewed = np.asarray(log.rewards[0]), np.asarray(log.viewed)
    safe = np.where(viewed, items, 0)
    gain = clicks * viewed * (target[users[:, None], safe] - logging[users[:, None], safe])
    delta = gain.sum(1)
    assert out["click"]["better"]["dcg"]["mean"][0] == pytest.approx(delta.mean(), rel=1e-4, abs=1e-6)
    assert out["click"]["better"]["dcg"]["se"][0] == pytest.approx(delta.std(ddof=1) / math.sqrt(N), rel=1e-3)
    r0 = (clicks * viewed * logging[users[:, None], safe]).sum(1).mean()
    assert out["click"]["R0"]["dcg"][0] == pytest.approx(r0, rel=1e-4)


def test_unclipped_dcg_difference_is_unbiased_for_the_exact_online_difference(scored):
    _, out = scored
    for name, policy in (("better", BETTER), ("worse", WORSE)):
        truth = feed.online_value(None, SCENARIO, policy).mean[0] - feed.online_value(None, SCENARIO, LOGGER).mean[0]
        est = out["click"][name]["dcg"]
        assert abs(est["mean"][-1] - truth) <= 4 * est["se"][-1]            # 4 SE: fails ~1e-4 of seeds
        assert np.sign(est["mean"][-1]) == np.sign(truth)
        assert np.all(est["low"] <= est["mean"]) and np.all(est["mean"] <= est["high"])
    assert out["lost"] == {"aa": 0.0, "better": 0.0, "worse": 0.0}          # epsilon-greedy: full support


def test_a_a_differences_vanish_and_ndcg_shares_the_ideal(scored):
    log, out = scored
    for metric in ("dcg", "ndcg"):
        aa = out["click"]["aa"][metric]
        assert np.all(aa["mean"] == 0) and np.all(aa["se"] == 0) and np.all(aa["p"] == 0.5)
    from simrec import ope
    logging = feed.exposure_of(feed.exposure(None, LOGGER, SCENARIO.view, np.arange(X)).mean, log.users, log.items)
    target = feed.exposure_of(feed.exposure(None, BETTER, SCENARIO.view, np.arange(X)).mean, log.users, log.items)
    discount = feed.view_probability(SCENARIO.view, K)
    args = (log.rewards[0], logging, None, log.viewed, discount, M)
    delta = (np.asarray(ope.trajectory_ndcg(*args[:2], target, *args[3:]), np.float64)
             - np.asarray(ope.trajectory_ndcg(*args[:2], logging, *args[3:]), np.float64))
    np.testing.assert_allclose(out["click"]["better"]["ndcg"]["mean"], delta.mean(1), rtol=1e-6, atol=1e-9)
    assert np.all((out["click"]["better"]["ndcg"]["p"] >= 0) & (out["click"]["better"]["ndcg"]["p"] <= 1))


def test_independent_a_a_compares_each_target_with_itself_on_a_second_log(scored):
    """Δ = f̄_{D'}(R_t) − f̄_D(R_t) with se = hypot(se_D, se_D'): zero in expectation for every m."""
    _, first = scored
    second_log = feed.simulate(jax.random.key(5), SCENARIO, LOGGER, N)
    targets = {"better": BETTER, "worse": WORSE}
    second = differences.offline_differences(second_log, LOGGER, targets, SCENARIO.view, M)
    aa = differences.independent_aa(first, second, confidence=0.99)
    assert set(aa) == {"click"} and set(aa["click"]) == {"better", "worse"}
    q = 2.5758293035489004                                                # Φ⁻¹(0.995)
    for name in targets:
        for metric in ("dcg", "ndcg"):
            a, b, got = first["click"][name][metric], second["click"][name][metric], aa["click"][name][metric]
            # a target's own value = the logger's value + the paired difference
            np.testing.assert_allclose(a["value"], first["click"]["R0"][metric] + a["mean"], rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(got["mean"], b["value"] - a["value"])
            np.testing.assert_allclose(got["se"], np.sqrt(a["value_se"] ** 2 + b["value_se"] ** 2))
            np.testing.assert_allclose(got["high"] - got["mean"], q * got["se"], rtol=1e-9)
            assert np.all(np.abs(got["mean"]) <= 4 * got["se"])           # same estimand: 4 SE, ~1e-4 per check
            assert np.all((got["p"] >= 0) & (got["p"] <= 1))


def test_online_truth_matches_the_exact_values_and_an_independent_ab_test():
    truth = sensitivity.online_truth(jax.random.key(2), SCENARIO, LOGGER, {"better": BETTER, "worse": WORSE}, 4000,
                                     tested=("better",))
    assert truth["exact"]["better"][0] == pytest.approx(feed.online_value(None, SCENARIO, BETTER).mean[0])
    assert set(truth["ab_mean"]) == {"R0", "better"} and set(truth["exact"]) == {"R0", "better", "worse"}
    for name in ("R0", "better"):
        gap = truth["ab_mean"][name][0] - truth["exact"][name][0]
        assert abs(gap) <= 4 * truth["ab_se"][name][0]


def test_target_values_are_the_values_of_offline_differences(scored):
    """The second log of the A/A on two logs only needs each target's own value and its SE."""
    log, out = scored
    targets = {"better": BETTER, "worse": WORSE}
    values = differences.target_values(log, LOGGER, targets, SCENARIO.view, M)
    assert set(values) == {"click"} and set(values["click"]) == set(targets)
    for name in targets:
        for metric in ("dcg", "ndcg"):
            got, want = values["click"][name][metric], out["click"][name][metric]
            assert set(got) == {"value", "value_se"}
            np.testing.assert_array_equal(got["value"], want["value"])
            np.testing.assert_array_equal(got["value_se"], want["value_se"])


def test_config_validation_names_the_field():
    with pytest.raises(runner.ConfigError, match="improving must name"):
        sensitivity.SensitivityConfig(improving=())
    with pytest.raises(runner.ConfigError, match="m must be a number >= 1 or inf"):
        sensitivity.SensitivityConfig(m=(0.5, math.inf))
    with pytest.raises(runner.ConfigError, match="view must be"):
        sensitivity.SensitivityConfig(view="log")
    with pytest.raises(runner.ConfigError, match=r"confidence must be a finite number in \(0, 1\)"):
        sensitivity.SensitivityConfig(confidence=1.0)
    with pytest.raises(runner.ConfigError, match="distinct rankers"):
        sensitivity.SensitivityConfig(harmful=(NoisyOracle(2.0),))
    with pytest.raises(runner.ConfigError, match="harmful must hold rankers such as"):
        sensitivity.SensitivityConfig(harmful=("oracle@2",))                    # labels only via --set
    with pytest.raises(runner.ConfigError, match="config key 'harmful': cannot read ranker 'oracle'"):
        runner.with_overrides(sensitivity.SensitivityConfig(), {"harmful": "oracle"})
    with pytest.raises(runner.ConfigError, match="logger must hold rankers"):
        sensitivity.SensitivityConfig(logger="r0")


def test_rankers_are_typed_and_labels_parse():
    config = runner.with_overrides(sensitivity.SensitivityConfig(), {"improving": "rt,oracle@0.5#2",
                                                                     "harmful": "popularity,oracle@4"})
    assert config.improving == (Trained("rt"), NoisyOracle(0.5, 2))
    assert config.harmful == (Popularity(), NoisyOracle(4.0))
    assert sensitivity.PRESETS["default"].targets == (Trained("rt"), NoisyOracle(2.0), NoisyOracle(1.0),
                                                      NoisyOracle(4.0), NoisyOracle(8.0), Popularity())


def test_nested_overrides_rankers_and_an_infinite_m_parse():
    config = runner.with_overrides(sensitivity.PRESETS["smoke"], {
        "scenario.days": "3", "m": "1,2,inf", "scenario.level2.epsilon": "0.05",
        "improving": "rt,oracle@0.5#1", "harmful": "popularity", "logger.slot": "r0", "confidence": "0.95"})
    assert config.scenario.days == 3 and config.m == (1.0, 2.0, math.inf) and config.confidence == 0.95
    assert config.scenario.level2.epsilon == 0.05 and config.scenario.level1 == sensitivity.PRESETS["smoke"].scenario.level1
    assert config.improving == (Trained("rt"), NoisyOracle(0.5, 1)) and config.harmful == (Popularity(),)
    assert len(sensitivity.cells(config)) == len(config.levels) * 3 * 2
    with pytest.raises(runner.ConfigError, match="unknown config key 'scenario.dayz'"):
        runner.with_overrides(config, {"scenario.dayz": "3"})
    with pytest.raises(runner.ConfigError, match="unknown config key 'level'"):       # renamed: confidence
        runner.with_overrides(config, {"level": "0.95"})
    with pytest.raises(runner.ConfigError, match="Trained.slot"):
        runner.with_overrides(config, {"logger.slot": "oracle@1"})


def test_offline_cells_score_the_standard_grid_plus_the_configs_m():
    smoke = sensitivity.PRESETS["smoke"]
    assert sensitivity.offline_grid(smoke) == sensitivity.M_GRID          # smoke's m is a subset
    grid = sensitivity.offline_grid(runner.with_overrides(smoke, {"m": "inf,3,1"}))
    assert grid == tuple(sorted(sensitivity.M_GRID + (3.0,))) and grid[-1] == math.inf
    offline = [c for c in sensitivity.cells(smoke) if c["part"] == "offline"]
    assert all(c["m"] == list(sensitivity.M_GRID) for c in offline)


# ---- a tiny run end to end ------------------------------------------------------------------------

#: the smoke preset on level 1 only (no within-session violations: exact online values), smaller logs
#: and A/B arms, and the m of the CLI sweep below, which then reruns this run from its cached cells
TINY_SETS = {"levels": "level1", "scenario.log_sessions": "1024", "scenario.ab_sessions": "1024"}
TINY = runner.with_overrides(sensitivity.PRESETS["smoke"], {**TINY_SETS, "m": "16,inf"})


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sensitivity")            # cache: root/.simrec-cache
    out = root / "smoke"
    summary = runner.run(sensitivity.STUDY, TINY, seed=0, out=out, preset="smoke", progress=False)
    return out, summary


def _tables(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.glob("table*"))}


def _records(out) -> pd.DataFrame:
    """records.csv with its declared types ("" is a string in str columns, NaN in float ones)."""
    return pd.read_csv(out / "records.csv", keep_default_na=False, na_values={"m": [""], "value": [""]})


def test_smoke_structure_and_rates(smoke_run):
    out, summary = smoke_run
    config = TINY
    assert summary.cells_total == len(config.levels) * config.scenario.days * 2
    rates = pd.read_csv(out / "table_sensitivity.csv")
    assert set(rates.metric) == {"dcg", "ndcg"} and len(rates) == 2 * len(config.m) * (1 + len(config.levels))
    assert set(rates.m) == set(config.m)                                 # records hold M_GRID, tables config.m
    for column in ("TPR", "mean_p", "sign_agreement", "FPR_aa", "FPR_aa_logs", "FPR_harmful"):
        values = rates[column].dropna()
        assert ((values >= 0) & (values <= 1)).all(), column
    assert (rates.FPR_aa == 0).all()                                      # Δ_τ ≡ 0 on R₀'s own log
    for rate, n in [("TPR", "n_improving"), *((f"FPR_{kind}", f"n_{kind}") for kind in sensitivity.NULL_KINDS)]:
        low, high = proportion_confint(np.rint(rates[rate] * rates[n]), rates[n], alpha=0.05, method="wilson")
        np.testing.assert_allclose(rates[f"{rate}_low"], low, rtol=1e-3, atol=1e-6)   # 95 % Wilson
        np.testing.assert_allclose(rates[f"{rate}_high"], high, rtol=1e-3, atol=1e-6)
        assert ((rates[f"{rate}_low"] <= rates[rate]) & (rates[rate] <= rates[f"{rate}_high"])).all()
    settings = pd.read_csv(out / "table_settings.csv")
    assert len(settings) == len(config.levels) * 2 * config.scenario.days * (1 + 2 * len(config.targets))
    assert (settings.kind == "aa_logs").sum() == len(config.levels) * 2 * config.scenario.days * len(config.targets)
    assert set(settings.target) == {"R0 (A/A)", "rt", "oracle@1", "oracle@8", "rt (A/A, 2 logs)",
                                    "oracle@1 (A/A, 2 logs)", "oracle@8 (A/A, 2 logs)"}
    for column in ("ab_p", "ab_p_holm"):
        assert ((settings[column].dropna() >= 0) & (settings[column].dropna() <= 1)).all()
    assert settings[settings.kind == "harmful"].ab_p.isna().all()           # only improvements are A/B-tested
    for name in ("fig_tpr", "fig_mean_p", "fig_fpr", "fig_bias_rmse", "fig_mechanism"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    readme = (out / "README.md").read_text()
    assert "Claim (d)" in readme and "## Claims" in readme


def test_claims_put_the_papers_statements_beside_ours(smoke_run):
    """The tiny run's grid has no m = 1, so Fig. 1's comparisons are not testable (the README says
    so) and the claims hold sign agreement only, with the paper's statement and a kit verdict."""
    out, _ = smoke_run
    claims = pd.read_csv(out / "table_claims.csv", keep_default_na=False)
    assert list(claims.columns) == list(reporting.CLAIM_COLUMNS)
    assert set(claims.verdict) <= set(reporting.CLAIM_VERDICTS) and len(claims) == 1
    assert claims.source.str.startswith("Jeunen et al. KDD'24").all()
    assert claims.claim.iloc[-1].startswith("an offline difference has the sign")
    assert claims["source's number"].iloc[-1] == sensitivity_report.PAPER["sign"]
    assert "the grid needs m = 1, some 1 < m < ∞ and m = ∞" in (out / "README.md").read_text()


def test_claim_verdicts_from_hand_made_rates():
    """`_figure1` on hand-made rates: DCG peaks at a moderate m above nDCG everywhere; the claims
    say reproduced for the peak, the loss at ∞ (McNemar decides significance) and DCG over nDCG."""
    ms = (1.0, 16.0, math.inf)
    config = dataclasses.replace(TINY, levels=("level2",), m=ms)
    tpr = {"dcg": (0.2, 0.9, 0.3), "ndcg": (0.1, 0.2, 0.2)}
    rates = pd.DataFrame([{"scope": scope, "metric": metric, "m": m, "TPR": t, "mean_p": 1 - t, "TPR_low": 0.0,
                           "TPR_high": 1.0, "n_improving": 10, "sign_agreement": 1.0}
                          for scope in ("all levels", "level2") for metric, values in tpr.items()
                          for m, t in zip(ms, values)])
    # ten improving settings: detected at m = 16 by 9, at ∞ by 3 (the 3 among the 9)
    frame = pd.DataFrame([{"level": "level2", "day": 0, "signal": "watch", "target": f"t{i}", "m": m,
                           "metric": "dcg", "kind": "improving", "verified": True,
                           "low": 1.0 if (m == 16.0 and i < 9) or (math.isinf(m) and i < 3) else -1.0}
                          for i in range(10) for m in ms])
    figure1 = sensitivity_report._figure1(config, rates, frame)
    assert [f.scope for f in figure1] == ["all levels", "level2"]
    f = figure1[0]
    assert f.peak and f.infinite_loses and f.dcg_wins and (f.only_best, f.only_inf) == (6, 0)
    assert f.mcnemar == pytest.approx(2 * 0.5 ** 6)                      # exact McNemar, 6 discordant
    claims = sensitivity_report._claims(figure1, sensitivity_report._sign_claims(rates))
    assert [c.verdict for c in claims] == ["reproduced"] * 7
    assert "TPR 0.20 at m = 1, 0.90 at m = 16, 0.30 at m = ∞" in claims[0].ours
    lines = sensitivity_report._verdicts(figure1)
    assert "(i) moderate clipping maximises TPR: **yes**" in lines[0]
    assert sensitivity_report._figure1(TINY, rates, frame) == []                # no m = 1 in the grid


def test_figure1_scope_is_the_deployed_change_on_level_2_beside_that_levels_null_settings():
    """`FIGURE1_SCOPE` keeps level 2's improving settings of rt only (Fig. 1's 20 settings in the
    deployed preset: 4 signals x 5 days) and every null setting of level 2; without rt among the
    improving targets there is no such scope."""
    kinds = {"rt": "improving", "oracle@1": "improving", "oracle@8": "harmful", "R0=R0": "aa"}
    frame = pd.DataFrame([{"level": level, "target": target, "kind": kind}
                          for level in scenarios.LEVELS for target, kind in kinds.items()])
    both = dataclasses.replace(TINY, levels=scenarios.LEVELS)
    scopes = dict(sensitivity_report._scopes(both, frame))
    assert list(scopes) == ["all levels", *scenarios.LEVELS, sensitivity_report.FIGURE1_SCOPE]
    figure1 = scopes[sensitivity_report.FIGURE1_SCOPE]
    assert set(figure1.level) == {"level2"} and set(figure1.target) == {"rt", "oracle@8", "R0=R0"}
    for config in (TINY, dataclasses.replace(both, improving=(NoisyOracle(1.0),))):    # no level2, no rt
        assert sensitivity_report.FIGURE1_SCOPE not in dict(sensitivity_report._scopes(config, frame))
    deployed = sensitivity.PRESETS["deployed"].scenario
    assert len(deployed.signals.names) * deployed.days == 20
    assert sorted(scenarios.SIGNAL_KINDS[n] for n in deployed.signals.names) == ["explicit"] * 2 + ["implicit"] * 2


def test_records_match_the_declared_columns_and_the_cached_setup(smoke_run):
    """A truth cell computed from the setup cached on disk gives exactly the run's records
    (check_records validates them against `COLUMNS`)."""
    out, _ = smoke_run
    cache = out.parent / ".simrec-cache" / "sensitivity"
    (path,) = cache.glob("setup-*.pkl")
    shared = pickle.loads(path.read_bytes())
    assert set(shared.platform.trained) == {"r0", "rt"}
    config = TINY
    cell = {"part": "truth", "level": "level1", "day": 1}
    rows = runner.check_records(sensitivity.STUDY, cell, sensitivity.compute(jax.random.key(0), config, cell, shared))
    stored = next(c for c in (json.loads(p.read_text()) for p in cache.glob("*.json")) if c["cell"] == cell)
    assert stored["columns"] == list(sensitivity.COLUMNS)
    pd.testing.assert_frame_equal(pd.DataFrame(rows), pd.DataFrame(stored["rows"]))
    records = _records(out)
    assert list(records.columns) == list(sensitivity.COLUMNS)
    assert set(records.part) == {"truth", "paired", "two logs", "log"}
    assert set(records.m.dropna()) == set(sensitivity.M_GRID)


def test_smoke_logger_dcg_grows_with_m(smoke_run):
    """f_τ(R₀; m) = Σ c · min(m ε₀, 1): non-decreasing in m, Σ c ε₀ at m = 1 and Σ c at m = ∞."""
    records = _records(smoke_run[0])
    base = records[(records.part == "paired") & (records.target == "R0") & (records.metric == "dcg")]
    assert len(base) == len(TINY.levels) * TINY.scenario.days * 2 * len(sensitivity.M_GRID)  # x signals
    for _, series in base.groupby(["level", "day", "signal"]):
        values = series.sort_values("m").value.to_numpy()
        assert np.all(values[:-1] <= values[1:] * (1 + 1e-6))


def test_sweep_over_m_via_the_cli_reads_the_cache_and_reruns_identically(smoke_run, capsys):
    """The CLI sweep over the tiny run's own m: its run over all values is a rerun from the cache
    (byte-identical tables), each single m a view of the same cells."""
    out, _ = smoke_run
    root = out.parent                          # --out ROOT caches in ROOT/.simrec-cache, as the tiny run
    sets = [arg for key, value in TINY_SETS.items() for arg in ("--set", f"{key}={value}")]
    code = cli.main(["sweep", "m", "--study", "sensitivity", "--values", "16,inf", "--preset", "smoke", *sets,
                     "--out", str(root), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "m=all: 0 computed" in printed and "m=16: 0 computed" in printed   # 16 is in M_GRID: cached
    assert _tables(root / "m=all") == _tables(out)
    for value in ("all", "16", "inf"):
        assert (root / f"m={value}" / "table_sensitivity.csv").exists()
    stacked = pd.read_csv(root / "table_sensitivity.csv")           # the sweep's stacked table
    grid = {16.0, math.inf}                                         # (the "..." expansion: tests/test_cli.py)
    assert set(stacked["m"]) == grid and set(stacked["sweep m"].astype(float)) == grid
    whole = pd.read_csv(root / "m=all" / "table_sensitivity.csv")
    single = pd.read_csv(root / "m=16" / "table_sensitivity.csv")
    pd.testing.assert_frame_equal(single.reset_index(drop=True),
                                  whole[whole.m == 16].reset_index(drop=True), check_dtype=False)


def test_sign_agreement_verdict_states_the_shares_against_the_papers_100_percent():
    """Hand-made rates: DCG's share of positive estimates rises with m, nDCG's stays low; the
    verdict quotes them, says the paper's 100 % is not reproduced, and orders the levels by ε."""
    config = sensitivity.PRESETS["default"]
    ms = (1.0, 16.0, math.inf)
    share = {("all levels", "dcg"): (0.07, 0.5, 0.87), ("all levels", "ndcg"): (0.01, 0.08, 0.08),
             ("level1", "dcg"): (0.14, 0.7, 1.0), ("level1", "ndcg"): (0.0, 0.1, 0.1),
             ("level2", "dcg"): (0.0, 0.3, 0.74), ("level2", "ndcg"): (0.0, 0.0, 0.0)}
    rates = pd.DataFrame([{"scope": scope, "metric": metric, "m": m, "n_improving": 84,
                           "sign_agreement": value}
                          for (scope, metric), values in share.items() for m, value in zip(ms, values)])
    text = sensitivity_report._sign_text(config, rates, {"level1": 593.0, "level2": 3354.0})
    assert "**not reproduced**" in text and "Jeunen et al.: 100%" in text
    assert "positive in 7% of them at m = 1, at most 87% (m = ∞) and 87% at m = ∞" in text
    assert "nDCG's share is 1%–8%" in text
    assert "level2 (ε = 0.01, largest weight 3354): 0% at m = 1, 74% at m = ∞" in text
    assert "The rarer the exploration, the lower the agreement" in text
    every = rates.assign(sign_agreement=1.0)
    assert "**reproduced**" in sensitivity_report._sign_text(config, every, {})


def test_the_prose_follows_the_logging_regime():
    """The mechanism text names the deterministic logger and its rank-ratio weights in the deployed
    preset, and ε-greedy exploration otherwise."""
    weights = {"level1": 1024.0, "level2": 89.0}
    deployed, default = sensitivity.PRESETS["deployed"], sensitivity.PRESETS["default"]
    assert sensitivity_report._deployed(deployed) and not sensitivity_report._deployed(default)
    text = sensitivity_report._logged_text(deployed, weights)
    assert "deterministic" in text and "S(rank under R_t) / S(rank under R₀)" in text and "1024 (level1)" in text
    text = sensitivity_report._logged_text(default, weights)
    assert "explores with ε = 0.05 (level1), 0.01 (level2)" in text and "deterministic" not in text


def test_the_bias_left_at_no_clipping_is_put_on_the_levels_violations():
    """`_violation_text`: level 2 (a cascade and satiation) names both and the bias left at m = ∞,
    beside level 1's (no violations); level 1 itself gets no such sentence."""
    config = sensitivity.PRESETS["default"]
    improving = pd.DataFrame([{"scope": level, "metric": "dcg", "m": math.inf, "bias": bias}
                              for level, bias in (("level1", 0.004), ("level2", -0.175))]).set_index(
        ["scope", "metric", "m"])
    text = sensitivity_report._violation_text(config, improving, "level2", math.inf)
    level2 = scenarios.level_config(config.scenario, "level2")
    assert "the bias left, -0.175" in text and f"probability {level2.cascade:g}: Asm. 2)" in text
    assert f"satiation β = {level2.satiation:g} (Asm. 3)" in text and "level1, without them, ends at +0.004" in text
    assert sensitivity_report._violation_text(config, improving, "level1", math.inf) == ""

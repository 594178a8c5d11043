"""The sensitivity study (Jeunen et al. KDD'24 Fig. 1, extended): its per-setting computations on
small hand-built feeds against independent references, and the smoke preset end to end —
structure, rates in [0, 1], a byte-identical rerun from the cache, and a sweep over m via the CLI
that reads the same cache."""
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import cli, feed, runner
from studies import sensitivity

# ---- a hand-built feed: PBM with the log discount, no violations, an epsilon-greedy logger ----------

X, A, K, N = 12, 10, 6, 40_000
RNG = np.random.default_rng(3)
QUALITY = RNG.uniform(0.0, 0.6, (X, A)).astype(np.float32)
ACTIVITY = RNG.dirichlet(np.ones(X)).astype(np.float32)
SCENARIO = feed.Scenario(feed.Logarithmic(), (feed.from_table(QUALITY),), ACTIVITY, ("click",))
LOGGER_SCORES = (QUALITY + RNG.normal(0, 0.3, (X, A))).astype(np.float32)
LOGGER = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(LOGGER_SCORES)), 0.2), K)
BETTER = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(QUALITY)), K)
WORSE = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(-QUALITY)), K)
M = np.array([1.0, 2.0, 8.0, math.inf])


@pytest.fixture(scope="module")
def scored():
    log = feed.simulate(jax.random.key(1), SCENARIO, LOGGER, N)
    targets = {"aa": LOGGER, "better": BETTER, "worse": WORSE}
    return log, sensitivity.offline_differences(log, LOGGER, targets, SCENARIO.view, M)


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
    second = sensitivity.offline_differences(second_log, LOGGER, targets, SCENARIO.view, M)
    aa = sensitivity.independent_aa(first, second, level=0.99)
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


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="improving must name"):
        sensitivity.SensitivityConfig(improving=())
    with pytest.raises(ValueError, match="m must be distinct clipping values >= 1"):
        sensitivity.SensitivityConfig(m=(0.5, math.inf))
    with pytest.raises(ValueError, match="view must be"):
        sensitivity.SensitivityConfig(view="log")


def test_nested_overrides_and_an_infinite_m_parse():
    config = runner.with_overrides(sensitivity.PRESETS["smoke"], {"scenario.days": "3", "m": "1,2,inf",
                                                                  "scenario.level2.epsilon": "0.05"})
    assert config.scenario.days == 3 and config.m == (1.0, 2.0, math.inf)
    assert config.scenario.level2.epsilon == 0.05 and config.scenario.level1 == sensitivity.PRESETS["smoke"].scenario.level1
    assert len(sensitivity.cells(config)) == len(config.levels) * 3 * (1 + 3)
    with pytest.raises(runner.ConfigError, match="unknown config key 'scenario.dayz'"):
        runner.with_overrides(config, {"scenario.dayz": "3"})


# ---- the smoke preset end to end -------------------------------------------------------------------

@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sensitivity")
    summary = runner.run(sensitivity.STUDY, sensitivity.PRESETS["smoke"], seed=0, out=out, preset="smoke",
                         progress=False)
    return out, summary


def _tables(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.glob("table*"))}


def test_smoke_structure_and_rates(smoke_run):
    out, summary = smoke_run
    config = sensitivity.PRESETS["smoke"]
    assert summary.cells_total == len(config.levels) * config.scenario.days * (1 + len(config.m))
    rates = pd.read_csv(out / "table_sensitivity.csv")
    assert set(rates.metric) == {"dcg", "ndcg"} and len(rates) == 2 * len(config.m) * (1 + len(config.levels))
    for column in ("TPR", "mean_p", "sign_agreement", "FPR_aa", "FPR_aa_logs", "FPR_harmful"):
        values = rates[column].dropna()
        assert ((values >= 0) & (values <= 1)).all(), column
    assert (rates.FPR_aa == 0).all()                                      # Δ_τ ≡ 0 on R₀'s own log
    settings = pd.read_csv(out / "table_settings.csv")
    assert len(settings) == len(config.levels) * 2 * config.scenario.days * (1 + 2 * len(config.targets))
    assert (settings.kind == "aa_logs").sum() == len(config.levels) * 2 * config.scenario.days * len(config.targets)
    for column in ("ab_p", "ab_p_holm"):
        assert ((settings[column].dropna() >= 0) & (settings[column].dropna() <= 1)).all()
    assert settings[settings.kind == "harmful"].ab_p.isna().all()           # only improvements are A/B-tested
    for name in ("fig_tpr", "fig_mean_p", "fig_fpr", "fig_bias_rmse"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert "Claim (d)" in (out / "README.md").read_text()


def test_smoke_logger_dcg_grows_with_m_and_m_1_is_the_raw_label_value(smoke_run):
    """f_τ(R₀; m) = Σ c · min(m ε₀, 1): non-decreasing in m, Σ c ε₀ at m = 1 and Σ c at m = ∞."""
    out, _ = smoke_run
    cache = sorted((out / ".cache" / "sensitivity").glob("*.json"))
    offline = [json.loads(p.read_text()) for p in cache]
    offline = [c for c in offline if c["cell"]["part"] == "offline"]
    by_setting = {}
    for c in offline:
        by_setting.setdefault((c["cell"]["level"], c["cell"]["day"]), {})[c["cell"]["m"]] = c["value"]
    for values in by_setting.values():
        grid = sorted(values)
        for signal in ("like", "watch"):
            base = [values[m][signal]["R0"]["dcg"] for m in grid]
            assert all(a <= b * (1 + 1e-6) for a, b in zip(base, base[1:]))


def test_rerun_from_cache_gives_identical_tables(smoke_run, tmp_path):
    out, _ = smoke_run
    again = runner.run(sensitivity.STUDY, sensitivity.PRESETS["smoke"], seed=0, out=tmp_path, preset="smoke",
                       cache_dir=out / ".cache", progress=False)
    assert again.cells_computed == 0
    assert _tables(tmp_path) == _tables(out)


def test_sweep_over_m_via_the_cli_reads_the_cache(smoke_run, capsys):
    out, _ = smoke_run                        # --out shares the smoke run's cache (OUT/.cache)
    code = cli.main(["sweep", "m", "--study", "sensitivity", "--values", "1,4,16,...,inf", "--preset", "smoke",
                     "--set", "m=1,4,16,64,inf", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "m=all: 4 computed" in printed and "m=inf: 0 computed" in printed   # only m = 16 is new
    for value in ("all", "1", "4", "16", "64", "inf"):
        assert (out / f"m={value}" / "table_sensitivity.csv").exists()
    stacked = pd.read_csv(out / "table_sensitivity.csv")            # the sweep's stacked table
    grid = {1.0, 4.0, 16.0, 64.0, math.inf}                         # 1,4,16,...,inf stops at the preset's 64
    assert set(stacked["m"]) == grid and set(stacked["sweep m"].astype(float)) == grid
    whole = pd.read_csv(out / "m=all" / "table_sensitivity.csv")
    single = pd.read_csv(out / "m=64" / "table_sensitivity.csv")
    pd.testing.assert_frame_equal(single.reset_index(drop=True),
                                  whole[whole.m == 64].reset_index(drop=True), check_dtype=False)

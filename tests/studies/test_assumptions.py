"""The assumptions study (Jeunen et al. KDD'24 Asm. 1–5 violated one at a time): its estimators on a
hand-built feed against independent references, the violations' building blocks, dial 0 reproducing
the no-violation log and every estimate bit for bit, and a reduced smoke run end to end (records
against the declared columns, no detectable bias of the unbiased estimators without a violation)."""
import dataclasses
import importlib
import inspect
import math
import pickle
import re

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import feed, ope, runner
from simrec.feed.policies import table_values
from simrec_studies import assumptions
from simrec_studies.common import scenarios
from tests.studies.hand_feed import A, K, X, hand_feed

# the package's compute side (the package's own name ``compute`` is the study's compute function)
compute_module = importlib.import_module("simrec_studies.assumptions.compute")
report_module = importlib.import_module("simrec_studies.assumptions.report")

# ---- a hand-built feed: PBM with the log discount, no violations, an epsilon-greedy logger ----------

N = 20_000
QUALITY, ACTIVITY, SCENARIO, LOGGER_SCORES, LOGGER, BETTER, WORSE = hand_feed(5)
M = np.array([1.0, 4.0, math.inf])


@pytest.fixture(scope="module")
def hand_built():
    log = feed.simulate(jax.random.key(2), SCENARIO, LOGGER, N)
    targets = {"better": BETTER, "worse": WORSE}
    return log, targets, _differences(log, LOGGER, targets, SCENARIO.view, M, prior_views=5.0)


def _differences(log, logger, targets, view, m, **kwargs) -> dict:
    """`compute.estimates` laid out per signal: {signal: {name: {metric: {"mean", "se", "low", "high":
    f64[M]}}, "R0": {metric: f64[M]}}}, R₀'s own estimates under "R0", the differences under each target."""
    est = compute_module.estimates(log, logger, targets, view, m, **kwargs)
    out = {}
    for signal, summary in est.summaries.items():
        layout = {"R0": {metric: np.asarray(s["value"]) for (metric, name), s in summary.items() if name == "R0"}}
        for target in targets:
            layout[target] = {metric: {"mean": np.asarray(s["difference"]), "se": np.asarray(s["se"]),
                                       "low": np.asarray(s["low"]), "high": np.asarray(s["high"])}
                              for (metric, name), s in summary.items() if name == target}
        out[signal] = layout
    return out


def _exposure_table(policy):
    return np.asarray(feed.exposure(None, policy, SCENARIO.view, np.arange(X)).mean, np.float64)


def test_extra_estimators_against_the_library_and_a_brute_force_dr(hand_built):
    log, targets, out = hand_built
    rewards, viewed = log.rewards[0], log.viewed
    users, items = np.asarray(log.users), np.maximum(np.asarray(log.items), 0)
    logging_table = _exposure_table(LOGGER)
    e0 = np.where(np.asarray(viewed), logging_table[users[:, None], items], 0.0).astype(np.float32)
    discount = feed.view_probability(SCENARIO.view, K)
    q_hat = ope.click_rate_model(log, A, 0, prior_views=5.0)
    values = {}
    for name, policy in {"R0": LOGGER, **targets}.items():
        table = _exposure_table(policy)
        e = np.where(np.asarray(viewed), table[users[:, None], items], 0.0).astype(np.float32)
        pn = ope.post_normalised_dcg(rewards, e0, e, viewed, discount, M).value
        sn = ope.self_normalised_dcg(rewards, e0, e, viewed, M).value
        ndcg_all = np.asarray(ope.trajectory_ndcg(rewards, e0, e, viewed, discount, M, ideal="all viewed"))
        # DR by hand: Σ_a ε q̂ over the catalogue + Σ_viewed min(m, 1/ε₀) ε (c − q̂)
        c = np.asarray(rewards, np.float64)
        weight = np.where(np.asarray(viewed), 1.0 / np.where(e0 > 0, e0, 1.0), 0.0)
        dr = np.stack([(table @ q_hat)[users] + np.sum(np.minimum(m, weight) * e * (c - q_hat[items])
                                                        * np.asarray(viewed), axis=1) for m in M])
        values[name] = {"pndcg": pn, "sndcg": sn, "ndcg_all": ndcg_all, "dr": dr}
    for name in targets:
        for metric in ("pndcg", "sndcg"):
            np.testing.assert_allclose(out["click"][name][metric]["mean"],
                                       values[name][metric] - values["R0"][metric], rtol=2e-4, atol=1e-6)
        for metric in ("ndcg_all", "dr"):
            delta = values[name][metric] - values["R0"][metric]
            np.testing.assert_allclose(out["click"][name][metric]["mean"], delta.mean(axis=1), rtol=2e-4, atol=1e-6)
            np.testing.assert_allclose(out["click"][name][metric]["se"], delta.std(axis=1, ddof=1) / math.sqrt(N),
                                       rtol=2e-3)
        np.testing.assert_allclose(out["click"]["R0"]["dr"], values["R0"]["dr"].mean(axis=1), rtol=2e-4)
    for metric in ("pndcg", "sndcg", "ndcg_all", "dr"):
        low, mean, high = (out["click"]["better"][metric][k] for k in ("low", "mean", "high"))
        assert np.all(low < mean) and np.all(mean < high)


def on_a_feed_log() -> list[str]:
    """The registered estimators the study's "all" scores: those whose inputs its logs provide (the
    slate estimators need prefix probabilities, MIPS item groups, which the study does not ask
    `ope.from_log` for)."""
    return [name for name, e in ope.ESTIMATORS.items()
            if not e.needs & {"logging_prefix", "prefix", "logging_group_exposure", "group_exposure"}]


def test_an_estimator_registered_in_ope_is_scored_and_reported_without_touching_the_study(hand_built, monkeypatch):
    """Adding an estimator is one `ope.register` call: the study then estimates it (records) and its
    report names it by its registry label and treats it by its registry metadata."""
    monkeypatch.setattr(ope.registry, "ESTIMATORS", dict(ope.ESTIMATORS))
    monkeypatch.setattr(ope, "ESTIMATORS", ope.registry.ESTIMATORS)
    ope.register(ope.Estimator("half", "½ × DCG", lambda data, target, m, options, cache: ope.Contribution(
        0.5 * np.asarray(ope.trajectory_dcg(data.rewards, data.logging_exposure, target.exposure, data.viewed, m),
                         np.float64)), online_scale=False))
    log, targets, _ = hand_built                    # the fixture's log and arguments: its programs are compiled
    est = compute_module.estimates(log, LOGGER, targets, SCENARIO.view, M, prior_views=5.0)
    for summary in est.summaries.values():
        np.testing.assert_allclose(summary["half", "better"]["difference"], 0.5 * summary["dcg", "better"]["difference"],
                                   rtol=1e-12)
    truth = {name: (np.zeros(2), np.zeros(2)) for name in ("R0", *targets)}
    records = compute_module._estimate_records(est, log.signals, list(targets), M, truth)
    scored = on_a_feed_log()
    assert "half" in scored and [r["metric"] for r in records][::len(M)][:len(scored)] == scored
    assert report_module.estimator_label("half", math.inf) == "½ × DCG m=∞"


def test_unbiased_estimators_recover_the_exact_difference_and_pndcg_lift_is_dcgs(hand_built):
    log, targets, out = hand_built
    first = out                     # clipped-IPS DCG is scored by the same call
    v0 = feed.online_value(None, SCENARIO, LOGGER).mean[0]
    for name, policy in targets.items():
        truth = feed.online_value(None, SCENARIO, policy).mean[0] - v0
        for metric in ("dr",):
            est = out["click"][name][metric]
            assert abs(est["mean"][-1] - truth) <= 4 * est["se"][-1]       # m = ∞: unbiased; 4 SE
        # pnDCG divides DCG by one constant, so its relative lift is DCG's exactly
        pn_lift = out["click"][name]["pndcg"]["mean"] / out["click"]["R0"]["pndcg"]
        dcg_lift = first["click"][name]["dcg"]["mean"] / first["click"]["R0"]["dcg"]
        np.testing.assert_allclose(pn_lift, dcg_lift, rtol=1e-4)


def test_misspecified_view_blends_towards_the_family_and_is_the_truth_at_zero():
    truth = feed.ScrollBudget(np.float32(1.4))
    s = np.asarray(feed.view_probability(truth, 20), np.float64)
    ranks = np.arange(1, 21)
    log2 = 1.0 / np.log2(ranks + 1.0)
    expo = 0.8 ** (ranks - 1.0)
    assert np.array_equal(np.asarray(compute_module.misspecified_view(truth, "logarithmic", 0.0, 20).survival),
                          np.asarray(feed.view_probability(truth, 20)))                  # bit for bit
    np.testing.assert_allclose(compute_module.misspecified_view(truth, "logarithmic", 0.3, 20).survival,
                               0.7 * s + 0.3 * log2, rtol=1e-6)
    np.testing.assert_allclose(compute_module.misspecified_view(truth, "exponential", 1.0, 20, 0.8).survival, expo,
                               rtol=1e-5)
    with pytest.raises(ValueError, match="family"):
        compute_module.misspecified_view(truth, "linear", 0.5, 20)
    with pytest.raises(ValueError, match="blend"):
        compute_module.misspecified_view(truth, "logarithmic", 1.5, 20)


def test_excluded_items_are_nested_and_left_out_of_the_loggers_candidates():
    key = jax.random.key(3)
    small, large = (compute_module.excluded_items(key, 50, s) for s in (0.1, 0.3))
    assert small.sum() == 5 and large.sum() == 15 and np.all(large[small])
    retrieval = np.random.default_rng(0).normal(size=(7, 50)).astype(np.float32)
    g0 = np.asarray(compute_module.logging_candidates(retrieval, large, 12).items)
    assert not np.any(large[g0])
    for u in range(7):                            # the top 12 of the remaining items, by a plain sort
        allowed = [a for a in np.argsort(-retrieval[u], kind="stable") if not large[a]]
        assert list(g0[u]) == allowed[:12]
    unchanged = compute_module.logging_candidates(retrieval, np.zeros(50, bool), 12)
    assert np.array_equal(np.asarray(unchanged.items),
                          np.asarray(feed.top_k_candidates(feed.from_table(retrieval), 12, 7).items))


def test_config_validation_names_the_field():
    for overrides, message in (({"fatigue": (0.2, 0.1)}, "fatigue must be increasing"),
                               ({"cascade": (0.0, 0.5)}, r"cascade must be a number in \(0, 1\]"),
                               ({"depth_shift": (0.5, 4.0)}, r"depth_shift must be a number in \(0, 3\]"),
                               ({"unsupported": (0.95,)}, r"unsupported must be a number in \(0, 0.9\]"),
                               ({"assumptions": ("fatigue", "gravity")}, "assumptions must be one of 'fatigue'"),
                               ({"assumptions": ("fatigue", "fatigue")}, "assumptions must be distinct names"),
                               ({"replications": 1}, "replications must be an integer >= 2"),
                               ({"exponential_gamma": 1.0}, r"exponential_gamma must be a finite number in \(0, 1\)")):
        with pytest.raises(runner.ConfigError, match=message):
            dataclasses.replace(assumptions.PRESETS["smoke"], **overrides)
    # the comparison block (`simrec_studies.common.comparison`) validates its own fields, named with their path
    with pytest.raises(runner.ConfigError, match=r"comparison\.m must be a number >= 1 or inf"):
        dataclasses.replace(assumptions.PRESETS["smoke"].comparison, m=(0.5,))
    with pytest.raises(runner.ConfigError, match="comparison must be a Comparison"):
        dataclasses.replace(assumptions.PRESETS["smoke"], comparison=None)


def test_every_config_field_says_what_it_means():
    assert all(meaning for _, _, _, meaning in runner.config_help(assumptions.PRESETS["default"]))


def test_compute_never_imports_the_report_nor_another_study():
    source = inspect.getsource(compute_module)
    assert "assumptions.report" not in source and "import report" not in source
    for module in (assumptions, compute_module, report_module):
        imported = set(re.findall(r"simrec_studies\.(\w+)", inspect.getsource(module)))
        assert imported <= {"assumptions", "common", "scenarios"}, (module.__name__, imported)


def test_cells_are_the_baseline_and_every_non_zero_dial():
    config = assumptions.PRESETS["default"]
    cells = assumptions.cells(config)
    assert cells[0] == {"assumption": "none", "dial": 0.0}
    assert len(cells) == 1 + sum(len(config.dials(a)) - 1 for a in config.assumptions)
    assert all(c["dial"] > 0 for c in cells[1:])


def test_context_building_blocks_check_their_input():
    view = feed.ScrollBudget(np.float32(1.4))
    assert compute_module.shifted_view(view, 0.0) is view
    assert float(compute_module.shifted_view(view, math.log(2.0)).exponent) == pytest.approx(1.2)
    assert float(compute_module.shifted_view(feed.Exponential(np.float32(0.8)), -math.log(2.0)).gamma) == \
        pytest.approx(0.6)
    with pytest.raises(ValueError, match="ScrollBudget or Exponential"):
        compute_module.shifted_view(feed.Logarithmic(), 0.5)
    assert compute_module.type_sessions(1000, (0.4864, 0.5136)) == (486, 514)
    with pytest.raises(ValueError, match="both user types need a session"):
        compute_module.type_sessions(1, (0.5, 0.5))
    assert list(compute_module.user_types(5)) == [0, 1, 0, 1, 0]


# ---- the smoke preset (reduced to the violations that add little compilation) ------------------------

SMOKE = dataclasses.replace(assumptions.PRESETS["smoke"], assumptions=("context", "view_log", "support"),
                            replications=3)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("assumptions")
    out = root / "smoke"
    summary = runner.run(assumptions.STUDY, SMOKE, seed=0, out=out, preset="smoke", progress=False)
    cache = root / ".simrec-cache" / "assumptions"
    (path,) = cache.glob("setup-*.pkl")
    return out, summary, pickle.loads(path.read_bytes())


def _records(out) -> pd.DataFrame:
    return pd.read_csv(out / "records.csv", keep_default_na=False,
                       na_values={c: [""] for c, t in assumptions.COLUMNS.items() if t is float})


def test_smoke_writes_the_declared_columns_tables_and_figures(smoke_run):
    out, summary, _ = smoke_run
    assert summary.cells_total == 4
    records = _records(out)
    assert list(records.columns) == list(assumptions.COLUMNS)
    assert set(records.assumption) == {"none", "context", "view_log", "support"}
    assert set(records.metric) == {""} | set(on_a_feed_log())
    summary_table = pd.read_csv(out / "table_summary.csv", keep_default_na=False)
    assert set(summary_table.assumption) == set(SMOKE.assumptions)
    assert len(summary_table) == len(SMOKE.assumptions) * 2 * len(on_a_feed_log()) * len(SMOKE.comparison.m)
    assert set(summary_table.sign_below_95_at) <= {"never", "0", "1", "0.2", "2"}
    errors = pd.read_csv(out / "table_errors.csv")
    for column in ("sign_agreement", "TPR", "FPR", "bias_p"):
        values = errors[column].dropna()
        assert ((values >= 0) & (values <= 1)).all(), column
    assert (errors.rmse_lift >= errors.mean_abs_bias_lift - 1e-12).all()
    for name in ("fig_context", "fig_view_log", "fig_support"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    text = (out / "README.md").read_text()
    assert "No violation (dial 0)" in text and "Asm. 5" in text and "two user types" in text
    support = records[(records.assumption == "support") & (records.replication >= 0)]
    assert (support.lost > 0).any() and (records[records.assumption == "none"].lost.dropna() == 0).all()


def _flatten(tree, path=()) -> dict:
    """{path: array} of every leaf of nested dicts (the estimates of `compute.setting_estimates`)."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flatten(sub, path + (key,)).items()}
    return {path: np.asarray(tree, np.float64)}


def test_dial_zero_reproduces_the_baseline_log_and_every_estimate_bit_for_bit(smoke_run):
    _, _, shared = smoke_run
    config = dataclasses.replace(assumptions.PRESETS["smoke"], replications=2)
    root = jax.random.key(0)
    base = compute_module.setting(config, shared, "none", 0.0)
    base_log = compute_module.simulate_log(root, config, base, 1)
    base_est = compute_module.setting_estimates(base_log, base, config)._asdict()
    base_rows = assumptions.compute(root, config, {"assumption": "none", "dial": 0.0}, shared)
    for assumption in compute_module.ASSUMPTIONS:
        zero = compute_module.setting(config, shared, assumption, 0.0)
        log = compute_module.simulate_log(root, config, zero, 1)
        for name in ("users", "items", "viewed", "rewards", "day", "logging_exposure"):
            assert np.array_equal(np.asarray(getattr(log, name)), np.asarray(getattr(base_log, name))), name
        est = compute_module.setting_estimates(log, zero, config)._asdict()
        assert _flatten(est).keys() == _flatten(base_est).keys()
        for path, value in _flatten(est).items():
            assert np.array_equal(value, _flatten(base_est)[path], equal_nan=True), (assumption, path)
        rows = assumptions.compute(root, config, {"assumption": assumption, "dial": 0.0}, shared)
        pd.testing.assert_frame_equal(pd.DataFrame(rows).assign(assumption="none"), pd.DataFrame(base_rows),
                                      check_exact=True)
    # ... while a non-zero dial does change the world or the estimator (the check can fail)
    strong = {a: compute_module.setting(config, shared, a, config.dials(a)[-1]) for a in compute_module.ASSUMPTIONS}
    assert strong["fatigue"].scenario.fatigue == config.fatigue[-1] and base.scenario.fatigue == 0
    assert isinstance(strong["cascade"].scenario.view, feed.Cascade)
    assert not isinstance(base.scenario.view, feed.Cascade)
    assert float(strong["cascade"].scenario.view.stop_probability) == config.cascade[-1]
    assert strong["satiation"].scenario.satiation == config.satiation[-1] and base.scenario.satiation == 0
    assert not np.array_equal(np.asarray(strong["view_log"].view.survival),
                              np.asarray(feed.view_probability(base.view, base.logger.feed_length)))
    assert not np.array_equal(np.asarray(strong["support"].logger.generator.items),
                              np.asarray(base.logger.generator.items))
    assert base.types == () and len(strong["context"].types) == 2
    assert not np.array_equal(np.asarray(strong["context"].view.survival),
                              np.asarray(feed.view_probability(base.view, base.logger.feed_length)))


def _scroll_budget_survival(exponent: float, num_ranks: int) -> np.ndarray:
    """P(B >= i), i = 1..K, of the power-law budget on 1..K, by plain numpy."""
    mass = np.arange(1, num_ranks + 1, dtype=np.float64) ** -exponent
    return np.cumsum(mass[::-1])[::-1] / mass.sum()


def test_context_types_scroll_as_stated_and_the_truth_is_their_weighted_combination(smoke_run):
    out, _, shared = smoke_run
    config = assumptions.PRESETS["smoke"]
    delta = config.depth_shift[-1]
    base = compute_module.setting(config, shared, "none", 0.0)
    ctx = compute_module.setting(config, shared, "context", delta)
    K = base.logger.feed_length
    exponent = float(base.scenario.view.exponent)
    activity = np.asarray(base.scenario.activity, np.float64)
    even = np.arange(activity.size) % 2 == 0
    weights = np.array([activity[even].sum(), activity[~even].sum()]) / activity.sum()
    curves = [_scroll_budget_survival(1 + (exponent - 1) * math.exp(-sign * delta), K) for sign in (1, -1)]
    for t, (w, scenario) in enumerate(ctx.types):      # type 0: even users, deeper; type 1: odd, shallower
        mask = even if t == 0 else ~even
        assert w == pytest.approx(weights[t], rel=1e-6)
        np.testing.assert_allclose(scenario.activity, np.where(mask, activity, 0) / activity[mask].sum(),
                                   rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(feed.view_probability(scenario.view, K), curves[t], rtol=1e-4)
        for q, q0 in zip(scenario.quality, base.scenario.quality, strict=True):       # the same qualities
            assert np.array_equal(np.asarray(table_values(q)), np.asarray(table_values(q0)))
    # the estimators' rank-only curve: the activity-weighted population average
    np.testing.assert_allclose(ctx.view.survival, weights @ np.stack(curves), rtol=1e-4)
    # the log: fixed sessions per type (type 0 first), each session's depth and ε₀ from its own type
    log = compute_module.simulate_log(jax.random.key(0), config, ctx, 0)
    n0 = int(round(config.scenario.log_sessions * weights[0]))
    users = np.asarray(log.users)
    assert users.shape == (config.scenario.log_sessions,)
    assert np.all(users[:n0] % 2 == 0) and np.all(users[n0:] % 2 == 1)
    depth = np.asarray(feed.depth(log), np.float64)
    expected = [curve.sum() for curve in curves]                 # E[D] = Σ_i P(D >= i)
    parts = (depth[:n0], depth[n0:])
    ses = [part.std(ddof=1) / math.sqrt(part.size) for part in parts]
    for t, part in enumerate(parts):
        assert abs(part.mean() - expected[t]) <= 4 * ses[t], (t, part.mean(), expected[t], ses[t])
    assert expected[0] > _scroll_budget_survival(exponent, K).sum() > expected[1]
    assert parts[0].mean() - parts[1].mean() > 4 * math.hypot(*ses)          # the types do differ
    for t, rows in enumerate((slice(0, n0), slice(n0, None))):
        table = np.asarray(feed.exposure(None, ctx.logger, ctx.types[t][1].view, np.arange(activity.size)).mean)
        viewed, items = np.asarray(log.viewed[rows]), np.asarray(log.items[rows])
        rows_users = np.broadcast_to(users[rows][:, None], viewed.shape)
        np.testing.assert_allclose(np.asarray(log.logging_exposure[rows])[viewed],
                                   table[rows_users[viewed], items[viewed]], rtol=1e-6)
    # the truth: Σ_x p_x Σ_a ε_{type(x)}(x, a) q(x, a), each user under its own type's view model
    values = compute_module.truth(jax.random.key(1), config, ctx)
    quality = np.stack([np.asarray(table_values(q), np.float64) for q in base.scenario.quality])   # [S, X, A]
    records = _records(out).query(f"assumption == 'context' and dial == {delta} and replication == -1")
    for name, policy in {"R0": ctx.logger, **ctx.targets}.items():
        brute = np.zeros(len(base.scenario.signals))
        for t, (_, scenario) in enumerate(ctx.types):
            table = np.asarray(feed.exposure(None, policy, scenario.view, np.arange(activity.size)).mean, np.float64)
            mask = even if t == 0 else ~even
            brute += (table[None] * quality).sum(axis=-1)[:, mask] @ activity[mask]
        np.testing.assert_allclose(values[name][0], brute, rtol=1e-5)
        combination = sum(w * np.asarray(feed.online_value(None, scenario, policy).mean) for w, scenario in ctx.types)
        np.testing.assert_allclose(values[name][0], combination, rtol=1e-6)
        if name != "R0":        # the smoke run's truth records are these values' differences
            got = records[records.target == name].set_index("signal").true_diff
            np.testing.assert_allclose([got[s] for s in scenarios.SignalConfig().names], values[name][0] - values["R0"][0],
                                       rtol=1e-9)


def test_the_baseline_truth_is_the_exact_online_difference(smoke_run):
    out, _, shared = smoke_run
    config = assumptions.PRESETS["smoke"]
    base = compute_module.setting(config, shared, "none", 0.0)
    truth = _records(out).query("assumption == 'none' and replication == -1")
    v0 = feed.online_value(None, base.scenario, base.logger).mean
    for name, policy in base.targets.items():
        expected = feed.online_value(None, base.scenario, policy).mean - v0
        got = truth[truth.target == name].set_index("signal").true_diff
        np.testing.assert_allclose([got[s] for s in scenarios.SignalConfig().names], expected, rtol=1e-9)


def test_without_a_violation_unbiased_estimators_show_no_bias_at_m_inf(smoke_run):
    """DCG and DR at m = ∞ are unbiased under Asm. 1–5: over the smoke run's independent logs the mean
    error of each (signal, target) lies within 4 standard errors (sqrt(Σ se²)/R) of 0."""
    records = _records(smoke_run[0])
    base = records[(records.assumption == "none") & (records.replication >= 0) & (records.m == math.inf)]
    checked = 0
    for (metric, signal, target), g in base[base.metric.isin(["dcg", "dr"])].groupby(["metric", "signal", "target"]):
        error = (g.est_diff - g.true_diff).mean()
        se = math.sqrt((g.est_se ** 2).sum()) / len(g)
        assert abs(error) <= 4 * se, (metric, signal, target, error, se)
        checked += 1
    assert checked == 2 * 2 * len(SMOKE.comparison.targets)


def test_ratio_differences_standard_errors_match_their_spread_over_independent_logs():
    """The paired delta-method SE of the pnDCG and SN-DCG differences against the SD of the
    differences over 40 independent logs: the SD of 40 draws is within ~11 % of the truth, so
    their ratio must lie in [0.65, 1.5] (about 3.5 of those SEs)."""
    targets = {"better": BETTER}
    draws = [_differences(feed.simulate(jax.random.key(100 + r), SCENARIO, LOGGER, 2000), LOGGER,
                                               targets, SCENARIO.view, M)["click"]["better"] for r in range(40)]
    for metric in ("pndcg", "sndcg"):
        means = np.array([d[metric]["mean"] for d in draws])                  # [40, M]
        ses = np.array([d[metric]["se"] for d in draws])
        ratio = means.std(axis=0, ddof=1) / np.sqrt(np.mean(ses ** 2, axis=0))
        assert np.all((ratio > 0.65) & (ratio < 1.5)), (metric, ratio)

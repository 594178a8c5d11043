"""The regimes study (verdict maps over regimes of KDD'24 §6) and the two persistent drifts it adds
to the scenarios: walks at 0 reproduce the existing day bit for bit, the item walk has the stated
distribution, the view walk moves the view model as documented; the difference moments and rt's
Table 2 estimates (through the estimator registry) against a direct computation; G′; the verdict
rules on hand-made inputs; the package's compute side without its report; and a tiny run end to
end (declared columns, tables, figures, the paper cell, the claims beside Jeunen et al.'s Table 2
and Fig. 1)."""
import dataclasses
import importlib
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from simrec import feed, ope, reporting, runner
from simrec.world import drift, make_world
from simrec_studies import regimes
from simrec_studies.common import scenarios as S
from simrec_studies.common import table2, table2_estimates

compute_module = importlib.import_module("simrec_studies.regimes.compute")
report_module = importlib.import_module("simrec_studies.regimes.report")

SMOKE = S.PRESETS["smoke"]
SIGNALS = S.SignalConfig().names               # the default pair: like, watch


def _platform(config: S.ScenarioConfig = SMOKE, seed: int = 0) -> S.Platform:
    """A platform with the world and keys only (what `scenarios.day` reads), no training."""
    key = jax.random.key(seed)
    world = make_world(jax.random.fold_in(key, 0), config.world)
    return S.Platform(config=config, world=world, observed=sp.csr_matrix((world.n_users, world.n_items)),
                      candidates={}, trained={}, drift_key=jax.random.fold_in(key, 1),
                      noise_key=jax.random.fold_in(key, 2))


def _reference_day(platform: S.Platform, level: str, d: int, item_walk: float = 0.0, view_walk: float = 0.0):
    """`scenarios.day` as committed before the walks (quality tables, view, activity), with the
    walks added by their documented formulas: item bias + item_walk · W_i(d), log session-length
    factor + view_walk · W(d)."""
    config = platform.config
    lv, dr, sg = S.level_config(config, level), config.drift, config.signals
    z_s, z_e = S.day_factors(platform, d)
    world = drift(jax.random.fold_in(platform.drift_key, 1), platform.world, d, dr.item_strength, dr.user_strength)
    if item_walk:
        world = dataclasses.replace(world, item_bias=world.item_bias + item_walk * S.walk(platform, "item", d))
    shifts = jnp.array([sg.like_shift, sg.watch_shift], jnp.float32) + dr.engagement * z_e
    quality = np.asarray(S._day_quality(world, jnp.array([sg.like_slope, sg.watch_slope], jnp.float32), shifts))
    activity = np.asarray(jax.nn.softmax(world.user_log_activity), np.float64)
    log_length = dr.session * z_s + (view_walk * float(S.walk(platform, "view", d)[0]) if view_walk else 0.0)
    return quality, S._day_view(lv, log_length, SIGNALS), activity / activity.sum()


@pytest.mark.parametrize("level", S.LEVELS)
def test_walks_at_zero_reproduce_the_existing_day_exactly(level):
    platform = _platform()
    explicit = dataclasses.replace(SMOKE, drift=dataclasses.replace(SMOKE.drift, item_walk=0.0, view_walk=0.0))
    for d in (0, 3):
        quality, view, activity = _reference_day(platform, level, d)
        for config in (SMOKE, explicit):
            today = S.day(dataclasses.replace(platform, config=config), level, d).scenario
            for s in range(len(SIGNALS)):
                assert np.array_equal(np.asarray(today.quality[s].params), quality[s])
            assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda a, b: bool(np.array_equal(a, b)),
                                                                 today.view, view))
            assert np.array_equal(np.asarray(today.activity), np.asarray(activity, np.float32))


def test_walks_enter_the_day_as_documented():
    config = dataclasses.replace(SMOKE, drift=dataclasses.replace(SMOKE.drift, item_walk=0.3, view_walk=0.2))
    platform = _platform(config)
    today = S.day(platform, "level1", 4).scenario
    quality, view, _ = _reference_day(platform, "level1", 4, item_walk=0.3, view_walk=0.2)
    np.testing.assert_allclose(np.asarray(today.quality[0].params), quality[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(float(today.view.exponent), float(view.exponent), rtol=1e-6)
    plain = S.day(_platform(), "level1", 4).scenario                   # the walks do change the day
    assert not np.allclose(np.asarray(plain.quality[0].params), quality[0])
    assert float(plain.view.exponent) != pytest.approx(float(view.exponent))
    assert np.all(np.asarray(S.walk(platform, "item", 0)) == 0) and float(S.walk(platform, "view", 0)[0]) == 0.0
    with pytest.raises(ValueError, match="kind"):
        S.walk(platform, "user", 1)
    with pytest.raises(S.ConfigError, match="drift.item_walk"):
        S.DriftConfig(item_walk=-0.1)


def test_item_walk_steps_are_iid_standard_normal():
    """W_i(d) − W_i(d−1) ~ N(0, 1) i.i.d. over items and days: mean, variance and lag-1
    correlation of the steps within 4 standard errors (fails ~1e-4 of seeds)."""
    platform = _platform()                  # `walk` reads the drift key and the number of items only
    platform = dataclasses.replace(platform, world=types.SimpleNamespace(n_items=4000))
    walks = np.stack([np.asarray(S.walk(platform, "item", d), np.float64) for d in range(6)])
    steps = np.diff(walks, axis=0)                                           # [5, 4000]
    n = steps.size
    assert abs(steps.mean()) <= 4 / math.sqrt(n)
    assert abs(steps.var(ddof=1) - 1.0) <= 4 * math.sqrt(2.0 / (n - 1))
    lag = np.mean(steps[1:] * steps[:-1])                                    # E[ξ_t ξ_{t+1}] = 0
    assert abs(lag) <= 4 / math.sqrt(steps[1:].size)
    # persistence: W(d) keeps W(d−1) exactly, so Var W(d) = d
    np.testing.assert_allclose(walks[1:], np.cumsum(steps, axis=0) + walks[:1], rtol=0, atol=1e-5)
    assert abs(walks[5].var() - 5.0) <= 4 * 5.0 * math.sqrt(2.0 / walks.shape[1])


def _random_log(seed: int = 0, n: int = 203, k: int = 6):
    rng = np.random.default_rng(seed)
    viewed = np.arange(k)[None, :] < rng.integers(1, k + 1, n)[:, None]
    rewards = viewed & (rng.random((n, k)) < 0.3)
    e0 = np.where(viewed, rng.uniform(0.001, 0.9, (n, k)), 0.0).astype(np.float32)
    return rng, rewards, viewed, e0


def test_difference_moments_match_a_direct_computation():
    rng, rewards, viewed, e0 = _random_log()
    n, k = viewed.shape
    targets = {"a": rng.uniform(0, 1, (n, k)).astype(np.float32), "b": rng.uniform(0, 0.2, (n, k)).astype(np.float32)}
    m = np.array([1.0, 5.0, math.inf])
    out = regimes.difference_moments(ope.LoggedData(rewards, viewed, e0),
                                     {"R0": ope.Target(e0), **{name: ope.Target(e) for name, e in targets.items()}}, m)
    assert list(out) == list(targets)
    for name, e in targets.items():
        weight = np.where(viewed, 1.0 / np.where(viewed, e0, 1.0), 0.0)
        for i, mv in enumerate(m):
            clipped = np.minimum(mv, weight) * rewards
            delta = (clipped * (e - e0)).sum(axis=1)
            assert out[name][0][i] == pytest.approx(delta.mean(), rel=1e-5, abs=1e-7)
            assert out[name][1][i] == pytest.approx(delta.std(ddof=1) / math.sqrt(n), rel=1e-4)


def test_correlated_estimates_match_a_direct_computation():
    """rt's and R₀'s Table 2 estimates (m = 1 for C, ∞ for Q̂) against numpy, with different
    exposures under the two views and the pbm discount in the nDCG ideal."""
    rng, rewards, viewed, e0 = _random_log(1)
    n, k = viewed.shape
    exposures = {"log": {"R0": e0, "rt": rng.uniform(0, 1, (n, k)).astype(np.float32)},
                 "pbm": {"R0": np.where(viewed, rng.uniform(0.001, 0.9, (n, k)), 0.0).astype(np.float32),
                         "rt": rng.uniform(0, 1, (n, k)).astype(np.float32)}}
    discount = np.linspace(1.0, 0.3, k)
    out = compute_module.correlated_estimates(*table2_estimates.inputs(rewards, viewed, exposures, discount))
    assert list(out) == [(q, name) for q in compute_module.CORRELATED for name in compute_module.SERIES]
    c = rewards.astype(np.float64)
    for name in compute_module.SERIES:
        for view, by in exposures.items():
            weight = np.where(viewed, 1.0 / np.where(viewed, by["R0"], 1.0), 0.0)
            for labels, m in (("c", 1.0), ("q", math.inf)):
                dcg = (c * np.minimum(m, weight) * by[name]).sum(axis=1)
                value, se = out[f"dcg_{view}_{labels}", name]
                assert value == pytest.approx(dcg.mean(), rel=1e-5)
                assert se == pytest.approx(dcg.std(ddof=1) / math.sqrt(n), rel=1e-4)
        if name == "R0":          # on-policy: DCG (pbm, Q̂) is the logged mean reward
            assert out["dcg_pbm_q", name][0] == pytest.approx((c * viewed).sum(axis=1).mean(), rel=1e-5)
        idcg = -np.sort(-(c * weight), axis=1) @ discount
        ndcg = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), np.nan)          # dcg: pbm, Q̂
        kept, zero = ndcg[idcg > 0], np.nan_to_num(ndcg)
        assert out["ndcg_skip", name] == pytest.approx((kept.mean(), kept.std(ddof=1) / math.sqrt(kept.size)),
                                                       rel=1e-4)
        assert out["ndcg_zero", name] == pytest.approx((zero.mean(), zero.std(ddof=1) / math.sqrt(n)), rel=1e-4)


def test_table_value_is_the_online_value_of_an_exact_policy():
    rng = np.random.default_rng(2)
    x, a = 6, 9
    quality = tuple(feed.from_table(rng.uniform(0, 0.5, (x, a)).astype(np.float32)) for _ in range(2))
    scenario = feed.Scenario(feed.ScrollBudget(jnp.float32(1.4)), quality, jnp.asarray(rng.dirichlet(np.ones(x)),
                                                                                         jnp.float32), ("s", "t"))
    policy = feed.Policy(feed.all_items(a), feed.EpsilonGreedy(feed.Sort(feed.from_table(
        rng.normal(size=(x, a)).astype(np.float32))), jnp.float32(0.3)), 5)
    table = feed.placement_exposure(feed.placement(None, policy, np.arange(x)), scenario.view, a)
    np.testing.assert_allclose(regimes.table_value(scenario, table), feed.online_value(None, scenario, policy).mean,
                               rtol=1e-5)


def test_online_truth_is_the_table_value_without_violations_and_monte_carlo_with_them():
    """`_online`: on level 1 the table value with SE 0; on level 2 (cascade and satiation) the
    deterministic target's value is exact (SE 0, equal to `feed.online_value`) and the ε-greedy
    logger's is a Monte Carlo mean within 3 SE (its own and a 256-sample reference's) of the
    reference."""
    compute = importlib.import_module("simrec_studies.regimes.compute")
    platform = S.platform(jax.random.key(0), SMOKE, 0, rankers=())          # no training: untrained rankers
    r0, rt = S.scores(platform, S.Popularity()), S.scores(platform, S.NoisyOracle(1.0))
    for level in S.LEVELS:
        lv = S.level_config(platform.config, level)
        scenario = S.day(platform, level, 1).scenario
        policies = {"R0": S.logging_policy(platform, level, r0), "rt": S.target_policy(platform, level, rt)}
        true = {name: feed.placement_exposure(feed.placement(None, p, np.arange(platform.world.n_users)),
                                              scenario.view, platform.world.n_items) for name, p in policies.items()}
        online = compute._online(jax.random.key(3), platform, scenario, policies, true, lv)
        if not lv.breaks_session:
            for name, (value, se) in online.items():
                np.testing.assert_array_equal(value, regimes.table_value(scenario, true[name]))
                assert not se.any()
            continue
        exact = feed.online_value(None, scenario, policies["rt"])
        np.testing.assert_allclose(online["rt"][0], exact.mean, rtol=1e-6)
        assert not online["rt"][1].any()
        reference = feed.online_value(jax.random.key(4), scenario, policies["R0"], num_samples=256,
                                      block_size=platform.world.n_users)
        value, se = online["R0"]
        assert (se > 0).all()
        assert (np.abs(value - reference.mean) <= 3 * np.hypot(se, reference.standard_error)).all()


def test_a_monte_carlo_truth_within_two_se_of_zero_is_neither_improving_nor_harmful():
    """`settings_frame` with `online_se` records: differences of 0.05 ± 0.01 and −0.05 ± 0.01 are
    improving and harmful, 0.01 ± 0.01 is neither; without SE records every sign counts."""
    config = regimes.RegimesConfig(m=(math.inf,))
    cell = {"map": "exploration", "x": 0.05, "y": 1e4, "replication": 0, "signal": "watch", "m": math.nan}
    rows = [{**cell, "day": 0, "target": "R0", "quantity": "online", "value": 1.0},
            {**cell, "day": 0, "target": "R0", "quantity": "online_se", "value": 0.01}]
    for target, value in (("rt", 1.05), ("oracle@2", 1.01), ("oracle@8", 0.95)):
        rows += [{**cell, "day": 0, "target": target, "quantity": "online", "value": value},
                 {**cell, "day": 0, "target": target, "quantity": "online_se", "value": 0.0},
                 {**cell, "day": 0, "target": target, "quantity": "delta", "m": math.inf, "value": 0.1},
                 {**cell, "day": 0, "target": target, "quantity": "delta_se", "m": math.inf, "value": 0.01}]
    records = pd.DataFrame(rows)
    frame = regimes.settings_frame(config, records).set_index("target")
    assert frame.improving.to_dict() == {"rt": True, "oracle@2": False, "oracle@8": False}
    assert frame.harmful.to_dict() == {"rt": False, "oracle@2": False, "oracle@8": True}
    assert frame.exact_diff_se.to_numpy() == pytest.approx([0.01] * 3)
    exact = regimes.settings_frame(config, records[records.quantity != "online_se"]).set_index("target")
    assert exact.improving.to_dict() == {"rt": True, "oracle@2": True, "oracle@8": False}


def _verdict_frame(values: dict) -> pd.DataFrame:
    rows = []
    for estimator, rs in values.items():
        rows += [{"map": "drift", "x": 0.0, "y": 0.1, "replication": i, "signal": "watch", "series": "rt",
                  "estimator": estimator, "r": r} for i, r in enumerate(rs)]
    return pd.DataFrame(rows)


#: three replications' r per estimator where DCG (pbm, Q̂) tracks online reward and nDCG has the opposite sign
STRONG = {"dcg_pbm_q": [0.9, 0.8, 0.85], "ndcg_skip": [-0.5, -0.6, -0.4], "dcg_log_c": [0.88, 0.81, 0.86],
          "dcg_log_q": [0.9, 0.8, 0.8], "dcg_pbm_c": [0.9, 0.8, 0.8], "ndcg_zero": [0.1, 0.2, 0.0]}


def test_correlation_verdicts_need_two_standard_errors():
    out = regimes.verdicts(_verdict_frame(STRONG))
    a, b, c = (out[name].iloc[0] for name in "abc")
    assert a.verdict == "holds" and a.value == pytest.approx(0.85)
    assert b.verdict == "holds" and bool(b["nDCG opposite sign"])
    assert c.verdict == "tie"                         # +0.0 ± 0.01: no difference beyond 2 SE
    weak = dict(STRONG, dcg_pbm_q=[0.1, -0.1, 0.05], dcg_log_c=[0.9, 0.85, 0.88])
    out = regimes.verdicts(_verdict_frame(weak))
    assert out["a"].iloc[0].verdict == "fails" and out["c"].iloc[0].verdict == "fails"
    single = {k: v[:1] for k, v in STRONG.items()}    # one replication: no SE, no verdict
    assert set(regimes.verdicts(_verdict_frame(single))["a"].verdict) == {"unclear"}


def test_detection_rates_and_verdict_d_on_hand_made_settings():
    config = regimes.RegimesConfig(m=(1.0, 8.0, math.inf))
    rows = []
    for i in range(40):                               # improving: m = 8 detects 30, m = ∞ 10, m = 1 none
        for m, hit in ((1.0, False), (8.0, i < 30), (math.inf, i < 10)):
            rows.append({"map": "exploration", "x": 0.05, "y": 1e4, "replication": 0, "day": i, "signal": "watch",
                         "target": "rt", "m": m, "improving": True, "harmful": False, "detected": hit,
                         "delta": 1.0 if hit else -0.1})
    for i in range(40):                               # harmful: one false positive at m = 8
        for m in (1.0, 8.0, math.inf):
            rows.append({"map": "exploration", "x": 0.05, "y": 1e4, "replication": 0, "day": i, "signal": "watch",
                         "target": "oracle@8", "m": m, "improving": False, "harmful": True,
                         "detected": m == 8.0 and i == 0, "delta": -1.0})
    frame = pd.DataFrame(rows)
    rates = regimes.detection(config, frame).set_index("m")
    assert rates.TPR.to_dict() == {1.0: 0.0, 8.0: 0.75, math.inf: 0.25}
    assert rates.FPR.loc[8.0] == pytest.approx(1 / 40) and rates.TPR_low.loc[8.0] < 0.75 < rates.TPR_high.loc[8.0]
    assert rates.sign_agreement.loc[8.0] == 0.75
    (row,) = regimes.verdict_d(frame, rates.reset_index()).itertuples()
    assert row._6 == 8.0 and row.verdict == "holds"   # best m = 8, gain 0.5 over ∞ (SE ~0.08)
    no_gain = frame.assign(detected=np.where(frame.improving, frame.day < 30, False))
    rates = regimes.detection(config, no_gain)
    assert regimes.verdict_d(no_gain, rates).verdict.iloc[0] == "partly"      # m = ∞ detects as many


def test_generator_shift_zero_is_g_and_one_is_the_targets_top_n():
    platform = _platform()
    n_users, n_items, n = platform.world.n_users, platform.world.n_items, 30
    rng = np.random.default_rng(1)
    retrieval = rng.normal(size=(n_users, n_items)).astype(np.float32)
    g = feed.top_k_candidates(feed.from_table(retrieval), n, n_users)
    config = dataclasses.replace(SMOKE, level1=dataclasses.replace(SMOKE.level1, candidates=n, feed_length=10))
    platform = dataclasses.replace(platform, config=config, candidates={"level1": g})
    target = feed.from_table(rng.normal(size=(n_users, n_items)).astype(np.float32))
    assert regimes.shifted_generator(platform, target, 0.0, "level1") is g
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(S, "retrieval_scores", lambda _: feed.from_table(retrieval))
        own = np.asarray(regimes.shifted_generator(platform, target, 1.0, "level1").items)
    expected = np.argsort(-np.asarray(target.params), axis=1, kind="stable")[:, :n]
    assert all(set(a) == set(b) for a, b in zip(own, expected))


def test_config_validation_and_cells():
    for change in ({"maps": ("nowhere",)}, {"epsilons": (0.1, 1.5)}, {"temperatures": (0.0,)},
                   {"sessions": (1,)}, {"replications": 0}, {"m": (0.5,)}, {"paper_sessions": 1},
                   {"improving": (S.NoisyOracle(1.0),)}, {"confidence": 1.0}, {"level": "level3"},
                   {"scenario": dataclasses.replace(SMOKE, signals=S.SignalConfig(names=("watch", "share")))}):
        with pytest.raises(runner.ConfigError):
            dataclasses.replace(regimes.PRESETS["default"], **change)
    config = regimes.PRESETS["default"]
    cells = regimes.cells(config)
    points = regimes.grid_points(config)
    grid = sum(len(regimes.grid(config, name)[0]) * len(regimes.grid(config, name)[1]) for name in config.maps)
    assert len(points) == grid + 1                               # every grid point and the paper cell
    # one cell per distinct regime and replication, covering every grid point exactly once per replication
    dials = [(p["map"] == regimes.PAPER, regimes.cell_dials(config, p)) for p in points]
    distinct = len(set(dials))
    assert len(cells) == (distinct - 1) * config.replications + config.paper_replications < len(points) * 5
    for r in range(config.replications):
        covered = [tuple(p) for c in cells if c["replication"] == r for p in c["points"] if p[0] != regimes.PAPER]
        assert sorted(covered) == sorted((p["map"], p["x"], p["y"]) for p in points if p["map"] != regimes.PAPER)
    for cell in cells:
        assert len({regimes.cell_dials(config, p) for p in regimes.cell_points(cell)}) == 1
    base = next(c for c in cells if ["exploration", 0.05, 10_000.0] in c["points"])
    assert sorted(name for name, _, _ in base["points"]) == ["drift", "examination", "exploration", "generator"]
    paper = [c for c in cells if c["points"][0][0] == regimes.PAPER]
    assert paper and all(c["points"] == [[regimes.PAPER, float(config.paper_sessions), 0.0]] for c in paper)
    dials = regimes.cell_dials(config, {"map": "plackett_luce", "x": 1.0, "y": 0.3})
    assert dials.temperature == 1.0 and dials.item_walk == 0.3 and dials.epsilon == config.dials.epsilon
    assert regimes.cell_dials(config, regimes.cell_points(paper[0])[0]).log_sessions == config.paper_sessions
    engagement = regimes.cell_dials(config, {"map": "engagement", "x": 0.64, "y": 0.0})   # engagement-only drift
    assert (engagement.global_drift, engagement.session_share, engagement.item_walk, engagement.view_walk) == \
        (0.64, 0.0, 0.0, 0.0)
    # the signal map: engagement-only drift at sd 1.28, the watch signal's slope and shift set; at watch's own
    # values the dials are None, so that point is the engagement map's (1.28, 0) regime, computed once
    like_shaped = regimes.cell_dials(config, {"map": "signal", "x": 1.0, "y": -7.0})
    assert (like_shaped.global_drift, like_shaped.session_share, like_shaped.item_walk, like_shaped.view_walk,
            like_shaped.watch_slope, like_shaped.watch_shift) == (1.28, 0.0, 0.0, 0.0, 1.0, -7.0)
    signals = regimes.regime_config(config.scenario, like_shaped, config.level).signals
    assert (signals.watch_slope, signals.watch_shift) == (1.0, -7.0)
    assert signals.like_slope == config.scenario.signals.like_slope
    own = regimes.cell_dials(config, {"map": "signal", "x": 0.5, "y": -1.5})
    assert own == regimes.cell_dials(config, {"map": "engagement", "x": 1.28, "y": 0.0})
    assert ["signal", 0.5, -1.5] in next(c for c in cells if ["engagement", 1.28, 0.0] in c["points"])["points"]
    scenario = regimes.regime_config(config.scenario, dataclasses.replace(config.dials, session_share=0.25), config.level)
    assert scenario.drift.session ** 2 + scenario.drift.engagement ** 2 == pytest.approx(config.dials.global_drift ** 2)
    assert scenario.drift.session ** 2 == pytest.approx(0.25 * config.dials.global_drift ** 2)


def test_every_config_field_is_documented():
    assert all(meaning for name, _, _, meaning in runner.config_help(regimes.PRESETS["default"])
               if not name.startswith("scenario.world."))


def test_base_point_is_the_grid_point_at_the_default_dials():
    config = regimes.PRESETS["default"]
    assert report_module.base_point(config) == ("exploration", 0.05, 10_000.0)
    assert report_module.base_point(dataclasses.replace(config, maps=("drift", "generator"))) == \
        ("drift", 0.5, 0.1)
    assert report_module.base_point(dataclasses.replace(config, maps=("plackett_luce",))) is None   # PL logger
    assert report_module.verdict_a(0.8, 0.1) == "holds" and report_module.verdict_a(0.8, 0.5) == "unclear"
    assert report_module.verdict_a(0.2, 0.1) == "fails" and report_module.verdict_a(0.45, 0.1) == "unclear"
    assert report_module.verdict_a(0.9, math.nan) == "unclear"


# ---- a tiny run end to end ---------------------------------------------------------------------------

#: the smoke scenario's world (whose programs the walk tests above compile already), one trained
#: method for both slots (one compiled training epoch), three days, a 2 x 1 grid and the paper cell
TINY = regimes.RegimesConfig(
    scenario=dataclasses.replace(SMOKE, level1=S.LevelConfig(candidates=30, feed_length=15), days=3,
                                 rankers=dataclasses.replace(SMOKE.rankers, r0_pairs=2000, rt_pairs=4000,
                                                             rt_method="mf_auc")),
    dials=regimes.Dials(log_sessions=400, epsilon=0.1), maps=("generator",), generator_shifts=(0.0, 1.0),
    epsilons=(0.1,), replications=2, paper_sessions=400, paper_days=3, m=(1.0, 16.0, math.inf), exposure_samples=8)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("regimes") / "tiny"
    summary = runner.run(regimes.STUDY, TINY, seed=0, out=out, preset="tiny", progress=False)
    return out, summary


def test_tiny_run_writes_the_declared_columns_tables_and_figures(tiny_run):
    out, summary = tiny_run
    assert summary.cells_total == 2 * 2 + 1
    records = pd.read_csv(out / "records.csv", keep_default_na=False,
                          na_values={"m": [""], "value": [""], "x": [""], "y": [""]})
    assert list(records.columns) == list(regimes.COLUMNS)
    assert set(records["map"]) == {"generator", regimes.PAPER}
    assert set(records.quantity) >= {"online", "delta", "delta_se", "lost", "max_weight", *regimes.CORRELATED}
    lost = records[(records.quantity == "lost") & (records.target == "rt")]
    assert (lost[lost.x == 0.0].value == 0).all() and (lost[lost.x == 1.0].value > 0).any()   # G′ = G: full support
    for name in ("a", "b", "c", "d"):
        table = pd.read_csv(out / f"table_verdict_{name}.csv")
        assert set(table.verdict) <= {"holds", "fails", "tie", "unclear", "partly"}
        assert (out / f"fig_verdict_{name}.png").read_bytes().startswith(b"\x89PNG")
    rates = pd.read_csv(out / "table_detection.csv")
    for column in ("TPR", "FPR", "sign_agreement"):
        values = rates[column].dropna()
        assert ((values >= 0) & (values <= 1)).all()
    assert "Verdict maps" in (out / "README.md").read_text()


def test_tiny_run_claims_set_table_2_and_fig_1_beside_ours(tiny_run):
    """The base regime (G′ = G, the default dials) gives (a)–(c) per signal and (d), the paper cell
    (a) and (d); each claim carries the paper's r of R_t on the first-level feed, and its verdict
    follows the verdict table's."""
    out, _ = tiny_run
    table = pd.read_csv(out / "table_claims.csv", keep_default_na=False)
    assert list(table.columns) == list(reporting.CLAIM_COLUMNS)
    assert set(table.verdict) <= set(reporting.CLAIM_VERDICTS)
    base = table[table.evidence.str.endswith("generator (0, 0.1)")]
    paper = table[table.evidence.str.endswith("paper cell")]
    # (a), (b) on R_t's series, (c) on R_t's and R₀'s, per signal; (d) pooled
    assert len(base) == 4 * len(SIGNALS) + 1 and len(paper) == len(SIGNALS) + 1 and len(table) == len(base) + \
        len(paper)
    logger = base[base.claim.str.contains("R₀'s series", regex=False)]
    assert len(logger) == len(SIGNALS) and logger["source's number"].str.contains("R₀)", regex=False).all()
    r_like = table2.PAPER["dcg_pbm_q"][table2.SETTINGS.index(("level1", "like", "Rt"))]
    assert base["source's number"].str.contains(f"r = {r_like:.2f} (L1 C_exp R_t)", regex=False).any()
    verdict_a = pd.read_csv(out / "table_verdict_a.csv")
    row = verdict_a[(verdict_a["map"] == "generator") & (verdict_a.x == 0.0) & (verdict_a.signal == "like")].iloc[0]
    claim = base[base.claim.str.contains("Pearson") & base.claim.str.contains("(like;", regex=False)].iloc[0]
    assert claim.ours == reporting.number(row.value) and claim.verdict == report_module.CLAIM_VERDICTS[row.verdict]
    assert set(paper[paper.claim.str.contains("Pearson")].verdict) == {"not testable"}     # one replication
    assert "## Claims" in (out / "README.md").read_text()


def test_a_regime_on_two_maps_is_one_cell_whose_records_serve_both_points():
    """Grid points of two maps with the same dials (here the default regime, on the exploration
    and the generator map) are one cell per replication; its records are the same for each point
    but for the point's coordinates, and `in_grid_order` puts them back in map and grid order."""
    config = dataclasses.replace(TINY, maps=("exploration", "generator"), sessions=(400,), paper_sessions=0,
                                 replications=1)
    cells = regimes.cells(config)
    shared_points = [c["points"] for c in cells if len(c["points"]) > 1]
    assert shared_points == [[["exploration", 0.1, 400.0], ["generator", 0.0, 0.1]]]
    assert len(cells) == len(regimes.grid_points(config)) - 1
    records = pd.DataFrame(regimes.compute(jax.random.key(0), config, {"points": shared_points[0], "replication": 0},
                                           regimes.setup(jax.random.key(0), config)))
    by_point = [part.drop(columns=["map", "x", "y"]).reset_index(drop=True)
                for _, part in records.groupby("map", sort=False)]
    assert len(by_point) == 2 and len(by_point[0]) > 0
    pd.testing.assert_frame_equal(by_point[0], by_point[1])
    assert set(records[records.quantity.isin(regimes.CORRELATED)].target) == set(regimes.SERIES)
    shuffled = records.iloc[::-1].reset_index(drop=True)
    ordered = report_module.in_grid_order(config, shuffled)
    assert list(dict.fromkeys(ordered["map"])) == ["exploration", "generator"]


def test_one_click_quantities_by_hand_and_nDCG_of_a_one_label_session_is_the_targets_exposure():
    """The one-label sessions of a hand log: share among sessions with a label, depth, ε₀(a), ε_t(a);
    and each such session's nDCG (pbm, Q̂) from the registry equals ε_t(a) / S(1)."""
    rewards = np.array([[0, 1, 0], [1, 1, 0], [0, 0, 0], [0, 0, 1], [1, 0, 0]], np.float32)
    viewed = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0]], bool)  # session 3's label unseen
    logging = np.array([[.9, .5, .2], [.8, .4, .1], [.9, .5, .2], [.7, .3, .2], [.6, .3, .1]], np.float32)
    target = np.array([[.2, .9, .5], [.9, .5, .2], [.9, .5, .2], [.2, .5, .9], [.4, .3, .1]], np.float32)
    got = compute_module.one_click_quantities(rewards, viewed, logging, target)
    # labelled sessions: 0 (one), 1 (two), 4 (one); one-label: 0 at rank 2, 4 at rank 1
    assert got == pytest.approx({"one_click_share": 2 / 3, "one_click_depth": (3 + 1) / 2,
                                 "one_click_logger_exposure": (.5 + .6) / 2,
                                 "one_click_target_exposure": (.9 + .4) / 2})
    discount = np.array([1.0, 0.6, 0.3], np.float32)
    one = [0, 4]
    data, targets = table2_estimates.inputs(rewards[one], viewed[one], {"pbm": {"R0": logging[one], "rt": target[one]}},
                                            discount)
    parts = table2_estimates.contributions(data, targets, math.inf, ["ndcg_skip"])
    np.testing.assert_allclose(np.asarray(parts["ndcg_skip", "rt"].numerator)[0], [.9, .4], rtol=1e-6)
    none = compute_module.one_click_quantities(rewards[[1, 2]], viewed[[1, 2]], logging[[1, 2]], target[[1, 2]])
    assert all(math.isnan(v) for v in none.values())


def test_one_click_table_correlates_each_quantity_with_the_days_engagement():
    """`table_one_click`: per replication the r over days with the engagement factor, then mean ± SE;
    a quantity rising with engagement has r = +1, one falling r = −1, a constant one NaN."""
    rows = []
    for replication in range(2):
        for day, engagement in enumerate((-1.0, 0.5, 2.0)):
            cell = {"map": "engagement", "x": 1.28, "y": 0.0, "replication": replication, "day": day, "m": math.nan}
            rows.append({**cell, "signal": "", "target": "", "quantity": "engagement", "value": engagement})
            for quantity, value in (("one_click_share", 1 - engagement), ("one_click_depth", 2.0),
                                    ("one_click_logger_exposure", engagement),
                                    ("one_click_target_exposure", 3 * engagement), ("ndcg_skip", -engagement)):
                rows.append({**cell, "signal": "like", "target": "rt", "quantity": quantity, "value": value})
    table = report_module.one_click(pd.DataFrame(rows))
    row = table.iloc[0]
    assert len(table) == 1 and row.replications == 2
    assert row["r(engagement, share of one-label sessions)"] == pytest.approx(-1.0)
    assert row["r(engagement, their nDCG = ε_t(a))"] == pytest.approx(1.0)
    assert row["r(engagement, nDCG (skip))"] == pytest.approx(-1.0)
    assert math.isnan(row["r(engagement, their depth)"])
    assert "it rises for like" in report_module._one_click_text(table)


@pytest.mark.parametrize("signs, reading", [({(0.5, -7.0): 1, (0.5, -1.5): 1, (1.0, -7.0): -1, (1.0, -1.5): -1},
                                             "follows the slope"),
                                            ({(0.5, -7.0): -1, (0.5, -1.5): 1, (1.0, -7.0): -1, (1.0, -1.5): 1},
                                             "follows the shift"),
                                            ({(0.5, -7.0): 0, (0.5, -1.5): 1, (1.0, -7.0): -1, (1.0, -1.5): 1},
                                             "Neither property alone sets the sign at 2 SE on these four corners (a tie "
                                             "at a corner, or the sign needs both). Each moves r, averaged over the "
                                             "other's two values (SE from the corners' SEs as if independent, which "
                                             "overstates it under common random numbers): raising the shift from -7 to "
                                             "-1.5 moves it by +0.90 ± 0.10 (9.0 SE); raising the slope from 0.5 to 1 "
                                             "moves it by -0.30 ± 0.10 (3.0 SE). Beyond 2 SE, a rarer signal (lower "
                                             "shift) and a steeper signal (higher slope) push nDCG's r negative.")])
def test_the_signal_map_says_which_property_of_watch_sets_ndcgs_sign(signs, reading):
    """`_signal_text` reads the four corners of the signal map: a sign beyond 2 SE at every corner
    that follows one dial alone names that dial; a tie or a sign needing both names neither and
    gives each dial's main effect (by hand: shift ((0.6 − 0) + (0.6 + 0.6)) / 2 = 0.9, slope
    ((−0.6 − 0) + (0.6 − 0.6)) / 2 = −0.3, SE √(4 · 0.1²) / 2 = 0.1)."""
    labels = [*report_module.ONE_CLICK_LABELS.values()]
    rows = [{"map": "signal", "x": x, "y": y, "signal": "watch", "replications": 5,
             **{f"r(engagement, {label})": 0.6 * sign if label == "nDCG (skip)" else 0.1 for label in labels},
             **{f"se[{label}]": 0.1 for label in labels}} for (x, y), sign in signs.items()]
    assert reading in report_module._signal_text(pd.DataFrame(rows))
    assert "not isolated" in report_module._signal_text(pd.DataFrame(rows).assign(map="engagement"))


def test_a_verdict_that_rests_on_one_replication_is_not_stable_leaving_one_out():
    """Five well-separated differences keep "holds" whichever one is left out; a "holds" at 2.6 SE
    (0.16 ± 0.062) becomes a tie without 0.3, 0.25 or 0.2; with fewer than three values there is
    nothing to judge. The verdict tables carry the column."""
    rule = lambda values: reporting.paired_verdict(values).verdict          # noqa: E731
    assert report_module.leave_one_out_stable([0.5, 0.6, 0.55, 0.52, 0.58], rule) is True
    borderline = [0.1, 0.3, -0.05, 0.25, 0.2]
    assert rule(np.array(borderline)) == "holds" and rule(np.array([0.1, -0.05, 0.25, 0.2])) == "tie"
    assert report_module.leave_one_out_stable(borderline, rule) is False
    assert report_module.leave_one_out_stable([0.5, np.nan, 0.6], rule) is None         # two finite values
    out = regimes.verdicts(_verdict_frame(STRONG))
    assert bool(out["a"].iloc[0][report_module.STABLE]) and bool(out["b"].iloc[0][report_module.STABLE])

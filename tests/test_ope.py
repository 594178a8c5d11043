"""Estimators: formulas against loops, unbiasedness, the clipping bias, and assumption violations."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed, ope

# --------------------------------------------------------------------------------------------
# Formulas against loop implementations
# --------------------------------------------------------------------------------------------


def random_log(seed, n=40, k=6):
    rng = np.random.default_rng(seed)
    depth = rng.integers(0, k + 1, n)
    viewed = np.arange(k)[None] < depth[:, None]
    rewards = (rng.uniform(size=(n, k)) < 0.4) * rng.uniform(0.5, 2.0, (n, k))
    logging = np.where(viewed, rng.uniform(0.01, 1.0, (n, k)), 0.0)
    target = rng.uniform(0.0, 1.0, (n, k))
    return (rewards.astype(np.float32), logging.astype(np.float32), target.astype(np.float32), viewed)


def loop_dcg(rewards, logging, target, viewed, m):
    out = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[0]):
        for i in range(rewards.shape[1]):
            if viewed[t, i]:
                out[t] += rewards[t, i] * min(m, 1.0 / logging[t, i]) * target[t, i]
    return out


def loop_ideal(rewards, logging, viewed, discount, m, all_viewed):
    out = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[0]):
        labels = sorted((rewards[t, i] * min(m, 1.0 / logging[t, i]) for i in range(rewards.shape[1]) if viewed[t, i]),
                        reverse=True)
        out[t] = sum(l * (1.0 if all_viewed else (discount[j] if j < len(discount) else 0.0))
                     for j, l in enumerate(labels))
    return out


M_VALUES = np.array([1.0, 1.5, 4.0, 20.0, np.inf])


def test_trajectory_dcg_matches_loop():
    data = random_log(0, n=200)
    got = np.asarray(ope.trajectory_dcg(*data, m=M_VALUES))
    assert got.shape == (len(M_VALUES), 200)
    for row, m in zip(got, M_VALUES):
        np.testing.assert_allclose(row, loop_dcg(*data, m), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ope.trajectory_dcg(*data, m=3.0), loop_dcg(*data, 3.0), rtol=1e-5, atol=1e-6)
    rewards, _, target, viewed = data                     # m = 1: raw labels times target exposure
    np.testing.assert_allclose(ope.trajectory_dcg(*data, m=1.0), (rewards * target * viewed).sum(1), rtol=1e-5)
    assert ope.trajectory_dcg(*data).shape == (200,)


def test_dcg_sweep_matches_per_trajectory_mean_and_se():
    data = random_log(4, n=200)
    est = ope.dcg_sweep(*data, M_VALUES)
    per = np.stack([loop_dcg(*data, m) for m in M_VALUES])
    np.testing.assert_allclose(est.value, per.mean(1), rtol=1e-5)
    np.testing.assert_allclose(est.standard_error, per.std(1, ddof=1) / np.sqrt(200), rtol=1e-4)
    assert ope.dcg_sweep(*data, 4.0).value == pytest.approx(per[2].mean(), rel=1e-5)


@pytest.mark.parametrize("k", [40, 70])           # unrolled and looped ranks; several blocks and a tail
def test_dcg_sweep_over_many_blocks_matches_float64(k):
    rewards, logging, target, viewed = random_log(11, n=20_003, k=k)
    m = np.array([1.0, 3.0, np.inf])
    gain = np.where(viewed, rewards.astype(np.float64) * target, 0.0)
    inverse = np.where(viewed, 1.0 / np.where(viewed, logging, 1.0), 0.0)
    per = np.stack([(gain * np.minimum(mj, inverse)).sum(1) for mj in m])
    est = ope.dcg_sweep(rewards, logging, target, viewed, m)
    np.testing.assert_allclose(est.value, per.mean(1), rtol=1e-5)
    np.testing.assert_allclose(est.standard_error, per.std(1, ddof=1) / np.sqrt(per.shape[1]), rtol=1e-4)


@pytest.mark.parametrize("ideal", ["same discount", "all viewed"])
def test_ideal_and_ndcg_match_loop(ideal):
    rewards, logging, target, viewed = random_log(1, n=200)
    discount = np.array([1.0, 0.7, 0.5, 0.2], np.float32)          # shorter than K: zero beyond
    for m in (2.0, np.inf):
        idcg = loop_ideal(rewards, logging, viewed, discount, m, ideal == "all viewed")
        np.testing.assert_allclose(ope.ideal_dcg(rewards, logging, viewed, discount, m, ideal=ideal), idcg,
                                   rtol=1e-5, atol=1e-6)
        dcg = loop_dcg(rewards, logging, target, viewed, m)
        for zero_ideal, fill in (("zero", 0.0), ("skip", np.nan)):
            got = np.asarray(ope.trajectory_ndcg(rewards, logging, target, viewed, discount, m, ideal=ideal,
                                                 zero_ideal=zero_ideal))
            want = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1), fill)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.any(idcg == 0)                                          # the convention was exercised


def test_post_and_self_normalised_definitions():
    rewards, logging, target, viewed = random_log(2, n=200)
    discount = np.array([1.0, 0.6, 0.5], np.float32)
    dcg = loop_dcg(rewards, logging, target, viewed, 5.0)
    idcg = loop_ideal(rewards, logging, viewed, discount, 5.0, False)
    pn = ope.post_normalised_dcg(rewards, logging, target, viewed, discount, 5.0)
    assert pn.value == pytest.approx(dcg.mean() / idcg.mean(), rel=1e-5)
    views = loop_dcg(np.ones_like(rewards), logging, target, viewed, 5.0)
    sn = ope.self_normalised_dcg(rewards, logging, target, viewed, 5.0)
    assert sn.value == pytest.approx(dcg.mean() / views.mean() * viewed.sum(1).mean(), rel=1e-5)
    sn3 = ope.self_normalised_dcg(rewards, logging, target, viewed, [5.0, np.inf], target_views=3.0)
    assert sn3.value[0] == pytest.approx(3.0 * dcg.mean() / views.mean(), rel=1e-5)
    # delta-method standard error against a direct bootstrap-free check: the ratio of a constant
    assert pn.standard_error > 0 and np.all(sn3.standard_error > 0)


def test_mean_estimate_skips_nan():
    est = ope.mean_estimate(np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]]))
    np.testing.assert_allclose(est.value, [2.0, 2.0])
    np.testing.assert_allclose(est.standard_error, [np.sqrt(2) / np.sqrt(2), 1 / np.sqrt(3)])


@pytest.mark.parametrize("call", [
    lambda d: ope.trajectory_dcg(*d, m=0.5),
    lambda d: ope.trajectory_dcg(*d, m=[2.0, np.nan]),
    lambda d: ope.trajectory_dcg(d[0][:, :3], *d[1:]),
    lambda d: ope.trajectory_dcg(d[0], d[1], d[2], d[3].astype(np.float32)),
    lambda d: ope.trajectory_dcg(np.where(d[3], np.nan, d[0]), *d[1:]),
    lambda d: ope.trajectory_dcg(d[0], d[1], d[2] + 1.5, d[3]),
    lambda d: ope.trajectory_dcg(d[0], np.where(d[3], 0.0, d[1]), d[2], d[3]),       # ε₀ = 0 on a view
    lambda d: ope.dcg_sweep(d[0], np.where(d[3], 0.0, d[1]), d[2], d[3], [1.0, np.inf]),
    lambda d: ope.ideal_dcg(d[0], d[1], d[3], [1.0, 0.5], ideal="best"),
    lambda d: ope.trajectory_ndcg(*d, [1.0], zero_ideal="nan"),
    lambda d: ope.mean_estimate(np.array([np.nan, 1.0])),
])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call(random_log(3, n=200))


EMPTY_FEED = [       # K = 0: rewards etc. of shape [N, 0]
    ("trajectory_dcg", lambda d, p, q: ope.trajectory_dcg(*d)),
    ("dcg_sweep", lambda d, p, q: ope.dcg_sweep(*d, [1.0, np.inf])),      # used to be ZeroDivisionError
    ("ideal_dcg", lambda d, p, q: ope.ideal_dcg(d[0], d[1], d[3], [1.0])),  # used to return zeros
    ("trajectory_ndcg", lambda d, p, q: ope.trajectory_ndcg(*d, [1.0])),
    ("post_normalised_dcg", lambda d, p, q: ope.post_normalised_dcg(*d, [1.0])),
    ("self_normalised_dcg", lambda d, p, q: ope.self_normalised_dcg(*d)),
    ("trajectory_dr", lambda d, p, q: ope.trajectory_dr(*d, p, q)),
    ("dr_sweep", lambda d, p, q: ope.dr_sweep(*d, p, q, 1.0)),             # used to be ZeroDivisionError
]


@pytest.mark.parametrize("name, call", EMPTY_FEED, ids=[name for name, _ in EMPTY_FEED])
def test_an_empty_feed_is_a_clear_error_in_every_estimator(name, call):
    """Before: IndexError (index out of bounds) or ZeroDivisionError, or zeros for ideal_dcg."""
    n = 6
    data = (np.zeros((n, 0), np.float32), np.zeros((n, 0), np.float32), np.zeros((n, 0), np.float32),
            np.zeros((n, 0), bool))
    with pytest.raises(ValueError, match=r"have shape \(6, 0\): the feed length K must be >= 1"):
        call(data, np.zeros((n, 0), np.float32), np.zeros(n, np.float32))


@pytest.mark.parametrize("m", [True, np.bool_(True), [True, 4.0], (2.0, False), np.array([True])])
@pytest.mark.parametrize("call", [
    lambda d, m: ope.trajectory_dcg(*d, m=m), lambda d, m: ope.dcg_sweep(*d, m),
    lambda d, m: ope.ideal_dcg(d[0], d[1], d[3], [1.0], m), lambda d, m: ope.trajectory_ndcg(*d, [1.0], m),
    lambda d, m: ope.post_normalised_dcg(*d, [1.0], m), lambda d, m: ope.self_normalised_dcg(*d, m),
    lambda d, m: ope.dr_sweep(*d, np.zeros(d[0].shape, np.float32), np.zeros(len(d[0]), np.float32), m),
])
def test_a_bool_is_not_a_clipping_value(call, m):
    """m=True used to be read as m = 1 (raw labels), silently."""
    with pytest.raises(TypeError, match=r"^m must be a number >= 1 or inf \(or an array of them\), got .*; a "
                                        r"bool is not a number \(True is not 1\)$"):
        call(random_log(3, n=50), m)


def test_clipping_value_messages_name_m_and_the_range():
    data = random_log(3, n=50)
    with pytest.raises(ValueError, match=r"^m must be a number >= 1 or inf \(or an array of them\), got 0\.5$"):
        ope.trajectory_dcg(*data, m=0.5)
    with pytest.raises(ValueError, match=r"m must be a scalar or a non-empty vector of clipping values"):
        ope.trajectory_dcg(*data, m=[])
    with pytest.raises(TypeError, match=r"m must be a number >= 1 or inf .*got '2'"):
        ope.trajectory_dcg(*data, m="2")


def test_exposure_errors_say_what_an_exposure_is():
    rewards, logging, target, viewed = random_log(3, n=50)
    with pytest.raises(ValueError, match=r"^logging_exposure must be finite and in \[0, 1\] \(an exposure is an "
                                         r"item's expected views.*logged_exposures"):
        ope.dcg_sweep(rewards, np.where(viewed, 7.0, logging), target, viewed, 1.0)
    with pytest.raises(ValueError, match=r"^target_exposure must be finite and in \[0, 1\]"):
        ope.trajectory_dcg(rewards, logging, np.full_like(target, np.nan), viewed)


@pytest.mark.parametrize("call, name", [
    (lambda t, ok: ope.support_loss(t, ok), "logging_table"),
    (lambda t, ok: ope.support_loss(ok, t), "target_table"),
    (lambda t, ok: ope.direct_method(ok, t), "target_table"),
])
@pytest.mark.parametrize("bad, found", [(7.0, "7.0"), (np.nan, "nan"), (-0.5, "-0.5")])
def test_exposure_tables_are_checked_where_they_enter(call, name, bad, found):
    """Out-of-range or NaN exposure tables used to give a number (NaN, or support lost > 1)."""
    ok = np.full((3, 4), 0.5, np.float32)
    table = ok.copy()
    table[2, 1] = bad
    with pytest.raises(ValueError, match=rf"^{name} must hold exposures in \[0, 1\] .*found {found} at index "
                                         r"\(2, 1\); pass an exposure table"):
        call(table, ok)

# --------------------------------------------------------------------------------------------
# Monte Carlo: unbiasedness, clipping bias, violations
# --------------------------------------------------------------------------------------------

X, A, K, N = 16, 24, 5, 60_000
RNG = np.random.default_rng(10)
Q = np.stack([RNG.uniform(0, 0.5, (X, A)), RNG.uniform(0, 0.9, (X, A))]).astype(np.float32)
ACTIVITY = RNG.dirichlet(np.full(X, 2.0)).astype(np.float32)
VIEW = feed.Exponential(0.75)
SCENARIO = feed.Scenario(VIEW, (feed.from_table(Q[0]), feed.from_table(Q[1])), ACTIVITY, ("like", "watch"))
LOGGER = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(
    feed.Sort(feed.from_table(RNG.normal(size=(X, A)).astype(np.float32))), 0.5), K)
# epsilon = 0: a deterministic target with the logger's pytree structure (shared compilations)
TARGET = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(
    feed.Sort(feed.from_table(Q[1] + 0.3 * RNG.normal(size=(X, A)).astype(np.float32))), 0.0), K)


def tables(policy, view=VIEW):
    return np.asarray(feed.exposure(None, policy, view, jnp.arange(X)).mean, np.float64)


def z_score(estimate, truth):
    return (np.asarray(estimate.value) - truth) / np.asarray(estimate.standard_error)


@pytest.fixture(scope="module")
def log():
    return feed.simulate(jax.random.key(0), SCENARIO, LOGGER, N)


def test_unclipped_dcg_is_unbiased(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean
    for signal in (0, 1):
        est = ope.off_policy_estimate(None, log, LOGGER, TARGET, VIEW, signal=signal)
        assert abs(z_score(est, truth[signal])) <= 3, (est, truth)
    logger_truth = feed.online_value(None, SCENARIO, LOGGER).mean[1]
    assert abs(truth[1] - logger_truth) > 0.2                  # the target really differs


def test_clipping_bias_matches_closed_form(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    eps0, eps = tables(LOGGER), tables(TARGET)
    m = np.array([1.0, 2.0, 3.0])
    est = ope.off_policy_estimate(None, log, LOGGER, TARGET, VIEW, signal="watch", m=m)
    for j, mj in enumerate(m):
        bias = -np.sum(ACTIVITY[:, None] * Q[1] * eps * np.maximum(1.0 - mj * eps0, 0.0))
        assert bias < -5 * est.standard_error[j]               # the bias is real and visible
        assert abs((est.value[j] - (truth + bias)) / est.standard_error[j]) <= 3


def test_self_normalised_is_consistent(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    users = np.asarray(log.users)
    target = feed.exposure_of(jnp.asarray(tables(TARGET), jnp.float32), log.users, log.items)
    est = ope.self_normalised_dcg(log.rewards[1], log.logging_exposure, target, log.viewed)
    assert abs(z_score(est, truth)) <= 4
    assert users.shape == (N,)


def biased_by(scenario, log_sessions=N, **kw):
    """z-score of the DCG estimate from a log of `scenario` against an A/B test of the target
    in the same scenario (TARGET shares LOGGER's pytree structure: no extra compilation)."""
    log = feed.simulate(jax.random.key(1), scenario, LOGGER, log_sessions, **kw)
    ab = feed.ab_test(jax.random.key(3), scenario, [TARGET], log_sessions, **kw)
    est = ope.off_policy_estimate(None, log, LOGGER, TARGET, VIEW, signal=1)
    return (est.value - ab.mean[0, 1]) / np.hypot(est.standard_error, ab.standard_error[0, 1])


def test_the_ab_test_check_has_power_only_under_violations():
    assert abs(biased_by(SCENARIO)) <= 3                      # all assumptions hold: no bias


@pytest.mark.parametrize("violation", ["cascade", "satiation"])
def test_within_session_violations_bias_the_estimate(violation):
    if violation == "cascade":
        scenario = dataclasses.replace(SCENARIO, view=feed.Cascade(VIEW, 0.9, stop_signal=1))
    else:
        scenario = dataclasses.replace(SCENARIO, satiation=0.9)
    assert abs(biased_by(scenario)) > 5


def test_fatigue_biases_the_estimate():
    scenario = dataclasses.replace(SCENARIO, fatigue=0.05)
    assert abs(biased_by(scenario, 20_000, round_size=1_000)) > 5


def test_support_violation_raises_or_reports_the_lost_mass():
    half = jnp.arange(0, A, 2, dtype=jnp.int32)                # the logger never sees odd items
    logger = feed.Policy(feed.FixedCandidates(half, A), LOGGER.ranker, K)
    log = feed.simulate(jax.random.key(4), SCENARIO, logger, N)
    with pytest.raises(ValueError, match="support"):
        ope.off_policy_estimate(None, log, logger, TARGET, VIEW, signal=1)
    est = ope.off_policy_estimate(None, log, logger, TARGET, VIEW, signal=1, on_support_violation="count")
    eps0, eps = tables(logger), tables(TARGET)
    unseen = eps0 == 0
    counts = np.bincount(np.asarray(log.users), minlength=X) / N
    assert est.lost_exposure == pytest.approx(float(counts @ (eps * unseen).sum(1)), rel=1e-5)
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    lost_reward = np.sum(ACTIVITY[:, None] * Q[1] * eps * unseen)
    assert lost_reward > 5 * est.standard_error
    assert abs(z_score(est, truth - lost_reward)) <= 3


def test_learnt_pbm_variant_recovers_the_truth(log):
    """KDD'24 Table 2's `pbm` discount: exposures under a view model fitted to logged depths."""
    learnt = feed.fit_view_model(log.viewed)
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    est = ope.off_policy_estimate(None, log, LOGGER, TARGET, learnt, signal=1)
    assert abs(z_score(est, truth)) <= 4
    naive = ope.off_policy_estimate(None, log, LOGGER, TARGET, feed.Logarithmic(), signal=1, m=1.0)
    assert abs(z_score(naive, truth)) > 5                     # `log` discount with raw labels: biased


@pytest.mark.parametrize("ideal", ["same discount", "all viewed"])
def test_ideal_of_boolean_rewards_sorts_once_and_matches_loop(ideal):
    rewards, logging, target, viewed = random_log(5, n=300)
    clicks = rewards > 0                                               # bool labels: the one-sort path
    discount = np.array([1.0, 0.7, 0.5, 0.2, 0.1], np.float32)
    got = np.asarray(ope.ideal_dcg(clicks, logging, viewed, discount, M_VALUES, ideal=ideal))
    as_float = np.asarray(ope.ideal_dcg(clicks.astype(np.float32), logging, viewed, discount, M_VALUES, ideal=ideal))
    np.testing.assert_array_equal(got, as_float)                       # bit-identical to the per-m sort
    for row, m in zip(got, M_VALUES):
        np.testing.assert_allclose(row, loop_ideal(clicks, logging, viewed, discount, m, ideal == "all viewed"),
                                   rtol=1e-5, atol=1e-6)


def test_ideal_with_tied_labels_and_every_rank_positive_matches_loop():
    """The ideal takes the largest label first, one per pass: tied labels are each taken once, and a
    row whose every rank holds a positive label takes K passes."""
    rng = np.random.default_rng(11)
    rewards = rng.integers(0, 3, (300, 6)).astype(np.float32)
    rewards[:5] = 2.0                                                  # every rank positive, all tied
    logging = np.where(rng.random((300, 6)) < 0.5, 0.5, 0.25).astype(np.float32)   # tied propensities
    viewed = rng.random((300, 6)) < 0.8
    viewed[:5] = True
    discount = np.array([1.0, 0.8, 0.6, 0.4, 0.2, 0.1], np.float32)
    for m in (1.5, 3.0, np.inf):
        for ideal in ("same discount", "all viewed"):
            np.testing.assert_allclose(ope.ideal_dcg(rewards, logging, viewed, discount, m, ideal=ideal),
                                       loop_ideal(rewards, logging, viewed, discount, m, ideal == "all viewed"),
                                       rtol=1e-5, atol=1e-6)


def test_ndcg_with_a_precomputed_ideal_equals_the_plain_call():
    rewards, logging, target, viewed = random_log(6, n=200)
    clicks, discount = rewards > 0, np.array([1.0, 0.6, 0.3], np.float32)
    idcg = ope.ideal_dcg(clicks, logging, viewed, discount, M_VALUES)
    np.testing.assert_array_equal(ope.trajectory_ndcg(clicks, logging, target, viewed, discount, M_VALUES, idcg=idcg),
                                  ope.trajectory_ndcg(clicks, logging, target, viewed, discount, M_VALUES))
    with pytest.raises(ValueError, match="idcg must be the ideal_dcg"):
        ope.trajectory_ndcg(clicks, logging, target, viewed, discount, M_VALUES, idcg=idcg[0])


# --------------------------------------------------------------------------------------------
# Doubly robust
# --------------------------------------------------------------------------------------------

def loop_dr(rewards, logging, target, viewed, predicted, direct, m):
    out = np.array(direct, np.float64)
    for t in range(rewards.shape[0]):
        for i in range(rewards.shape[1]):
            if viewed[t, i]:
                out[t] += (rewards[t, i] - predicted[t, i]) * min(m, 1.0 / logging[t, i]) * target[t, i]
    return out


def test_dr_matches_loop_and_its_sweep():
    data = random_log(5, n=200)
    rng = np.random.default_rng(6)
    predicted = rng.uniform(0, 1.5, data[0].shape).astype(np.float32)
    direct = rng.uniform(0, 3, 200).astype(np.float32)
    got = np.asarray(ope.trajectory_dr(*data, predicted, direct, M_VALUES))
    per = np.stack([loop_dr(*data, predicted, direct, m) for m in M_VALUES])
    np.testing.assert_allclose(got, per, rtol=1e-5, atol=1e-5)
    est = ope.dr_sweep(*data, predicted, direct, M_VALUES)
    np.testing.assert_allclose(est.value, per.mean(1), rtol=1e-5)
    np.testing.assert_allclose(est.standard_error, per.std(1, ddof=1) / np.sqrt(200), rtol=1e-4)
    assert ope.trajectory_dr(*data, predicted, direct).shape == (200,)


def test_dr_reduces_to_ips_and_to_the_direct_method():
    data = random_log(7, n=200)
    rewards, _, _, viewed = data
    zeros = np.zeros(rewards.shape, np.float32)
    np.testing.assert_array_equal(ope.trajectory_dr(*data, zeros, np.zeros(200, np.float32), M_VALUES),
                                  ope.trajectory_dcg(*data, M_VALUES))                  # q̂ = 0: IPS
    direct = np.random.default_rng(8).uniform(0, 3, 200).astype(np.float32)
    exact = np.where(viewed, rewards, 7.0).astype(np.float32)   # q̂ = observed labels: no residual
    np.testing.assert_allclose(ope.trajectory_dr(*data, exact, direct, M_VALUES),
                               np.broadcast_to(direct, (len(M_VALUES), 200)), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda d, p, q: ope.trajectory_dr(*d, p[:, :3], q),
    lambda d, p, q: ope.trajectory_dr(*d, p, q[:5]),
    lambda d, p, q: ope.trajectory_dr(*d, p, q[:, None]),
    lambda d, p, q: ope.trajectory_dr(*d, np.where(d[3], np.nan, p), q),
    lambda d, p, q: ope.dr_sweep(*d, p, np.full_like(q, np.inf), [1.0, np.inf]),
    lambda d, p, q: ope.dr_sweep(*d, p, q, [0.5]),
    lambda d, p, q: ope.direct_method(np.ones((3, 4)), np.ones((3, 5))),
])
def test_dr_bad_input_raises(call):
    data = random_log(9, n=200)
    with pytest.raises(ValueError):
        call(data, np.zeros(data[0].shape, np.float32), np.zeros(200, np.float32))


WRONG_MODEL = np.clip(0.5 * Q[1] + 0.3 * RNG.uniform(size=(X, A)), 0, 1).astype(np.float32)   # biased q̂


def test_click_rate_model_is_the_smoothed_click_per_view_rate(log):
    users, items, viewed = np.asarray(log.users), np.asarray(log.items), np.asarray(log.viewed)
    clicks = np.asarray(log.rewards[0])
    views, hits = np.zeros(A), np.zeros(A)
    for n in range(0, N, 7):                    # every 7th session: a sub-log, counted by a plain loop
        for k in range(items.shape[1]):
            if viewed[n, k]:
                views[items[n, k]] += 1
                hits[items[n, k]] += clicks[n, k]
    sub = feed.Log(log.users[::7], log.items[::7], log.viewed[::7], log.rewards[:, ::7], log.day[::7],
                   log.logging_exposure[::7], log.signals)
    rate = hits.sum() / views.sum()
    np.testing.assert_allclose(ope.click_rate_model(sub, A, 0, prior_views=3.0), (hits + 3.0 * rate) / (views + 3.0),
                               rtol=1e-12)
    raw = ope.click_rate_model(sub, A + 2, log.signals[0])          # two items never shown: the overall rate
    np.testing.assert_allclose(raw[-2:], rate)
    np.testing.assert_allclose(raw[:A][views > 0], (hits / views)[views > 0], rtol=1e-12)
    assert users.shape == (N,)
    with pytest.raises(ValueError, match="num_items"):
        ope.click_rate_model(sub, 2)
    with pytest.raises(ValueError, match="prior_views"):
        ope.click_rate_model(sub, A, prior_views=-1.0)
    with pytest.raises(ValueError, match="unknown signal"):
        ope.click_rate_model(sub, A, "nope")


def test_dr_is_unbiased_under_a_wrong_reward_model(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    est = ope.doubly_robust_estimate(None, log, LOGGER, TARGET, VIEW, feed.from_table(WRONG_MODEL), signal=1)
    assert abs(z_score(est, truth)) <= 4, (est, truth)
    direct = float(ACTIVITY @ np.sum(WRONG_MODEL * tables(TARGET), axis=1))
    assert abs(direct - truth) > 20 * est.standard_error           # the model alone is far off


def test_dr_with_the_true_model_has_the_direct_methods_mean_and_less_variance(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    dr = ope.doubly_robust_estimate(None, log, LOGGER, TARGET, VIEW, feed.from_table(Q[1]), signal=1)
    ips = ope.off_policy_estimate(None, log, LOGGER, TARGET, VIEW, signal=1)
    direct = float(ACTIVITY @ np.sum(Q[1] * tables(TARGET), axis=1))
    assert direct == pytest.approx(truth, rel=1e-5)                  # DM with q̂ = q is the truth ...
    assert abs(z_score(dr, truth)) <= 4                             # ... and DR's mean
    assert dr.standard_error < ips.standard_error                  # the model explains most variance


def test_dr_clipping_bias_matches_closed_form(log):
    truth = feed.online_value(None, SCENARIO, TARGET).mean[1]
    eps0, eps = tables(LOGGER), tables(TARGET)
    m = np.array([1.0, 2.0])
    est = ope.doubly_robust_estimate(None, log, LOGGER, TARGET, VIEW, feed.from_table(WRONG_MODEL), signal=1, m=m)
    for j, mj in enumerate(m):
        bias = -np.sum(ACTIVITY[:, None] * (Q[1] - WRONG_MODEL) * eps * np.maximum(1.0 - mj * eps0, 0.0))
        assert abs(bias) > 5 * est.standard_error[j]
        assert abs((est.value[j] - (truth + bias)) / est.standard_error[j]) <= 4


# --------------------------------------------------------------------------------------------
# logged_exposures: the one place that reads a policy's exposures of the logged items
# --------------------------------------------------------------------------------------------

def loop_logged_exposures(log, table, contexts):
    """ε(x_τ, a) by a loop over sessions and ranks, with row = contexts.index(x_τ)."""
    users, items = np.asarray(log.users), np.asarray(log.items)
    out = np.zeros(items.shape)
    for t in range(items.shape[0]):
        for i in range(items.shape[1]):
            if items[t, i] >= 0:
                out[t, i] = table[list(contexts).index(users[t]), items[t, i]]
    return out


def small_log(seed=5, n=300):
    """A short log over contexts {2, 5, 11} only (so a table over the log's contexts is not one over all)."""
    scenario = dataclasses.replace(SCENARIO, activity=np.isin(np.arange(X), [2, 5, 11]).astype(np.float32) / 3)
    return feed.simulate(jax.random.key(seed), scenario, LOGGER, n)


def test_logged_exposures_matches_loop_for_all_and_for_the_logs_contexts():
    log = small_log()
    full = tables(TARGET)
    got = ope.logged_exposures(log, full)
    np.testing.assert_allclose(got, loop_logged_exposures(log, full, range(X)), rtol=1e-6)
    assert np.all(np.asarray(got)[~np.asarray(log.viewed)] == 0)
    contexts = np.array([11, 2, 5])                               # any order of distinct ids
    table = feed.exposure(None, TARGET, VIEW, contexts).mean
    np.testing.assert_allclose(ope.logged_exposures(log, table, contexts),
                               loop_logged_exposures(log, np.asarray(table), contexts), rtol=1e-6)
    np.testing.assert_allclose(ope.logged_exposures(log, tables(LOGGER)), log.logging_exposure, rtol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda log: ope.logged_exposures(log, tables(TARGET)[:5]), r"log.users must hold ids in \[0, 5\)"),
    (lambda log: ope.logged_exposures(log, tables(TARGET)[[2, 5]], [2, 5]), "not in contexts"),
    (lambda log: ope.logged_exposures(log, tables(TARGET)[[2, 5, 11]], [2, 5]), "table has 3 row"),
    (lambda log: ope.logged_exposures(log, tables(TARGET)[[2, 2, 5, 11]], [2, 2, 5, 11]), "distinct"),
    (lambda log: ope.logged_exposures(log, tables(TARGET)[:, :3]), "log.items holds item"),
    (lambda log: ope.logged_exposures(log, tables(TARGET)[0]), "table"),
    (lambda log: ope.logged_exposures(log, tables(TARGET) * 3), r"table must hold exposures in \[0, 1\]"),
    (lambda log: ope.logged_exposures(log, np.full((X, A), np.nan)), r"table must hold exposures .*found nan"),
])
def test_logged_exposures_rejects_tables_that_do_not_cover_the_log(call, message):
    with pytest.raises(ValueError, match=message):
        call(small_log())


def test_doubly_robust_rejects_a_reward_table_without_the_logs_contexts():
    """A reward model table with fewer rows than contexts used to be read by a clamped gather."""
    log = small_log()
    with pytest.raises(ValueError, match="reward_model"):
        ope.doubly_robust_estimate(None, log, LOGGER, TARGET, VIEW, feed.from_table(Q[1][:5]))

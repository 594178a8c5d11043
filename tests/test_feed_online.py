"""Online ground truth: exact values against loops, and against simulated A/B tests."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed

X, A, K = 16, 24, 5
RNG = np.random.default_rng(0)
Q_LIKE = RNG.uniform(0, 0.4, (X, A)).astype(np.float32)
Q_WATCH = RNG.uniform(0, 0.9, (X, A)).astype(np.float32)
SCORES = RNG.normal(size=(X, A)).astype(np.float32)
ACTIVITY = RNG.dirichlet(np.ones(X)).astype(np.float32)
VIEW = feed.Exponential(0.8)
SCENARIO = feed.Scenario(VIEW, (feed.from_table(Q_LIKE), feed.from_table(Q_WATCH)), ACTIVITY, ("like", "watch"))
SORT = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(SCORES)), K)


def survival():
    return 0.8 ** np.arange(K, dtype=np.float64)


def loop_value(quality, rankings, weight_of_rank):
    """sum_x activity[x] sum_i weight_of_rank(x, ranking, i) q(x, ranking[i])."""
    total = 0.0
    for x in range(X):
        total += ACTIVITY[x] * sum(weight_of_rank(x, rankings[x], i) * quality[x, rankings[x][i]] for i in range(K))
    return total


def test_deterministic_value_matches_loop():
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    value = feed.online_value(None, SCENARIO, SORT)
    S = survival()
    for s, q in enumerate((Q_LIKE, Q_WATCH)):
        assert value.mean[s] == pytest.approx(loop_value(q, rankings, lambda x, r, i: S[i]), rel=1e-5)
    assert np.all(value.standard_error == 0)


def test_epsilon_greedy_value_matches_closed_form():
    eps = 0.3
    policy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(SCORES)), eps), K)
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    S = survival()
    exploit = loop_value(Q_WATCH, rankings, lambda x, r, i: S[i])
    explore = float(ACTIVITY @ Q_WATCH.mean(1, dtype=np.float64)) * S.sum()
    assert feed.online_value(None, SCENARIO, policy).mean[1] == pytest.approx((1 - eps) * exploit + eps * explore, rel=1e-5)


def test_cascade_and_satiation_value_matches_loop():
    p, beta = 0.6, 0.5
    scenario = dataclasses.replace(SCENARIO, view=feed.Cascade(VIEW, p, stop_signal=1), satiation=beta)
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    S = survival()

    def satiated(q, x, r, i):
        return q[x, r[i]] * np.prod([1 - beta * q[x, r[j]] for j in range(i)])

    def reach(x, r, i):
        return S[i] * np.prod([1 - p * satiated(Q_WATCH, x, r, j) for j in range(i)])

    value = feed.online_value(None, scenario, SORT)
    for s, q in enumerate((Q_LIKE, Q_WATCH)):
        want = sum(ACTIVITY[x] * sum(reach(x, rankings[x], i) * satiated(q, x, rankings[x], i) for i in range(K))
                   for x in range(X))
        assert value.mean[s] == pytest.approx(want, rel=1e-5)


def test_satiation_of_some_contexts_mixes_the_two_values_context_by_context():
    """With ``satiated_contexts`` the marked contexts satiate as in the loop above and the others
    keep the position-based value, exactly; an A/B test of the mixed scenario agrees (4 SE)."""
    beta = 0.5
    marked = np.arange(X) % 3 == 0
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    S = survival()

    def value_of(x, q):
        quality = [q[x, rankings[x][i]] * (np.prod([1 - beta * q[x, rankings[x][j]] for j in range(i)])
                                           if marked[x] else 1.0) for i in range(K)]
        return sum(S[i] * quality[i] for i in range(K))

    scenario = dataclasses.replace(SCENARIO, satiation=beta, satiated_contexts=jnp.asarray(marked))
    value = feed.online_value(None, scenario, SORT)
    for s, q in enumerate((Q_LIKE, Q_WATCH)):
        assert value.mean[s] == pytest.approx(sum(ACTIVITY[x] * value_of(x, q) for x in range(X)), rel=1e-5)
    everyone = feed.online_value(None, dataclasses.replace(scenario, satiated_contexts=jnp.ones(X, bool)), SORT)
    np.testing.assert_allclose(everyone.mean, feed.online_value(None, dataclasses.replace(SCENARIO, satiation=beta),
                                                                SORT).mean, rtol=1e-6)
    ab = feed.ab_test(jax.random.key(5), scenario, [SORT], 40_000)
    assert np.all(np.abs(ab.mean[0] - value.mean) <= 4 * ab.standard_error[0]), (ab.mean[0], value.mean)
    with pytest.raises(ValueError, match="satiated_contexts"):
        dataclasses.replace(scenario, satiated_contexts=jnp.ones(X - 1, bool))
    with pytest.raises(ValueError, match="satiated_contexts must be a bool"):
        dataclasses.replace(scenario, satiated_contexts=np.ones(X, np.float32))


@pytest.mark.parametrize("satiated_by", ["neighbours", "slate"])
def test_satiation_by_the_viewed_items_averages_over_the_depth(satiated_by):
    """Satiated by the viewed neighbours or the viewed slate, the value is Σ_d P(D = d) Σ_{i <= d}
    q̃_d(i) (brute force over the depths, each rank's partners listed), also for an ε-greedy policy
    (its uniform part by Monte Carlo), and an A/B test agrees within 4 SE; a Cascade is refused."""
    beta = 0.6
    scenario = dataclasses.replace(SCENARIO, satiation=beta, satiated_by=satiated_by)
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    S = np.append(survival(), 0.0)

    def value_of(x, q, ranking):
        total = 0.0
        for d in range(1, K + 1):
            for i in range(d):
                partners = [j for j in range(d) if j != i and (satiated_by == "slate" or abs(j - i) == 1)]
                total += (S[d - 1] - S[d]) * q[x, ranking[i]] * np.prod([1 - beta * q[x, ranking[j]] for j in partners])
        return total

    value = feed.online_value(None, scenario, SORT)
    for s, q in enumerate((Q_LIKE, Q_WATCH)):
        assert value.mean[s] == pytest.approx(sum(ACTIVITY[x] * value_of(x, q, rankings[x]) for x in range(X)),
                                              rel=1e-5)
    assert np.all(value.standard_error == 0)
    position_based = feed.online_value(None, SCENARIO, SORT).mean
    assert np.all(value.mean < position_based)
    ab = feed.ab_test(jax.random.key(6), scenario, [SORT], 40_000)
    assert np.all(np.abs(ab.mean[0] - value.mean) <= 4 * ab.standard_error[0]), (ab.mean[0], value.mean)
    greedy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(SCORES)), 0.5), K)
    mixed = feed.online_value(jax.random.key(7), scenario, greedy, num_samples=400)
    ab = feed.ab_test(jax.random.key(8), scenario, [greedy], 40_000)
    assert np.all(np.abs(ab.mean[0] - mixed.mean) <= 4 * np.hypot(ab.standard_error[0], mixed.standard_error))
    with pytest.raises(ValueError, match="satiated_by"):
        dataclasses.replace(scenario, view=feed.Cascade(VIEW, 0.5, stop_signal=1))
    with pytest.raises(ValueError, match="satiated_by"):
        dataclasses.replace(SCENARIO, satiated_by="below")


def test_each_context_satiates_its_own_way():
    """With ``satiated_by="context"`` each context satiates by the items above, its viewed
    neighbours or its viewed slate (and the unmarked ones not at all): the value is the brute force
    over the depths with each context's own partners, equal context by context to the scenario of
    its kind alone, and an A/B test agrees within 4 SE; bad kinds are refused by name."""
    beta = 0.6
    kinds = np.arange(X) % 3                                        # above, neighbours, slate
    marked = np.arange(X) % 4 != 1
    scenario = dataclasses.replace(SCENARIO, satiation=beta, satiated_by="context",
                                   context_satiated_by=jnp.asarray(kinds, jnp.int32),
                                   satiated_contexts=jnp.asarray(marked))
    rankings = np.argsort(-SCORES, axis=1, kind="stable")[:, :K]
    S = np.append(survival(), 0.0)

    def partners(x, i, d):
        if not marked[x]:
            return []
        return [j for j in range(d) if j != i and [j < i, abs(j - i) == 1, True][kinds[x]]]

    def value_of(x, q, ranking):
        return sum((S[d - 1] - S[d]) * q[x, ranking[i]]
                   * np.prod([1 - beta * q[x, ranking[j]] for j in partners(x, i, d)])
                   for d in range(1, K + 1) for i in range(d))

    value = feed.online_value(None, scenario, SORT)
    for s, q in enumerate((Q_LIKE, Q_WATCH)):
        assert value.mean[s] == pytest.approx(sum(ACTIVITY[x] * value_of(x, q, rankings[x]) for x in range(X)),
                                              rel=1e-5)
    ab = feed.ab_test(jax.random.key(9), scenario, [SORT], 40_000)
    assert np.all(np.abs(ab.mean[0] - value.mean) <= 4 * ab.standard_error[0]), (ab.mean[0], value.mean)
    for index, satiated_by in enumerate(feed.SATIATED_BY):          # one kind everywhere = the static kind
        alone = dataclasses.replace(scenario, context_satiated_by=jnp.full(X, index, jnp.int32))
        static = dataclasses.replace(scenario, satiated_by=satiated_by, context_satiated_by=None)
        np.testing.assert_allclose(feed.online_value(None, alone, SORT).mean,
                                   feed.online_value(None, static, SORT).mean, rtol=1e-6)
    with pytest.raises(ValueError, match="context_satiated_by"):
        dataclasses.replace(scenario, context_satiated_by=None)
    with pytest.raises(ValueError, match="context_satiated_by"):
        dataclasses.replace(SCENARIO, context_satiated_by=jnp.zeros(X, jnp.int32))
    with pytest.raises(ValueError, match="context_satiated_by must be an integer"):
        dataclasses.replace(scenario, context_satiated_by=jnp.full(X, 3, jnp.int32))
    with pytest.raises(ValueError, match="context_satiated_by"):
        dataclasses.replace(scenario, context_satiated_by=jnp.zeros(X - 1, jnp.int32))


@pytest.mark.parametrize("case", ["epsilon-greedy", "cascade+satiation", "random-subset"])
def test_online_value_agrees_with_ab_test(case):
    scenario, key = SCENARIO, jax.random.key(1)
    if case == "epsilon-greedy":
        policy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(SCORES)), 0.4), K)
    elif case == "cascade+satiation":
        scenario = dataclasses.replace(SCENARIO, view=feed.Cascade(VIEW, 0.7, stop_signal=0), satiation=0.4)
        policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(SCORES), 0.7), K)
    else:
        policy = feed.Policy(feed.RandomSubset(A, 8), feed.Sort(feed.from_table(SCORES)), K)
    truth = feed.online_value(key, scenario, policy, num_samples=400)
    ab = feed.ab_test(jax.random.key(2), scenario, [policy], 40_000)
    z = np.abs(ab.mean[0] - truth.mean) / np.sqrt(ab.standard_error[0] ** 2 + truth.standard_error ** 2)
    assert np.all(z <= 4), z


def test_ab_test_arms_differ_as_their_values_do():
    best = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(Q_WATCH)), K)
    ab = feed.ab_test(jax.random.key(3), SCENARIO, [SORT, best], 20_000)
    assert ab.mean.shape == (2, 2) and ab.standard_error.shape == (2, 2)
    assert ab.mean[1, 1] - ab.mean[0, 1] > 5 * np.hypot(*ab.standard_error[:, 1])
    assert feed.online_value(None, SCENARIO, best).mean[1] > feed.online_value(None, SCENARIO, SORT).mean[1]


def _bad_quality(params, contexts, items):
    return jnp.full(items.shape, 1.5)


def test_online_value_rejects_fatigue_and_bad_quality():
    with pytest.raises(ValueError, match="ab_test"):
        feed.online_value(None, dataclasses.replace(SCENARIO, fatigue=0.1), SORT)
    bad = dataclasses.replace(SCENARIO, quality=(feed.ItemFn(_bad_quality, None, A), feed.from_table(Q_WATCH)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        feed.online_value(None, bad, SORT)


def test_epsilon_greedy_under_violations_splits_into_exact_and_uniform_parts():
    """V(εG) = (1 - ε) V(Sort) + ε V(uniform): the exploit part is exact, only the explore part is
    sampled, so the standard error is ε times the uniform policy's; checked against an A/B test."""
    eps = 0.3
    scenario = dataclasses.replace(SCENARIO, view=feed.Cascade(VIEW, 0.7, stop_signal=1), satiation=0.4)
    greedy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(SCORES)), eps), K)
    uniform = dataclasses.replace(greedy, ranker=feed.EpsilonGreedy(feed.Sort(feed.from_table(SCORES)), 1.0))
    key = jax.random.key(4)
    value = feed.online_value(key, scenario, greedy, num_samples=200)
    exploit = feed.online_value(None, scenario, SORT)
    explore = feed.online_value(key, scenario, uniform, num_samples=200)
    np.testing.assert_allclose(value.mean, (1 - eps) * exploit.mean + eps * explore.mean, rtol=1e-6)
    np.testing.assert_allclose(value.standard_error, eps * explore.standard_error, rtol=1e-6)
    ab = feed.ab_test(jax.random.key(5), scenario, [greedy], 40_000)
    z = np.abs(ab.mean[0] - value.mean) / np.sqrt(ab.standard_error[0] ** 2 + value.standard_error ** 2)
    assert np.all(z <= 4), z


def test_a_quality_table_with_too_few_rows_is_rejected_where_the_scenario_is_built():
    """A 1-row quality table under a 2-context activity used to be accepted, and context 1 read
    row 0's last entries through JAX's clamped gather (a wrong online value, no error)."""
    rng = np.random.default_rng(4)
    q = rng.uniform(0, 1, (1, 6)).astype(np.float32)
    with pytest.raises(ValueError, match=r"Scenario.quality\['like'\] table has 1 row\(s\) but is indexed by 2"):
        feed.Scenario(VIEW, (feed.from_table(q),), np.array([0.5, 0.5], np.float32), ("like",))
    with pytest.raises(ValueError, match="Scenario.quality"):          # more rows than contexts: a mix-up too
        feed.Scenario(VIEW, (feed.from_table(np.repeat(q, 3, 0)),), np.array([0.5, 0.5], np.float32), ("like",))


def test_online_value_and_ab_test_reject_a_policy_whose_tables_miss_contexts():
    """The value of a policy scored from a table of X - 1 rows used to be computed with the last
    context ranked by a clamped gather; now the policy is checked against the scenario."""
    short = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(SCORES[:-1])), K)
    with pytest.raises(ValueError, match=f"Policy.ranker scores table has {X - 1} row"):
        feed.online_value(None, SCENARIO, short)
    with pytest.raises(ValueError, match="Policy.ranker scores table"):
        feed.ab_test(jax.random.key(0), SCENARIO, [SORT, short], 10)


def test_a_plackett_luce_policy_the_race_covers_has_an_exact_value_without_violations():
    """Without within-session violations a Plackett–Luce policy's value is Σ_x p(x) Σ_a q ε(x, a)
    with its exposure exact by the exponential race: SE 0, no key needed, within 4 SE of a simulated
    A/B arm; under a cascade it stays a Monte Carlo mean."""
    policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(SCORES), 0.7), K)
    assert feed.race_nodes(policy, np.arange(X)) is not None
    value = feed.online_value(None, SCENARIO, policy)
    table = np.asarray(feed.exposure(None, policy, VIEW, np.arange(X)).mean, np.float64)
    expected = [np.asarray(ACTIVITY, np.float64) @ (q * table).sum(1) for q in (Q_LIKE, Q_WATCH)]
    np.testing.assert_allclose(value.mean, expected, rtol=1e-5)
    assert not value.standard_error.any()
    ab = feed.ab_test(jax.random.key(2), SCENARIO, [policy], 40_000)    # simulated sessions agree
    assert np.all(np.abs(ab.mean[0] - value.mean) <= 4 * ab.standard_error[0])
    cascade = dataclasses.replace(SCENARIO, view=feed.Cascade(VIEW, 0.5, stop_signal=0))
    assert feed.online_value(jax.random.key(1), cascade, policy, num_samples=50).standard_error.all()

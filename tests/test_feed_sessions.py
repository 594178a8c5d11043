"""Session simulation: log layout, per-session context, view/reward statistics, violations.

Most tests share one scenario structure, one session count and two policies so that the
simulator compiles only a few times."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed

X, A, K, N = 16, 24, 5, 30_000
VIEW = feed.Exponential(0.8)
SCORES = np.random.default_rng(0).normal(size=(X, A)).astype(np.float32)


def make_scenario(like, watch, view=VIEW, **switches):
    return feed.Scenario(view, (feed.from_table(like), feed.from_table(watch)),
                         np.full(X, 1.0 / X, np.float32), ("like", "watch"), **switches)


def sort_policy(scores=SCORES):
    return feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(scores)), K)


def pl_policy():
    return feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(SCORES), 0.5), K)


@pytest.fixture(scope="module")
def pl_exposure():
    """Any table serves to check that ε₀ is recorded (its correctness is tested elsewhere)."""
    return jnp.asarray(np.random.default_rng(1).uniform(0.1, 1.0, (X, A)), jnp.float32)


def planted_quality():
    """q(x, a) = 1 exactly for a = (7x + 3) mod A, else 0: a reward reveals its session's user."""
    q = np.zeros((X, A), np.float32)
    q[np.arange(X), (7 * np.arange(X) + 3) % A] = 1.0
    return q


@pytest.mark.parametrize("stochastic", [False, True])
def test_rewards_come_from_the_sessions_own_context(stochastic, pl_exposure):
    scenario = make_scenario(planted_quality(), np.full((X, A), 0.5, np.float32))
    if stochastic:
        policy, table = pl_policy(), pl_exposure
    else:   # make every user's planted item visible in their deterministic feed
        s = SCORES.copy()
        s[np.arange(X), (7 * np.arange(X) + 3) % A] = 10.0
        policy, table = sort_policy(s), None
    log = feed.simulate(jax.random.key(1), scenario, policy, N, logging_exposure=table)
    users, items, rewards = (np.asarray(a) for a in (log.users, log.items, log.rewards[0]))
    rewarded_user = np.broadcast_to(users[:, None], items.shape)[rewards]
    assert rewards.sum() > 1000
    np.testing.assert_array_equal(items[rewards], (7 * rewarded_user + 3) % A)


def test_log_layout_and_dtypes(pl_exposure):
    rng = np.random.default_rng(1)
    scenario = make_scenario(rng.uniform(0, 0.3, (X, A)), rng.uniform(0, 0.9, (X, A)))
    log = feed.simulate(jax.random.key(2), scenario, pl_policy(), N, day=3, logging_exposure=pl_exposure)
    assert log.users.dtype == jnp.int32 and log.items.dtype == jnp.int32 and log.day.dtype == jnp.int32
    assert log.rewards.shape == (2, N, K) and log.rewards.dtype == jnp.bool_
    viewed, items = np.asarray(log.viewed), np.asarray(log.items)
    depth = viewed.sum(1)
    np.testing.assert_array_equal(viewed, np.arange(K)[None] < depth[:, None])      # a prefix
    np.testing.assert_array_equal(np.asarray(feed.depth(log)), depth)
    assert np.all(items[~viewed] == -1) and np.all(items[viewed] >= 0)
    assert not np.any(np.asarray(log.rewards)[:, ~viewed])
    assert np.all(np.asarray(log.day) == 3)
    shown = np.sort(np.where(viewed, items, -1 - np.arange(K)[None]), axis=1)          # no repeats
    assert np.all(shown[:, 1:] != shown[:, :-1])
    table, users = np.asarray(pl_exposure), np.asarray(log.users)
    want = np.where(viewed, table[users[:, None], np.maximum(items, 0)], 0.0)
    np.testing.assert_allclose(log.logging_exposure, want, rtol=1e-6)


def test_exact_logging_exposure_is_computed_when_not_given():
    scenario = make_scenario(np.full((X, A), 0.1, np.float32), np.full((X, A), 0.1, np.float32))
    log = feed.simulate(jax.random.key(3), scenario, sort_policy(), N)
    S = np.asarray(feed.view_probability(VIEW, K))
    viewed = np.asarray(log.viewed)
    np.testing.assert_allclose(np.asarray(log.logging_exposure)[viewed],
                               np.broadcast_to(S, viewed.shape)[viewed], rtol=1e-6)


def test_views_and_rewards_follow_the_examination_hypothesis():
    scenario = make_scenario(np.full((X, A), 0.3, np.float32), np.full((X, A), 0.6, np.float32))
    log = feed.simulate(jax.random.key(3), scenario, sort_policy(), N)
    S = np.asarray(feed.view_probability(VIEW, K), np.float64)
    for observed, p in ((np.asarray(log.viewed).mean(0), S), (np.asarray(log.rewards[0]).mean(0), 0.3 * S),
                        (np.asarray(log.rewards[1]).mean(0), 0.6 * S)):
        assert np.all(np.abs(observed - p) <= 4 * np.sqrt(p * (1 - p) / N))


def test_users_follow_activity():
    activity = np.arange(1, X + 1, dtype=np.float64)
    activity /= activity.sum()
    scenario = dataclasses.replace(make_scenario(np.full((X, A), 0.1, np.float32), np.zeros((X, A), np.float32)),
                                   activity=activity.astype(np.float32))
    log = feed.simulate(jax.random.key(4), scenario, sort_policy(), N)
    counts = np.bincount(np.asarray(log.users), minlength=X)
    assert np.all(np.abs(counts / N - activity) <= 4 * np.sqrt(activity * (1 - activity) / N))


def test_same_key_same_log_and_chunking_is_seamless(pl_exposure):
    scenario = make_scenario(np.full((X, A), 0.5, np.float32), np.full((X, A), 0.5, np.float32))
    policy = pl_policy()
    n, chunk = 70_001, 32_768                  # three chunks of the size the other tests compile
    a = feed.simulate(jax.random.key(5), scenario, policy, n, logging_exposure=pl_exposure, chunk_size=chunk)
    b = feed.simulate(jax.random.key(5), scenario, policy, n, logging_exposure=pl_exposure, chunk_size=chunk)
    c = feed.simulate(jax.random.key(6), scenario, policy, n, logging_exposure=pl_exposure, chunk_size=chunk)
    for name in ("users", "items", "viewed", "rewards", "logging_exposure"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.users.shape == (n,) and not np.array_equal(a.items, c.items)
    assert not np.array_equal(a.items[:chunk], a.items[chunk:2 * chunk])   # chunks differ
    both = feed.concatenate([a, c])
    assert both.rewards.shape == (2, 2 * n, K) and both.users.shape == (2 * n,)


def test_cascade_stops_after_the_first_click():
    view = feed.Cascade(feed.Exponential(1.0), 1.0, stop_signal=0)
    scenario = make_scenario(np.full((X, A), 0.4, np.float32), np.full((X, A), 0.9, np.float32), view=view)
    log = feed.simulate(jax.random.key(7), scenario, sort_policy(), N)
    likes, viewed = np.asarray(log.rewards[0]), np.asarray(log.viewed)
    depth = viewed.sum(1)
    clicked = likes.any(1)
    first_click = np.argmax(likes, axis=1) + 1
    np.testing.assert_array_equal(depth[clicked], first_click[clicked])     # stop right after it
    assert np.all(depth[~clicked] == K) and np.all(likes.sum(1) <= 1)
    p = 0.6 ** np.arange(K)                       # P(D >= i) = (1 - 0.4)^(i-1) with certain stops
    assert np.all(np.abs(viewed.mean(0) - p) <= 4 * np.sqrt(p * (1 - p) / N) + 1e-9)


def test_satiated_quality_matches_loop():
    rng = np.random.default_rng(8)
    q = rng.uniform(size=(2, 3, 7)).astype(np.float32)
    q[0, 0, 2] = 1.0
    beta = 1.0
    got = np.asarray(feed.satiated_quality(jnp.asarray(q), beta))
    want = q.astype(np.float64).copy()
    for idx in np.ndindex(q.shape[:-1]):
        for i in range(q.shape[-1]):
            want[idx + (i,)] = q[idx + (i,)] * np.prod(1 - beta * q[idx][:i].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("satiated_by", ["neighbours", "slate"])
def test_satiation_by_viewed_neighbours_or_slate_matches_loop(satiated_by):
    """q̃(i) = q(i) · prod over the viewed ranks j of J(i) (i ± 1, or every j != i) of (1 - β q(j))."""
    rng = np.random.default_rng(9)
    q = rng.uniform(size=(3, 6)).astype(np.float32)
    q[1, 3] = 1.0                                          # β q = 1: its viewed partners drop to 0
    depth = np.array([6, 4, 2])
    viewed = np.arange(6)[None, :] < depth[:, None]
    beta = 1.0 if satiated_by == "slate" else 0.7
    got = np.asarray(feed.satiated_quality(jnp.asarray(q), beta, satiated_by, jnp.asarray(viewed)))
    want = np.zeros(q.shape)
    for b in range(3):
        for i in range(6):
            partners = [j for j in range(depth[b]) if j != i and (satiated_by == "slate" or abs(j - i) == 1)]
            want[b, i] = q[b, i] * np.prod([1 - beta * float(q[b, j]) for j in partners])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="viewed mask"):
        feed.satiated_quality(jnp.asarray(q), beta, satiated_by)


def test_fatigue_carries_state_across_sessions(pl_exposure):
    """φ = 1: an item viewed once by a user never rewards that user again."""
    scenario = make_scenario(np.ones((X, A), np.float32), np.ones((X, A), np.float32), fatigue=1.0)
    log = feed.simulate(jax.random.key(9), scenario, pl_policy(), 3_000, logging_exposure=pl_exposure,
                        round_size=1)
    users, items, rewards = (np.asarray(a) for a in (log.users, log.items, log.rewards[0]))
    pairs = np.stack([np.broadcast_to(users[:, None], items.shape)[rewards], items[rewards]], 1)
    assert len(pairs) == len({tuple(p) for p in pairs.tolist()})           # each (user, item) once
    assert len(pairs) > X * K                                              # and fatigue did bind
    assert len(pairs) < 0.1 * np.asarray(log.viewed).sum()                 # most views go unrewarded


def test_large_catalogue_keeps_int32_ids():
    A_big, X_small = 45_000, 4
    rng = np.random.default_rng(10)
    s = rng.normal(size=(X_small, A_big)).astype(np.float32)
    s[:, 44_321] = 50.0
    q = np.zeros((X_small, A_big), np.float32)
    q[:, 44_321] = 1.0
    scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(q),), np.full(X_small, 0.25, np.float32), ("like",))
    policy = feed.Policy(feed.TopK(feed.from_table(s), 50), feed.Sort(feed.from_table(s)), 5)
    log = feed.simulate(jax.random.key(11), scenario, policy, 2_000)
    assert log.items.dtype == jnp.int32
    items, rewards = np.asarray(log.items), np.asarray(log.rewards[0])
    assert np.all(items[:, 0] == 44_321) and np.all(items[rewards] == 44_321) and rewards.sum() == 2_000


@pytest.mark.parametrize("make", [
    lambda q: feed.Scenario(VIEW, (q,), np.full(X, 0.5 / X, np.float32), ("like",)),
    lambda q: feed.Scenario(VIEW, (q,), np.full(X, 1.0 / X, np.float32), ("like", "watch")),
    lambda q: feed.Scenario(VIEW, (feed.from_table(np.full((X, A), 1.5)),), np.full(X, 1.0 / X, np.float32), ("like",)),
    lambda q: feed.Scenario(feed.Cascade(VIEW, 0.5, 1), (q,), np.full(X, 1.0 / X, np.float32), ("like",)),
    lambda q: feed.Scenario(VIEW, (q,), np.full(X, 1.0 / X, np.float32), ("like",), satiation=1.5),
    lambda q: feed.Scenario(VIEW, (q,), np.full(X, 1.0 / X, np.float32), ("like",), fatigue=-0.1),
    lambda q: feed.simulate(jax.random.key(0), make_scenario(np.zeros((X, A)), np.zeros((X, A))), sort_policy(), 10,
                            logging_exposure=np.zeros((X, 3))),
    lambda q: feed.simulate(jax.random.key(0), make_scenario(np.zeros((X, A)), np.zeros((X, A))), sort_policy(), 0),
    lambda q: feed.simulate(jax.random.key(0), make_scenario(np.zeros((X, A)), np.zeros((X, A))),
                            feed.Policy(feed.all_items(A + 1), feed.Sort(feed.from_table(np.zeros((X, A + 1)))), K), 10),
])
def test_invalid_scenarios_raise(make):
    with pytest.raises(ValueError):
        make(feed.from_table(np.zeros((X, A), np.float32)))


def test_logged_plackett_luce_rankings_follow_the_policy():
    """simulate samples a PL ranking only down to the session's depth (first appearances of
    alias-table draws, completed by Gumbel-top-K); every logged rank must still follow PL."""
    from tests.test_feed_policies import prefix_marginals
    A_, K_, n, T = 12, 3, 100_000, 1.0
    s = np.random.default_rng(12).normal(size=(1, A_)).astype(np.float32)
    scenario = feed.Scenario(feed.Exponential(0.7), (feed.from_table(np.full((1, A_), 0.5, np.float32)),),
                             np.ones(1, np.float32), ("like",))
    policy = feed.Policy(feed.all_items(A_), feed.PlackettLuce(feed.from_table(s), T), K_)
    log = feed.simulate(jax.random.key(13), scenario, policy, n, logging_exposure=np.ones((1, A_), np.float32))
    items, viewed = np.asarray(log.items), np.asarray(log.viewed)
    want = prefix_marginals(s[0].astype(np.float64) / T, K_)
    for i in range(K_):
        rows = viewed[:, i]
        freq = np.bincount(items[rows, i], minlength=A_) / rows.sum()
        assert np.all(np.abs(freq - want[i]) <= 4 * np.sqrt(want[i] * (1 - want[i]) / rows.sum()) + 1e-9)


def test_simulate_rejects_policy_tables_that_do_not_cover_the_contexts():
    """Every lookup table is shape-checked where a policy meets a scenario: a gather past the last
    row would otherwise be clamped silently (the context would be ranked by another's scores)."""
    scenario = make_scenario(np.zeros((X, A)), np.zeros((X, A)))
    for rows in (X - 1, X + 1):
        with pytest.raises(ValueError, match=f"Policy.ranker scores table has {rows} row.*indexed by {X} contexts"):
            feed.simulate(jax.random.key(0), scenario, sort_policy(np.zeros((rows, A), np.float32)), 10)
    with pytest.raises(ValueError, match="exposure_table"):
        next(feed.session_chunks(jax.random.key(0), scenario, sort_policy(), 10, jnp.zeros((X - 1, A))))


def _exposure_table(bad, where=(3, 7)):
    table = np.full((X, A), 0.25, np.float32)
    table[where] = bad
    return table


@pytest.mark.parametrize("bad, found", [(7.0, "7.0"), (np.nan, "nan"), (-0.5, "-0.5"), (1.5, "1.5")])
def test_simulate_rejects_impossible_logging_exposures(bad, found):
    """A table of 7.0 or NaN used to be recorded as the log's ε₀ without a word."""
    scenario = make_scenario(np.zeros((X, A)), np.zeros((X, A)))
    with pytest.raises(ValueError, match=rf"^logging_exposure must hold exposures in \[0, 1\] \(expected views of an "
                                         rf"item.*\), found {found} at index \(3, 7\); pass an exposure table"):
        feed.simulate(jax.random.key(0), scenario, sort_policy(), 10, logging_exposure=_exposure_table(bad))
    with pytest.raises(ValueError, match=rf"^exposure_table must hold exposures in \[0, 1\] .*found {found}"):
        feed.session_chunks(jax.random.key(0), scenario, sort_policy(), 10, _exposure_table(bad))  # at the call


def test_simulate_says_a_scalar_is_not_an_exposure_table():
    scenario = make_scenario(np.zeros((X, A)), np.zeros((X, A)))
    with pytest.raises(ValueError, match=rf"^logging_exposure must be an exposure table of shape {X} x {A} "
                                         r"\(contexts x items, e\.g\. simrec\.feed\.exposure\(\.\.\.\)\.mean\), "
                                         r"got a scalar$"):
        feed.simulate(jax.random.key(0), scenario, sort_policy(), 10, logging_exposure=7.0)


def test_simulate_accepts_zero_and_float32_rounded_exposures():
    """Zero exposure (an item never shown) is legal; so is 1 + float32 rounding."""
    scenario = make_scenario(np.zeros((X, A)), np.zeros((X, A)))
    table = _exposure_table(0.0)
    table[0, 0] = np.nextafter(np.float32(1), np.float32(2))
    log = feed.simulate(jax.random.key(0), scenario, sort_policy(), 10, logging_exposure=table)
    assert log.logging_exposure.shape == (10, K)


@pytest.mark.parametrize("policy", [
    sort_policy(),
    pl_policy(),                                                                    # exact by the race
    feed.Policy(feed.RandomSubset(A, 12), feed.PlackettLuce(feed.from_table(SCORES), 0.5), K),   # Monte Carlo
], ids=["sort", "plackett-luce", "random-subset plackett-luce"])
def test_default_exposure_is_the_logging_exposure_table(policy):
    """simulate's default path records `logging_exposure_table(key, ...)`: the same log as passing
    that table explicitly (the way to reuse it across days)."""
    scenario = make_scenario(np.full((X, A), 0.3, np.float32), np.full((X, A), 0.6, np.float32))
    key = jax.random.key(14)
    table = feed.logging_exposure_table(key, scenario, policy, num_samples=20)
    default = feed.simulate(key, scenario, policy, 2_000, num_samples=20)
    explicit = feed.simulate(key, scenario, policy, 2_000, logging_exposure=table.mean)
    for a, b in zip(jax.tree.leaves(default), jax.tree.leaves(explicit)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    exact = not isinstance(policy.generator, feed.RandomSubset)
    assert np.all(np.asarray(table.standard_error) == 0) == exact
    viewed = np.asarray(default.viewed)
    assert np.all(np.asarray(default.logging_exposure)[viewed] > 0)

"""Position bias from clicks (`simrec.feed.position_bias`): each estimator recovers a planted
examination curve within its standard error, randomisation is unbiased over seeds, the building
blocks match brute-force references, and bad input fails early with a clear message."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed
from simrec.feed import position_bias as pb

# ---- an independent click generator (numpy, not simrec's simulator) ------------------------------

X, A, K, R = 40, 25, 6, 4
THETA = 1.0 / np.log2(np.arange(2, K + 2))                   # planted curve, θ_1 = 1


def _planted_log(seed: int, n: int, rankers: int = R):
    """Sessions of `rankers` fixed random rankings per context (chosen uniformly per session),
    PBM clicks with scroll depth D, P(D >= k) = THETA[k-1], and quality q(x, a) ~ U(0, 0.6)."""
    rng = np.random.default_rng(seed)
    quality = np.random.default_rng(99).uniform(0.0, 0.6, (X, A))
    tables = np.stack([np.stack([rng.permutation(A)[:K] for _ in range(X)]) for _ in range(rankers)])
    contexts = rng.integers(0, X, n)
    rankings = tables[rng.integers(0, rankers, n), contexts]
    depth = np.sum(rng.uniform(size=n)[:, None] < THETA[None, :], axis=1)
    viewed = np.arange(K)[None, :] < depth[:, None]
    clicks = viewed & (rng.uniform(size=(n, K)) < quality[contexts[:, None], rankings])
    return contexts, rankings, clicks


@pytest.fixture(scope="module")
def planted():
    return _planted_log(0, 60_000)


def _within(estimate: pb.CurveEstimate, truth, k: float = 4.0, slack: float = 0.0):
    err = np.abs(estimate.curve - truth)
    assert np.all(np.isfinite(estimate.standard_error[1:])) and np.all(estimate.standard_error[1:] > 0)
    assert np.all(err <= k * estimate.standard_error + slack), (estimate.curve, truth, estimate.standard_error)


def test_regression_em_recovers_the_planted_curve(planted):
    est = pb.regression_em(jax.random.key(1), *planted, num_bootstrap=12)
    assert est.curve[0] == 1.0
    _within(est, THETA, slack=1e-3)                      # 4 bootstrap SE (+ EM's stopping error)


def test_harvesting_recovers_the_planted_curve(planted):
    est = pb.harvesting_curve(jax.random.key(2), *planted, num_bootstrap=12)
    _within(est, THETA)
    ratio = pb.harvesting_curve(jax.random.key(3), *planted, method="ratio", num_bootstrap=12)
    _within(ratio, THETA)


def test_bootstrap_is_deterministic_given_the_key(planted):
    a = pb.harvesting_curve(jax.random.key(5), *planted, method="ratio", num_bootstrap=4)
    b = pb.harvesting_curve(jax.random.key(5), *planted, method="ratio", num_bootstrap=4)
    np.testing.assert_array_equal(a.standard_error, b.standard_error)
    c = pb.harvesting_curve(jax.random.key(6), *planted, method="ratio", num_bootstrap=4)
    assert not np.array_equal(a.standard_error, c.standard_error)
    assert np.all(np.isnan(pb.regression_em(None, *planted, iterations=5).standard_error))


def test_em_matches_a_direct_implementation_of_its_updates():
    """A few EM steps on a tiny log against a per-impression numpy loop (Wang et al., WSDM'18 §4)."""
    contexts, rankings, clicks = _planted_log(4, 300, rankers=3)
    theta, gamma = np.full(K, 0.5), {}
    pairs = {(x, a) for x, row in zip(contexts, rankings) for a in row}
    gamma = {p: 0.5 for p in pairs}
    for _ in range(3):
        e_sum, e_n = np.zeros(K), np.zeros(K)
        r_sum = {p: 0.0 for p in pairs}
        r_n = {p: 0.0 for p in pairs}
        for x, row, click in zip(contexts, rankings, clicks):
            for k, a in enumerate(row):
                t, g = theta[k], gamma[x, a]
                pe = 1.0 if click[k] else t * (1 - g) / (1 - t * g)
                pr = 1.0 if click[k] else (1 - t) * g / (1 - t * g)
                e_sum[k] += pe
                e_n[k] += 1
                r_sum[x, a] += pr
                r_n[x, a] += 1
        theta = e_sum / e_n
        gamma = {p: r_sum[p] / r_n[p] for p in pairs}
    est = pb.regression_em(None, contexts, rankings, clicks, iterations=3)
    np.testing.assert_allclose(est.curve, theta / theta[0], rtol=1e-5)


def test_harvesting_counts_match_a_brute_force_count():
    contexts, rankings, clicks = _planted_log(5, 400, rankers=3)
    shows, hits = {}, {}
    for x, row, click in zip(contexts, rankings, clicks):
        for k, a in enumerate(row):
            shows[x, a, k] = shows.get((x, a, k), 0) + 1
            hits[x, a, k] = hits.get((x, a, k), 0) + int(click[k])
    ranks = {}
    for x, a, k in shows:
        ranks.setdefault((x, a), set()).add(k)
    clicked, missed = np.zeros((K, K)), np.zeros((K, K))
    for (x, a), at in ranks.items():
        for k, k2 in itertools.permutations(at, 2):
            rate = hits[x, a, k] / shows[x, a, k]
            clicked[k, k2] += rate
            missed[k, k2] += 1 - rate
    got_c, got_m = pb.harvesting_counts(contexts, rankings, clicks)
    np.testing.assert_allclose(got_c, clicked, atol=1e-9)
    np.testing.assert_allclose(got_m, missed, atol=1e-9)


def test_all_pairs_is_exact_on_noise_free_counts():
    """With ĉ_k^{k,k'} = θ_k r_kk' |S| exactly, AllPairs' maximum is the planted θ."""
    rng = np.random.default_rng(0)
    r = rng.uniform(0.1, 0.5, (K, K))
    r = (r + r.T) / 2
    size = rng.integers(5, 50, (K, K)).astype(float)
    size = size + size.T
    clicked = THETA[:, None] * r * size
    missed = size - clicked
    np.fill_diagonal(clicked, 0)
    np.fill_diagonal(missed, 0)
    np.testing.assert_allclose(pb._all_pairs(clicked, missed), THETA, rtol=2e-3)   # float32 L-BFGS
    np.testing.assert_allclose(pb._ratio(clicked), THETA, rtol=1e-12)


# ---- randomisation, with simrec's own simulator ------------------------------------------------

XS, AS, KS = 30, 20, 8
RNG = np.random.default_rng(7)
QUALITY = RNG.uniform(0.05, 0.7, (XS, AS)).astype(np.float32)
SCENARIO = feed.Scenario(feed.Exponential(jnp.float32(0.8)), (feed.from_table(QUALITY),),
                         RNG.dirichlet(np.ones(XS)).astype(np.float32), ("click",))
BASE = feed.Policy(feed.all_items(AS), feed.Sort(feed.from_table(QUALITY)), KS)
TRUE = np.asarray(feed.view_probability(SCENARIO.view, KS), np.float64)


def test_randomised_top_permutes_the_base_feed_with_uniform_exposure():
    policy = pb.randomised_top(BASE, XS)
    assert feed.is_exact(policy) and policy.feed_length == KS
    shown = np.asarray(feed.sample_ranking(None, BASE, jnp.arange(XS, dtype=jnp.int32)))
    drawn = np.asarray(feed.sample_ranking(jax.random.key(0), policy, jnp.arange(XS, dtype=jnp.int32)))
    assert (np.sort(drawn, 1) == np.sort(shown, 1)).all()
    table = np.asarray(feed.exposure(None, policy, SCENARIO.view, np.arange(XS)).mean)
    expected = np.zeros((XS, AS))
    expected[np.arange(XS)[:, None], shown] = TRUE.sum() / KS
    np.testing.assert_allclose(table, expected, rtol=1e-6)
    eps = feed.Policy(BASE.generator, feed.EpsilonGreedy(BASE.ranker, jnp.float32(0.1)), KS)
    assert (np.asarray(pb.randomised_top(eps, XS).generator.items) == shown).all()


def test_randomisation_recovers_the_simulators_curve_and_is_unbiased():
    policy = pb.randomised_top(BASE, XS)
    estimates, errors = [], []
    for seed in range(8):
        log = feed.simulate(jax.random.key(seed), SCENARIO, policy, 20_000)
        est = pb.randomisation_curve(log.rewards[0])
        if seed == 0:
            _within(est, TRUE)
        estimates.append(est.curve)
        errors.append(est.standard_error)
    estimates = np.array(estimates)
    spread = estimates.std(axis=0, ddof=1)
    mean_se = np.mean(errors, axis=0)
    # unbiased: the mean over 8 seeds is within 4 SE of the mean (ratio bias O(1/N) is far below)
    assert np.all(np.abs(estimates.mean(0) - TRUE) <= 4 * mean_se / np.sqrt(len(estimates)) + 1e-9)
    # the delta-method SE matches the spread over seeds (8 seeds: chi-square bounds, generous)
    assert np.all((spread[1:] > 0.4 * mean_se[1:]) & (spread[1:] < 1.9 * mean_se[1:]))


def test_randomisation_matches_a_direct_ratio_and_needs_rank_one_clicks():
    clicks = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]], bool)
    est = pb.randomisation_curve(clicks)
    np.testing.assert_allclose(est.curve, [1.0, 2 / 3, 1 / 3])
    c = clicks.astype(float)                            # delta method, written out per session
    residual = c - est.curve[None, :] * c[:, :1]
    np.testing.assert_allclose(est.standard_error, residual.std(0, ddof=1) / (2 * c[:, 0].mean()), atol=1e-12)
    with pytest.raises(ValueError, match="no click at rank 1"):
        pb.randomisation_curve(np.array([[0, 1], [0, 0]], bool))


def test_click_log_restores_the_rankings_of_a_deterministic_logger():
    log = feed.simulate(jax.random.key(3), SCENARIO, BASE, 500)
    clicks = pb.click_log(log, BASE, "click")
    viewed = np.asarray(log.viewed)
    assert (clicks.rankings >= 0).all()
    assert (np.where(viewed, clicks.rankings, -1) == np.asarray(log.items)).all()
    assert (clicks.clicks == np.asarray(log.rewards[0])).all()
    eps = feed.Policy(BASE.generator, feed.EpsilonGreedy(BASE.ranker, jnp.float32(0.1)), KS)
    with pytest.raises(ValueError, match="deterministic policy"):
        pb.click_log(log, eps)
    other = feed.Policy(BASE.generator, feed.Sort(feed.from_table(-QUALITY)), KS)
    with pytest.raises(ValueError, match="differ from the log"):
        pb.click_log(log, other)


def test_curve_view_model_projects_onto_non_increasing_curves():
    model = pb.curve_view_model([1.3, 0.6, 0.7, np.nan, 0.2, -0.1])
    s = np.asarray(model.survival, np.float64)
    np.testing.assert_allclose(s, [1.0, 2 / 3, 2 / 3, 2 / 3, 0.2, 1e-6], rtol=1e-6)   # pools 0.6, 0.7, 0.7
    # equals the brute-force least-squares non-increasing fit over a fine grid on 3 free values
    values = np.array([0.5, 0.8, 0.3])
    grid = np.linspace(0, 1, 101)
    best = min((np.sum((np.array(c) - values) ** 2), c) for c in itertools.product(grid, repeat=3)
               if c[0] >= c[1] >= c[2])[1]
    got = np.asarray(pb.curve_view_model(np.concatenate([[1.0], values])).survival)[1:]
    np.testing.assert_allclose(got, best, atol=0.006)


@pytest.mark.parametrize("call, message", [
    (lambda: pb.randomisation_curve(np.ones((3, 2))), "bool"),
    (lambda: pb.regression_em(None, np.zeros(2, int), np.array([[0, 1], [1, -1]]), np.zeros((2, 2), bool)),
     "negative item id"),
    (lambda: pb.regression_em(None, np.zeros(2, int), np.array([[0, 0], [1, 2]]), np.zeros((2, 2), bool)),
     "distinct items"),
    (lambda: pb.regression_em(None, np.zeros(3, int), np.array([[0, 1], [1, 2]]), np.zeros((2, 2), bool)),
     "contexts must be"),
    (lambda: pb.regression_em(None, np.zeros(2, int), np.array([[0, 1]]), np.zeros((2, 2), bool)),
     "rankings must be"),
    (lambda: pb.regression_em(None, np.zeros(2, int), np.array([[0, 1], [1, 2]]), np.zeros((2, 2), bool),
                              num_bootstrap=5), "PRNG key"),
    (lambda: pb.regression_em(None, np.zeros(2, int), np.array([[0, 1], [1, 2]]), np.zeros((2, 2), bool),
                              relevance="user"), "relevance"),
    (lambda: pb.harvesting_curve(None, np.zeros(2, int), np.array([[0, 1], [2, 3]]), np.ones((2, 2), bool)),
     "no \\(context, item\\) pair"),
    (lambda: pb.harvesting_curve(jax.random.key(0), np.zeros(2, int), np.array([[0, 1], [1, 0]]),
                                 np.ones((2, 2), bool), num_bootstrap=1), "num_bootstrap"),
    (lambda: pb.curve_view_model([np.nan, 0.5]), "value at rank 1"),
    (lambda: pb.randomised_top(feed.Policy(feed.all_items(AS), feed.PlackettLuce(feed.from_table(QUALITY), 1.0),
                                           KS), XS), "deterministic policy"),
])
def test_bad_input_raises_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()

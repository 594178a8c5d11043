"""Procedural worlds: block functions vs the materialised world, block independence, the
generator's laws against make_world's, the missing-data samplers, metrics and feed plumbing,
a platform-sized world, and input errors.

Worlds and id blocks reuse a few shapes so that each jitted function compiles only a few times."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from simrec import feed, metrics, missing
from simrec import procedural as P
from simrec import world as W

TINY = W.PRESETS["tiny"]                                         # 60 users x 40 items
# movielens' generator parameters on a smaller catalogue: the statistics world
STATS = dataclasses.replace(W.PRESETS["movielens"], n_users=3000, n_items=1500)


@pytest.fixture(scope="module")
def tiny():
    pw = P.make_procedural(jax.random.key(0), "tiny")
    return pw, P.materialise(pw)


@pytest.fixture(scope="module")
def stats_worlds():
    """(procedural world, its quality f64[U, I], a make_world world of the same config, its
    quality f64[U, I])."""
    pw = P.make_procedural(jax.random.key(11), STATS)
    q_proc = np.asarray(P.quality(pw, np.arange(STATS.n_users)), np.float64)
    mw = W.make_world(jax.random.key(12), STATS)
    q_mat = np.asarray(W.quality(mw, np.arange(STATS.n_users)), np.float64)
    return pw, q_proc, mw, q_mat


# --------------------------------------------------------------------------------------------
# Exactness: materialise and block functions
# --------------------------------------------------------------------------------------------

def test_materialise_holds_exactly_the_block_functions_numbers(tiny):
    pw, world = tiny
    users = np.array([59, 0, 17, 17, 3], np.int32)
    items = np.array([[39, 1], [0, 22]], np.int32)                    # any id shape
    np.testing.assert_array_equal(P.user_factors(pw, users), world.user_factors[users])
    np.testing.assert_array_equal(P.item_factors(pw, items), world.item_factors[items])
    np.testing.assert_array_equal(P.item_bias(pw, items), world.item_bias[items])
    np.testing.assert_array_equal(P.user_log_activity(pw, users), world.user_log_activity[users])
    assert float(world.affinity_scale) == TINY.affinity_scale
    assert float(world.offset) == np.float32(TINY.offset)
    assert (world.n_users, world.n_items, world.user_factors.shape[1]) == (60, 40, TINY.dim)


def test_block_quality_is_formula_one_of_the_materialised_world(tiny):
    pw, world = tiny
    users = np.arange(60, dtype=np.int32)
    x = np.asarray(world.user_factors, np.float64)
    y = np.asarray(world.item_factors, np.float64)
    reference = TINY.affinity_scale * x @ y.T + np.asarray(world.item_bias, np.float64) + TINY.offset
    np.testing.assert_allclose(P.quality_logit(pw, users), reference, rtol=0, atol=2e-5)
    np.testing.assert_allclose(P.quality(pw, users), 1 / (1 + np.exp(-reference)), rtol=0, atol=1e-6)
    np.testing.assert_allclose(P.quality(pw, users), W.quality(world, users), rtol=0, atol=1e-6)
    some = np.array([5, 39, 0], np.int32)
    np.testing.assert_array_equal(P.quality(pw, users, some), P.quality(pw, users)[:, some])
    pair_users, pair_items = np.array([3, 3, 59], np.int32), np.array([0, 39, 7], np.int32)
    np.testing.assert_allclose(P.quality_pairs(pw, pair_users, pair_items),
                               W.quality_pairs(world, pair_users, pair_items), rtol=0, atol=1e-6)


def test_blocks_are_bit_identical_whatever_their_size_and_order(tiny):
    pw, _ = tiny
    full = np.asarray(P.quality_logit(pw, np.arange(60)))
    order = np.random.default_rng(0).permutation(60).astype(np.int32)
    for size in (7, 60):
        for start in range(0, 60, size):
            block = order[start:start + size]
            np.testing.assert_array_equal(P.quality_logit(pw, block), full[block])
    reversed_items = np.arange(39, -1, -1, dtype=np.int32)
    np.testing.assert_array_equal(P.quality_logit(pw, order[:7], reversed_items),
                                  full[order[:7]][:, reversed_items])
    # the pair function (the feed's) agrees with the block function up to float32 rounding
    # (inside another jit XLA may fuse the same formula differently: a few ulp, not bit-identical)
    items = np.tile(np.arange(40, dtype=np.int32), (7, 1))
    np.testing.assert_allclose(P.quality_pairs(pw, order[:7], np.arange(7, dtype=np.int32)),
                               np.asarray(P.quality(pw, order[:7]))[np.arange(7), np.arange(7)],
                               rtol=0, atol=1e-6)
    np.testing.assert_allclose(feed.item_values(feed.world_quality(pw), jnp.asarray(order[:7]), items),
                               P.quality(pw, order[:7]), rtol=0, atol=1e-6)


def test_same_key_same_world_other_key_other_world(tiny):
    pw, world = tiny
    again = P.materialise(P.make_procedural(jax.random.key(0), TINY))
    other = P.materialise(P.make_procedural(jax.random.key(1), TINY))
    for a, b in zip(jax.tree.leaves(world), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(world.user_factors, other.user_factors)
    assert not np.array_equal(world.item_bias, other.item_bias)


# --------------------------------------------------------------------------------------------
# The generator's laws, against make_world's
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_items", [1, 40, 4097])
def test_popularity_is_an_exact_permutation_so_item_biases_are_make_worlds(n_items):
    """make_world's biases are -a (log r - mean log r) over r = a permutation of 1..I, so their
    multiset is fixed: the procedural world must reproduce it exactly (float64 reference)."""
    config = dataclasses.replace(TINY, n_items=n_items, popularity_exponent=0.8)
    pw = P.make_procedural(jax.random.key(3), config)
    ranks = np.asarray(P.popularity_rank(pw, np.arange(n_items)))
    np.testing.assert_array_equal(np.sort(ranks), np.arange(1, n_items + 1))
    log_rank = np.log(np.arange(1, n_items + 1, dtype=np.float64))
    reference = -0.8 * (log_rank - log_rank.mean())                      # ascending in rank
    np.testing.assert_allclose(np.asarray(P.item_bias(pw, np.arange(n_items)), np.float64),
                               reference[ranks - 1], rtol=0, atol=2e-6)
    if n_items > 1:                # ranks are scrambled, not the identity
        assert not np.array_equal(ranks, np.arange(1, n_items + 1))


def test_item_biases_match_make_world_as_a_multiset(stats_worlds):
    pw, _, mw, _ = stats_worlds
    proc = np.sort(np.asarray(P.item_bias(pw, np.arange(STATS.n_items))))
    np.testing.assert_allclose(proc, np.sort(np.asarray(mw.item_bias)), rtol=0, atol=2e-6)


def _check_normal(sample: np.ndarray, sd: float, what: str) -> None:
    """Mean 0 and variance sd^2 within 4 standard errors (SE of the variance of n normals:
    sd^2 sqrt(2 / (n - 1)))."""
    n = sample.size
    assert abs(sample.mean()) <= 4 * sd / np.sqrt(n), what
    assert abs(sample.var(ddof=1) - sd**2) <= 4 * sd**2 * np.sqrt(2 / (n - 1)), what


def test_factors_and_activity_follow_the_laws_of_make_world(stats_worlds):
    pw, _, mw, _ = stats_worlds
    factor_sd = STATS.dim ** -0.25
    proc_user = np.asarray(P.user_factors(pw, np.arange(STATS.n_users)), np.float64)
    proc_item = np.asarray(P.item_factors(pw, np.arange(STATS.n_items)), np.float64)
    proc_activity = np.asarray(P.user_log_activity(pw, np.arange(STATS.n_users)), np.float64)
    for (proc, mat, sd, what) in [
            (proc_user, mw.user_factors, factor_sd, "user factors"),
            (proc_item, mw.item_factors, factor_sd, "item factors"),
            (proc_activity, mw.user_log_activity, STATS.activity_scale, "user activity")]:
        mat = np.asarray(mat, np.float64)
        _check_normal(proc, sd, what)
        _check_normal(mat, sd, what + " (make_world, the control)")
        # the same law as make_world's draw: two-sample Kolmogorov-Smirnov, fixed seeds
        assert scipy.stats.ks_2samp(proc.ravel(), mat.ravel()).pvalue > 1e-3, what
    # dimensions and users uncorrelated: |r| within 4 SE (1/sqrt(n)) of 0
    corr = np.corrcoef(proc_user.T)[np.triu_indices(STATS.dim, 1)]
    assert np.all(np.abs(corr) <= 4 / np.sqrt(STATS.n_users))
    lag = np.corrcoef(proc_user[:-1, 0], proc_user[1:, 0])[0, 1]        # neighbouring ids
    assert abs(lag) <= 4 / np.sqrt(STATS.n_users)


def _crossed_se(q: np.ndarray) -> float:
    """SE of the grand mean of a users x items array with crossed random user and item effects:
    sqrt(Var(row means) / U + Var(column means) / I) (the interaction term, O(1 / UI), is
    dominated)."""
    return float(np.sqrt(q.mean(axis=1).var(ddof=1) / q.shape[0]
                         + q.mean(axis=0).var(ddof=1) / q.shape[1]))


def test_mean_quality_and_prior_density_match_make_world(stats_worlds):
    pw, q_proc, mw, q_mat = stats_worlds
    se = np.hypot(_crossed_se(q_proc), _crossed_se(q_mat))
    assert abs(q_proc.mean() - q_mat.mean()) <= 4 * se
    # popularity: the law of the items' expected fan shares (column means of q), two-sample KS
    assert scipy.stats.ks_2samp(q_proc.mean(axis=0), q_mat.mean(axis=0)).pvalue > 1e-3
    # share of prior-relevant pairs: Bernoulli noise on top of the worlds' crossed noise
    n_pairs = q_proc.size
    proc_share = P.prior_relevant(jax.random.key(5), pw, block_size=1000).nnz / n_pairs
    mat_share = missing.prior_relevant(jax.random.key(6), mw, block_size=1000).nnz / n_pairs
    bernoulli = [np.sqrt((q * (1 - q)).sum()) / n_pairs for q in (q_proc, q_mat)]
    total_se = np.sqrt(se**2 + bernoulli[0]**2 + bernoulli[1]**2)
    assert abs(proc_share - mat_share) <= 4 * total_se
    assert abs(proc_share - q_proc.mean()) <= 4 * bernoulli[0]     # P+ is Bernoulli(q) given q


# --------------------------------------------------------------------------------------------
# Missing-data samplers
# --------------------------------------------------------------------------------------------

def test_prior_relevant_equals_simrec_missing_on_the_materialised_world(tiny):
    pw, world = tiny
    key = jax.random.key(7)
    for model in ("bernoulli", "threshold"):
        proc = P.prior_relevant(key, pw, model=model, threshold=0.3, block_size=16)
        mat = missing.prior_relevant(key, world, model=model, threshold=0.3)
        assert proc.nnz > 0 and (proc != mat).nnz == 0, model
    # a user's set does not depend on the block it is drawn in
    full = P.prior_relevant(key, pw).toarray()
    users = np.array([41, 2, 59, 2], np.int32)
    np.testing.assert_array_equal(P.prior_relevant_block(key, pw, users), full[users])
    np.testing.assert_array_equal(P.prior_relevant(key, pw, users, block_size=3).toarray(), full[users])


def test_observe_srs_block_sizes_subsets_and_block_independence(stats_worlds):
    pw = stats_worlds[0]
    users = np.arange(1000, dtype=np.int32)
    prior = P.prior_relevant_block(jax.random.key(8), pw, users)
    key, rate = jax.random.key(9), 0.3
    observed = np.asarray(P.observe_srs_block(key, users, prior, rate))
    prior = np.asarray(prior)
    assert not np.any(observed & ~prior)                                       # O+ ⊆ P+
    n = prior.sum(axis=1)
    expected_size = np.where(n >= 1, np.maximum(np.floor(rate * n + 0.5 + 1e-9), 1), 0)
    np.testing.assert_array_equal(observed.sum(axis=1), expected_size)
    # block independence: rows 500.. drawn alone, in reverse order
    tail = users[500:][::-1]
    np.testing.assert_array_equal(P.observe_srs_block(key, tail, prior[tail], rate), observed[tail])
    # uniformity: each P+ item is kept with probability size/n; entries in the lower half of
    # each user's P+ (by item id) are kept as often as that predicts (4 SE, SE <= binomial)
    rows, cols = np.nonzero(prior)
    rank_in_row = np.arange(len(rows)) - np.searchsorted(rows, rows)
    lower = rank_in_row < n[rows] / 2
    p = (expected_size / np.maximum(n, 1))[rows][lower]
    kept = observed[rows, cols][lower]
    assert p.sum() > 200
    assert abs(kept.sum() - p.sum()) <= 4 * np.sqrt((p * (1 - p)).sum())


def test_observe_mnar_quality_block(stats_worlds):
    pw = stats_worlds[0]
    users = np.arange(1000, dtype=np.int32)
    prior = P.prior_relevant_block(jax.random.key(8), pw, users)
    key = jax.random.key(10)
    srs = np.asarray(P.observe_srs_block(key, users, prior, 0.3))
    np.testing.assert_array_equal(P.observe_mnar_quality_block(key, pw, users, prior, 0.3, 0.0), srs)
    biased = np.asarray(P.observe_mnar_quality_block(key, pw, users, prior, 0.3, 4.0))
    np.testing.assert_array_equal(biased.sum(axis=1), srs.sum(axis=1))
    assert not np.any(biased & ~np.asarray(prior))
    q = np.asarray(P.quality(pw, users), np.float64)
    # favouring high quality: the mean q of the observed pairs rises (by far more than 4 SE)
    diff = q[biased].mean() - q[srs].mean()
    se = np.hypot(q[biased].std(), q[srs].std()) / np.sqrt(srs.sum())
    assert diff > 4 * se


# --------------------------------------------------------------------------------------------
# Plumbing into metrics and the feed
# --------------------------------------------------------------------------------------------

def test_score_function_feeds_simrec_metrics(tiny):
    pw, world = tiny
    relevant = P.prior_relevant(jax.random.key(7), pw)
    score = P.score_function(pw)
    users = np.arange(5, 12)
    np.testing.assert_array_equal(score(users), P.quality_logit(pw, users))
    np.testing.assert_array_equal(P.score_function(pw, logit=False)(users), P.quality(pw, users))
    wanted = ("ndcg", "auc", "recall@5")
    proc = metrics.evaluate(score, relevant, metrics=wanted, block_size=16)
    mat = metrics.evaluate(np.asarray(W.quality_logit(world, np.arange(60))), relevant, metrics=wanted)
    for name in wanted:
        np.testing.assert_allclose(proc[name], mat[name], rtol=1e-12)
        assert np.isfinite(proc[name]).sum() > 40


def test_world_quality_drives_the_feed_like_the_materialised_table(tiny):
    pw, world = tiny
    table = np.asarray(W.quality(world, np.arange(60)))
    activity = np.full(60, 1 / 60, np.float32)
    scores = feed.from_table(np.random.default_rng(1).normal(size=(60, 40)).astype(np.float32))
    policy = feed.Policy(feed.all_items(40), feed.Sort(scores), 5)
    logs = [feed.simulate(jax.random.key(2),
                          feed.Scenario(feed.Exponential(0.8), (quality,), activity, ("click",)),
                          policy, 2000)
            for quality in (feed.world_quality(pw), feed.from_table(table))]
    assert int(logs[0].rewards.sum()) > 100
    for a, b in zip(jax.tree.leaves(logs[0]), jax.tree.leaves(logs[1])):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------
# Size and errors
# --------------------------------------------------------------------------------------------

def test_platform_sized_world_scores_a_block_without_users_times_items():
    config = W.WorldConfig(n_users=10**7, n_items=10**6)
    pw = P.make_procedural(jax.random.key(0), config)
    users = np.linspace(0, 10**7 - 1, 256).astype(np.int32)
    items = np.linspace(0, 10**6 - 1, 1000).astype(np.int32)
    q = np.asarray(P.quality(pw, users, items))
    assert q.shape == (256, 1000) and np.all(np.isfinite(q)) and np.all((q >= 0) & (q <= 1))
    assert np.asarray(P.user_factors(pw, users)).shape == (256, 16)
    ranks = np.asarray(P.popularity_rank(pw, items))
    assert np.all((ranks >= 1) & (ranks <= 10**6)) and len(np.unique(ranks)) == 1000


def test_bad_input_is_a_clear_error(tiny):
    pw, _ = tiny
    with pytest.raises(ValueError, match="users must hold ids in \\[0, 60\\)"):
        P.quality(pw, np.array([0, 60]))
    with pytest.raises(ValueError, match="items must hold ids in \\[0, 40\\)"):
        P.item_factors(pw, np.array([-1]))
    with pytest.raises(TypeError, match="integer ids"):
        P.user_factors(pw, np.array([0.5]))
    with pytest.raises(ValueError, match="users must be a 1-D"):
        P.quality_logit(pw, np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="unknown preset"):
        P.make_procedural(jax.random.key(0), "nope")
    with pytest.raises(ValueError, match="typed PRNG key"):
        P.make_procedural(jax.random.PRNGKey(0), "tiny")
    with pytest.raises(ValueError, match="exceeds 2\\^31 - 1"):
        P.make_procedural(jax.random.key(0), W.WorldConfig(n_users=2**31, n_items=3))
    with pytest.raises(ValueError, match="n_items"):
        P.make_procedural(jax.random.key(0), W.WorldConfig(n_users=3, n_items=0))
    with pytest.raises(ValueError, match="threshold"):
        P.prior_relevant_block(jax.random.key(0), pw, np.arange(3), model="threshold", threshold=1.0)
    prior = P.prior_relevant_block(jax.random.key(0), pw, np.arange(3))
    with pytest.raises(ValueError, match="one row per user"):
        P.observe_srs_block(jax.random.key(0), np.arange(4), prior, 0.5)
    with pytest.raises(ValueError, match="rate"):
        P.observe_srs_block(jax.random.key(0), np.arange(3), prior, 1.5)

"""Policies, sampling and exposures (`simrec.feed.policies`, `.sampling`, `.exposure`): closed forms,
brute-force enumeration, Monte Carlo, stability."""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed
from simrec.feed import sampling
from simrec.feed.exposure import _race_block, exposure_sample, monte_carlo

VIEW = feed.Logarithmic()


def survival(k):
    return 1.0 / np.log2(np.arange(1, k + 1) + 1.0)


def rank_by_loop(scores_row, items):
    """0-based rank of each item among `items`: strictly higher scores, ties by lower id."""
    return {a: sum(1 for b in items if scores_row[b] > scores_row[a] or
                   (scores_row[b] == scores_row[a] and b < a)) for a in items}


def scores_with_ties(rng, x, a):
    return np.round(rng.normal(size=(x, a)), 1).astype(np.float32)   # rounding creates ties


def test_sort_exposure_closed_form_with_ties():
    rng = np.random.default_rng(0)
    X, A, K = 6, 9, 5
    s = scores_with_ties(rng, X, A)
    policy = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(s)), K)
    got = np.asarray(feed.exposure(None, policy, VIEW, jnp.arange(X)).mean)
    S = survival(K)
    for x in range(X):
        ranks = rank_by_loop(s[x], range(A))
        np.testing.assert_allclose(got[x], [S[ranks[a]] if ranks[a] < K else 0 for a in range(A)], rtol=1e-6)
    assert np.all(feed.exposure(None, policy, VIEW, jnp.arange(X)).standard_error == 0)


def test_epsilon_greedy_and_top_k_closed_form():
    rng = np.random.default_rng(1)
    X, A, k, K, eps = 4, 12, 6, 4, 0.25
    retrieval, ranker = rng.normal(size=(X, A)).astype(np.float32), scores_with_ties(rng, X, A)
    policy = feed.Policy(feed.TopK(feed.from_table(retrieval), k),
                         feed.EpsilonGreedy(feed.Sort(feed.from_table(ranker)), eps), K)
    got = np.asarray(feed.exposure(None, policy, VIEW, jnp.arange(X)).mean)
    S = survival(K)
    for x in range(X):
        candidates = list(np.argsort(-retrieval[x], kind="stable")[:k])
        ranks = rank_by_loop(ranker[x], candidates)
        want = np.zeros(A)
        for a in candidates:
            want[a] = (1 - eps) * (S[ranks[a]] if ranks[a] < K else 0) + eps * S.sum() / k
        np.testing.assert_allclose(got[x], want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_random_subset_exact_matches_enumeration(eps):
    rng = np.random.default_rng(2)
    X, A, k, K = 3, 6, 3, 2
    s = scores_with_ties(rng, X, A)
    ranker = feed.Sort(feed.from_table(s))
    policy = feed.Policy(feed.RandomSubset(A, k), feed.EpsilonGreedy(ranker, eps), K)
    got = np.asarray(feed.exposure(None, policy, VIEW, jnp.arange(X)).mean)
    S = survival(K)
    subsets = list(itertools.combinations(range(A), k))
    for x in range(X):
        want = np.zeros(A)
        for subset in subsets:
            ranks = rank_by_loop(s[x], subset)
            for a in subset:
                want[a] += ((1 - eps) * (S[ranks[a]] if ranks[a] < K else 0) + eps * S.sum() / k) / len(subsets)
        np.testing.assert_allclose(got[x], want, rtol=1e-5, atol=1e-7)


def plackett_luce_enumeration(logits, K):
    """Exact exposure of a PL ranking over all permutations (float64)."""
    A = logits.shape[0]
    w = np.exp(logits - logits.max())
    S = survival(K)
    out = np.zeros(A)
    for perm in itertools.permutations(range(A)):
        p = 1.0
        for i, a in enumerate(perm):
            p *= w[a] / w[list(perm[i:])].sum()
        for i, a in enumerate(perm[:K]):
            out[a] += p * S[i]
    return out


def test_plackett_luce_monte_carlo_matches_enumeration():
    """PL-Rank samples (`exposure_sample`, what `exposure` averages when the race does not apply)."""
    rng = np.random.default_rng(3)
    X, A, K, T = 3, 5, 3, 0.6
    s = rng.normal(size=(X, A)).astype(np.float32)
    want = np.stack([plackett_luce_enumeration(s[x].astype(np.float64) / T, K) for x in range(X)])
    policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(s), T), K)
    survival_ = feed.view_probability(VIEW, K)
    mean, se = jax.jit(lambda key: monte_carlo(
        key, lambda k: exposure_sample(k, policy, survival_, jnp.arange(X)), 3000))(jax.random.key(4))
    z = np.abs(np.asarray(mean) - want) / np.maximum(np.asarray(se), 1e-9)
    assert np.all(z <= 4), z.max()
    assert np.all(se > 0)


def plackett_luce_subset_enumeration(logits, k, K):
    """Exact exposure of PL over a uniformly random k-subset (every subset, every ranking)."""
    A = logits.shape[0]
    out = np.zeros(A)
    subsets = list(itertools.combinations(range(A), k))
    for subset in subsets:
        out[list(subset)] += plackett_luce_enumeration(logits[list(subset)], K) / len(subsets)
    return out


# (generator, ranker wrapper, K, view): every generator the race accepts, ε-greedy, K = k (every
# candidate shown), wide logit spans and another view model
RACE_CASES = {
    "all items": (lambda s: feed.all_items(7), 0.0, 3, 0.6, VIEW),
    "all items, K = k, exponential": (lambda s: feed.all_items(7), 0.0, 7, 1.0, feed.Exponential(0.7)),
    "top-k, epsilon-greedy": (lambda s: feed.TopK(feed.from_table(s[:, ::-1].copy()), 4), 0.3, 2, 1.0, VIEW),
    "per-context sets": (lambda s: feed.FixedCandidates(np.array([[0, 2, 4, 5], [1, 2, 3, 6], [6, 5, 0, 3]],
                                                                 np.int32), 7), 0.0, 3, 0.2, VIEW),
}


@pytest.mark.parametrize("case", list(RACE_CASES))
def test_plackett_luce_exposure_is_exact_against_enumeration(case):
    make_generator, eps, K, T, view = RACE_CASES[case]
    rng = np.random.default_rng(7)
    X, A = 3, 7
    s = (2 * rng.normal(size=(X, A))).astype(np.float32)
    generator = make_generator(s)
    ranker = feed.PlackettLuce(feed.from_table(s), T)
    policy = feed.Policy(generator, feed.EpsilonGreedy(ranker, eps) if eps else ranker, K)
    assert feed.race_nodes(policy, np.arange(X)) is not None and not feed.is_exact(policy)
    got = feed.exposure(None, policy, view, jnp.arange(X))
    candidates = np.asarray(feed.sample_candidates(None, generator, jnp.arange(X)))
    S = np.asarray(feed.view_probability(view, K), np.float64)
    for x in range(X):
        logits = s[x, candidates[x]].astype(np.float64) / T
        w = np.exp(logits - logits.max())
        pl = np.zeros(len(logits))
        for perm in itertools.permutations(range(len(logits))):
            p = np.prod([w[a] / w[list(perm[i:])].sum() for i, a in enumerate(perm)])
            pl[list(perm[:K])] += p * S
        want = np.zeros(A)
        want[candidates[x]] = (1 - eps) * pl + eps * S.sum() / len(logits)
        np.testing.assert_allclose(np.asarray(got.mean[x]), want, rtol=2e-6, atol=1e-12)   # float32 rounding
    assert np.all(np.asarray(got.standard_error) == 0)


def test_plackett_luce_race_resolves_tiny_exposures():
    s = np.array([[0.0, -20.0, -30.0, -40.0, -75.0]] * 2, np.float32)
    policy = feed.Policy(feed.all_items(5), feed.PlackettLuce(feed.from_table(s), 1.0), 3)
    got = np.asarray(feed.exposure(None, policy, VIEW, jnp.arange(2)).mean)
    np.testing.assert_allclose(got[0], plackett_luce_enumeration(s[0].astype(np.float64), 3), rtol=2e-6)


def test_race_applies_only_where_it_is_exact_and_cheap():
    rng = np.random.default_rng(8)
    s = rng.normal(size=(2, 100)).astype(np.float32)
    pl = feed.PlackettLuce(feed.from_table(s), 1.0)
    assert feed.race_nodes(feed.Policy(feed.all_items(100), pl, 10), np.arange(2)) is not None
    assert feed.race_nodes(feed.Policy(feed.RandomSubset(100, 20), pl, 10), np.arange(2)) is None
    assert feed.race_nodes(feed.Policy(feed.all_items(100), pl, 50), np.arange(2)) is None      # k K > 4096
    assert feed.race_nodes(feed.Policy(feed.all_items(100), feed.Sort(feed.from_table(s)), 10), np.arange(2)) is None
    wide = s.copy()
    wide[1, :5] += 100.0                       # top logit 60+ above the (K+1)-th of context 1
    assert feed.race_nodes(feed.Policy(feed.all_items(100), feed.PlackettLuce(feed.from_table(wide), 1.0), 10),
                           np.arange(2)) is None
    with pytest.raises(ValueError, match="PRNG key"):
        feed.exposure(None, feed.Policy(feed.RandomSubset(100, 20), pl, 10), VIEW, np.arange(2))


def test_monte_carlo_standard_error_is_calibrated():
    """Where Monte Carlo remains (PL on random subsets), the reported standard error matches the
    error of the mean: over R independent tables of n samples, z = (mean - truth) / SE has
    E[z²] = (n - 1) / (n - 3) (Student t, n - 1 degrees of freedom); the mean of the per-table
    averages of z² must lie within 4 of its own standard errors (over the R tables) of that."""
    rng = np.random.default_rng(9)
    X, A, k, K, T, n, R = 2, 6, 4, 3, 0.7, 100, 60
    s = rng.normal(size=(X, A)).astype(np.float32)
    policy = feed.Policy(feed.RandomSubset(A, k), feed.PlackettLuce(feed.from_table(s), T), K)
    truth = np.stack([plackett_luce_subset_enumeration(s[x].astype(np.float64) / T, k, K) for x in range(X)])
    per_table = []
    for r in range(R):
        est = feed.exposure(jax.random.key(100 + r), policy, VIEW, np.arange(X), num_samples=n)
        z = (np.asarray(est.mean, np.float64) - truth) / np.asarray(est.standard_error, np.float64)
        per_table.append(np.mean(z ** 2))
    per_table = np.array(per_table)
    expected = (n - 1) / (n - 3)
    assert abs(per_table.mean() - expected) <= 4 * per_table.std(ddof=1) / np.sqrt(R), per_table.mean()


def test_sampled_rankings_match_enumeration():
    """The session sampler (Gumbel top-K), not only the exposure estimator, follows PL."""
    rng = np.random.default_rng(5)
    A, K, T, n = 5, 3, 0.8, 40_000
    s = rng.normal(size=(1, A)).astype(np.float32)
    policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(s), T), K)
    rankings = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(6), policy, jnp.zeros(n, jnp.int32)))
    S = survival(K)
    per_session = np.zeros((n, A))
    np.put_along_axis(per_session, rankings, S[None, :], axis=1)
    want = plackett_luce_enumeration(s[0].astype(np.float64) / T, K)
    se = per_session.std(0) / np.sqrt(n)
    assert np.all(np.abs(per_session.mean(0) - want) <= 4 * se + 1e-9)
    assert np.all(np.sort(rankings, axis=1)[:, 1:] != np.sort(rankings, axis=1)[:, :-1])   # no repeats


def test_extreme_scores_give_finite_exposures_in_range():
    s = np.array([[1e4, -1e4, 0.0, 3e3, -3e3]] * 3, np.float32)
    policy = feed.Policy(feed.all_items(5), feed.PlackettLuce(feed.from_table(s), 0.01), 3)
    est = feed.exposure(jax.random.key(1), policy, VIEW, jnp.arange(3), num_samples=3000)
    mean = np.asarray(est.mean)
    assert np.all(np.isfinite(mean)) and np.all(mean >= 0) and np.all(mean <= 1 + 1e-6)
    assert np.all(np.isfinite(est.standard_error))
    np.testing.assert_allclose(mean[:, [0, 3, 2]], np.tile(survival(3), (3, 1)), rtol=1e-5)   # certain
    assert np.all(mean[:, [1, 4]] < 1e-30)


def test_tiny_exposures_stay_positive_and_accurate():
    """PL-Rank in log space resolves exposures of order e^-20 that sampling alone never sees."""
    s = np.array([[0.0, -50.0, -60.0, -70.0, -75.0]] * 3, np.float32)
    policy = feed.Policy(feed.all_items(5), feed.PlackettLuce(feed.from_table(s), 1.0), 3)
    est = np.asarray(feed.exposure(jax.random.key(2), policy, VIEW, jnp.arange(3), num_samples=3000).mean)[0]
    want = plackett_luce_enumeration(s[0].astype(np.float64), 3)
    assert np.all(est > 0)
    np.testing.assert_allclose(est, want, rtol=1e-3)


def test_best_by_true_quality_ranks_best_items_first():
    rng = np.random.default_rng(8)
    quality = rng.uniform(size=(20, 30)).astype(np.float32)
    policy = feed.Policy(feed.all_items(30), feed.Sort(feed.from_table(quality)), 10)
    shown = np.asarray(feed.sample_ranking(None, policy, jnp.arange(20)))
    np.testing.assert_array_equal(shown, np.argsort(-quality, axis=1)[:, :10])
    shown_quality = np.take_along_axis(quality, shown, axis=1)
    assert np.all(np.diff(shown_quality, axis=1) <= 0)


def test_item_ids_stay_int32_above_40000():
    A, X, K = 50_000, 3, 10
    rng = np.random.default_rng(9)
    s = rng.normal(size=(X, A)).astype(np.float32)
    s[:, 45_678] = 100.0                                         # a high id ranked first
    for policy in (feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(s)), K),
                   feed.Policy(feed.TopK(feed.from_table(s), 20), feed.PlackettLuce(feed.from_table(s), 0.5), K)):
        shown = feed.sample_ranking(jax.random.key(0), policy, jnp.arange(X))
        assert shown.dtype == jnp.int32 and int(shown.max()) >= 45_678 and int(shown.min()) >= 0
        assert np.all(np.asarray(shown)[:, 0] == 45_678) or not feed.is_deterministic(policy)
    table = feed.exposure(None, feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(s)), K), VIEW,
                          jnp.arange(X)).mean
    assert table.shape == (X, A) and np.all(np.asarray(table)[:, 45_678] == 1.0)


@pytest.mark.parametrize("make", [
    lambda f: feed.Policy(feed.all_items(5), feed.Sort(f), 6),
    lambda f: feed.Policy(feed.all_items(4), feed.Sort(f), 2),
    lambda f: feed.PlackettLuce(f, 0.0),
    lambda f: feed.EpsilonGreedy(feed.Sort(f), 1.5),
    lambda f: feed.FixedCandidates(jnp.array([0, 0, 1]), 5),
    lambda f: feed.FixedCandidates(jnp.array([0, 7]), 5),
    lambda f: feed.TopK(f, 6),
    lambda f: feed.RandomSubset(5, 6),
    lambda f: feed.from_table(np.array([[np.nan, 1.0]])),
    lambda f: feed.exposure(None, feed.Policy(feed.RandomSubset(5, 3), feed.PlackettLuce(f, 1.0), 2), VIEW, [0, 1]),
    lambda f: feed.exposure(None, feed.Policy(feed.all_items(5), feed.Sort(f), 2), VIEW, [[0, 1]]),
])
def test_invalid_policies_raise(make):
    f = feed.from_table(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError):
        make(f)


# --------------------------------------------------------------------------------------------
# Sampling by first appearances (alias tables), used by `simulate` through `context_tables`
# --------------------------------------------------------------------------------------------

def test_random_words_are_threefry_with_both_words_per_block():
    """Same stream as JAX's non-partitionable Threefry bits (an independent implementation)."""
    key = jax.random.key(5)
    with jax.threefry_partitionable(False):
        want = jax.random.bits(key, (3, 1001), jnp.uint32)
    np.testing.assert_array_equal(sampling.random_words(key, (3, 1001)), want)


@pytest.mark.parametrize("X, k, scale", [(50, 7, 1.0), (20, 100, 3.0), (5, 1000, 10.0), (3, 5, 1e4),
                                         (4, 3, 0.0), (3, 1, 1.0)])
def test_alias_tables_give_the_softmax(X, k, scale):
    logits = np.random.default_rng(k).normal(size=(X, k)) * scale
    accept, alias = sampling._alias_tables(logits)
    width = accept.shape[1]
    assert width >= k and width & (width - 1) == 0
    coin = 2.0 ** (32 - (width.bit_length() - 1))
    implied = accept / coin
    for x in range(X):
        np.add.at(implied[x], alias[x], 1.0 - accept[x] / coin)
    implied /= width
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.all(implied[:, k:] == 0)                           # padding columns are never drawn
    np.testing.assert_allclose(implied[:, :k], p, rtol=0, atol=width * 2.0**-32)


def prefix_marginals(logits, K):
    """P(a at rank i) of a Plackett–Luce top-K, by enumerating every ordered K-prefix (float64)."""
    w = np.exp(logits - logits.max())
    out = np.zeros((K, logits.shape[0]))
    for prefix in itertools.permutations(range(logits.shape[0]), K):
        p, rest = 1.0, w.sum()
        for a in prefix:
            p *= w[a] / rest
            rest -= w[a]
        out[np.arange(K), list(prefix)] += p
    return out


@pytest.mark.parametrize("A, T", [(40, 3.0),      # rare duplicates: completion from the small buffer
                                  (12, 1.0),      # a few % short: the larger buffer
                                  (12, 0.1)])     # almost all short: every session completed
def test_drawn_rankings_match_enumeration(A, T):
    K, n = 3, 200_000
    s = np.random.default_rng(11).normal(size=(1, A)).astype(np.float32)
    policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(s), T), K)
    tables = feed.context_tables(policy, 1)
    assert tables.accept is not None                          # sampled by first appearances
    depth = jax.random.randint(jax.random.key(8), (n,), 1, K + 1)
    shown = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(7), policy, jnp.zeros(n, jnp.int32), tables,
                                                    depth))
    want = prefix_marginals(s[0].astype(np.float64) / T, K)
    depth = np.asarray(depth)
    for i in range(K):
        rows = depth > i                                      # ranks within the depth are sampled
        freq = np.bincount(shown[rows, i], minlength=A) / rows.sum()
        se = np.sqrt(want[i] * (1 - want[i]) / rows.sum())
        assert np.all(np.abs(freq - want[i]) <= 4 * se + 1e-9), (i, np.max(np.abs(freq - want[i]) / (se + 1e-12)))
    within = np.arange(K)[None] < depth[:, None]
    filled = np.where(within, shown, -1 - np.arange(K)[None])
    assert np.all(shown[within] >= 0)
    assert np.all(np.sort(filled, axis=1)[:, 1:] != np.sort(filled, axis=1)[:, :-1])   # no repeats


def test_drawn_uniform_exploration_is_uniform():
    A, K, n = 20, 4, 100_000
    s = np.zeros((1, A), np.float32)
    policy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(s)), 1.0), K)
    shown = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(9), policy, jnp.zeros(n, jnp.int32),
                                                    feed.context_tables(policy, 1)))
    se = np.sqrt((1 / A) * (1 - 1 / A) / n)
    for i in range(K):
        assert np.all(np.abs(np.bincount(shown[:, i], minlength=A) / n - 1 / A) <= 4 * se)
    assert np.all(np.sort(shown, axis=1)[:, 1:] != np.sort(shown, axis=1)[:, :-1])


@pytest.mark.parametrize("A, K", [(6, 3), (5, 5)])
def test_uniform_exploration_of_few_candidates_gives_every_ordered_prefix_alike(A, K):
    """With fewer than 4 K candidates exploration is a partial Fisher–Yates shuffle
    (`sampling.uniform_prefix`): each of the A!/(A−K)! ordered prefixes has probability
    (A−K)!/A!, every frequency within 4 SE."""
    n = 60_000
    policy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(np.zeros((1, A), np.float32))),
                                                              1.0), K)
    shown = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(10), policy, jnp.zeros(n, jnp.int32)))
    prefixes = list(itertools.permutations(range(A), K))
    p = 1 / len(prefixes)
    counts = {prefix: 0 for prefix in prefixes}
    for row in map(tuple, shown):
        counts[row] += 1                                       # a repeat or an unknown id raises KeyError
    assert max(abs(c / n - p) for c in counts.values()) <= 4 * math.sqrt(p * (1 - p) / n)


def test_uniform_exploration_of_2_to_the_16_candidates_or_more_draws_exact_indices_by_first_appearances():
    """Beyond the alias coin's 2^16 candidates, uniform exploration still draws by first appearances
    (`_scaled_index` is exact up to 2^31, memory O(N·K) instead of O(N·A)): distinct ids, every one a
    candidate, and the first rank uniform over 16 equal blocks of ids (every frequency within 4 SE)."""
    A, K, n = 2**17 + 7, 4, 40_000
    policy = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(np.zeros((1, A), np.float32))),
                                                              1.0), K)
    tables = feed.context_tables(policy, 1)                        # the base order once, not per session
    shown = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(11), policy, jnp.zeros(n, jnp.int32), tables))
    assert shown.min() >= 0 and shown.max() < A
    assert np.all(np.sort(shown, axis=1)[:, 1:] != np.sort(shown, axis=1)[:, :-1])
    blocks = np.bincount(shown[:, 0] * 16 // A, minlength=16) / n
    assert np.all(np.abs(blocks - 1 / 16) <= 4 * math.sqrt(1 / 16 * 15 / 16 / n)), blocks
    with pytest.raises(ValueError, match="num_candidates < 2\\^31"):
        sampling.uniform_prefix(jax.random.key(0), 2, 2**31, 3)


def test_sorted_prefix_is_the_sort_order_with_ties_by_lower_id():
    """`sorted_prefix` against a Python sort by (−score, id), at depths 1, 7 and k: scores with many
    ties (one row all tied), ids shared by every row in a shuffled order or one set per row."""
    rng = np.random.default_rng(5)
    n, k = 40, 30
    scores = rng.integers(0, 4, (n, k)).astype(np.float32)             # ties everywhere
    scores[0] = 1.0
    shared = rng.permutation(1000)[:k].astype(np.int32)
    per_row = np.stack([rng.permutation(1000)[:k] for _ in range(n)]).astype(np.int32)
    for items in (shared, per_row):
        rows = np.broadcast_to(items, (n, k))
        for depth in (1, 7, k):
            got = np.asarray(sampling.sorted_prefix(jnp.asarray(scores), jnp.asarray(items), depth))
            for r in range(n):
                want = sorted(range(k), key=lambda j: (-scores[r, j], rows[r, j]))[:depth]
                assert list(got[r]) == want, (items.ndim, depth, r)


def test_scaled_index_is_the_exact_floor_of_the_scaled_word():
    """floor(w · size / 2^32) against Python integers, below and above 2^16 candidates."""
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**32, 4_000, dtype=np.uint64).astype(np.uint32)
    words[:3] = [0, 2**32 - 1, 2**31]
    for size in (1, 7, 2**16 - 1, 2**16 + 7, 100_000, 2**31 - 1):
        got = np.asarray(sampling._scaled_index(jnp.asarray(words), size))
        want = (words.astype(object) * size) // 2**32
        np.testing.assert_array_equal(got, want.astype(np.int64), err_msg=str(size))


def test_per_context_fixed_candidates_from_top_k_match_top_k():
    """`top_k_candidates` precomputes TopK's sets: the sets equal a per-context stable argsort, and
    policies on them give TopK's exact exposures and rankings (ε-greedy samples with one key)."""
    rng = np.random.default_rng(7)
    X, A, k, K, eps = 5, 14, 7, 4, 0.3
    retrieval, ranker = feed.from_table(rng.normal(size=(X, A)).astype(np.float32)), \
        feed.from_table(scores_with_ties(rng, X, A))
    fixed = feed.top_k_candidates(retrieval, k, X, block_size=2)
    want = np.argsort(-np.asarray(retrieval.params), axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(np.sort(np.asarray(fixed.items), axis=1), np.sort(want, axis=1))
    for make in (lambda g: feed.Sort(ranker), lambda g: feed.EpsilonGreedy(feed.Sort(ranker), eps)):
        on_fixed = feed.Policy(fixed, make(fixed), K)
        on_top_k = feed.Policy(feed.TopK(retrieval, k), make(None), K)
        np.testing.assert_allclose(feed.exposure(None, on_fixed, VIEW, jnp.arange(X)).mean,
                                   feed.exposure(None, on_top_k, VIEW, jnp.arange(X)).mean, rtol=1e-6)
        contexts = jnp.arange(X)
        np.testing.assert_array_equal(feed.sample_ranking(jax.random.key(3), on_fixed, contexts),
                                      feed.sample_ranking(jax.random.key(3), on_top_k, contexts))


@pytest.mark.parametrize("items", [np.array([[0, 1], [2, 2]]), np.array([[0, 5]]), np.zeros((1, 1, 2), int)])
def test_per_context_fixed_candidates_are_validated(items):
    with pytest.raises(ValueError, match="FixedCandidates.items"):
        feed.FixedCandidates(jnp.asarray(items), 5)


def test_drawn_rankings_on_per_context_candidate_sets():
    """Per-context FixedCandidates (a table [X, k]): each context draws from its own set, with
    its own alias table, and follows PL over that set."""
    rng = np.random.default_rng(13)
    X, A, k, K, n = 2, 30, 12, 3, 100_000
    items = np.stack([rng.permutation(A)[:k] for _ in range(X)]).astype(np.int32)
    s = rng.normal(size=(X, A)).astype(np.float32)
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(items), A), feed.PlackettLuce(feed.from_table(s), 1.0), K)
    tables = feed.context_tables(policy, X)
    contexts = jnp.repeat(jnp.arange(X, dtype=jnp.int32), n // X)
    shown = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(14), policy, contexts, tables))
    for x in range(X):
        rows = np.asarray(contexts) == x
        want = prefix_marginals(s[x, items[x]].astype(np.float64), K)
        for i in range(K):
            freq = np.bincount(shown[rows, i], minlength=A)[items[x]] / rows.sum()
            assert np.isclose(freq.sum(), 1.0)                       # only the context's own set
            assert np.all(np.abs(freq - want[i]) <= 4 * np.sqrt(want[i] * (1 - want[i]) / rows.sum()) + 1e-9)


def test_deep_feeds_draw_the_first_ranks_and_complete_the_rest():
    """K = 40 > 32: 48 draws cover the first ranks; sessions deeper than their distinct draws are
    completed by Gumbel-top-K. Every rank within the depth matches the plain Gumbel-top-K sampler
    (itself checked against enumeration above), compared as two samples."""
    A, K, T, n = 100, 40, 0.5, 100_000
    s = np.random.default_rng(15).normal(size=(1, A)).astype(np.float32)
    policy = feed.Policy(feed.all_items(A), feed.PlackettLuce(feed.from_table(s), T), K)
    tables = feed.context_tables(policy, 1)
    contexts = jnp.zeros(n, jnp.int32)
    depth = np.asarray(jax.random.randint(jax.random.key(16), (n,), 1, K + 1))
    drawn = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(17), policy, contexts, tables, jnp.asarray(depth)))
    plain = np.asarray(jax.jit(feed.sample_ranking)(jax.random.key(18), policy, contexts))
    within = np.arange(K)[None] < depth[:, None]
    assert np.all(drawn[within] >= 0)
    filled = np.where(within, drawn, -1 - np.arange(K)[None])
    assert np.all(np.sort(filled, axis=1)[:, 1:] != np.sort(filled, axis=1)[:, :-1])   # no repeats
    for i in (0, 1, 20, 39):
        rows = depth > i
        p, q = (np.bincount(x, minlength=A) / len(x) for x in (drawn[rows, i], plain[:, i]))
        pooled = (p * rows.sum() + q * n) / (rows.sum() + n)
        se = np.sqrt(pooled * (1 - pooled) * (1 / rows.sum() + 1 / n))
        assert np.all(np.abs(p - q) <= 5 * se + 1e-9), (i, np.max(np.abs(p - q) / (se + 1e-12)))   # 400 comparisons


@pytest.mark.parametrize("num_draws, feed_length", [(20, 8), (30, 40), (48, 48)])
def test_first_appearances_scan_matches_a_python_reference(num_draws, feed_length):
    """Sampling by first appearances: positions in order of first appearance, -1 after the distinct
    count, which is capped at K; the scanned path (many draws) against a plain loop per session."""
    from simrec.feed.sampling import _UNROLL_DRAWS, _first_appearances
    assert num_draws > _UNROLL_DRAWS
    draws = np.asarray(jax.random.randint(jax.random.key(7), (num_draws, 300), 0, 25), np.int32)
    positions, count = _first_appearances(jnp.asarray(draws), feed_length)
    for n in range(draws.shape[1]):
        distinct = list(dict.fromkeys(draws[:, n].tolist()))
        shown = distinct[:feed_length]
        expected = shown + [-1] * (feed_length - len(shown))
        assert np.asarray(positions[n]).tolist() == expected
        assert int(count[n]) == min(len(distinct), feed_length)


def test_policy_tables_must_agree_and_cover_the_contexts_asked_about():
    """Lookup tables indexed by context (scores, retrieval, per-context candidates) are checked
    where they are combined: within a Policy, against num_contexts, and against exposure's contexts."""
    scores = feed.from_table(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="Policy.ranker scores table has 3 row.*rows of Policy.generator.items"):
        feed.Policy(feed.FixedCandidates(jnp.array([[0, 1], [2, 3]]), 5), feed.Sort(scores), 2)
    with pytest.raises(ValueError, match="Policy.ranker scores table has 3 row.*rows of Policy.generator.retrieval"):
        feed.Policy(feed.TopK(feed.from_table(np.zeros((4, 5), np.float32)), 3), feed.Sort(scores), 2)
    policy = feed.Policy(feed.all_items(5), feed.Sort(scores), 2)
    assert feed.policies.table_contexts(policy) == 3
    with pytest.raises(ValueError, match=r"contexts must hold ids in \[0, 3\)"):
        feed.exposure(None, policy, VIEW, [0, 3])
    with pytest.raises(ValueError, match="num_contexts"):
        feed.context_tables(policy, 4)
    with pytest.raises(ValueError, match="retrieval table"):
        feed.top_k_candidates(feed.from_table(np.zeros((4, 5), np.float32)), 2, 6)


@pytest.mark.parametrize("k, K, T", [(100, 10, 1.0), (100, 30, 0.3), (64, 64, 1.0)])
def test_race_nodes_reach_float32_accuracy_on_large_rankings(k, K, T):
    """Too large to enumerate: the trapezoid rule with `race_nodes` agrees with one of 600 nodes
    to float32 rounding (the rule converges exponentially; enumeration checks the formula)."""
    rng = np.random.default_rng(11)
    X = 16
    s = (np.log(rng.beta(2, 5, (X, k))) + rng.normal(0, 0.5, (X, k))).astype(np.float32)
    policy = feed.Policy(feed.all_items(k), feed.PlackettLuce(feed.from_table(s), T), K)
    survival_ = feed.view_probability(VIEW, K)
    nodes = feed.race_nodes(policy, np.arange(X))
    got = _race_block(policy, survival_, jnp.arange(X), nodes)
    fine = _race_block(policy, survival_, jnp.arange(X), 600)
    np.testing.assert_allclose(np.asarray(got), np.asarray(fine), rtol=3e-6)


VIEWS = (feed.Logarithmic(), feed.Exponential(jnp.float32(0.7)), feed.ScrollBudget(jnp.float32(1.3)))


@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_sort_placement_is_the_sorted_position_and_gives_exposure_under_every_view(eps):
    """P(a at rank i) = (1 − ε) 1[rank of a = i] + ε / k, by the loop, with ties; its exposure
    under each view model is `exposure`'s closed form."""
    rng = np.random.default_rng(12)
    X, A, k, K = 5, 12, 6, 4
    retrieval, ranker = rng.normal(size=(X, A)).astype(np.float32), scores_with_ties(rng, X, A)
    policy = feed.Policy(feed.TopK(feed.from_table(retrieval), k),
                         feed.EpsilonGreedy(feed.Sort(feed.from_table(ranker)), eps), K)
    got = feed.placement(None, policy, np.arange(X), block_size=2)
    for x in range(X):
        candidates = np.argsort(-retrieval[x], kind="stable")[:k]
        np.testing.assert_array_equal(np.asarray(got.candidates[x]), candidates)
        ranks = rank_by_loop(ranker[x], candidates)
        want = np.array([[(1 - eps) * (ranks[a] == i) + eps / k for i in range(K)] for a in candidates])
        np.testing.assert_allclose(np.asarray(got.probability[x]), want, rtol=1e-6)
    for view in VIEWS:
        np.testing.assert_allclose(np.asarray(feed.placement_exposure(got, view, A)),
                                   np.asarray(feed.exposure(None, policy, view, np.arange(X)).mean),
                                   rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_plackett_luce_placement_is_unbiased_for_the_enumerated_rank_probabilities(eps):
    """Each sample of the estimator lies in [0, 1] (sd <= 1/2), so 4 SE <= 2 / sqrt(n); rank 1's
    sample is exact (w_a / Σw: every candidate is still unplaced). The value of a context does not
    depend on the block it is computed in."""
    rng = np.random.default_rng(13)
    X, A, K, T, n = 3, 7, 2, 0.7, 20_000
    scores = rng.normal(size=(X, A)).astype(np.float32)
    candidates = np.array([[0, 2, 4, 6], [1, 2, 3, 5], [6, 5, 4, 3]])
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(candidates, jnp.int32), A),
                         feed.EpsilonGreedy(feed.PlackettLuce(feed.from_table(scores), jnp.float32(T)), eps), K)
    got = feed.placement(jax.random.key(3), policy, np.arange(X), num_samples=n)
    for x in range(X):
        want = (1 - eps) * prefix_marginals(scores[x, candidates[x]].astype(np.float64) / T, K).T      # [k, K]
        want += eps / candidates.shape[1]
        estimate = np.asarray(got.probability[x], np.float64)
        np.testing.assert_allclose(estimate[:, 0], want[:, 0], rtol=1e-3)     # exact up to float32 sums
        assert np.all(np.abs(estimate - want) <= 2 / math.sqrt(n))
    blocked = feed.placement(jax.random.key(3), policy, np.arange(X), num_samples=n, block_size=2)
    np.testing.assert_allclose(np.asarray(blocked.probability), np.asarray(got.probability), rtol=1e-6)
    survival_ = np.asarray(feed.view_probability(VIEW, K), np.float64)
    table = np.asarray(feed.placement_exposure(got, VIEW, A))
    reference = np.asarray(feed.exposure(None, policy, VIEW, np.arange(X)).mean)    # exact (the race)
    assert np.all(table[np.arange(X)[:, None], candidates] > 0)
    assert np.abs(table - reference).max() <= 2 * survival_.sum() / math.sqrt(n)


def test_placement_says_what_it_needs():
    scores = feed.from_table(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="deterministic generator"):
        feed.placement(None, feed.Policy(feed.RandomSubset(5, 3), feed.Sort(scores), 2), np.arange(3))
    plackett_luce = feed.Policy(feed.all_items(5), feed.PlackettLuce(scores, jnp.float32(1.0)), 2)
    with pytest.raises(ValueError, match="pass a PRNG key"):
        feed.placement(None, plackett_luce, np.arange(3))
    with pytest.raises(ValueError, match=r"contexts must hold ids in \[0, 3\)"):
        feed.placement(jax.random.key(0), plackett_luce, [0, 3])
    with pytest.raises(ValueError, match="num_samples"):
        feed.placement(jax.random.key(0), plackett_luce, np.arange(3), num_samples=0)

import dataclasses
import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.missing import (calibrate_offset, expected_observed_count, observe_mnar_popularity,
                            observe_mnar_quality, observe_srs, prior_relevant, sample_unrated,
                            split_per_user, split_steck, split_users, user_rates)
from simrec.world import make_world, quality


@pytest.fixture(scope="module")
def tiny():
    return make_world(jax.random.key(0), "tiny")


def _reference_quality(world):
    x = np.asarray(world.user_factors, np.float64)
    y = np.asarray(world.item_factors, np.float64)
    logits = (float(world.affinity_scale) * x @ y.T + np.asarray(world.item_bias, np.float64)
              + float(world.offset))
    return 1 / (1 + np.exp(-logits))


def _reference_size(n: int, rate: Fraction) -> int:
    """The size rule written with exact rationals: round half up, at least 1 if possible."""
    if n == 0 or rate == 0:
        return 0
    return min(n, max(math.floor(rate * n + Fraction(1, 2)), 1))


def _replicated_rows(n_rows: int, items, n_items: int) -> sp.csr_matrix:
    """n_rows identical rows, each relevant exactly on `items`."""
    dense = np.zeros((n_rows, n_items), dtype=bool)
    dense[:, list(items)] = True
    return sp.csr_matrix(dense)


def _subset_frequencies(matrix: sp.csr_matrix) -> dict[tuple, float]:
    rows = [tuple(matrix.indices[matrix.indptr[r]:matrix.indptr[r + 1]])
            for r in range(matrix.shape[0])]
    counts: dict[tuple, int] = {}
    for row in rows:
        counts[row] = counts.get(row, 0) + 1
    return {subset: c / len(rows) for subset, c in counts.items()}


def _row_sizes(matrix) -> np.ndarray:
    return np.diff(sp.csr_matrix(matrix).indptr)


# --------------------------------------------------------------------------------------------
# Prior-relevant sets
# --------------------------------------------------------------------------------------------

def test_bernoulli_prior_inclusion_frequency_matches_quality(tiny):
    draws = 400
    counts = np.zeros((tiny.n_users, tiny.n_items))
    for r in range(draws):
        counts += prior_relevant(jax.random.fold_in(jax.random.key(1), r), tiny).toarray()
    q = _reference_quality(tiny)
    sd = np.sqrt(draws * q * (1 - q))
    regular = draws * q * (1 - q) >= 5                       # normal approximation is sound here
    assert np.all(np.abs(counts - draws * q)[regular] <= 5 * sd[regular])   # 5 SE: ~2400 cells
    total_sd = math.sqrt(float(np.sum(draws * q * (1 - q))))
    assert abs(counts.sum() - draws * q.sum()) <= 4 * total_sd


def test_prior_same_key_identical_and_independent_of_block_size(tiny):
    key = jax.random.key(2)
    reference = prior_relevant(key, tiny)
    for block_size in (7, 25):
        other = prior_relevant(key, tiny, block_size=block_size)
        assert (other != reference).nnz == 0
    assert (prior_relevant(jax.random.key(3), tiny) != reference).nnz > 0
    assert reference.dtype == bool and reference.shape == (tiny.n_users, tiny.n_items)
    assert reference.has_sorted_indices


def test_threshold_prior_is_quality_above_threshold(tiny):
    prior = prior_relevant(jax.random.key(0), tiny, model="threshold", threshold=0.3).toarray()
    q = _reference_quality(tiny)
    clear = np.abs(q - 0.3) > 1e-5                           # float32 vs float64 at the boundary
    np.testing.assert_array_equal(prior[clear], (q >= 0.3)[clear])


# --------------------------------------------------------------------------------------------
# Observation sizes and SRS exactness
# --------------------------------------------------------------------------------------------

def test_observed_sizes_follow_the_rounding_rule():
    rng = np.random.default_rng(0)
    n_users = 300
    dense = np.zeros((n_users, 20), dtype=bool)
    lengths = rng.integers(0, 21, n_users)
    for u, n in enumerate(lengths):
        dense[u, :n] = True
    decimal_rates = rng.choice(["0", "0.05", "0.1", "0.25", "0.3", "0.5", "0.7", "0.9", "1"],
                               n_users)
    rates = np.array([float(r) for r in decimal_rates])
    observed = observe_srs(jax.random.key(0), sp.csr_matrix(dense), rates)
    expected = [_reference_size(int(n), Fraction(r)) for n, r in zip(lengths, decimal_rates)]
    np.testing.assert_array_equal(_row_sizes(observed), expected)
    assert (observed > sp.csr_matrix(dense)).nnz == 0       # O+ ⊆ P+
    scalar = observe_srs(jax.random.key(0), sp.csr_matrix(dense), 0.3)
    np.testing.assert_array_equal(_row_sizes(scalar),
                                  [_reference_size(int(n), Fraction(3, 10)) for n in lengths])


def test_srs_every_subset_equally_likely():
    n_rows = 20_000
    prior = _replicated_rows(n_rows, [1, 3, 4, 6, 8], 10)     # |P+| = 5, rate 1/2 -> 3 items
    observed = observe_srs(jax.random.key(11), prior, 0.5)
    frequencies = _subset_frequencies(observed)
    subsets = list(itertools.combinations([1, 3, 4, 6, 8], 3))
    assert set(frequencies) == set(subsets)
    p = 1 / len(subsets)
    se = math.sqrt(p * (1 - p) / n_rows)
    assert all(abs(frequencies[s] - p) <= 4.5 * se for s in subsets)
    inclusion = observed.sum(axis=0).A1[[1, 3, 4, 6, 8]] / n_rows
    se_inclusion = math.sqrt(0.6 * 0.4 / n_rows)
    assert np.all(np.abs(inclusion - 0.6) <= 4.5 * se_inclusion)


def test_srs_inclusion_uniform_on_a_world_prior(tiny):
    # Given P+, every item of P+_u is observed with probability |O+_u| / |P+_u|.
    prior = prior_relevant(jax.random.key(5), tiny)
    draws = 300
    counts = np.zeros(prior.nnz)
    for r in range(draws):
        observed = observe_srs(jax.random.fold_in(jax.random.key(6), r), prior, 0.25)
        counts += np.asarray(observed[prior.nonzero()]).ravel()
    n = _row_sizes(prior)
    share = np.array([_reference_size(int(k), Fraction(1, 4)) / k if k else 0 for k in n])
    p = np.repeat(share, n)
    sd = np.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts - draws * p) <= 5 * sd + 1e-9)


def test_observation_same_key_identical_different_key_different(tiny):
    prior = prior_relevant(jax.random.key(5), tiny)
    a = observe_srs(jax.random.key(1), prior, 0.5)
    assert (a != observe_srs(jax.random.key(1), prior, 0.5)).nnz == 0
    assert (a != observe_srs(jax.random.key(2), prior, 0.5)).nnz > 0
    assert observe_srs(jax.random.key(1), prior, 0.0).nnz == 0
    assert (observe_srs(jax.random.key(1), prior, 1.0) != prior).nnz == 0


# --------------------------------------------------------------------------------------------
# MNAR observation
# --------------------------------------------------------------------------------------------

def test_mnar_popularity_beta_zero_is_srs(tiny):
    prior = prior_relevant(jax.random.key(5), tiny)
    popularity = np.arange(1, tiny.n_items + 1, dtype=float)
    srs = observe_srs(jax.random.key(9), prior, 0.5)
    flat = observe_mnar_popularity(jax.random.key(9), prior, 0.5, 0.0, popularity)
    assert (srs != flat).nnz == 0
    biased = observe_mnar_popularity(jax.random.key(9), prior, 0.5, 2.0, popularity)
    np.testing.assert_array_equal(_row_sizes(biased), _row_sizes(srs))   # same sizes


def test_mnar_popularity_matches_successive_sampling():
    n_rows, items = 20_000, [0, 2, 5, 7]
    popularity = np.array([1.0, 9.0, 2.0, 9.0, 9.0, 4.0, 9.0, 8.0])
    beta = 1.5
    prior = _replicated_rows(n_rows, items, 8)              # |P+| = 4, rate 1/2 -> 2 items
    observed = observe_mnar_popularity(jax.random.key(4), prior, 0.5, beta, popularity)
    w = {i: popularity[i] ** beta for i in items}
    total = sum(w.values())
    frequencies = _subset_frequencies(observed)
    for i, j in itertools.combinations(items, 2):            # two successive weighted draws
        p = w[i] / total * w[j] / (total - w[i]) + w[j] / total * w[i] / (total - w[j])
        se = math.sqrt(p * (1 - p) / n_rows)
        assert abs(frequencies.get((i, j), 0.0) - p) <= 4.5 * se
    # over-sampling: the most popular item is seen more often than SRS's 1/2
    assert observed[:, 7].sum() / n_rows > 0.6


def test_mnar_quality_draws_proportionally_to_quality_power(tiny):
    # Every pair relevant and rate 1/40 of 40 items: one draw per user, with probability
    # q(u, i)^beta / sum_j q(u, j)^beta.
    prior = np.ones((tiny.n_users, tiny.n_items), dtype=bool)
    q = _reference_quality(tiny)
    beta, draws = 1.0, 40
    weights = q ** beta / np.sum(q ** beta, axis=1, keepdims=True)
    mean_u = np.sum(weights * q, axis=1)                     # E[q of the chosen item]
    var_u = np.sum(weights * q ** 2, axis=1) - mean_u ** 2
    statistic = 0.0
    for r in range(draws):
        observed = observe_mnar_quality(jax.random.fold_in(jax.random.key(3), r), prior,
                                        1 / 40, beta, tiny)
        assert np.all(_row_sizes(observed) == 1)
        statistic += q[np.arange(tiny.n_users), observed.indices].sum()   # rows in order
    sd = math.sqrt(draws * var_u.sum())
    assert abs(statistic - draws * mean_u.sum()) <= 4 * sd
    assert draws * (mean_u.sum() - q.mean(axis=1).sum()) > 8 * sd          # the test has power
    srs = observe_srs(jax.random.key(3), prior, 1 / 40)
    assert (srs != observe_mnar_quality(jax.random.key(3), prior, 1 / 40, 0.0, tiny)).nnz == 0


# --------------------------------------------------------------------------------------------
# Per-user rates, expected counts, calibration
# --------------------------------------------------------------------------------------------

def test_user_rates_beta_moments():
    n, mean, concentration = 50_000, 0.3, 4.0
    rates = np.asarray(user_rates(jax.random.key(0), n, mean, concentration), np.float64)
    assert rates.shape == (n,) and np.all((rates >= 0) & (rates <= 1))
    a, b = mean * concentration, (1 - mean) * concentration
    variance = a * b / ((a + b) ** 2 * (a + b + 1))
    excess_kurtosis = (6 * ((a - b) ** 2 * (a + b + 1) - a * b * (a + b + 2))
                       / (a * b * (a + b + 2) * (a + b + 3)))
    assert abs(rates.mean() - mean) <= 4 * math.sqrt(variance / n)
    se_variance = variance * math.sqrt((excess_kurtosis + 2) / n)   # SE of the sample variance
    assert abs(rates.var() - variance) <= 4 * se_variance


def _brute_force_expected_count(q: np.ndarray, rate: Fraction) -> float:
    """Sum over users of E g(|P+_u|), with the Poisson-binomial pmf by explicit convolution."""
    total = 0.0
    for row in q:
        pmf = np.array([1.0])
        for p in row:
            pmf = np.convolve(pmf, [1 - p, p])
        total += sum(pmf[k] * _reference_size(k, rate) for k in range(len(pmf)))
    return total


@pytest.mark.parametrize("rate", ["0", "0.5", "0.25", "0.75", "0.3", "1", "0.125"])
def test_expected_observed_count_matches_brute_force(tiny, rate):
    users = np.arange(0, tiny.n_users, 3)
    q = np.asarray(quality(tiny, users), np.float64)
    exact = expected_observed_count(tiny, float(rate), users=users, block_size=7)
    assert exact == pytest.approx(_brute_force_expected_count(q, Fraction(rate)), rel=1e-9,
                                  abs=1e-9)


def test_expected_observed_count_matches_simulation(tiny):
    draws = 300
    totals = np.array([observe_srs(jax.random.fold_in(jax.random.key(12), r),
                                   prior_relevant(jax.random.fold_in(jax.random.key(11), r), tiny),
                                   0.25).nnz for r in range(draws)], dtype=float)
    se = totals.std(ddof=1) / math.sqrt(draws)
    assert abs(totals.mean() - expected_observed_count(tiny, 0.25)) <= 4 * se


def test_calibrate_offset_hits_target(tiny):
    offset = calibrate_offset(tiny, 150.0, 0.5, xtol=1e-6)
    calibrated = dataclasses.replace(tiny, offset=jnp.float32(offset))
    assert expected_observed_count(calibrated, 0.5) == pytest.approx(150.0, rel=1e-3)
    with pytest.raises(ValueError, match="bracket"):
        calibrate_offset(tiny, 150.0, 0.5, bracket=(-1.0, 0.0))


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def observed(tiny):
    return observe_srs(jax.random.key(1), prior_relevant(jax.random.key(0), tiny), 0.75)


def _part_end(n: int, cumulative: Fraction) -> int:
    return math.floor(n * cumulative + Fraction(1, 2))


def test_split_per_user_disjoint_complete_and_sized(observed):
    folds = split_per_user(jax.random.key(3), observed, (0.7, 0.1, 0.2), n_folds=4)
    assert len(folds) == 4
    n = _row_sizes(observed)
    train_sizes = [_part_end(int(k), Fraction("0.7")) for k in n]
    valid_sizes = [_part_end(int(k), Fraction("0.8")) - t for k, t in zip(n, train_sizes)]
    for split in folds:
        parts = (split.train, split.valid, split.test)
        for a, b in itertools.combinations(parts, 2):
            assert a.multiply(b).nnz == 0
        union = (split.train.astype(int) + split.valid + split.test).toarray()
        np.testing.assert_array_equal(union, observed.toarray().astype(int))
        np.testing.assert_array_equal(_row_sizes(split.train), train_sizes)
        np.testing.assert_array_equal(_row_sizes(split.valid), valid_sizes)
    assert (folds[0].test != folds[1].test).nnz > 0           # folds are independent draws
    again = split_per_user(jax.random.key(3), observed, (0.7, 0.1, 0.2), n_folds=4)
    assert all((a.test != b.test).nnz == 0 and (a.valid != b.valid).nnz == 0
               for a, b in zip(folds, again))


def test_split_per_user_assigns_items_uniformly():
    n_rows, items = 20_000, range(10)
    observed = _replicated_rows(n_rows, items, 10)             # 10 items -> 7 / 1 / 2
    (split,) = split_per_user(jax.random.key(8), observed, n_folds=1)
    for part, p in ((split.train, 0.7), (split.valid, 0.1), (split.test, 0.2)):
        share = part.sum(axis=0).A1 / n_rows
        assert np.all(np.abs(share - p) <= 4.5 * math.sqrt(p * (1 - p) / n_rows))


def test_split_per_user_allows_an_empty_validation_part(observed):
    (split,) = split_per_user(jax.random.key(3), observed, (0.5, 0.0, 0.5), n_folds=1)
    assert split.valid.nnz == 0
    np.testing.assert_array_equal(_row_sizes(split.train),
                                  [_part_end(int(k), Fraction(1, 2)) for k in _row_sizes(observed)])


def test_split_users_holds_out_whole_users(observed):
    result = split_users(jax.random.key(4), observed, 0.25)
    n_users = observed.shape[0]
    assert len(result.held_out_users) == round(0.25 * n_users)
    assert np.array_equal(np.sort(np.concatenate([result.train_users, result.held_out_users])),
                          np.arange(n_users))
    np.testing.assert_array_equal(result.held_out.toarray(),
                                  observed.toarray()[result.held_out_users])
    np.testing.assert_array_equal(result.train.toarray(), observed.toarray()[result.train_users])
    other = split_users(jax.random.key(5), observed, 0.25)
    assert not np.array_equal(other.held_out_users, result.held_out_users)


# --------------------------------------------------------------------------------------------
# Invalid input
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda w, p: prior_relevant(jax.random.key(0), w, model="poisson"), "model"),
    (lambda w, p: prior_relevant(jax.random.key(0), w, model="threshold", threshold=1.5),
     "threshold"),
    (lambda w, p: prior_relevant(jax.random.key(0), w, block_size=0), "block_size"),
    (lambda w, p: observe_srs(jax.random.key(0), p, 1.5), "rate"),
    (lambda w, p: observe_srs(jax.random.key(0), p, -0.1), "rate"),
    (lambda w, p: observe_srs(jax.random.key(0), p, math.nan), "rate"),
    (lambda w, p: observe_srs(jax.random.key(0), p, np.full(3, 0.5)), "rate"),
    (lambda w, p: observe_srs(jax.random.key(0), np.ones(5, bool), 0.5), "prior"),
    (lambda w, p: observe_srs(jax.random.key(0), np.full((2, 3), np.nan), 0.5), "prior"),
    (lambda w, p: observe_mnar_popularity(jax.random.key(0), p, 0.5, 1.0, np.ones(3)),
     "popularity"),
    (lambda w, p: observe_mnar_popularity(jax.random.key(0), p, 0.5, 1.0, np.zeros(40)),
     "popularity"),
    (lambda w, p: observe_mnar_popularity(jax.random.key(0), p, 0.5, math.nan, np.ones(40)),
     "beta"),
    (lambda w, p: observe_mnar_quality(jax.random.key(0), p[:5], 0.5, 1.0, w), "prior"),
    (lambda w, p: user_rates(jax.random.key(0), 10, 1.2, 2.0), "mean"),
    (lambda w, p: user_rates(jax.random.key(0), 10, 0.5, 0.0), "concentration"),
    (lambda w, p: expected_observed_count(w, 0.123456), "rate"),
    (lambda w, p: expected_observed_count(w, 0.5, users=np.array([0, 60])), "users"),
    (lambda w, p: calibrate_offset(w, -1.0), "target"),
    (lambda w, p: split_per_user(jax.random.key(0), p, (0.7, 0.2, 0.2)), "fractions"),
    (lambda w, p: split_per_user(jax.random.key(0), p, (0.0, 0.5, 0.5)), "fractions"),
    (lambda w, p: split_per_user(jax.random.key(0), p, (0.5, 0.5)), "fractions"),
    (lambda w, p: split_per_user(jax.random.key(0), p, (1.2, -0.1, -0.1)), "fractions"),
    (lambda w, p: split_per_user(jax.random.key(0), p, n_folds=0), "n_folds"),
    (lambda w, p: split_users(jax.random.key(0), p, 1.0), "held_out_fraction"),
    (lambda w, p: split_users(jax.random.key(0), p[:1], 0.5), "observed"),
])
def test_invalid_inputs_raise_naming_the_argument(tiny, call, match):
    prior = prior_relevant(jax.random.key(0), tiny)
    with pytest.raises(ValueError, match=match):
        call(tiny, prior)


def test_relevance_must_be_boolean_or_01_and_ratings_need_an_explicit_binarise_step():
    """simrec.missing used to treat any nonzero entry (a rating, a count) as relevant, while
    simrec.metrics rejected it; both now take boolean or 0/1 only."""
    ratings = sp.csr_matrix(np.array([[0.0, 4.0, 2.5, 1.0], [5.0, 0.0, 0.0, 3.0]]))
    for call in (lambda m: observe_srs(jax.random.key(0), m, 0.5),
                 lambda m: split_per_user(jax.random.key(0), m, n_folds=1),
                 lambda m: split_users(jax.random.key(0), m, 0.5)):
        with pytest.raises(ValueError, match=r"observed|prior") as error:
            call(ratings)
        assert "binarize" in str(error.value) and "(matrix > 0)" in str(error.value)
        with pytest.raises(ValueError, match="boolean"):
            call(ratings.toarray())
    explicit = observe_srs(jax.random.key(0), ratings >= 2.5, 1.0)
    np.testing.assert_array_equal(explicit.toarray(), ratings.toarray() >= 2.5)
    zero_one = observe_srs(jax.random.key(0), (ratings > 0).astype(np.float32), 1.0)
    np.testing.assert_array_equal(zero_one.toarray(), ratings.toarray() > 0)


# ---- Steck's samplers (RecSys'13 §3.3) ----------------------------------------------------------

def _ratings_with_counts(counts, n_items: int, seed: int = 0) -> sp.csr_matrix:
    """Users with the given numbers of ratings in 1..5 on random distinct items."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((len(counts), n_items))
    for user, count in enumerate(counts):
        dense[user, rng.choice(n_items, count, replace=False)] = rng.integers(1, 6, count)
    return sp.csr_matrix(dense)


def test_split_steck_gives_exactly_n_test_ratings_to_each_eligible_user():
    counts = [0, 5, 19, 20, 21, 35, 60, 19, 100]
    ratings = _ratings_with_counts(counts, 120)
    train, test = split_steck(jax.random.key(3), ratings)
    eligible = np.array(counts) >= 20
    np.testing.assert_array_equal(np.diff(test.indptr), np.where(eligible, 10, 0))
    np.testing.assert_array_equal(np.diff(train.indptr), np.where(eligible, np.array(counts) - 10, 0))
    assert train.multiply(test).nnz == 0                                   # disjoint
    kept = sp.csr_matrix(ratings.toarray() * eligible[:, None])
    assert (train + test != kept).nnz == 0                                 # union, values kept
    assert train.has_sorted_indices and test.has_sorted_indices
    other_train, other_test = split_steck(jax.random.key(3), ratings.toarray())   # dense input
    assert (other_train != train).nnz == 0 and (other_test != test).nnz == 0
    assert (split_steck(jax.random.key(4), ratings)[1] != test).nnz > 0    # another key, another split
    train5, test5 = split_steck(jax.random.key(3), ratings, min_ratings=6, n_test=5)
    np.testing.assert_array_equal(np.diff(test5.indptr), np.where(np.array(counts) >= 6, 5, 0))


def test_split_steck_draws_test_items_uniformly():
    """Each of a user's 20 ratings lands in the test set with probability 10 / 20."""
    n_users = 2000
    ratings = sp.csr_matrix(np.tile(np.arange(1, 21, dtype=np.float64) % 5 + 1, (n_users, 1)))
    _, test = split_steck(jax.random.key(0), ratings)
    share = test.toarray().astype(bool).mean(axis=0)
    se = math.sqrt(0.25 / n_users)
    assert np.all(np.abs(share - 0.5) <= 4 * se)


def test_sample_unrated_draws_n_distinct_unrated_items_or_all_of_them():
    rated = _ratings_with_counts([0, 3, 10, 47, 50], 50).astype(bool)
    sample = sample_unrated(jax.random.key(1), rated, 8)
    assert sample.dtype == bool and sample.shape == rated.shape and sample.has_sorted_indices
    assert sample.multiply(rated).nnz == 0                                 # never a rated item
    np.testing.assert_array_equal(np.diff(sample.indptr), [8, 8, 8, 3, 0])  # all when fewer
    again = sample_unrated(jax.random.key(1), rated.toarray(), 8)
    assert (again != sample).nnz == 0                                      # deterministic per key
    assert (sample_unrated(jax.random.key(2), rated, 8) != sample).nnz > 0


def test_sample_unrated_is_uniform_over_the_unrated_items():
    n_users, n_items = 3000, 12
    rated = np.zeros((n_users, n_items), bool)
    rated[:, :2] = True                                                    # 10 unrated per user
    share = sample_unrated(jax.random.key(0), rated, 4).toarray()[:, 2:].mean(axis=0)
    se = math.sqrt(0.4 * 0.6 / n_users)
    assert np.all(np.abs(share - 0.4) <= 4 * se)


@pytest.mark.parametrize("call, match", [
    (lambda r: split_steck(jax.random.key(0), r, n_test=0), "n_test"),
    (lambda r: split_steck(jax.random.key(0), r, min_ratings=10, n_test=10), "min_ratings must exceed"),
    (lambda r: split_steck(jax.random.key(0), r.multiply(np.nan)), "NaN"),
    (lambda r: sample_unrated(jax.random.key(0), r.astype(bool), 0), "n must be"),
    (lambda r: sample_unrated(jax.random.key(0), r, 5), "rated"),
])
def test_steck_samplers_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(_ratings_with_counts([25, 30], 40))

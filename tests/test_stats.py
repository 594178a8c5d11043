"""simrec.stats against independent references: scipy / statsmodels, brute-force loops over
pairs, closed forms, and Monte Carlo coverage with tolerances from the binomial standard error."""
import gc
import itertools
import math

import jax
import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW

from simrec import stats


# ---- Pearson -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [3, 5, 7, 30, 192])
def test_pearson_matches_scipy(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        x = rng.normal(size=n)
        y = 0.6 * x + rng.normal(size=n)
        r, p = stats.pearson(x, y)
        expected = scipy_stats.pearsonr(x, y)
        assert r == pytest.approx(expected.statistic, rel=1e-12, abs=1e-14)
        assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)
        assert isinstance(r, float) and isinstance(p, float)


def test_pearson_closed_forms():
    r, p = stats.pearson([1, 2, 3, 4], [1, 3, 2, 4])  # Σdxdy = 4, Σdx² = Σdy² = 5
    assert r == pytest.approx(0.8, abs=1e-15)
    # n = 4: T_2 has P(|T| >= t) = 1 − t / sqrt(t² + 2), and t / sqrt(t² + 2) = |r|, so p = 1 − |r|
    assert p == pytest.approx(0.2, abs=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        r, p = stats.pearson(rng.normal(size=4), rng.normal(size=4))
        assert p == pytest.approx(1 - abs(r), abs=1e-12)
    assert stats.pearson([1, 2, 3], [2, 4, 6]) == (pytest.approx(1.0), 0.0)
    assert stats.pearson([1, 2, 3, 4], [8, 6, 4, 2]) == (pytest.approx(-1.0), 0.0)


def test_pearson_is_affine_invariant_and_vectorised():
    rng = np.random.default_rng(1)
    online = rng.normal(size=7)
    offline = online + rng.normal(size=(4, 7))
    r, p = stats.pearson(offline, online)  # leading axis broadcast against one online series
    assert r.shape == p.shape == (4,)
    for v in range(4):
        rv, pv = stats.pearson(offline[v], online)
        assert (r[v], p[v]) == (pytest.approx(rv, abs=1e-14), pytest.approx(pv, rel=1e-12))
        assert stats.pearson(3.0 * offline[v] - 5.0, online)[0] == pytest.approx(rv, abs=1e-12)
        assert stats.pearson(-offline[v], online)[0] == pytest.approx(-rv, abs=1e-12)
    huge = stats.pearson(offline[0] * 1e300, online)[0]  # no overflow in the products
    assert huge == pytest.approx(r[0], abs=1e-12)


@pytest.mark.parametrize("x, y, match", [
    ([1, 2, 3], [1, 2], "same length"),
    ([1, 2], [3, 4], "at least 3"),
    ([1, 1, 1], [1, 2, 3], "x is constant"),
    ([0.1] * 5, [1, 2, 3, 4, 5], "x is constant"),
    ([1, 2, 3], [4, 4, 4], "y is constant"),
    ([1, np.nan, 3], [1, 2, 3], "x contains NaN"),
    ([1, 2, 3], [1, np.inf, 3], "y contains ±inf"),
    (1.0, [1, 2, 3], "scalar"),
    (["a", "b", "c"], [1, 2, 3], "array of numbers"),
    (np.ones((2, 4)), np.ones((3, 4)), "do not broadcast"),
])
def test_pearson_rejects_bad_input(x, y, match):
    with pytest.raises(ValueError, match=match):
        stats.pearson(x, y)


# ---- Kendall and pair counting -------------------------------------------------------------------

def brute_pairs(x, y):
    """(concordant, discordant, tied x only, tied y only, tied both) by a double loop."""
    c = d = tx = ty = tb = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            tb += 1
        elif dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif dx == dy:
            c += 1
        else:
            d += 1
    return c, d, tx, ty, tb


def brute_tau_b(x, y):
    c, d, tx, ty, tb = brute_pairs(x, y)
    n0 = len(x) * (len(x) - 1) / 2
    return (c - d) / math.sqrt((n0 - tx - tb) * (n0 - ty - tb))


def brute_inversion_rate(a, b):
    disagree = compared = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
        if da == 0 and db == 0:
            continue
        compared += 1
        disagree += da != db  # one tie and one strict order, or opposite orders
    return disagree / compared


def test_kendall_hand_case():
    tau, _ = stats.kendall_tau([1, 2, 3], [1, 3, 2])  # C = 2, D = 1
    assert tau == pytest.approx(1 / 3, abs=1e-15)
    tau, _ = stats.kendall_tau([1, 1, 2, 3], [1, 2, 2, 3])  # C = 4, D = 0, one tie in each: 4/5
    assert tau == pytest.approx(4 / 5, abs=1e-15)


@pytest.mark.parametrize("n, levels", [(3, 10), (8, 3), (25, 1000), (40, 4), (192, 20)])
def test_kendall_matches_scipy_and_brute_force(n, levels):
    rng = np.random.default_rng(n)
    for _ in range(4):
        x = rng.integers(0, levels, size=n).astype(float)
        y = x + rng.integers(0, levels, size=n)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        tau, p = stats.kendall_tau(x, y)
        expected = scipy_stats.kendalltau(x, y, method="asymptotic")
        assert tau == pytest.approx(expected.statistic, abs=1e-12)
        assert tau == pytest.approx(brute_tau_b(x, y), abs=1e-12)
        assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)


def test_kendall_rejects_bad_input():
    for x, y, match in [([1, 1, 1], [1, 2, 3], "x is constant"), ([1, 2, 3], [5, 5, 5], "y is constant"),
                        ([1, 2], [1, 2], "at least 3"), ([1, 2, 3], [1, 2, 3, 4], "same length"),
                        (np.ones((2, 3)), np.ones((2, 3)), "1-D"), ([1, 2, np.nan], [1, 2, 3], "NaN")]:
        with pytest.raises(ValueError, match=match):
            stats.kendall_tau(x, y)


@pytest.mark.parametrize("a, b, expected", [
    ([1, 2, 3], [1, 2, 3], 0.0),
    ([1, 2, 3], [3, 2, 1], 1.0),
    ([1, 1, 2], [5, 6, 7], 1 / 3),     # tied on a only: a disagreement
    ([1, 2, 3], [5, 5, 7], 1 / 3),     # tied on b only: a disagreement
    ([1, 1, 2], [5, 5, 7], 0.0),       # tied on both: skipped
    ([1, 1, 2, 0], [5, 5, 7, 6], 2 / 5),    # {0,1} skipped; {0,3}, {1,3} inverted
])
def test_inversion_rate_hand_cases(a, b, expected):
    assert stats.pairwise_inversion_rate(a, b) == pytest.approx(expected, abs=1e-15)
    assert brute_inversion_rate(np.asarray(a), np.asarray(b)) == pytest.approx(expected, abs=1e-15)


def test_inversion_rate_matches_brute_force_with_ties():
    rng = np.random.default_rng(7)
    for n, levels in [(2, 2), (5, 2), (12, 3), (40, 5), (192, 30)]:
        for _ in range(3):
            a = rng.integers(0, levels, size=n).astype(float)
            b = np.where(rng.random(n) < 0.5, a, rng.integers(0, levels, size=n))
            if brute_pairs(a, b)[4] == n * (n - 1) // 2:
                continue
            assert stats.pairwise_inversion_rate(a, b) == pytest.approx(brute_inversion_rate(a, b), abs=1e-14)


def test_inversion_rate_is_one_minus_tau_over_two_without_ties():
    rng = np.random.default_rng(8)
    a = rng.normal(size=60)
    b = a + rng.normal(size=60)
    tau, _ = stats.kendall_tau(a, b)
    assert stats.pairwise_inversion_rate(a, b) == pytest.approx((1 - tau) / 2, abs=1e-14)


def test_inversion_rate_on_many_models_matches_a_vectorised_count():
    # n = 3000 (4.5M pairs, heavy ties): the O(n log n) counts against every pair's signs at once
    rng = np.random.default_rng(9)
    a = rng.integers(0, 40, size=3000).astype(float)
    b = np.where(rng.random(3000) < 0.3, a, rng.integers(0, 40, size=3000)).astype(float)
    i, j = np.triu_indices(a.size, 1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    compared = ~((da == 0) & (db == 0))
    expected = np.count_nonzero(compared & (da != db)) / np.count_nonzero(compared)
    assert stats.pairwise_inversion_rate(a, b) == pytest.approx(expected, abs=1e-15)
    constant = np.zeros(3000)
    assert stats.pairwise_inversion_rate(constant, b) == pytest.approx(
        1.0, abs=1e-15)                                    # every compared pair is tied on a only


def test_inversion_rate_rejects_bad_input():
    with pytest.raises(ValueError, match="tied on both"):
        stats.pairwise_inversion_rate([1, 1, 1], [2, 2, 2])
    with pytest.raises(ValueError, match="at least 2"):
        stats.pairwise_inversion_rate([1], [2])
    with pytest.raises(ValueError, match="same length"):
        stats.pairwise_inversion_rate([1, 2], [2, 3, 4])


# ---- Means, intervals, one-sided tests -------------------------------------------------------------

@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_mean_ci_matches_statsmodels(level):
    rng = np.random.default_rng(10)
    x = rng.exponential(size=50) - 0.8
    descr = DescrStatsW(x)
    mean, low, high, se = stats.mean_ci(x, level)
    assert mean == pytest.approx(x.mean(), abs=1e-15)
    assert se == pytest.approx(descr.std_mean, rel=1e-12)
    assert (low, high) == pytest.approx(descr.zconfint_mean(alpha=1 - level), rel=1e-12)
    _, low, high, _ = stats.mean_ci(x, level, method="t")
    assert (low, high) == pytest.approx(descr.tconfint_mean(alpha=1 - level), rel=1e-12)


def test_mean_ci_is_vectorised_over_every_other_axis():
    rng = np.random.default_rng(11)
    samples = rng.normal(size=(3, 20, 4))
    out = stats.mean_ci(samples, 0.95, "t", axis=1)
    assert all(v.shape == (3, 4) for v in out)
    for i, j in itertools.product(range(3), range(4)):
        single = stats.mean_ci(samples[i, :, j], 0.95, "t")
        assert tuple(v[i, j] for v in out) == pytest.approx(single, rel=1e-12)


def test_nan_policy_omit_equals_dropping_nan():
    rng = np.random.default_rng(12)
    samples = rng.normal(size=(2, 30))
    samples[0, [3, 7]] = np.nan
    samples[1, 0] = np.nan
    omitted = stats.mean_ci(samples, nan_policy="omit")
    p = stats.one_sided_p(samples, nan_policy="omit")
    for row in range(2):
        clean = samples[row][~np.isnan(samples[row])]
        assert tuple(v[row] for v in omitted) == pytest.approx(stats.mean_ci(clean), rel=1e-12)
        assert p[row] == pytest.approx(stats.one_sided_p(clean), rel=1e-12)
    with pytest.raises(ValueError, match="nan_policy='omit'"):
        stats.mean_ci(samples)
    with pytest.raises(ValueError, match="nan_policy='omit'"):
        stats.one_sided_p(samples)


def coverage(n, method, replications=20_000, level=0.99, seed=0):
    """Share of replications of n N(1, 2²) samples whose interval contains the mean 1."""
    samples = 1.0 + 2.0 * np.random.default_rng(seed).normal(size=(replications, n))
    _, low, high, _ = stats.mean_ci(samples, level, method)
    return np.mean((low <= 1.0) & (1.0 <= high))


@pytest.mark.parametrize("n, method", [(5, "normal"), (400, "normal"), (5, "t")])
def test_ci_coverage_monte_carlo(n, method):
    # (mean − μ)/se follows T_{n−1} exactly for normal samples, so the normal interval's coverage is
    # P(|T_{n−1}| <= z_{0.995}) (about 0.938 at n = 5, 0.9895 at n = 400) and the t interval's is 0.99.
    replications, level = 20_000, 0.99
    z = scipy_stats.norm.ppf((1 + level) / 2)
    expected = level if method == "t" else 2 * scipy_stats.t.cdf(z, n - 1) - 1
    se = math.sqrt(expected * (1 - expected) / replications)
    assert abs(coverage(n, method, replications, level) - expected) <= 4 * se


def test_normal_ci_undercovers_small_samples():
    # the test above at n = 5 can tell the normal interval from an exact one: 0.938 vs 0.99
    se = math.sqrt(0.99 * 0.01 / 20_000)
    assert coverage(5, "normal", seed=1) < 0.99 - 10 * se


def test_one_sided_p_matches_z_test_and_the_interval():
    rng = np.random.default_rng(13)
    samples = rng.normal(0.05, 1.0, size=(200, 100))
    p_greater = stats.one_sided_p(samples)
    p_less = stats.one_sided_p(samples, "less")
    mean = samples.mean(axis=1)
    se = samples.std(axis=1, ddof=1) / 10
    assert p_greater == pytest.approx(1 - scipy_stats.norm.cdf(mean / se), abs=1e-12)
    assert p_greater + p_less == pytest.approx(np.ones(200), abs=1e-12)
    z_test = np.array([DescrStatsW(row).ztest_mean(0, alternative="larger")[1] for row in samples[:5]])
    assert p_greater[:5] == pytest.approx(z_test, rel=1e-10)
    _, low, _, _ = stats.mean_ci(samples, 0.99)
    np.testing.assert_array_equal(low > 0, p_greater < 0.005)
    assert 0 < np.sum(low > 0) < 200  # both outcomes occur, so the equality above is informative


def test_one_sided_p_zero_spread():
    assert stats.one_sided_p(np.zeros(10)) == 0.5
    assert stats.one_sided_p(np.full(10, 2.0)) == 0.0
    assert stats.one_sided_p(np.full(10, -2.0)) == 1.0
    assert stats.one_sided_p(np.full(10, -2.0), "less") == 0.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(level=1.0), "level must be a finite number in \\(0, 1\\)"),
    (dict(level=0.0), "level must be a finite number in \\(0, 1\\)"),
    (dict(level=np.nan), "level"),
    (dict(level=[0.9, 0.99]), "level"),
    (dict(method="bootstrap"), "method must be one of"),
    (dict(nan_policy="propagate"), "nan_policy must be one of"),
    (dict(axis=3), "axis"),
])
def test_mean_ci_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        stats.mean_ci(np.ones((2, 5)), **kwargs)


def test_mean_ci_and_p_reject_bad_samples():
    for samples, kwargs, match in [([1.0], {}, "at least 2"), ([1.0, np.nan], dict(nan_policy="omit"), "at least 2"),
                                   ([1.0, np.inf, 2.0], dict(nan_policy="omit"), "±inf"), (3.0, {}, "scalar")]:
        with pytest.raises(ValueError, match=match):
            stats.mean_ci(samples, **kwargs)
        with pytest.raises(ValueError, match=match):
            stats.one_sided_p(samples, **kwargs)
    with pytest.raises(ValueError, match="alternative must be one of"):
        stats.one_sided_p([1.0, 2.0], "two-sided")


# ---- Sensitivity summary --------------------------------------------------------------------------

def test_sensitivity_hand_made_settings():
    base = np.array([-1.0, 1.0, -1.0, 1.0])  # mean 0, se = sqrt(4/3)/2
    differences = [base + 5.0,                 # improving, clearly significant
                   base + 0.5,                 # improving, not significant, mean > 0
                   base - 0.5,                 # improving, mean < 0
                   np.zeros(6),                # A/A on one log: Δ ≡ 0, CI [0, 0] is not strictly positive
                   base + 5.0,                 # harmful online but significant offline: a false positive
                   base - 5.0]                 # harmful, not significant
    truly = np.array([True, True, True, False, False, False])
    out = stats.sensitivity_summary(differences, truly, 0.99)
    se = math.sqrt(4 / 3) / 2
    z = scipy_stats.norm.ppf(0.995)
    np.testing.assert_allclose(out.mean, [5, 0.5, -0.5, 0, 5, -5], atol=1e-15)
    np.testing.assert_allclose(out.se, [se, se, se, 0, se, se], rtol=1e-12)
    np.testing.assert_allclose(out.low, out.mean - z * out.se, rtol=1e-12)
    np.testing.assert_array_equal(out.significant, [True, False, False, False, True, False])
    assert out.p_value[3] == 0.5
    assert out.p_value[1] == pytest.approx(scipy_stats.norm.sf(0.5 / se), rel=1e-12)
    assert out.tpr == pytest.approx(1 / 3)
    assert out.fpr == pytest.approx(1 / 3)
    assert out.sign_agreement == pytest.approx(2 / 3)
    assert out.mean_p_value == pytest.approx(np.mean(out.p_value[:3]), rel=1e-12)
    assert (out.n_positive, out.n_negative) == (3, 3)


def test_sensitivity_mask_and_list_agree_with_mean_ci():
    rng = np.random.default_rng(14)
    lengths = [30, 12, 25, 2]
    rows = [rng.normal(loc, 1.0, size=n) for loc, n in zip([0.8, 0.1, -0.3, 2.0], lengths)]
    padded = np.full((4, 30), np.inf)  # masked-out entries are ignored whatever they hold
    mask = np.zeros((4, 30), bool)
    for s, row in enumerate(rows):
        padded[s, :row.size], mask[s, :row.size] = row, True
    truly = np.array([True, True, False, False])
    from_list = stats.sensitivity_summary(rows, truly, 0.95)
    from_mask = stats.sensitivity_summary(padded, truly, 0.95, mask=mask)
    for s, row in enumerate(rows):
        mean, low, high, se = stats.mean_ci(row, 0.95)
        for out in (from_list, from_mask):
            assert (out.mean[s], out.low[s], out.high[s], out.se[s]) == pytest.approx((mean, low, high, se), rel=1e-12)
            assert out.p_value[s] == pytest.approx(stats.one_sided_p(row), rel=1e-12)
    assert from_list.tpr == from_mask.tpr and from_list.fpr == from_mask.fpr


def test_sensitivity_empty_group_and_nan_policy():
    rows = [np.array([1.0, -2.0, np.nan, 3.0]), np.array([0.1, -0.1, 0.2])]
    out = stats.sensitivity_summary(rows, np.array([False, False]), nan_policy="omit")
    assert math.isnan(out.tpr) and math.isnan(out.mean_p_value) and math.isnan(out.sign_agreement)
    assert out.fpr == 0.0 and out.n_positive == 0
    with pytest.raises(ValueError, match="nan_policy='omit'"):
        stats.sensitivity_summary(rows, np.array([True, False]))


@pytest.mark.parametrize("differences, truly, kwargs, match", [
    ([np.ones(3)], np.array([1]), {}, "truly_positive must be a bool"),
    ([np.ones(3)], np.array([True, False]), {}, "one entry per setting"),
    ([np.ones(3)], np.array([True]), dict(mask=np.ones((1, 3), bool)), "needs no mask"),
    (np.ones((2, 3)), np.array([True, False]), dict(mask=np.ones((2, 2), bool)), "mask must be a bool"),
    (np.ones((2, 3)), np.array([True, False]), dict(mask=np.ones((2, 3))), "mask must be a bool"),
    (np.ones(3), np.array([True]), {}, "2-D array"),
    ([], np.array([], bool), {}, "at least one setting"),
    ([np.ones((2, 2))], np.array([True]), {}, "differences\\[0\\] must be a 1-D"),
    ([np.ones(1)], np.array([True]), {}, "at least 2"),
    ([np.ones(3)], np.array([True]), dict(level=99), "level"),
])
def test_sensitivity_rejects_bad_input(differences, truly, kwargs, match):
    with pytest.raises(ValueError, match=match):
        stats.sensitivity_summary(differences, truly, **kwargs)


# ---- Bias / RMSE and Holm --------------------------------------------------------------------------

def test_bias_rmse():
    bias, rmse = stats.bias_rmse([1.0, 3.0], 1.0)  # errors 0 and 2
    assert (bias, rmse) == (1.0, pytest.approx(math.sqrt(2.0)))
    rng = np.random.default_rng(15)
    truth = np.array([0.0, 1.0, -2.0])
    estimates = truth[:, None] + rng.normal(0.3, 1.0, size=(3, 50))
    bias, rmse = stats.bias_rmse(estimates, truth)
    for m in range(3):
        errors = estimates[m] - truth[m]
        assert bias[m] == pytest.approx(errors.mean(), abs=1e-14)
        assert rmse[m] ** 2 == pytest.approx(bias[m] ** 2 + errors.var(), rel=1e-12)
    bias_t, rmse_t = stats.bias_rmse(estimates.T, truth, axis=0)
    np.testing.assert_allclose((bias_t, rmse_t), (bias, rmse), rtol=1e-14)
    for estimates, truth, match in [(np.ones((3, 5)), np.ones(5), "must broadcast"),
                                    (np.ones((3, 5)), np.ones((2, 3)), "must broadcast"),
                                    ([1.0, np.nan], 0.0, "NaN"), ([1.0, 2.0], np.inf, "truth"),
                                    (np.ones((3, 0)), 0.0, "no replications"), (1.0, 1.0, "scalar")]:
        with pytest.raises(ValueError, match=match):
            stats.bias_rmse(estimates, truth)


@pytest.fixture
def frozen_gc():
    """statsmodels' Holm runs a full ``gc.collect()`` per family, which in a test process holding
    thousands of objects costs about a second each; freezing them leaves the collector nothing old
    to walk (values are unaffected)."""
    gc.freeze()
    yield
    gc.unfreeze()


def test_holm_matches_statsmodels(frozen_gc):
    rng = np.random.default_rng(16)
    for m in [1, 2, 5, 40]:
        for alpha in [0.01, 0.05]:
            p = np.concatenate([rng.uniform(0, 0.02, m // 2), rng.uniform(0, 1, m - m // 2)])
            reject, adjusted = stats.holm_bonferroni(p, alpha)
            expected_reject, expected_adjusted, _, _ = multipletests(p, alpha, method="holm")
            np.testing.assert_array_equal(reject, expected_reject)
            np.testing.assert_allclose(adjusted, expected_adjusted, rtol=1e-12)
    families = rng.uniform(0, 0.05, size=(3, 6))
    reject, adjusted = stats.holm_bonferroni(families, 0.05)
    for row in range(3):
        np.testing.assert_allclose(adjusted[row], multipletests(families[row], 0.05, method="holm")[1], rtol=1e-12)


def test_holm_hand_case():
    reject, adjusted = stats.holm_bonferroni([0.01, 0.04, 0.03, 0.5], 0.05)
    # sorted 0.01, 0.03, 0.04, 0.5 -> 4·0.01, max(.04, 3·0.03), max(.09, 2·0.04), max(.09, 0.5)
    np.testing.assert_allclose(adjusted, [0.04, 0.09, 0.09, 0.5])
    np.testing.assert_array_equal(reject, [True, False, False, False])


@pytest.mark.parametrize("p, alpha, match", [
    ([0.1, 1.2], 0.05, "in \\[0, 1\\]"), ([0.1, np.nan], 0.05, "NaN"), ([], 0.05, "at least one"),
    ([0.1], 1.5, "alpha must be a finite number"), ([0.1], 0, "alpha"),
])
def test_holm_rejects_bad_input(p, alpha, match):
    with pytest.raises(ValueError, match=match):
        stats.holm_bonferroni(p, alpha)


def test_sensitivity_from_moments_equals_the_summary_of_the_samples():
    rng = np.random.default_rng(11)
    differences = rng.normal(rng.normal(0.0, 0.3, (40, 1)), 1.0, (40, 60))
    truly = rng.uniform(size=40) < 0.5
    full = stats.sensitivity_summary(differences, truly)
    mean = differences.mean(1)
    se = differences.std(1, ddof=1) / np.sqrt(60)
    moments = stats.sensitivity_from_moments(mean, se, truly)
    for name in ("mean", "low", "high", "se", "p_value", "significant"):
        np.testing.assert_allclose(getattr(moments, name), getattr(full, name), rtol=1e-12, atol=1e-15)
    for name in ("tpr", "fpr", "mean_p_value", "sign_agreement", "n_positive", "n_negative"):
        assert getattr(moments, name) == pytest.approx(getattr(full, name), rel=1e-12)
    with pytest.raises(ValueError, match="standard_error must be >= 0"):
        stats.sensitivity_from_moments(mean, -se, truly)
    with pytest.raises(ValueError, match="one entry per setting"):
        stats.sensitivity_from_moments(mean, se[:3], truly)


def test_z_test_matches_scipy_and_the_zero_se_limit():
    estimate, se = np.array([0.3, -0.2, 0.0, 1.0]), np.array([0.1, 0.4, 0.2, 0.0])
    np.testing.assert_allclose(stats.z_test(estimate[:3], se[:3]), scipy_stats.norm.sf(estimate[:3] / se[:3]))
    np.testing.assert_allclose(stats.z_test(estimate[:3], se[:3], "less"), scipy_stats.norm.cdf(estimate[:3] / se[:3]))
    assert stats.z_test(1.0, 0.0) == 0.0 and stats.z_test(0.0, 0.0) == 0.5
    two_arms = stats.z_test(5.2 - 5.0, math.hypot(0.05, 0.06))        # the difference of two A/B arms
    assert two_arms == pytest.approx(scipy_stats.norm.sf(0.2 / math.hypot(0.05, 0.06)))
    with pytest.raises(ValueError, match="alternative"):
        stats.z_test(1.0, 1.0, "two-sided")


# ---- noise-aware paired winner (Steck §3.3) ------------------------------------------------------

def test_paired_winner_names_a_clear_winner_either_way():
    parts = [0.05, 0.06, 0.055, 0.045, 0.05]          # mean 0.052, se 0.0025: z = 20.8
    verdict = stats.paired_winner(parts, names=("MF-RMSE", "AllRank"))
    assert verdict.winner == "MF-RMSE"
    assert verdict.difference == pytest.approx(np.mean(parts), abs=1e-15)
    assert verdict.se == pytest.approx(np.std(parts, ddof=1) / math.sqrt(5), rel=1e-12)
    assert verdict.z == pytest.approx(verdict.difference / verdict.se, rel=1e-12)
    assert stats.paired_winner(-np.asarray(parts), names=("MF-RMSE", "AllRank")).winner == "AllRank"


def test_paired_winner_is_a_tie_within_z_standard_errors():
    parts = [0.03, -0.01, 0.02, 0.0, 0.01]            # mean 0.01, se 0.00707: z = 1.41
    verdict = stats.paired_winner(parts)
    assert verdict.winner == stats.TIE and verdict.z == pytest.approx(math.sqrt(2), rel=1e-12)
    assert stats.paired_winner(parts, z=1.0).winner == "A"      # a looser threshold decides


def test_paired_winner_exactly_at_the_threshold_is_a_tie():
    # deviations (3, -3, 1, -1, 0): Σ dev² = 20, se = sqrt(20 / (4 · 5)) = 1 exactly; mean 2
    parts = [5.0, -1.0, 3.0, 1.0, 2.0]
    verdict = stats.paired_winner(parts, z=2.0)
    assert (verdict.difference, verdict.se, verdict.z) == (2.0, 1.0, 2.0)
    assert verdict.winner == stats.TIE                          # strict: |mean| > z se to win
    assert stats.paired_winner(parts, z=1.999).winner == "A"
    assert stats.paired_winner([-p for p in parts], z=1.999).winner == "B"


def test_paired_winner_zero_spread():
    assert stats.paired_winner([0.1] * 5).winner == "A"         # se = 0: any non-zero mean wins
    assert stats.paired_winner([0.1] * 5).z == math.inf
    identical = stats.paired_winner([0.0] * 5)
    assert (identical.winner, identical.z) == (stats.TIE, 0.0)


@pytest.mark.parametrize("parts, kwargs, match", [
    ([0.1], {}, "at least 2 parts"),
    ([], {}, "at least 2 parts"),
    ([0.1, np.nan, 0.2], {}, "NaN"),
    ([0.1, np.inf, 0.2], {}, "inf"),
    ([[0.1, 0.2], [0.3, 0.4]], {}, "1-D"),
    ([0.1, 0.2], {"names": ("A", "A")}, "distinct"),
    ([0.1, 0.2], {"names": ("A", "tie")}, "distinct"),
    ([0.1, 0.2], {"z": 0.0}, "z must be"),
    ([0.1, 0.2], {"z": np.nan}, "z must be"),
])
def test_paired_winner_rejects_bad_input(parts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        stats.paired_winner(parts, **kwargs)


def test_user_parts_are_disjoint_balanced_and_cover_the_evaluated_users():
    evaluated = np.arange(23) % 4 != 0                       # 17 evaluated users
    part = stats.user_parts(jax.random.key(0), evaluated, 5)
    assert part.dtype == np.int64
    assert (part[~evaluated] == -1).all() and (part[evaluated] >= 0).all()
    sizes = np.bincount(part[evaluated], minlength=5)
    assert sizes.sum() == 17 and sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(part, stats.user_parts(jax.random.key(0), evaluated, 5))
    assert (part != stats.user_parts(jax.random.key(1), evaluated, 5)).any()


def test_part_means_are_the_means_of_each_part_and_skip_users_in_none():
    values = np.where(np.arange(9) % 3 == 0, np.nan, np.arange(9.0))
    part = np.array([-1, 0, 1, -1, 0, 1, -1, 0, -1])          # NaN users in no part; part 2 empty
    means = stats.part_means(values, part, 3)
    np.testing.assert_allclose(means[:2], [np.mean([1.0, 4.0, 7.0]), np.mean([2.0, 5.0])])
    assert np.isnan(means[2])


@pytest.mark.parametrize("call, match", [
    (lambda: stats.user_parts(jax.random.key(0), np.ones(4), 5), "1-D bool mask"),
    (lambda: stats.user_parts(jax.random.key(0), np.ones(4, bool), 1), "parts must be"),
    (lambda: stats.part_means(np.ones(3), np.zeros(4, int), 2), "one length"),
    (lambda: stats.part_means(np.ones(3), np.array([0, 2, 1]), 2), r"-1\.\.1"),
    (lambda: stats.part_means(np.array([1.0, np.nan]), np.array([0, 1]), 2), "NaN"),
])
def test_user_parts_and_part_means_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- wrappers on scipy / statsmodels: agreement with the direct call and independent references ---

def test_pearson_agrees_with_scipy_on_a_batch_and_snaps_rounding_to_unit_r():
    rng = np.random.default_rng(20)
    x = rng.normal(size=(6, 11))
    y = 0.4 * x + rng.normal(size=(6, 11))
    r, p = stats.pearson(x, y)
    direct = scipy_stats.pearsonr(x, y, axis=-1)
    np.testing.assert_array_equal(r, direct.statistic)
    np.testing.assert_array_equal(p, direct.pvalue)
    # exactly proportional series whose r rounds to 1 − 2 ulp: reported as r = ±1, p = 0
    assert stats.pearson([0.1, 0.2, 0.3], [0.3, 0.6, 0.9]) == (1.0, 0.0)
    assert stats.pearson([0.1, 0.2, 0.3, 0.7], [-0.3, -0.6, -0.9, -2.1]) == (-1.0, 0.0)


def test_kendall_agrees_with_scipy_kendalltau():
    rng = np.random.default_rng(21)
    for n in (5, 60):
        x, y = rng.integers(0, 4, n).astype(float), rng.normal(size=n)
        direct = scipy_stats.kendalltau(x, y, variant="b", method="asymptotic")
        tau, p = stats.kendall_tau(x, y)
        assert tau == pytest.approx(direct.statistic, abs=1e-15) and p == direct.pvalue
    # a perfect order is exactly ±1 (scipy's division gives 1 − 1 ulp for six models)
    assert stats.kendall_tau(np.arange(6.0), np.arange(6.0) ** 2)[0] == 1.0
    assert stats.kendall_tau(np.arange(6.0), -np.arange(6.0))[0] == -1.0


def brute_holm(p, alpha):
    """Holm's procedure by its definition: step down through the sorted p-values."""
    m, order = len(p), sorted(range(len(p)), key=lambda i: p[i])
    reject, adjusted, running = [False] * m, [0.0] * m, 0.0
    still = True
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
        still = still and p[i] <= alpha / (m - k)
        reject[i] = still
    return np.array(reject), np.array(adjusted)


def test_holm_matches_the_step_down_definition():
    rng = np.random.default_rng(22)
    for m in (1, 3, 12):
        p = np.where(rng.random(m) < 0.5, rng.uniform(0, 0.01, m), rng.uniform(0, 1, m))
        reject, adjusted = stats.holm_bonferroni(p, 0.05)
        expected_reject, expected_adjusted = brute_holm(list(p), 0.05)
        np.testing.assert_array_equal(reject, expected_reject)
        np.testing.assert_allclose(adjusted, expected_adjusted, rtol=1e-14)


# ---- partial correlation ----------------------------------------------------------------------------

def brute_partial(x, y, z):
    """Pearson's r of the least-squares residuals of x and y on (1, z), and its t-test on n − k − 2 df."""
    design = np.column_stack([np.ones(len(x)), z])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    r = rx @ ry / math.sqrt((rx @ rx) * (ry @ ry))
    df = len(x) - design.shape[1] - 1
    return r, 2 * scipy_stats.t.sf(abs(r) * math.sqrt(df / (1 - r * r)), df), df


@pytest.mark.parametrize("n, k", [(6, 1), (30, 1), (40, 3)])
def test_partial_correlation_matches_residuals_and_statsmodels(n, k):
    from statsmodels.regression.linear_model import OLS
    rng = np.random.default_rng(n + k)
    z = rng.normal(size=(n, k))
    x = z @ rng.normal(size=k) + rng.normal(size=n)
    y = 0.5 * x + z @ rng.normal(size=k) + rng.normal(size=n)
    r, p, df = stats.partial_correlation(x, y, z[:, 0] if k == 1 else z)
    expected_r, expected_p, expected_df = brute_partial(x, y, z)
    assert df == expected_df == n - k - 2 and isinstance(df, int)
    assert r == pytest.approx(expected_r, abs=1e-12)
    assert p == pytest.approx(expected_p, rel=1e-9)
    fit = OLS(y, np.column_stack([np.ones(n), x, z])).fit()                 # the direct library call
    assert p == fit.pvalues[1] and r == pytest.approx(fit.tvalues[1] / math.sqrt(fit.tvalues[1] ** 2 + df))


def test_partial_correlation_holds_its_level_under_the_null():
    # x and y independent given z (both driven by z): P(p < 0.05) = 0.05 with n − k − 2 df; the
    # tolerance is 4 binomial SE. Pearson's n − 2 df on the residuals would reject ~0.07 here.
    rng = np.random.default_rng(23)
    n, k, reps = 8, 2, 2000
    hits = 0
    for _ in range(reps):
        z = rng.normal(size=(n, k))
        x, y = z.sum(1) + rng.normal(size=n), z[:, 0] - z[:, 1] + rng.normal(size=n)
        hits += stats.partial_correlation(x, y, z)[1] < 0.05
    assert abs(hits / reps - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / reps)


@pytest.mark.parametrize("x, y, z, match", [
    ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [1, 1, 1, 1, 1], "constant or collinear"),
    ([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5], [[1, 2], [2, 4], [3, 6], [4, 8], [5, 10], [6, 12]], "collinear"),
    ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [2, 4, 6, 8, 10], "x is an exact linear function"),
    ([2, 1, 4, 3, 5], [3, 5, 7, 9, 11], [1, 2, 3, 4, 5], "y is an exact linear function"),
    ([1, 2, 3], [2, 1, 3], [1, 2, 4], "at least k \\+ 3"),
    ([1, 2, 3, 4], [2, 1, 3, 4], [1, 2, 4], "controls must be"),
    ([1, 2, 3, 4], [2, 1, 3, 4], [1, 2, np.nan, 4], "controls contains NaN"),
    ([1, 2, np.inf, 4], [2, 1, 3, 4], [1, 2, 3, 5], "x contains ±inf"),
])
def test_partial_correlation_rejects_bad_input(x, y, z, match):
    with pytest.raises(ValueError, match=match):
        stats.partial_correlation(x, y, z)


# ---- Newey–West (HAC) standard error ------------------------------------------------------------------

def brute_newey_west(x, lags):
    """Bartlett-weighted autocovariances of the deviations, with the n/(n − 1) correction."""
    n, e = len(x), np.asarray(x) - np.mean(x)
    gamma = [sum(e[t] * e[t - l] for t in range(l, n)) / n for l in range(lags + 1)]
    return math.sqrt((gamma[0] + 2 * sum((1 - l / (lags + 1)) * gamma[l] for l in range(1, lags + 1))) / (n - 1))


def ar1(rng, shape, rho):
    """Stationary AR(1) series with unit innovations along the last axis."""
    out = np.empty(shape)
    out[..., 0] = rng.normal(size=shape[:-1]) / math.sqrt(1 - rho * rho)
    for t in range(1, shape[-1]):
        out[..., t] = rho * out[..., t - 1] + rng.normal(size=shape[:-1])
    return out


def test_hac_se_matches_statsmodels_and_the_bartlett_formula():
    from statsmodels.regression.linear_model import OLS
    rng = np.random.default_rng(24)
    series = ar1(rng, (3, 28), 0.5)
    se = stats.hac_mean_se(series)                                         # default lags: 3 for 28 days
    assert se.shape == (3,) and stats.newey_west_lags(28) == 3
    for row in range(3):
        direct = OLS(series[row], np.ones(28)).fit(cov_type="HAC", cov_kwds={"maxlags": 3, "use_correction": True})
        assert se[row] == direct.bse[0]
        assert se[row] == pytest.approx(brute_newey_west(series[row], 3), rel=1e-12)
        assert stats.hac_mean_se(series[row], 0) == pytest.approx(series[row].std(ddof=1) / math.sqrt(28), rel=1e-12)
    np.testing.assert_array_equal(stats.hac_mean_se(series.T, axis=0), se)
    mean, low, high, se_ci = stats.mean_ci(series, 0.95, "hac")
    np.testing.assert_allclose(se_ci, se, rtol=1e-15)
    np.testing.assert_allclose(high - mean, scipy_stats.norm.ppf(0.975) * se, rtol=1e-12)
    np.testing.assert_allclose(mean - low, high - mean, rtol=1e-12)


def test_hac_interval_covers_an_autocorrelated_mean_where_the_iid_one_does_not():
    # AR(1), rho = 0.6, 200 days: the i.i.d. se understates sd(mean) by sqrt((1 + rho)/(1 − rho)) = 2,
    # so the 95 % normal interval covers with P(|Z| < 1.96/2) = 0.67 (checked within 4 binomial SE of
    # 2,000 replications). Newey–West with 4 lags still under-covers somewhat at this persistence (its
    # bandwidth is small; Andrews, Econometrica 1991) — 0.87 on this seed — but recovers most of the
    # gap: at least 0.84, and beyond the i.i.d. interval by more than 4 SE.
    rng = np.random.default_rng(25)
    series = ar1(rng, (2000, 200), 0.6)
    tolerance = 4 * math.sqrt(0.25 / 2000)
    _, low, high, _ = stats.mean_ci(series, 0.95, "normal")
    iid = np.mean((low <= 0) & (0 <= high))
    assert abs(iid - (2 * scipy_stats.norm.cdf(1.96 / 2) - 1)) <= tolerance
    _, low, high, _ = stats.mean_ci(series, 0.95, "hac")
    assert np.mean((low <= 0) & (0 <= high)) >= 0.84 > iid + tolerance


@pytest.mark.parametrize("call, match", [
    (lambda: stats.mean_ci([1.0, 2.0, 3.0], method="normal", lags=1), "lags applies to method='hac'"),
    (lambda: stats.mean_ci([1.0, np.nan, 3.0, 4.0], method="hac", nan_policy="omit"), "every sample"),
    (lambda: stats.hac_mean_se([1.0, 2.0, 3.0], 3), "lags must be below"),
    (lambda: stats.hac_mean_se([1.0, 2.0, 3.0], -1), "lags must be"),
    (lambda: stats.hac_mean_se([1.0, np.nan, 3.0]), "NaN"),
    (lambda: stats.hac_mean_se([1.0]), "at least 2"),
    (lambda: stats.newey_west_lags(0), "n must be"),
])
def test_hac_rejects_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_newey_west_lags_rule():
    assert [stats.newey_west_lags(n) for n in (1, 2, 7, 28, 100, 1000)] == [0, 1, 2, 3, 4, 6]


# ---- proportion intervals and McNemar -------------------------------------------------------------------

def wilson(k, n, level):
    z = scipy_stats.norm.ppf((1 + level) / 2)
    centre, half = k / n + z * z / (2 * n), z * math.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def test_proportion_ci_matches_statsmodels_and_wilsons_formula():
    from statsmodels.stats.proportion import proportion_confint
    k, n = np.array([0, 3, 17, 40]), np.array([40, 40, 40, 40])
    low, high = stats.proportion_ci(k, n)
    direct = proportion_confint(k, n, alpha=0.05, method="wilson")
    np.testing.assert_allclose(low, direct[0], rtol=1e-15, atol=1e-15)        # k = 0: exactly 0 here
    np.testing.assert_allclose(high, direct[1], rtol=1e-15)
    for i in range(4):
        assert (low[i], high[i]) == pytest.approx(wilson(k[i], n[i], 0.95), rel=1e-12, abs=1e-15)
    assert low[0] == 0.0 and high[0] > 0.0                           # k = 0: not degenerate
    assert stats.proportion_ci(5, 5, 0.9)[1] == pytest.approx(1.0) and stats.proportion_ci(5, 5, 0.9)[0] < 1
    clopper = stats.proportion_ci(3, 40, 0.95, "beta")
    assert clopper == pytest.approx(proportion_confint(3, 40, alpha=0.05, method="beta"), rel=1e-12)


@pytest.mark.parametrize("args, match", [
    ((3, 2), "0 <= successes <= trials"), ((1, 0), "trials >= 1"), ((1.5, 4), "whole counts"),
    ((-1, 4), "whole counts"), ((1, 4, 1.2), "level"), ((1, 4, 0.95, "exact"), "method must be one of"),
    (([1, 2], [3, 4, 5]), "do not broadcast"),
])
def test_proportion_ci_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        stats.proportion_ci(*args)


def test_sensitivity_reports_wilson_intervals_of_its_rates():
    rng = np.random.default_rng(26)
    differences = rng.normal(rng.normal(0.1, 0.3, (30, 1)), 1.0, (30, 50))
    truly = rng.uniform(size=30) < 0.6
    out = stats.sensitivity_summary(differences, truly, rate_level=0.9)
    k_pos, k_neg = int(out.significant[truly].sum()), int(out.significant[~truly].sum())
    assert (out.tpr_low, out.tpr_high) == pytest.approx(wilson(k_pos, truly.sum(), 0.9), rel=1e-12, abs=1e-15)
    assert (out.fpr_low, out.fpr_high) == pytest.approx(wilson(k_neg, (~truly).sum(), 0.9), rel=1e-12, abs=1e-15)
    assert out.tpr_low <= out.tpr <= out.tpr_high
    moments = stats.sensitivity_from_moments(out.mean, out.se, truly, rate_level=0.9)
    assert (moments.tpr_low, moments.fpr_high) == (out.tpr_low, out.fpr_high)
    empty = stats.sensitivity_from_moments(out.mean, out.se, np.ones(30, bool))
    assert math.isnan(empty.fpr_low) and math.isnan(empty.fpr_high)
    with pytest.raises(ValueError, match="rate_level"):
        stats.sensitivity_from_moments(out.mean, out.se, truly, rate_level=1.0)


def test_mcnemar_matches_statsmodels_and_the_binomial_definition():
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
    rng = np.random.default_rng(27)
    first = rng.random(60) < 0.5
    second = np.where(rng.random(60) < 0.8, first, ~first)
    out = stats.mcnemar(first, second)
    b, c = int(np.sum(first & ~second)), int(np.sum(~first & second))
    assert (out.only_first, out.only_second, out.exact) == (b, c, b + c < 25)
    # exact: two-sided binomial tail by direct summation
    tail = sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c)
    assert out.p_value == pytest.approx(min(1.0, 2 * tail), rel=1e-12)
    assert out.p_value == pytest.approx(scipy_stats.binomtest(b, b + c).pvalue, rel=1e-12)
    table = [[np.sum(first & second), b], [c, np.sum(~first & ~second)]]
    assert out.p_value == sm_mcnemar(table, exact=True).pvalue
    chi2 = stats.mcnemar(first, second, exact=False)
    assert chi2.statistic == pytest.approx((abs(b - c) - 1) ** 2 / (b + c), rel=1e-12)
    assert chi2.p_value == pytest.approx(scipy_stats.chi2.sf(chi2.statistic, 1), rel=1e-12)
    assert chi2.p_value == sm_mcnemar(table, exact=False, correction=True).pvalue
    many = rng.random(400) < 0.5                                   # >= 25 discordant: chi-square by default
    assert not stats.mcnemar(many, ~many).exact


def test_mcnemar_edge_cases_and_bad_input():
    same = np.array([True, False, True])
    assert stats.mcnemar(same, same) == stats.McNemar(0, 0, 0.0, 1.0, True)
    assert stats.mcnemar(np.array([True, True]), np.array([True, False])).p_value == 1.0    # b = 1, c = 0
    for first, second, kwargs, match in [
            (np.array([1, 0]), np.array([True, False]), {}, "bool"),
            (np.array([True]), np.array([True, False]), {}, "same n"),
            (np.ones((2, 2), bool), np.ones((2, 2), bool), {}, "1-D"),
            (same, same, {"exact": "yes"}, "exact must be")]:
        with pytest.raises(ValueError, match=match):
            stats.mcnemar(first, second, **kwargs)

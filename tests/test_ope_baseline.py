"""simrec.ope.baseline: the optimal baseline against least squares, its use in `summarise` (each
target's own β, each pair's own β), and β-DCG / Δβ-DCG unbiased against the exact online values."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed, ope


def test_optimal_baseline_is_the_least_squares_slope_and_minimises_the_variance():
    rng = np.random.default_rng(0)
    control = rng.normal(size=(3, 500))
    values = 2.0 + np.array([[0.5], [-1.0], [0.0]]) * control + rng.normal(size=(3, 500))
    beta, adjusted = ope.optimal_baseline(values, control)
    for i in range(3):
        slope = np.polyfit(control[i], values[i], 1)[0]
        assert beta[i] == pytest.approx(slope, rel=1e-10)
        np.testing.assert_allclose(adjusted[i], values[i] - slope * control[i], rtol=1e-10)
        for other in (beta[i] - 0.1, beta[i] + 0.1, 0.0):
            assert np.var(adjusted[i]) <= np.var(values[i] - other * control[i])
    beta, adjusted = ope.optimal_baseline(values[0], np.ones(500))          # a constant control: β = 0
    assert beta == 0.0 and np.array_equal(adjusted, values[0])
    with pytest.raises(ValueError, match="share one shape"):
        ope.optimal_baseline(values, control[:, :10])
    with pytest.raises(ValueError, match="N >= 2"):
        ope.optimal_baseline(values[:, :1], control[:, :1])
    with pytest.raises(ValueError, match="finite"):
        ope.optimal_baseline(values * np.nan, control)


def test_summarise_gives_each_target_and_each_pair_its_own_baseline():
    rng = np.random.default_rng(1)
    g = rng.normal(size=(2, 1, 400))
    f = 1.0 + 0.8 * g + rng.normal(size=(2, 1, 400))
    parts = {("e", "A"): ope.Contribution(f[0], control=g[0]), ("e", "B"): ope.Contribution(f[1], control=g[1])}
    out = ope.summarise(parts, 1.0, baseline="B", confidence=0.95)
    for i, name in enumerate("AB"):
        slope = np.polyfit(g[i, 0], f[i, 0], 1)[0]
        assert out["e", name]["value"][0] == pytest.approx(np.mean(f[i, 0] - slope * g[i, 0]), rel=1e-10)
        assert out["e", name]["value_se"][0] == pytest.approx(
            np.std(f[i, 0] - slope * g[i, 0], ddof=1) / np.sqrt(400), rel=1e-10)
    df, dg = f[0, 0] - f[1, 0], g[0, 0] - g[1, 0]
    slope = np.polyfit(dg, df, 1)[0]
    assert out["e", "A"]["difference"][0] == pytest.approx(np.mean(df - slope * dg), rel=1e-10)
    assert out["e", "A"]["se"][0] == pytest.approx(np.std(df - slope * dg, ddof=1) / np.sqrt(400), rel=1e-10)
    separate = out["e", "A"]["value"][0] - out["e", "B"]["value"][0]
    assert abs(out["e", "A"]["difference"][0] - separate) > 1e-6          # not the two values' difference
    rows = np.arange(0, 400, 3)
    sub = ope.summarise(ope.restrict(parts, rows), 1.0)["e", "A"]["value"][0]
    slope = np.polyfit(g[0, 0, rows], f[0, 0, rows], 1)[0]
    assert sub == pytest.approx(np.mean(f[0, 0, rows] - slope * g[0, 0, rows]), rel=1e-10)


# ---- Monte Carlo: β-DCG and Δβ-DCG against the exact online values --------------------------------

X, A, K, N = 12, 16, 4, 40_000
_rng = np.random.default_rng(2)
QUALITY = _rng.uniform(0.05, 0.7, size=(X, A)).astype(np.float32)
SCENARIO = feed.Scenario(feed.Exponential(jnp.float32(0.7)), (feed.from_table(QUALITY),), jnp.full(X, 1.0 / X),
                         signals=("click",))
LOGGER = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(
    feed.Sort(feed.from_table(_rng.normal(size=(X, A)).astype(np.float32))), jnp.float32(0.6)), K)
TARGETS = {name: feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(
    (np.log(QUALITY) + noise * _rng.normal(size=(X, A))).astype(np.float32))), K)
    for name, noise in (("good", 0.2), ("fair", 1.0))}


@pytest.fixture(scope="module")
def table():
    """`compare` of DCG and β-DCG for both targets on 40,000 sessions, differences against "fair"."""
    log = feed.simulate(jax.random.key(5), SCENARIO, LOGGER, N)
    on = ope.from_log(log, {"R0": LOGGER, **TARGETS}, SCENARIO.view)
    return ope.compare(on.data["click"], on.targets["click"], np.inf, estimators=["dcg", "dcg_beta"],
                       baseline="fair").set_index(["estimator", "target"])


def test_beta_dcg_and_its_difference_are_unbiased_under_the_position_based_model(table):
    """|estimate − truth| <= 4 SE for each target's value and for the pair's difference."""
    truth = {name: float(feed.online_value(None, SCENARIO, policy).mean[0]) for name, policy in TARGETS.items()}
    for name in TARGETS:
        row = table.loc[("dcg_beta", name)]
        assert abs(row.value - truth[name]) <= 4 * row.value_se, (name, row.value, truth[name])
    row = table.loc[("dcg_beta", "good")]
    true_difference = truth["good"] - truth["fair"]
    assert abs(row.difference - true_difference) <= 4 * row.se, (row.difference, true_difference, row.se)
    assert true_difference > 8 * row.se                      # the pair is really separated

"""View models: closed forms, depth sampling (chi-square), learnt PBM, validation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from simrec import feed

K = 8


def reference_survival(model, k):
    i = np.arange(1, k + 1, dtype=np.float64)
    if isinstance(model, feed.Logarithmic):
        return 1.0 / np.log2(i + 1.0)
    if isinstance(model, feed.Exponential):
        return float(model.gamma) ** (i - 1.0)
    if isinstance(model, feed.ScrollBudget):
        top = k if model.max_budget is None else model.max_budget
        mass = np.arange(1, top + 1, dtype=np.float64) ** -float(model.exponent)
        mass /= mass.sum()
        return np.array([mass[int(j) - 1:].sum() if j <= top else 0.0 for j in i])
    raise TypeError(model)


MODELS = [feed.Logarithmic(), feed.Exponential(0.7), feed.ScrollBudget(1.6), feed.ScrollBudget(2.5, max_budget=5)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_view_probability_closed_form(model):
    got = np.asarray(feed.view_probability(model, K), np.float64)
    np.testing.assert_allclose(got, reference_survival(model, K), rtol=2e-6, atol=1e-7)


def test_scroll_budget_continuation_rises_with_depth():
    # far from the truncation the power law's continuation P(B > i | B >= i) grows with i
    s = np.asarray(feed.view_probability(feed.ScrollBudget(1.8, max_budget=2_000), 20), np.float64)
    assert np.all(np.diff(s[1:] / s[:-1]) > 0)


def test_exponential_gamma_zero_views_only_rank_one():
    np.testing.assert_array_equal(feed.view_probability(feed.Exponential(0.0), 4), [1, 0, 0, 0])


@pytest.mark.parametrize("model", MODELS + [feed.Tabulated(jnp.array([0.9, 0.5, 0.5, 0.1]))],
                         ids=lambda m: type(m).__name__)
def test_sample_depth_chi_square(model):
    n = 100_000
    depths = np.asarray(feed.sample_depth(jax.random.key(3), model, K, (n,)))
    assert depths.dtype == np.int32 and depths.min() >= 0 and depths.max() <= K
    s = np.concatenate([[1.0], np.asarray(feed.view_probability(model, K), np.float64), [0.0]])
    pmf = s[:-1] - s[1:]                                  # P(D = d), d = 0..K
    counts = np.bincount(depths, minlength=K + 1)
    keep = pmf * n >= 5
    assert counts[~keep].sum() <= 30                       # impossible or very rare depths
    expected = pmf[keep] * n
    stat, p = scipy.stats.chisquare(counts[keep], expected * counts[keep].sum() / expected.sum())
    assert p > 1e-3, (stat, p)


def test_fit_view_model_recovers_survival():
    model = feed.Exponential(0.8)
    n = 50_000
    depths = feed.sample_depth(jax.random.key(1), model, K, (n,))
    viewed = jnp.arange(K)[None, :] < depths[:, None]
    fitted = np.asarray(feed.view_probability(feed.fit_view_model(viewed), K + 2))
    truth = reference_survival(model, K)
    se = np.sqrt(truth * (1 - truth) / n)
    assert np.all(np.abs(fitted[:K] - truth) <= 4 * se + 1e-7)
    assert np.all(fitted[K:] == 0)


@pytest.mark.parametrize("make", [
    lambda: feed.Exponential(1.5), lambda: feed.Exponential(-0.1), lambda: feed.Exponential(jnp.nan),
    lambda: feed.ScrollBudget(1.0), lambda: feed.ScrollBudget(2.0, max_budget=0),
    lambda: feed.Tabulated(jnp.array([0.5, 0.7])), lambda: feed.Tabulated(jnp.array([1.2])),
    lambda: feed.Cascade(feed.Cascade(feed.Logarithmic(), 0.5), 0.5),
    lambda: feed.Cascade(feed.Logarithmic(), 1.5), lambda: feed.Cascade(feed.Logarithmic(), 0.5, -1),
    lambda: feed.view_probability(feed.Logarithmic(), 0),
    lambda: feed.fit_view_model(jnp.ones((3, 4), jnp.float32)),
])
def test_invalid_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_view_models_are_pytrees_under_jit():
    model = feed.Cascade(feed.ScrollBudget(2.0), 0.3, 1)
    out = jax.jit(lambda m: feed.view_probability(m, K))(model)
    np.testing.assert_allclose(out, reference_survival(feed.ScrollBudget(2.0), K), rtol=2e-6)

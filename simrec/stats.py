"""Statistics that compare offline estimates with the truth (DESIGN "Statistics").

- Correlation over days (Jeunen, Potapov, Ustimenko, KDD'24, §6.1 and Table 2): Pearson's r with
  Student's two-tailed t-test; Kendall's tau-b for rank agreement (KDD'24 App. A).
- Sensitivity (KDD'24 §6.2 and Fig. 1): per-trajectory differences Δ_τ = f_τ(R_t) − f_τ(R₀), a
  normal confidence interval of their mean, the one-sided p-value of H₀: E[Δ] ≤ 0, and over many
  settings the true- and false-positive rates, the mean p-value and the sign agreement.
- Disagreement (KDD'24 App. A): the probability that two metrics order a random pair of models
  differently.
- Monte Carlo summaries (bias and RMSE over replications) and Holm's step-down correction for
  cells that run many tests.
- Noise-aware winners (Steck, RecSys'13, §3.3): a paired difference of two models measured on
  K disjoint parts of the test users names a winner only beyond z standard errors; the parts
  (`user_parts`, from a ``jax.random`` key as every random draw in simrec) and each part's mean
  of a per-user metric (`part_means`).

- Tests of verdicts: partial correlation given control variables with its t-test (OLS), McNemar's
  test of two paired detectors, Wilson intervals of TPR/FPR shares, and Newey–West (HAC) standard
  errors of a mean over autocorrelated consecutive days.

Everything is numpy/scipy/statsmodels in float64, not JAX: the inputs are small summaries (days,
settings, models, replications) and tail p-values need double precision. The functions here are
thin, validated wrappers: where scipy or statsmodels computes the statistic (Pearson's test,
Kendall's tau-b, Holm, OLS, McNemar, proportion intervals, HAC), they call it, and the tests check
each wrapper against the direct library call and an independent reference. Samples lie along
``axis`` (the last by default) and every leading axis is vectorised. Bad input raises ValueError
naming the argument: mismatched lengths, too few points, NaN or ±inf (NaN is accepted only where a
``nan_policy`` says so), a level or alpha outside (0, 1), an unknown option.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np
from scipy import stats as scipy_stats

from simrec import validate

# statsmodels is imported inside the functions that call it: importing it costs about 1.5 s,
# which every user of simrec.stats (the CLI, every study) would otherwise pay at start-up.

__all__ = [
    "pearson", "kendall_tau", "partial_correlation", "mean_ci", "hac_mean_se", "newey_west_lags",
    "one_sided_p", "Sensitivity", "sensitivity_summary", "sensitivity_from_moments", "z_test",
    "proportion_ci", "McNemar", "mcnemar", "MCNEMAR_EXACT_BELOW",
    "pairwise_inversion_rate", "bias_rmse", "holm_bonferroni", "Winner", "paired_winner", "TIE", "Z",
    "direction_verdict",
    "user_parts", "part_means",
    "CI_METHODS", "ALTERNATIVES", "NAN_POLICIES", "PROPORTION_METHODS",
]

#: confidence-interval methods of `mean_ci` ("hac": normal interval with Newey–West standard error)
CI_METHODS = ("normal", "t", "hac")
#: interval methods of `proportion_ci` (statsmodels' ``proportion_confint`` names)
PROPORTION_METHODS = ("wilson", "beta", "agresti_coull", "jeffreys", "normal")
#: alternatives of `one_sided_p`: "greater" tests H₀: mean ≤ 0, "less" tests H₀: mean ≥ 0
ALTERNATIVES = ("greater", "less")
#: "raise": NaN is an error; "omit": NaN samples are skipped (e.g. sessions whose ideal DCG is 0)
NAN_POLICIES = ("raise", "omit")
#: `Winner.winner` when neither model is ahead by more than z standard errors
TIE = "tie"
#: the number of standard errors a difference must exceed to count (`direction_verdict`)
Z = 2.0
#: the discordant-pair count below which `mcnemar` uses the exact binomial test by default
MCNEMAR_EXACT_BELOW = 25


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

def _float_array(value, name: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array of numbers ({err})") from None


def _series_pair(x, y, names: tuple[str, str], min_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two finite series f64[..., n] of one length n >= min_n, leading axes broadcast together."""
    arrays = []
    for name, value in zip(names, (x, y)):
        arr = _float_array(value, name)
        if arr.ndim == 0:
            raise ValueError(f"{name} must be a series (at least 1-D), got a scalar")
        validate.finite_values(name, arr)
        arrays.append(arr)
    (a, b), n = arrays, arrays[0].shape[-1]
    if b.shape[-1] != n:
        raise ValueError(f"{names[0]} and {names[1]} must have the same length along the last axis, "
                         f"got {n} and {b.shape[-1]}")
    if n < min_n:
        raise ValueError(f"need at least {min_n} points in {names[0]} and {names[1]}, got {n}")
    try:
        lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    except ValueError:
        raise ValueError(f"the leading axes of {names[0]} {a.shape} and {names[1]} {b.shape} "
                         f"do not broadcast") from None
    return np.broadcast_to(a, lead + (n,)), np.broadcast_to(b, lead + (n,))


def _vector_pair(x, y, names: tuple[str, str], min_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two finite 1-D series of one length n >= min_n.  f64[n] each."""
    for name, value in zip(names, (x, y)):
        if np.ndim(value) != 1:
            raise ValueError(f"{name} must be 1-D, got shape {np.shape(value)}")
    return _series_pair(x, y, names, min_n)


def _samples(samples, axis: int, nan_policy: str) -> tuple[np.ndarray, np.ndarray]:
    """Samples moved to the last axis, f64[..., N], and the mask of samples to use, bool[..., N]."""
    validate.choice("nan_policy", nan_policy, NAN_POLICIES)
    values = _float_array(samples, "samples")
    if values.ndim == 0:
        raise ValueError("samples must be at least 1-D (samples along `axis`), got a scalar")
    values = np.moveaxis(values, axis, -1)
    return values, _usable(values, np.ones(values.shape, bool), nan_policy, "samples")


def _usable(values: np.ndarray, present: np.ndarray, nan_policy: str, name: str) -> np.ndarray:
    """The present entries that are not NaN; ±inf anywhere present, or NaN under "raise", fails."""
    if np.any(np.isinf(values) & present):
        raise ValueError(f"{name} contains ±inf; remove those entries before calling")
    nan = np.isnan(values) & present
    if nan_policy == "raise" and np.any(nan):
        raise ValueError(f"{name} contains NaN; remove it or pass nan_policy='omit' to skip NaN "
                         f"samples (e.g. sessions whose ideal DCG is zero)")
    return present & ~nan


def _scalar(value: np.ndarray):
    """0-d arrays become numpy scalars (np.float64 is a float); others pass through."""
    return value[()] if value.ndim == 0 else value


# --------------------------------------------------------------------------------------------
# Correlation
# --------------------------------------------------------------------------------------------

#: |r| within this distance of 1 is ±1 up to rounding (the products and sums of `pearson` carry a
#: relative error of a few machine epsilons): `pearson` then reports r = ±1 and p = 0
_UNIT_R_TOLERANCE = 8 * np.finfo(np.float64).eps


def pearson(x, y):
    """Pearson's r along the last axis with Student's two-tailed test (Student, Biometrika 1908;
    Jeunen et al. KDD'24 Table 2), computed by ``scipy.stats.pearsonr``:

        r = Σᵢ (xᵢ − x̄)(yᵢ − ȳ) / sqrt(Σᵢ (xᵢ − x̄)² · Σᵢ (yᵢ − ȳ)²)
        t = r · sqrt((n − 2) / (1 − r²)),   p = 2 · P(T_{n−2} ≥ |t|),  T_ν Student's t

    (scipy evaluates the same p from the exact null distribution of r, a Beta((n−2)/2, (n−2)/2) on
    [−1, 1]). x, y: f[..., n] with the same n >= 3 (the test has n − 2 >= 1 degrees of freedom);
    leading axes broadcast, e.g. the offline estimates f[V, n] of V estimators against one online
    series f[n]. Returns (r, p), each f64[...] (numpy floats for 1-D input). |r| = 1 gives p = 0;
    |r| within a few machine epsilons of 1 (rounding, e.g. exactly proportional series) counts as
    ±1. A constant series (max = min) has no correlation and raises ValueError, as do NaN and ±inf.
    """
    x, y = _series_pair(x, y, ("x", "y"), min_n=3)
    for name, values in (("x", x), ("y", y)):
        if np.any(np.ptp(values, axis=-1) == 0):
            raise ValueError(f"{name} is constant along the last axis: the correlation is undefined")
    result = scipy_stats.pearsonr(x, y, axis=-1)
    r, p = np.asarray(result.statistic, np.float64), np.asarray(result.pvalue, np.float64)
    unit = 1 - np.abs(r) <= _UNIT_R_TOLERANCE
    r, p = np.where(unit, np.sign(r), np.clip(r, -1.0, 1.0)), np.where(unit, 0.0, p)
    return _scalar(r), _scalar(p)


def kendall_tau(x, y):
    """Kendall's tau-b with its tie-corrected two-tailed normal test (Kendall, Biometrika 1945,
    "The treatment of ties in ranking problems"; variance from Kendall, *Rank Correlation
    Methods*, 1970; Jeunen et al. KDD'24 App. A), computed by ``scipy.stats.kendalltau``
    (``variant="b"``, ``method="asymptotic"``, O(n log n)):

        tau_b = (C − D) / sqrt((n₀ − n_x)(n₀ − n_y)),   n₀ = n(n−1)/2,
        Var(C − D) = [n(n−1)(2n+5) − Σt(t−1)(2t+5) − Σu(u−1)(2u+5)] / 18
                     + Σt(t−1) · Σu(u−1) / (2n(n−1)) + Σt(t−1)(t−2) · Σu(u−1)(u−2) / (9n(n−1)(n−2)),
        p = 2 · Φ(−|C − D| / sqrt(Var(C − D))),

    with C / D the concordant / discordant pairs, n_x / n_y the pairs tied in x / in y, and t / u
    the sizes of the groups of tied x / y values. The p-value is the large-sample approximation
    (scipy's default for small samples without ties would be the exact one); it is not exact for a
    handful of points. tau_b is re-formed from the integer C − D that scipy's value implies, so a
    perfect order gives exactly ±1 (scipy's own division may give 1 − 1 ulp).

    x, y: f[n], n >= 3. Returns (tau, p) as floats. A constant series raises ValueError (scipy
    would return NaN), as do NaN and ±inf.
    """
    x, y = _vector_pair(x, y, ("x", "y"), min_n=3)
    for name, values in (("x", x), ("y", y)):
        if np.ptp(values) == 0:
            raise ValueError(f"{name} is constant: Kendall's tau is undefined")
    result = scipy_stats.kendalltau(x, y, variant="b", method="asymptotic")
    score, untied_x, untied_y = _kendall_score(x, y, result.statistic)
    return float(np.clip(score / math.sqrt(float(untied_x) * float(untied_y)), -1.0, 1.0)), float(result.pvalue)


def _tied_pairs(*columns: np.ndarray) -> int:
    """Σ t(t−1)/2 over the groups of rows equal in every column: the pairs tied on all of them."""
    t = np.unique(np.column_stack(columns), axis=0, return_counts=True)[1].astype(np.int64)
    return int(np.sum(t * (t - 1) // 2))


def _kendall_score(x: np.ndarray, y: np.ndarray, tau_b: float) -> tuple[int, int, int]:
    """(C − D, n₀ − n_x, n₀ − n_y) of two non-constant series f64[n] from scipy's tau_b: the
    integer C − D = tau_b · sqrt((n₀ − n_x)(n₀ − n_y)) recovered by rounding (exact while
    n₀ < 2⁴⁸), so that tau_b re-formed from it is exactly ±1 for a perfect order."""
    pairs = x.size * (x.size - 1) // 2
    untied_x, untied_y = pairs - _tied_pairs(x), pairs - _tied_pairs(y)
    return int(round(float(tau_b) * math.sqrt(float(untied_x) * float(untied_y)))), untied_x, untied_y


def partial_correlation(x, y, controls):
    """Partial correlation of x and y given control variables z, with its t-test, computed by
    ordinary least squares (``statsmodels`` OLS; Fisher, Metron 1924; e.g. Kendall & Stuart, *The
    Advanced Theory of Statistics* vol. 2, §27):

        y = β₀ + β_x x + β_zᵀ z + e   (OLS),   t = β̂_x / se(β̂_x),   df = n − k − 2,
        r = t / sqrt(t² + df),   p = 2 · P(T_df ≥ |t|),

    with k the number of controls. r equals Pearson's r of the residuals of x and of y after each
    is regressed on (1, z), and p is the test of the coefficient of x — the exact test of a zero
    partial correlation for normal errors (Pearson's test on the residuals would wrongly use n − 2
    degrees of freedom).

    x, y: f[n]; controls: f[n] (one control) or f[n, k]; n >= k + 3 so that df >= 1. Returns
    (r, p, df) as (float, float, int). Raises ValueError for NaN/±inf, mismatched lengths, controls
    that are constant or collinear (with each other or the intercept), or an x or y that the
    controls explain exactly (the partial correlation is then undefined).
    """
    x, y = _vector_pair(x, y, ("x", "y"), min_n=3)
    z = _float_array(controls, "controls")
    if z.ndim == 1:
        z = z[:, None]
    if z.ndim != 2 or z.shape[0] != x.size:
        raise ValueError(f"controls must be f[n] or f[n, k] with n = {x.size} rows (one per point of x "
                         f"and y), got shape {np.shape(controls)}")
    validate.finite_values("controls", z)
    k, n = z.shape[1], x.size
    df = n - k - 2
    if df < 1:
        raise ValueError(f"need at least k + 3 = {k + 3} points for {k} control(s) (df = n − k − 2 >= 1), "
                         f"got {n}")
    base = np.column_stack([np.ones(n), z])
    if np.linalg.matrix_rank(base) < k + 1:
        raise ValueError("controls are constant or collinear (with each other or with the intercept): "
                         "drop the redundant columns")
    for name, values in (("x", x), ("y", y)):
        if np.linalg.matrix_rank(np.column_stack([base, values])) < k + 2:
            raise ValueError(f"{name} is an exact linear function of the controls: the partial "
                             f"correlation is undefined")
    from statsmodels.regression.linear_model import OLS
    fit = OLS(y, np.column_stack([base[:, :1], x, z])).fit()
    t = float(fit.tvalues[1])
    r = t / math.sqrt(t * t + df) if math.isfinite(t) else math.copysign(1.0, t)
    return r, float(fit.pvalues[1]), int(fit.df_resid)


def pairwise_inversion_rate(a, b) -> float:
    """The probability that a random pair of models is ordered differently by metric a than by
    metric b (Jeunen et al. KDD'24 App. A and its public notebook), over unordered pairs {i, j}:

        rate = (D + T_a + T_b) / (n(n−1)/2 − T_ab),

    D the pairs with sign(aᵢ − aⱼ) = −sign(bᵢ − bⱼ) ≠ 0, T_a (T_b) the pairs tied on a only
    (on b only), which count as disagreements (e.g. equal DCG but different nDCG), and T_ab the
    pairs tied on both, which are skipped. Without ties, rate = (1 − tau) / 2 (Kendall's tau).

    The counts come from group sizes (``np.unique``) and Kendall's tau-b (``scipy.stats.kendalltau``,
    O(n log n)): with n_a = T_a + T_ab and n_b = T_b + T_ab the pairs tied on a and on b,
    C + D = n₀ − n_a − n_b + T_ab and C − D = tau_b · sqrt((n₀ − n_a)(n₀ − n_b)), rounded to the
    integer it is (exact while n₀ < 2⁴⁸, i.e. n below about 2·10⁷).

    a, b: f[n] metric values of the same n >= 2 models. Returns a float in [0, 1]. Raises
    ValueError if every pair is tied on both metrics.
    """
    a, b = _vector_pair(a, b, ("a", "b"), min_n=2)
    pairs = a.size * (a.size - 1) // 2
    tied_a, tied_b, tied_both = _tied_pairs(a), _tied_pairs(b), _tied_pairs(a, b)
    compared = pairs - tied_both
    if compared == 0:
        raise ValueError("every pair of models is tied on both a and b: the inversion rate is undefined")
    ordered = pairs - tied_a - tied_b + tied_both                     # C + D: strict order on both
    if tied_a == pairs or tied_b == pairs:                            # one metric is constant: C = D = 0
        score = 0
    elif a.size == 2:                                                 # one pair (scipy's test needs n >= 3)
        score = int(np.sign(a[0] - a[1]) * np.sign(b[0] - b[1]))
    else:
        score = _kendall_score(a, b, scipy_stats.kendalltau(a, b, variant="b", method="asymptotic").statistic)[0]
    discordant = (ordered - score) // 2
    return (discordant + (tied_a - tied_both) + (tied_b - tied_both)) / compared


# --------------------------------------------------------------------------------------------
# Means, intervals, tests
# --------------------------------------------------------------------------------------------

def _mean_se(values: np.ndarray, use: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard error s/√n (s with ddof = 1) and n over the used samples of the last axis."""
    count = use.sum(axis=-1)
    if np.any(count < 2):
        raise ValueError(f"need at least 2 usable samples per row to estimate a standard error, "
                         f"got {int(count.min())}")
    mean = np.where(use, values, 0.0).sum(axis=-1) / count
    deviations = np.where(use, values - mean[..., None], 0.0)
    se = np.sqrt(np.sum(deviations * deviations, axis=-1) / ((count - 1) * count))
    return mean, se, count


def _half_width(se: np.ndarray, count: np.ndarray, level: float, method: str) -> np.ndarray:
    """q · se with q the (1 + level)/2 quantile of N(0, 1) ("normal") or of T_{n−1} ("t")."""
    upper = (1 + level) / 2
    q = scipy_stats.norm.ppf(upper) if method == "normal" else scipy_stats.t.ppf(upper, count - 1)
    return q * se


def _one_sided(mean: np.ndarray, se: np.ndarray, alternative: str) -> np.ndarray:
    """z = mean / se; "greater": p = 1 − Φ(z), "less": p = Φ(z). Zero se: z = ±inf, or 0 at mean 0."""
    limit = np.select([mean > 0, mean < 0], [np.inf, -np.inf], 0.0)
    z = np.divide(mean, se, out=limit, where=se > 0)
    return scipy_stats.norm.sf(z) if alternative == "greater" else scipy_stats.norm.cdf(z)


def mean_ci(samples, level: float = 0.99, method: str = "normal", *, axis: int = -1,
            nan_policy: str = "raise", lags: int | None = None):
    """Mean of samples along ``axis`` with a two-sided confidence interval at ``level``
    (Jeunen et al. KDD'24 §6.2 use the normal interval at 99 %):

        se = s / √n  (s the sample standard deviation, ddof = 1),
        [mean − q·se, mean + q·se],  q = Φ⁻¹((1 + level)/2)  ("normal")  or  t_{n−1}⁻¹((1 + level)/2)  ("t").

    The normal interval is the large-sample one; "t" is exact for normal samples and wider for
    small n. "hac" is the normal interval with the Newey–West standard error of `hac_mean_se`
    (``lags`` lags, default `newey_west_lags`), for samples that are consecutive days of an
    autocorrelated series, where s / √n understates the uncertainty; it needs every sample
    (nan_policy "omit" with NaN raises: dropping a day would make its neighbours adjacent).
    samples: f[..., N, ...] with N >= 2 usable samples per row; every other axis is vectorised.
    nan_policy "raise" (default) rejects NaN, "omit" skips NaN samples per row. lags: only with
    "hac". Returns (mean, low, high, se), each f64 of samples' shape without ``axis`` (floats for 1-D).
    """
    level = validate.probability("level", level, low_open=True, high_open=True)
    validate.choice("method", method, CI_METHODS)
    if lags is not None and method != "hac":
        raise ValueError(f"lags applies to method='hac' only (the Newey–West standard error), got "
                         f"method={method!r}")
    values, use = _samples(samples, axis, nan_policy)
    mean, se, count = _mean_se(values, use)
    if method == "hac":
        if not use.all():
            raise ValueError("method='hac' needs every sample of the series (consecutive days): samples "
                             "contains NaN; fill the gaps or split the series before calling")
        se = _hac_se(values, lags)
    half = _half_width(se, count, level, "normal" if method == "hac" else method)
    return tuple(_scalar(np.asarray(v)) for v in (mean, mean - half, mean + half, se))


def newey_west_lags(n: int) -> int:
    """The Bartlett-kernel bandwidth rule of Newey & West (Rev. Econ. Stud. 1994),
    L = floor(4 · (n / 100)^(2/9)), capped at n − 1: 2 lags for 7 days, 3 for 28, 4 for 100."""
    validate.integer("n", n, low=1)
    return min(int(math.floor(4 * (n / 100) ** (2 / 9))), n - 1)


def _hac_se(values: np.ndarray, lags: int | None) -> np.ndarray:
    """Newey–West standard error of the mean of each row of values f64[..., N] (statsmodels OLS on
    a constant, cov_type="HAC", Bartlett kernel, small-sample correction).  f64[...]."""
    n = values.shape[-1]
    lags = newey_west_lags(n) if lags is None else lags
    validate.integer("lags", lags, low=0)
    if lags >= n:
        raise ValueError(f"lags must be below the series length {n}, got {lags}")
    from statsmodels.regression.linear_model import OLS
    rows = values.reshape(-1, n)
    constant = np.ones((n, 1))
    se = [OLS(row, constant).fit(cov_type="HAC", cov_kwds={"maxlags": lags, "use_correction": True}).bse[0]
          for row in rows]
    return np.asarray(se, np.float64).reshape(values.shape[:-1])


def hac_mean_se(samples, lags: int | None = None, *, axis: int = -1):
    """Heteroskedasticity- and autocorrelation-consistent (Newey & West, Econometrica 1987)
    standard error of the mean of a series x₁..x_N in order along ``axis`` (e.g. consecutive days),
    computed by statsmodels (OLS of x on a constant, ``cov_type="HAC"``, Bartlett kernel):

        e_t = x_t − x̄,   γ̂_l = (1/N) Σ_{t>l} e_t e_{t−l},
        se² = [γ̂₀ + 2 Σ_{l=1}^{L} (1 − l/(L + 1)) γ̂_l] / (N − 1)

    (the N/(N − 1) small-sample correction included, so L = 0 gives the i.i.d. s/√N exactly).
    Positive autocorrelation makes se larger than s/√N. samples: f[..., N, ...], N >= 2, finite;
    every other axis is vectorised (each row its own series). lags: L in 0..N−1, default
    `newey_west_lags`(N). Returns se, f64 of samples' shape without ``axis`` (a float for 1-D).
    """
    values, use = _samples(samples, axis, "raise")
    validate.finite_values("samples", values)
    _mean_se(values, use)                                      # at least 2 samples per row
    return _scalar(_hac_se(values, lags))


def one_sided_p(samples, alternative: str = "greater", *, axis: int = -1, nan_policy: str = "raise"):
    """One-sided z-test on the mean of samples along ``axis`` (Jeunen et al. KDD'24 §6.2):

        z = mean / se,  se = s / √n;   "greater" (H₀: mean <= 0): p = 1 − Φ(z);
                                       "less"    (H₀: mean >= 0): p = Φ(z).

    With the normal interval of `mean_ci`, the two-sided interval at ``level`` lies strictly above
    0 exactly when the "greater" p-value is below (1 − level)/2. Samples with zero spread (e.g. an
    A/A test scored on one log, Δ_τ ≡ 0) have se = 0; then z = ±inf by the sign of the mean and
    z = 0 (p = 1/2) at mean 0, the z-test's limit as se → 0.
    samples: f[..., N, ...], N >= 2 usable per row; nan_policy as in `mean_ci`.
    Returns p, f64 of samples' shape without ``axis`` (a float for 1-D).
    """
    validate.choice("alternative", alternative, ALTERNATIVES)
    values, use = _samples(samples, axis, nan_policy)
    mean, se, _ = _mean_se(values, use)
    return _scalar(np.asarray(_one_sided(mean, se, alternative)))


@dataclass(frozen=True)
class Sensitivity:
    """Per-setting intervals and the summary rates returned by `sensitivity_summary`.

    Rates over an empty group (no truly improving settings for ``tpr``, ``mean_p_value`` and
    ``sign_agreement``; no other settings for ``fpr``) are NaN: a share of nothing is undefined.
    """
    mean: np.ndarray            # f64[S]  mean Δ of each setting
    low: np.ndarray             # f64[S]  lower bound of its normal CI at `level`
    high: np.ndarray            # f64[S]  upper bound
    se: np.ndarray              # f64[S]  standard error of the mean
    p_value: np.ndarray         # f64[S]  one-sided, H₀: E[Δ] <= 0
    significant: np.ndarray     # bool[S] low > 0: the CI is strictly positive
    truly_positive: np.ndarray  # bool[S] the setting truly improves (online ground truth)
    tpr: float                  # share of truly improving settings that are significant
    fpr: float                  # share of the other settings (A/A or harmful) that are significant
    mean_p_value: float         # mean p_value over the truly improving settings
    sign_agreement: float       # share of truly improving settings with mean Δ > 0
    n_positive: int             # number of truly improving settings
    n_negative: int             # number of other settings
    #: Wilson interval (`proportion_ci`, at ``rate_level``, 95 % by default) of tpr: the
    #: uncertainty of a share of n_positive settings treated as independent Bernoulli trials
    #: (NaN when the group is empty)
    tpr_low: float = math.nan
    tpr_high: float = math.nan
    fpr_low: float = math.nan   # the same for fpr over the n_negative settings
    fpr_high: float = math.nan


def _settings(differences, mask) -> tuple[np.ndarray, np.ndarray]:
    """Per-setting differences padded to f64[S, N_max] and the mask of present entries, bool[S, N_max]."""
    if isinstance(differences, (list, tuple)):
        if mask is not None:
            raise ValueError("mask applies to a 2-D differences array; a list of per-setting arrays "
                             "needs no mask (give each setting only its own trajectories)")
        if len(differences) == 0:
            raise ValueError("differences must hold at least one setting, got an empty list")
        rows = [_float_array(row, f"differences[{s}]") for s, row in enumerate(differences)]
        for s, row in enumerate(rows):
            if row.ndim != 1:
                raise ValueError(f"differences[{s}] must be a 1-D array of per-trajectory differences, "
                                 f"got shape {row.shape}")
        values = np.zeros((len(rows), max(row.size for row in rows)))
        present = np.zeros(values.shape, bool)
        for s, row in enumerate(rows):
            values[s, :row.size], present[s, :row.size] = row, True
        return values, present
    values = _float_array(differences, "differences")
    if values.ndim != 2:
        raise ValueError(f"differences must be a list of 1-D arrays (one per setting) or a 2-D array "
                         f"[settings, trajectories], got shape {values.shape}")
    if mask is None:
        return values, np.ones(values.shape, bool)
    present = np.asarray(mask)
    if present.dtype != bool or present.shape != values.shape:
        raise ValueError(f"mask must be a bool array of the shape of differences {values.shape} "
                         f"(True = trajectory present), got {present.dtype} {present.shape}")
    return values, present


def sensitivity_summary(differences, truly_positive, level: float = 0.99, *, mask=None,
                        nan_policy: str = "raise", rate_level: float = 0.95) -> Sensitivity:
    """Offline sensitivity to known online effects (Jeunen et al. KDD'24 §6.2, Fig. 1; DESIGN
    "Statistics"). For each setting s with per-trajectory differences Δ_τ = f_τ(R_t) − f_τ(R₀):

        mean_s, normal CI [low_s, high_s] at ``level`` (`mean_ci`), p_s = 1 − Φ(mean_s / se_s) (`one_sided_p`),
        significant_s = low_s > 0   (equivalently p_s < (1 − level)/2)

    and over the settings, with P the truly improving ones and N the others (A/A or harmful):

        TPR = |{s ∈ P: significant_s}| / |P|,   FPR = |{s ∈ N: significant_s}| / |N|,
        mean p-value = mean_{s ∈ P} p_s,         sign agreement = |{s ∈ P: mean_s > 0}| / |P|,

    with Wilson intervals at ``rate_level`` of TPR and FPR (`proportion_ci`; they treat the
    settings as independent trials, which settings sharing days or logs are not quite).

    differences: a list of S 1-D arrays (one per setting, lengths may differ), or f[S, N] with an
    optional ``mask`` bool[S, N] (True = the trajectory belongs to the setting; masked-out entries
    are ignored whatever they hold). Each setting needs >= 2 usable trajectories.
    truly_positive: bool[S], the online ground truth. nan_policy as in `mean_ci`.
    """
    level = validate.probability("level", level, low_open=True, high_open=True)
    validate.choice("nan_policy", nan_policy, NAN_POLICIES)
    values, present = _settings(differences, mask)
    positive = np.asarray(truly_positive)
    if positive.dtype != bool or positive.shape != values.shape[:1]:
        raise ValueError(f"truly_positive must be a bool array with one entry per setting "
                         f"({values.shape[0]}), got {positive.dtype} {positive.shape}")
    use = _usable(values, present, nan_policy, "differences")
    mean, se, _ = _mean_se(values, use)
    return _sensitivity(mean, se, positive, level, rate_level)


def sensitivity_from_moments(mean, standard_error, truly_positive, level: float = 0.99, *,
                             rate_level: float = 0.95) -> Sensitivity:
    """`sensitivity_summary` from each setting's mean difference and its standard error (e.g.
    cached per-setting summaries of logs too large to keep): the same normal CI, one-sided
    p-value, rates and rate intervals. mean, standard_error: f[S] (se >= 0, finite);
    truly_positive: bool[S].
    """
    level = validate.probability("level", level, low_open=True, high_open=True)
    mean, se = _float_array(mean, "mean"), _float_array(standard_error, "standard_error")
    positive = np.asarray(truly_positive)
    if mean.ndim != 1 or se.shape != mean.shape or positive.dtype != bool or positive.shape != mean.shape:
        raise ValueError(f"mean, standard_error and truly_positive (bool) must be 1-D arrays with one entry "
                         f"per setting; got shapes {mean.shape}, {se.shape}, {positive.dtype} {positive.shape}")
    validate.finite_values("mean", mean)
    validate.finite_values("standard_error", se)
    if np.any(se < 0):
        raise ValueError("standard_error must be >= 0")
    return _sensitivity(mean, se, positive, level, rate_level)


def _sensitivity(mean: np.ndarray, se: np.ndarray, positive: np.ndarray, level: float,
                 rate_level: float) -> Sensitivity:
    rate_level = validate.probability("rate_level", rate_level, low_open=True, high_open=True)
    half = _half_width(se, None, level, "normal")
    p_value = _one_sided(mean, se, "greater")
    significant = mean - half > 0

    def share(flags: np.ndarray) -> float:
        return float(np.mean(flags)) if flags.size else float("nan")

    def interval(flags: np.ndarray) -> tuple[float, float]:
        if not flags.size:
            return math.nan, math.nan
        low, high = proportion_ci(int(flags.sum()), flags.size, rate_level)
        return float(low), float(high)

    (tpr_low, tpr_high), (fpr_low, fpr_high) = interval(significant[positive]), interval(significant[~positive])
    return Sensitivity(
        mean=mean, low=mean - half, high=mean + half, se=se, p_value=p_value,
        significant=significant, truly_positive=positive,
        tpr=share(significant[positive]), fpr=share(significant[~positive]),
        mean_p_value=share(p_value[positive]), sign_agreement=share(mean[positive] > 0),
        n_positive=int(positive.sum()), n_negative=int((~positive).sum()),
        tpr_low=tpr_low, tpr_high=tpr_high, fpr_low=fpr_low, fpr_high=fpr_high)


def z_test(estimate, standard_error, alternative: str = "greater"):
    """One-sided z-test of an estimate with a known (large-sample) standard error, e.g. the
    difference of two A/B arms, se = sqrt(se_a² + se_b²):

        z = estimate / se;  "greater" (H₀: θ <= 0): p = 1 − Φ(z);  "less" (H₀: θ >= 0): p = Φ(z)

    (se = 0: z = ±inf by the sign of the estimate, p = 1/2 at 0, as in `one_sided_p`).
    estimate, standard_error: f[...] broadcast together, finite, se >= 0. Returns p, f64[...].
    """
    validate.choice("alternative", alternative, ALTERNATIVES)
    value, se = _float_array(estimate, "estimate"), _float_array(standard_error, "standard_error")
    validate.finite_values("estimate", value)
    validate.finite_values("standard_error", se)
    if np.any(se < 0):
        raise ValueError("standard_error must be >= 0")
    try:
        value, se = np.broadcast_arrays(value, se)
    except ValueError:
        raise ValueError(f"estimate {value.shape} and standard_error {se.shape} do not broadcast") from None
    return _scalar(np.asarray(_one_sided(value, se, alternative)))


def _counts(value, name: str) -> np.ndarray:
    """Non-negative integer counts (ints, or floats that are whole numbers), i64[...]."""
    arr = _float_array(value, name)
    validate.finite_values(name, arr)
    if np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold non-negative whole counts, got {value!r}")
    return arr.astype(np.int64)


def proportion_ci(successes, trials, level: float = 0.95, method: str = "wilson"):
    """Confidence interval of a binomial share k / n, e.g. a TPR or FPR over settings, computed by
    statsmodels' ``proportion_confint``. The default is Wilson's score interval (Wilson, JASA 1927;
    recommended over the normal one by Brown, Cai & DasGupta, Statist. Sci. 2001):

        p̂ = k/n, z = Φ⁻¹((1 + level)/2),
        (p̂ + z²/(2n) ± z · sqrt(p̂(1 − p̂)/n + z²/(4n²))) / (1 + z²/n),

    which stays inside [0, 1] and is not degenerate at k = 0 or k = n. Other methods:
    `PROPORTION_METHODS` ("beta" = Clopper–Pearson). successes: k, trials: n, whole counts
    broadcast together with 0 <= k <= n and n >= 1. Returns (low, high), f64 of the broadcast
    shape (floats for scalars).
    """
    level = validate.probability("level", level, low_open=True, high_open=True)
    validate.choice("method", method, PROPORTION_METHODS)
    k, n = _counts(successes, "successes"), _counts(trials, "trials")
    try:
        k, n = np.broadcast_arrays(k, n)
    except ValueError:
        raise ValueError(f"successes {k.shape} and trials {n.shape} do not broadcast") from None
    if np.any(n < 1) or np.any(k > n):
        raise ValueError("need trials >= 1 and 0 <= successes <= trials in every entry")
    from statsmodels.stats.proportion import proportion_confint
    low, high = proportion_confint(k, n, alpha=1 - level, method=method)
    # k = 0 and k = n put a bound exactly at 0 and 1 (Wilson, Jeffreys, Clopper–Pearson), which the
    # floating-point formulas miss by a rounding error (e.g. 1e-17)
    low = np.where(k == 0, 0.0, np.clip(np.asarray(low, np.float64), 0.0, 1.0))
    high = np.where(k == n, 1.0, np.clip(np.asarray(high, np.float64), 0.0, 1.0))
    return _scalar(low), _scalar(high)


@dataclass(frozen=True)
class McNemar:
    """McNemar's test of two paired binary outcomes (`mcnemar`)."""
    only_first: int     # b: pairs where the first outcome holds and the second does not
    only_second: int    # c: pairs where the second holds and the first does not
    statistic: float    # exact: min(b, c); chi-square: (|b − c| − 1)² / (b + c) (with correction)
    p_value: float      # two-sided, H₀: P(first only) = P(second only)
    exact: bool         # True: the binomial test, False: the chi-square approximation


def mcnemar(first, second, *, exact: bool | None = None, correction: bool = True) -> McNemar:
    """McNemar's test (Psychometrika 1947) that two detectors applied to the same n items have the
    same success probability, from the discordant pairs only, computed by statsmodels'
    ``contingency_tables.mcnemar`` on the 2 x 2 table of (first, second):

        b = #{first ∧ ¬second},  c = #{¬first ∧ second},
        exact:       p = min(1, 2 · P(Bin(b + c, 1/2) <= min(b, c)))   (two-sided binomial test),
        chi-square:  χ² = (|b − c| − 1)² / (b + c) ~ χ²₁   (continuity ``correction``; without it |b − c|²).

    exact: None (default) chooses the exact test when b + c < `MCNEMAR_EXACT_BELOW` (25), where
    the chi-square approximation is poor. With no discordant pair (b + c = 0) the detectors never
    disagree: p = 1. first, second: bool[n] paired outcomes (e.g. "setting detected at m₁" and "at
    m₂"), n >= 1. Returns a `McNemar`.
    """
    a, b = np.asarray(first), np.asarray(second)
    for name, value in (("first", a), ("second", b)):
        if value.dtype != bool or value.ndim != 1:
            raise ValueError(f"{name} must be a 1-D bool array of paired outcomes, got {value.dtype} "
                             f"of shape {value.shape}")
    if a.size != b.size or a.size == 0:
        raise ValueError(f"first and second must pair the same n >= 1 items, got {a.size} and {b.size}")
    if exact is not None and not isinstance(exact, bool):
        raise ValueError(f"exact must be True, False or None (automatic), got {exact!r}")
    only_first, only_second = int(np.sum(a & ~b)), int(np.sum(~a & b))
    discordant = only_first + only_second
    exact = discordant < MCNEMAR_EXACT_BELOW if exact is None else exact
    if discordant == 0:
        return McNemar(only_first=0, only_second=0, statistic=0.0, p_value=1.0, exact=exact)
    from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar
    table = np.array([[np.sum(a & b), only_first], [only_second, np.sum(~a & ~b)]])
    result = statsmodels_mcnemar(table, exact=exact, correction=correction)
    return McNemar(only_first=only_first, only_second=only_second, statistic=float(result.statistic),
                   p_value=float(min(result.pvalue, 1.0)), exact=exact)


# --------------------------------------------------------------------------------------------
# Monte Carlo summaries and multiple testing
# --------------------------------------------------------------------------------------------

def bias_rmse(estimates, truth, *, axis: int = -1):
    """Bias and root-mean-square error of estimates over replications along ``axis``:

        bias = (1/R) Σ_r (θ̂_r − θ),   RMSE = sqrt((1/R) Σ_r (θ̂_r − θ)²),   RMSE² = bias² + Var₀(θ̂)

    (Var₀ the variance with divisor R). estimates: f[..., R, ...] with R >= 1 replications; truth: the
    true value(s), broadcastable to the shape of estimates without ``axis`` (e.g. a scalar, or f[M]
    for estimates f[M, R]). Returns (bias, rmse), each f64 of that shape (floats for 1-D input).
    To test bias = 0, use `mean_ci` on estimates − truth.
    """
    values = _float_array(estimates, "estimates")
    if values.ndim == 0:
        raise ValueError("estimates must be at least 1-D (replications along `axis`), got a scalar")
    validate.finite_values("estimates", values)
    values = np.moveaxis(values, axis, -1)
    if values.shape[-1] == 0:
        raise ValueError("estimates has no replications along `axis`")
    true_values = _float_array(truth, "truth")
    validate.finite_values("truth", true_values)
    lead = values.shape[:-1]
    try:
        fits = np.broadcast_shapes(true_values.shape, lead) == lead
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"truth of shape {true_values.shape} must broadcast to the shape of estimates "
                         f"without the replication axis, {lead}")
    errors = values - true_values[..., None]
    bias = errors.mean(axis=-1)
    rmse = np.sqrt(np.mean(errors * errors, axis=-1))
    return _scalar(np.asarray(bias)), _scalar(np.asarray(rmse))


def holm_bonferroni(p_values, alpha: float = 0.05):
    """Holm's step-down correction of a family of m tests along the last axis (Holm, Scand. J.
    Statist. 1979, "A simple sequentially rejective multiple test procedure"): with the p-values
    sorted, p₍₁₎ <= ... <= p₍ₘ₎,

        adjusted p₍ₖ₎ = min(1, max_{j <= k} (m − j + 1) · p₍ⱼ₎),
        reject H₍ₖ₎ iff p₍ⱼ₎ <= alpha / (m − j + 1) for every j <= k   (adjusted p₍ₖ₎ <= alpha),

    which controls the family-wise error rate at alpha under any dependence, computed by
    statsmodels' ``multipletests(method="holm")`` on each family. p_values: f[..., m] in [0, 1],
    m >= 1, each row one family. Returns (reject bool[..., m], adjusted f64[..., m]) in the input
    order. Cost: ``multipletests`` runs a full garbage collection on every call (tens of ms in a
    process holding JAX arrays), one call per family.
    """
    alpha = validate.probability("alpha", alpha, low_open=True, high_open=True)
    p = _float_array(p_values, "p_values")
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"p_values must hold at least one p-value along the last axis, got shape {p.shape}")
    validate.probabilities("p_values", p)
    from statsmodels.stats.multitest import multipletests
    families = p.reshape(-1, p.shape[-1])
    reject, adjusted = np.empty(families.shape, bool), np.empty(families.shape)
    for row, family in enumerate(families):
        reject[row], adjusted[row] = multipletests(family, alpha, method="holm")[:2]
    return reject.reshape(p.shape), adjusted.reshape(p.shape)


# --------------------------------------------------------------------------------------------
# Noise-aware winners
# --------------------------------------------------------------------------------------------

def direction_verdict(mean: float, se: float, *, expect: str = "greater", z: float = Z) -> str:
    """The one rule by which simrec calls a difference: a claimed direction "holds" when the mean
    difference lies beyond z standard errors in that direction (z = 2: about a 95 % two-sided
    level), "fails" when it lies beyond them the other way, is a "tie" in between (a difference
    exactly at ±z·se included) and is "unclear" when the mean or its standard error is not finite.
    expect: "greater" (the claim is a positive difference) or "less"."""
    if expect not in ALTERNATIVES:
        raise ValueError(f"expect must be 'greater' or 'less', got {expect!r}")
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"z must be a finite number of standard errors > 0, got {z}")
    mean, se = float(mean), float(se)
    if not (math.isfinite(mean) and math.isfinite(se)):
        return "unclear"
    directed = mean if expect == "greater" else -mean
    return "holds" if directed > z * se else "fails" if directed < -z * se else TIE


@dataclass(frozen=True)
class Winner:
    """The verdict of `paired_winner` on a difference A − B."""
    winner: str          # the name of A or of B, or `TIE`
    difference: float    # mean of the per-part differences A − B
    se: float            # its standard error sd / √K
    z: float             # difference / se (±inf when se = 0 and difference ≠ 0; 0 when both are 0)


def paired_winner(difference_parts, *, names: tuple[str, str] = ("A", "B"), z: float = 2.0
                  ) -> Winner:
    """The winner of two models compared on K disjoint parts of the test users (Steck, RecSys'13,
    §3.3, splits the test set into five parts to estimate the standard deviation of each measure):

        d̄ = (1/K) Σₖ dₖ,   se = s / √K  (s the sample standard deviation of the dₖ, ddof = 1),
        winner = names[0] if d̄ > z·se,  names[1] if d̄ < −z·se,  else "tie",

    where dₖ is metric(A) − metric(B) on part k, "better" meaning larger (pass the negated
    difference for a lower-is-better metric such as RMSE). The comparison is strict: a difference
    exactly at ±z·se is a tie, and so is d̄ = 0 with se = 0 (identical models).

    difference_parts: f[K], K >= 2 finite values (use K >= 5 parts, as Steck does: with K − 1
    degrees of freedom se itself is noisy). names: the two models' names, distinct and neither
    `TIE`. z: the threshold in standard errors, finite and > 0 (2 by default).
    """
    parts = _float_array(difference_parts, "difference_parts")
    if parts.ndim != 1:
        raise ValueError(f"difference_parts must be 1-D (one difference per part of the test "
                         f"users), got shape {parts.shape}")
    if parts.size < 2:
        raise ValueError(f"difference_parts needs at least 2 parts to estimate a standard error "
                         f"(split the test users into K >= 5 parts), got {parts.size}")
    if np.isnan(parts).any():
        raise ValueError("difference_parts contains NaN: a part without a metric value (e.g. no "
                         "relevant test item) must be merged into another part or dropped")
    validate.finite_values("difference_parts", parts)
    if len(names) != 2 or not all(isinstance(n, str) for n in names) or names[0] == names[1] \
            or TIE in names:
        raise ValueError(f"names must be two distinct model names, neither {TIE!r}, got {names!r}")
    mean, se, _ = _mean_se(parts, np.ones(parts.shape, bool))
    mean, se = float(mean), float(se)
    statistic = mean / se if se > 0 else (math.copysign(math.inf, mean) if mean else 0.0)
    winner = {"holds": names[0], "fails": names[1]}.get(direction_verdict(mean, se, z=z), TIE)
    return Winner(winner=winner, difference=mean, se=se, z=statistic)


def user_parts(key: jax.Array, evaluated, parts: int) -> np.ndarray:
    """The disjoint user parts of `paired_winner`: the evaluated users in a random order (a
    permutation drawn from key), dealt round-robin into parts 0..parts-1, so part sizes differ by
    at most one. evaluated: bool[U], the users with a metric value (e.g. a relevant test item).
    parts: K >= 2 (Steck uses 5). Returns i64[U], each user's part, -1 for users not evaluated."""
    mask = np.asarray(evaluated)
    if mask.ndim != 1 or mask.dtype != bool:
        raise ValueError(f"evaluated must be a 1-D bool mask over the users, got dtype "
                         f"{mask.dtype} and shape {mask.shape}")
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 2:
        raise ValueError(f"parts must be an integer >= 2 (Steck uses 5), got {parts!r}")
    order = np.asarray(jax.random.permutation(key, mask.size))
    order = order[mask[order]]
    out = np.full(mask.size, -1, dtype=np.int64)
    out[order] = np.arange(order.size) % parts
    return out


def part_means(per_user, part, parts: int) -> np.ndarray:
    """The mean of a per-user metric over each part's users, m_k = mean{x_u : part_u = k}, the
    input of `paired_winner` once two models' part means are subtracted.

    per_user: f[U] (NaN allowed only where part = -1); part: i[U] in -1..parts-1 (-1 = no part,
    e.g. from `user_parts`); parts: K >= 1. Returns f64[K] (NaN for an empty part)."""
    values, labels = _float_array(per_user, "per_user"), np.asarray(part)
    if values.ndim != 1 or labels.shape != values.shape:
        raise ValueError(f"per_user and part must be 1-D of one length (one entry per user), got "
                         f"shapes {values.shape} and {labels.shape}")
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if not np.issubdtype(labels.dtype, np.integer) or labels.size and (
            labels.min() < -1 or labels.max() >= parts):
        raise ValueError(f"part must hold integers in -1..{parts - 1} (-1 = in no part), e.g. from "
                         f"user_parts")
    use = labels >= 0
    if np.isnan(values[use]).any():
        raise ValueError("per_user is NaN for a user in a part: leave users without a value out "
                         "of the parts (user_parts(..., evaluated=~np.isnan(per_user), ...))")
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.bincount(labels[use], values[use], parts)
                / np.bincount(labels[use], minlength=parts))

"""simrec.reporting: the report kit (means and SEs, the verdict rule, formats, figures, claims)."""
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from simrec import reporting, stats


def test_mean_se_equals_a_loop_over_the_groups():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 3, 200), "b": rng.choice(["x", "y"], 200),
                          "v": rng.normal(size=200)})
    frame.loc[0, "a"] = 7                                          # a group of one: no SE
    table = reporting.mean_se(frame, ["a", "b"], "v")
    for row in table.itertuples():
        values = frame.v[(frame.a == row.a) & (frame.b == row.b)].to_numpy()
        assert row.n == values.size and row.mean == pytest.approx(values.mean(), rel=1e-15)
        expected = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else math.nan
        assert (math.isnan(row.se) and math.isnan(expected)) or row.se == pytest.approx(expected, rel=1e-12)
    assert list(reporting.mean_se(frame, "b", "v").columns) == ["b", "mean", "se", "n"]


@pytest.mark.parametrize("mean, se, expect, outcome", [
    (0.5, 0.2, "greater", "holds"), (0.4, 0.2, "greater", "tie"), (-0.5, 0.2, "greater", "fails"),
    (-0.5, 0.2, "less", "holds"), (0.0, 0.0, "greater", "tie"), (1e-9, 0.0, "greater", "holds"),
    (0.3, math.nan, "greater", "unclear"), (math.nan, 0.1, "less", "unclear"),
])
def test_the_verdict_rule(mean, se, expect, outcome):
    assert stats.direction_verdict(mean, se, expect=expect) == outcome
    assert reporting.verdict(mean, se, expect=expect).verdict == outcome


def test_paired_verdicts_agree_with_the_paired_winner():
    rng = np.random.default_rng(1)
    for _ in range(50):
        parts = rng.normal(rng.normal(scale=0.5), 1.0, size=5)
        winner = stats.paired_winner(parts, names=("A", "B")).winner
        outcome = reporting.paired_verdict(parts).verdict
        assert {"holds": "A", "fails": "B", "tie": stats.TIE}[outcome] == winner
    assert reporting.paired_verdict([1.0]).verdict == "unclear"
    assert reporting.paired_verdict([1.0, np.nan, 1.2, 1.1]).se == pytest.approx(np.std([1.0, 1.2, 1.1], ddof=1) / 3 ** 0.5)
    with pytest.raises(ValueError, match="expect must be"):
        reporting.verdict(1.0, 1.0, expect="more")


def test_formats():
    assert reporting.number(math.nan) == "–" and reporting.number(-math.inf) == "−∞"
    assert reporting.number(0.123456) == "0.123" and reporting.percent(0.853) == "85 %"
    assert reporting.plus_minus(0.0123, 0.0031, sign=True) == "+0.0123 ± 0.0031"
    assert reporting.verdict(0.5, 0.2).text() == "holds (+0.5 ± 0.2)"


def test_figures_leave_the_global_style_alone():
    before = dict(matplotlib.rcParams)
    fig, axes = reporting.figure(1, 2, sharey=True)
    assert axes.shape == (1, 2) and fig.get_size_inches() == pytest.approx((10.4, 3.9))
    assert dict(matplotlib.rcParams) == before


def test_claims_are_validated_and_rendered():
    with pytest.raises(ValueError, match="verdict must be one of"):
        reporting.Claim("S", "c", "1", 1.0, "holds")
    claims = [reporting.Claim("Steck RecSys'13", "AllRank | MF", "0.96", "a | b", "differs in setting")]
    table = reporting.claims_table(claims)
    assert table.iloc[0]["ours"] == "a | b" and table.iloc[0]["SE"] == "–"
    text = reporting.claims_markdown(claims)
    assert text.startswith("## Claims") and r"AllRank \| MF" in text and "beyond 2 standard errors" in text
    assert reporting.claims_markdown([]) == ""


# ---- log-log fits ------------------------------------------------------------------------------

def test_loglog_fit_recovers_the_exponent_of_a_power_law():
    work = np.array([1e4, 1e5, 1e6, 1e7])
    fit = reporting.loglog_fit(work, 3e-6 * work ** 1.0)
    assert fit.exponent == pytest.approx(1.0, abs=1e-12)
    assert fit.intercept == pytest.approx(math.log10(3e-6), abs=1e-12)
    assert fit.standard_error == pytest.approx(0.0, abs=1e-9)
    # noise of ±10 % at four sizes over three decades moves the slope by at most 0.2/3/... < 0.05
    noisy = 2.0 * work ** 0.5 * np.array([1.1, 0.9, 1.1, 0.9])
    fit = reporting.loglog_fit(work, noisy)
    assert abs(fit.exponent - 0.5) < 0.05 and fit.standard_error > 0


def test_loglog_fit_standard_error_matches_ordinary_least_squares():
    x, y = np.array([10.0, 100.0, 1000.0, 1e4, 1e5]), np.array([1.0, 7.0, 120.0, 900.0, 12_000.0])
    lx, ly = np.log10(x), np.log10(y)
    design = np.stack([np.ones_like(lx), lx], axis=1)
    coef, residual, *_ = np.linalg.lstsq(design, ly, rcond=None)
    cov = residual[0] / (lx.size - 2) * np.linalg.inv(design.T @ design)
    fit = reporting.loglog_fit(x, y)
    assert fit.exponent == pytest.approx(coef[1]) and fit.standard_error == pytest.approx(math.sqrt(cov[1, 1]))


@pytest.mark.parametrize("work, values, message", [
    ([1.0], [1.0], "length >= 2"), ([1.0, 2.0], [1.0, 0.0], "positive"), ([5.0, 5.0], [1.0, 2.0], "distinct"),
    ([1.0, 2.0], [1.0, np.nan], "finite")])
def test_loglog_fit_rejects_bad_input(work, values, message):
    with pytest.raises(ValueError, match=message):
        reporting.loglog_fit(work, values)


def test_pearson_is_scipys_r_and_nan_for_a_constant_or_non_finite_series():
    import scipy.stats
    x, y = np.array([1.0, 2.0, 4.0, 3.0, 7.0]), np.array([0.5, 1.0, 1.5, 3.0, 2.5])
    r, p = reporting.pearson(x, y)
    expected = scipy.stats.pearsonr(x, y)
    assert r == pytest.approx(expected[0], rel=1e-12) and p == pytest.approx(expected[1], rel=1e-9)
    for bad_x, bad_y in ((np.full(5, 2.0), y), (x, np.full(5, 1.0)), (np.where(x > 3, np.nan, x), y),
                         (x, np.where(y > 2, np.inf, y))):
        assert all(math.isnan(v) for v in reporting.pearson(bad_x, bad_y))

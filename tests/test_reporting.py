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

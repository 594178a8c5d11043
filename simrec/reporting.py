"""The report kit: how a study turns its records into tables, verdicts, claims and figures.

Every study's report is built from these few pieces, so that a rule is written once:

* `mean_se` — mean, standard error and count of a value over any grouping of a tidy frame
  (the standard error of a mean is s / √n, with the sample standard deviation s, ddof = 1);
* `verdict` / `paired_verdict` — **the** verdict rule (`simrec.stats.direction_verdict`, stated in
  `VERDICT_RULE`): a claimed direction *holds* when the mean difference lies beyond `Z` = 2
  standard errors in that direction, *fails* when it lies beyond them the other way, is a *tie* in
  between, and is *unclear* when there is no standard error (fewer than two values);
* `loglog_fit` — the least-squares line through (log10 x, log10 y): a power law's exponent and its
  standard error (how a cost or an error scales with size);
* `pearson` — Pearson's r and its p-value of two series, NaN where either is constant or not
  finite (a daily series an estimator could not follow);
* `number`, `plus_minus`, `percent` — number formats for prose and Markdown;
* `figure` — a matplotlib figure drawn in the house theme without touching global state;
* `Claim` — one claim of a source beside our number (the source's number, ours, its standard
  error, the verdict, the table that shows it); `simrec.runner.Report(claims=...)` writes them as
  ``table_claims`` and a "Claims" section of the study's README (`claims_table`, `claims_markdown`).

A study that reproduces a source lists its claims; its report text then refers to them instead of
restating numbers by hand. The kit is presentation only (its edits never recompute a cell): use it
in reports, never to compute records.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

__all__ = ["Z", "VERDICTS", "VERDICT_RULE", "CLAIM_VERDICTS", "standard_error", "mean_se", "pearson", "Verdict",
           "verdict", "paired_verdict", "number", "plus_minus", "percent", "theme", "figure", "Claim",
           "claims_table", "claims_markdown", "markdown_cell"]

from simrec import stats
from simrec.stats import Z, direction_verdict

VERDICTS = ("holds", "fails", "tie", "unclear")
VERDICT_RULE = (f"a claimed direction holds when the mean difference lies beyond {Z:g} standard errors "
                f"in that direction (about a 95 % two-sided level), fails when it lies beyond them the "
                f"other way, is a tie in between, and is unclear without a standard error")
#: how a claim of a source fares here
CLAIM_VERDICTS = ("reproduced", "not reproduced", "tie", "differs in setting", "not testable")


# ---- means and standard errors -------------------------------------------------------------

def standard_error(values) -> float:
    """s / √n of the finite-or-not values given (NaN for fewer than two)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    return float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def mean_se(frame, by, value: str):
    """Mean, standard error (s / √n, ddof = 1; NaN for one value) and count of ``value`` per group
    of ``by`` (a column name or a list of them), as a frame with columns ``by + [mean, se, n]``,
    groups in sorted order. Each group's mean is its values' own mean (pandas ``Series.mean``), so
    it equals what a loop over the groups would give."""
    import pandas as pd
    keys = [by] if isinstance(by, str) else list(by)
    rows = []
    for group, values in frame.groupby(keys, sort=True)[value]:
        group = group if isinstance(group, tuple) else (group,)
        n = len(values)
        rows.append((*group, values.mean(), values.std(ddof=1) / math.sqrt(n) if n > 1 else math.nan, n))
    return pd.DataFrame(rows, columns=[*keys, "mean", "se", "n"])


def pearson(x, y) -> tuple[float, float]:
    """(r, two-sided p) of Pearson's correlation of two equally long series (`simrec.stats.pearson`);
    (NaN, NaN) where either series is constant or holds a value that is not finite."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.nan, math.nan
    r, p = stats.pearson(x, y)
    return float(r), float(p)


@dataclass(frozen=True)
class LogLogFit:
    """y ≈ 10^intercept · x^exponent; standard_error of the exponent (NaN below 3 points)."""
    exponent: float
    intercept: float
    standard_error: float


def loglog_fit(x, y) -> LogLogFit:
    """Least-squares line through (log10 x, log10 y) (`scipy.stats.linregress`): the exponent of a
    power law y = a · x^b, e.g. how a running time grows with the work or an error falls with the
    sample size (b = −1/2: root-n). x, y: positive f[n], n >= 2, at least two distinct x."""
    import scipy.stats
    x, y = np.log10(np.asarray(x, np.float64)), np.asarray(y, np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be vectors of the same length >= 2, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError("x and y must be finite and positive (log-log fit)")
    if np.ptp(x) == 0:
        raise ValueError("x needs at least two distinct values to fit an exponent")
    fit = scipy.stats.linregress(x, np.log10(y))
    return LogLogFit(float(fit.slope), float(fit.intercept), float(fit.stderr) if x.size > 2 else math.nan)


# ---- the verdict rule -------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """A verdict on a claimed direction: ``verdict`` (one of `VERDICTS`), the mean difference in
    the claimed direction's units, its standard error and z = mean / se."""
    verdict: str
    mean: float
    se: float

    @property
    def z(self) -> float:
        if self.se > 0:
            return self.mean / self.se
        return math.copysign(math.inf, self.mean) if self.mean else 0.0

    def text(self, fmt: str = ".3g") -> str:
        """E.g. ``holds (+0.012 ± 0.003)``."""
        if self.verdict == "unclear" and not math.isfinite(self.se):
            return f"unclear ({format(self.mean, '+' + fmt)}, no standard error)"
        return f"{self.verdict} ({plus_minus(self.mean, self.se, fmt, sign=True)})"


def verdict(mean: float, se: float, *, expect: str = "greater", z: float = Z) -> Verdict:
    """The verdict rule (`VERDICT_RULE`) on a mean difference and its standard error (from any
    estimator of it: independent values, Newey–West, a delta method). expect: the claimed
    direction, "greater" (the difference is positive) or "less"."""
    return Verdict(direction_verdict(mean, se, expect=expect, z=z), float(mean), float(se))


def paired_verdict(differences, *, expect: str = "greater", z: float = Z) -> Verdict:
    """`verdict` on paired differences (one per replication, fold or user part): their mean and
    standard error s / √n; NaN values are dropped; fewer than two values is "unclear"."""
    values = np.asarray(differences, dtype=np.float64).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return Verdict("unclear", math.nan, math.nan)
    return verdict(float(values.mean()), standard_error(values), expect=expect, z=z)


# ---- number formats -----------------------------------------------------------------------------

def number(value, fmt: str = ".3g") -> str:
    """A number for prose: ``–`` for NaN, ``∞``/``−∞`` for infinities, else ``format(value, fmt)``."""
    value = float(value)
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return format(value, fmt)


def plus_minus(mean, se, fmt: str = ".3g", *, sign: bool = False) -> str:
    """``mean ± se`` (``+`` shown on positive means with ``sign``)."""
    head = number(mean, ("+" if sign else "") + fmt) if math.isfinite(float(mean)) else number(mean)
    return f"{head} ± {number(se, fmt)}"


def percent(share, digits: int = 0) -> str:
    """A share in [0, 1] as a percentage, e.g. ``85 %``."""
    return "–" if math.isnan(float(share)) else f"{100 * float(share):.{digits}f} %"


# ---- figures -------------------------------------------------------------------------------------

@contextlib.contextmanager
def theme(style: str = "whitegrid", context: str = "paper") -> Iterator[None]:
    """Seaborn's style and context for what is drawn inside the block only (matplotlib's global
    settings are restored after it)."""
    import matplotlib
    import seaborn as sns
    with matplotlib.rc_context(), sns.axes_style(style), sns.plotting_context(context):
        yield


def figure(nrows: int = 1, ncols: int = 1, *, width: float = 5.2, height: float = 3.9,
           style: str = "whitegrid", **subplots):
    """(figure, axes[nrows, ncols]) of ``width`` x ``height`` inches per panel in the house theme
    (`theme`); further keywords go to `matplotlib.pyplot.subplots` (e.g. ``sharey=True``). Draw
    on the axes inside ``with theme():`` to keep seaborn's context for what is drawn later."""
    import matplotlib.pyplot as plt
    with theme(style):
        return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **subplots)


# ---- claims ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One claim of a source and how it fares here.

    source: the reference (e.g. "Jeunen et al. KDD'24, Table 2"); claim: what it states, in our
    words; source_value: the source's number as it reports it ("" when it gives none); ours: our
    number (or text); se: its standard error (NaN when not applicable); verdict: one of
    `CLAIM_VERDICTS`; where: the table (or figure) that shows the evidence.
    """
    source: str
    claim: str
    source_value: str
    ours: float | str
    verdict: str
    se: float = math.nan
    where: str = ""

    def __post_init__(self):
        if self.verdict not in CLAIM_VERDICTS:
            raise ValueError(f"a claim's verdict must be one of {', '.join(CLAIM_VERDICTS)}, got {self.verdict!r}")


CLAIM_COLUMNS = ("source", "claim", "source's number", "ours", "SE", "verdict", "evidence")


def _ours(claim: Claim, fmt: str) -> str:
    return claim.ours if isinstance(claim.ours, str) else number(claim.ours, fmt)


def claims_table(claims: Sequence[Claim], fmt: str = ".3g"):
    """The claims as a frame with `CLAIM_COLUMNS` (numbers formatted with ``fmt``)."""
    import pandas as pd
    return pd.DataFrame([(c.source, c.claim, c.source_value, _ours(c, fmt), number(c.se, fmt), c.verdict, c.where)
                         for c in claims], columns=list(CLAIM_COLUMNS))


def markdown_cell(text) -> str:
    """``text`` as a Markdown table cell: a literal pipe, which would end the cell, escaped."""
    return str(text).replace("|", r"\|")


def claims_markdown(claims: Sequence[Claim], fmt: str = ".3g") -> str:
    """A README section: the claims table and what the verdicts mean."""
    if not claims:
        return ""
    lines = ["## Claims", "", "| " + " | ".join(CLAIM_COLUMNS) + " |", "|" + "---|" * len(CLAIM_COLUMNS)]
    lines += ["| " + " | ".join(map(markdown_cell, row)) + " |"
              for row in claims_table(claims, fmt).itertuples(index=False)]
    lines += ["", f"Verdicts: {', '.join(CLAIM_VERDICTS)}. The rule for a difference: {VERDICT_RULE}."]
    return "\n".join(lines) + "\n"

"""The report of study ``observed_metrics``: records -> a table, verdicts and the sources' claims.
Presentation only (`simrec.reporting`); editing it never recomputes a cell."""
import pandas as pd

from simrec import reporting
from simrec.runner import Report

#: the direction each theorem claims for observed − complete: ADG none (a tie), nDCG lower
EXPECT = {"adg": ("greater", "tie"), "ndcg": ("less", "holds")}


def report(config, records: pd.DataFrame) -> Report:
    """Mean ± SE over draws of observed − complete per metric and rate, its verdict, and one claim
    per theorem (reproduced when the verdict is the expected one at every rate)."""
    records = records.assign(difference=records.observed - records.complete)
    table = reporting.mean_se(records, ["metric", "rate"], "difference")
    table["verdict"] = [reporting.verdict(row.mean, row.se, expect=EXPECT[row.metric][0]).verdict
                        for row in table.itertuples()]
    table["expected"] = [EXPECT[metric][1] for metric in table.metric]

    def claim(metric: str, source: str, text: str, source_value: str) -> reporting.Claim:
        rows = table[table.metric == metric]
        agree = int((rows.verdict == rows.expected).sum())
        return reporting.Claim(source, text, source_value, f"{agree} of {len(rows)} rates: {EXPECT[metric][1]}",
                               "reproduced" if agree == len(rows) else "not reproduced", where="table_bias")

    claims = [claim("adg", "Lim et al. RecSys'15, Thm 1", "ADG on a simple random sample of the relevant items "
                    "is unbiased for ADG on all of them", "observed − complete = 0"),
              claim("ndcg", "Lim et al. RecSys'15, Thm 2", "nDCG on such a sample underestimates nDCG on all "
                    "relevant items", "observed − complete < 0")]
    summary = (f"Observed minus complete user-mean metric, mean ± SE over {config.draws} observed sets per "
               f"observation rate (`table_bias`). ADG's verdict is taken for 'observed is higher' (expected: a "
               f"tie), nDCG's for 'observed is lower' (expected: holds). Rule: {reporting.VERDICT_RULE}.")
    return Report(tables={"table_bias": table}, summary=summary, claims=claims)

"""The arena's report: each estimator's bias, spread and relative MSE against the truth (of
the target's value and of its difference to the rival), the sign test's power on the difference,
the winner of every setting, the figures and the prose."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.stats

from simrec import ope, reporting
from simrec.reporting import Claim
from simrec.runner import Report
from simrec_studies.arena.compute import VALIDATOR

if TYPE_CHECKING:
    from simrec_studies.arena import ArenaConfig

LOGGER = ["logger", "exploration"]
MIPS_WORLD = ["group_size", "direct_effect"]     # the world's MIPS groups and direct effect
WORLD = ["behaviour", "catalogue", *MIPS_WORLD, *LOGGER]    # one truth
MIPS_COLUMNS = {"mips": "MIPS", "dcg": "DCG"}    # the names in `table_mips`'s columns
SETTING = [*WORLD, "sessions"]
LOGGER_NAMES = {"plackett_luce": "Plackett–Luce T", "epsilon_greedy": "ε-greedy ε"}


def _m_text(m: float) -> str:
    return "∞" if math.isinf(m) else f"{m:g}"


_AT_M = ", m = "                  # between an estimator's label and its clipping value in a variant's name
_TIED = "; "                       # between the variants of a winners table's "tied with"


def variant(estimator: str, m: float) -> str:
    """An estimator at a clipping value, as tables name it: its registry label and m."""
    return f"{ope.ESTIMATORS[estimator].label}{_AT_M}{_m_text(m)}"


def variant_label(name: str) -> str:
    """The estimator's registry label in a `variant` name."""
    return name.split(_AT_M)[0]


def _squared_errors(records: pd.DataFrame, quantity: str = "value") -> pd.DataFrame:
    """The estimates of ``quantity`` ("value" or "difference") beside their truth: columns SETTING,
    estimator, m, replication, value (the estimate), value_truth, error, relative squared error
    (error / truth)², and the difference's standard error."""
    truth = records[records.estimator == "truth"][[*WORLD, quantity]]
    est = records[records.estimator != "truth"][[*SETTING, "replication", "estimator", "m", quantity,
                                                 "difference_se"]]
    est = est.merge(truth, on=WORLD, suffixes=("", "_truth"))
    est = est.rename(columns={quantity: "value", f"{quantity}_truth": "value_truth"})
    return est.assign(error=est.value - est.value_truth,
                      relative_squared_error=((est.value - est.value_truth) / est.value_truth) ** 2)


def errors(records: pd.DataFrame) -> pd.DataFrame:
    """Per setting, estimator and m over the replications: the truth, the mean estimate, the bias
    and sd of the estimates, relative MSE = mean ((estimate − truth)/truth)² with its standard error,
    and its parts relative bias² and relative variance."""
    sq = _squared_errors(records)

    def summary(g: pd.DataFrame) -> pd.Series:
        truth, defined = g.value_truth.iloc[0], int(g.value.notna().sum())
        if defined < len(g):                              # undefined on some log: no MSE
            g = g.assign(value=np.nan, error=np.nan, relative_squared_error=np.nan)
        return pd.Series({"truth": truth, "mean": g.value.mean(), "bias": g.error.mean(),
                          "sd": g.value.std(ddof=1), "relative MSE": g.relative_squared_error.mean(),
                          "relative MSE SE": reporting.standard_error(g.relative_squared_error),
                          "relative bias²": (g.error.mean() / truth) ** 2,
                          "relative variance": g.value.var(ddof=1) / truth ** 2, "replications": len(g),
                          "defined": defined})
    out = sq.groupby([*SETTING, "estimator", "m"], sort=False).apply(summary, include_groups=False).reset_index()
    out.insert(out.columns.get_loc("sessions"), "variant", [variant(e, m) for e, m in zip(out.estimator, out.m)])
    return out


def differences(records: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per setting, estimator and m over the replications, for the target − rival difference: its
    truth, mean estimate, relative MSE (with SE), and the sign test at ``confidence`` (two-sided
    normal interval of the paired difference): power = the share of logs whose interval excludes 0
    on the true side, wrong sign = on the other side."""
    sq = _squared_errors(records, "difference")
    z = float(scipy.stats.norm.ppf((1 + confidence) / 2))

    def summary(g: pd.DataFrame) -> pd.Series:
        truth, defined = g.value_truth.iloc[0], int(g.value.notna().sum())
        if defined < len(g):
            g = g.assign(value=np.nan, relative_squared_error=np.nan)
        called = np.abs(g.value) > z * g.difference_se
        right = called & (np.sign(g.value) == np.sign(truth))
        return pd.Series({"true difference": truth, "mean": g.value.mean(),
                          "relative MSE": g.relative_squared_error.mean(),
                          "relative MSE SE": reporting.standard_error(g.relative_squared_error),
                          "power": right.mean() if defined == len(g) else np.nan,
                          "wrong sign": (called & ~right).mean() if defined == len(g) else np.nan,
                          "replications": len(g), "defined": defined})
    out = sq.groupby([*SETTING, "estimator", "m"], sort=False).apply(summary, include_groups=False).reset_index()
    out.insert(out.columns.get_loc("sessions"), "variant", [variant(e, m) for e, m in zip(out.estimator, out.m)])
    return out


def winners(records: pd.DataFrame, quantity: str = "value") -> pd.DataFrame:
    """The winner of every setting for ``quantity`` ("value" or "difference"): the variant
    (estimator, m) of smallest relative MSE, alone when the paired differences of squared errors put
    every other variant above it beyond the verdict rule's 2 standard errors, else a tie with the
    variants not separated from it."""
    sq = _squared_errors(records, quantity)
    rows = []
    for setting, g in sq.groupby(SETTING, sort=False):
        table = g.pivot_table(index="replication", columns=["estimator", "m"], values="relative_squared_error",
                              sort=False, dropna=False).dropna(axis=1)   # variants defined on every log
        best = table.mean().idxmin()
        tied = [column for column in table.columns if column != best
                and reporting.paired_verdict(table[column] - table[best]).verdict != "holds"]
        rows.append({**dict(zip(SETTING, setting)), "winner": variant(*best),
                     "relative MSE": float(table[best].mean()), "tied with": _TIED.join(variant(*c) for c in tied),
                     "winner alone": not tied})
    return pd.DataFrame(rows)


def recommendations(won: pd.DataFrame) -> pd.DataFrame:
    """Per behaviour and log size, the estimator to use: the one with a variant (at some m) that
    wins or ties the winner (`winners`) in the most settings, with that count and the settings';
    estimators level on that count are all named, alphabetically, joined by " or "."""
    rows = []
    for (behaviour, sessions), g in won.groupby(["behaviour", "sessions"], sort=False):
        counts: dict[str, int] = {}
        for winner, tied in zip(g.winner, g["tied with"]):
            for label in set(map(variant_label, [winner, *filter(None, tied.split(_TIED))])):
                counts[label] = counts.get(label, 0) + 1
        top = max(counts.values())
        rows.append({"behaviour": behaviour, "sessions": sessions,
                     "estimator": " or ".join(sorted(label for label, n in counts.items() if n == top)),
                     "best or tied": top, "settings": len(g)})
    return pd.DataFrame(rows)


def _recommendation_lines(won: pd.DataFrame) -> list[str]:
    lines = ["", "Which estimator to use, per behaviour and log size: the one with a variant (at its best m) "
             "that has the smallest relative MSE or ties it in the most settings:", ""]
    for behaviour, g in recommendations(won).groupby("behaviour", sort=False):
        picks = [f"N = {n:,}: {e} ({b} of {t})" for n, e, b, t in
                 zip(g.sessions, g.estimator, g["best or tied"], g.settings)]
        common = set.intersection(*(set(e.split(" or ")) for e in g.estimator))
        change = " — the choice changes with the log size" if not common else ""
        lines.append(f"- {behaviour}: " + "; ".join(picks) + change + ".")
    return lines


#: the estimators from the weakest assumption to the strongest (SLOPE's order of increasing bias and
#: decreasing variance): the whole viewed ranking (SIPS), the items above each rank (RIPS), those
#: for the cascading users and the item alone for the others (AIPS), each item alone under the
#: position-based model (the DCG family), and that with each item's reward set by its group
#: (MIPS); an estimator missing here comes last
ASSUMPTION_ORDER = ("sips", "snsips", "sips_beta", "rips", "snrips", "cascade_dr", "aips", "aips_chosen", "dcg",
                    "dcg_beta", "sndcg", "dr", "mips")


def slope_order(estimators, m, standard_errors) -> np.ndarray:
    """Indices of the variants in SLOPE's order: by `ASSUMPTION_ORDER`, unclipped before clipped (m
    descending), then by standard error, largest first."""
    rank = [ASSUMPTION_ORDER.index(e) if e in ASSUMPTION_ORDER else len(ASSUMPTION_ORDER) for e in estimators]
    return np.lexsort((-np.asarray(standard_errors), -np.asarray(m), rank))


def slope_choice(values: np.ndarray, standard_errors: np.ndarray, order: np.ndarray | None = None) -> int:
    """The variant SLOPE chooses among one log's estimates (Su et al., ICML'20, after Lepski): walk
    along ``order`` (least biased first; default: by standard error, largest first) while the
    intervals V̂ ± 2 SE of every variant so far still share a point, and choose the last variant
    reached. values, standard_errors: f64[V]. Returns its index."""
    order = np.argsort(-standard_errors, kind="stable") if order is None else order
    low, high, chosen = -np.inf, np.inf, int(order[0])
    for i in order:
        low = max(low, values[i] - 2 * standard_errors[i])
        high = min(high, values[i] + 2 * standard_errors[i])
        if low > high:
            break
        chosen = int(i)
    return chosen


#: the reference of `estimated_mse`: unclipped SIPS, unbiased under every behaviour of the arena
#: (it weights the whole viewed ranking), noisy; the cross-validation's validator too
REFERENCE = VALIDATOR
ESTIMATED_MSE = "smallest estimated MSE, vs SIPS"
#: the selector that scores every variant on a second policy with an on-policy log of its own (the
#: rival, as if deployed): the variant whose estimate of the rival's value, from the logger's log,
#: lies closest to the mean reward of the rival's own log of the same size. It is the non-adaptive
#: pseudo-evaluation heuristic that Udagawa et al. (AAAI'23) compare their PAS-IF with (after Saito
#: et al., 2021): it fits the choice to the rival's distribution shift, not the target's
ON_POLICY = "smallest error on the rival's own log"
#: off-policy cross-validation (Cief et al., AAAI'25; `compute.cross_validate`): the smallest mean
#: squared difference to unclipped SIPS on held-out sessions plus one standard error over the splits
CROSS_VALIDATION = "cross-validation, vs SIPS"


def estimated_mse(values: np.ndarray, standard_errors: np.ndarray, reference: int) -> np.ndarray:
    """A plug-in estimate of each variant's MSE from one log: its squared standard error plus its
    squared difference to an unbiased reference, less the reference's own squared standard error
    (the noise that difference carries), floored at 0,

        MSE^(v) = SE_v² + max((V̂_v − V̂_ref)² − SE_ref², 0).

    values, standard_errors: f64[V]; reference: the reference variant's index. Returns f64[V]."""
    bias_squared = np.maximum((values - values[reference]) ** 2 - standard_errors[reference] ** 2, 0.0)
    return standard_errors ** 2 + bias_squared


def selected(records: pd.DataFrame, fixed: str) -> pd.DataFrame:
    """Estimator selection from each log alone: per setting, log (replication) and selector, the
    variant it chooses and that variant's relative squared error, beside the best variant in
    hindsight (the smallest relative MSE of the setting) and its error on the same log, and the
    relative MSE of DCG at its best m (the yardstick of SLOPE over DCG's clipping values).
    Candidates: the variants defined on every log of the setting, except on a log where a variant's
    estimated SE is 0 (every weighted term equal, e.g. no logged ranking the target shows: no
    information on its error). Selectors: SLOPE (`slope_choice`) in the order of the
    estimators' assumptions (`slope_order`) and in the order of the estimated SE; SLOPE over DCG's
    clipping values alone (m descending: bias grows and variance shrinks as m falls, SLOPE's own
    setting); the smallest estimated SE; the smallest estimated MSE (`estimated_mse`, against
    unclipped SIPS); the smallest error on a policy whose value a log of its own shows
    (`ON_POLICY`); off-policy cross-validation (`CROSS_VALIDATION`: the smallest error plus its
    standard error, the one-standard-error rule); and the variant ``fixed`` (a `variant` name) for
    every setting (the report passes the one that wins most settings: a choice made in hindsight
    over the whole arena)."""
    sq = _squared_errors(records)
    se = records[records.estimator != "truth"][[*SETTING, "replication", "estimator", "m", "value_se",
                                                "rival_value", "rival_log", "cv_error", "cv_error_se"]]
    sq = sq.merge(se, on=[*SETTING, "replication", "estimator", "m"])
    rows = []
    for setting, g in sq.groupby(SETTING, sort=False):
        defined = g.groupby(["estimator", "m"]).value.transform(lambda v: v.notna().all())
        g = g[defined & g.value_se.notna()]
        by_variant = g.groupby(["estimator", "m"]).relative_squared_error.mean()
        best = by_variant.idxmin()
        dcg_variants = by_variant[by_variant.index.get_level_values("estimator") == "dcg"]
        best_dcg = float(dcg_variants.min()) if len(dcg_variants) else np.nan
        for replication, log in g.groupby("replication"):
            best_error = float(log[(log.estimator == best[0]) & (log.m == best[1])].relative_squared_error.iloc[0])
            log = log[log.value_se > 0].reset_index(drop=True)
            variants = list(zip(log.estimator, log.m))
            ses = log.value_se.to_numpy()
            values = log.value.to_numpy()
            dcg = np.flatnonzero(log.estimator.to_numpy() == "dcg")
            rival_error = (log.rival_value - log.rival_log).pow(2).to_numpy()        # NaN where undefined
            validated = (log.cv_error + log.cv_error_se).to_numpy()                   # one-standard-error rule
            picks = {"SLOPE, by assumption": slope_choice(values, ses, slope_order(log.estimator, log.m, ses)),
                     "SLOPE, by SE": slope_choice(values, ses),
                     "SLOPE over m, DCG": (slope_choice(values, ses, dcg[np.argsort(-log.m.to_numpy()[dcg])])
                                           if dcg.size else None),
                     "smallest SE": int(np.argmin(ses)),
                     ESTIMATED_MSE: (int(np.argmin(estimated_mse(values, ses, variants.index(REFERENCE))))
                                     if REFERENCE in variants else None),
                     ON_POLICY: (int(np.nanargmin(rival_error)) if np.isfinite(rival_error).any() else None),
                     CROSS_VALIDATION: int(np.nanargmin(validated)) if np.isfinite(validated).any() else None,
                     f"fixed: {fixed}": next((i for i, v in enumerate(variants) if variant(*v) == fixed), None)}
            rows += [{**dict(zip(SETTING, setting)), "replication": replication, "selector": name,
                      "chosen": variant(*variants[i]), "relative_squared_error": float(log.relative_squared_error[i]),
                      "best variant": variant(*best), "best_error": best_error, "best DCG relative MSE": best_dcg}
                     for name, i in picks.items() if i is not None]
    return pd.DataFrame(rows)


def selection(records: pd.DataFrame, fixed: str) -> pd.DataFrame:
    """`selection_table` of `selected`."""
    return selection_table(selected(records, fixed))


def selection_table(picks: pd.DataFrame) -> pd.DataFrame:
    """Estimator selection judged by regret against the best variant in hindsight, from the picks of
    `selected`: per setting and selector, the relative MSE of the estimates it chooses, the best
    variant's, the regret (their difference, with the SE of the paired squared errors) and how often
    it chooses that best variant."""
    rows = []
    for (*setting, name), g in picks.groupby([*SETTING, "selector"], sort=False):
        errors_, best_errors = g.relative_squared_error.to_numpy(), g.best_error.to_numpy()
        rows.append({**dict(zip(SETTING, setting)), "selector": name, "relative MSE": errors_.mean(),
                     "best variant": g["best variant"].iloc[0], "best relative MSE": best_errors.mean(),
                     "regret": errors_.mean() - best_errors.mean(),
                     "regret SE": reporting.standard_error(errors_ - best_errors),
                     "chose the best": (g.chosen == g["best variant"]).mean(),
                     "best DCG relative MSE": g["best DCG relative MSE"].iloc[0], "logs": len(g)})
    return pd.DataFrame(rows)


def _selector_claim(picks: pd.DataFrame) -> list[Claim]:
    """Cross-validation against SLOPE (in the order of the assumptions, as Cief et al. run it),
    paired on the same logs at the largest log size: its chosen estimates' relative squared errors
    smaller beyond the verdict rule in most settings and larger in none."""
    picks = picks[picks.sessions == picks.sessions.max()]
    found = []
    for _, g in picks.groupby(SETTING, sort=False):
        paired = g.pivot_table(index="replication", columns="selector", values="relative_squared_error")
        if {CROSS_VALIDATION, "SLOPE, by assumption"} <= set(paired.columns):
            found.append(_side(paired["SLOPE, by assumption"] - paired[CROSS_VALIDATION]))
    if not found:
        return []
    lower, higher = found.count("lower"), found.count("higher")
    verdict = _count_verdict(lower, higher, len(found))
    return [Claim("Cief et al. AAAI'25", "off-policy cross-validation chooses an estimator with a smaller error "
                  "than SLOPE", "", f"smaller relative squared error of the chosen estimate beyond 2 SE in {lower} of "
                  f"{len(found)} settings, larger in {higher}, tied in {len(found) - lower - higher}", verdict,
                  where="table_selection (largest log size)")]


def _finished(fig, axes, title: str):
    """The figure with the top-right panel's legend moved outside, its title and a tight layout."""
    import seaborn as sns
    with reporting.theme():
        if axes[0, -1].get_legend() is not None:
            sns.move_legend(axes[0, -1], "upper left", bbox_to_anchor=(1.02, 1), fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
    return fig


def _logger_labels(data: pd.DataFrame) -> list[str]:
    """Each row's logger and exploration level as the figures name them ("ε-greedy ε = 0.05")."""
    return [f"{LOGGER_NAMES[k]} = {v:g}" for k, v in zip(data.logger, data.exploration)]


def _grid_figure(data: pd.DataFrame, rows: str, x: str, hue: str, style: str, xlabel: str, title: str):
    """Relative MSE against ``x`` (both log scale), one panel per (``rows`` value, catalogue); lines:
    ``hue``, dashes: ``style``."""
    import seaborn as sns
    row_values, catalogues = list(dict.fromkeys(data[rows])), sorted(set(data.catalogue))
    fig, axes = reporting.figure(len(row_values), len(catalogues), width=3.6, height=3.0, sharex=True)
    with reporting.theme():
        for i, row in enumerate(row_values):
            for j, catalogue in enumerate(catalogues):
                ax = axes[i, j]
                panel = data[(data[rows] == row) & (data.catalogue == catalogue)]
                sns.lineplot(data=panel, x=x, y="relative MSE", hue=hue, style=style, marker="o", errorbar=None,
                             ax=ax, legend=(i, j) == (0, len(catalogues) - 1))
                ax.set(xscale="log", yscale="log", title=f"{row}, {catalogue} items",
                       xlabel=xlabel if i == len(row_values) - 1 else "", ylabel="relative MSE" if j == 0 else "")
    return _finished(fig, axes, title)


def _figure(table: pd.DataFrame, m: float):
    """Relative MSE against the log size, one panel per (behaviour, catalogue); lines: estimators,
    dashes: the logger and its exploration."""
    data = table[table.m == m]
    data = data.assign(logger=_logger_labels(data), estimator=data.estimator.map(lambda e: ope.ESTIMATORS[e].label))
    return _grid_figure(data, "behaviour", "sessions", "estimator", "logger", "logged sessions",
                        f"Relative MSE against the truth (m = {_m_text(m)})")


def _power_figure(diffs: pd.DataFrame, m: float):
    """The sign test's power on the target − rival difference against the log size, one panel per
    behaviour (mean over catalogues and loggers); lines: estimators."""
    import seaborn as sns
    behaviours = list(dict.fromkeys(diffs.behaviour))
    data = diffs[diffs.m == m].assign(estimator=lambda d: d.estimator.map(lambda e: ope.ESTIMATORS[e].label))
    fig, axes = reporting.figure(1, len(behaviours), width=3.6, height=3.0, sharey=True)
    with reporting.theme():
        for j, behaviour in enumerate(behaviours):
            ax = axes[0, j]
            sns.lineplot(data=data[data.behaviour == behaviour], x="sessions", y="power", hue="estimator",
                         marker="o", errorbar=None, ax=ax, legend=j == len(behaviours) - 1)
            ax.set(xscale="log", ylim=(0, 1.02), title=behaviour, xlabel="logged sessions",
                   ylabel="power (right sign called)" if j == 0 else "")
    return _finished(fig, axes, f"Sign test on target − rival, mean over catalogues and loggers (m = {_m_text(m)})")


def _bias_settings(table: pd.DataFrame, estimator: str, behaviours) -> tuple[int, int, int]:
    """(settings where the unclipped estimator's bias lies beyond 2 SE of 0, how many of those lie
    below the truth, settings) at the largest log size and the given behaviours."""
    rows = table[(table.estimator == estimator) & np.isinf(table.m) & table.behaviour.isin(behaviours)
                 & (table.sessions == table.sessions.max())]
    z = rows.bias / (rows.sd / np.sqrt(rows.replications))
    return int((np.abs(z) > reporting.Z).sum()), int((z < -reporting.Z).sum()), len(rows)


def _paired_counts(records: pd.DataFrame, estimator: str, other: str, behaviours,
                   quantity: str = "value", spread: bool = False) -> tuple[int, int, int]:
    """Settings (largest log size, m = ∞, the given behaviours) where ``estimator``'s squared errors
    of ``quantity`` (with ``spread``: the squared deviations of its estimates from their own mean
    over the logs) are below ``other``'s on the same logs beyond the verdict rule, above them
    beyond it, and all such settings."""
    sq = _squared_errors(records, quantity)
    sq = sq[np.isinf(sq.m) & sq.behaviour.isin(behaviours) & (sq.sessions == sq.sessions.max())]
    found = paired_comparison(sq, estimator, other, spread)
    return int((found == "lower").sum()), int((found == "higher").sum()), len(found)


def _side(gap: pd.Series) -> str:
    """"lower" where the paired gaps (the other's squared error minus this one's, one per log) lie
    above 0 beyond the verdict rule, "higher" where below it, else "tie"."""
    return ("lower" if reporting.paired_verdict(gap).verdict == "holds" else
            "higher" if reporting.paired_verdict(-gap).verdict == "holds" else "tie")


def _count_verdict(lower: int, higher: int, total: int) -> str:
    """A claim that one side is lower: reproduced where it is lower in most settings and higher in
    none, not reproduced where it is higher at least as often as lower, else a tie."""
    if lower > total / 2 and not higher:
        return "reproduced"
    return "not reproduced" if higher >= max(lower, 1) else "tie"


def paired_comparison(sq: pd.DataFrame, estimator: str, other: str, spread: bool = False) -> pd.Series:
    """Per setting of `_squared_errors` rows (one m), ``estimator`` against ``other`` on the same
    logs: "lower" where its relative squared errors (with ``spread``: squared deviations of its
    estimates from their mean over the logs) lie below the other's beyond the verdict rule,
    "higher" where above, else "tie"; settings without both are left out. Indexed by SETTING."""
    out = {}
    for setting, g in sq.groupby(SETTING, sort=False):
        paired = g.pivot_table(index="replication", columns="estimator",
                               values="value" if spread else "relative_squared_error")
        if {estimator, other} <= set(paired.columns):
            if spread:
                paired = (paired - paired.mean()) ** 2
            out[setting] = _side(paired[other] - paired[estimator])
    index = pd.MultiIndex.from_tuples(list(out), names=SETTING) if out else \
        pd.MultiIndex.from_arrays([[]] * len(SETTING), names=SETTING)
    return pd.Series(list(out.values()), index=index, dtype=object)


def _claims(table: pd.DataFrame, records: pd.DataFrame) -> list[Claim]:
    """The papers' claims, each tested at the largest log size and m = ∞: the cascade papers' where
    the reward depends on the items above (click-stops, satiation, mixed), AIPS's where the behaviour
    depends on the user (mixed) or the reward on the items below (neighbours, slate), the baselines'
    where their estimator is unbiased. An unbiased estimator may still miss its truth beyond 2 SE over the
    replications when its weights are heavy-tailed: the typical log lacks the rare rankings with
    huge weights and falls below the truth, with the sample SE too small; most significant misses
    below the truth is that pattern, not a bias."""
    behaviours = list(dict.fromkeys(table.behaviour))
    violated = [b for b in ("click_stops", "satiation", "mixed") if b in behaviours]
    below = [b for b in ("neighbours", "slate", "mixed_all") if b in behaviours]
    where = "table_errors (m = ∞, largest log size)"
    claims = []
    if violated:
        biased, _, n = _bias_settings(table, "dcg", violated)
        missed, low, n_rips = _bias_settings(table, "rips", violated)
        rips_verdict = _unbiased_verdict(missed, low, n_rips)
        claims += [Claim("Kiyohara et al. WSDM'22 §3; McInerney et al. KDD'20",
                         "the independent IPS estimator (simrec's DCG) is biased when the reward at a rank depends "
                         "on the items above it (cascade behaviour)", "",
                         f"bias beyond 2 SE in {biased} of {n} settings ({', '.join(violated)})",
                         "reproduced" if biased > n / 2 else "not reproduced", where=where),
                   Claim("Kiyohara et al. WSDM'22 §3; McInerney et al. KDD'20",
                         "RIPS (reward-interaction IPS) is unbiased under the cascade behaviour (the papers' action "
                         "spaces: a few actions per slot)", "",
                         f"mean of the logs beyond 2 SE of the truth in {missed} of {n_rips} settings (about 5 % "
                         f"expected by chance), {low} of them below it: heavy-tailed prefix weights (up to "
                         f"{max(table.catalogue)} items), so that a log of this size rarely holds the target's deeper "
                         "rankings", rips_verdict, where=where),
                   *_paired_claim(records, "cascade_dr", "rips", violated, "value", "Kiyohara et al. WSDM'22 §4–5",
                                  "Cascade-DR has a smaller error than RIPS under the cascade behaviour (a reward "
                                  "model as control variate); reward model: an item-level click rate from a pilot "
                                  "log")]
    if below:
        biased, low, n = _bias_settings(table, "rips", below)
        if biased - low > n / 2:                 # above the truth: the target's better items below satiate more
            rips_verdict = "reproduced"
        else:
            rips_verdict = "differs in setting" if low >= 2 * biased / 3 else "not reproduced"
        missed, sips_low, n_sips = _bias_settings(table, "sips", below)
        claims += [Claim("Kiyohara et al. KDD'23 §3", "RIPS is biased when the reward at a rank depends on items below "
                         "it (the neighbours or the whole slate: beyond the cascade assumption)", "",
                         f"bias beyond 2 SE in {biased} of {n} settings ({', '.join(below)}): {biased - low} above "
                         "the truth, the direction the behaviour predicts (RIPS weighs rank k by the items down to k "
                         f"and misses that the target's better items below satiate more), {low} below it, the "
                         "pattern of heavy-tailed prefix weights that the unbiased estimators show here too, over "
                         f"{int(table.replications.max())} logs; tests/test_ope_slate.py plants the bias beyond 6 SE "
                         "with tame weights", rips_verdict, where=where),
                   Claim("Kiyohara et al. KDD'23 §3; Swaminathan et al. NeurIPS'17",
                         "slate IPS (SIPS) stays unbiased when the reward depends on the whole slate", "",
                         f"mean of the logs beyond 2 SE of the truth in {missed} of {n_sips} settings, {sips_low} of "
                         "them below it (heavy-tailed whole-ranking weights)",
                         _unbiased_verdict(missed, sips_low, n_sips),
                         where=where),
                   *_paired_claim(records, "aips", "sips", [b for b in below if b == "neighbours"], "value",
                                  "Kiyohara et al. KDD'23 §4",
                                  "AIPS, weighting each rank by the items its reward depends on (here the prefix "
                                  "down to the next rank), has a smaller error than SIPS when the reward depends on "
                                  "the neighbouring items only")]
    mixed = [b for b in behaviours if b == "mixed"]
    claims += _paired_claim(records, "aips", "rips", mixed, "value", "Kiyohara et al. KDD'23 §4",
                            "AIPS, weighting each session by the action set of its user's behaviour, has a smaller "
                            "error than RIPS when only some users cascade (here with the true behaviour of every "
                            "user)")
    claims += _paired_claim(records, "aips", "dcg", mixed, "value", "Kiyohara et al. KDD'23 §4, §6",
                            "AIPS has a smaller error than the independent IPS estimator (simrec's DCG) when only some "
                            "users cascade (IIPS is then biased on the cascading users' sessions)")
    claims += _paired_claim(records, "aips_chosen", "rips", mixed, "value", "Kiyohara et al. KDD'23 §5–6",
                            "AIPS with each user's behaviour chosen from the logged data has a smaller error than "
                            "RIPS when only some users cascade (here chosen per user among four behaviours by "
                            "cross-fitted tests of each estimator against the wider ones, not the paper's tree)")
    mixed_all = [b for b in behaviours if b == "mixed_all"]
    for other, label in (("sips", "SIPS"), ("rips", "RIPS"), ("dcg", "the independent IPS estimator (simrec's DCG)")):
        claims += _paired_claim(records, "aips", other, mixed_all, "value", "Kiyohara et al. KDD'23 §4, §6",
                                f"AIPS with every user's true behaviour has a smaller error than {label} when the "
                                "users mix all four behaviours (position-based, cascade, neighbours, whole slate), the "
                                "paper's own setting")
    claims += _paired_claim(records, "aips_chosen", "sips", mixed_all, "value", "Kiyohara et al. KDD'23 §5–6",
                            "AIPS with each user's behaviour chosen from the logged data has a smaller error than "
                            "SIPS when the users mix all four behaviours (chosen per user by cross-fitted tests, not "
                            "the paper's tree)")
    position_based = [b for b in behaviours if b == "position_based"]
    claims += [*_paired_claim(records, "dcg_beta", "dcg", position_based, "value", "Gupta, Jeunen et al. RecSys'24",
                              "the optimal baseline correction (β-IPS) lowers the error of IPS (here DCG) where IPS "
                              "is unbiased"),
               *_paired_claim(records, "dcg_beta", "dcg", position_based, "difference",
                              "Jeunen & Ustimenko RecSys'24",
                              "the difference of two policies estimated on one log with the pair's optimal baseline "
                              "(Δβ-IPS) has a smaller error than the plain IPS difference (here DCG's)"),
               *_paired_claim(records, "sips_beta", "sips", behaviours, "value", "Gupta, Jeunen et al. RecSys'24",
                              "the optimal baseline correction lowers the error of slate IPS (SIPS), unbiased under "
                              "every behaviour here"),
               *_paired_claim(records, "mips", "dcg", position_based, "value", "Saito & Joachims ICML'22 §4",
                              "marginalising the weights over item embeddings (MIPS) lowers the variance of IPS (here "
                              "DCG)", spread=True),
               *_paired_claim(records, "mips", "dcg", position_based, "value", "Saito & Joachims ICML'22 §4–5",
                              "marginalising the weights over item embeddings (MIPS) lowers the error of IPS (here "
                              "DCG) where IPS is unbiased; embeddings here: k-means groups of the items' features, so "
                              "MIPS's no-direct-effect assumption holds only approximately and its bias counts too")]
    return claims


def _unbiased_verdict(missed: int, below: int, settings: int) -> str:
    """The verdict on an unbiasedness claim from the settings whose mean misses the truth beyond 2 SE
    (`_bias_settings`): reproduced at about the chance rate (at most 10 %, or 1), a difference of
    setting when most misses lie below the truth (heavy-tailed weights, not a bias), else not."""
    if missed <= max(1, round(0.1 * settings)):
        return "reproduced"
    return "differs in setting" if below >= 2 * missed / 3 else "not reproduced"


def _paired_claim(records: pd.DataFrame, estimator: str, other: str, behaviours, quantity: str, source: str,
                  claim: str, spread: bool = False) -> list[Claim]:
    """``estimator`` against ``other``, paired on the same logs: its squared error of ``quantity``
    (with ``spread``: its squared deviation from its own mean, a variance) smaller beyond the
    verdict rule in most settings and larger in none (`_paired_counts`)."""
    lower, higher, total = _paired_counts(records, estimator, other, behaviours, quantity, spread)
    if not total:
        return []
    verdict = _count_verdict(lower, higher, total)
    table = "table_errors" if quantity == "value" else "table_differences"
    measured = ("squared deviation from its mean over the logs" if spread else
                f"squared error of the {'value' if quantity == 'value' else 'target − rival difference'}")
    return [Claim(source, claim, "",
                  f"smaller {measured} beyond 2 SE in {lower} of {total} settings, larger in {higher}, tied in "
                  f"{total - lower - higher} ({', '.join(behaviours)})", verdict,
                  where=f"{table} (m = ∞, largest log size" + ("; column relative variance)" if spread else ")"))]


def _difference_lines(config: ArenaConfig, diffs: pd.DataFrame) -> list[str]:
    """The sign test on the pair, in words: per behaviour the power of each estimator at the largest
    log size and m = ∞ (median over catalogues and loggers), and every wrong-sign call."""
    largest = diffs[(diffs.sessions == diffs.sessions.max()) & np.isinf(diffs.m)]
    if not len(largest):
        return []
    lines = ["", f"Which of the pair is better (target − rival, a second {_target_kind(config)} with score noise "
             f"{config.rival_noise:g}), by the sign of the paired difference's {config.confidence:.0%} interval at "
             f"N = {int(diffs.sessions.max()):,}, m = ∞ — median power over catalogues and loggers:", ""]
    for behaviour, g in largest.groupby("behaviour", sort=False):
        power = g.groupby("estimator", sort=False)["power"].median()
        lines.append(f"- {behaviour}: " + "; ".join(f"{ope.ESTIMATORS[e].label} {p:.2f}" for e, p in power.items()))
    wrong = diffs[diffs["wrong sign"] > 0]
    lines += ["", "Wrong-sign calls (the interval excludes 0 on the wrong side): " + (
        "; ".join(f"{v} in {n} settings" for v, n in wrong.variant.value_counts().items()) if len(wrong) else "none")
        + f" (expected by chance at most {(1 - config.confidence) / 2:.1%} of the logs of an unbiased estimator)."]
    return lines


def _selection_lines(selections: pd.DataFrame) -> list[str]:
    """Estimator selection in words: per behaviour and log size, each selector's relative MSE as a
    multiple of the best variant's (median over catalogues and loggers), and in how many settings
    its regret lies beyond 2 SE; for SLOPE over DCG's m, also the multiple of DCG's best m."""
    if not len(selections):
        return []
    lines = ["", "Choosing the estimator and m from the log alone, judged by regret against the best variant in "
             "hindsight (table_selection): the selector's relative MSE as a multiple of the best variant's, median "
             "over catalogues and loggers, and the settings where its regret lies beyond 2 SE:", ""]
    ratio = selections.assign(ratio=selections["relative MSE"] / selections["best relative MSE"],
                              worse=selections.regret > reporting.Z * selections["regret SE"])
    best_from_log = []
    for (behaviour, sessions), g in ratio.groupby(["behaviour", "sessions"], sort=False):
        parts = g.groupby("selector", sort=False).agg(ratio=("ratio", "median"), worse=("worse", "sum"),
                                                      settings=("worse", "size"))
        over_m = g[g.selector == "SLOPE over m, DCG"]
        own = (over_m["relative MSE"] / over_m["best DCG relative MSE"]).median() if len(over_m) else np.nan
        lines.append(f"- {behaviour}, N = {int(sessions):,}: " + "; ".join(
            f"{name} {r.ratio:.2f}×" + (f" ({own:.2f}× DCG's best m)" if name == "SLOPE over m, DCG" else "")
            + f" ({int(r.worse)} of {int(r.settings)} worse)" for name, r in parts.iterrows()))
        from_log = parts[~parts.index.str.startswith("fixed: ")].ratio
        if from_log.notna().any():
            best_from_log.append(from_log.idxmin())
    if best_from_log:
        counts = sorted(pd.Series(best_from_log).value_counts().items(), key=lambda item: (-item[1], item[0]))
        lines += ["", "The selector with the smallest median multiple among those that choose from the log (not the "
                  f"fixed variant), over the {len(best_from_log)} pairs of behaviour and log size: " + "; ".join(
                      f"{name} in {n}" for name, n in counts) + "."]
    return lines


def _cross_validation_lines(picks: pd.DataFrame, records: pd.DataFrame) -> list[str]:
    """Why cross-validation chooses as it does: its most frequent choices, and where its validator,
    unclipped SIPS, lies against the truth at the largest log size (median ratio per catalogue)."""
    chosen = picks[picks.selector == CROSS_VALIDATION].chosen.value_counts()
    if not len(chosen):
        return []
    sq = _squared_errors(records)
    sips = sq[(sq.estimator == REFERENCE[0]) & (sq.m == REFERENCE[1]) & (sq.sessions == sq.sessions.max())]
    ratios = (sips.value / sips.value_truth).groupby(sips.catalogue).median()
    top = "; ".join(f"{name} on {n:,} logs" for name, n in chosen.head(3).items())
    return ["", f"Cross-validation chooses most often {top} (of {int(chosen.sum()):,} choices). Its validator, "
            f"unclipped SIPS, is unbiased but heavy-tailed: at N = {int(sips.sessions.max()):,} its median estimate "
            "is " + ", ".join(f"{r:.2f}" for r in ratios) + " of the truth for " + ", ".join(
                f"{int(a):,}" for a in ratios.index) + " items, so on most logs the held-out sessions favour the "
            "variants that estimate low, as the plug-in rule does."]


def _target_kind(config: ArenaConfig) -> str:
    """The targets' ranker in words."""
    return ("deterministic target" if config.target_temperature == 0 else
            f"Plackett–Luce target (temperature {config.target_temperature:g})")


def truth_check(records: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Per setting: the truth, its Monte Carlo standard error (0 when exact), the smallest RMSE of
    any estimator variant (truth · sqrt(smallest relative MSE)) and their ratio, which the truth's
    noise must keep small (at most 1/10) for the scores to be the estimators' own."""
    truth = records[records.estimator == "truth"][[*WORLD, "value", "value_se"]].rename(
        columns={"value": "truth", "value_se": "truth SE"})
    best = table.groupby(SETTING, sort=False)["relative MSE"].min().rename("smallest relative MSE").reset_index()
    out = best.merge(truth, on=WORLD)
    out["smallest RMSE"] = out.truth.abs() * np.sqrt(out["smallest relative MSE"])
    out["truth SE / smallest RMSE"] = out["truth SE"] / out["smallest RMSE"]
    return out[[*SETTING, "truth", "truth SE", "smallest RMSE", "truth SE / smallest RMSE"]]


def _truth_lines(check: pd.DataFrame) -> list[str]:
    """The Monte Carlo truth's noise against the estimators' errors, in words."""
    noisy = check[check["truth SE"] > 0]
    if noisy.empty:
        return []
    over = noisy[noisy["truth SE / smallest RMSE"] > 0.1]
    return ["", f"The truth is a Monte Carlo mean in {len(noisy)} of {len(check)} settings (a Plackett–Luce target "
            "where the reward depends on the items above): its standard error is at most "
            f"{noisy['truth SE / smallest RMSE'].max():.3f} of the smallest RMSE of any estimator in the same setting "
            f"(`table_truth`), {'above' if len(over) else 'within'} the bound of 1/10"
            + (f" in {len(over)} settings, whose scores include the truth's own noise." if len(over) else ".")]


def summary_text(config: ArenaConfig, table: pd.DataFrame, won: pd.DataFrame, diffs: pd.DataFrame,
                 selections: pd.DataFrame, mips: pd.DataFrame, check: pd.DataFrame, picks: pd.DataFrame,
                 records: pd.DataFrame) -> str:
    loggers = ([f"a Plackett–Luce logger (temperatures {', '.join(f'{t:g}' for t in config.temperatures)})"]
               if config.temperatures else []) + (
        [f"an ε-greedy logger around its sorted order (ε {', '.join(f'{e:g}' for e in config.epsilons)})"]
        if config.epsilons else [])
    lines = [f"The online reward of a {_target_kind(config)} ranking K = {config.feed_length} of A items, "
             f"estimated from logs of {' and '.join(loggers)} "
             "by every registered estimator of the online value, at m in "
             f"{{{', '.join(_m_text(m) for m in config.m)}}}, "
             f"over {config.replications} independent logs per setting; scored by relative MSE "
             "(mean squared error over the squared truth). A winner is named when its squared errors are below "
             f"every other variant's beyond the verdict rule ({reporting.VERDICT_RULE}); else a tie.", ""]
    for behaviour, g in won.groupby("behaviour", sort=False):
        counts = g.winner.value_counts()
        alone = g[g["winner alone"]]
        lines.append(f"- {behaviour}: smallest relative MSE in {len(g)} settings — "
                     + ", ".join(f"{w} ({c})" for w, c in counts.items())
                     + f"; a winner alone in {len(alone)} of them.")
    lines += _recommendation_lines(won)
    undefined = table[table.defined < table.replications]
    if len(undefined):
        lines += ["", "Undefined somewhere (a self-normalised estimator whose mean weight is 0 on at least one "
                  "log: no logged ranking the target can show for SN-SIPS, no logged prefix down to some rank for "
                  "SN-RIPS): "
                  + "; ".join(f"{v} in {n} settings" for v, n in undefined.variant.value_counts().items())
                  + " — left out of those settings' rankings."]
    base = base_world(config, table)
    largest = base[base.sessions == base.sessions.max()]
    unclipped = largest[np.isinf(largest.m)]
    if len(unclipped):
        lines += ["", f"Bias and variance at N = {int(table.sessions.max()):,}, m = ∞ (median over catalogues and "
                  "loggers of relative bias² / relative variance"
                  + (f"; the world of {config.group_sizes[0]} items per MIPS group, direct effect "
                     f"{max(config.direct_effects):g}" if len(config.group_sizes) * len(config.direct_effects) > 1
                     else "") + "):", ""]
        for behaviour, g in unclipped.groupby("behaviour", sort=False):
            parts = g.groupby("estimator", sort=False)[["relative bias²", "relative variance"]].median()
            lines.append(f"- {behaviour}: " + "; ".join(
                f"{ope.ESTIMATORS[e].label} {reporting.number(r['relative bias²'])} / "
                f"{reporting.number(r['relative variance'])}" for e, r in parts.iterrows()))
        by_catalogue = unclipped.groupby(["estimator", "catalogue"])["relative MSE"].median().unstack()
        lines += ["", "How the catalogue size moves each estimator's relative MSE (median over behaviours and "
                  "loggers, m = ∞): " + "; ".join(
                      f"{ope.ESTIMATORS[e].label} " + " → ".join(reporting.number(v) for v in row.values)
                      for e, row in by_catalogue.iterrows())
                  + f" for {' → '.join(str(c) for c in by_catalogue.columns)} items."]
        lines += _mips_lines(config, unclipped)
    lines += _mips_dial_lines(mips)
    lines += _truth_lines(check)
    lines += _difference_lines(config, diffs)
    lines += _selection_lines(selections)
    lines += _cross_validation_lines(picks, records)
    lines += ["", "Caveats: the worlds are random low-rank click models chosen to make the behaviours "
              "comparable, not calibrated to a real platform; "
              + ("the target is deterministic (its truth is exact) " if config.target_temperature == 0 else
                 "the target ranks by Plackett–Luce (its truth is exact under position_based, a Monte Carlo mean "
                 "otherwise: `table_truth`) ")
              + "and the logger has full support, so no estimator loses target mass; DR's reward model is an "
              "item-level click rate from a pilot log, which ignores the behaviour; SN-DCG's view normaliser is "
              "the whole log's mean views; Cascade-DR's Q-function is that reward model at rank k alone (not "
              "the paper's recursive fit of the later ranks); SLOPE's guarantee assumes a known order of "
              "increasing bias and decreasing variance and valid intervals: the orders across estimators only "
              "approximate the first (DCG's clipping values satisfy it), and heavy-tailed weights make the slate "
              "estimators' estimated SE too small on most logs, which breaks the second; regret is measured "
              "against the best variant of any estimator (for SLOPE over DCG's m, the multiple of DCG's best m "
              "is given too). AIPS knows four behaviours (independent: DCG's weight; cascade: RIPS's; neighbours: "
              "the prefix down to the next rank, a superset of the paper's action set {k−1, k, k+1}, whose exact "
              "marginal a Plackett–Luce logger lacks in closed form; standard: SIPS's), not the paper's random "
              "action sets; the neighbours and slate behaviours satiate by the items the user sees (a feed logs "
              "the viewed ranks only); 'AIPS (true behaviour)' is given every user's behaviour, 'AIPS (behaviour "
              "from the log)' chooses it per user: the narrowest behaviour whose estimate agrees within 2 SE with "
              "every wider one on that user's sessions, cross-fitted (the paper fits a tree "
              "of context features by an estimated MSE; its public code estimates the bias against the on-policy "
              "value with 30 % noise, on fresh simulated logs, which a practitioner's log does not give); "
              "the plug-in MSE selector's reference, unclipped SIPS, is unbiased here but its SE is too small on "
              "most logs (above), so the rule reads the reference's own error as every other variant's bias and "
              "tends to choose the reference family (SIPS, β-SIPS) itself; the selector on the rival's own log "
              "needs a second policy that was deployed (its on-policy log here has the same size as the "
              "logger's), and it tunes the choice to the rival's distribution shift, not the target's; "
              "cross-validation (Cief et al., AAAI'25) trains each variant on a share of the log that balances its "
              "variance against the validator's, so where unclipped SIPS is noisy a low-variance variant is trained "
              "on a few sessions and the rule compares errors at that size, not at N; its validator is the "
              "heavy-tailed SIPS of the plug-in rule, on sessions apart from the training ones (so its error does "
              "not favour the SIPS family); PAS-IF "
              "(Udagawa et al., AAAI'23) is not built: it subsamples the log into pseudo-logger and "
              "pseudo-target logs, whose item and prefix marginals (what DCG, RIPS, MIPS and AIPS weigh by) have "
              "no closed form for a ranking logger, and a feed log does not show the unviewed ranks that the "
              "subsampling rule would read."]
    return "\n".join(lines)


def base_world(config: ArenaConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the world every figure and claim shows but MIPS's own: the first group size and
    the largest direct effect (the items as drawn when it is 1)."""
    return frame[(frame.group_size == config.group_sizes[0]) & (frame.direct_effect == max(config.direct_effects))]


def mips_table(records: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """MIPS beside DCG, unclipped, per setting (every world): each one's relative bias
    (mean estimate − truth) / truth with its SE over the logs, relative variance and relative MSE,
    MIPS's relative MSE over DCG's, and whether MIPS's squared errors lie below DCG's on the same
    logs beyond the verdict rule ("lower"), above ("higher") or neither ("tie")."""
    rows = table[np.isinf(table.m) & table.estimator.isin(["mips", "dcg"])]
    if not {"mips", "dcg"} <= set(rows.estimator):
        return pd.DataFrame()
    rows = rows.assign(**{"relative bias": rows.bias / rows.truth,
                          "relative bias SE": rows.sd / np.sqrt(rows.replications) / rows.truth.abs()})
    wide = rows.pivot_table(index=SETTING, columns="estimator", sort=False,
                            values=["relative bias", "relative bias SE", "relative variance", "relative MSE"])
    wide.columns = [f"{MIPS_COLUMNS[e]} {value}" for value, e in wide.columns]
    mips, dcg = MIPS_COLUMNS["mips"], MIPS_COLUMNS["dcg"]
    wide[f"{mips} / {dcg} relative MSE"] = wide[f"{mips} relative MSE"] / wide[f"{dcg} relative MSE"]
    sq = _squared_errors(records)
    wide[f"{mips} vs {dcg}"] = paired_comparison(sq[np.isinf(sq.m)], "mips", "dcg")
    return wide.reset_index()


def _mips_figure(mips: pd.DataFrame):
    """MIPS's and DCG's relative MSE (m = ∞, largest log size) against the group size, a line per
    direct effect, a panel per (logger, catalogue)."""
    mips_label, dcg_label = MIPS_COLUMNS["mips"], MIPS_COLUMNS["dcg"]
    data = mips[mips.sessions == mips.sessions.max()]
    data = pd.concat([data.assign(estimator=label, **{"relative MSE": data[f"{label} relative MSE"]})
                      for label in (mips_label, dcg_label)], ignore_index=True)
    data = data.assign(logger=_logger_labels(data), **{"direct effect": data.direct_effect.map(lambda e: f"{e:g}")})
    return _grid_figure(data, "logger", "group_size", "direct effect", "estimator", "items per MIPS group",
                        f"MIPS's assumption dialled: relative MSE at N = {int(data.sessions.max()):,}, m = ∞ "
                        "(direct effect 0: no direct effect)")


def _mips_dial_lines(mips: pd.DataFrame) -> list[str]:
    """The MIPS dial in words (largest log size): per direct effect, MIPS's median relative bias and
    its relative MSE over DCG's along the group size, and how often it beats DCG."""
    if mips.empty or mips[MIPS_WORLD].drop_duplicates().shape[0] < 2:
        return []
    mips_label, dcg_label = MIPS_COLUMNS["mips"], MIPS_COLUMNS["dcg"]
    largest = mips[mips.sessions == mips.sessions.max()]
    lines = ["", f"MIPS's assumption dialled (`table_mips`, `fig_mips`; N = {int(largest.sessions.max()):,}, m = ∞, "
             "medians over catalogues and loggers): per direct effect e, along the group size, MIPS's relative bias "
             f"and its relative MSE as a multiple of {dcg_label}'s, then the settings where its squared errors lie "
             f"below / above {dcg_label}'s beyond 2 SE:", ""]
    for effect, g in largest.groupby("direct_effect", sort=True):
        steps = g.groupby("group_size", sort=True).agg(
            bias=(f"{mips_label} relative bias", "median"),
            ratio=(f"{mips_label} / {dcg_label} relative MSE", "median"))
        verdicts = g[f"{mips_label} vs {dcg_label}"].value_counts()
        lines.append(f"- e = {effect:g}: " + "; ".join(f"{int(size)} per group: bias {row.bias:+.3f}, MSE "
                                                       f"{row.ratio:.2f}×" for size, row in steps.iterrows())
                     + f" ({verdicts.get('lower', 0)} lower, {verdicts.get('higher', 0)} higher, "
                     f"{verdicts.get('tie', 0)} tied of {len(g)}).")
    return lines


def _mips_claims(mips: pd.DataFrame) -> list[Claim]:
    """Saito & Joachims's two MIPS claims where their assumption holds exactly (direct effect 0,
    groups of more than one item; largest log size, m = ∞): unbiased (mean of the logs within 2 SE
    of the truth in all but about 5 % of the settings), and a smaller error than IPS (here DCG)."""
    if mips.empty:
        return []
    mips_label, dcg_label = MIPS_COLUMNS["mips"], MIPS_COLUMNS["dcg"]
    exact = mips[(mips.direct_effect == 0) & (mips.group_size > 1) & (mips.sessions == mips.sessions.max())]
    if exact.empty:
        return []
    z = exact[f"{mips_label} relative bias"] / exact[f"{mips_label} relative bias SE"]
    missed, n = int((np.abs(z) > reporting.Z).sum()), len(exact)
    verdicts = exact[f"{mips_label} vs {dcg_label}"].value_counts()
    lower, higher = int(verdicts.get("lower", 0)), int(verdicts.get("higher", 0))
    where = "table_mips (direct effect 0, m = ∞, largest log size)"
    return [Claim("Saito & Joachims ICML'22 §3", "MIPS is unbiased when the reward depends on the item only "
                  "through its embedding (no direct effect; here the item's group)", "",
                  f"mean of the logs beyond 2 SE of the truth in {missed} of {n} settings (about 5 % expected by "
                  f"chance; median |relative bias| {exact[f'{mips_label} relative bias'].abs().median():.3f})",
                  "reproduced" if missed <= max(1, round(0.1 * n)) else "not reproduced", where=where),
            Claim("Saito & Joachims ICML'22 §4–5", "where MIPS's assumption holds, marginalising the weights over "
                  "the embedding lowers the error of IPS (here DCG)", "",
                  f"smaller squared error beyond 2 SE in {lower} of {n} settings, larger in {higher}, tied in "
                  f"{n - lower - higher}", _count_verdict(lower, higher, n), where=where)]


def _mips_lines(config: ArenaConfig, unclipped: pd.DataFrame) -> list[str]:
    """MIPS beside DCG at the largest log size, m = ∞: the median relative bias per behaviour, and
    where MIPS's error is smaller only because its groups' bias offsets the behaviour's."""
    bias = (unclipped[unclipped.estimator.isin(["mips", "dcg"])].assign(relative_bias=lambda t: t.bias / t.truth)
            .groupby(["behaviour", "estimator"], sort=False).relative_bias.median().unstack())
    if not {"mips", "dcg"} <= set(bias.columns):
        return []
    text = (f"MIPS (item groups: A // {config.group_sizes[0]} k-means clusters of the items' terms of the logit) "
            "beside "
            "DCG, median relative bias (estimate − truth) / truth at this N and m = ∞: " + "; ".join(
                f"{behaviour} MIPS {row.mips:+.3f}, DCG {row.dcg:+.3f}" for behaviour, row in bias.iterrows()) + ".")
    own = bias.mips.get("position_based", math.nan)
    offset = [b for b, row in bias.iterrows() if b != "position_based" and np.sign(row.dcg) == -np.sign(own) != 0
              and abs(row.mips) < abs(row.dcg)]
    if own == own:
        text += (f" Where DCG is unbiased (position-based), MIPS's groups alone bias it by {own:+.3f}, "
                 "the users' tastes differing within a group.")
    if offset:
        listed = offset[0] if len(offset) == 1 else f"{', '.join(offset[:-1])} and {offset[-1]}"
        text += (f" Under {listed} DCG's bias has the opposite sign, so MIPS's smaller error there "
                 "comes from the two biases offsetting each other in this world, not from modelling the behaviour.")
    return ["", text]


def report(config: ArenaConfig, records: pd.DataFrame) -> Report:
    table = errors(records)
    won = winners(records)
    diffs = differences(records, config.confidence)
    picks = selected(records, won.winner.value_counts().index[0])
    chosen = selection_table(picks)
    mips = mips_table(records, table)
    pivot = won.pivot_table(index=["behaviour", *MIPS_WORLD, *LOGGER, "catalogue"], columns="sessions",
                            values="winner", aggfunc="first", sort=False).reset_index()
    base_table, base_diffs = base_world(config, table), base_world(config, diffs)
    figures = {f"fig_mse_m{_m_text(m).replace('∞', 'inf')}": _figure(base_table, m) for m in config.m}
    figures[f"fig_power_m{_m_text(max(config.m)).replace('∞', 'inf')}"] = _power_figure(base_diffs, max(config.m))
    tables = {"table_errors": table.drop(columns=["estimator", "m"]), "table_winners": won,
              "table_winner_map": pivot, "table_differences": diffs.drop(columns=["estimator", "m"]),
              "table_difference_winners": winners(records, "difference"), "table_selection": chosen}
    several = not mips.empty and mips[MIPS_WORLD].drop_duplicates().shape[0] > 1
    if several:
        tables["table_mips"] = mips
        figures["fig_mips"] = _mips_figure(mips)
    check = truth_check(records, table)
    if (check["truth SE"] > 0).any():
        tables["table_truth"] = check
    return Report(tables=tables, figures=figures,
                  summary=summary_text(config, table, won, diffs, chosen, mips, check, picks, records),
                  claims=(_claims(base_table, base_world(config, records)) + _selector_claim(base_world(config, picks))
                          + (_mips_claims(mips) if several else [])))

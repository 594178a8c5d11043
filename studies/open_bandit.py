"""Study ``open_bandit``: do simrec's off-policy estimators recover a real policy's click rate?

The Open Bandit Dataset (Saito, Aihara, Matsutani & Narita, NeurIPS'21 Datasets and Benchmarks)
logged the same ZOZOTOWN campaigns in the same week under two policies, a uniform-random one and
Bernoulli Thompson sampling (BTS). Each policy's on-policy click rate is therefore a real ground
truth for an off-policy estimate computed from the other policy's log. This study uses the
10,000-row sample of each log that ships with obp 0.5.7 (`simrec.data.load_open_bandit`): about
40–70 clicks per log, so what it can test is whether the estimates agree with the truth within
their confidence intervals, not how precise they are.

Data path. Each log is read, turned into OBP's ``bandit_feedback`` dictionary
(`simrec.obp.open_bandit_feedback`) and from it into a simrec `Log`
(`simrec.obp.from_bandit_feedback`): the sample does not keep the three rows of one impression
together, so every row is a one-slot session whose logging exposure is the row's
``propensity_score`` = P(item at this position) under the logger, and whose position is kept
beside it.

Target action probabilities π_T(a, k), the probability that the target puts item a at position
k (0-based):
- random evaluated on the BTS log: π_T = 1 / I exactly (I = the campaign's items);
- BTS evaluated on the random log: the BTS log's ``propensity_score`` is the BTS probability of
  the logged (item, position) at its own time, and BTS's probabilities change over the week as
  its posteriors move; the random log's rows come at other times, for which the sample gives no
  BTS probability. π_T is therefore the BTS log's empirical (item, position) distribution,
  count(a at k) / count(k): an unbiased estimate of BTS's time-averaged distribution. It is an
  approximation: the estimand becomes sum_a π̄(a, k) q̄(a, k) (time averages), which differs from
  BTS's actual click rate by the covariance over time between BTS's choices and the click rates.

Estimators (`simrec.ope`, on the logger's rounds; position-wise on the rounds at position k, and
overall on all rounds, i.e. the click rate per impression as OBP defines the policy value), with
w = π_T(a, k) / p₀ and p₀ the logged propensity:
- IPS: mean c·w (`trajectory_dcg` with m = ∞; each round is a one-slot feed);
- clipped IPS: mean c·min(m, 1/p₀)·π_T with m = clip × I (`trajectory_dcg` with m), i.e. no
  round weighs more than clip times what the uniform logger's rounds weigh;
- self-normalised IPS: mean c·w / mean w (`self_normalised_dcg`, target_views = 1: the target
  fills each slot once; per position, the other rounds enter as unviewed, which leaves the ratio
  exact and changes its delta-method standard error by a factor below 1 + 1e-3);
- doubly robust: (`trajectory_dr`) with the reward model q̂(a, k) = the click rate of (item,
  position) in the other folds of the logger's log (`folds`-fold cross-fitting, rows assigned to
  folds at random), shrunk towards the fold's click rate at position k by `prior_rounds`
  pseudo-rounds, and the direct term sum_a π_T(a, k) q̂(a, k).

Truth and agreement. The on-policy click rate of the target's own log (overall and per position)
with its standard error; the difference estimate − truth with SE sqrt(SE_est² + SE_truth²) (two
separate logs); at `level`, "truth in CI" = the truth lies in the estimate's interval, and
"agrees" = the interval of the difference covers 0 (noise on both sides).

Position bias by randomisation. Under the uniform logger every item is equally likely at every
position, so the click rate at position k over that at position 1 estimates the relative
examination P(V | k) / P(V | 1) if the position-based model holds; its interval is the delta
method on the log ratio of two independent binomial rates. The same ratio on the BTS log is shown
beside it: BTS puts different items at different positions, so its ratio mixes examination with
item quality.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd
import scipy.stats

from simrec import data, obp, ope, stats, validate
from simrec.runner import Report, Study, cell_key
from simrec.datafiles import data_file, skipped_note

POLICIES = ("random", "bts")
OVERALL = -1                                   # `position` of an estimate over all positions
IPS, SNIPS, DR, ON_POLICY = "IPS", "self-normalised IPS", "doubly robust", "on-policy"
RANDOMISED, NAIVE_BTS = "randomised (random log)", "raw (BTS log, not randomised)"


@dataclass(frozen=True)
class OpenBanditConfig:
    """The campaigns, the estimators' settings and the confidence level (module docstring)."""
    #: the Open Bandit folder below the data folder (`simrec.datafiles.data_root`), holding
    #: random/ and bts/; "" skips the study
    folder: str = "open-bandit-sample"
    campaigns: tuple[str, ...] = ("all", "men", "women")   # campaigns analysed, one cell each
    clip: tuple[float, ...] = (1.0, 10.0)     # clipped IPS: m = clip x I caps 1/propensity
    folds: int = 2                            # cross-fitting folds of the doubly robust reward model
    prior_rounds: float = 20.0                # reward model: pseudo-rounds at the position's click rate per cell
    level: float = 0.95                       # confidence level of every interval

    def __post_init__(self):
        if not self.campaigns or len(set(self.campaigns)) != len(self.campaigns):
            raise ValueError(f"campaigns must be distinct names of {data.OPEN_BANDIT_CAMPAIGNS}, got {self.campaigns}")
        for campaign in self.campaigns:
            validate.choice("campaigns", campaign, data.OPEN_BANDIT_CAMPAIGNS)
        if any(not (math.isfinite(c) and c > 0) for c in self.clip):
            raise ValueError(f"clip must hold finite factors > 0 (m = clip x n_items), got {self.clip}")
        validate.integer("folds", self.folds, low=2)
        validate.finite("prior_rounds", self.prior_rounds, low=0.0)
        validate.probability("level", self.level, low_open=True, high_open=True)

    @property
    def z(self) -> float:
        """The two-sided normal quantile of `level`."""
        return float(scipy.stats.norm.ppf(0.5 + self.level / 2))


PRESETS = {
    "smoke": OpenBanditConfig(campaigns=("men",)),
    "default": OpenBanditConfig(),
}

COLUMNS = {
    "campaign": str,        # the campaign (all, men, women)
    "part": str,            # "estimate": an off-policy estimate; "on-policy": a log's own click rate;
                            # "position bias": relative click rate of a position; "support": target
                            # mass on (item, position) pairs the log never shows; "data": a log's size
    "target": str,          # the policy whose click rate is estimated (or whose log it is)
    "logger": str,          # the log the value is computed from
    "estimator": str,       # IPS, "clipped IPS (m = c·I)", self-normalised IPS, doubly robust,
                            # on-policy; position bias: randomised / raw; data: the size's name
    "position": int,        # 0-based slot, or -1 = over all positions
    "value": float,         # the estimate (click rate per impression; a ratio for position bias)
    "se": float,            # its standard error (position bias: of the log of the ratio)
    "n": int,               # rounds used
    "clicks": int,          # clicks among them
}


# ---- data -----------------------------------------------------------------------------------

def _relative(config: OpenBanditConfig, policy: str, campaign: str) -> str:
    return f"{config.folder}/{policy}/{campaign}/{campaign}.csv.gz" if config.folder else ""


def data_files(config: OpenBanditConfig) -> list[str]:
    """Every file a run reads: each campaign's log and item context, of both policies."""
    return [f"{config.folder}/{p}/{c}/{name}" for c in config.campaigns for p in POLICIES
            for name in (f"{c}.csv.gz", "item_context.csv")] if config.folder else []


def _present(config: OpenBanditConfig) -> bool:
    return bool(config.folder) and all(data_file(_relative(config, p, c)) is not None
                                       for c in config.campaigns for p in POLICIES)


def cells(config: OpenBanditConfig) -> list[dict]:
    return [{"campaign": c} for c in config.campaigns] if _present(config) else []


def load(config: OpenBanditConfig, campaign: str) -> dict[str, tuple[dict, object]]:
    """{policy: (its bandit_feedback dictionary, its simrec Log)} of one campaign."""
    path = data_file(_relative(config, "random", campaign))
    folder = path.parents[2]
    out = {}
    for policy in POLICIES:
        feedback = obp.open_bandit_feedback(data.load_open_bandit(folder, policy, campaign))
        out[policy] = (feedback, obp.from_bandit_feedback(feedback, signal_name="click"))
    return out


# ---- target probabilities and reward model ---------------------------------------------------

def pair_counts(position: np.ndarray, action: np.ndarray, values: np.ndarray, n_positions: int,
                n_items: int) -> np.ndarray:
    """sum of values per (position, item).  f64[n_positions, n_items]."""
    flat = np.bincount(position * n_items + action, weights=values, minlength=n_positions * n_items)
    return flat.reshape(n_positions, n_items)


def target_table(target: str, feedback: dict, n_positions: int) -> np.ndarray:
    """π_T(a, k), f64[n_positions, n_items]: 1/I for random; for bts the empirical (item,
    position) distribution of its own log, count(a at k) / count(k) (module docstring)."""
    n_items = int(feedback["n_actions"])
    if target == "random":
        return np.full((n_positions, n_items), 1.0 / n_items)
    counts = pair_counts(feedback["position"], feedback["action"], np.ones(feedback["n_rounds"]),
                         n_positions, n_items)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


def reward_model(key, config: OpenBanditConfig, feedback: dict, n_positions: int) -> np.ndarray:
    """Cross-fitted q̂ of every round: the (item, position) click rate in the other folds,
    (clicks + α r_k) / (rounds + α) with r_k the other folds' click rate at position k and
    α = prior_rounds. Returns (fold of each round i64[n], q̂ tables f64[folds, n_positions, I])."""
    n, n_items = int(feedback["n_rounds"]), int(feedback["n_actions"])
    fold = np.asarray(jax.random.permutation(key, n)) % config.folds
    tables = []
    for f in range(config.folds):
        train = fold != f
        position, action = feedback["position"][train], feedback["action"][train]
        clicks = pair_counts(position, action, feedback["reward"][train].astype(float), n_positions, n_items)
        rounds = pair_counts(position, action, np.ones(int(train.sum())), n_positions, n_items)
        rate = clicks.sum(axis=1, keepdims=True) / np.maximum(rounds.sum(axis=1, keepdims=True), 1.0)
        tables.append((clicks + config.prior_rounds * rate) / np.maximum(rounds + config.prior_rounds, 1e-12))
    return fold, np.stack(tables)


# ---- estimates ------------------------------------------------------------------------------

def _record(campaign, part, target, logger, estimator, position, value, se, n, clicks) -> dict:
    return {"campaign": campaign, "part": part, "target": target, "logger": logger, "estimator": estimator,
            "position": int(position), "value": float(value), "se": float(se), "n": int(n),
            "clicks": int(clicks)}


def estimates(key, config: OpenBanditConfig, campaign: str, target: str, feedback: dict, log,
              pi: np.ndarray) -> list[dict]:
    """Every estimator of the target's click rate from one logger's rounds, per position and
    overall (module docstring). pi: π_T f64[n_positions, I]."""
    logger = "bts" if target == "random" else "random"
    n_positions, n_items = pi.shape
    position, action = feedback["position"], feedback["action"]
    target_exposure = pi[position, action].astype(np.float32)[:, None]        # [n, 1]
    fold, q_tables = reward_model(key, config, feedback, n_positions)
    predicted = q_tables[fold, position, action].astype(np.float32)[:, None]
    direct = np.sum(pi[None] * q_tables, axis=2)[fold, position].astype(np.float32)
    rewards, logging_exposure, viewed = np.asarray(log.rewards[0]), np.asarray(log.logging_exposure), \
        np.asarray(log.viewed)
    args = (rewards, logging_exposure, target_exposure, viewed)
    m = np.array([np.inf, *(c * n_items for c in config.clip)])
    ips = np.asarray(ope.trajectory_dcg(*args, m=m))                        # [1 + clips, n]
    dr = np.asarray(ope.trajectory_dr(*args, predicted, direct))           # [n]
    names = [IPS, *(clip_name(c) for c in config.clip), DR]
    values = np.concatenate([ips, dr[None]])
    lost = pair_counts(position, action, np.ones(len(position)), n_positions, n_items) == 0
    mass = (pi * lost).sum(axis=1)
    rows = []
    for k in (OVERALL, *range(n_positions)):
        use = np.ones(len(position), bool) if k == OVERALL else position == k
        n, clicks = int(use.sum()), int(rewards[use].sum())
        # every subset is the full-length array with NaN outside it (skipped by mean_estimate),
        # so one compiled shape serves all positions
        est = ope.mean_estimate(np.where(use[None], values, np.nan))
        # self-normalised: rounds outside the subset are unviewed, adding 0 to both means of the
        # ratio (the value is exact; the delta-method SE differs by sqrt(N(n-1) / (n(N-1))) < 1e-3)
        snips = ope.self_normalised_dcg(rewards, logging_exposure, target_exposure, viewed & use[:, None],
                                        target_views=1.0)
        found = [(name, est.value[j], est.standard_error[j]) for j, name in enumerate(names)]
        found.insert(len(names) - 1, (SNIPS, snips.value, snips.standard_error))
        rows += [_record(campaign, "estimate", target, logger, name, k, value, se, n, clicks)
                 for name, value, se in found]
        rows.append(_record(campaign, "support", target, logger, "target mass off the log", k,
                            mass.mean() if k == OVERALL else mass[k], 0.0, n, clicks))
    return rows


def clip_name(clip: float) -> str:
    return f"clipped IPS (m = {clip:g}·I)"


def on_policy(campaign: str, policy: str, feedback: dict, n_positions: int) -> list[dict]:
    """The log's own click rate, overall and per position, with its standard error."""
    rows = []
    for k in (OVERALL, *range(n_positions)):
        use = np.ones(feedback["n_rounds"], bool) if k == OVERALL else feedback["position"] == k
        est = ope.mean_estimate(np.where(use, feedback["reward"], np.nan))       # NaN: skipped
        rows.append(_record(campaign, ON_POLICY, policy, policy, ON_POLICY, k, est.value, est.standard_error,
                            use.sum(), feedback["reward"][use].sum()))
    return rows


def position_bias(campaign: str, policy: str, feedback: dict, n_positions: int) -> list[dict]:
    """Click rate at position k / at position 0, with the SE of its logarithm (delta method for
    two independent binomial rates, sqrt((1-p_k)/(n_k p_k) + (1-p_0)/(n_0 p_0))). The ratio is
    `simrec.feed.position_bias.randomisation_curve`'s; that function needs the clicks of every
    position of each session, which this sample does not link, so the rates here come from
    separate rows and the SE from independent samples."""
    n = np.bincount(feedback["position"], minlength=n_positions).astype(float)
    c = np.bincount(feedback["position"], weights=feedback["reward"].astype(float), minlength=n_positions)
    p = c / np.maximum(n, 1)
    name = RANDOMISED if policy == "random" else NAIVE_BTS
    rows = []
    for k in range(n_positions):
        ratio = p[k] / p[0] if p[0] > 0 else math.nan
        se = 0.0 if k == 0 else math.sqrt((1 - p[k]) / (n[k] * p[k]) + (1 - p[0]) / (n[0] * p[0])) \
            if p[k] > 0 and p[0] > 0 else math.nan                       # position 1: 1 by definition
        rows.append(_record(campaign, "position bias", "", policy, name, k, ratio, se, n[k], c[k]))
    return rows


def compute(key, config: OpenBanditConfig, cell: dict, shared) -> list[dict]:
    campaign = cell["campaign"]
    logs = load(config, campaign)
    n_positions = max(int(f["position"].max()) + 1 for f, _ in logs.values())
    n_items = {int(f["n_actions"]) for f, _ in logs.values()}
    if len(n_items) != 1:
        raise ValueError(f"campaign {campaign}: the random and bts logs have different item counts {n_items}")
    rows = []
    for policy, (feedback, _) in logs.items():
        rows += on_policy(campaign, policy, feedback, n_positions)
        rows += position_bias(campaign, policy, feedback, n_positions)
        rows += [_record(campaign, "data", policy, policy, name, OVERALL, value, 0.0, feedback["n_rounds"],
                         feedback["reward"].sum())
                 for name, value in (("items", feedback["n_actions"]),
                                     ("min propensity", feedback["pscore"].min()),
                                     ("max propensity", feedback["pscore"].max()))]
    for j, target in enumerate(POLICIES):
        logger = POLICIES[1 - j]
        pi = target_table(target, logs[target][0], n_positions)
        rows += estimates(jax.random.fold_in(cell_key(key, cell), j), config, campaign, target,
                          *logs[logger], pi)
    return rows


# ---- report ---------------------------------------------------------------------------------

def comparison(config: OpenBanditConfig, records: pd.DataFrame) -> pd.DataFrame:
    """Each estimate beside the target's on-policy click rate (same campaign and position), with
    the intervals of both, of their difference, and the two agreement flags."""
    est = records[records.part == "estimate"]
    truth = records[records.part == ON_POLICY][["campaign", "target", "position", "value", "se"]]
    table = est.merge(truth, on=["campaign", "target", "position"], suffixes=("", "_truth"))
    z = config.z
    diff_se = np.sqrt(table.se ** 2 + table.se_truth ** 2)
    difference = table.value - table.value_truth
    out = pd.DataFrame({
        "campaign": table.campaign, "target": table.target, "logger": table.logger,
        "estimator": table.estimator, "position": table.position,
        "estimate": table.value, "low": table.value - z * table.se, "high": table.value + z * table.se,
        "on-policy": table.value_truth, "on-policy low": table.value_truth - z * table.se_truth,
        "on-policy high": table.value_truth + z * table.se_truth,
        "difference": difference, "difference low": difference - z * diff_se,
        "difference high": difference + z * diff_se,
        "truth in CI": np.where((table.value_truth >= table.value - z * table.se)
                                & (table.value_truth <= table.value + z * table.se), "yes", "no"),
        "agrees": np.where(np.abs(difference) <= z * diff_se, "yes", "no"),
        "clicks": table.clicks, "rounds": table.n})
    order = {c: i for i, c in enumerate(data.OPEN_BANDIT_CAMPAIGNS)}
    return out.sort_values(["campaign", "target", "position"], key=lambda s: s.map(order) if s.name == "campaign"
                           else s, kind="stable").reset_index(drop=True)


def bias_table(config: OpenBanditConfig, records: pd.DataFrame) -> pd.DataFrame:
    rows = records[records.part == "position bias"]
    z = config.z
    return pd.DataFrame({"campaign": rows.campaign, "log": rows.logger, "estimator": rows.estimator,
                         "position": rows.position + 1, "relative click rate": rows.value,
                         "low": rows.value * np.exp(-z * rows.se), "high": rows.value * np.exp(z * rows.se),
                         "clicks": rows.clicks, "rounds": rows.n}).reset_index(drop=True)


def data_table(records: pd.DataFrame) -> pd.DataFrame:
    rows = records[records.part == "data"]
    table = rows.pivot_table(index=["campaign", "logger"], columns="estimator", values="value", sort=False)
    sizes = rows.groupby(["campaign", "logger"], sort=False)[["n", "clicks"]].first()
    support = records[(records.part == "support") & (records.position == OVERALL)]
    support = support.set_index(["campaign", "logger"]).value.rename("target mass off this log")
    return sizes.rename(columns={"n": "rows"}).join(table).join(support).reset_index()


def _figure(config: OpenBanditConfig, table: pd.DataFrame):
    import matplotlib.pyplot as plt

    overall = table[table.position == OVERALL]
    campaigns = list(dict.fromkeys(overall.campaign))
    fig, axes = plt.subplots(len(POLICIES), len(campaigns), figsize=(4.2 * len(campaigns), 5.2), squeeze=False)
    for i, target in enumerate(POLICIES):
        for j, campaign in enumerate(campaigns):
            ax = axes[i, j]
            rows = overall[(overall.target == target) & (overall.campaign == campaign)].reset_index(drop=True)
            y = np.arange(len(rows))
            if len(rows):
                truth = rows.iloc[0]
                ax.axvspan(truth["on-policy low"] * 100, truth["on-policy high"] * 100, color="0.85",
                           label=f"on-policy {config.level:.0%} CI")
                ax.axvline(truth["on-policy"] * 100, color="0.3", lw=1, label="on-policy")
            for row, r in rows.iterrows():
                colour = "tab:blue" if r.agrees == "yes" else "tab:red"
                ax.errorbar(r.estimate * 100, row, xerr=[[(r.estimate - r.low) * 100], [(r.high - r.estimate) * 100]],
                            fmt="o", color=colour, ms=4, capsize=3)
            ax.set_yticks(y, rows.estimator if j == 0 else [""] * len(rows))
            ax.invert_yaxis()
            ax.set_title(f"{campaign}: {target} from the {'bts' if target == 'random' else 'random'} log",
                         fontsize=9)
            if i == len(POLICIES) - 1:
                ax.set_xlabel("click rate per impression (%)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2)
    fig.suptitle(f"Off-policy estimates ({config.level:.0%} CI; red = difference CI excludes 0) beside the "
                 "on-policy click rate", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def report(config: OpenBanditConfig, records: pd.DataFrame) -> Report:
    if records.empty:
        return Report(summary="No Open Bandit data, nothing computed.\n" + skipped_note(
            _relative(config, "random", config.campaigns[0])))
    table = comparison(config, records)
    tables = {"table_estimates": table[table.position == OVERALL].drop(columns="position").reset_index(drop=True),
              "table_positions": table[table.position != OVERALL].assign(position=lambda t: t.position + 1)
              .reset_index(drop=True),
              "table_position_bias": bias_table(config, records), "table_data": data_table(records)}
    return Report(tables=tables, figures={"fig_estimates": _figure(config, table)},
                  summary=summary_text(config, records, table, tables["table_position_bias"]))


def _ci(value, low, high) -> str:
    return f"{value * 100:.2f} % [{low * 100:.2f}, {high * 100:.2f}]"


def summary_text(config: OpenBanditConfig, records: pd.DataFrame, table: pd.DataFrame,
                 bias: pd.DataFrame) -> str:
    overall = table[table.position == OVERALL]
    sizes = records[records.part == ON_POLICY]
    sizes = sizes[sizes.position == OVERALL]
    lines = ["Open Bandit Dataset sample (Saito et al., NeurIPS'21 Datasets and Benchmarks; the "
             "10,000-row logs shipped with obp 0.5.7): for each campaign a uniform-random and a "
             "Bernoulli-Thompson-sampling (BTS) log of the same week. Each policy's click rate is "
             "estimated from the other policy's log and compared with its on-policy click rate "
             f"(click rate per impression; {config.level:.0%} normal intervals).", "",
             "Logs: " + "; ".join(f"{r.campaign}/{r.target} {int(r.clicks)} clicks in {int(r.n):,} rows"
                                  for r in sizes.itertuples()) + ".", "",
             "How the target's action probabilities were obtained: random evaluated on the BTS log "
             "uses π = 1/I (exact); BTS evaluated on the random log uses the BTS log's empirical "
             "(item, position) distribution, an estimate of BTS's time-averaged distribution: the "
             "BTS propensities change over the week and the sample gives none for the random log's "
             "rows. That estimand ignores the covariance between BTS's choices and the click rates "
             "over time, and it is fitted on the very log that supplies the truth.", "",
             "Estimates over all positions (estimate [CI] vs on-policy [CI]; difference CI; agrees = "
             "difference CI covers 0):", ""]
    for (campaign, target), rows in overall.groupby(["campaign", "target"], sort=False):
        truth = rows.iloc[0]
        lines.append(f"- {campaign}, {target} from the {truth.logger} log; on-policy "
                     f"{_ci(truth['on-policy'], truth['on-policy low'], truth['on-policy high'])}:")
        for _, r in rows.iterrows():
            lines.append(f"  - {r.estimator}: {_ci(r.estimate, r.low, r.high)}; difference "
                         f"{r.difference * 100:+.2f} [{r['difference low'] * 100:+.2f}, "
                         f"{r['difference high'] * 100:+.2f}] points; "
                         f"{'agrees' if r.agrees == 'yes' else 'DISAGREES'}")
    agree = (overall.agrees == "yes").sum()
    inside = (overall["truth in CI"] == "yes").sum()
    positions = table[table.position != OVERALL]
    widths = (overall.high - overall.low) / overall["on-policy"]
    lines += ["", f"Verdict: {agree} of {len(overall)} overall estimates agree with the on-policy truth "
              f"(difference interval covers 0), and the truth lies inside {inside} of the {len(overall)} "
              f"estimate intervals; position-wise, {(positions.agrees == 'yes').sum()} of {len(positions)} "
              "agree. Agreement here means 'not distinguishable from the truth at this sample size', "
              f"not precision: the estimate intervals are {widths.median():.1f} times the on-policy "
              f"rate wide (median), because a 10,000-row log holds {int(sizes.clicks.min())}–"
              f"{int(sizes.clicks.max())} clicks; the widths shrink as 1/sqrt(rows), so the full data "
              "set (26M rows over all logs) would test precision, which this sample cannot.", ""]
    for estimator, rows in overall.groupby("estimator", sort=False):
        lines.append(f"- {estimator}: agrees in {(rows.agrees == 'yes').sum()} of {len(rows)}; median "
                     f"interval width {((rows.high - rows.low) * 100).median():.2f} points.")
    data_rows = records[(records.part == "data") & (records.logger == "bts")].pivot_table(
        index="campaign", columns="estimator", values="value", sort=False)
    largest = 1 / (data_rows["items"] * data_rows["min propensity"])
    lines += ["", "Weights: evaluating random on the BTS log weighs a row by 1/(I·p₀), up to " + ", ".join(
        f"{w:,.0f} ({c})" for c, w in largest.items()) + "; such heavy tails make the IPS estimate's "
        "distribution right-skewed (a typical sample falls below the truth, a rare heavy row lifts it "
        "far above) and its normal interval rough. Evaluating BTS on the random log weighs a row by "
        "I·π̂ <= I, so those intervals are trustworthy at this size."]
    support = records[(records.part == "support") & (records.position == OVERALL)]
    lines += ["", "Support: the share of the target's (item, position) probability on pairs the "
              "logger's sample never shows (lost by IPS, partly restored by self-normalisation "
              "and the doubly robust direct term): " + "; ".join(
                  f"{r.campaign} {r.target} on the {r.logger} log {r.value:.1%}" for r in support.itertuples())
              + ".", "",
              "Position bias by randomisation (random log: each item equally likely at every "
              "position, so the click-rate ratio estimates P(V | k) / P(V | 1) under the position-based "
              "model; the BTS ratio mixes examination with the items BTS places there):", ""]
    for (campaign, log), rows in bias.groupby(["campaign", "log"], sort=False):
        cells = ", ".join(f"position {int(r.position)} {r['relative click rate']:.2f} [{r.low:.2f}, {r.high:.2f}]"
                          for _, r in rows.iterrows() if r.position > 1)
        lines.append(f"- {campaign}, {log} log: {cells}")
    random_rows = records[(records.part == "position bias") & (records.logger == "random") & (records.position > 0)]
    below = int((bias[(bias.log == "random") & (bias.position > 1)].high < 1).sum())
    above = int((bias[(bias.log == "random") & (bias.position > 1)].low > 1).sum())
    p_values = 2 * scipy.stats.norm.sf(np.abs(np.log(random_rows.value.to_numpy()) / random_rows.se.to_numpy()))
    reject, _ = stats.holm_bonferroni(p_values, alpha=1 - config.level)
    lines += ["", f"Over the {len(random_rows)} position-campaign pairs of the random logs, {below} interval(s) "
              f"lie below 1 and {above} above 1 (a lower position clicked more often than position 1); "
              f"after Holm's correction for the {len(random_rows)} tests, {int(reject.sum())} ratio(s) differ from "
              "1. " + ("The sample cannot tell a position effect in this three-slot widget from none."
                       if not reject.any() else "Those positions' examination differs from position 1's."), "",
              "Caveats: rows of one impression are not linked, so slate-level estimators and "
              "standard errors clustered by impression are not possible (the three rows of an "
              "impression share a user, which makes the stated standard errors somewhat optimistic); "
              "clipping at m = c·I biases the random-on-BTS estimate downwards by design, and changes "
              "nothing for BTS on the random log, where 1/p₀ = I on every row; the "
              "doubly robust reward model is a per-(item, position) click rate without user "
              f"features, cross-fitted over {config.folds} random folds."]
    return "\n".join(lines)


STUDY = Study(
    name="open_bandit",
    description="Open Bandit Dataset sample (Saito et al. NeurIPS'21): each of a random and a "
                "Thompson-sampling policy's click rate estimated from the other's real log (IPS, "
                "clipped, self-normalised, doubly robust; per position) beside its on-policy truth, "
                "and the position bias from the randomised log",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS, data_files=data_files,
    expected_seconds={"smoke": 20, "default": 40})

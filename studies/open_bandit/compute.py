"""The open_bandit study's computation: the logs, the target's action probabilities, the
cross-fitted reward model and every estimate through the estimator registry (`simrec.ope`).
The package docstring says what each estimate is."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import jax
import numpy as np

from simrec import data, obp, ope
from simrec.datafiles import data_file
from simrec.runner import cell_key

if TYPE_CHECKING:
    from simrec_studies.open_bandit import OpenBanditConfig

POLICIES = ("random", "bts")
OVERALL = -1                                   # `position` of an estimate over all positions
IPS, SNIPS, DR, ON_POLICY = "IPS", "self-normalised IPS", "doubly robust", "on-policy"
RANDOMISED, NAIVE_BTS = "randomised (random log)", "raw (BTS log, not randomised)"


# ---- data -----------------------------------------------------------------------------------

def log_path(config: OpenBanditConfig, policy: str, campaign: str) -> str:
    """The log of `policy` in `campaign`, relative to the data folder ("" without a folder)."""
    return f"{config.folder}/{policy}/{campaign}/{campaign}.csv.gz" if config.folder else ""


def data_files(config: OpenBanditConfig) -> list[str]:
    """Every file a run reads: each campaign's log and item context, of both policies."""
    return [f"{config.folder}/{p}/{c}/{name}" for c in config.campaigns for p in POLICIES
            for name in (f"{c}.csv.gz", "item_context.csv")] if config.folder else []


def _present(config: OpenBanditConfig) -> bool:
    return bool(config.folder) and all(data_file(log_path(config, p, c)) is not None
                                       for c in config.campaigns for p in POLICIES)


def cells(config: OpenBanditConfig) -> list[dict]:
    return [{"campaign": c} for c in config.campaigns] if _present(config) else []


def load(config: OpenBanditConfig, campaign: str) -> dict[str, tuple[dict, object]]:
    """{policy: (its bandit_feedback dictionary, its simrec Log)} of one campaign."""
    path = data_file(log_path(config, "random", campaign))
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


def _subsets(position: np.ndarray, n_positions: int):
    """(k, bool[n] its rounds) for every position k and for all rounds (k = `OVERALL`)."""
    for k in (OVERALL, *range(n_positions)):
        yield k, np.ones(len(position), bool) if k == OVERALL else position == k


def estimates(key, config: OpenBanditConfig, campaign: str, target: str, feedback: dict, log,
              pi: np.ndarray) -> list[dict]:
    """Every estimator of the target's click rate from one logger's rounds, per position and
    overall (module docstring): the registry's "dcg" (IPS at m = ∞, clipped IPS at m = clip·I),
    "sndcg" (T = 1) and "dr" at m = ∞ (`ope.contributions` once on all rounds, then `ope.restrict`
    to each subset's rounds and `ope.summarise`). pi: π_T f64[n_positions, I]."""
    logger = "bts" if target == "random" else "random"
    n_positions, n_items = pi.shape
    position, action = feedback["position"], feedback["action"]
    target_exposure = pi[position, action].astype(np.float32)[:, None]        # [n, 1]
    fold, q_tables = reward_model(key, config, feedback, n_positions)
    predicted = q_tables[fold, position, action].astype(np.float32)[:, None]
    direct = np.sum(pi[None] * q_tables, axis=2)[fold, position].astype(np.float32)
    rewards = np.asarray(log.rewards[0])
    logged = ope.LoggedData(rewards, np.asarray(log.viewed), np.asarray(log.logging_exposure), predicted=predicted)
    m = np.array([np.inf, *(c * n_items for c in config.clip)])
    parts = ope.contributions(logged, {target: ope.Target(target_exposure, direct)}, m,
                              estimators=("dcg", "sndcg", "dr"), options={"target_views": 1.0})
    lost = pair_counts(position, action, np.ones(len(position)), n_positions, n_items) == 0
    mass = (pi * lost).sum(axis=1)
    rows = []
    for k, use in _subsets(position, n_positions):
        n, clicks = int(use.sum()), int(rewards[use].sum())
        summary = ope.summarise(ope.restrict(parts, use), m)
        dcg, sndcg, dr = (summary[name, target] for name in ("dcg", "sndcg", "dr"))
        found = [(name, dcg["value"][j], dcg["value_se"][j])
                 for j, name in enumerate([IPS, *(clip_name(c) for c in config.clip)])]
        found += [(SNIPS, sndcg["value"][0], sndcg["value_se"][0]), (DR, dr["value"][0], dr["value_se"][0])]
        rows += [_record(campaign, "estimate", target, logger, name, k, value, se, n, clicks)
                 for name, value, se in found]
        rows.append(_record(campaign, "support", target, logger, "target mass off the log", k,
                            mass.mean() if k == OVERALL else mass[k], 0.0, n, clicks))
    return rows


def clip_name(clip: float) -> str:
    return f"clipped IPS (m = {clip:g}·I)"


def on_policy(campaign: str, policy: str, feedback: dict, n_positions: int) -> list[dict]:
    """The log's own click rate, overall and per position, with its standard error: the
    registry's "dcg" at m = ∞ of the logger on its own log, on each subset's rounds. Its target
    exposure is the logged one, so every weight ε/ε₀ is 1; both are passed as 1 so that a round's
    value is its click exactly (ε₀ · (1/ε₀) may round below 1 in float32)."""
    ones = np.ones((int(feedback["n_rounds"]), 1), np.float32)
    logged = ope.LoggedData(np.asarray(feedback["reward"], np.float32)[:, None], ones.astype(bool), ones)
    parts = ope.contributions(logged, {policy: ope.Target(ones)}, np.inf, estimators="dcg")
    rows = []
    for k, use in _subsets(feedback["position"], n_positions):
        est = ope.summarise(ope.restrict(parts, use), np.inf)["dcg", policy]
        rows.append(_record(campaign, ON_POLICY, policy, policy, ON_POLICY, k, est["value"][0], est["value_se"][0],
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



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

Estimators (the registry of `simrec.ope`: `contributions` on all of the logger's rounds at once,
then `restrict` to the rounds of each subset and `summarise`; position-wise on the rounds at
position k, and overall on all rounds, i.e. the click rate per impression as OBP defines the
policy value), with w = π_T(a, k) / p₀ and p₀ the logged propensity:
- IPS: mean c·w (estimator "dcg" at m = ∞; each round is a one-slot feed);
- clipped IPS: mean c·min(m, 1/p₀)·π_T with m = clip × I ("dcg" at m), i.e. no round weighs
  more than clip times what the uniform logger's rounds weigh;
- self-normalised IPS: mean c·w / mean w ("sndcg" at m = ∞ with target_views = 1: the target
  fills each slot once), with the delta-method standard error over the subset's rounds;
- doubly robust ("dr" at m = ∞) with the reward model q̂(a, k) = the click rate of (item,
  position) in the other folds of the logger's log (`folds`-fold cross-fitting, rows assigned to
  folds at random), shrunk towards the fold's click rate at position k by `prior_rounds`
  pseudo-rounds, and the direct term sum_a π_T(a, k) q̂(a, k).

Truth and agreement. The on-policy click rate of the target's own log (overall and per position)
with its standard error ("dcg" of the logger on its own log: every weight is 1); the difference
estimate − truth with SE sqrt(SE_est² + SE_truth²) (two separate logs); at `level`, "truth in
CI" = the truth lies in the estimate's interval, and "agrees" = the interval of the difference
covers 0 (noise on both sides).

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

import scipy.stats

from simrec import data, validate
from simrec.runner import ConfigError, Study


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
            raise ConfigError(f"campaigns must be distinct names of {data.OPEN_BANDIT_CAMPAIGNS}, got {self.campaigns}")
        if not self.clip or any(not (isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)
                                     and c > 0) for c in self.clip):
            raise ConfigError(f"clip must hold finite factors > 0 (m = clip x n_items), got {self.clip}")
        try:
            for campaign in self.campaigns:
                validate.choice("campaigns", campaign, data.OPEN_BANDIT_CAMPAIGNS)
            validate.integer("folds", self.folds, low=2)
            validate.finite("prior_rounds", self.prior_rounds, low=0.0)
            validate.probability("level", self.level, low_open=True, high_open=True)
        except ValueError as err:
            raise ConfigError(str(err)) from None

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


# the parts a caller (and the tests) reach through the package; compute.py never imports report.py
from simrec_studies.open_bandit.compute import (  # noqa: E402,F401
    DR, IPS, NAIVE_BTS, ON_POLICY, OVERALL, POLICIES, RANDOMISED, SNIPS, cells, clip_name, compute, data_files,
    estimates, load, on_policy, position_bias, reward_model, target_table)
from simrec_studies.open_bandit.report import bias_table, comparison, data_table, report, summary_text  # noqa: E402,F401

STUDY = Study(
    name="open_bandit",
    description="Open Bandit Dataset sample (Saito et al. NeurIPS'21): each of a random and a "
                "Thompson-sampling policy's click rate estimated from the other's real log (IPS, "
                "clipped, self-normalised, doubly robust; per position) beside its on-policy truth, "
                "and the position bias from the randomised log",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS, data_files=data_files,
    expected_seconds={"smoke": 20, "default": 4})

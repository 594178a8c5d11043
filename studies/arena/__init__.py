"""Study ``arena``: which off-policy estimator of a ranking policy's online reward to trust, per user
behaviour, log size and catalogue size, scored against the truth (exact; for a Plackett–Luce
target whose reward depends on the items above, a Monte Carlo mean with its standard error).

A world of `contexts` users and A items (A in `catalogues`) has click probabilities
q(x, a) = sigmoid(⟨u_x, v_a⟩/√d + b_a + offset). A feed shows K = `feed_length` of all A items:
the logger ranks them by noisy scores (noise sd `logger_noise` on the true logit), the target sorts
by a less noisy
score (sd `target_noise`). Two loggers, each at its exploration levels: Plackett–Luce over the
logger's scores at temperature T (``plackett_luce``, T in `temperatures`) and ε-greedy around the
logger's sorted order (``epsilon_greedy``, ε in `epsilons`: with probability ε a uniformly random
order of the A items). The user scrolls with an exponential view model (γ = `view_decay`) and
clicks item a with probability q(x, a) under one of seven behaviours:

* ``position_based``: nothing else (KDD'24 Asm. 2–3 hold);
* ``click_stops``: a click ends the session with probability `interaction` (a cascade: whether
  rank k is seen depends on the clicks above it);
* ``satiation``: the click probability at rank k is q(x, s_k) ∏_{j<k} (1 − β q(x, s_j)), β =
  `interaction` (the reward depends on the items above);
* ``mixed``: a user behaviour that depends on the context (Kiyohara et al., KDD'23): the first
  `satiated_share` of the users satiate as above, the others are position-based
  (`simrec.feed.Scenario.satiated_contexts`; users are exchangeable, so which ones is immaterial);
* ``neighbours``: the click probability at rank k is q(x, s_k) ∏_j (1 − β q(x, s_j)) over the viewed
  neighbours j = k ± 1 (the reward depends on the item below as well: RIPS's assumption fails);
* ``slate``: the same product over every other viewed rank (the reward depends on the whole viewed
  slate, the *standard* behaviour of Kiyohara et al., KDD'23: only SIPS's weight is unbiased)
  (`simrec.feed.Scenario.satiated_by`);
* ``mixed_all``: every user follows one of four of the above, in the shares `mixture_shares`:
  position-based, satiation by the items above, by the viewed neighbours, by the whole viewed slate
  (the context-dependent mix of Kiyohara et al., KDD'23, over all four of its behaviours; each
  user satiates its own way, `simrec.feed.Scenario.context_satiated_by`). Only SIPS's and AIPS
  (true behaviour)'s weights are unbiased on every user.

The target sorts by its score (deterministic, as a deployed ranker), so its online value is exact
under every behaviour (`simrec.feed.online_value`); so is that of its *rival*, a second target
ranking by a noisier score (sd `rival_noise`), and the pair's difference. With
`target_temperature` T > 0 both rank by Plackett–Luce over their scores at T instead (stochastic
targets): the truth is still exact under ``position_based`` (Σ_x p(x) Σ_a q(x, a) ε(x, a) with
exposures exact by the exponential race, `feed.exposure`), and a Monte Carlo mean over
`truth_samples` sampled rankings per user, with its standard error, where the reward depends on
the items above; the report checks that standard error against every estimator's RMSE. Each estimator registered in
`simrec.ope` that estimates the online value (`Estimator.online_scale`) and whose inputs a feed log
provides is scored: DCG (clipped IPS = IIPS), SN-DCG, β-DCG, DR-DCG, MIPS, RIPS, SN-RIPS, SIPS, SN-SIPS,
β-SIPS, Cascade-DR and AIPS twice, each at every m in `m` (m = ∞: unclipped). MIPS weights each
logged item by the exposures of its group instead of its own; the groups are A // g k-means
clusters (g in `group_sizes`) of the items' own terms of the logit (v_a/√d, b_a), the best
embedding item features alone could give: within a group the users' tastes ⟨u_x, v_a⟩ still
differ, so MIPS's no-direct-effect assumption holds only approximately (tighter with smaller
groups). The direct effect e (in `direct_effects`) dials it: each item's terms are moved to its
group's mean plus e times its deviation (the groups and every draw kept), so that at e = 0 the
reward depends on the item only through its group and MIPS is unbiased, and at e = 1 the items
are as drawn. AIPS (true behaviour) is
given every user's behaviour (`compute.AIPS_BEHAVIOUR`: independent under ``position_based``,
cascade where the reward depends on the items above, i.e. under click-stops, satiation and for the
satiating users of ``mixed``, neighbours under ``neighbours`` and standard under ``slate``; under
``mixed_all`` each user's own), so it is DCG under ``position_based``, RIPS under ``click_stops``
and ``satiation``, RIPS looking one rank ahead under ``neighbours`` and SIPS under ``slate``, and a
mix only under ``mixed`` and ``mixed_all``; AIPS
(behaviour from the log) chooses each user's behaviour among the four from the log
(`simrec.ope.choose_behaviours`). The reward model q̂(a) of DR and
Cascade-DR is each item's click rate per view on a separate pilot log of the logger
(`pilot_sessions`), shrunk to the overall rate by `prior_views` pseudo-views
(`ope.click_rate_model`). A cell is (behaviour, catalogue, group size, direct effect, logger,
exploration level): it draws `replications` independent logs of max(`sessions`) sessions and
scores the first N sessions of each for every N in `sessions` (nested log sizes: one learning curve
per replication).

Scores per (setting, estimator, m) over the replications: bias, standard deviation and relative
MSE = mean (estimate − truth)² / truth², with its standard error, of the target's value and of the
target − rival difference on the same log (`ope.summarise` against the rival: the paired
difference, or Δβ-IPS for the estimators with an optimal baseline); and the sign test on that
difference at `confidence` (normal interval): power = the share of logs whose interval excludes 0
on the true side, wrong sign = on the other side; the winner of a setting is the
estimator (at its m) with the smallest MSE when its squared errors are below every other's beyond
2 standard errors of the paired differences (the report kit's verdict rule), else a tie among those
not separated from it. A self-normalised estimator is undefined on a log where no logged ranking
is one the target can show (its total weight is 0); a variant undefined on some log of a setting
has no MSE there and takes no part in that setting's ranking.

Estimator selection from each log alone (`report.selection`), judged by regret: the relative MSE
of the chosen estimates minus the best variant's in hindsight, per setting. Selectors: SLOPE (Su
et al., ICML'20: the last variant, in an order of increasing bias, whose ±2 SE interval still meets
those of every variant before it) with the variants ordered by their estimators' assumptions
(weakest first) or by estimated SE, SLOPE over the clipping values of DCG alone (m descending: the
paper's own use, a family whose bias grows and variance shrinks as m falls), the smallest
estimated SE, the smallest plug-in estimate of the MSE (each variant's SE² plus its squared
difference to unclipped SIPS, unbiased under every behaviour here, less SIPS's own SE²), the
smallest error on a second policy with a log of its own (the rival, as if deployed: each variant
estimates the rival's value from the logger's log, and the one closest to the mean reward of the
rival's own log of the same size is chosen; the non-adaptive pseudo-evaluation heuristic of the
estimator-selection literature, Udagawa et al. AAAI'23, which tunes the choice to the rival's
distribution shift instead of the target's), off-policy cross-validation (OCV, Cief et al., AAAI'25:
`cv_splits` random splits of the log, each variant estimated on a training part whose share
balances its variance against the validator's, SE_v² / (SE_v² + SE_val²), and scored by its squared
difference to unclipped SIPS on the held-out part, an unbiased and independent validator; the
smallest mean error plus one standard error over the splits is chosen, the one-standard-error
rule; `compute.cross_validate`), and one fixed variant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simrec import validate
from simrec.runner import ConfigError, Study
from simrec_studies.common.configs import checked

BEHAVIOURS = ("position_based", "click_stops", "satiation", "mixed", "neighbours", "slate", "mixed_all")


@dataclass(frozen=True)
class ArenaConfig:
    """The worlds, behaviours, loggers, log sizes and clipping values of a run (module docstring)."""
    behaviours: tuple[str, ...] = BEHAVIOURS
    catalogues: tuple[int, ...] = (10, 100, 500)      # items A (every item a candidate)
    temperatures: tuple[float, ...] = (0.5, 2.0)      # the Plackett–Luce logger's temperatures T
    epsilons: tuple[float, ...] = (0.05, 0.3)         # the ε-greedy logger's exploration ε (around Sort)
    sessions: tuple[int, ...] = (1_000, 10_000)       # log sizes N (nested: the first N of each log)
    replications: int = 20                            # independent logs per (behaviour, A, T)
    contexts: int = 100                               # users X (uniform activity)
    feed_length: int = 5                              # K
    m: tuple[float, ...] = (2.0, 10.0, 100.0, math.inf)  # clipping values of every estimator
    view_decay: float = 0.8                           # exponential view model: P(V | rank k) = γ^(k−1)
    interaction: float = 0.5                          # click-stop probability / satiation β (all satiations)
    satiated_share: float = 0.5                       # ``mixed``: the share of the users that satiate
    #: ``mixed_all``: the shares of the users that are position-based, satiate by the items above,
    #: by the viewed neighbours and by the whole viewed slate (`compute.MIXTURE`)
    mixture_shares: tuple[float, ...] = (0.25, 0.25, 0.25, 0.25)
    logger_noise: float = 1.0                         # sd of the logger's score noise on the true logit
    target_noise: float = 0.3                         # sd of the target's score noise
    rival_noise: float = 1.0                          # sd of the rival target's score noise (the pair)
    #: the target's and the rival's ranker: 0 = Sort of their scores (deterministic), T > 0 =
    #: Plackett–Luce over them at temperature T
    target_temperature: float = 0.0
    #: sampled rankings per user for the Monte Carlo truth of a Plackett–Luce target (behaviours
    #: whose reward depends on the items above)
    truth_samples: int = 4_000
    confidence: float = 0.99                          # level of the sign test on the pair's difference
    dim: int = 4                                      # latent dimension d of the world
    offset: float = -2.0                              # logit offset (sets the click rates)
    #: MIPS: A // g item groups (k-means), one world per g; the figures and the claims but MIPS's own
    #: show the first g at the largest direct effect
    group_sizes: tuple[int, ...] = (5,)
    #: the share e of each item's deviation from its group's mean kept in its terms of the logit:
    #: 1 = the items as drawn, 0 = no direct effect (MIPS's assumption exactly); one world per e
    direct_effects: tuple[float, ...] = (1.0,)
    pilot_sessions: int = 10_000                      # DR reward model: the pilot log's sessions
    prior_views: float = 10.0                         # DR reward model: pseudo-views at the overall rate
    cv_splits: int = 10                               # cross-validation selector: random splits of each log

    def __post_init__(self):
        if not self.behaviours or len(set(self.behaviours)) != len(self.behaviours):
            raise ConfigError(f"behaviours must be distinct names of {BEHAVIOURS}, got {self.behaviours}")
        for behaviour in self.behaviours:
            checked(validate.choice, "behaviours", behaviour, BEHAVIOURS)
        for name in ("catalogues", "sessions"):
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise ConfigError(f"{name} must be a non-empty tuple of distinct integers, got {values}")
        for a in self.catalogues:
            checked(validate.integer, "catalogues", a, low=2)
        for n in self.sessions:
            checked(validate.integer, "sessions (cross-validation keeps 2 on either side)", n, low=4)
        if not self.temperatures and not self.epsilons:
            raise ConfigError("temperatures and epsilons are both empty: give at least one logger (a "
                              "Plackett–Luce temperature > 0 or an ε-greedy ε in (0, 1])")
        for t in self.temperatures:
            checked(validate.positive, "temperatures", t)
        for e in self.epsilons:
            checked(validate.probability, "epsilons (full support needs ε > 0)", e, low_open=True)
        checked(validate.numbers, "m", self.m, low=1.0, inf=True)
        if not self.m:
            raise ConfigError("m must hold at least one clipping value >= 1 (inf: unclipped)")
        checked(validate.integer, "replications", self.replications, low=2)
        checked(validate.integer, "contexts", self.contexts, low=1)
        checked(validate.integer, "feed_length", self.feed_length, low=1)
        if self.feed_length > min(self.catalogues):
            raise ConfigError(f"feed_length = {self.feed_length} exceeds the smallest catalogue {min(self.catalogues)}")
        checked(validate.probability, "view_decay", self.view_decay, low_open=True)
        checked(validate.probability, "interaction", self.interaction)
        checked(validate.probability, "satiated_share", self.satiated_share)
        if len(self.mixture_shares) != 4 or not all(0.0 <= x <= 1.0 for x in self.mixture_shares) or \
                abs(sum(self.mixture_shares) - 1.0) > 1e-9:
            raise ConfigError("mixture_shares must be 4 shares in [0, 1] summing to 1 (position-based, satiation, "
                              f"neighbours, slate), got {self.mixture_shares}")
        for name in ("logger_noise", "target_noise", "rival_noise", "prior_views"):
            checked(validate.finite, name, getattr(self, name), low=0.0)
        checked(validate.integer, "dim", self.dim, low=1)
        checked(validate.finite, "offset", self.offset)
        checked(validate.integer, "pilot_sessions", self.pilot_sessions, low=1)
        checked(validate.integer, "cv_splits", self.cv_splits, low=2)
        checked(validate.finite, "target_temperature (0: a deterministic target)", self.target_temperature, low=0.0)
        checked(validate.integer, "truth_samples", self.truth_samples, low=2)
        for name in ("group_sizes", "direct_effects"):
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise ConfigError(f"{name} must be a non-empty tuple of distinct values, got {values}")
        for g in self.group_sizes:
            checked(validate.integer, "group_sizes (items per MIPS group)", g, low=1)
        for e in self.direct_effects:
            checked(validate.probability, "direct_effects", e)
        checked(validate.probability, "confidence", self.confidence, low_open=True, high_open=True)


PRESETS = {
    "smoke": ArenaConfig(behaviours=("position_based", "mixed", "slate", "mixed_all"), catalogues=(6, 20),
                         temperatures=(1.0,),
                         group_sizes=(3,), epsilons=(0.3,),
                         sessions=(200, 1_000), replications=4, contexts=20, feed_length=3, pilot_sessions=1_000),
    "default": ArenaConfig(),
    "paper": ArenaConfig(catalogues=(10, 100, 800), sessions=(1_000, 10_000, 100_000), replications=50),
    # stochastic targets: Plackett–Luce target and rival at temperature 0.5
    "pl_target": ArenaConfig(catalogues=(10, 100), target_temperature=0.5),
    # larger catalogues: 10^3 to 10^5 items, K = 20, the ε-greedy logger alone (its exposures are
    # exact at any size; a Plackett–Luce logger's only up to A · K = 4096)
    "scale": ArenaConfig(catalogues=(1_000, 10_000, 100_000), feed_length=20, temperatures=(), epsilons=(0.05, 0.3),
                         group_sizes=(100,), replications=10),
    # long slates: K = 100 of 10^4 items, the ε-greedy logger alone
    "long_slates": ArenaConfig(catalogues=(10_000,), feed_length=100, temperatures=(), epsilons=(0.05, 0.3),
                               group_sizes=(100,), replications=10),
    # MIPS's assumption dialled: group size x direct effect on the position-based behaviour
    "mips": ArenaConfig(behaviours=("position_based",), catalogues=(100, 500), group_sizes=(5, 1, 25),
                        direct_effects=(0.0, 0.5, 1.0), temperatures=(0.5,), epsilons=(0.05,)),
}

COLUMNS = {
    "behaviour": str,       # the user behaviour (BEHAVIOURS)
    "catalogue": int,       # items A
    "group_size": int,      # items per MIPS group g (A // g k-means groups)
    "direct_effect": float,  # the share e of each item's deviation from its group kept (1: as drawn)
    "logger": str,          # "plackett_luce" or "epsilon_greedy"
    "exploration": float,   # the logger's temperature T or ε
    "sessions": int,        # log size N (0 for the truth)
    "replication": int,     # the log (-1 for the truth)
    "estimator": str,       # a registered estimator's name, or "truth"
    "m": float,             # clipping value (NaN for the truth)
    "value": float,         # the estimate of the target's online reward per session (or the truth); NaN where
                            # a self-normalised estimator is undefined (no logged ranking the target shows)
    "value_se": float,      # its standard error on the log (for the truth: its Monte Carlo SE, 0 when exact)
    "difference": float,    # the estimate of target − rival on the same log (or the truth); NaN as value
    "difference_se": float,  # its standard error (for the truth: as value_se)
    "rival_value": float,   # the estimate of the rival's online reward per session on the same log (or its truth)
    "rival_value_se": float,  # its standard error (for the truth: as value_se)
    "rival_log": float,     # the rival's mean reward per session on its own log of N sessions (the same
                            # replication), the yardstick of the selector "rival's own log"; NaN for the truth
    "cv_error": float,      # off-policy cross-validation: the mean squared difference to the validator
                            # (unclipped SIPS) on held-out sessions, over `cv_splits` splits of this log
                            # (`compute.cross_validate`); NaN for the truth or where undefined
    "cv_error_se": float,   # its standard error over the splits
}

# the parts a caller (and the tests) reach through the package; compute.py never imports report.py
from simrec_studies.arena.compute import (  # noqa: E402,F401
    Estimates, cells, compute, estimate, estimators, item_groups, setup, world)
from simrec_studies.arena.report import (  # noqa: E402
    differences, errors, report, selection, slope_choice, slope_order, winners)  # noqa: F401

STUDY = Study(
    name="arena",
    description="Every registered off-policy estimator of a ranking policy's online reward (DCG/IIPS, "
                "SN-DCG, β-DCG, DR, MIPS over item groups, RIPS, SN-RIPS, SIPS, SN-SIPS, β-SIPS, Cascade-DR, AIPS "
                "with the behaviour known and chosen from the log) scored against the truth by relative MSE of "
                "the value and of a pair's difference, and by the sign test's power, per user behaviour "
                "(position-based, click-stops, satiation, mixed, neighbours, whole slate, a mix of four), log size, "
                "catalogue size and logger (Plackett–Luce, ε-greedy) and its exploration",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    expected_seconds={"smoke": 70, "default": 500, "paper": 11000, "mips": 190, "pl_target": 400, "scale": 550,
                      "long_slates": 620})

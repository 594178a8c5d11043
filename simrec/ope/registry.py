"""One registry of off-policy estimators, and `compare`: many targets against a logger on one log,
with every registered estimator and every clipping value m at once.

An estimator is one function with its formula and reference in its docstring (`simrec.ope.dcg`,
`simrec.ope.slate`) plus one `Estimator` entry here (`register`): its name, a label for tables,
what it needs beyond the log (`LoggedData.discount` for an ideal, `LoggedData.predicted` and
`Target.direct` for a reward model, `LoggedData.logging_prefix` and `Target.prefix` for the slate
estimators, `Target.cascade_baseline` too for Cascade-DR, `LoggedData.behaviours` too for
AIPS, `LoggedData.logging_group_exposure` and `Target.group_exposure` for MIPS), the assumption under which it is
unbiased, and a ``contributions`` function that turns (data, target, m) into per-trajectory
contributions:

* a *mean* estimator (DCG, nDCG, DR, MIPS, RIPS, SIPS, Cascade-DR, AIPS) gives its per-trajectory values
  f_τ(m), f64[M, N]:
  estimate = mean_τ f_τ (NaN values, e.g. nDCG of a session without an ideal, are skipped);
* a *ratio* estimator (pnDCG, SN-DCG, SN-SIPS) gives a numerator a_τ, a denominator b_τ and a scale s:
  estimate = s · mean a / mean b, with the delta-method standard error of the influence values
  φ_τ = s · (a_τ − r b_τ) / b̄, r = ā / b̄; a *sum of ratios* (SN-RIPS, one per rank k) gives
  a_τ,k and b_τ,k: estimate = s · Σ_k ā_k / b̄_k, φ_τ = s · Σ_k (a_τ,k − r_k b_τ,k) / b̄_k;
* a *control-variate* estimator (β-DCG, β-SIPS) gives its values f_τ and a control g_τ of mean 0
  under its assumption: estimate = mean (f_τ − β̂ g_τ) with the variance-optimal β̂ = Cov̂(f, g) /
  Var̂(g) (β-IPS, `simrec.ope.baseline`); its difference against a baseline target uses the
  pair's own β̂ on f_τ − f_τ(π_b) and g_τ − g_τ(π_b) (Δβ-IPS of Jeunen & Ustimenko, RecSys'24).

`compare` summarises them: each (estimator, target, m) gets its value and standard error and,
against a baseline target (usually the logger itself: its exposures are the logged ones), the
paired difference on the same trajectories with its standard error, normal confidence interval
and one-sided p-value (H₀: Δ ≤ 0), the quantities of Jeunen et al.'s KDD'24 §6 sensitivity
analysis. A ratio estimator's difference has the paired delta-method standard error of φ_t − φ₀.
Adding an estimator is one function and one `register` call; every study that asks for all
estimators then shows it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from simrec import feed, stats
from simrec.ope.dcg import (IDEALS, clip_values, direct_method, group_exposure, ideal_dcg, logged_exposures,
                            trajectory_dcg, trajectory_dr, trajectory_mips, trajectory_ndcg)
from simrec.ope.baseline import optimal_baseline
from simrec.ope.slate import (aips_parts, checked_behaviours, choose_behaviours, rank_normalisers, rank_rips,
                              ranking_weight, trajectory_cascade_dr, trajectory_rips, trajectory_sips)

__all__ = ["LoggedData", "Target", "Contribution", "Estimator", "ESTIMATORS", "register", "lookup",
           "contributions", "summarise", "compare", "COMPARE_COLUMNS", "OnLog", "from_log", "restrict", "subset",
           "weighted_values"]


@dataclass(frozen=True)
class LoggedData:
    """One signal of a logged feed as every estimator sees it.

    rewards: f32[N, K] the signal's labels c (0 where not viewed); viewed: bool[N, K];
    logging_exposure: f32[N, K] ε₀ of the logged items (`simrec.ope.logged_exposures`);
    discount: f32[K] the view model's P(V=1 | rank) (the nDCG ideals' discount), or None;
    predicted: f32[N, K] a reward model's q̂ of the logged items (doubly robust), or None;
    logging_prefix: f32[N, K] log π₀(s_1:k | x) of the logged ranking's prefixes
    (`simrec.feed.prefix_log_probability`; the slate estimators), or None;
    behaviours: int[N] each session's user behaviour, an index of `simrec.ope.AIPS_BEHAVIOURS`
    (independent, cascade, neighbours, standard: which other items its reward at rank k depends
    on; AIPS), or None;
    contexts: int[N] each session's context (AIPS's behaviour chosen from the log), or None;
    logging_group_exposure: f32[N, K] ε̄₀ of the logged items' groups (`simrec.ope.group_exposure`;
    MIPS), or None.
    """
    rewards: Any
    viewed: Any
    logging_exposure: Any
    discount: Any = None
    predicted: Any = None
    logging_prefix: Any = None
    behaviours: Any = None
    contexts: Any = None
    logging_group_exposure: Any = None


@dataclass(frozen=True)
class Target:
    """A target policy on the log: exposure f32[N, K], its ε of the logged items; direct f[N]: the
    reward model's value of the target per trajectory (`simrec.ope.direct_method`), or None;
    prefix f32[N, K]: log π(s_1:k | x) of the logged ranking's prefixes under the target, or None;
    cascade_baseline f32[N, K]: the reward model's mean over the target's item at rank k after the
    logged prefix, Σ_a π(a | x, s_1:k-1) q̂(x, a) (`simrec.feed.next_item_mean`; Cascade-DR), or None;
    group_exposure f32[N, K]: ε̄ of the logged items' groups under the target (MIPS), or None."""
    exposure: Any
    direct: Any = None
    prefix: Any = None
    cascade_baseline: Any = None
    group_exposure: Any = None


class Contribution(NamedTuple):
    """Per-trajectory contributions f64[M, N] of an estimator (module docstring): a mean estimator
    sets only ``numerator``; a ratio estimator also ``denominator`` and ``scale`` (f64[M, K, N] for
    a sum of K ratios); a control-variate estimator ``numerator`` and ``control``."""
    numerator: np.ndarray
    denominator: np.ndarray | None = None
    scale: float = 1.0
    control: np.ndarray | None = None

    def at(self, m=slice(None), rows=slice(None)) -> "Contribution":
        """The contributions at the clipping values ``m`` (an index, slice or mask of the M rows) and
        the trajectories ``rows`` (of the N columns), the scale kept."""
        def pick(a):
            return None if a is None else a[m][..., rows]
        return Contribution(pick(self.numerator), pick(self.denominator), self.scale, pick(self.control))


@dataclass(frozen=True)
class Estimator:
    """A registered estimator (module docstring).

    needs: the optional inputs it reads, among those of the log (`LoggedData`: "discount",
    "predicted", "logging_prefix", "behaviours", "contexts", "logging_group_exposure") and of
    a target (`Target`: "direct", "prefix", "cascade_baseline", "group_exposure").
    online_scale: whether it estimates the policy's online value itself (DCG, SN-DCG, DR), so that its
    difference between two policies estimates their online difference; False for a normalised metric
    (nDCG, pnDCG), whose difference is on another scale.
    pooled: whether a trajectory's contribution depends on the other trajectories of the log (a
    choice made on the whole log, as AIPS's behaviour from the log), so that `restrict` cannot cut a
    subset out of it: compute it on the subset itself (`subset`)."""
    name: str
    label: str
    contributions: Callable[..., Contribution]
    needs: frozenset[str] = frozenset()
    assumption: str = ""
    reference: str = ""
    online_scale: bool = True
    pooled: bool = False

    def available(self, data: LoggedData, targets: Mapping[str, Target]) -> bool:
        """Whether the log and every target provide what the estimator needs."""
        return all(getattr(data, need, None) is not None if need in _DATA_INPUTS
                   else all(getattr(t, need, None) is not None for t in targets.values()) for need in self.needs)


#: optional inputs of LoggedData
_DATA_INPUTS = ("discount", "predicted", "logging_prefix", "behaviours", "contexts", "logging_group_exposure")
_TARGET_INPUTS = ("direct", "prefix", "cascade_baseline", "group_exposure")       # optional inputs of Target


#: every registered estimator by name, in registration order
ESTIMATORS: dict[str, Estimator] = {}


def register(estimator: Estimator) -> Estimator:
    """Add an estimator to `ESTIMATORS` (its name must be new)."""
    if estimator.name in ESTIMATORS:
        raise ValueError(f"an estimator named {estimator.name!r} is registered already")
    unknown = set(estimator.needs) - {*_DATA_INPUTS, *_TARGET_INPUTS}
    if unknown:
        raise ValueError(f"estimator {estimator.name!r} needs unknown inputs {sorted(unknown)}; "
                         f"choose among {', '.join(_DATA_INPUTS + _TARGET_INPUTS)}")
    ESTIMATORS[estimator.name] = estimator
    return estimator


def lookup(names: str | Sequence[str] = "all") -> list[Estimator]:
    """The registered estimators called ``names`` (in that order), or all of them for "all"."""
    if names == "all":
        return list(ESTIMATORS.values())
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise ValueError(f"unknown estimator(s) {', '.join(map(repr, unknown))}; registered: {', '.join(ESTIMATORS)}")
    return [ESTIMATORS[n] for n in names]


@dataclass(frozen=True)
class OnLog:
    """What `from_log` prepares from a log: per signal, the `LoggedData`; the `Target` of every
    policy (the logger's exposures are the logged ones); and the exposure tables over the log's
    distinct contexts {name: f32[B, A]} with each session's row i64[N] in them."""
    data: dict[str, LoggedData]
    targets: dict[str, dict[str, Target]]
    tables: dict[str, Any]
    rows: np.ndarray


def from_log(log: feed.Log, policies: Mapping[str, feed.Policy], view, *,
             reward_models: Mapping[str, Any] | None = None, slates: bool = False,
             context_behaviours=None, item_groups=None) -> OnLog:
    """The estimators' inputs on one log of the first of ``policies`` (the logger): each policy's
    exact exposure table over the log's distinct contexts (`simrec.feed.exposure` under ``view``),
    its exposures of the logged items (`logged_exposures`), the view model's discount for the nDCG
    ideals, and, per signal with a reward model q̂ (``reward_models``: {signal: f[A] per item or
    f[B, A] per distinct context}), the predictions at the logged items and each target's direct
    term Σ_a ε(x, a) q̂(x, a) (`direct_method`), so that DR applies. With ``slates``, also every
    policy's log-probabilities of the logged rankings' prefixes (`simrec.feed.prefix_log_probability`;
    policies on deterministic generators), so that the slate estimators (RIPS, SIPS) apply, and with
    a reward model too each policy's mean of q̂ at every rank after the logged prefix
    (`simrec.feed.next_item_mean`), so that Cascade-DR applies. With ``slates`` and
    ``context_behaviours`` (int[X] over the scenario's contexts: each context's user behaviour, an
    index or name of `simrec.ope.AIPS_BEHAVIOURS`), each session's behaviour, so that AIPS applies.
    With ``item_groups`` (int[A]: each item's group, e.g. a category or an embedding's cluster),
    every policy's group exposures of the logged items (`group_exposure`), so that MIPS applies."""
    names = list(policies)
    if not names:
        raise ValueError("policies must hold the logger first, then the targets")
    lacking = [name for name, policy in policies.items() if slates and not feed.has_prefix_probability(policy)]
    if lacking:
        raise ValueError(f"slates=True needs prefix probabilities in closed form, which {', '.join(lacking)} lack "
                         f"(a RandomSubset generator draws its candidates); use a FixedCandidates or TopK generator")
    contexts, rows = np.unique(np.asarray(log.users), return_inverse=True)
    behaviours = None
    if context_behaviours is not None and not slates:
        raise ValueError("context_behaviours is AIPS's behaviour per context, and AIPS needs the slate inputs: pass "
                         "slates=True too")
    if context_behaviours is not None:
        if np.ndim(context_behaviours) != 1 or np.size(context_behaviours) <= contexts[-1]:
            raise ValueError(f"context_behaviours must be a vector over the scenario's contexts (at least "
                             f"{int(contexts[-1]) + 1}), got shape {list(np.shape(context_behaviours))}")
        behaviours = checked_behaviours(context_behaviours, np.size(context_behaviours))[np.asarray(log.users)]
    tables = {name: feed.exposure(None, policy, view, contexts).mean for name, policy in policies.items()}
    exposures = {name: logged_exposures(log, table, contexts) for name, table in tables.items()}
    grouped = ({name: logged_exposures(log, group_exposure(table, item_groups), contexts)
                for name, table in tables.items()} if item_groups is not None else dict.fromkeys(names))
    discount = feed.view_probability(view, policies[names[0]].feed_length)
    prefixes = ({name: feed.prefix_log_probability(policy, np.asarray(log.users), np.asarray(log.items))
                 for name, policy in policies.items()} if slates else dict.fromkeys(names))
    items = np.maximum(np.asarray(log.items), 0)
    data, targets = {}, {}
    for s, signal in enumerate(log.signals):
        model = None if reward_models is None else reward_models.get(signal)
        predicted, direct, baselines = None, dict.fromkeys(names), dict.fromkeys(names)
        if model is not None:
            model = np.asarray(model)
            per_context = model if model.ndim == 2 else np.broadcast_to(model, np.shape(tables[names[0]]))
            predicted = np.asarray(per_context[rows[:, None], items], np.float32)
            direct = {name: np.asarray(direct_method(per_context, tables[name]))[rows] for name in names}
            if slates:
                baselines = {name: feed.next_item_mean(policy, np.asarray(log.users), np.asarray(log.items),
                                                       per_context) for name, policy in policies.items()}
        data[signal] = LoggedData(log.rewards[s], log.viewed, exposures[names[0]], discount, predicted,
                                  prefixes[names[0]], behaviours, np.asarray(log.users), grouped[names[0]])
        targets[signal] = {name: Target(exposures[name], direct[name], prefixes[name], baselines[name], grouped[name])
                           for name in names}
    return OnLog(data, targets, tables, np.asarray(rows))


# ---- the estimators of simrec.ope.dcg -------------------------------------------------------------

def _f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def _ideal(data: LoggedData, m, ideal: str, cache: dict):
    """iDCG_τ(m) of the log under ``ideal`` (`ideal_dcg`), computed once per log and shared by every
    target and estimator (``cache``)."""
    key = ("idcg", ideal)
    if key not in cache:
        cache[key] = ideal_dcg(data.rewards, data.logging_exposure, data.viewed, data.discount, m, ideal=ideal)
    return cache[key]


def _dcg(data, target, m, options, cache) -> Contribution:
    key = ("dcg", id(target))
    if key not in cache:
        cache[key] = _f64(trajectory_dcg(data.rewards, data.logging_exposure, target.exposure, data.viewed, m))
    return Contribution(cache[key])


def _ndcg(ideal: str):
    def contributions(data, target, m, options, cache) -> Contribution:
        idcg = _ideal(data, m, ideal, cache)
        return Contribution(_f64(trajectory_ndcg(data.rewards, data.logging_exposure, target.exposure, data.viewed,
                                                 data.discount, m, ideal=ideal, idcg=idcg,
                                                 zero_ideal=options.get("zero_ideal", "zero"))))
    return contributions


def _pndcg(data, target, m, options, cache) -> Contribution:
    return Contribution(_dcg(data, target, m, options, cache).numerator,
                        _f64(_ideal(data, m, "same discount", cache)))


def _weighted_views(data, target, m, cache) -> np.ndarray:
    """Σ_{k viewed} min(m, ε/ε₀) per trajectory (DCG of all-ones labels), once per target.  f64[M, N]."""
    key = ("views", id(target))
    if key not in cache:
        ones = np.ones(np.shape(data.viewed), np.float32)
        cache[key] = _f64(trajectory_dcg(ones, data.logging_exposure, target.exposure, data.viewed, m))
    return cache[key]


def _sndcg(data, target, m, options, cache) -> Contribution:
    views = _weighted_views(data, target, m, cache)
    target_views = options.get("target_views")
    if target_views is None:
        target_views = float(np.mean(np.sum(np.asarray(data.viewed), axis=1)))
    return Contribution(_dcg(data, target, m, options, cache).numerator, views, float(target_views))


def _dcg_beta(data, target, m, options, cache) -> Contribution:
    expected_views = float(np.sum(np.asarray(data.discount, np.float64)))            # Σ_k S(k)
    return Contribution(_dcg(data, target, m, options, cache).numerator,
                        control=_weighted_views(data, target, m, cache) - expected_views)


def _dr(data, target, m, options, cache) -> Contribution:
    return Contribution(_f64(trajectory_dr(data.rewards, data.logging_exposure, target.exposure, data.viewed,
                                           data.predicted, target.direct, m)))


def _mips(data, target, m, options, cache) -> Contribution:
    return Contribution(_f64(trajectory_mips(data.rewards, data.logging_group_exposure, target.group_exposure,
                                             data.viewed, m)))


def _rips(data, target, m, options, cache) -> Contribution:
    key = ("rips", id(target))
    if key not in cache:
        cache[key] = _f64(trajectory_rips(data.rewards, data.viewed, data.logging_prefix, target.prefix, m))
    return Contribution(cache[key])


def _sips(data, target, m, options, cache) -> Contribution:
    key = ("sips", id(target))
    if key not in cache:
        cache[key] = _f64(trajectory_sips(data.rewards, data.viewed, data.logging_prefix, target.prefix, m))
    return Contribution(cache[key])


def _snrips(data, target, m, options, cache) -> Contribution:
    return Contribution(_f64(rank_rips(data.rewards, data.viewed, data.logging_prefix, target.prefix, m)),
                        _f64(rank_normalisers(data.viewed, data.logging_prefix, target.prefix, m)))


def _ranking_weights(data, target, m, cache) -> np.ndarray:
    key = ("ranking weight", id(target))
    if key not in cache:
        cache[key] = _f64(ranking_weight(data.viewed, data.logging_prefix, target.prefix, m))
    return cache[key]


def _snsips(data, target, m, options, cache) -> Contribution:
    return Contribution(_sips(data, target, m, options, cache).numerator, _ranking_weights(data, target, m, cache))


def _sips_beta(data, target, m, options, cache) -> Contribution:
    return Contribution(_sips(data, target, m, options, cache).numerator,
                        control=_ranking_weights(data, target, m, cache) - 1.0)


def _aips_parts(data, target, m, options, cache) -> np.ndarray:
    """Every behaviour's per-trajectory estimate (`aips_parts`), f64[B, M, N]."""
    key = ("aips parts", id(target))
    if key not in cache:
        cache[key] = _f64(aips_parts(data.rewards, data.viewed, data.logging_exposure, target.exposure,
                                     data.logging_prefix, target.prefix, clip_values(m)[0]))
    return cache[key]


def _aips_mix(behaviours: np.ndarray, data, target, m, options, cache) -> Contribution:
    """AIPS's contribution: each session's behaviour's estimate (int[N] indices of AIPS_BEHAVIOURS)."""
    return Contribution(np.take_along_axis(_aips_parts(data, target, m, options, cache),
                                           behaviours[None, None, :], axis=0)[0])


def _aips(data, target, m, options, cache) -> Contribution:
    return _aips_mix(checked_behaviours(data.behaviours, np.shape(data.viewed)[0]), data, target, m, options, cache)


def _aips_chosen(data, target, m, options, cache) -> Contribution:
    key = ("aips behaviour", id(target))
    if key not in cache:
        unclipped = np.flatnonzero(np.isinf(clip_values(m)[0]))        # the choice compares m = ∞ estimates
        at_inf = (_aips_parts(data, target, m, options, cache)[:, unclipped[0]] if unclipped.size
                  else _aips_parts(data, target, np.array([np.inf]), options, {})[:, 0])
        cache[key] = choose_behaviours(data.contexts, at_inf, z=options.get("aips_z", 2.0))
    return _aips_mix(cache[key], data, target, m, options, cache)


def _cascade_dr(data, target, m, options, cache) -> Contribution:
    return Contribution(_f64(trajectory_cascade_dr(data.rewards, data.viewed, data.logging_prefix, target.prefix,
                                                   data.predicted, target.cascade_baseline, m)))


_PBM = ("Asm. 1–5 of Jeunen et al. KDD'24: position-based examination, rewards independent of the other items "
        "shown, no state across sessions, a logger that exposes every item the target does; unbiased at m = ∞")
register(Estimator("dcg", "DCG (clipped IPS)", _dcg, assumption=_PBM,
                   reference="Jeunen et al. KDD'24 Eq. 8–9 (= independent IPS, Li et al. WSDM'18)"))
register(Estimator("ndcg", "nDCG (same-discount ideal)", _ndcg(IDEALS[0]), frozenset({"discount"}),
                   assumption="none: a per-session ratio, inconsistent (Jeunen et al. KDD'24 Lemma 5.2)",
                   reference="Jeunen et al. KDD'24 §5", online_scale=False))
register(Estimator("ndcg_all", "nDCG (all-viewed ideal)", _ndcg(IDEALS[1]), frozenset({"discount"}),
                   assumption="none: a per-session ratio, inconsistent (Jeunen et al. KDD'24 Lemma 5.2)",
                   reference="Jeunen et al. KDD'24 Table 1", online_scale=False))
register(Estimator("pndcg", "pnDCG (post-normalised)", _pndcg, frozenset({"discount"}),
                   assumption="as DCG, up to the constant mean ideal: orders policies as DCG does",
                   reference="Jeunen et al. KDD'24 §5", online_scale=False))
register(Estimator("sndcg", "SN-DCG (self-normalised)", _sndcg,
                   assumption="as DCG; consistent, with a bias of order 1/N (Swaminathan & Joachims, NeurIPS'15)",
                   reference="Swaminathan & Joachims, NeurIPS'15"))
register(Estimator("dcg_beta", "β-DCG (optimal baseline)", _dcg_beta, frozenset({"discount"}),
                   assumption="as DCG, for a target that shows K items (its expected views Σ_k S(k) are the "
                              "control's mean at m = ∞); the estimated β adds a bias of order 1/N",
                   reference="Gupta, Jeunen et al. RecSys'24 (β-IPS); differences: Jeunen & Ustimenko RecSys'24 "
                             "(Δβ-IPS)"))
register(Estimator("dr", "DR-DCG (doubly robust)", _dr, frozenset({"predicted", "direct"}),
                   assumption="as DCG for any reward model at m = ∞; a good reward model lowers the variance",
                   reference="Dudík, Langford & Li, ICML'11; Kiyohara et al., WSDM'22"))
register(Estimator("mips", "MIPS (item groups)", _mips, frozenset({"logging_group_exposure", "group_exposure"}),
                   assumption="DCG's, and no direct effect: within a context an item's click probability depends "
                              "on it only through its group (or logger and target split each group's exposure "
                              "alike); support needed per group only; unbiased at m = ∞",
                   reference="Saito & Joachims ICML'22 (MIPS), the group as the item's embedding; for rankings "
                             "Takahashi, Maru & Shoji 2025 (GMIPS, independent behaviour)"))
_SLATE = frozenset({"logging_prefix", "prefix"})
register(Estimator("rips", "RIPS (cascade IPS)", _rips, _SLATE,
                   assumption="the view of and reward at rank k depend on the items at ranks 1..k only (position "
                              "bias, click-stops, satiation), no state across sessions, a logger that can show "
                              "every prefix the target can; unbiased at m = ∞",
                   reference="McInerney et al. KDD'20; Kiyohara et al. WSDM'22"))
register(Estimator("snrips", "SN-RIPS (self-normalised)", _snrips, _SLATE,
                   assumption="as RIPS; consistent, with a bias of order 1/N (each rank's mean prefix weight is "
                              "1 at m = ∞ under RIPS's assumption)",
                   reference="Swaminathan & Joachims, NeurIPS'15; Kiyohara et al. KDD'23 (self-normalised "
                             "baselines)"))
register(Estimator("sips", "SIPS (slate IPS)", _sips, _SLATE,
                   assumption="the session down to its last viewed rank depends on the items shown down to there "
                              "only, no state across sessions, a logger that can show every ranking the target "
                              "can; unbiased at m = ∞",
                   reference="Swaminathan et al. NeurIPS'17; Kiyohara et al. KDD'23"))
register(Estimator("snsips", "SN-SIPS (self-normalised)", _snsips, _SLATE,
                   assumption="as SIPS; consistent, with a bias of order 1/N (Swaminathan & Joachims, NeurIPS'15)",
                   reference="Swaminathan & Joachims, NeurIPS'15"))
register(Estimator("sips_beta", "β-SIPS (optimal baseline)", _sips_beta, _SLATE,
                   assumption="as SIPS (the weight of the logged trajectory then has mean 1 at m = ∞); the "
                              "estimated β adds a bias of order 1/N",
                   reference="Gupta, Jeunen et al. RecSys'24 (β-IPS); differences: Jeunen & Ustimenko RecSys'24 "
                             "(Δβ-IPS)"))
register(Estimator("cascade_dr", "Cascade-DR", _cascade_dr, _SLATE | {"predicted", "cascade_baseline"},
                   assumption="as RIPS (whether rank k is viewed may depend on the items above it, not on the item "
                              "at k), for any reward model at m = ∞; a good reward model lowers the variance",
                   reference="Kiyohara et al. WSDM'22 Eq. 6, with the Q-function of rank k alone"))
register(Estimator("aips", "AIPS (true behaviour)", _aips, _SLATE | {"behaviours"},
                   assumption="each session follows its context's known behaviour: independent (DCG's weight), "
                              "cascade (RIPS's prefix weight), neighbours (the prefix down to k + 1) or standard "
                              "(SIPS's whole-prefix weight); unbiased at m = ∞, usually with a smaller variance than "
                              "the widest weight's",
                   reference="Kiyohara et al. KDD'23 Eq. 5, with the behaviour known (the true user behaviour "
                             "model)"))
register(Estimator("aips_chosen", "AIPS (behaviour from the log)", _aips_chosen, _SLATE | {"contexts"},
                   assumption="as AIPS, with each context's behaviour chosen from the log (`choose_behaviours`: the "
                              "narrowest behaviour whose estimate agrees within 2 SE with every wider one on its "
                              "sessions, cross-fitted); a context kept narrower than its behaviour leaves that "
                              "estimator's bias on its sessions",
                   reference="Kiyohara et al. KDD'23 §5 (there by an estimated MSE over a tree of context features)",
                   pooled=True))


# ---- summaries -------------------------------------------------------------------------------------

def contributions(data: LoggedData, targets: Mapping[str, Target], m, *, estimators: str | Sequence[str] = "all",
                  options: Mapping[str, Any] | None = None) -> dict[tuple[str, str], Contribution]:
    """{(estimator, target): `Contribution`} of the chosen estimators (those whose inputs are
    available, when "all") for every target, every m at once. m: scalar or f[M]."""
    m_vec, _ = clip_values(m)
    chosen = lookup(estimators)
    if estimators != "all":
        missing = [e.name for e in chosen if not e.available(data, targets)]
        if missing:
            raise ValueError(f"estimator(s) {', '.join(missing)} need inputs the log or targets lack "
                             f"({'; '.join(f'{e.name}: {sorted(e.needs)}' for e in chosen if e.name in missing)})")
    chosen = [e for e in chosen if e.available(data, targets)]
    cache: dict = {}
    options = dict(options or {})
    return {(e.name, name): e.contributions(data, target, m_vec, options, cache)
            for e in chosen for name, target in targets.items()}


COMPARE_COLUMNS = ("estimator", "target", "m", "value", "value_se", "difference", "se", "low", "high", "p")


def _ratio(c: Contribution) -> tuple[np.ndarray, np.ndarray]:
    """(estimate f64[M], influence values f64[M, N]) of a ratio contribution (f64[M, N] parts), or
    of a sum of ratios (f64[M, K, N] parts: one ratio per k, summed)."""
    a_bar, b_bar = c.numerator.mean(axis=-1), c.denominator.mean(axis=-1)
    if np.any(b_bar <= 0):
        raise ValueError("the denominator of a ratio estimator is zero: no logged trajectory the target can "
                         "show (or, for SN-DCG, no logged view)")
    value = c.scale * a_bar / b_bar
    ratio = value / c.scale
    influence = c.scale * (c.numerator - ratio[..., None] * c.denominator) / b_bar[..., None]
    if value.ndim == 2:                                              # a sum of ratios
        return value.sum(axis=-1), influence.sum(axis=-2)
    return value, influence


def _se(values: np.ndarray) -> np.ndarray:
    return np.std(values, axis=-1, ddof=1) / math.sqrt(values.shape[-1])


def summarise(parts: Mapping[tuple[str, str], Contribution], m, *, baseline: str | None = None,
              confidence: float = 0.99) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """{(estimator, target): {"value", "value_se", "difference", "se", "low", "high", "p": f64[M]}}
    of `contributions` (module docstring); the difference columns are NaN without a baseline and
    for the baseline itself."""
    m_vec = np.asarray(clip_values(m)[0], np.float64)
    out = {}
    for (name, target), c in parts.items():
        nan = np.full(m_vec.shape, np.nan)
        row = {"difference": nan, "se": nan, "low": nan, "high": nan, "p": nan}
        base = parts.get((name, baseline)) if baseline is not None and target != baseline else None
        if c.denominator is None:
            values = c.numerator if c.control is None else optimal_baseline(c.numerator, c.control)[1]
            value, _, _, value_se = stats.mean_ci(values, confidence, nan_policy="omit")
            if base is not None:
                delta = c.numerator - base.numerator
                if c.control is not None:                                   # the pair's own baseline
                    delta = optimal_baseline(delta, c.control - base.control)[1]
                mean, low, high, se = stats.mean_ci(delta, confidence, nan_policy="omit")
                row = {"difference": mean, "se": se, "low": low, "high": high,
                       "p": stats.one_sided_p(delta, nan_policy="omit")}
        else:
            value, influence = _ratio(c)
            value_se = _se(influence)
            if base is not None:
                base_value, base_influence = _ratio(base)
                mean, se = value - base_value, _se(influence - base_influence)
                half = _normal_quantile(confidence) * se
                row = {"difference": mean, "se": se, "low": mean - half, "high": mean + half,
                       "p": _normal_sf(mean / np.where(se > 0, se, np.nan))}
        out[(name, target)] = {"value": np.atleast_1d(value), "value_se": np.atleast_1d(value_se),
                               **{k: np.atleast_1d(v) for k, v in row.items()}}
    return out


def _normal_quantile(confidence: float) -> float:
    import scipy.stats
    return float(scipy.stats.norm.ppf((1 + confidence) / 2))


def _normal_sf(z):
    import scipy.stats
    return scipy.stats.norm.sf(z)


def compare(data: LoggedData, targets: Mapping[str, Target], m, *, estimators: str | Sequence[str] = "all",
            baseline: str | None = None, confidence: float = 0.99, options: Mapping[str, Any] | None = None):
    """Every chosen estimator (all whose inputs are available, by default) for every target and
    every m on one log, as one tidy frame with `COMPARE_COLUMNS`: the estimate and its standard
    error and, against ``baseline`` (a key of ``targets``, e.g. the logger), the paired difference,
    its standard error, normal ``confidence`` interval and one-sided p-value (module docstring).

    options: estimator options, e.g. ``zero_ideal`` ("zero" or "skip": nDCG of a session without
    an ideal), ``target_views`` (SN-DCG's T; the logged mean views by default) and ``aips_z``
    (the z of `choose_behaviours`, 2 by default)."""
    if baseline is not None and baseline not in targets:
        raise ValueError(f"baseline {baseline!r} is not one of the targets {list(targets)}")
    import pandas as pd
    m_vec = np.asarray(clip_values(m)[0], np.float64)
    parts = contributions(data, targets, m, estimators=estimators, options=options)
    rows = []
    for (name, target), summary in summarise(parts, m, baseline=baseline, confidence=confidence).items():
        for i, m_value in enumerate(m_vec):
            rows.append((name, target, float(m_value), *(float(summary[c][i]) for c in COMPARE_COLUMNS[3:])))
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))


def subset(data: LoggedData, targets: Mapping[str, Target], rows) -> tuple[LoggedData, dict[str, Target]]:
    """The log of the trajectories ``rows`` only (bool[N] mask or integer indices): every per-trajectory
    array of ``data`` and of each target cut to those rows, the discount kept; the input of a
    `pooled` estimator on a subset (for the others `restrict` of the whole log's contributions is
    the same and cheaper)."""
    def cut(a):
        return None if a is None else np.asarray(a)[rows]
    sliced = LoggedData(cut(data.rewards), cut(data.viewed), cut(data.logging_exposure), data.discount,
                        cut(data.predicted), cut(data.logging_prefix), cut(data.behaviours), cut(data.contexts),
                        cut(data.logging_group_exposure))
    if np.shape(sliced.viewed)[0] == 0:
        raise ValueError("rows selects no trajectory")
    return sliced, {name: Target(cut(t.exposure), cut(t.direct), cut(t.prefix), cut(t.cascade_baseline),
                                 cut(t.group_exposure))
                    for name, t in targets.items()}


def restrict(parts: Mapping[tuple[str, str], Contribution], rows) -> dict[tuple[str, str], Contribution]:
    """`contributions` of the trajectories ``rows`` only, for estimates on a subset of the log (the
    sessions of one position, one day, one user group): every array f64[M, N] → f64[M, n], the
    scale s kept. Each registered estimator's contribution of a trajectory depends on that
    trajectory alone, so `summarise` of the result is `summarise` of the subset's own
    `contributions` (mean over the n trajectories, SE s/√n, the ratio's delta method over n),
    computed without recompiling for the subset's shape; one exception: SN-DCG's default
    T (the logged mean views) stays the whole log's (pass the option ``target_views``).

    rows: bool[N] mask or integer indices in [0, N), selecting at least one trajectory. Raises
    ValueError for a `pooled` estimator (compute it on `subset` of the data instead)."""
    pooled = sorted({name for name, _ in parts if name in ESTIMATORS and ESTIMATORS[name].pooled})
    if pooled:
        raise ValueError(f"{', '.join(pooled)} pool the log's trajectories (Estimator.pooled): a subset of their "
                         f"contributions is not their estimate on the subset; compute them on ope.subset(...)")
    sizes = {c.numerator.shape[-1] for c in parts.values()}
    if len(sizes) != 1:
        raise ValueError(f"parts must share one number of trajectories N, got {sorted(sizes)}")
    n = sizes.pop()
    rows = np.asarray(rows)
    if rows.dtype == np.bool_:
        if rows.shape != (n,):
            raise ValueError(f"a rows mask must be bool[N] = bool[{n}], got shape {rows.shape}")
    elif rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer) or np.any((rows < 0) | (rows >= n)):
        raise ValueError(f"rows must be a bool[{n}] mask or 1-D integer indices in [0, {n})")
    if (not rows.any()) if rows.dtype == np.bool_ else rows.size == 0:
        raise ValueError("rows selects no trajectory")
    return {key: c.at(rows=rows) for key, c in parts.items()}


def weighted_values(parts: Mapping[tuple[str, str], Contribution], weights) -> dict[tuple[str, str], np.ndarray]:
    """Every contribution's estimate on S reweighted copies of the log at once, for estimator
    selection by resampling (cross-validation folds, bootstrap resamples): row s of ``weights``
    gives each trajectory's multiplicity in copy s (a 0/1 mask: the subset, as `restrict`; counts:
    a resample with replacement). With W_s = Σ_τ w_sτ, copy s's estimate is

        mean:            Σ_τ w_sτ f_τ / W_s                     (NaN values skipped, as `summarise`)
        ratio:           s · Σ_τ w_sτ a_τ / Σ_τ w_sτ b_τ        (summed over k for a sum of ratios)
        control variate: f̄_s − β̂_s ḡ_s,  β̂_s = Σ w (f − f̄_s)(g − ḡ_s) / Σ w (g − ḡ_s)²   (0 where g is constant)

    which is `summarise`'s value of the copy's own contributions; NaN where a copy has no weight
    (or, for a ratio, a zero denominator: no trajectory in it the target can show).

    parts: `contributions` over N trajectories (not a `pooled` estimator's: compute it on `subset`
    of the data instead); weights: f[S, N], or f[M, S, N] for a different copy at each of the M
    clipping values, every weight >= 0. Returns {(estimator, target): f64[M, S]}."""
    pooled = sorted({name for name, _ in parts if name in ESTIMATORS and ESTIMATORS[name].pooled})
    if pooled:
        raise ValueError(f"{', '.join(pooled)} pool the log's trajectories (Estimator.pooled): reweighting their "
                         f"contributions is not their estimate on the copy; compute them on ope.subset(...)")
    weights = np.asarray(weights, np.float64)
    sizes = {c.numerator.shape[-1] for c in parts.values()}
    if len(sizes) > 1 or weights.ndim not in (2, 3) or (sizes and weights.shape[-1] not in sizes):
        raise ValueError(f"weights must be f[S, N] or f[M, S, N] with N the parts' number of trajectories "
                         f"{sorted(sizes)}, got shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and >= 0 (each trajectory's multiplicity in a copy)")

    def total(w, x):                         # Σ_τ w_sτ x_τ: w f[S, N] | f[M, S, N], x f[M, ..., N] -> f64[M, ..., S]
        if w.ndim == 2:
            return np.einsum("...n,sn->...s", x, w)
        return np.einsum("m...n,msn->m...s", x, w)

    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for key, c in parts.items():
            if c.denominator is not None:
                ratio = c.scale * total(weights, c.numerator) / np.where(
                    (b := total(weights, c.denominator)) > 0, b, np.nan)
                out[key] = ratio.sum(axis=-2) if ratio.ndim == 3 else ratio
                continue
            if c.control is None:
                finite = np.isfinite(c.numerator)
                kept = total(weights, finite.astype(np.float64))
                out[key] = total(weights, np.where(finite, c.numerator, 0.0)) / np.where(kept > 0, kept, np.nan)
                continue
            # centred on the whole log's means first (β̂ is shift-invariant): the copies' moments stay accurate
            f = c.numerator - c.numerator.mean(axis=-1, keepdims=True)
            g = c.control - c.control.mean(axis=-1, keepdims=True)
            size = total(weights, np.ones_like(f))
            size = np.where(size > 0, size, np.nan)
            f_bar, g_bar = total(weights, f) / size, total(weights, g) / size
            squares = total(weights, g * g)
            spread = squares - size * g_bar ** 2
            varies = spread > 1e-12 * squares           # not g constant on the copy (up to rounding)
            beta = np.where(varies, (total(weights, f * g) - size * f_bar * g_bar) / np.where(varies, spread, 1.0), 0.0)
            shift_f, shift_g = c.numerator.mean(axis=-1)[:, None], c.control.mean(axis=-1)[:, None]
            out[key] = (f_bar + shift_f) - beta * (g_bar + shift_g)
    return out

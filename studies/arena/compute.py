"""The arena's cells (`simrec_studies.arena`): the worlds, the truth of the target and of its rival
(exact, or a Monte Carlo mean with its SE for a Plackett–Luce target whose reward depends on the
items above), and every estimator's value of the target and difference to the rival on nested log sizes
of independent logs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simrec import feed, ope
from simrec.runner import ConfigError, cell_key, shared_key

if TYPE_CHECKING:
    from simrec_studies.arena import ArenaConfig

__all__ = ["cells", "Shared", "setup", "world", "item_groups", "target_ranker", "truth", "estimators", "Estimates",
           "estimate", "VALIDATOR", "training_sizes", "cross_validation_errors", "cross_validate", "compute"]

SIGNAL = "click"


def cells(config: ArenaConfig) -> list[dict]:
    loggers = ([("plackett_luce", float(t)) for t in config.temperatures]
               + [("epsilon_greedy", float(e)) for e in config.epsilons])
    return [{"behaviour": b, "catalogue": a, "group_size": g, "direct_effect": float(e), "logger": kind,
             "exploration": level}
            for b in config.behaviours for a in config.catalogues for g in config.group_sizes
            for e in config.direct_effects for kind, level in loggers]


def logging_ranker(kind: str, level: float, scores: np.ndarray):
    """The logger's ranker: Plackett–Luce at temperature `level`, or ε-greedy (ε = `level`) around
    the sorted order of `scores`."""
    table = feed.from_table(scores)
    if kind == "plackett_luce":
        return feed.PlackettLuce(table, jnp.float32(level))
    return feed.EpsilonGreedy(feed.Sort(table), jnp.float32(level))


@dataclass(frozen=True, eq=False)
class World:
    """Click probabilities q f32[X, A], the logger's, the target's and its rival's scores f32[X, A],
    and each item's group int[A] (MIPS's embedding)."""
    quality: np.ndarray
    logger_scores: np.ndarray
    target_scores: np.ndarray
    rival_scores: np.ndarray
    item_groups: np.ndarray


@dataclass(frozen=True, eq=False)
class Shared:
    """The world of each (catalogue size, group size, direct effect)."""
    worlds: dict[tuple[int, int, float], World]


def item_groups(key, features: np.ndarray, groups: int, iterations: int = 50) -> np.ndarray:
    """Lloyd's k-means of the items' features f[A, d] into ``groups`` clusters, started at
    ``groups`` distinct items drawn with ``key`` (a cluster that empties keeps its centre); the
    distances in blocks of items, memory O(2^22). Returns int[A], each item's cluster."""
    features = np.asarray(features, np.float64)
    centres = features[np.asarray(jax.random.choice(key, features.shape[0], (groups,), replace=False))]
    block = max(1, 2**22 // groups)                                   # items per block of distances [block, groups]
    for _ in range(iterations):
        # ‖f − c‖² up to the item's own ‖f‖², which does not move its nearest centre
        offsets = (centres ** 2).sum(-1)[None, :]
        labels = np.concatenate([np.argmin(offsets - 2.0 * features[start:start + block] @ centres.T, axis=1)
                                 for start in range(0, features.shape[0], block)])
        sums, sizes = np.zeros_like(centres), np.bincount(labels, minlength=groups)
        np.add.at(sums, labels, features)
        centres = np.where(sizes[:, None] > 0, sums / np.maximum(sizes, 1)[:, None], centres)
    return labels


def _toward_group_means(values: np.ndarray, groups: np.ndarray, keep: float) -> np.ndarray:
    """Each row's group mean plus `keep` times its deviation from it.  values: f[A, ...]."""
    values = np.asarray(values, np.float64)
    sums = np.zeros((groups.max() + 1, *values.shape[1:]))
    np.add.at(sums, groups, values)
    sizes = np.maximum(np.bincount(groups, minlength=sums.shape[0]), 1)          # a group k-means left empty: unused
    means = (sums / sizes.reshape(-1, *[1] * (values.ndim - 1)))[groups]
    return means + keep * (values - means)


def world(key, config: ArenaConfig, n_items: int, group_size: int, direct_effect: float = 1.0) -> World:
    """q(x, a) = sigmoid(⟨u_x, v_a⟩/√d + b_a + offset) with u, v, b standard normal; the scores are
    the true logit plus normal noise of sd `logger_noise` / `target_noise` / `rival_noise` (the
    rival's noise from fold_in(key, 5)); the items' groups are the k-means clusters
    (`item_groups`, from fold_in(key, 6)) of their terms of the logit (v_a/√d, b_a), A //
    `group_size` of them (at least 1). With ``direct_effect`` e < 1 every item's (v_a, b_a) is
    first moved to its group's mean plus e times its deviation: at e = 0 the items of a group share
    their click probabilities and scores' logit, so the reward depends on the item only through its
    group (MIPS's no-direct-effect assumption, Saito & Joachims ICML'22, holds exactly); the groups
    and every random draw are those of e = 1."""
    k_user, k_item, k_bias, k_logger, k_target = jax.random.split(key, 5)
    shape = (config.contexts, n_items)
    users = jax.random.normal(k_user, (config.contexts, config.dim))
    items = jax.random.normal(k_item, (n_items, config.dim))
    bias = jax.random.normal(k_bias, (n_items,))
    features = np.column_stack([np.asarray(items) / np.sqrt(config.dim), np.asarray(bias)])
    groups = item_groups(jax.random.fold_in(key, 6), features, max(1, n_items // group_size))
    if direct_effect != 1.0:
        items = jnp.asarray(_toward_group_means(items, groups, direct_effect), jnp.float32)
        bias = jnp.asarray(_toward_group_means(bias, groups, direct_effect), jnp.float32)
    logit = (users @ items.T / np.sqrt(config.dim) + bias + config.offset)
    return World(np.asarray(jax.nn.sigmoid(logit), np.float32),
                 np.asarray(logit + config.logger_noise * jax.random.normal(k_logger, shape), np.float32),
                 np.asarray(logit + config.target_noise * jax.random.normal(k_target, shape), np.float32),
                 np.asarray(logit + config.rival_noise * jax.random.normal(jax.random.fold_in(key, 5), shape),
                            np.float32),
                 groups)


def setup(key, config: ArenaConfig) -> Shared:
    """One world per (catalogue size A, group size, direct effect), from shared_key(key, "world:A"):
    every behaviour, logger, group size and direct effect of a catalogue size meets the same users
    and items (common random numbers). Raises ConfigError when a Plackett–Luce logger's (or
    target's) exposures would be a Monte Carlo estimate (`feed.race_nodes`: A · K above its limit,
    or scores too spread at a low temperature): every estimator here needs exact propensities."""
    worlds = {(a, g, float(e)): world(shared_key(key, f"world:{a}"), config, a, g, e)
              for a in config.catalogues for g in config.group_sizes for e in config.direct_effects}
    contexts = np.arange(config.contexts)
    for (a, _, _), w in worlds.items():
        rankers = [(f"the Plackett–Luce logger at temperature {t:g}",
                    logging_ranker("plackett_luce", t, w.logger_scores)) for t in config.temperatures]
        if config.target_temperature > 0:
            rankers += [(f"the Plackett–Luce {name} at target_temperature {config.target_temperature:g}",
                         target_ranker(config, scores)) for name, scores in (("target", w.target_scores),
                                                                            ("rival", w.rival_scores))]
        for name, ranker in rankers:
            if feed.race_nodes(feed.Policy(feed.all_items(a), ranker, config.feed_length), contexts) is None:
                raise ConfigError(f"catalogues: {name} over A = {a} items with K = {config.feed_length} has no "
                                  f"exact exposure (feed.race_nodes); use smaller catalogues (A · K <= 4096), a "
                                  f"higher temperature, or a deterministic ranker there")
    return Shared(worlds)


#: each arena behaviour's AIPS behaviour (`ope.AIPS_BEHAVIOURS`) for the users it acts on
AIPS_BEHAVIOUR = {"position_based": "independent", "click_stops": "cascade", "satiation": "cascade",
                  "mixed": "cascade", "neighbours": "neighbours", "slate": "standard"}

#: ``mixed_all``: the behaviours its users follow, in the order of `ArenaConfig.mixture_shares`
MIXTURE = ("position_based", "satiation", "neighbours", "slate")


def mixture_members(config: ArenaConfig) -> np.ndarray:
    """Under ``mixed_all``, each user's behaviour, an index of `MIXTURE`: consecutive blocks of
    round(cumulative share · X) users (users are exchangeable, so which ones is immaterial).  int[X]."""
    bounds = np.round(np.cumsum(config.mixture_shares) * config.contexts)
    return np.minimum(np.searchsorted(bounds, np.arange(config.contexts), side="right"), len(MIXTURE) - 1)


def context_behaviours(config: ArenaConfig, behaviour: str) -> np.ndarray:
    """AIPS's true behaviour of every user, an index of `ope.AIPS_BEHAVIOURS` (`AIPS_BEHAVIOUR`):
    under ``mixed`` the first round(satiated_share · X) users cascade (they satiate) and the others
    are independent; under ``mixed_all`` each user's own (`mixture_members`).  int[X]."""
    if behaviour == "mixed_all":
        codes = [ope.AIPS_BEHAVIOURS.index(AIPS_BEHAVIOUR[b]) for b in MIXTURE]
        return np.asarray(codes)[mixture_members(config)]
    code = ope.AIPS_BEHAVIOURS.index(AIPS_BEHAVIOUR[behaviour])
    if behaviour == "mixed":
        return np.where(np.arange(config.contexts) < round(config.satiated_share * config.contexts), code, 0)
    return np.full(config.contexts, code)


#: which viewed items satiate (one of `feed.SATIATED_BY`) the satiating users of each behaviour
SATIATED_BY_BEHAVIOUR = {"satiation": "above", "mixed": "above", "neighbours": "neighbours", "slate": "slate"}


def scenario(config: ArenaConfig, behaviour: str, w: World) -> feed.Scenario:
    view = feed.Exponential(jnp.float32(config.view_decay))
    if behaviour == "click_stops":
        view = feed.Cascade(view, jnp.float32(config.interaction))
    activity = jnp.full(config.contexts, 1.0 / config.contexts)
    quality = (feed.from_table(w.quality),)
    if behaviour == "mixed_all":
        members = np.asarray(MIXTURE)[mixture_members(config)]
        kinds = [feed.SATIATED_BY.index(SATIATED_BY_BEHAVIOUR.get(b, "above")) for b in members]
        return feed.Scenario(view, quality, activity, signals=(SIGNAL,), satiation=config.interaction,
                             satiated_contexts=jnp.asarray(members != "position_based"), satiated_by="context",
                             context_satiated_by=jnp.asarray(kinds, jnp.int32))
    satiates = behaviour in SATIATED_BY_BEHAVIOUR
    satiating_users = jnp.asarray(context_behaviours(config, behaviour) > 0) if behaviour == "mixed" else None
    return feed.Scenario(view, quality, activity, signals=(SIGNAL,), satiation=config.interaction if satiates else 0.0,
                         satiated_contexts=satiating_users, satiated_by=SATIATED_BY_BEHAVIOUR.get(behaviour, "above"))


def estimators(data: ope.LoggedData, targets: dict) -> list[str]:
    """The registered estimators of the online value whose inputs the log provides."""
    return [e.name for e in ope.lookup("all") if e.online_scale and e.available(data, targets)]


class Estimates(NamedTuple):
    """One estimator on a set of trajectories, f64[M] each: its value of the target with its standard
    error, the paired difference target − rival with its standard error (`ope.summarise` against
    the rival), and its value of the rival with its standard error."""
    value: np.ndarray
    value_se: np.ndarray
    difference: np.ndarray
    difference_se: np.ndarray
    rival_value: np.ndarray
    rival_value_se: np.ndarray


def estimate(target: ope.Contribution, rival: ope.Contribution, m: np.ndarray) -> Estimates:
    """`Estimates` of one estimator from its contributions for the target and the rival; NaN at the
    m where a ratio estimator is undefined because a mean denominator is 0 (SN-SIPS when no logged
    ranking is one the target, or the rival, can show; SN-RIPS when, at some rank, no logged prefix is)."""
    out = Estimates(*np.full((len(Estimates._fields), len(m)), np.nan))
    defined = np.ones(len(m), bool)
    for part in (target, rival):
        if part.denominator is not None:
            defined &= (part.denominator.mean(axis=-1) > 0).reshape(len(m), -1).all(axis=1)
    if defined.any():
        kept = {("estimator", "T"): target.at(defined), ("estimator", "T2"): rival.at(defined)}
        summaries = ope.summarise(kept, m[defined], baseline="T2")
        summary, of_rival = summaries["estimator", "T"], summaries["estimator", "T2"]
        out.value[defined], out.value_se[defined] = summary["value"], summary["value_se"]
        out.difference[defined], out.difference_se[defined] = summary["difference"], summary["se"]
        out.rival_value[defined], out.rival_value_se[defined] = of_rival["value"], of_rival["value_se"]
    return out


#: the validator of the cross-validation selector: unclipped SIPS, unbiased under every behaviour of
#: the arena (it weights the whole viewed ranking)
VALIDATOR = ("sips", math.inf)


def training_sizes(standard_errors: np.ndarray, validator_se: float, n: int) -> np.ndarray:
    """The training set's size of each variant in off-policy cross-validation (Cief et al.,
    AAAI'25): the share of the n sessions that balances the two sides' variances,
    n_train = n · SE_v² / (SE_v² + SE_val²) (one half where both are 0), kept within [2, n − 2] so
    that both sides have a standard error. standard_errors: f64[M] (NaN: no size, 0 returned).
    Returns int[M]."""
    variance, validator = np.asarray(standard_errors, np.float64) ** 2, validator_se ** 2
    total = variance + validator
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, variance / np.where(total > 0, total, 1.0), 0.5)
        share = np.where(np.isnan(variance), np.nan, share)
    sizes = np.clip(np.round(share * n), 2, n - 2)
    return np.where(np.isfinite(sizes), sizes, 0).astype(np.int64)


def cross_validation_errors(values: np.ndarray, validator: np.ndarray, training: np.ndarray) -> np.ndarray:
    """Each variant's mean squared difference between its estimate on a training split and the
    validator's on the rest of the log, with its standard error over the splits (the one-standard-
    error rule's margin): E[(V̂_train − V̂_val)²] = MSE(V̂ on n_train sessions) + Var(V̂_val), the
    validator being unbiased and independent of the training split. values: f64[M, S] the variant's
    estimate on each of S training splits; validator: f64[N] the validator's per-session terms;
    training: bool[M, S, N] the splits. Splits where an estimate is undefined (NaN) are skipped.
    Returns f64[2, M]: the mean and its standard error (NaN with fewer than 2 defined splits)."""
    held_out = ~training
    validation = (held_out * validator).sum(axis=-1) / held_out.sum(axis=-1)
    squared = (values - validation) ** 2
    defined = np.isfinite(squared)
    count = defined.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(defined, squared, 0.0).sum(axis=-1) / count
        variance = np.where(defined, (squared - mean[:, None]) ** 2, 0.0).sum(axis=-1) / (count - 1)
    enough = count >= 2
    standard_error = np.sqrt(variance / np.maximum(count, 1))
    return np.stack([np.where(enough, mean, np.nan), np.where(enough, standard_error, np.nan)])


def _aips_chosen_on_splits(data: ope.LoggedData, target: ope.Target, rows: np.ndarray, training: np.ndarray,
                           m: np.ndarray) -> np.ndarray:
    """AIPS choosing each user's behaviour from the log (the registry's ``aips_chosen``: the choice
    by `ope.choose_behaviours` among the unclipped estimates, then each session's chosen estimate at
    every m) on each training split, the choice made from the split's sessions alone: every
    behaviour's per-session estimates (`ope.aips_parts`) computed once for the log's sessions
    ``rows`` (int[n]), so no split recompiles for its own size. training: bool[M, S, n]. Returns
    f64[M, S]."""
    arrays = [np.asarray(a)[rows] for a in (data.rewards, data.viewed, data.logging_exposure, target.exposure,
                                            data.logging_prefix, target.prefix)]
    parts = np.asarray(ope.aips_parts(*arrays, m), np.float64)                                        # [B, M, n]
    unclipped = np.flatnonzero(np.isinf(m))
    at_inf = parts[:, unclipped[0]] if unclipped.size else np.asarray(ope.aips_parts(*arrays, np.inf), np.float64)
    contexts = np.asarray(data.contexts)[rows]
    values = np.full(training.shape[:2], np.nan)
    for i, s in np.ndindex(*training.shape[:2]):
        train = np.flatnonzero(training[i, s])
        if train.size:
            chosen = ope.choose_behaviours(contexts[train], at_inf[:, train])
            values[i, s] = parts[chosen, i, train].mean()
    return values


def cross_validate(key, splits: int, data: ope.LoggedData, targets: dict, parts: dict, found: dict[str, Estimates],
                   rows: np.ndarray, m: np.ndarray) -> dict[str, np.ndarray]:
    """Off-policy cross-validation (OCV, Cief et al., AAAI'25) of every estimator of the target on
    one log: ``splits`` random splits of its sessions (permutations from ``key``, shared by the
    variants), each variant trained on `training_sizes` of them and scored against `VALIDATOR` on
    the rest (`cross_validation_errors`). A per-session estimator is evaluated on every split at once
    (`ope.weighted_values`); AIPS choosing the behaviour from the log makes its choice on each
    training split's sessions (`_aips_chosen_on_splits`).

    data, targets: the whole log (every replication); parts: the contributions of its sessions
    ``rows`` (int[n]) as `ope.restrict` gives them (a pooled estimator's as computed on them);
    found: `estimate` of each estimator there. Returns {estimator: f64[2, M]}, the mean squared
    error and its standard error over the splits, NaN where a variant is undefined or without the
    validator. Raises ValueError for a pooled estimator other than AIPS's."""
    name, at_m = VALIDATOR
    at = np.flatnonzero(m == at_m)
    if name not in found or not at.size or not np.isfinite(found[name].value_se[at[0]]):
        return {estimator: np.full((2, len(m)), np.nan) for estimator in found}
    n = len(rows)
    validator_se, validator = float(found[name].value_se[at[0]]), parts[name, "T"].numerator[at[0]]
    ranks = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(key, splits)))  # int[S, n]
    out = {}
    for estimator, estimates in found.items():
        sizes = training_sizes(estimates.value_se, validator_se, n)                                     # int[M]
        training = ranks[None] < sizes[:, None, None]                                                   # bool[M, S, n]
        if estimator == "aips_chosen":
            values = _aips_chosen_on_splits(data, targets["T"], rows, training, m)
        elif ope.ESTIMATORS[estimator].pooled:
            raise ValueError(f"cross_validate has no split rule for the pooled estimator {estimator}")
        else:
            values = ope.weighted_values({(estimator, "T"): parts[estimator, "T"]}, training)[estimator, "T"]
        out[estimator] = np.where(sizes > 0, cross_validation_errors(values, validator, training), np.nan)
    return out


def target_ranker(config: ArenaConfig, scores: np.ndarray):
    """The target's (or its rival's) ranker: Sort of `scores` (deterministic, as deployed), or
    Plackett–Luce over them at `target_temperature` when it is > 0."""
    table = feed.from_table(scores)
    if config.target_temperature > 0:
        return feed.PlackettLuce(table, jnp.float32(config.target_temperature))
    return feed.Sort(table)


def truth(key, config: ArenaConfig, scene: feed.Scenario, policy: feed.Policy) -> tuple[float, float]:
    """A policy's online reward per session and its standard error (`feed.online_value`): exact
    (SE 0) for a deterministic policy under every behaviour and for a Plackett–Luce one where the
    reward depends on the item and its rank alone (its exposures exact by the exponential race);
    else the mean over `truth_samples` sampled rankings per user from `key`, with its Monte Carlo
    standard error."""
    value = feed.online_value(key, scene, policy, num_samples=config.truth_samples)
    return float(value.mean[0]), float(value.standard_error[0])


def compute(key, config: ArenaConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one (behaviour, catalogue, group size, direct effect, logger, exploration): the exact
    truth (the target's value
    and its difference to the rival), then every estimator at every m on the first N sessions of
    each of the `replications` logs, for every N in `sessions`. The pilot log draws from
    fold_in(cell_key, 0), the logs from fold_in(cell_key, 1), a Monte Carlo truth of the target and
    of its rival from fold_in(cell_key, 2) and fold_in(cell_key, 3) (`truth`), and the rival's own
    logs (one per replication, as if it were deployed: ``rival_log`` is its mean reward per session
    on the first N sessions) from fold_in(cell_key, 4), and each log's cross-validation splits
    (`cross_validate`: ``cv_error``, ``cv_error_se``) from fold_in(fold_in(fold_in(cell_key, 5),
    replication), N)."""
    n_items = cell["catalogue"]
    w = shared.worlds[n_items, cell["group_size"], cell["direct_effect"]]
    scene = scenario(config, cell["behaviour"], w)
    candidates = feed.all_items(n_items)
    logger = feed.Policy(candidates, logging_ranker(cell["logger"], cell["exploration"], w.logger_scores),
                         config.feed_length)
    target = feed.Policy(candidates, target_ranker(config, w.target_scores), config.feed_length)
    rival = feed.Policy(candidates, target_ranker(config, w.rival_scores), config.feed_length)
    head = {"behaviour": cell["behaviour"], "catalogue": n_items, "group_size": cell["group_size"],
            "direct_effect": cell["direct_effect"], "logger": cell["logger"], "exploration": cell["exploration"]}
    key = cell_key(key, cell)
    (value, value_se), (rival_value, rival_se) = (truth(jax.random.fold_in(key, 2 + i), config, scene, policy)
                                                  for i, policy in enumerate((target, rival)))
    rows = [{**head, "sessions": 0, "replication": -1, "estimator": "truth", "m": np.nan, "value": value,
             "value_se": value_se, "difference": value - rival_value,
             "difference_se": float(np.hypot(value_se, rival_se)), "rival_value": rival_value,
             "rival_value_se": rival_se, "rival_log": np.nan, "cv_error": np.nan, "cv_error_se": np.nan}]

    pilot = feed.simulate(jax.random.fold_in(key, 0), scene, logger, config.pilot_sessions)
    longest = max(config.sessions)
    log = feed.simulate(jax.random.fold_in(key, 1), scene, logger, config.replications * longest)
    rival_log = feed.simulate(jax.random.fold_in(key, 4), scene, rival, config.replications * longest)
    rival_rewards = np.asarray(jnp.sum(rival_log.rewards[0], axis=1), np.float64)        # f64[R · max N]
    reward_model = ope.click_rate_model(pilot, n_items, prior_views=config.prior_views)
    on = ope.from_log(log, {"R0": logger, "T": target, "T2": rival}, feed.position_model(scene.view),
                      reward_models={SIGNAL: reward_model}, slates=True,
                      context_behaviours=context_behaviours(config, cell["behaviour"]), item_groups=w.item_groups)
    data, targets = on.data[SIGNAL], {name: on.targets[SIGNAL][name] for name in ("T", "T2")}
    m = np.asarray(config.m, np.float64)
    names = estimators(data, targets)
    pooled = [name for name in names if ope.ESTIMATORS[name].pooled]
    cv_key = jax.random.fold_in(key, 5)
    parts = ope.contributions(data, targets, m, estimators=[name for name in names if name not in pooled])
    for r in range(config.replications):
        for n in sorted(config.sessions):
            rows_n = r * longest + np.arange(n)
            some = ope.restrict(parts, rows_n)
            if pooled:                  # a choice made on this log alone (not on the other replications)
                some.update(ope.contributions(*ope.subset(data, targets, rows_n), m, estimators=pooled))
            on_policy = float(rival_rewards[rows_n].mean())
            found = {name: estimate(some[name, "T"], some[name, "T2"], m) for name in names}
            validated = cross_validate(jax.random.fold_in(jax.random.fold_in(cv_key, r), n), config.cv_splits, data,
                                       targets, some, found, rows_n, m)
            for name in names:
                rows += [{**head, "sessions": n, "replication": r, "estimator": name, "m": float(mv),
                          **{field: float(v) for field, v in zip(Estimates._fields, values)}, "rival_log": on_policy,
                          "cv_error": float(cv), "cv_error_se": float(cv_se)}
                         for mv, cv, cv_se, *values in zip(m, *validated[name], *found[name])]
    return rows

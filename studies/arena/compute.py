"""The arena's cells (`simrec_studies.arena`): the worlds, the exact truth of the target, and every
estimator's value on nested log sizes of independent logs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from simrec import feed, ope
from simrec.runner import cell_key, shared_key

if TYPE_CHECKING:
    from simrec_studies.arena import ArenaConfig

__all__ = ["cells", "Shared", "setup", "world", "estimators", "estimate", "compute"]

SIGNAL = "click"


def cells(config: ArenaConfig) -> list[dict]:
    loggers = ([("plackett_luce", float(t)) for t in config.temperatures]
               + [("epsilon_greedy", float(e)) for e in config.epsilons])
    return [{"behaviour": b, "catalogue": a, "logger": kind, "exploration": level}
            for b in config.behaviours for a in config.catalogues for kind, level in loggers]


def logging_ranker(kind: str, level: float, scores: np.ndarray):
    """The logger's ranker: Plackett–Luce at temperature `level`, or ε-greedy (ε = `level`) around
    the sorted order of `scores`."""
    table = feed.from_table(scores)
    if kind == "plackett_luce":
        return feed.PlackettLuce(table, jnp.float32(level))
    return feed.EpsilonGreedy(feed.Sort(table), jnp.float32(level))


@dataclass(frozen=True, eq=False)
class World:
    """Click probabilities q f32[X, A] and the logger's and target's scores f32[X, A]."""
    quality: np.ndarray
    logger_scores: np.ndarray
    target_scores: np.ndarray


@dataclass(frozen=True, eq=False)
class Shared:
    """The world of each catalogue size."""
    worlds: dict[int, World]


def world(key, config: ArenaConfig, n_items: int) -> World:
    """q(x, a) = sigmoid(⟨u_x, v_a⟩/√d + b_a + offset) with u, v, b standard normal; the scores are
    the true logit plus normal noise of sd `logger_noise` / `target_noise`."""
    k_user, k_item, k_bias, k_logger, k_target = jax.random.split(key, 5)
    shape = (config.contexts, n_items)
    logit = (jax.random.normal(k_user, (config.contexts, config.dim)) @ jax.random.normal(k_item, (n_items, config.dim)).T
             / np.sqrt(config.dim) + jax.random.normal(k_bias, (n_items,)) + config.offset)
    return World(np.asarray(jax.nn.sigmoid(logit), np.float32),
                 np.asarray(logit + config.logger_noise * jax.random.normal(k_logger, shape), np.float32),
                 np.asarray(logit + config.target_noise * jax.random.normal(k_target, shape), np.float32))


def setup(key, config: ArenaConfig) -> Shared:
    """One world per catalogue size, from shared_key(key, "world:A"): every behaviour and logger of
    a catalogue size meets the same users and items."""
    return Shared({a: world(shared_key(key, f"world:{a}"), config, a) for a in config.catalogues})


def scenario(config: ArenaConfig, behaviour: str, w: World) -> feed.Scenario:
    view = feed.Exponential(jnp.float32(config.view_decay))
    if behaviour == "click_stops":
        view = feed.Cascade(view, jnp.float32(config.interaction))
    return feed.Scenario(view, (feed.from_table(w.quality),), jnp.full(config.contexts, 1.0 / config.contexts),
                         signals=(SIGNAL,), satiation=config.interaction if behaviour == "satiation" else 0.0)


def estimators(data: ope.LoggedData, targets: dict) -> list[str]:
    """The registered estimators of the online value whose inputs the log provides."""
    return [e.name for e in ope.lookup("all") if e.online_scale and e.available(data, targets)]


def _reward_model(log: feed.Log, n_items: int, prior_views: float) -> np.ndarray:
    """q̂(a): clicks per view of each item on the log, shrunk to the overall rate by prior_views
    pseudo-views.  f32[A]."""
    viewed = np.asarray(log.viewed)
    items = np.asarray(log.items)[viewed]
    clicks = np.asarray(log.rewards[0])[viewed].astype(np.float64)
    views = np.bincount(items, minlength=n_items)
    rate = clicks.sum() / max(len(clicks), 1)
    return ((np.bincount(items, weights=clicks, minlength=n_items) + prior_views * rate)
            / (views + prior_views)).astype(np.float32)


def estimate(part: ope.Contribution, m: np.ndarray) -> np.ndarray:
    """One estimator's estimate f64[M] from its contributions on a set of trajectories
    (`ope.summarise`); NaN at the m where a ratio estimator is undefined because its mean
    denominator is 0 (SN-SIPS when no logged ranking is one the target can show)."""
    values = np.full(len(m), np.nan)
    defined = np.ones(len(m), bool) if part.denominator is None else part.denominator.mean(axis=-1) > 0
    if defined.any():
        kept = ope.Contribution(part.numerator[defined],
                                None if part.denominator is None else part.denominator[defined], part.scale)
        values[defined] = ope.summarise({("estimator", "target"): kept}, m[defined])["estimator", "target"]["value"]
    return values


def compute(key, config: ArenaConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one (behaviour, catalogue, logger, exploration): the exact truth, then every estimator at
    every m on the first N sessions of each of the `replications` logs, for every N in `sessions`.
    The pilot log draws from fold_in(cell_key, 0), the logs from fold_in(cell_key, 1)."""
    n_items = cell["catalogue"]
    w = shared.worlds[n_items]
    scene = scenario(config, cell["behaviour"], w)
    candidates = feed.all_items(n_items)
    logger = feed.Policy(candidates, logging_ranker(cell["logger"], cell["exploration"], w.logger_scores),
                         config.feed_length)
    target = feed.Policy(candidates, feed.Sort(feed.from_table(w.target_scores)), config.feed_length)
    head = {"behaviour": cell["behaviour"], "catalogue": n_items, "logger": cell["logger"],
            "exploration": cell["exploration"]}
    truth = float(feed.online_value(None, scene, target).mean[0])
    rows = [{**head, "sessions": 0, "replication": -1, "estimator": "truth", "m": np.nan, "value": truth}]

    key = cell_key(key, cell)
    pilot = feed.simulate(jax.random.fold_in(key, 0), scene, logger, config.pilot_sessions)
    longest = max(config.sessions)
    log = feed.simulate(jax.random.fold_in(key, 1), scene, logger, config.replications * longest)
    on = ope.from_log(log, {"R0": logger, "T": target}, feed.position_model(scene.view),
                      reward_models={SIGNAL: _reward_model(pilot, n_items, config.prior_views)}, slates=True)
    data, targets = on.data[SIGNAL], {"T": on.targets[SIGNAL]["T"]}
    m = np.asarray(config.m, np.float64)
    parts = ope.contributions(data, targets, m, estimators=estimators(data, targets))
    for r in range(config.replications):
        for n in sorted(config.sessions):
            for (name, _), part in ope.restrict(parts, r * longest + np.arange(n)).items():
                rows += [{**head, "sessions": n, "replication": r, "estimator": name, "m": float(mv),
                          "value": float(value)} for mv, value in zip(m, estimate(part, m))]
    return rows

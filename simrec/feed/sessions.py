"""Feed sessions and their logs (Jeunen, Potapov & Ustimenko, KDD'24 §3–4).

A session draws a context x (a user, with probability activity[x]), a ranking of K items from a
policy, a scroll depth D from the view model, and for every reward signal s and rank i the
examination-hypothesis reward (KDD'24 Asm. 4, Eq. 4)

    C_{s,i} = V_i · Q_{s,i},   V_i = 1[i <= D],   Q_{s,i} ~ Bernoulli(q_s(x, a_i)),

independently across signals and ranks. Only viewed items are logged.

Scenario switches break the assumptions of KDD'24 on purpose:

* a `Cascade` view model: a click on its stop signal ends the session with probability p (Asm. 2);
* ``satiation`` β: the quality at rank i is ``q̃_s(i) = q_s(a_i) · prod_{j in J(i)} (1 - β q_s(a_j))``,
  so a reward depends on other items of the ranking (Asm. 3). ``satiated_by`` sets which:
  ``"above"``, J(i) = {j < i} (the items above: a cascade-like behaviour); ``"neighbours"``,
  J(i) = {i - 1, i + 1} ∩ viewed (the adjacent items the user sees); ``"slate"``, every other
  viewed rank (the whole slate the user sees; the *standard* behaviour of Kiyohara et al., KDD'23).
  The last two depend on how far the user scrolls, so they need a position-only view model (no
  `Cascade`). With ``satiated_contexts`` only the contexts marked there satiate and the others keep
  the position-based model, a user behaviour that depends on the context (Kiyohara et al., KDD'23);
  with ``satiated_by="context"`` each context satiates its own way (``context_satiated_by``), so a
  population can mix every behaviour above;
* ``fatigue`` φ: ``q̃_s(x, a) = q_s(x, a) · (1 - φ)^{n(x, a)}``, with n(x, a) the number of earlier
  sessions of user x in which a was viewed, a state carried across sessions (Asm. 1). Sessions
  are then simulated in rounds of ``round_size``; the state is updated between rounds, so two
  sessions of one user within a round see the same state;
* zero logging exposure where the target's is positive (Asm. 5) is a property of the logging
  policy (e.g. `FixedCandidates` that leave items out), detected by `simrec.ope`.

Sessions are simulated in large jitted, vmapped chunks; the same key and arguments give the
same log. On several devices the sessions of a chunk are split over them (`simrec.sharding`:
every draw is a function of the key and the session's index), and the log is bit-identical.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from simrec import sharding, validate
from simrec.feed.exposure import Exposure, exposure, exposure_of
from simrec.feed.policies import ItemFn, Policy, check_contexts, item_values, lookup, num_items, table_values
from simrec.feed.sampling import context_tables, random_words, sample_ranking, uniform_from_words
from simrec.feed.views import Cascade, ViewModel, depth_from_uniform

__all__ = ["Scenario", "SATIATED_BY", "Log", "simulate", "logging_exposure_table", "satiated_quality",
           "scenario_quality", "concatenate", "depth", "session_chunks"]


#: which viewed items satiate a rank (`Scenario.satiated_by`; "context": each context's own of these,
#: `Scenario.context_satiated_by`)
SATIATED_BY = ("above", "neighbours", "slate")


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["view", "quality", "activity", "satiated_contexts", "context_satiated_by"],
                   meta_fields=["signals", "satiation", "fatigue", "satiated_by"])
@dataclass(frozen=True)
class Scenario:
    """What the feed simulator needs to know about the world.

    view: view model (a `Cascade` switches on click-stops).
    quality: one `ItemFn` per reward signal, q_s(x, a) in [0, 1], all over the same catalogue.
    activity: f32[X], the context (user) distribution: non-negative, sums to 1.
    signals: static names of the reward signals, e.g. ("like", "watch").
    satiation: static β in [0, 1] (0 = off). fatigue: static φ in [0, 1] (0 = off).
    satiated_contexts: bool[X], the contexts that satiate (the others follow the position-based
    model), or None: every context does.
    satiated_by: static, which viewed items satiate rank i, one of `SATIATED_BY`: "above" (ranks
    j < i), "neighbours" (i ± 1) or "slate" (every other viewed rank; module docstring); or
    "context": each context's own, read from context_satiated_by.
    context_satiated_by: i32[X], each context's index into `SATIATED_BY` (with satiated_by="context"
    only).
    """
    view: ViewModel
    quality: tuple
    activity: jax.Array
    signals: tuple
    satiation: float = 0.0
    fatigue: float = 0.0
    satiated_contexts: jax.Array | None = None
    satiated_by: str = "above"
    context_satiated_by: jax.Array | None = None

    def __post_init__(self):
        if not isinstance(self.quality, tuple) or not self.quality or \
                not all(isinstance(q, ItemFn) for q in self.quality):
            raise ValueError("Scenario.quality must be a non-empty tuple of ItemFn, one per signal")
        if not isinstance(self.signals, tuple) or len(self.signals) != len(self.quality) or \
                len(set(self.signals)) != len(self.signals):
            raise ValueError(f"Scenario.signals must be {len(self.quality)} distinct names, one per "
                             f"quality function, got {self.signals!r}")
        if len({q.num_items for q in self.quality}) != 1:
            raise ValueError("every Scenario.quality function must cover the same catalogue")
        if validate.has_shape(self.activity):
            validate.matrix_shape("Scenario.activity", self.activity, (None,))
        for name, q in zip(self.signals, self.quality):
            table = table_values(q)
            if validate.is_concrete(table):
                validate.probabilities(f"Scenario.quality[{name!r}] table", table)
            if validate.has_shape(table) and validate.has_shape(self.activity):
                validate.table_rows(f"Scenario.quality[{name!r}] table", table, self.activity.shape[0],
                                    "contexts (entries of Scenario.activity)")
        if validate.is_concrete(self.activity):
            act = validate.finite_values("Scenario.activity", self.activity).astype(np.float64)
            if act.size == 0 or act.min() < 0 or abs(act.sum() - 1.0) > 1e-4:
                raise ValueError("Scenario.activity must be a non-negative vector f32[X] summing to 1")
        validate.probability("Scenario.satiation", self.satiation)
        validate.probability("Scenario.fatigue", self.fatigue)
        validate.choice("Scenario.satiated_by", self.satiated_by, SATIATED_BY + ("context",))
        if (self.satiated_by == "context") != (self.context_satiated_by is not None):
            raise ValueError("Scenario.context_satiated_by (each context's index into SATIATED_BY) goes with "
                             "satiated_by='context' and only with it: give both or neither")
        if self.context_satiated_by is not None and validate.has_shape(self.context_satiated_by):
            validate.matrix_shape("Scenario.context_satiated_by", self.context_satiated_by,
                                  (int(np.shape(self.activity)[0]),))
            if validate.is_concrete(self.context_satiated_by):
                kinds = np.asarray(self.context_satiated_by)
                if kinds.dtype.kind not in "iu" or kinds.min() < 0 or kinds.max() >= len(SATIATED_BY):
                    raise ValueError(f"Scenario.context_satiated_by must be an integer vector [X] of indices into "
                                     f"SATIATED_BY = {SATIATED_BY} (0..{len(SATIATED_BY) - 1}), got dtype "
                                     f"{kinds.dtype} with values {kinds.min()}..{kinds.max()}")
        if self.satiated_by != "above" and isinstance(self.view, Cascade):
            raise ValueError(f"Scenario.satiated_by = {self.satiated_by!r} makes a reward depend on how far the user "
                             f"scrolls, which a Cascade view model decides from the rewards: use satiated_by='above' "
                             f"with a Cascade, or a position-only view model")
        if self.satiated_contexts is not None and validate.has_shape(self.satiated_contexts):
            validate.matrix_shape("Scenario.satiated_contexts", self.satiated_contexts,
                                  (int(np.shape(self.activity)[0]),))
            if validate.is_concrete(self.satiated_contexts) and np.asarray(self.satiated_contexts).dtype != bool:
                raise ValueError("Scenario.satiated_contexts must be a bool vector [X] (True: the context "
                                 f"satiates), got dtype {np.asarray(self.satiated_contexts).dtype}")
        if isinstance(self.view, Cascade) and self.view.stop_signal >= len(self.signals):
            raise ValueError(f"Cascade.stop_signal = {self.view.stop_signal} but the scenario has "
                             f"only {len(self.signals)} signals")


def num_contexts(scenario: Scenario) -> int:
    return int(np.shape(scenario.activity)[0])


def check_policy(scenario: Scenario, policy: Policy) -> None:
    """Raise ValueError unless `policy` ranks the scenario's catalogue and its lookup tables have
    one row per context of the scenario (`simrec.feed.policies.check_contexts`)."""
    if num_items(policy) != scenario.quality[0].num_items:
        raise ValueError(f"the policy ranks {num_items(policy)} items but the scenario's quality "
                         f"covers {scenario.quality[0].num_items}")
    check_contexts(policy, num_contexts(scenario), "contexts of the scenario (entries of Scenario.activity)")


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["users", "items", "viewed", "rewards", "day", "logging_exposure"],
                   meta_fields=["signals"])
@dataclass(frozen=True)
class Log:
    """Logged sessions, padded to the feed length K with masks.

    users: i32[N], the context of each session. items: i32[N, K], shown items in rank order,
    -1 where not viewed. viewed: bool[N, K], ranks 1..D (a prefix). rewards: bool[S, N, K], C per
    signal (False where not viewed). day: i32[N]. logging_exposure: f32[N, K], ε₀(x, a) of each
    viewed item (0 where not viewed; read from the table given to `simulate`, or from
    `logging_exposure_table`, which also returns its Monte Carlo standard error when it is not
    exact). signals: static signal names.
    """
    users: jax.Array
    items: jax.Array
    viewed: jax.Array
    rewards: jax.Array
    day: jax.Array
    logging_exposure: jax.Array
    signals: tuple


def depth(log: Log) -> jax.Array:
    """Scroll depth D of each session (number of viewed ranks).  i32[N]."""
    return jnp.sum(log.viewed, axis=1, dtype=jnp.int32)


def concatenate(logs) -> Log:
    """One log holding the sessions of `logs` in order (e.g. several days)."""
    logs = list(logs)
    if not logs or len({log.signals for log in logs}) != 1:
        raise ValueError("concatenate needs at least one log, all with the same signals")
    return Log(*(jnp.concatenate([getattr(log, name) for log in logs], axis=1 if name == "rewards" else 0)
                 for name in ("users", "items", "viewed", "rewards", "day", "logging_exposure")),
               signals=logs[0].signals)


def satiated_quality(quality: jax.Array, satiation, satiated_by: str = "above", viewed=None) -> jax.Array:
    """``q̃_s(i) = q_s(i) · prod_{j in J(i)} (1 - β q_s(j))`` along the last (rank) axis, in log space,
    with J(i) the ranks above i (``satiated_by="above"``), the viewed neighbours i ± 1
    ("neighbours") or every other viewed rank ("slate"; module docstring).

    quality: f32[..., K]. viewed: bool[..., K] (broadcast against quality; a prefix of ranks), needed
    unless "above". Returns f32[..., K]."""
    log_keep = jnp.log1p(-satiation * quality)                  # -inf where β q = 1
    zero = jnp.zeros_like(log_keep[..., :1])

    def exclusive_above(terms):                                 # Σ_{j < i} terms_j
        return jnp.concatenate([zero, jnp.cumsum(terms, axis=-1)[..., :-1]], axis=-1)

    if satiated_by == "above":
        return quality * jnp.exp(exclusive_above(log_keep))
    if viewed is None:
        raise ValueError(f"satiated_quality: satiated_by={satiated_by!r} needs the viewed mask")
    seen = jnp.where(viewed, log_keep, 0.0)
    if satiated_by == "neighbours":
        others = jnp.concatenate([zero, seen[..., :-1]], axis=-1) + jnp.concatenate([seen[..., 1:], zero], axis=-1)
    elif satiated_by == "slate":
        below = jnp.cumsum(seen[..., ::-1], axis=-1)[..., ::-1]                          # Σ_{j >= i}
        others = exclusive_above(seen) + jnp.concatenate([below[..., 1:], zero], axis=-1)
    else:
        raise ValueError(f"satiated_by must be one of {SATIATED_BY}, got {satiated_by!r}")
    return quality * jnp.exp(others)


def scenario_quality(scenario: Scenario, contexts: jax.Array, quality: jax.Array, viewed=None) -> jax.Array:
    """The quality of ranked items after the scenario's satiation (`satiated_quality`), each context
    satiated its own way with ``satiated_by="context"``, and for the satiating contexts only when
    ``satiated_contexts`` marks them.  contexts: i32[B]; quality: f32[S, B, ..., K] (signal, session,
    ..., rank); viewed: bool broadcast against it, the viewed ranks (needed unless ``satiated_by`` is
    "above"). Returns quality's shape."""
    if scenario.satiation <= 0:
        return quality

    def per_context(values):                                   # f32|i32|bool[X] -> broadcast against quality
        return values[contexts].reshape((1, -1) + (1,) * (quality.ndim - 2))

    if scenario.satiated_by == "context":
        kind = per_context(scenario.context_satiated_by)
        satiated = quality
        for index, satiated_by in enumerate(SATIATED_BY):
            satiated = jnp.where(kind == index, satiated_quality(quality, scenario.satiation, satiated_by, viewed),
                                 satiated)
    else:
        satiated = satiated_quality(quality, scenario.satiation, scenario.satiated_by, viewed)
    if scenario.satiated_contexts is None:
        return satiated
    return jnp.where(per_context(scenario.satiated_contexts), satiated, quality)


def _round(key, scenario: Scenario, policy: Policy, tables, exposure_table, counts, size: int):
    """One round of `size` independent sessions; returns (arrays, updated fatigue counts).

    Uniforms come from 32-bit words (`random_words`): per session one for the user and one for
    the depth, and S·K for the rewards (plus K for the stops of a `Cascade`), drawn in the
    [signal, session, rank] layout of the rewards. The depth is drawn first, so that stochastic
    rankers sample only the viewed ranks (`sample_ranking` with depth).
    """
    k_session, k_clicks, k_rank = jax.random.split(key, 3)
    K, S = policy.feed_length, len(scenario.quality)
    cascade = isinstance(scenario.view, Cascade)
    uniform = sharding.batch(uniform_from_words(random_words(k_session, (2, size))), axis=1)
    chance = sharding.batch(uniform_from_words(random_words(k_clicks, (S + cascade, size, K))),
                            axis=1)                                                   # [S (+1), n, K]
    cdf = jnp.cumsum(scenario.activity)
    users = jnp.minimum(jnp.searchsorted(cdf, uniform[0] * cdf[-1], side="right"),
                        cdf.shape[0] - 1).astype(jnp.int32)
    depth_ = depth_from_uniform(uniform[1], scenario.view, K)
    shown = sample_ranking(k_rank, policy, users, tables, depth=depth_)
    items = jnp.maximum(shown, 0)                   # -1 (not sampled) only below the depth
    quality = scenario_quality(scenario, users, jnp.stack([item_values(q, users, items) for q in scenario.quality]),
                               jnp.arange(K)[None, None, :] < depth_[None, :, None])  # [S, n, K]
    if counts is not None:
        seen = lookup(counts, users[:, None], items)
        quality = quality * jnp.where(seen > 0, jnp.exp(seen * jnp.log1p(-scenario.fatigue)), 1.0)
    clicks = chance[:S] < quality
    if cascade:
        stops = clicks[scenario.view.stop_signal] & (chance[S] < scenario.view.stop_probability)
        stop_depth = jnp.where(jnp.any(stops, axis=1), jnp.argmax(stops, axis=1) + 1, K)
        depth_ = jnp.minimum(depth_, stop_depth).astype(jnp.int32)
    viewed = jnp.arange(K)[None, :] < depth_[:, None]
    if counts is not None:
        counts = counts.at[users[:, None], items].add(viewed.astype(counts.dtype))
    out = dict(users=users, items=jnp.where(viewed, shown, -1), viewed=viewed, rewards=clicks & viewed[None],
               logging_exposure=exposure_of(exposure_table, users, shown) * viewed)
    return out, counts


@functools.partial(jax.jit, static_argnames=("num_rounds", "round_size"))
def _chunk(key, scenario, policy, tables, exposure_table, counts, num_rounds: int, round_size: int):
    def step(carry, round_key):
        out, carry = _round(round_key, scenario, policy, tables, exposure_table, carry, round_size)
        return carry, out

    counts, outs = jax.lax.scan(step, counts, jax.random.split(key, num_rounds))
    rewards = jnp.moveaxis(outs.pop("rewards"), 0, 1)                               # [S, rounds, size, K]
    outs = jax.tree.map(lambda x: x.reshape(num_rounds * round_size, *x.shape[2:]), outs)
    outs["rewards"] = rewards.reshape(rewards.shape[0], num_rounds * round_size, -1)  # [S, n, K]
    return sharding.collect((outs, counts))


def session_chunks(key, scenario: Scenario, policy: Policy, num_sessions: int, exposure_table, *,
                   chunk_size: int | None = None, round_size: int = 1024):
    """Yield the sessions as dicts of arrays (the fields of `Log` but day; rewards [S, n, K]),
    chunk by chunk, so that callers can reduce them without holding the whole log.

    Chunks hold a power of two of sessions, at most `chunk_size` (default: about 2^22 shown items
    per chunk) and at most the next power of two above `num_sessions` (so few shapes compile);
    the last chunk is cut to give exactly `num_sessions`. exposure_table: f32[X, A], the ε₀ to
    record (values in [0, 1], `simrec.validate.exposures`). With fatigue, chunks are rounded up
    to a multiple of `round_size`. Arguments are checked when it is called, before the first chunk.
    """
    num_sessions = validate.integer("num_sessions", num_sessions, low=1)
    check_policy(scenario, policy)
    validate.exposures("exposure_table", exposure_table, (num_contexts(scenario), num_items(policy)))
    return _chunks(key, scenario, policy, num_sessions, exposure_table, chunk_size, round_size)


def _chunks(key, scenario: Scenario, policy: Policy, num_sessions: int, exposure_table, chunk_size, round_size):
    """`session_chunks` after its table and session checks (chunk_size and round_size are checked
    here, eagerly): a generator of the chunks."""
    K = policy.feed_length
    limit = validate.integer("chunk_size", chunk_size, low=1) if chunk_size is not None else max(1, 2**22 // K)
    size = min(1 << (limit.bit_length() - 1), 1 << (num_sessions - 1).bit_length())
    fatigue = scenario.fatigue > 0
    if fatigue:
        round_size = validate.integer("round_size", round_size, low=1)
        size = -(-size // round_size) * round_size
    rounds, per_round = (size // round_size, round_size) if fatigue else (1, size)

    def generate():
        tables = context_tables(policy, num_contexts(scenario))
        counts = jnp.zeros((num_contexts(scenario), num_items(policy)), jnp.float32) if fatigue else None
        for c, start in enumerate(range(0, num_sessions, size)):
            out, counts = _chunk(jax.random.fold_in(key, c), scenario, policy, tables, exposure_table,
                                 counts, rounds, per_round)
            take = min(size, num_sessions - start)
            if take < size:
                out = {name: (x[:, :take] if name == "rewards" else x[:take]) for name, x in out.items()}
            yield sharding.gather(out)
    return generate()


def logging_exposure_table(key: jax.Array, scenario: Scenario, policy: Policy, *, num_samples: int = 100) -> Exposure:
    """The logging exposure ε₀(x, a) that `simulate(key, scenario, policy, ...)` records when it
    is given no table: `exposure` of the policy under the scenario's view model for every context,
    keyed by the first half of split(key), with its standard error f32[X, A].

    Exact (standard error 0) for Sort and ε-greedy Sort rankers, and for Plackett–Luce rankers
    (plain or ε-greedy) on fixed or top-k candidates whenever `race_nodes` accepts them; otherwise
    (e.g. a RandomSubset generator with Plackett–Luce) the mean of `num_samples` PL-Rank samples,
    whose Monte Carlo standard error is returned alongside. Compute it once and pass its `.mean`
    as `simulate(..., logging_exposure=...)` for every day on which the policy and view model
    stay the same. Returns `Exposure` (mean and standard_error f32[X, A]).
    """
    check_policy(scenario, policy)
    return exposure(jax.random.split(key)[0], policy, scenario.view, np.arange(num_contexts(scenario)),
                    num_samples=num_samples)


def simulate(key: jax.Array, scenario: Scenario, policy: Policy, num_sessions: int, *, day: int = 0,
             logging_exposure=None, num_samples: int = 100, chunk_size: int | None = None,
             round_size: int = 1024) -> Log:
    """Simulate `num_sessions` sessions of `policy` in `scenario` and return their `Log`.

    logging_exposure: the policy's exposure table f32[X, A] under the scenario's view model, the
    ε₀ recorded for every viewed item: finite and in [0, 1] (`simrec.validate.exposures`; a
    scalar is not a table). When None it is computed here as
    `logging_exposure_table(key, scenario, policy, num_samples=num_samples).mean`: exact for
    Sort, ε-greedy and (on fixed or top-k candidates) Plackett–Luce loggers, else a Monte Carlo
    mean over `num_samples` samples whose standard error that function returns. The table
    depends only on the policy and the view model: for several days, compute it once with
    `logging_exposure_table` (or `exposure`) and pass it to every day's call, e.g.

        table = feed.logging_exposure_table(key, scenario, logger).mean
        logs = [feed.simulate(jax.random.fold_in(key, d), scenario, logger, n, day=d,
                              logging_exposure=table) for d in range(days)]

    day: stamped on every session. See `session_chunks` for chunk_size and round_size. Memory:
    O(num_sessions * K) for the log and O(X * A) for the exposure table.
    """
    k_sessions = jax.random.split(key)[1]
    check_policy(scenario, policy)
    if logging_exposure is None:
        logging_exposure = logging_exposure_table(key, scenario, policy, num_samples=num_samples).mean
    else:
        validate.exposures("logging_exposure", logging_exposure, (num_contexts(scenario), num_items(policy)))
    logging_exposure = jnp.asarray(logging_exposure, jnp.float32)
    num_sessions = validate.integer("num_sessions", num_sessions, low=1)
    chunks = list(_chunks(k_sessions, scenario, policy, num_sessions, logging_exposure, chunk_size, round_size))
    cat = {name: (jnp.concatenate([c[name] for c in chunks], axis=1 if name == "rewards" else 0)
                  if len(chunks) > 1 else chunks[0][name]) for name in chunks[0]}
    return Log(day=jnp.full(num_sessions, day, jnp.int32), signals=scenario.signals, **cat)

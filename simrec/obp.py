"""Interoperability with Open Bandit Pipeline (OBP; Saito, Aihara, Matsutani & Narita, NeurIPS'21
Datasets and Benchmarks): a `simrec.feed.Log` to and from OBP's ``bandit_feedback`` dictionary.

OBP's data sets hand their logs to its estimators as one dictionary of per-round arrays
(``OpenBanditDataset.obtain_batch_bandit_feedback``): ``n_rounds`` (int), ``n_actions`` (int),
``action`` (int[n_rounds]), ``position`` (the 0-based slot, int[n_rounds]), ``reward``
([n_rounds]), ``pscore`` (the logging policy's probability of the logged action, f[n_rounds]),
``context`` (f[n_rounds, d]) and ``action_context`` (f[n_actions, d']); its slate estimators
(``SlateIndependentIPS`` and kin) also take ``slate_id`` (which list a round belongs to) and
``pscore_item_position``; its synthetic data sets add ``expected_reward`` and ``pi_b``.

Rounds (`to_bandit_feedback`). One OBP round per *viewed* (session τ, rank k) entry of the log,
in the row-major order of ``log.viewed`` (session by session, rank by rank): ``action`` =
``items[τ, k]``, ``position`` = k (0-based rank), ``reward`` = ``rewards[signal, τ, k]`` (0/1),
``slate_id`` = τ. Ranks the user did not view are not rounds: simrec logs only viewed items.

Propensity. ``pscore`` is ``log.logging_exposure[τ, k]``, the logging exposure

    ε₀(x, a) = sum_i P(a at rank i | x, R₀) · P(V = 1 | rank i)     (Jeunen et al., KDD'24 Eq. 6),

the probability that item a is viewed in a session of context x (an item appears once per
feed), marginal over the ranks. OBP's Open Bandit Dataset ``pscore`` is per position instead,
P(a at slot k | x), every slot being shown. The two are the same number when a feed has one
always-viewed slot (K = 1, P(V | 1) = 1), which is how `from_bandit_feedback` reads data without
slates. Under the position-based model (C = V·Q, q independent of the rank; KDD'24 Asm. 1–5)
both make an unbiased inverse-propensity estimator: OBP's ``SlateIndependentIPS`` given
``pscore_item_position = pscore`` and ``evaluation_policy_pscore_item_position`` = the target's
exposure ε(x, a) of each round (`round_values` of `simrec.ope.logged_exposures`) returns

    sum_rounds c · ε / ε₀ / #slates  =  mean_τ DCG_τ                  (`simrec.ope.trajectory_dcg`, m = ∞)

exactly, when every session has a viewed rank (OBP divides by the number of distinct slate ids);
flooring ``pscore`` at 1/m reproduces simrec's clipping min(m, 1/ε₀). OBP's non-slate estimators
(``InverseProbabilityWeighting``) want an ``action_dist`` that sums to 1 over the actions at each
position, which exposures do not; there, use per-position probabilities.

What round-trips. Log -> dict -> Log gives back every field of the `Log` exactly (users, items,
viewed, rewards of every signal, day, logging_exposure, signals), also for sessions without a
view, through the extra keys below (OBP ignores keys it does not read). dict -> Log -> dict gives
back ``n_rounds``, ``n_actions``, ``action``, ``reward``, ``pscore`` (to float32 precision: a
`Log` stores float32 exposures), ``context`` and ``action_context`` (pass the returned
`contexts` table and the dict's ``action_context`` back), and ``position`` and ``slate_id`` when
the dict has slates numbered 0..N-1 and its rounds come slate by slate in position order (the
order `to_bandit_feedback` writes; other orders come back sorted that way, other slate ids
renumbered 0, 1, ...); without ``slate_id`` each round is a one-slot session and its ``position``
is not representable in a `Log` (read it from the dict: round r is session r).

Extra keys written by `to_bandit_feedback` (all optional for `from_bandit_feedback`):
``slate_id`` (i64[n_rounds]), ``len_list`` (K), ``pscore_item_position`` (= ``pscore``),
``rewards`` (i64[S, n_rounds], every signal), ``signals`` (their names), ``signal`` (the name in
``reward``), ``slate_user`` and ``slate_day`` (i64[N], the context and day of every session).

`open_bandit_feedback` builds the dictionary of an Open Bandit Dataset log read by
`simrec.data.load_open_bandit`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simrec import validate
from simrec.data import OpenBandit
from simrec.feed import Log

__all__ = ["REQUIRED_KEYS", "Contexts", "to_bandit_feedback", "from_bandit_feedback", "contexts",
           "round_values", "open_bandit_feedback"]

#: the keys every bandit_feedback dictionary must have (OBP's ``obtain_batch_bandit_feedback``)
REQUIRED_KEYS = ("n_rounds", "n_actions", "action", "position", "reward", "pscore")


class Contexts(NamedTuple):
    """Context ids of the rounds and the distinct context rows they index.

    ids: i32[n_rounds], the row of `table` that is each round's context; table: [X, d], the
    distinct rows of the dictionary's ``context`` in increasing (lexicographic) order, so that
    ``table[ids]`` equals ``context``."""
    ids: np.ndarray
    table: np.ndarray


# --------------------------------------------------------------------------------------------
# Log -> dictionary
# --------------------------------------------------------------------------------------------

def round_values(log: Log, values) -> np.ndarray:
    """The entries of a per-rank array at the rounds of `to_bandit_feedback`, in its order.

    values: [N, K] (e.g. ``simrec.ope.logged_exposures(log, target_table)``, the target's ε of
    every logged item). Returns values[log.viewed], shape [n_rounds]."""
    viewed = np.asarray(log.viewed)
    values = np.asarray(values)
    validate.matrix_shape("values", values, viewed.shape)
    return values[viewed]


def to_bandit_feedback(log: Log, *, signal: int | str = 0, n_actions: int | None = None,
                       context=None, action_context=None) -> dict:
    """OBP's ``bandit_feedback`` dictionary of a simrec log (rounds, pscore and extra keys: see
    the module docstring).

    signal: the reward signal in ``reward`` (index or name; all of them are in ``rewards``).
    n_actions: the catalogue size A (default: largest logged item + 1, OBP's convention).
    context: f[X, d], a feature row per context id, so ``context`` = context[x_τ]; default: the
    context id itself as one integer column (an id, not a feature). action_context: f[A, d'];
    default: one-hot item ids ``np.eye(A)``. Returns the dictionary (numpy arrays).
    """
    viewed = np.asarray(log.viewed)
    if viewed.ndim != 2 or viewed.dtype != np.bool_:
        raise ValueError(f"log.viewed must be a bool mask [N, K], got {viewed.dtype}{list(viewed.shape)}")
    n, k = viewed.shape
    signals = tuple(log.signals)
    if isinstance(signal, str):
        if signal not in signals:
            raise ValueError(f"unknown signal {signal!r}; the log has {signals}")
        signal = signals.index(signal)
    signal = validate.integer("signal", signal, low=0, high=len(signals) - 1)
    items = np.asarray(log.items)
    users = np.asarray(log.users).astype(np.int64)
    rewards = np.asarray(log.rewards)
    exposure = np.asarray(log.logging_exposure, np.float32)
    for name, array, shape in (("log.items", items, (n, k)), ("log.users", users, (n,)),
                               ("log.day", np.asarray(log.day), (n,)),
                               ("log.rewards", rewards, (len(signals), n, k)),
                               ("log.logging_exposure", exposure, (n, k))):
        validate.matrix_shape(name, array, shape)
    action = items[viewed].astype(np.int64)
    if action.size and action.min() < 0:
        raise ValueError("log.items holds -1 (not shown) on a viewed rank; a Log's items must be shown "
                         "wherever viewed is True")
    pscore = exposure[viewed]
    if np.any(~(pscore > 0) | (pscore > 1)):
        raise ValueError("log.logging_exposure must be in (0, 1] on every viewed rank: a pscore of 0 "
                         "cannot weight a logged round (recompute the exposures)")
    n_actions = int(action.max()) + 1 if n_actions is None and action.size else n_actions
    n_actions = validate.integer("n_actions", n_actions if n_actions is not None else 1, low=1)
    if action.size and action.max() >= n_actions:
        raise ValueError(f"log.items holds item {int(action.max())} but n_actions = {n_actions}")
    slate, position = np.nonzero(viewed)
    if context is None:
        context_rows = users[slate][:, None]
    else:
        context = np.asarray(context)
        if context.ndim != 2:
            raise ValueError(f"context must be a feature table [contexts, d], got shape {context.shape}")
        validate.indices("log.users", users, context.shape[0], "rows of context")
        context_rows = context[users[slate]]
    if action_context is None:
        action_context = np.eye(n_actions)
    else:
        action_context = np.asarray(action_context)
        validate.matrix_shape("action_context", action_context, (n_actions, None))
    all_rewards = rewards[:, viewed].astype(np.int64)
    return {
        "n_rounds": int(action.size), "n_actions": n_actions, "action": action,
        "position": position.astype(np.int64), "reward": all_rewards[signal], "pscore": pscore.astype(np.float64),
        "context": context_rows, "action_context": action_context,
        "slate_id": slate.astype(np.int64), "len_list": int(k), "pscore_item_position": pscore.astype(np.float64),
        "rewards": all_rewards, "signals": signals, "signal": signals[signal],
        "slate_user": users, "slate_day": np.asarray(log.day).astype(np.int64),
    }


# --------------------------------------------------------------------------------------------
# Dictionary -> Log
# --------------------------------------------------------------------------------------------

def _vector(d: dict, key: str, n: int, kinds: str, what: str) -> np.ndarray:
    """d[key] as a numpy vector of length n with dtype kind in `kinds`."""
    value = np.asarray(d[key])
    if value.ndim != 1 or value.shape[0] != n:
        raise ValueError(f"bandit_feedback[{key!r}] must be a vector of n_rounds = {n} {what}, got shape "
                         f"{value.shape}")
    if value.dtype.kind not in kinds:
        raise ValueError(f"bandit_feedback[{key!r}] must hold {what}, got dtype {value.dtype}")
    return value


def _integers(d: dict, key: str, n: int, low: int, high: int | None, what: str) -> np.ndarray:
    value = _vector(d, key, n, "iuf", what)
    bad = (value != np.round(value)) | (value < low) | ((value >= high) if high is not None else False)
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"bandit_feedback[{key!r}] must hold {what}, found {value[first].item()!r} at round {first}")
    return value.astype(np.int64)


def contexts(d: dict) -> Contexts:
    """The context id of every round: the index of its row among the distinct rows of
    ``d["context"]`` (a vector is one column; no ``context``: every round context 0)."""
    n = validate.integer("bandit_feedback['n_rounds']", d["n_rounds"], low=0)
    if d.get("context") is None:
        return Contexts(np.zeros(n, np.int32), np.zeros((1, 0)))
    context = np.asarray(d["context"])
    context = context[:, None] if context.ndim == 1 else context
    if context.ndim != 2 or context.shape[0] != n:
        raise ValueError(f"bandit_feedback['context'] must have one row per round, shape [{n}, d]; got "
                         f"{np.asarray(d['context']).shape}")
    if n == 0:
        return Contexts(np.zeros(0, np.int32), context[:0])
    table, ids = np.unique(context, axis=0, return_inverse=True)
    return Contexts(ids.reshape(-1).astype(np.int32), table)


def from_bandit_feedback(d: dict, *, signal_name: str = "reward") -> Log:
    """A simrec `Log` of an OBP ``bandit_feedback`` dictionary (module docstring).

    With ``slate_id``: one session per slate (sessions numbered by slate id; with ``slate_user``
    there are len(slate_user) of them, else one per distinct id, renumbered 0, 1, ... in
    increasing order), its rounds at their ``position`` as ranks, which must be 0..D-1 once each
    (a viewed prefix); the feed length K is ``len_list`` (default: the largest position + 1).
    Without ``slate_id``: round r is session r with one slot (K = 1); ``position`` is then not
    kept. Contexts: ``slate_user`` when given, else the round's context id (`contexts`), which must
    be the same on all rounds of a slate. Rewards: ``rewards`` [S, n_rounds] with ``signals`` when
    given, else ``reward`` as one signal named `signal_name`; rewards must be 0 or 1. Days:
    ``slate_day``, else 0. ``pscore`` (in (0, 1]) becomes the logging exposure.
    Raises ValueError naming the key and the fix on a malformed dictionary.
    """
    if not isinstance(d, dict):
        raise ValueError(f"bandit_feedback must be a dict (OBP's obtain_batch_bandit_feedback), got {type(d).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in d]
    if missing:
        raise ValueError(f"bandit_feedback lacks the key(s) {', '.join(missing)}; an OBP bandit_feedback has "
                         f"{', '.join(REQUIRED_KEYS)} (position may be None)")
    n = validate.integer("bandit_feedback['n_rounds']", d["n_rounds"], low=0)
    n_actions = validate.integer("bandit_feedback['n_actions']", d["n_actions"], low=1)
    action = _integers(d, "action", n, 0, n_actions, f"action ids in [0, n_actions = {n_actions})")
    pscore = _vector(d, "pscore", n, "f", "probabilities in (0, 1]").astype(np.float64)
    bad = ~((pscore > 0) & (pscore <= 1))
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"bandit_feedback['pscore'] must hold probabilities in (0, 1], found {pscore[first].item()!r} "
                         f"at round {first}")
    if d.get("rewards") is not None:
        rewards = np.asarray(d["rewards"])
        if rewards.ndim != 2 or rewards.shape[1] != n:
            raise ValueError(f"bandit_feedback['rewards'] must be [signals, n_rounds = {n}], got {rewards.shape}")
        names = d.get("signals")
        signals = tuple(str(name) for name in names) if names is not None else tuple(
            f"{signal_name}_{s}" for s in range(rewards.shape[0]))
        if len(signals) != rewards.shape[0] or len(set(signals)) != len(signals):
            raise ValueError(f"bandit_feedback['signals'] must name the {rewards.shape[0]} rows of rewards, "
                             f"distinct; got {signals!r}")
    else:
        rewards, signals = _vector(d, "reward", n, "biuf", "rewards 0 or 1")[None], (signal_name,)
    bad = (rewards != 0) & (rewards != 1)
    if np.any(bad):
        first = int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(f"bandit_feedback rewards must be 0 or 1 (clicks) to become a Log's rewards, found "
                         f"{rewards[:, first].tolist()} at round {first}; binarise them first")
    rewards = rewards.astype(bool)
    ids = contexts(d).ids
    if d.get("slate_id") is None:
        return Log(users=ids, items=action.astype(np.int32)[:, None], viewed=np.ones((n, 1), bool),
                   rewards=rewards[:, :, None], day=np.zeros(n, np.int32),
                   logging_exposure=pscore.astype(np.float32)[:, None], signals=signals)
    if d.get("position") is None:
        raise ValueError("bandit_feedback has slate_id but position is None; give each round its 0-based "
                         "position in its slate")
    position = _integers(d, "position", n, 0, None, "0-based positions")
    slate = _integers(d, "slate_id", n, 0, None, "slate ids >= 0")
    slate_user = d.get("slate_user")
    if slate_user is not None:
        slate_user = np.asarray(slate_user)
        if slate_user.ndim != 1 or slate_user.dtype.kind not in "iu":
            raise ValueError(f"bandit_feedback['slate_user'] must be a vector of integer context ids, got "
                             f"{slate_user.dtype}{list(slate_user.shape)}")
        n_sessions = slate_user.shape[0]
        validate.indices("bandit_feedback['slate_id']", slate, n_sessions,
                         "sessions (entries of slate_user)")
        session = slate
    else:
        distinct, session = np.unique(slate, return_inverse=True)
        session = session.reshape(-1)
        n_sessions = distinct.shape[0]
    k = int(d["len_list"]) if d.get("len_list") is not None else (int(position.max()) + 1 if n else 1)
    k = validate.integer("bandit_feedback['len_list']", k, low=1)
    if n and position.max() >= k:
        raise ValueError(f"bandit_feedback['position'] holds {int(position.max())} >= len_list = {k}")
    depth = np.bincount(session, minlength=n_sessions)
    taken = np.zeros((n_sessions, k), np.int64)
    np.add.at(taken, (session, position), 1)
    prefix = np.arange(k)[None, :] < depth[:, None]
    wrong = np.flatnonzero(np.any(taken != prefix, axis=1))
    if wrong.size:
        s = int(wrong[0])
        raise ValueError(f"slate {int(slate[session == s][0])} has rounds at positions "
                         f"{sorted(position[session == s].tolist())}; a Log holds a viewed prefix, so the "
                         f"positions of a slate must be 0..D-1 once each")
    if slate_user is None:
        users = np.zeros(n_sessions, np.int64)
        users[session] = ids
        if np.any(users[session] != ids):
            s = int(session[np.flatnonzero(users[session] != ids)[0]])
            raise ValueError(f"slate {int(slate[session == s][0])} has rounds with different contexts; a session "
                             f"has one context (pass slate_user, or give its rounds one context row)")
    else:
        users = slate_user
    day = np.asarray(d["slate_day"]) if d.get("slate_day") is not None else np.zeros(n_sessions, np.int64)
    validate.matrix_shape("bandit_feedback['slate_day']", day, (n_sessions,))
    items = np.full((n_sessions, k), -1, np.int32)
    items[session, position] = action
    exposure = np.zeros((n_sessions, k), np.float32)
    exposure[session, position] = pscore
    full_rewards = np.zeros((rewards.shape[0], n_sessions, k), bool)
    full_rewards[:, session, position] = rewards
    return Log(users=users.astype(np.int32), items=items, viewed=prefix, rewards=full_rewards,
               day=day.astype(np.int32), logging_exposure=exposure, signals=signals)


# --------------------------------------------------------------------------------------------
# Open Bandit Dataset
# --------------------------------------------------------------------------------------------

def _codes(values: np.ndarray) -> np.ndarray:
    """Integer codes of text categories, column by column (sorted categories -> 0, 1, ...)."""
    if values.shape[1] == 0:
        return np.zeros((values.shape[0], 0), np.int64)
    return np.stack([np.unique(column, return_inverse=True)[1].reshape(-1) for column in values.T], axis=1)


def _one_hot_drop_first(codes: np.ndarray) -> np.ndarray:
    """One-hot columns of every category but the first (sorted) one of each column.  f64[N, sum(C_j - 1)]."""
    blocks = [np.eye(int(column.max()) + 1)[column][:, 1:] for column in codes.T]
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((codes.shape[0], 0))


def open_bandit_feedback(log: OpenBandit) -> dict:
    """OBP's ``bandit_feedback`` of one Open Bandit Dataset log (`simrec.data.load_open_bandit`),
    with the meaning OBP's ``OpenBanditDataset`` gives its keys: one round per row (file order,
    i.e. by time), ``n_actions`` = the campaign's items, ``position`` 0-based, ``reward`` the click,
    ``pscore`` the logged propensity_score (P(item at that position), per position), ``context``
    the user features one-hot with each feature's first category dropped (f64[n_rounds, d]) and
    ``action_context`` the item features (text ones as integer codes, then the numeric ones).
    Extra: ``timestamp`` (i64 ns). No ``slate_id``: the sample does not keep a slate's rows
    together, so `from_bandit_feedback` makes every row a one-slot session.
    """
    n = int(log.item.shape[0])
    return {
        "n_rounds": n, "n_actions": log.n_items, "action": log.item.astype(np.int64),
        "position": log.position.astype(np.int64), "reward": log.click.astype(np.int64),
        "pscore": log.propensity.astype(np.float64),
        "context": _one_hot_drop_first(_codes(log.user_features)),
        "action_context": np.concatenate([_codes(log.item_categorical), log.item_numeric], axis=1),
        "timestamp": log.timestamp,
    }

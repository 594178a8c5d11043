"""Position bias from clicks: the examination curve θ_k = P(V=1 | rank k) when views are not logged.

`simrec.feed.fit_view_model` reads the curve off logged view masks; real logs rarely record
views, only the shown ranking and the clicks. Under the position-based model (PBM, KDD'24
Asm. 2 and 4) a click at rank k on item a in context x has probability

    P(C = 1 | x, a, k) = θ_k · γ(x, a),

so clicks confound examination θ with relevance γ. Three estimators separate them; each returns
the curve *relative to rank 1*, θ_k / θ_1 (the PBM identifies only this ratio from clicks: θ·c and
γ/c give the same click law). In simrec every view model has S(1) = P(D >= 1) = 1, so there the
relative curve is the absolute one, `view_probability(model, K)`.

* `randomisation_curve` — result randomisation, RandTop-n (Joachims, Swaminathan & Schnabel,
  WSDM'17 §5): sessions whose top n shown items are permuted uniformly. Each of the n items is
  then equally likely at every rank k <= n, so E[C_k] = θ_k · r̄ with the same mean relevance r̄
  at every rank, and  θ̂_k = CTR_k / CTR_1  (ratio of click rates over the randomised sessions),
  with a delta-method standard error. `randomised_top` builds such a policy from simrec parts.
* `regression_em` — regression-EM (Wang, Golbandi, Bendersky, Metzler & Najork, WSDM'18 §4):
  EM on the latent (E, R) of every impression, E ~ Bernoulli(θ_k), R ~ Bernoulli(γ), C = E·R;
  the M-step's relevance "regression" is a table, per (context, item) or per item (one-hot
  features, whose least-squares fit is the cell mean of the posterior relevance).
* `harvesting_curve` — intervention harvesting (Agarwal, Zaitsev, Wang, Li, Najork & Joachims,
  WSDM'19 §4–5): the same (context, item) pair shown at different ranks k, k' by different
  rankers is a natural swap intervention; per pair of ranks the propensity-weighted click counts
  ĉ_k^{k,k'} = Σ_{(x,a) ∈ S_{k,k'}} clicks(x,a,k) / shows(x,a,k) have expectation θ_k Σ_S γ(x,a),
  and their AllPairs extremum estimator fits θ to all pairs at once; the simple
  ratio estimator θ̂_k = ĉ_k^{1,k} / ĉ_1^{1,k} uses the pairs that include rank 1 only.

Inputs are click logs as real systems keep them: contexts i32[N], the shown rankings i32[N, K]
(ALL K shown items, viewed or not) and clicks bool[N, K]. A `simrec.feed.Log` keeps only the
viewed items (-1 below the scroll depth), so `click_log` restores the rankings of deterministic
logging policies (`sample_ranking` without a key gives exactly the ranking each session was
served) and checks them against the logged prefix; stochastic policies cannot be restored and
are refused. Rankings are 0-based rank indices in arrays, 1-based ranks in formulas.

Standard errors: the delta method for the ratio of click rates; a Poisson bootstrap over
sessions (each session weighted by an independent Poisson(1) count, seeded by fold_in(key, b);
Hanley & MacGibbon 2006) for EM and harvesting. `curve_view_model` turns an estimated curve into
a `Tabulated` view model (the `pbm` discount of the OPE estimators).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.sparse

from simrec import validate
from simrec.feed.policies import (EpsilonGreedy, FixedCandidates, Policy, Sort, from_table, is_deterministic,
                                  num_items, table_contexts)
from simrec.feed.sampling import context_tables, sample_ranking
from simrec.feed.views import Tabulated

__all__ = ["ClickLog", "CurveEstimate", "click_log", "randomised_top", "randomisation_curve", "regression_em",
           "harvesting_counts", "harvesting_curve", "curve_view_model"]


class ClickLog(NamedTuple):
    """What a click log records: contexts i32[N], the shown rankings i32[N, K] (every shown
    item, in rank order) and the clicks bool[N, K] of one signal. Views are not recorded."""
    contexts: np.ndarray
    rankings: np.ndarray
    clicks: np.ndarray


class CurveEstimate(NamedTuple):
    """An estimated examination curve relative to rank 1, θ̂_k / θ̂_1 for k = 1..K (f64[K], so
    curve[0] = 1), its standard error f64[K] (NaN where not computed), and NaN in both at ranks
    the data do not identify."""
    curve: np.ndarray
    standard_error: np.ndarray


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def _clicks(name: str, clicks) -> np.ndarray:
    arr = np.asarray(clicks)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0 or arr.dtype != np.bool_:
        raise ValueError(f"{name} must be a non-empty bool[N, K] array of clicks (sessions x ranks), got "
                         f"{arr.dtype}{list(arr.shape)}")
    return arr


def _check_log(contexts, rankings, clicks) -> ClickLog:
    """Validated arrays of a click log (`ClickLog`)."""
    clicks = _clicks("clicks", clicks)
    n, k = clicks.shape
    rankings = np.asarray(rankings)
    if rankings.shape != (n, k) or not np.issubdtype(rankings.dtype, np.integer):
        raise ValueError(f"rankings must be an integer array [N, K] = {[n, k]} of the shown items (every shown "
                         f"rank, not only the viewed ones), got {rankings.dtype}{list(rankings.shape)}")
    if rankings.min() < 0:
        raise ValueError("rankings holds a negative item id: pass every shown item, not a Log's items (-1 below "
                         "the scroll depth); `click_log` restores the rankings of deterministic policies")
    contexts = np.asarray(contexts)
    if contexts.shape != (n,) or not np.issubdtype(contexts.dtype, np.integer) or contexts.min() < 0:
        raise ValueError(f"contexts must be non-negative integers [N] = [{n}], got "
                         f"{contexts.dtype}{list(contexts.shape)}")
    return ClickLog(contexts.astype(np.int32), rankings.astype(np.int32), clicks)


def click_log(log, policy: Policy, signal: int | str = 0) -> ClickLog:
    """The click log of a simrec `Log` logged by a deterministic `policy`: its contexts, the full
    rankings the sessions were served (`sample_ranking(None, policy, log.users)`, checked against
    the logged viewed prefix) and the clicks of `signal` (an index or a name). Raises ValueError
    for a stochastic policy, whose rankings below the scroll depth were never drawn."""
    if not isinstance(policy, Policy) or not is_deterministic(policy):
        raise ValueError("click_log needs the deterministic policy that logged the sessions (a Sort ranker on "
                         "fixed or top-k candidates); a stochastic policy's unviewed ranks were never drawn")
    if isinstance(signal, str):
        if signal not in log.signals:
            raise ValueError(f"unknown signal {signal!r}; the log has {log.signals}")
        signal = log.signals.index(signal)
    signal = validate.integer("signal", signal, low=0, high=len(log.signals) - 1)
    users = np.asarray(log.users)
    covered = table_contexts(policy)
    tables = context_tables(policy, covered if covered is not None else int(users.max()) + 1)
    rankings = np.asarray(sample_ranking(None, policy, jnp.asarray(users, jnp.int32), tables))
    items, viewed = np.asarray(log.items), np.asarray(log.viewed)
    if rankings.shape != items.shape or np.any(np.where(viewed, rankings != items, False)):
        raise ValueError("the policy's rankings differ from the log's viewed items: pass the policy that logged it")
    return ClickLog(users.astype(np.int32), rankings.astype(np.int32), np.asarray(log.rewards[signal]))


def randomised_top(policy: Policy, num_contexts: int) -> Policy:
    """RandTop-K of a deterministic policy (Joachims et al., WSDM'17 §5): each context's K shown
    items (`sample_ranking` of `policy`), shown in a uniformly random order. Built from simrec
    parts: `FixedCandidates` of the K items per context and `EpsilonGreedy` with epsilon = 1, so
    the feed length, the view model and the exact exposure (Σ_i S(i) / K for each shown item)
    are those of any simrec policy. An `EpsilonGreedy(Sort)` policy is randomised around its Sort.
    """
    if isinstance(policy, Policy) and isinstance(policy.ranker, EpsilonGreedy) and isinstance(policy.ranker.base, Sort):
        policy = Policy(policy.generator, policy.ranker.base, policy.feed_length)
    if not isinstance(policy, Policy) or not is_deterministic(policy):
        raise ValueError("randomised_top needs a deterministic policy (Sort, or EpsilonGreedy around a Sort, on "
                         "fixed or top-k candidates) whose top K it permutes")
    n = validate.integer("num_contexts", num_contexts, low=1)
    shown = sample_ranking(None, policy, jnp.arange(n, dtype=jnp.int32))
    uniform = Sort(from_table(np.zeros((n, num_items(policy)), np.float32)))   # the order epsilon = 1 ignores
    return Policy(FixedCandidates(shown, num_items(policy)), EpsilonGreedy(uniform, jnp.float32(1.0)),
                  policy.feed_length)


def _poisson_weights(key, num_sessions: int, num_bootstrap: int) -> np.ndarray:
    """Poisson(1) session weights f64[B, N], replicate b from fold_in(key, b)."""
    return np.stack([np.asarray(jax.random.poisson(jax.random.fold_in(key, b), 1.0, (num_sessions,)), np.float64)
                     for b in range(num_bootstrap)])


def _bootstrap_args(key, num_bootstrap):
    num_bootstrap = validate.integer("num_bootstrap", num_bootstrap, low=0)
    if num_bootstrap == 1:
        raise ValueError("num_bootstrap must be 0 (no standard error) or >= 2")
    if num_bootstrap and key is None:
        raise ValueError("a bootstrap standard error needs a PRNG key (or pass num_bootstrap=0)")
    return num_bootstrap


# --------------------------------------------------------------------------------------------
# (i) Result randomisation
# --------------------------------------------------------------------------------------------

def randomisation_curve(clicks) -> CurveEstimate:
    """Relative examination from sessions whose top n shown items were permuted uniformly
    (RandTop-n; Joachims, Swaminathan & Schnabel, WSDM'17 §5):

        θ̂_k / θ̂_1 = CTR_k / CTR_1,   CTR_k = (1/N) Σ_n C_{n,k},

    consistent because E[C_{n,k}] = θ_k · r̄ at every rank k <= n. Standard error by the delta
    method for a ratio of means over the same sessions: se_k = sd_n(C_{n,k} − ρ_k C_{n,1}) /
    (√N · CTR_1), ρ_k the estimate (the within-session correlation of the ranks is kept).

    clicks: bool[N, n], the clicks of the randomised ranks of N randomised sessions (rank 1 first).
    Raises ValueError without any click at rank 1.
    """
    clicks = _clicks("clicks", clicks)
    n = clicks.shape[0]
    if n < 2:
        raise ValueError("clicks must hold at least 2 randomised sessions for a standard error")
    count = clicks.sum(axis=0, dtype=np.int64).astype(np.float64)                  # Σ_n C_{n,k}
    if count[0] == 0:
        raise ValueError("no click at rank 1 in the randomised sessions: the ratio CTR_k / CTR_1 is undefined; "
                         "randomise more sessions")
    both = (clicks & clicks[:, :1]).sum(axis=0, dtype=np.int64).astype(np.float64)   # Σ_n C_{n,k} C_{n,1}
    curve = count / count[0]
    # Σ_n (C_k − ρ C_1)² from the counts (C² = C for binary clicks), then the sample variance
    squares = count - 2 * curve * both + curve ** 2 * count[0]
    variance = np.maximum(squares - n * (count - curve * count[0]) ** 2 / n ** 2, 0.0) / (n - 1)
    se = np.sqrt(variance) / (np.sqrt(n) * count[0] / n)
    return CurveEstimate(curve, se)


# --------------------------------------------------------------------------------------------
# Cell statistics: (pair, rank) -> shown, clicked
# --------------------------------------------------------------------------------------------

class _Cells(NamedTuple):
    """Impressions aggregated per (pair, rank) cell. pair i64[C] (dense 0..P-1), rank i64[C],
    and the maps from sessions: group i64[N] (distinct (context, ranking) rows), cell_of_group
    i64[G, K]; shown and clicked come from `_cell_counts`."""
    pair: np.ndarray
    rank: np.ndarray
    num_pairs: int
    group: np.ndarray
    cell_of_group: np.ndarray


def _row_groups(contexts: np.ndarray, rankings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group i64[N], first i64[G]): sessions with the same (context, ranking) row share a group;
    first[g] is a session of group g. Rows are hashed column by column (a polynomial hash mod
    2^64, O(N) memory per column), and every row is then compared with its group's first row, so
    a hash collision raises instead of merging different rankings."""
    h = contexts.astype(np.uint64)
    prime = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for column in rankings.T:
            h = h * prime + column.astype(np.uint64) + np.uint64(1)
    _, first, group = np.unique(h, return_index=True, return_inverse=True)
    group = group.ravel()
    for start in range(0, len(group), 1 << 16):
        rows = slice(start, start + (1 << 16))
        same = first[group[rows]]
        if np.any(rankings[rows] != rankings[same]) or np.any(contexts[rows] != contexts[same]):
            raise RuntimeError("hash collision while grouping sessions by ranking; please report it")
    return group, first


def _cells(log: ClickLog, per_item: bool = False) -> _Cells:
    """Group sessions by their (context, ranking) row, then their impressions by (pair, rank),
    pair = (context, item) or, with per_item, the item alone."""
    k = log.rankings.shape[1]
    group, first = _row_groups(log.contexts, log.rankings)
    contexts, rankings = log.contexts[first].astype(np.int64), log.rankings[first].astype(np.int64)  # [G], [G, K]
    ordered = np.sort(rankings, axis=1)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        raise ValueError("rankings must show distinct items within each session")
    width = int(rankings.max()) + 1
    pair_key = rankings if per_item else contexts[:, None] * width + rankings              # [G, K]
    pairs, pair = np.unique(pair_key.ravel(), return_inverse=True)
    cell_key = pair.ravel() * k + np.tile(np.arange(k), len(first))
    cells, cell_of = np.unique(cell_key, return_inverse=True)
    return _Cells(cells // k, cells % k, len(pairs), group, cell_of.reshape(len(first), k))


def _cell_counts(cells: _Cells, clicks: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(shown, clicked) f64[C] per cell, sessions weighted by `weights` f64[N] (None: 1)."""
    num_groups, k = cells.cell_of_group.shape
    size = len(cells.pair)
    per_group = np.bincount(cells.group, weights, minlength=num_groups)                   # [G]
    shown = np.bincount(cells.cell_of_group.ravel(), np.repeat(per_group, k), minlength=size)
    session, rank = np.nonzero(clicks)
    w = None if weights is None else weights[session]
    clicked = np.bincount(cells.cell_of_group[cells.group[session], rank], w, minlength=size)
    return shown, clicked


# --------------------------------------------------------------------------------------------
# (ii) Regression-EM
# --------------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("num_pairs", "num_ranks", "iterations"))
def _em(pair, rank, shown, clicked, num_pairs: int, num_ranks: int, iterations: int):
    """`iterations` EM steps of the PBM on cell counts; returns θ f32[K] (unnormalised)."""
    def step(_, state):
        theta, gamma = state
        t, g = theta[rank], gamma[pair]
        missed = shown - clicked
        denominator = jnp.maximum(1.0 - t * g, 1e-12)
        examined = clicked + missed * t * (1.0 - g) / denominator       # E[#(E = 1) | counts]
        relevant = clicked + missed * (1.0 - t) * g / denominator       # E[#(R = 1) | counts]
        shown_rank = jax.ops.segment_sum(shown, rank, num_ranks)
        shown_pair = jax.ops.segment_sum(shown, pair, num_pairs)
        theta = jax.ops.segment_sum(examined, rank, num_ranks) / jnp.maximum(shown_rank, 1e-12)
        gamma = jax.ops.segment_sum(relevant, pair, num_pairs) / jnp.maximum(shown_pair, 1e-12)
        return jnp.clip(theta, 0.0, 1.0), jnp.clip(gamma, 0.0, 1.0)

    init = (jnp.full(num_ranks, 0.5, jnp.float32), jnp.full(num_pairs, 0.5, jnp.float32))
    theta, _ = jax.lax.fori_loop(0, iterations, step, init)
    return theta


def regression_em(key, contexts, rankings, clicks, *, relevance: str = "context_item", iterations: int = 500,
                  num_bootstrap: int = 0) -> CurveEstimate:
    """Regression-EM (Wang, Golbandi, Bendersky, Metzler & Najork, WSDM'18 §4) under the PBM
    P(C = 1 | x, a, k) = θ_k γ(x, a). Per impression, the E-step:

        P(E = 1, R = 0 | C = 0) = θ_k (1 − γ) / (1 − θ_k γ),
        P(E = 0, R = 1 | C = 0) = (1 − θ_k) γ / (1 − θ_k γ),

    (a click means E = R = 1); M-step: θ_k = mean posterior P(E = 1) over the impressions at rank
    k, and the relevance regression fitted on the posterior P(R = 1) with one-hot features of
    the (context, item) pair (relevance="context_item") or of the item ("item"), i.e. a table of
    cell means. Starts from θ = γ = 1/2 and runs `iterations` steps (fixed, so the result is
    deterministic); returns θ / θ_1. γ must be identified, so the same pair must appear at
    several ranks (several rankers, randomised sessions or, per item, different contexts).

    key: PRNG key of the Poisson bootstrap over sessions (None with num_bootstrap = 0, which gives
    NaN standard errors). contexts i32[N], rankings i32[N, K] (all shown items), clicks bool[N, K].
    """
    relevance = validate.choice("relevance", relevance, ("context_item", "item"))
    iterations = validate.integer("iterations", iterations, low=1)
    num_bootstrap = _bootstrap_args(key, num_bootstrap)
    log = _check_log(contexts, rankings, clicks)
    cells = _cells(log, per_item=relevance == "item")
    k = log.clicks.shape[1]

    size = 1 << (len(cells.pair) - 1).bit_length()            # padded to a power of two: few compilations
    pad = size - len(cells.pair)

    def fit(weights):
        shown, clicked = (np.pad(x, (0, pad)) for x in _cell_counts(cells, log.clicks, weights))  # empty cells
        theta = np.asarray(_em(jnp.asarray(np.pad(cells.pair, (0, pad)), jnp.int32),
                               jnp.asarray(np.pad(cells.rank, (0, pad)), jnp.int32),
                               jnp.asarray(shown, jnp.float32), jnp.asarray(clicked, jnp.float32),
                               1 << (cells.num_pairs - 1).bit_length(), k, iterations), np.float64)
        if theta[0] <= 0:
            raise ValueError("regression-EM found no examination at rank 1 (no clicks there): log more sessions")
        return theta / theta[0]

    curve = fit(None)
    return CurveEstimate(curve, _bootstrap_se(key, fit, log.clicks.shape[0], num_bootstrap, k))


def _bootstrap_se(key, fit, num_sessions: int, num_bootstrap: int, k: int) -> np.ndarray:
    """Standard deviation over Poisson-bootstrap refits (NaN without a bootstrap)."""
    if not num_bootstrap:
        return np.full(k, np.nan)
    replicates = np.stack([fit(w) for w in _poisson_weights(key, num_sessions, num_bootstrap)])
    return np.std(replicates, axis=0, ddof=1)


# --------------------------------------------------------------------------------------------
# (iii) Intervention harvesting
# --------------------------------------------------------------------------------------------

def _harvest(cells: _Cells, clicks, weights, k: int):
    shown, clicked = _cell_counts(cells, clicks, weights)
    seen = shown > 0
    pair, rank = cells.pair[seen], cells.rank[seen]
    shape = (cells.num_pairs, k)
    at = scipy.sparse.csr_matrix((np.ones(pair.size), (pair, rank)), shape=shape)      # pair seen at rank k
    rates = scipy.sparse.csr_matrix((clicked[seen] / shown[seen], (pair, rank)), shape=shape)
    clicked_kk = np.asarray((rates.T @ at).todense())                                  # ĉ_k^{k,k'}
    count = np.asarray((at.T @ at).todense())                                          # |S_{k,k'}|
    np.fill_diagonal(clicked_kk, 0.0)
    np.fill_diagonal(count, 0.0)
    return clicked_kk, count - clicked_kk


def harvesting_counts(contexts, rankings, clicks, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Intervention-harvesting counts (Agarwal et al., WSDM'19 §4): for ranks k ≠ k',

        ĉ_k^{k,k'} = Σ_{(x,a) ∈ S_{k,k'}} clicks(x, a, k) / shows(x, a, k),
        ň_k^{k,k'} = Σ_{(x,a) ∈ S_{k,k'}} (1 − clicks(x, a, k) / shows(x, a, k)),

    S_{k,k'} the (context, item) pairs shown at both ranks k and k' in the log (by different
    rankers or sessions). shows(x, a, k) = Σ_i n_i(x) 1[rank_i(x, a) = k] is their weight w, so
    E[ĉ_k^{k,k'}] = θ_k Σ_{S_{k,k'}} γ(x, a) given the contexts. Returns (ĉ, ň), each f64[K, K]
    (zero diagonal); weights f64[N]: optional session weights (the bootstrap's)."""
    log = _check_log(contexts, rankings, clicks)
    if weights is not None:
        weights = validate.finite_values("weights", weights).astype(np.float64)
        if weights.shape != log.contexts.shape or weights.min() < 0:
            raise ValueError(f"weights must be non-negative session weights [N] = [{log.contexts.shape[0]}]")
    return _harvest(_cells(log), log.clicks, weights, log.clicks.shape[1])


def _all_pairs_loss(params, clicked, missed):
    """Negative AllPairs log-likelihood per harvested pair (`_all_pairs`), θ_1 = 1.
    params: f32[K - 1 + K (K - 1) / 2], log θ_2..log θ_K, then the logits of r over the upper
    triangle (log θ is unbounded, so no sigmoid saturates; θ r is capped below 1)."""
    k = clicked.shape[0]
    upper = np.triu_indices(k, 1)
    log_theta = jnp.concatenate([jnp.zeros(1), params[:k - 1]])
    b = jnp.zeros((k, k)).at[upper].set(params[k - 1:])
    log_p = log_theta[:, None] + jax.nn.log_sigmoid(b + b.T)                           # log θ_k r_kk'
    log_q = jnp.log1p(-jnp.minimum(jnp.exp(log_p), 1 - 1e-6))
    return -jnp.sum(clicked * log_p + missed * log_q) / jnp.maximum(jnp.sum(clicked + missed), 1.0)


@functools.partial(jax.jit, static_argnames=("iterations",))
def _all_pairs_fit(x0, clicked, missed, iterations: int, tolerance: float = 1e-6):
    """L-BFGS (optax, zoom line search) on `_all_pairs_loss` until the gradient norm falls
    below `tolerance` or after `iterations` steps (deterministic)."""
    loss = functools.partial(_all_pairs_loss, clicked=clicked, missed=missed)
    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def step(carry):
        params, state, i = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return optax.apply_updates(params, updates), state, i + 1

    def going(carry):
        _, state, i = carry
        grad = optax.tree_utils.tree_get(state, "grad")
        return (i == 0) | ((i < iterations) & (optax.tree_utils.tree_norm(grad) >= tolerance))

    params, _, _ = jax.lax.while_loop(going, step, (x0, solver.init(x0), 0))
    return params


def _all_pairs(clicked: np.ndarray, missed: np.ndarray, iterations: int = 2000) -> np.ndarray:
    """AllPairs (Agarwal et al., WSDM'19 §5): maximise

        Σ_{k ≠ k'} ĉ_k^{k,k'} log(θ_k r_{k,k'}) + ň_k^{k,k'} log(1 − θ_k r_{k,k'})

    over θ_k = exp(α_k), θ_1 = 1, and symmetric r_{k,k'} = sigmoid(β_{k,k'}) (L-BFGS,
    `_all_pairs_fit`; start θ = 1/2 and r = the pair's pooled click rate). Returns θ
    f64[K], NaN at ranks without any harvested pair."""
    k = clicked.shape[0]
    total = clicked + missed
    upper = np.triu_indices(k, 1)
    rate = np.where(total > 0, clicked / np.maximum(total, 1e-12), 0.0)
    start = np.clip(np.where(total + total.T > 0, (rate + rate.T) / 2, 0.1), 1e-3, 1 - 1e-3)[upper]
    x0 = jnp.asarray(np.concatenate([np.full(k - 1, np.log(0.5)), np.log(start / (1 - start))]), jnp.float32)
    params = _all_pairs_fit(x0, jnp.asarray(clicked, jnp.float32), jnp.asarray(missed, jnp.float32), iterations)
    theta = np.concatenate([[1.0], np.exp(np.asarray(params[:k - 1], np.float64))])
    return np.where(total.sum(axis=1) > 0, theta, np.nan)


def _ratio(clicked: np.ndarray) -> np.ndarray:
    """The simple estimator θ_k / θ_1 = ĉ_k^{1,k} / ĉ_1^{1,k} (NaN where S_{1,k} has no click)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(clicked[0, 1:] > 0, clicked[1:, 0] / clicked[0, 1:], np.nan)
    return np.concatenate([[1.0], theta])


def harvesting_curve(key, contexts, rankings, clicks, *, method: str = "all_pairs",
                     num_bootstrap: int = 0) -> CurveEstimate:
    """Relative examination by intervention harvesting (Agarwal et al., WSDM'19) from the
    pooled logs of several rankers: `harvesting_counts`, then AllPairs (method="all_pairs",
    `_all_pairs`) or the ratio to rank 1 (method="ratio", θ_k / θ_1 =
    ĉ_k^{1,k} / ĉ_1^{1,k}). NaN at ranks the harvested pairs do not reach. Standard error:
    Poisson bootstrap over sessions seeded by fold_in(key, b) (num_bootstrap = 0: NaN).

    contexts i32[N], rankings i32[N, K] (all shown items), clicks bool[N, K].
    """
    method = validate.choice("method", method, ("all_pairs", "ratio"))
    num_bootstrap = _bootstrap_args(key, num_bootstrap)
    log = _check_log(contexts, rankings, clicks)
    cells = _cells(log)
    k = log.clicks.shape[1]
    if k < 2:
        raise ValueError("harvesting needs at least 2 ranks")

    def fit(weights):
        clicked, missed = _harvest(cells, log.clicks, weights, k)
        return _all_pairs(clicked, missed) if method == "all_pairs" else _ratio(clicked)

    curve = fit(None)
    if np.all(np.isnan(curve[1:])):
        raise ValueError("no (context, item) pair was shown at two different ranks: harvesting needs the logs "
                         "of several rankers that place the same items at different ranks")
    return CurveEstimate(curve, _bootstrap_se(key, fit, log.clicks.shape[0], num_bootstrap, k))


# --------------------------------------------------------------------------------------------
# From a curve to a view model
# --------------------------------------------------------------------------------------------

def _non_increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares projection onto non-increasing sequences (pool adjacent violators)."""
    blocks = []                                                       # [value, weight, length]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.concatenate([np.full(n, v) for v, _, n in blocks])


def curve_view_model(curve, standard_error=None, *, floor: float = 1e-6) -> Tabulated:
    """A `Tabulated` view model from an estimated relative curve θ̂ f[K]: rank 1 set to 1,
    projected onto non-increasing sequences in [floor, 1] (pool adjacent violators, weighted by
    1/se² when `standard_error` f[K] is given and positive, else equally). Ranks with NaN (not
    identified) take the value of the rank above them. floor > 0 keeps every exposure positive.
    """
    curve = np.array(curve, np.float64)
    if curve.ndim != 1 or curve.size == 0 or np.isnan(curve[0]):
        raise ValueError("curve must be a non-empty vector f[K] with a value at rank 1")
    floor = validate.finite("floor", floor, low=0.0, high=1.0, low_open=True)
    if np.any(np.isinf(curve)):
        raise ValueError("curve must be finite (NaN marks ranks that are not identified)")
    curve[0] = 1.0
    for i in range(1, curve.size):                                    # unidentified: carry the rank above
        if np.isnan(curve[i]):
            curve[i] = curve[i - 1]
    weights = np.ones_like(curve)
    if standard_error is not None:
        se = np.asarray(standard_error, np.float64)
        if se.shape != curve.shape:
            raise ValueError(f"standard_error must have the curve's shape {curve.shape}, got {se.shape}")
        usable = np.isfinite(se) & (se > 0)
        if usable[1:].all():
            weights = np.concatenate([[1e12], 1.0 / se[1:] ** 2])
    fitted = _non_increasing(np.clip(curve, floor, 1.0), weights)
    fitted[0] = 1.0
    return Tabulated(jnp.asarray(np.clip(np.minimum.accumulate(fitted), floor, 1.0), jnp.float32))

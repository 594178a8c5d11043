"""Slate estimators: importance weights on the logged ranking itself, not on item exposures.

DCG as clipped IPS (`simrec.ope.dcg`) reweights each viewed item by the ratio of its exposures,
which is unbiased when the reward at a rank depends on the item there alone (the position-based
model, KDD'24 Asm. 2–3). The estimators here reweight by the ratio of prefix probabilities
w_τ,k = π(s_1:k | x_τ) / π₀(s_1:k | x_τ) of the logged ranking s (`simrec.feed.prefix_log_probability`,
given as log-probabilities), with c_τ,k the label at rank k (0 where not viewed) and D_τ the depth
of the logged prefix:

* RIPS (reward-interaction / cascade IPS; McInerney et al., KDD'20; Kiyohara et al., WSDM'22):

      RIPS_τ(m) = Σ_{k viewed} c_τ,k · min(m, w_τ,k),

  unbiased at m = ∞ when the view of rank k and its reward depend on the items at ranks 1..k only
  (position bias, click-stops, satiation by the items above: the feed's `Cascade` and ``satiation``);
* SN-RIPS, RIPS self-normalised rank by rank (Swaminathan & Joachims, NeurIPS'15; the self-normalised
  baseline of Kiyohara et al., KDD'23):

      SN-RIPS(m) = Σ_k [ Σ_τ c_τ,k · min(m, w_τ,k) ] / [ Σ_τ min(m, w_τ,min(k,D_τ)) ],

  with D_τ the depth of the logged prefix (w_τ,min(k,D_τ) is the prefixes' column k: a feed logs
  the viewed prefix, and the columns past it carry its value). At m = ∞ each rank's normaliser
  has mean 1 under RIPS's assumption: the prefix weights form a martingale under π₀ and the depth,
  decided by what the user saw down to there, is a stopping time of it. A ratio of means, it is
  consistent with a bias of order 1/N, and its weights are bounded by the number of trajectories;
* SIPS on the logged trajectory (standard IPS on slates; Swaminathan et al., NeurIPS'17; Kiyohara
  et al., KDD'23):

      SIPS_τ(m) = min(m, w_τ,D_τ) · Σ_k c_τ,k,

  with w_τ,D_τ the weight of the whole logged ranking (the prefixes' last column: a feed logs the
  viewed prefix), the likelihood ratio of everything the user saw; unbiased at m = ∞ whenever the session up to
  its last viewed rank depends on the items shown up to there only, at the price of the variance
  of the whole prefix's weight.

* Cascade-DR (Kiyohara et al., WSDM'22, Eq. 6) with a reward model q̂(x, a) of the label of a
  viewed item, q̂_τ,k = q̂(x_τ, s_k) at the logged item and its mean under the target after the
  logged prefix, q̄_τ,k = Σ_a π(a | x_τ, s_1:k-1) q̂(x_τ, a) (`simrec.feed.next_item_mean`):

      CDR_τ(m) = Σ_{k viewed} [ min(m, w_τ,k) (c_τ,k − q̂_τ,k) + min(m, w_τ,k-1) q̄_τ,k ],   w_τ,0 = 1,

  unbiased at m = ∞ for any q̂ under RIPS's assumption: given what happened above rank k, the
  logged s_k is π₀'s draw after s_1:k-1, so the first term corrects the second's model to the
  target's expected label at k. Its Q-function is q̂ of rank k alone; the paper's recursive Q̂_k
  adds the target's expected later rewards, which telescope only when every logged rank is viewed
  (no position-based skips). A q̂ close to the truth shrinks the variance below RIPS's.

* AIPS with a context-dependent behaviour (adaptive IPS; Kiyohara et al., KDD'23 Eq. 5) for two
  behaviours, known per context: where the reward at rank k depends on the item there alone
  (position-based, AIPS's action set Φ_k = {k}) the item's exposure ratio, DCG's weight; where it
  depends on the items above (cascade, Φ_k = {1..k}) the prefix weight, RIPS's:

      AIPS_τ(m) = DCG_τ(m) if τ is position-based,  RIPS_τ(m) if τ is a cascade session,

  unbiased at m = ∞ when each session follows its context's behaviour. The position-based
  sessions get weights of one item instead of a whole prefix, which usually lowers the variance
  below RIPS's on every session (Kiyohara et al., KDD'23 §4 prove it for the position-wise
  marginal; DCG's exposure ratio marginalises over the ranks as well). It equals DCG when no
  session cascades and RIPS when all do. When the behaviours are unknown, `choose_cascade_sessions`
  picks one per context from the log: DCG and RIPS estimate the same value where the context is
  position-based, so the position-based behaviour is kept where their paired difference on that
  context's sessions is within z standard errors of 0, and cascade is chosen where it is not
  (a Lepski-type rule per context; Kiyohara et al., KDD'23 §5 choose by an estimated MSE over a
  tree of context features instead). Cross-fitting: the sessions of fold f get the choice made on
  the other folds, so no session's choice depends on its own reward.

All need the logger to give every prefix the target can show a positive probability. The
weights are computed in float32 from the log-probabilities; a weight beyond float32's range at
m = ∞ is an error (use a finite m).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simrec.ope.dcg import clip_values, trajectory_dcg

__all__ = ["trajectory_rips", "rank_rips", "rank_normalisers", "trajectory_sips", "trajectory_cascade_dr",
           "trajectory_aips", "choose_cascade_sessions", "prefix_weights", "ranking_weight"]


def _checked(rewards, viewed, logging_prefix, target_prefix):
    """The four [N, K] arrays after the shape, dtype and value checks (module docstring)."""
    arrays = dict(rewards=rewards, viewed=viewed, logging_prefix=logging_prefix, target_prefix=target_prefix)
    shapes = {name: tuple(np.shape(a)) for name, a in arrays.items()}
    if len(set(shapes.values())) != 1 or len(shapes["viewed"]) != 2 or shapes["viewed"][1] == 0:
        raise ValueError(f"rewards, viewed, logging_prefix and target_prefix must share one shape [N, K] "
                         f"with K >= 1; got {shapes}")
    viewed = np.asarray(viewed)
    if viewed.dtype != np.bool_:
        raise ValueError(f"viewed must be a bool mask, got dtype {viewed.dtype}")
    rewards = np.asarray(rewards, np.float32)
    logging_prefix = np.asarray(logging_prefix, np.float32)
    target_prefix = np.asarray(target_prefix, np.float32)
    if not np.all(np.isfinite(rewards)):
        raise ValueError("rewards must be finite (no NaN or inf); replace or drop those trajectories")
    for name, prefix in (("logging_prefix", logging_prefix), ("target_prefix", target_prefix)):
        if np.any(np.isnan(prefix)) or np.any(prefix > 1e-4):
            raise ValueError(f"{name} must be log-probabilities (<= 0, -inf for an impossible prefix), e.g. "
                             f"simrec.feed.prefix_log_probability of the log's items")
    if np.any(viewed & ~np.isfinite(logging_prefix)):
        raise ValueError("a logged prefix has logging probability 0: logging_prefix is not the logger's "
                         "(compute it with simrec.feed.prefix_log_probability(logger, log.users, log.items))")
    return jnp.asarray(rewards), jnp.asarray(viewed), jnp.asarray(logging_prefix), jnp.asarray(target_prefix)


@jax.jit
def _weights(viewed, logging_prefix, target_prefix):
    return jnp.where(viewed, jnp.exp(target_prefix - jnp.where(viewed, logging_prefix, 0.0)), 0.0)


def prefix_weights(viewed, logging_prefix, target_prefix) -> jax.Array:
    """w_τ,k = π(s_1:k | x_τ) / π₀(s_1:k | x_τ) at the viewed ranks, 0 elsewhere.  f32[N, K].

    viewed: bool[N, K]; logging_prefix, target_prefix: f32[N, K] log-probabilities of the logged
    prefixes under the logger and the target (`simrec.feed.prefix_log_probability`)."""
    _, viewed, logging_prefix, target_prefix = _checked(np.zeros(np.shape(viewed), np.float32), viewed,
                                                        logging_prefix, target_prefix)
    return _weights(viewed, logging_prefix, target_prefix)


@jax.jit
def _rips(rewards, viewed, logging_prefix, target_prefix, m):
    """RIPS_τ(m) for every m.  f32[M, N]; the rank loop keeps each pass a contiguous [M, N] update."""
    weights = _weights(viewed, logging_prefix, target_prefix).T                     # [K, N]
    gain = jnp.where(viewed, rewards, 0.0).T

    def add_rank(k, total):
        term = gain[k][None, :] * jnp.minimum(m[:, None], weights[k][None, :])
        return total + jnp.where(gain[k][None, :] != 0, term, 0.0)                  # 0 · inf counts 0

    return jax.lax.fori_loop(0, gain.shape[0], add_rank, jnp.zeros((m.shape[0], gain.shape[1])))


@jax.jit
def _rank_rips(rewards, viewed, logging_prefix, target_prefix, m):
    """c_τ,k · min(m, w_τ,k) per rank for every m.  f32[M, K, N]."""
    weights = _weights(viewed, logging_prefix, target_prefix).T[None]               # [1, K, N]
    gain = jnp.where(viewed, rewards, 0.0).T[None]
    return jnp.where(gain != 0, gain * jnp.minimum(m[:, None, None], weights), 0.0)  # 0 · inf counts 0


@jax.jit
def _rank_normalisers(logging_prefix, target_prefix, m):
    """min(m, w_τ,min(k,D_τ)) for every m.  f32[M, K, N]."""
    return jnp.minimum(m[:, None, None], jnp.exp(target_prefix - logging_prefix).T[None])


def rank_rips(rewards, viewed, logging_prefix, target_prefix, m=np.inf) -> jax.Array:
    """RIPS's terms rank by rank, c_τ,k · min(m, w_τ,k) (0 where not viewed): SN-RIPS's numerators
    (module docstring); their sum over k is `trajectory_rips`. Arguments as `trajectory_rips`.
    Returns f32[K, N], or f32[M, K, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    values = _finite(_rank_rips(*_checked(rewards, viewed, logging_prefix, target_prefix), m_vec), "SN-RIPS")
    return values[0] if scalar else values


def rank_normalisers(viewed, logging_prefix, target_prefix, m=np.inf) -> jax.Array:
    """min(m, π(s_1:min(k,D) | x) / π₀(s_1:min(k,D) | x)) of every trajectory and rank: the weight of
    the logged prefix down to rank k, or of the whole logged prefix where it is shorter (SN-RIPS's
    denominators, mean 1 at m = ∞ under RIPS's assumption; module docstring). Arguments as
    `trajectory_rips`. Returns f32[K, N], or f32[M, K, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    _, _, logging_prefix, target_prefix = _checked(np.zeros(np.shape(viewed), np.float32), viewed,
                                                   logging_prefix, target_prefix)
    values = _finite(_rank_normalisers(logging_prefix, target_prefix, m_vec), "SN-RIPS normaliser")
    return values[0] if scalar else values


@jax.jit
def _ranking_weight(logging_prefix, target_prefix, m):
    """min(m, w_τ,D_τ) of the whole logged ranking (the prefixes' last column) for every m.  f32[M, N]."""
    return jnp.minimum(m[:, None], jnp.exp(target_prefix[:, -1] - logging_prefix[:, -1])[None, :])


@jax.jit
def _sips(rewards, viewed, logging_prefix, target_prefix, m):
    """SIPS_τ(m) for every m.  f32[M, N]."""
    total = jnp.sum(jnp.where(viewed, rewards, 0.0), axis=1)[None, :]
    return jnp.where(total != 0, total * _ranking_weight(logging_prefix, target_prefix, m), 0.0)


def _finite(values, name: str):
    if not bool(jnp.all(jnp.isfinite(values))):
        raise ValueError(f"{name}: an importance weight exceeds float32's range at m = inf (the target shows a "
                         f"prefix the logger almost never does); use a finite clipping value m")
    return values


def trajectory_rips(rewards, viewed, logging_prefix, target_prefix, m=np.inf) -> jax.Array:
    """Per-trajectory RIPS (module docstring):  RIPS_τ(m) = Σ_{k viewed} c_τ,k · min(m, w_τ,k).

    rewards: f32[N, K] (or bool) labels c. viewed: bool[N, K]. logging_prefix, target_prefix:
    f32[N, K] log π₀(s_1:k | x), log π(s_1:k | x) of the logged prefixes
    (`simrec.feed.prefix_log_probability`). m: a number >= 1 (inf = unclipped) or a vector
    f32[M]. Returns f32[N], or f32[M, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    values = _finite(_rips(*_checked(rewards, viewed, logging_prefix, target_prefix), m_vec), "RIPS")
    return values[0] if scalar else values


def ranking_weight(viewed, logging_prefix, target_prefix, m=np.inf) -> jax.Array:
    """min(m, π(s_1:D | x) / π₀(s_1:D | x)): the clipped weight of each whole logged ranking (SIPS's
    weight; the denominator of self-normalised SIPS). Arguments as `trajectory_rips`.  f32[N] or
    f32[M, N]."""
    m_vec, scalar = clip_values(m)
    _, _, logging_prefix, target_prefix = _checked(np.zeros(np.shape(viewed), np.float32), viewed,
                                                   logging_prefix, target_prefix)
    values = _finite(_ranking_weight(logging_prefix, target_prefix, m_vec), "SIPS weight")
    return values[0] if scalar else values


def trajectory_sips(rewards, viewed, logging_prefix, target_prefix, m=np.inf) -> jax.Array:
    """Per-trajectory SIPS of the logged trajectory (module docstring):
    SIPS_τ(m) = min(m, π(s_1:D | x) / π₀(s_1:D | x)) · Σ_k c_τ,k, the weight of the whole logged
    ranking s_1:D read from the prefixes' last column (`simrec.feed.prefix_log_probability` carries
    the logged prefix's value there; 0 = log 1 for an empty one). Arguments and returns as
    `trajectory_rips`."""
    m_vec, scalar = clip_values(m)
    values = _finite(_sips(*_checked(rewards, viewed, logging_prefix, target_prefix), m_vec), "SIPS")
    return values[0] if scalar else values


@jax.jit
def _cascade_dr(rewards, viewed, logging_prefix, target_prefix, predicted, baseline, m):
    """CDR_τ(m) for every m.  f32[M, N]."""
    weights = _weights(viewed, logging_prefix, target_prefix)                       # w_τ,k at viewed ranks
    before = jnp.concatenate([jnp.ones_like(weights[:, :1]), jnp.exp(target_prefix - logging_prefix)[:, :-1]],
                             axis=1)                                                 # w_τ,k-1; w_τ,0 = 1
    before = jnp.where(viewed, before, 0.0).T                                       # [K, N]
    weights, residual = weights.T, jnp.where(viewed, rewards - predicted, 0.0).T
    baseline = jnp.where(viewed, baseline, 0.0).T

    def add_rank(k, total):
        correction = jnp.where(residual[k] != 0, residual[k] * jnp.minimum(m[:, None], weights[k]), 0.0)
        return total + correction + jnp.where(baseline[k] != 0, baseline[k] * jnp.minimum(m[:, None], before[k]), 0.0)

    return jax.lax.fori_loop(0, weights.shape[0], add_rank, jnp.zeros((m.shape[0], weights.shape[1])))


def trajectory_cascade_dr(rewards, viewed, logging_prefix, target_prefix, predicted, baseline,
                          m=np.inf) -> jax.Array:
    """Per-trajectory Cascade-DR (module docstring):
    CDR_τ(m) = Σ_{k viewed} [ min(m, w_τ,k) (c_τ,k − q̂_τ,k) + min(m, w_τ,k-1) q̄_τ,k ].

    predicted: f32[N, K] q̂ of the logged items (a reward model of the label of a viewed item);
    baseline: f32[N, K] its mean q̄ under the target at each rank after the logged prefix
    (`simrec.feed.next_item_mean(target, contexts, items, q̂)`). Other arguments and returns as
    `trajectory_rips`."""
    m_vec, scalar = clip_values(m)
    arrays = _checked(rewards, viewed, logging_prefix, target_prefix)
    models = []
    for name, model in (("predicted", predicted), ("baseline", baseline)):
        if np.shape(model) != np.shape(viewed):
            raise ValueError(f"{name} must have the rewards' shape [N, K] = {list(np.shape(viewed))}, "
                             f"got {list(np.shape(model))}")
        model = np.asarray(model, np.float32)
        if not np.all(np.isfinite(model)):
            raise ValueError(f"{name} must be finite (no NaN or inf): a reward model's predictions")
        models.append(jnp.asarray(model))
    values = _finite(_cascade_dr(*arrays, *models, m_vec), "Cascade-DR")
    return values[0] if scalar else values


def trajectory_aips(rewards, viewed, logging_exposure, target_exposure, logging_prefix, target_prefix,
                    cascade_sessions, m=np.inf) -> jax.Array:
    """Per-trajectory AIPS with the behaviour known per session (module docstring):
    AIPS_τ(m) = RIPS_τ(m) where cascade_sessions[τ], else DCG_τ(m).

    logging_exposure, target_exposure: f32[N, K] ε₀, ε of the logged items (`trajectory_dcg`);
    cascade_sessions: bool[N], whether the session's context follows the cascade behaviour (its
    reward at rank k depends on the items at ranks 1..k) rather than the position-based one.
    Other arguments and returns as `trajectory_rips`."""
    cascade_sessions = _checked_cascade_sessions(cascade_sessions, np.shape(viewed)[0])
    independent = trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m)
    cascade = trajectory_rips(rewards, viewed, logging_prefix, target_prefix, m)
    return jnp.where(jnp.asarray(cascade_sessions), cascade, independent)


def _checked_cascade_sessions(cascade_sessions, num_trajectories: int) -> np.ndarray:
    """``cascade_sessions`` as bool[N] (AIPS's behaviour per trajectory), or ValueError naming it."""
    cascade_sessions = np.asarray(cascade_sessions)
    if cascade_sessions.shape != (num_trajectories,) or cascade_sessions.dtype != np.bool_:
        raise ValueError(f"cascade_sessions must be a bool vector with one entry per trajectory "
                         f"[N] = [{num_trajectories}], got {cascade_sessions.dtype} {list(cascade_sessions.shape)}")
    return cascade_sessions


def choose_cascade_sessions(contexts, independent, cascade, *, z: float = 2.0, folds: int = 2) -> np.ndarray:
    """AIPS's behaviour per session, chosen from the log (module docstring): True (cascade) unless
    the paired difference d_τ = independent_τ − cascade_τ on the other folds' sessions of the same
    context has |mean d| <= z · SE(mean d) (position-based: the two agree); cascade, the choice that
    is unbiased under both behaviours, for a context with fewer than two such sessions.

    contexts: int[N] each session's context; independent, cascade: f[N] per-trajectory DCG_τ and
    RIPS_τ at m = ∞ (`trajectory_dcg`, `trajectory_rips`); sessions are in fold τ mod `folds`.
    Returns bool[N] (`trajectory_aips`'s cascade_sessions)."""
    contexts = np.asarray(contexts)
    difference = np.asarray(independent, np.float64) - np.asarray(cascade, np.float64)
    if contexts.ndim != 1 or not np.issubdtype(contexts.dtype, np.integer) or contexts.size == 0 \
            or contexts.min() < 0 or difference.shape != contexts.shape:
        raise ValueError(f"contexts must be non-negative integers [N] and independent, cascade the per-trajectory "
                         f"estimates [N]; got shapes {list(contexts.shape)}, {list(np.shape(independent))}, "
                         f"{list(np.shape(cascade))}")
    if not np.all(np.isfinite(difference)):
        raise ValueError("independent and cascade must be finite (DCG_τ and RIPS_τ at m = inf)")
    if not (isinstance(folds, int) and folds >= 2) or not (np.isfinite(z) and z >= 0):
        raise ValueError(f"folds must be an integer >= 2 and z a finite number >= 0, got {folds!r}, {z!r}")
    size = int(contexts.max()) + 1
    fold = np.arange(contexts.size) % folds
    chosen = np.ones(contexts.size, bool)
    for f in range(folds):
        rest = fold != f
        count = np.bincount(contexts[rest], minlength=size).astype(np.float64)
        total = np.bincount(contexts[rest], difference[rest], minlength=size)
        squares = np.bincount(contexts[rest], difference[rest] ** 2, minlength=size)
        enough = count >= 2
        mean = np.divide(total, count, out=np.zeros(size), where=count > 0)
        variance = np.divide(squares - count * mean ** 2, count - 1, out=np.zeros(size), where=enough)
        se = np.sqrt(np.maximum(variance, 0.0) / np.maximum(count, 1.0))
        position_based = enough & (np.abs(mean) <= z * se)
        chosen[fold == f] = ~position_based[contexts[fold == f]]
    return chosen

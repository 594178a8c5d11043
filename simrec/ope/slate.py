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

* AIPS with a context-dependent behaviour (adaptive IPS; Kiyohara et al., KDD'23 Eq. 5), known per
  session among `AIPS_BEHAVIOURS`, each with the action set Φ_k that the reward at rank k may
  depend on and its weight: ``independent`` (Φ_k = {k}: the item's exposure ratio, DCG's weight),
  ``cascade`` (the items above, {1..k}: the prefix weight w_τ,k, RIPS's), ``neighbours`` (the
  adjacent items k ± 1, covered by the prefix {1..k+1}: w_τ,min(k+1,D_τ)) and ``standard`` (the
  whole viewed slate: w_τ,D_τ, SIPS's):

      AIPS_τ(m) = Σ_{k viewed} c_τ,k · min(m, w_τ(Φ_k(b_τ))),

  i.e. DCG_τ, RIPS_τ, RIPS_τ with lookahead 1 (`trajectory_rips`) or SIPS_τ for a session of
  behaviour b_τ; unbiased at m = ∞ when each session follows its behaviour. A weight over fewer
  items usually has a smaller variance (Kiyohara et al., KDD'23 §4 prove it for the position-wise
  marginal; DCG's exposure ratio marginalises over the ranks as well). Under the neighbours
  behaviour the exact action set {k-1, k, k+1} would need the marginal probability of three ranks,
  which a Plackett–Luce logger has in closed form only by summing over the ranks above; the prefix
  {1..k+1} contains it, so the estimator stays unbiased at a higher variance. AIPS is DCG when every
  session is independent, RIPS when all cascade and SIPS when all are standard. When the behaviours
  are unknown, `choose_behaviours` picks one per context from the log: each behaviour's estimator is
  unbiased under it and under every behaviour listed before it, so the first behaviour whose
  estimate agrees, on that context's sessions, with every later one (paired difference within z
  standard errors of 0) is chosen (a Lepski-type rule per context; Kiyohara et al., KDD'23 §5 choose
  by an estimated MSE over a tree of context features instead). Cross-fitting: the sessions of
  fold f get the choice made on the other folds, so no session's choice depends on its own reward.

* IPS over action sets on factorised slates, whose slots are drawn independently given the
  context, π(a | x) = Π_k π_k(a_k | x) (the synthetic slates of Open Bandit Pipeline and of both
  Kiyohara et al. papers, items drawn per slot with replacement), with ρ_τ,j = π_j(a_τ,j | x_τ) /
  π₀_j(a_τ,j | x_τ) the ratio of slot j and Φ_τ(k) the slots the reward at slot k may depend on:

      IPS_Φ,τ(m) = Σ_k c_τ,k · min(m, Π_{j ∈ Φ_τ(k)} ρ_τ,j),

  the exact marginal ratio of the actions at Φ_τ(k), since the slots are independent; unbiased at
  m = ∞ when the reward at each slot depends on the context and the actions at Φ_τ(k) only. Φ(k) =
  {k} is independent IPS (IIPS; Li et al. WSDM'18), {1..k} RIPS, every slot SIPS, and a Φ_τ per
  trajectory AIPS with any behaviour (Kiyohara et al., KDD'23 Eq. 5; `slot_action_sets` gives the
  four of `AIPS_BEHAVIOURS`, neighbours here the exact {k−1, k, k+1}). When the sets are unknown,
  `choose_action_sets` picks one per slot from the log among candidates ordered so that the last
  covers every other (and is unbiased): the one whose estimated MSE, a bias² estimated against
  the last, b̂² = max(0, d̄² − Var̂(d)/N) with d_τ the paired difference of the slot's terms, plus
  its variance Var̂/N, is smallest (SLOPE-like; the root of Kiyohara et al., KDD'23 §5's tree, whose
  bias term comes from simulated logs and the true value, here from the log alone).

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
           "trajectory_aips", "aips_parts", "AIPS_BEHAVIOURS", "choose_behaviours", "prefix_weights",
           "ranking_weight", "trajectory_factorised_ips", "slot_action_sets", "factorised_ips_terms",
           "choose_action_sets"]

#: AIPS's user behaviours, from the narrowest action set to the widest (module docstring); a
#: session's behaviour is its index here
AIPS_BEHAVIOURS = ("independent", "cascade", "neighbours", "standard")


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


def _looking_ahead(prefix, lookahead: int):
    """The prefixes' columns moved ``lookahead`` ranks on: column k holds log π(s_1:min(k+1+L, D)),
    the logged prefix's value where it is shorter.  f32[N, K]."""
    if lookahead == 0:
        return prefix
    columns = np.minimum(np.arange(prefix.shape[1]) + lookahead, prefix.shape[1] - 1)
    return prefix[:, columns]


def trajectory_rips(rewards, viewed, logging_prefix, target_prefix, m=np.inf, *, lookahead: int = 0) -> jax.Array:
    """Per-trajectory RIPS (module docstring):  RIPS_τ(m) = Σ_{k viewed} c_τ,k · min(m, w_τ,k).

    rewards: f32[N, K] (or bool) labels c. viewed: bool[N, K]. logging_prefix, target_prefix:
    f32[N, K] log π₀(s_1:k | x), log π(s_1:k | x) of the logged prefixes
    (`simrec.feed.prefix_log_probability`). m: a number >= 1 (inf = unclipped) or a vector
    f32[M]. lookahead L >= 0: weigh rank k by the prefix down to rank k + L instead,
    w_τ,min(k+L,D_τ), unbiased when the reward at rank k depends on the items down to k + L (AIPS's
    neighbours behaviour at L = 1; L >= K − 1 gives SIPS). Returns f32[N], or f32[M, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    if not (isinstance(lookahead, (int, np.integer)) and lookahead >= 0):
        raise ValueError(f"lookahead must be an integer >= 0 (ranks below k whose items the reward at k may "
                         f"depend on), got {lookahead!r}")
    rewards, viewed, logging_prefix, target_prefix = _checked(rewards, viewed, logging_prefix, target_prefix)
    values = _finite(_rips(rewards, viewed, _looking_ahead(logging_prefix, int(lookahead)),
                           _looking_ahead(target_prefix, int(lookahead)), m_vec), "RIPS")
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


def aips_parts(rewards, viewed, logging_exposure, target_exposure, logging_prefix, target_prefix,
               m=np.inf) -> jax.Array:
    """AIPS_τ(m) under each behaviour of `AIPS_BEHAVIOURS`, in its order (module docstring): DCG_τ(m),
    RIPS_τ(m), RIPS_τ(m) with lookahead 1, and SIPS_τ(m) as RIPS with lookahead K − 1 (the whole
    viewed slate). Arguments as `trajectory_aips`. Returns f32[B, N], or f32[B, M, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    lookaheads = (0, 1, max(np.shape(viewed)[1] - 1, 0))                 # cascade, neighbours, standard
    values = jnp.stack([trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m_vec)]
                       + [trajectory_rips(rewards, viewed, logging_prefix, target_prefix, m_vec, lookahead=lookahead)
                          for lookahead in lookaheads])                                       # [B, M, N]
    return values[:, 0] if scalar else values


def trajectory_aips(rewards, viewed, logging_exposure, target_exposure, logging_prefix, target_prefix,
                    behaviours, m=np.inf) -> jax.Array:
    """Per-trajectory AIPS with the behaviour known per session (module docstring):
    AIPS_τ(m) = DCG_τ(m), RIPS_τ(m), RIPS_τ(m) with lookahead 1 or SIPS_τ(m) for a session whose
    behaviour is independent, cascade, neighbours or standard (`aips_parts`).

    logging_exposure, target_exposure: f32[N, K] ε₀, ε of the logged items (`trajectory_dcg`);
    behaviours: int[N], each session's behaviour as an index of `AIPS_BEHAVIOURS`. Other arguments
    and returns as `trajectory_rips`."""
    behaviours = checked_behaviours(behaviours, np.shape(viewed)[0])
    m_vec, scalar = clip_values(m)
    values = aips_parts(rewards, viewed, logging_exposure, target_exposure, logging_prefix, target_prefix, m_vec)
    chosen = jnp.take_along_axis(values, jnp.asarray(behaviours)[None, None, :], axis=0)[0]
    return chosen[0] if scalar else chosen


def slot_action_sets(behaviour: str, num_slots: int) -> np.ndarray:
    """Φ(k) of a behaviour of `AIPS_BEHAVIOURS` on a factorised slate of ``num_slots`` slots: entry
    [k, j] is True when the reward at slot k may depend on the action at slot j. independent: j = k;
    cascade: j <= k; neighbours: |j − k| <= 1; standard: every j.  bool[K, K]."""
    if behaviour not in AIPS_BEHAVIOURS:
        raise ValueError(f"behaviour must be one of {AIPS_BEHAVIOURS}, got {behaviour!r}")
    if not (isinstance(num_slots, (int, np.integer)) and num_slots >= 1):
        raise ValueError(f"num_slots must be an integer >= 1, got {num_slots!r}")
    slot, other = np.meshgrid(np.arange(num_slots), np.arange(num_slots), indexing="ij")
    return {"independent": other == slot, "cascade": other <= slot, "neighbours": np.abs(other - slot) <= 1,
            "standard": np.ones((num_slots, num_slots), bool)}[behaviour]


@jax.jit
def _factorised_terms(rewards, log_ratios, action_sets, m):
    """c_τ,k · min(m, w_Φ,τ,k) for every m.  f32[M, N, K]. A slot outside Φ(k) adds 0 even where the
    target never picks its action (log-ratio −∞: a product with the mask would be NaN)."""
    weights = jnp.exp(jnp.sum(jnp.where(action_sets, log_ratios[:, None, :], 0.0), axis=2))    # [N, K]
    return jnp.where(rewards[None] != 0, rewards[None] * jnp.minimum(m[:, None, None], weights[None]), 0.0)


def trajectory_factorised_ips(rewards, logging_slot, target_slot, action_sets, m=np.inf) -> jax.Array:
    """Per-trajectory IPS over action sets on a factorised slate (module docstring):
    IPS_Φ,τ(m) = Σ_k c_τ,k · min(m, Π_{j ∈ Φ_τ(k)} π_j(a_τ,j | x_τ) / π₀_j(a_τ,j | x_τ)).

    rewards: f32[N, K], the reward of every slot (all observed). logging_slot, target_slot: f32[N, K]
    log π₀_k(a_τ,k | x_τ), log π_k(a_τ,k | x_τ) of each logged slot's action. action_sets: bool[K, K]
    shared or bool[N, K, K] per trajectory, [τ, k, j] True when slot j is in Φ_τ(k)
    (`slot_action_sets`). m as `trajectory_rips`. Returns f32[N], or f32[M, N] for a vector m."""
    m_vec, scalar = clip_values(m)
    values = jnp.sum(factorised_ips_terms(rewards, logging_slot, target_slot, action_sets, m_vec), axis=-1)
    return values[0] if scalar else values


def factorised_ips_terms(rewards, logging_slot, target_slot, action_sets, m=np.inf) -> jax.Array:
    """`trajectory_factorised_ips`'s terms slot by slot, c_τ,k · min(m, Π_{j ∈ Φ_τ(k)} ρ_τ,j) (their sum
    over k is the estimate). Arguments as `trajectory_factorised_ips`. Returns f32[N, K], or
    f32[M, N, K] for a vector m."""
    m_vec, scalar = clip_values(m)
    shape = np.shape(rewards)
    if len(shape) != 2 or shape[1] == 0 or np.shape(logging_slot) != shape or np.shape(target_slot) != shape:
        raise ValueError(f"rewards, logging_slot and target_slot must share one shape [N, K] with K >= 1; got "
                         f"{list(shape)}, {list(np.shape(logging_slot))}, {list(np.shape(target_slot))}")
    action_sets = np.asarray(action_sets)
    if action_sets.dtype != np.bool_ or action_sets.shape not in ((shape[1],) * 2, (shape[0],) + (shape[1],) * 2):
        raise ValueError(f"action_sets must be a bool mask [K, K] or [N, K, K] with [N, K] = {list(shape)}, got "
                         f"{action_sets.dtype} {list(action_sets.shape)} (e.g. slot_action_sets('cascade', K))")
    rewards = np.asarray(rewards, np.float32)
    logging_slot, target_slot = np.asarray(logging_slot, np.float32), np.asarray(target_slot, np.float32)
    if not np.all(np.isfinite(rewards)):
        raise ValueError("rewards must be finite (no NaN or inf); replace or drop those trajectories")
    if not np.all(np.isfinite(logging_slot) & (logging_slot <= 1e-4)):
        raise ValueError("logging_slot must be the logger's log-probabilities of the logged actions: finite "
                         "(the logger drew them) and <= 0")
    if np.any(np.isnan(target_slot) | (target_slot > 1e-4)):
        raise ValueError("target_slot must be log-probabilities (<= 0, -inf where the target never picks the action)")
    sets = np.broadcast_to(action_sets, (shape[0],) + (shape[1],) * 2)
    values = _finite(_factorised_terms(jnp.asarray(rewards), jnp.asarray(target_slot - logging_slot),
                                       jnp.asarray(sets), m_vec), "IPS over action sets")
    return values[0] if scalar else values


def choose_action_sets(terms) -> np.ndarray:
    """The action set of each slot chosen from the log (module docstring): for slot k, the candidate s
    minimising max(0, d̄² − Var̂(d)/N) + Var̂(t_s)/N, with t_s,τ = terms[s, τ, k] and d_τ = t_s,τ −
    t_S,τ the paired difference with the last candidate S (which must cover every other: unbiased
    wherever they are), Var̂ with ddof 1.

    terms: f[S, N, K], each candidate's `factorised_ips_terms` at m = ∞ on the same log (N >= 2).
    Returns int[K], the chosen candidate per slot (ties: the first)."""
    terms = np.asarray(terms, np.float64)
    if terms.ndim != 3 or terms.shape[0] < 1 or terms.shape[1] < 2 or terms.shape[2] < 1:
        raise ValueError(f"terms must be f[S, N, K]: each of S >= 1 candidate sets' per-slot terms on N >= 2 "
                         f"trajectories of K >= 1 slots (factorised_ips_terms), got shape {list(terms.shape)}")
    if not np.all(np.isfinite(terms)):
        raise ValueError("terms must be finite (each candidate's factorised_ips_terms at m = inf)")
    n = terms.shape[1]
    difference = terms - terms[-1:]
    bias = np.maximum(difference.mean(axis=1) ** 2 - difference.var(axis=1, ddof=1) / n, 0.0)    # [S, K]
    return np.argmin(bias + terms.var(axis=1, ddof=1) / n, axis=0)


def checked_behaviours(behaviours, num_trajectories: int) -> np.ndarray:
    """``behaviours`` as int[N] indices of `AIPS_BEHAVIOURS` (AIPS's behaviour per trajectory; names
    are mapped to their index), or ValueError naming the argument."""
    behaviours = np.asarray(behaviours)
    if behaviours.dtype.kind in "US":
        unknown = sorted(set(behaviours.ravel().tolist()) - set(AIPS_BEHAVIOURS))
        if unknown:
            raise ValueError(f"behaviours must be names of {AIPS_BEHAVIOURS}, got {unknown}")
        behaviours = np.vectorize(AIPS_BEHAVIOURS.index, otypes=[np.int64])(behaviours)
    if behaviours.shape != (num_trajectories,) or not np.issubdtype(behaviours.dtype, np.integer) \
            or (behaviours.size and (behaviours.min() < 0 or behaviours.max() >= len(AIPS_BEHAVIOURS))):
        raise ValueError(f"behaviours must be one entry per trajectory [N] = [{num_trajectories}] of AIPS_BEHAVIOURS "
                         f"{AIPS_BEHAVIOURS} (names or indices 0..{len(AIPS_BEHAVIOURS) - 1}), got "
                         f"{behaviours.dtype} {list(behaviours.shape)}")
    return behaviours.astype(np.int64)


def choose_behaviours(contexts, estimates, *, z: float = 2.0, folds: int = 2) -> np.ndarray:
    """AIPS's behaviour per session, chosen from the log (module docstring): per context, the first
    behaviour b of `AIPS_BEHAVIOURS` such that for every later b' the paired difference
    d_τ = estimates[b, τ] − estimates[b', τ] on the other folds' sessions of that context has
    |mean d| <= z · SE(mean d); the last (standard, unbiased under all four) for a context with fewer
    than two such sessions.

    contexts: int[N] each session's context; estimates: f[B, N], the per-trajectory estimate at
    m = ∞ under each behaviour (DCG_τ, RIPS_τ, RIPS_τ with lookahead 1, SIPS_τ: `trajectory_aips`'s
    parts), B = len(AIPS_BEHAVIOURS) or fewer (then the choice is among the first B); sessions are
    in fold τ mod `folds`. Returns int[N] (`trajectory_aips`'s behaviours)."""
    contexts = np.asarray(contexts)
    estimates = np.asarray(estimates, np.float64)
    if contexts.ndim != 1 or not np.issubdtype(contexts.dtype, np.integer) or contexts.size == 0 \
            or contexts.min() < 0 or estimates.ndim != 2 or estimates.shape[1] != contexts.size \
            or not 1 <= estimates.shape[0] <= len(AIPS_BEHAVIOURS):
        raise ValueError(f"contexts must be non-negative integers [N] and estimates the per-trajectory estimates "
                         f"[B, N] under B <= {len(AIPS_BEHAVIOURS)} behaviours; got shapes {list(contexts.shape)}, "
                         f"{list(estimates.shape)}")
    if not np.all(np.isfinite(estimates)):
        raise ValueError("estimates must be finite (each behaviour's per-trajectory estimate at m = inf)")
    if not (isinstance(folds, int) and folds >= 2) or not (np.isfinite(z) and z >= 0):
        raise ValueError(f"folds must be an integer >= 2 and z a finite number >= 0, got {folds!r}, {z!r}")
    size, last = int(contexts.max()) + 1, estimates.shape[0] - 1
    fold = np.arange(contexts.size) % folds
    chosen = np.full(contexts.size, last)
    for f in range(folds):
        rest = fold != f
        count = np.bincount(contexts[rest], minlength=size).astype(np.float64)
        agrees = np.ones((last + 1, size), bool)                  # [b, context]: b agrees with every later b'
        for b in range(last):
            for later in range(b + 1, last + 1):
                difference = estimates[b, rest] - estimates[later, rest]
                total = np.bincount(contexts[rest], difference, minlength=size)
                squares = np.bincount(contexts[rest], difference ** 2, minlength=size)
                mean = np.divide(total, count, out=np.zeros(size), where=count > 0)
                variance = np.divide(squares - count * mean ** 2, count - 1, out=np.zeros(size), where=count >= 2)
                se = np.sqrt(np.maximum(variance, 0.0) / np.maximum(count, 1.0))
                agrees[b] &= np.abs(mean) <= z * se
        agrees[:, count < 2] = False
        agrees[last] = True
        chosen[fold == f] = np.argmax(agrees, axis=0)[contexts[fold == f]]
    return chosen

"""DCG as clipped IPS and its relatives: per-trajectory estimators of online reward from logged feeds.

Jeunen, Potapov & Ustimenko (KDD'24) show that under their Asm. 1–5 the DCG of a target policy
R on data logged by R₀ is an importance-sampling estimator of R's online reward (Eq. 8–9):

    DCG_τ = sum_{viewed a in τ} c_a · min(m, 1 / ε₀(x_τ, a)) · ε(x_τ, a),    estimate = mean_τ DCG_τ,

with ε, ε₀ the target and logging exposures (Eq. 6, `simrec.feed.exposure`). m = ∞ is unbiased;
a finite m clips the inverse propensity (KDD'24 §6.2; Ionides 2008), which biases the estimate
downwards by exactly  -E_x sum_a q(x, a) ε(x, a) (1 - m ε₀(x, a))₊ ; m = 1 uses the raw labels C
(min(1, 1/ε₀) = 1 since ε₀ <= 1). The four variants of KDD'24 Table 2 are this formula with
exposures under the `log` discount (`simrec.feed.Logarithmic`) or a `pbm` learnt from logged
depths (`simrec.feed.fit_view_model`), and labels `C` (m = 1) or `Q̂ = C / P(V|R₀)` (m = ∞).

Normalised variants (KDD'24 §5): nDCG_τ = DCG_τ / iDCG_τ with iDCG_τ the DCG of the logged
items' debiased labels c_a · min(m, 1/ε₀) sorted in decreasing order, under the same discount
(``ideal="same discount"``) or with every item viewed (``ideal="all viewed"``, the ideal of the
paper's Table 1); pnDCG = mean DCG_τ / mean iDCG_τ (post-normalisation, consistent with DCG).
`self_normalised_dcg` divides by the estimated target views instead (Swaminathan & Joachims 2015).

`trajectory_dr` adds a reward model q̂ to make the estimator doubly robust (Dudík, Langford &
Li, ICML 2011): a direct-method term plus the clipped-IPS DCG of the residuals c - q̂.
`trajectory_mips` weights by the exposures of the items' groups (`group_exposure`) instead of
the items' own (marginalised IPS, Saito & Joachims, ICML 2022).

`logged_exposures` reads a policy's exposures of the logged items off its exposure table (the
ε₀ and ε arguments of every estimator); `off_policy_estimate` and `doubly_robust_estimate` do
all of it from a log and two policies.

Every function accepts a vector of clipping values m and then returns a leading axis [M];
`dcg_sweep` and `dr_sweep` give the estimate and its standard error for all m in one pass
over the log.
Exposures of zero on viewed items, or target exposure on items the logger never exposes
(Asm. 5, `support_loss`), raise ValueError unless the caller asks to count the lost mass.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simrec import sharding, validate
from simrec.feed import ItemFn, Log, Policy, ViewModel, item_values, exposure, exposure_of, num_items
from simrec.feed.policies import table_values

__all__ = [
    "Estimate", "trajectory_dcg", "dcg_sweep", "ideal_dcg", "trajectory_ndcg", "post_normalised_dcg",
    "self_normalised_dcg", "mean_estimate", "support_loss", "off_policy_estimate",
    "direct_method", "click_rate_model", "trajectory_dr", "dr_sweep", "doubly_robust_estimate", "logged_exposures",
    "clip_values", "group_exposure", "trajectory_mips",
]

IDEALS = ("same discount", "all viewed")


class Estimate(NamedTuple):
    """An estimate over trajectories: value and standard error, f64[] or f64[M] (one per m),
    and the target exposure per session that the logging policy cannot see (`support_loss`)."""
    value: np.ndarray
    standard_error: np.ndarray
    lost_exposure: float = 0.0


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

def clip_values(m) -> tuple[jax.Array, bool]:
    """Clipping values (`validate.numbers`: >= 1 or inf, never a bool) as f32[M], and whether m
    was a scalar."""
    arr = validate.numbers("m", m, low=1.0, inf=True)
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"m must be a scalar or a non-empty vector of clipping values >= 1 (inf for "
                         f"no clipping), got shape {arr.shape}")
    return jnp.asarray(np.atleast_1d(arr), jnp.float32), arr.ndim == 0


_EXPOSURE_FIX = ("in [0, 1] (an exposure is an item's expected views, sum over ranks of P(rank) P(view)); "
                 "read them off an exposure table with logged_exposures")
_MESSAGES = ("rewards must be finite (no NaN or inf); replace or drop those trajectories",
             f"logging_exposure must be finite and {_EXPOSURE_FIX}",
             f"target_exposure must be finite and {_EXPOSURE_FIX}",
             "a viewed item has zero logging exposure but positive target exposure: the logged "
             "propensities are wrong (too few Monte Carlo samples?) or Asm. 5 fails; recompute them")


def _valid_entries(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """Entries that break no rule of `_MESSAGES`.  bool[N, K] (NaN fails every comparison, so
    the interval tests also catch it)."""
    def in_range(e):
        return (e >= 0) & (e <= 1.0 + validate.EXPOSURE_TOLERANCE)
    return (jnp.isfinite(rewards) & in_range(logging_exposure) & in_range(target_exposure)
            & ~(viewed & (logging_exposure <= 0) & (target_exposure > 0)))


def _any_invalid(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """One fused pass: does any entry break a rule of `_MESSAGES`?  bool[]."""
    return ~jnp.all(_valid_entries(rewards, logging_exposure, target_exposure, viewed))


@jax.jit
def _flags(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """Which of the `_MESSAGES` apply.  bool[4]."""
    def bad_exposure(e):
        return jnp.any(~jnp.isfinite(e) | (e < 0) | (e > 1.0 + validate.EXPOSURE_TOLERANCE))
    return jnp.stack([jnp.any(~jnp.isfinite(rewards)), bad_exposure(logging_exposure), bad_exposure(target_exposure),
                      jnp.any(viewed & (logging_exposure <= 0) & (target_exposure > 0))])


def _raise_if_invalid(invalid, rewards, logging_exposure, target_exposure, viewed) -> None:
    if bool(invalid):
        flags = _flags(jnp.asarray(rewards, jnp.float32), jnp.asarray(logging_exposure, jnp.float32),
                       jnp.asarray(target_exposure, jnp.float32), viewed)
        for flag, message in zip(np.asarray(flags), _MESSAGES):
            if flag:
                raise ValueError(message)


def _check(rewards, logging_exposure, target_exposure, viewed):
    """Shape and dtype checks (the value checks run on the device, see `_flags`)."""
    arrays = dict(rewards=rewards, logging_exposure=logging_exposure, target_exposure=target_exposure,
                  viewed=viewed)
    shapes = {name: tuple(np.shape(a)) for name, a in arrays.items()}
    if len(set(shapes.values())) != 1 or len(shapes["viewed"]) != 2:
        raise ValueError(f"rewards, logging_exposure, target_exposure and viewed must share one shape "
                         f"[N, K]; got {shapes}")
    if shapes["viewed"][1] == 0:
        raise ValueError(f"rewards, logging_exposure, target_exposure and viewed have shape "
                         f"{shapes['viewed']}: the feed length K must be >= 1 (one column per logged "
                         f"rank); pass the log's [N, K] arrays with K >= 1")
    viewed = jnp.asarray(viewed)
    if viewed.dtype != jnp.bool_:
        raise ValueError(f"viewed must be a bool mask, got dtype {viewed.dtype}")
    return jnp.asarray(rewards), jnp.asarray(logging_exposure), jnp.asarray(target_exposure), viewed


# --------------------------------------------------------------------------------------------
# Per-trajectory estimators
# --------------------------------------------------------------------------------------------

def _inverse_propensity(logging_exposure, viewed) -> jax.Array:
    """1/ε₀ on viewed items with ε₀ > 0, else 0.  f32[N, K]."""
    positive = viewed & (logging_exposure > 0)
    return jnp.where(positive, 1.0 / jnp.where(positive, logging_exposure, 1.0), 0.0)


@jax.jit
def _dcg(rewards, logging_exposure, target_exposure, viewed, m):
    """(DCG_τ for every m f32[M, N], flags bool[4]). The rank loop keeps every pass a
    contiguous [M, N] update, which XLA vectorises (a reduction over a short minor axis is slow)."""
    rewards = rewards.astype(jnp.float32)
    logging_exposure = logging_exposure.astype(jnp.float32)
    target_exposure = target_exposure.astype(jnp.float32)
    gain = jnp.where(viewed, rewards * target_exposure, 0.0).T                       # [K, N]
    inverse = _inverse_propensity(logging_exposure, viewed).T                        # [K, N]

    def add_rank(k, total):
        return total + gain[k][None, :] * jnp.minimum(m[:, None], inverse[k][None, :])

    values = jax.lax.fori_loop(0, gain.shape[0], add_rank, jnp.zeros((m.shape[0], gain.shape[1])))
    return values, _any_invalid(rewards, logging_exposure, target_exposure, viewed)


def trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m=np.inf) -> jax.Array:
    """Per-trajectory clipped-IPS DCG (Jeunen et al., KDD'24 Eq. 8–9 with clipping, §6.2):

        DCG_τ = sum_{k : viewed[τ, k]} rewards[τ, k] · min(m, 1 / logging_exposure[τ, k]) · target_exposure[τ, k]

    rewards: f32[N, K] (or bool) labels c. logging_exposure: f32[N, K], ε₀ in (0, 1] on viewed
    items. target_exposure: f32[N, K], ε in [0, 1]. viewed: bool[N, K], K >= 1. m: a number >= 1
    (inf = unclipped, 1 = raw labels; a bool is refused) or a vector f32[M] of them, all computed
    in one pass (`simrec.validate.numbers`). Returns f32[N], or f32[M, N] for a vector m. Raises
    ValueError on mismatched shapes, an empty feed (K = 0), NaN, exposures outside [0, 1], or a
    viewed item with ε₀ = 0 and ε > 0.
    """
    m_vec, scalar = clip_values(m)
    arrays = _check(rewards, logging_exposure, target_exposure, viewed)
    values, invalid = _dcg(*arrays, m_vec)
    _raise_if_invalid(invalid, *arrays)
    return values[0] if scalar else values


def _sweep_block_rows(num_ranks: int) -> int:
    """Rows per block of the sweep: a power of two with about 2^19 entries per [rows, K] input,
    so that a block's inputs stay in cache while all m values are computed from them."""
    return 1 << max(8, (2**19 // num_ranks).bit_length() - 1)


def _block_values(rewards, logging_exposure, target_exposure, viewed, offset, m):
    """offset_τ + DCG_τ(m) for every m of one block of trajectories, and whether the block
    breaks a rule of `_MESSAGES`.  (f32[rows, M], bool[])."""
    rewards = rewards.astype(jnp.float32)
    logging_exposure = logging_exposure.astype(jnp.float32)
    target_exposure = target_exposure.astype(jnp.float32)
    invalid = _any_invalid(rewards, logging_exposure, target_exposure, viewed)
    gain = jnp.where(viewed, rewards * target_exposure, 0.0)                          # [rows, K]
    inverse = _inverse_propensity(logging_exposure, viewed)
    rows, k = gain.shape
    start = jnp.zeros((rows, m.shape[0])) if offset is None else jnp.broadcast_to(
        offset.astype(jnp.float32)[:, None], (rows, m.shape[0]))
    if k <= 64:     # unrolled: each trajectory's K entries are read once for all m
        values = start + sum(gain[:, i, None] * jnp.minimum(m[None, :], inverse[:, i, None]) for i in range(k))
    else:
        values = jax.lax.fori_loop(0, k, lambda i, total: total + gain[:, i, None] * jnp.minimum(
            m[None, :], inverse[:, i, None]), start)
    return values, invalid


@jax.jit
def _sweep(rewards, logging_exposure, target_exposure, viewed, offset, m):
    """Mean and standard error of offset_τ + DCG_τ(m) over trajectories for every m, in one jitted
    pass over the log: blocks of `_sweep_block_rows` trajectories (each read once, all m values
    computed from it while it is in cache) give the sums of (v - shift) and (v - shift)²,
    shift = the mean of the first 1024 trajectories (keeps the one-pass variance exact in
    float32), and the block sums are added in block order. The blocks are split over the devices
    (`simrec.sharding.fold_blocks`), so the result is the same on any number of them. m is padded
    with inf to whole SIMD vectors of 8. Returns (f32[M], f32[M], bool[])."""
    n, k = viewed.shape
    num_m = m.shape[0]
    m = jnp.concatenate([m, jnp.full(-num_m % 8, jnp.inf, m.dtype)])
    arrays = (rewards, logging_exposure, target_exposure, viewed) + (() if offset is None else (offset,))

    def values(*rows):
        return _block_values(*rows[:4], rows[4] if len(rows) > 4 else None, m)

    head = min(n, 1024)
    shift = jnp.mean(values(*sharding.replicated(tuple(a[:head] for a in arrays)))[0], axis=0)

    def sums(*rows):
        block_values, invalid = values(*rows)
        centred = block_values - shift
        return jnp.sum(centred, axis=0), jnp.sum(centred * centred, axis=0), invalid

    def accumulate(carry, block):
        total, squares, bad = carry
        block_total, block_squares, invalid = block
        return total + block_total, squares + block_squares, bad | invalid

    block = _sweep_block_rows(k)
    full, tail = divmod(n, block)
    carry = (jnp.zeros(m.shape[0]), jnp.zeros(m.shape[0]), jnp.asarray(False))
    if full:
        carry = sharding.fold_blocks(sums, accumulate, carry, arrays, block, full)
    if tail:
        carry = accumulate(carry, sums(*sharding.replicated(tuple(a[full * block:] for a in arrays))))
    total, squares, invalid = carry
    mean = total / n
    variance = jnp.maximum(squares - n * mean * mean, 0.0) / (n - 1)
    return (shift + mean)[:num_m], jnp.sqrt(variance / n)[:num_m], invalid


def dcg_sweep(rewards, logging_exposure, target_exposure, viewed, m) -> Estimate:
    """The clipped-IPS DCG estimate mean_τ DCG_τ(m) and its standard error std_τ / sqrt(N) for
    every m at once (`trajectory_dcg`, same arguments), without storing the per-trajectory
    values: one fused pass over the log for the whole vector of m. Value f64[M] (f64[] for a
    scalar m). Needs N >= 2.
    """
    return _sweep_estimate("dcg_sweep", (rewards, logging_exposure, target_exposure, viewed), None, m)


def _sweep_estimate(name: str, arrays, offset, m) -> Estimate:
    """`_sweep` of checked `arrays` (rewards, ε₀, ε, viewed) plus a per-trajectory offset (or
    None) as an `Estimate` in float64, scalar for a scalar m; `name` is the caller, for errors."""
    m_vec, scalar = clip_values(m)
    arrays = _check(*arrays)
    if arrays[3].shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 trajectories")
    mean, se, invalid = _sweep(*arrays, offset, m_vec)
    _raise_if_invalid(invalid, *arrays)
    mean, se = np.asarray(mean, np.float64), np.asarray(se, np.float64)
    return Estimate(mean[0], se[0]) if scalar else Estimate(mean, se)


def _discount_vector(discount, width: int) -> jax.Array:
    d = np.asarray(discount, np.float64)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)) or d.min() < 0 or d.max() > 1:
        raise ValueError("discount must be a vector of view probabilities P(V=1|R=i) in [0, 1], "
                         "e.g. simrec.feed.view_probability(view, K)")
    d = np.concatenate([d, np.zeros(max(width - d.size, 0))])[:width]
    return jnp.asarray(d, jnp.float32)


def _sorted_sum(values, discount, clip=None):
    """Σ_j v_(j) · discount[j] over each row's entries in decreasing order v_(1) >= v_(2) >= ...,
    with v_(j) replaced by min(m, v_(j)) for every m of ``clip`` f32[M] (then one row per m).

    values: f32[..., K]; discount: f32[K]. Returns f32[...] (f32[M, ...] with ``clip``). The
    entries are taken largest first, one per pass, until every row has only zeros left (a log's
    rows hold a few positive labels among K ranks), instead of sorting every row: on a CPU that
    sort costs about 4x more. The passes add the terms in rank order, as the sorted sum does.
    """
    k = values.shape[-1]
    taken = jnp.full(values.shape, False)
    total = jnp.zeros(values.shape[:-1] if clip is None else (clip.shape[0],) + values.shape[:-1])

    def left(state):
        j, taken, _ = state
        return (j < k) & jnp.any(~taken & (values != 0))

    def take(state):
        j, taken, total = state
        rest = jnp.where(taken, -jnp.inf, values)
        at = jnp.argmax(rest, axis=-1)
        top = jnp.take_along_axis(values, at[..., None], axis=-1)[..., 0]
        term = top if clip is None else jnp.minimum(clip.reshape((-1,) + (1,) * top.ndim), top)
        return j + 1, taken | (jnp.arange(k) == at[..., None]), total + term * discount[j]

    return jax.lax.while_loop(left, take, (jnp.int32(0), taken, total))[2]


@functools.partial(jax.jit, static_argnames=("all_viewed",))
def _ideal(rewards, logging_exposure, viewed, discount, m, all_viewed: bool):
    binary = rewards.dtype == jnp.bool_
    rewards = rewards.astype(jnp.float32)
    logging_exposure = logging_exposure.astype(jnp.float32)
    inverse = _inverse_propensity(logging_exposure, viewed)
    discount = jnp.ones_like(discount) if all_viewed else discount
    if binary:   # c ∈ {0, 1}: c·min(m, w) = min(m, c·w) and min(m, ·) keeps order, so one pass serves every m
        values = _sorted_sum(rewards * inverse, discount, clip=m)
    else:
        values = _sorted_sum(rewards[None] * jnp.minimum(m[:, None, None], inverse[None]), discount)
    return values, _any_invalid(rewards, logging_exposure, jnp.zeros_like(logging_exposure), viewed)


def ideal_dcg(rewards, logging_exposure, viewed, discount, m=np.inf, *, ideal: str = "same discount") -> jax.Array:
    """Per-trajectory ideal DCG: the logged items' debiased labels ĉ_a = c_a · min(m, 1/ε₀(x, a))
    in decreasing order, ĉ_(1) >= ĉ_(2) >= ..., under

        "same discount":  iDCG_τ = sum_j ĉ_(j) · discount[j]       (the target's view model)
        "all viewed":     iDCG_τ = sum_j ĉ_(j)                      (KDD'24 Table 1's ideal)

    discount: f32[L], P(V=1|R=j) of the ideal ranking (zero-padded or cut to K). Shapes and m as
    in `trajectory_dcg`. Returns f32[N] or f32[M, N]. Boolean rewards (a `Log`'s) are ordered once
    for the whole vector of m (their order does not depend on m); other labels once per m.
    """
    validate.choice("ideal", ideal, IDEALS)
    m_vec, scalar = clip_values(m)
    rewards, logging_exposure, _, viewed = _check(rewards, logging_exposure, logging_exposure, viewed)
    values, invalid = _ideal(rewards, logging_exposure, viewed, _discount_vector(discount, viewed.shape[1]), m_vec,
                             ideal == "all viewed")
    _raise_if_invalid(invalid, rewards, logging_exposure, jnp.zeros_like(logging_exposure), viewed)
    return values[0] if scalar else values


def trajectory_ndcg(rewards, logging_exposure, target_exposure, viewed, discount, m=np.inf, *,
                    ideal: str = "same discount", zero_ideal: str = "zero", idcg=None) -> jax.Array:
    """Per-trajectory normalised DCG, nDCG_τ = DCG_τ / iDCG_τ (KDD'24 §5; `trajectory_dcg`,
    `ideal_dcg`). A trajectory with iDCG_τ = 0 (no positive label) gets 0 with
    ``zero_ideal="zero"`` or NaN with ``zero_ideal="skip"`` (then left out by `mean_estimate`).
    idcg: optional precomputed `ideal_dcg` of this log with the same discount, m and ideal
    (f32[N] or f32[M, N]), to score several targets on one log without re-sorting it.
    Returns f32[N] or f32[M, N].
    """
    validate.choice("zero_ideal", zero_ideal, ("zero", "skip"))
    dcg = trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m)
    if idcg is None:
        idcg = ideal_dcg(rewards, logging_exposure, viewed, discount, m, ideal=ideal)
    elif np.shape(idcg) != dcg.shape:
        raise ValueError(f"idcg must be the ideal_dcg of this log for the same m, shape {dcg.shape}; "
                         f"got {np.shape(idcg)}")
    empty = jnp.nan if zero_ideal == "skip" else 0.0
    return jnp.where(idcg > 0, dcg / jnp.where(idcg > 0, idcg, 1.0), empty)


# --------------------------------------------------------------------------------------------
# Aggregates
# --------------------------------------------------------------------------------------------

@jax.jit
def _nan_mean_se(values):
    keep = ~jnp.isnan(values)
    count = jnp.sum(keep, axis=-1)
    mean = jnp.sum(jnp.where(keep, values, 0.0), axis=-1) / count
    deviation = jnp.where(keep, values - mean[..., None], 0.0)
    variance = jnp.sum(deviation * deviation, axis=-1) / (count - 1)
    return mean, jnp.sqrt(variance / count), jnp.min(count)


def mean_estimate(values) -> Estimate:
    """Mean over trajectories (last axis) and its standard error std / sqrt(n), skipping NaN.

    values: f32[N] or f32[M, N] (reduced on the device; XLA's tree reduction keeps float32 sums
    of 10^6 values accurate to ~1e-7). Raises ValueError if a row has fewer than 2 non-NaN values.
    """
    mean, se, fewest = _nan_mean_se(jnp.asarray(values, jnp.float32))
    if int(fewest) < 2:
        raise ValueError("mean_estimate needs at least 2 non-skipped trajectories per row")
    return Estimate(np.asarray(mean, np.float64), np.asarray(se, np.float64))


def _ratio(numerator: np.ndarray, denominator: np.ndarray, scale: np.ndarray | float = 1.0) -> Estimate:
    """scale · mean(a) / mean(b) with a delta-method standard error.  a, b: f64[M, N]."""
    a_bar, b_bar = numerator.mean(axis=-1), denominator.mean(axis=-1)
    if np.any(b_bar <= 0):
        raise ValueError("the denominator of a ratio estimator is zero: no logged positive label")
    value = a_bar / b_bar
    influence = (numerator - value[:, None] * denominator) / b_bar[:, None]
    se = influence.std(axis=-1, ddof=1) / np.sqrt(numerator.shape[-1])
    return Estimate(scale * value, np.abs(scale) * se)


def post_normalised_dcg(rewards, logging_exposure, target_exposure, viewed, discount, m=np.inf, *,
                        ideal: str = "same discount") -> Estimate:
    """pnDCG = mean_τ DCG_τ / mean_τ iDCG_τ (KDD'24 §5 post-normalisation; a constant rescaling
    of DCG, so it orders policies as DCG does). Delta-method standard error. Value f64[] or [M]."""
    m_vec, scalar = clip_values(m)
    dcg = np.asarray(trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m_vec), np.float64)
    idcg = np.asarray(ideal_dcg(rewards, logging_exposure, viewed, discount, m_vec, ideal=ideal), np.float64)
    est = _ratio(dcg, idcg)
    return Estimate(est.value[0], est.standard_error[0]) if scalar else est


def self_normalised_dcg(rewards, logging_exposure, target_exposure, viewed, m=np.inf, *,
                        target_views=None) -> Estimate:
    """Self-normalised clipped-IPS DCG (after Swaminathan & Joachims, NeurIPS 2015):

        SN = T · mean_τ DCG_τ / mean_τ W_τ,   W_τ = sum_{viewed a} min(m, 1/ε₀) · ε,

    W_τ being the IPS estimate of the target's number of views, whose expectation (m = ∞) is
    T = E_x sum_a ε(x, a). target_views: T, or None for the logged mean number of views (right
    when target and logger show equally long feeds under the same view model). Delta-method
    standard error with T fixed. Value f64[] or [M].
    """
    m_vec, scalar = clip_values(m)
    dcg = np.asarray(trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m_vec), np.float64)
    views = np.asarray(trajectory_dcg(np.ones(np.shape(viewed), np.float32), logging_exposure,
                                      target_exposure, viewed, m_vec), np.float64)
    if target_views is None:
        target_views = float(np.mean(np.sum(np.asarray(viewed), axis=1)))
    else:
        validate.positive("target_views", target_views)
    est = _ratio(dcg, views, target_views)
    return Estimate(est.value[0], est.standard_error[0]) if scalar else est


# --------------------------------------------------------------------------------------------
# Doubly robust
# --------------------------------------------------------------------------------------------

def _residuals(rewards, viewed, predicted, direct):
    """c - q̂ on viewed entries (0 elsewhere) f32[N, K] and direct f32[N], after checking the
    reward-model arguments against viewed [N, K]."""
    n_k = tuple(np.shape(viewed))
    if tuple(np.shape(predicted)) != n_k:
        raise ValueError(f"predicted must hold the reward model q̂ of every logged item, shape {list(n_k)} "
                         f"like rewards; got {list(np.shape(predicted))}")
    if tuple(np.shape(direct)) != n_k[:1]:
        raise ValueError(f"direct must hold one direct-method value per trajectory, shape [{n_k[0]}] "
                         f"(see direct_method); got {list(np.shape(direct))}")
    predicted, direct = jnp.asarray(predicted, jnp.float32), jnp.asarray(direct, jnp.float32)
    if not (bool(jnp.all(jnp.isfinite(predicted))) and bool(jnp.all(jnp.isfinite(direct)))):
        raise ValueError("predicted and direct must be finite (no NaN or inf)")
    residual = jnp.where(jnp.asarray(viewed), jnp.asarray(rewards, jnp.float32) - predicted, 0.0)
    return residual, direct


def direct_method(reward_table, target_table) -> jax.Array:
    """Direct-method value per context, DM(x) = sum_a q̂(x, a) · ε(x, a): the online reward the
    reward model predicts for the target (KDD'24 Eq. 5 with q̂ for q).

    reward_table: f32[B, A] q̂. target_table: f32[B, A] target exposure ε in [0, 1]
    (`validate.exposures`). Returns f32[B]."""
    reward_table, target_table = jnp.asarray(reward_table, jnp.float32), jnp.asarray(target_table, jnp.float32)
    if reward_table.shape != target_table.shape or reward_table.ndim != 2:
        raise ValueError(f"reward_table and target_table must be tables of one shape [contexts, items], got "
                         f"{reward_table.shape} and {target_table.shape}")
    validate.exposures("target_table", target_table)
    return jnp.sum(reward_table * target_table, axis=1)


def click_rate_model(log: Log, num_items: int, signal: int | str = 0, *, prior_views: float = 0.0) -> np.ndarray:
    """A reward model q̂(a) = (c_a + n₀ r̄) / (v_a + n₀) for DR and Cascade-DR: item a's label total
    c_a per view v_a in the log, shrunk towards the log's overall rate r̄ = Σc / Σv by n₀ =
    ``prior_views`` pseudo-views (under the examination hypothesis E[C | V = 1] = q). Items never
    viewed get r̄ (0 on a log without views).

    log: a `simrec.feed.Log`; num_items: the catalogue size A; signal: a name or index of
    ``log.signals``. Returns f64[A] (pass it as ``reward_models`` of `simrec.ope.from_log`)."""
    validate.integer("num_items", num_items, low=1)
    index = _signal_index(log, signal)
    if not np.isfinite(prior_views) or prior_views < 0:
        raise ValueError(f"prior_views must be a finite number >= 0 of pseudo-views, got {prior_views}")
    viewed = np.asarray(log.viewed)
    items = np.asarray(log.items)[viewed]
    if items.size and items.max() >= num_items:
        raise ValueError(f"the log shows item {items.max()} but num_items = {num_items}; pass the catalogue size")
    labels = np.asarray(log.rewards[index])[viewed].astype(np.float64)
    views = np.bincount(items, minlength=num_items).astype(np.float64)
    totals = np.bincount(items, weights=labels, minlength=num_items)
    rate = totals.sum() / max(views.sum(), 1.0)
    with np.errstate(invalid="ignore"):
        return np.where(views + prior_views > 0, (totals + prior_views * rate) / (views + prior_views), rate)


def trajectory_dr(rewards, logging_exposure, target_exposure, viewed, predicted, direct, m=np.inf) -> jax.Array:
    """Per-trajectory doubly robust estimate of the target's online reward (Dudík, Langford & Li,
    ICML 2011; its item-position form under the position-based model, cf. Kiyohara et al., WSDM
    2022, independent case; exposures as in Jeunen et al., KDD'24 Eq. 8):

        DR_τ = sum_a ε(x_τ, a) q̂(x_τ, a) + sum_{viewed a in τ} min(m, 1/ε₀(x_τ, a)) · ε(x_τ, a) · (c_a - q̂(x_τ, a))

    the direct method over every item the target exposes plus the clipped-IPS DCG of the
    residuals. Under Asm. 1–5, E[V_a | x] = ε₀ and E[C_a | V_a = 1, x] = q, so the correction has
    mean sum_a ε (q - q̂) min(1, m ε₀): with m = ∞ the estimate is unbiased for any q̂; with a
    finite m its bias is -E_x sum_a (q - q̂) ε (1 - m ε₀)₊; with q̂ = q its mean is the direct
    method; with q̂ = 0 it is `trajectory_dcg`.

    rewards, logging_exposure, target_exposure, viewed: as in `trajectory_dcg` [N, K].
    predicted: f32[N, K], q̂(x_τ, a) of the logged items (ignored where not viewed).
    direct: f32[N], sum_a ε(x_τ, a) q̂(x_τ, a) of each trajectory's context (`direct_method`).
    m: scalar or f32[M]. Returns f32[N], or f32[M, N] for a vector m.
    """
    residual, direct = _residuals(rewards, viewed, predicted, direct)
    correction = trajectory_dcg(residual, logging_exposure, target_exposure, viewed, m)
    return direct + correction


def group_exposure(table, item_groups) -> jax.Array:
    """Each item's group exposure: the mean exposure of the items of its group,

        ε̄(x, a) = (1 / |g(a)|) sum_{b : g(b) = g(a)} ε(x, b),

    the exposure arguments of `trajectory_mips` (read the logged ones off it with
    `logged_exposures`, as for items). table: f32[B, A] an exposure table (values in [0, 1]);
    item_groups: int[A], each item's group g(a) in [0, G) (an embedding of the items, discretised:
    a category, a cluster). Returns f32[B, A]; with every item in its own group, the table itself.
    """
    table = jnp.asarray(table, jnp.float32)
    validate.exposures("table", table)
    groups = np.asarray(item_groups)
    if groups.shape != (table.shape[1],) or not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(f"item_groups must be an integer vector with one group per item of the table, "
                         f"int[{table.shape[1]}], got {groups.dtype} {list(groups.shape)}")
    if groups.size and groups.min() < 0:
        raise ValueError(f"item_groups must be >= 0 (group ids 0..G-1), got {groups.min()}")
    count = int(groups.max()) + 1 if groups.size else 0
    sums = jax.ops.segment_sum(table.T, jnp.asarray(groups), num_segments=count)        # [G, B]
    sizes = jnp.bincount(jnp.asarray(groups), length=count)
    return (sums / jnp.maximum(sizes, 1)[:, None])[groups].T


def trajectory_mips(rewards, logging_group_exposure, target_group_exposure, viewed, m=np.inf) -> jax.Array:
    """Per-trajectory marginalised IPS over item groups (MIPS: Saito & Joachims, ICML'22, with the
    item's group as its embedding; for rankings under position-based examination, the independent
    member of the GMIPS family of Takahashi, Maru & Shoji, arXiv 2506.00446, 2025):

        MIPS_τ = sum_{viewed a in τ} c_a · min(m, 1 / ε̄₀(x_τ, a)) · ε̄(x_τ, a)

    with ε̄ the group exposures (`group_exposure`): DCG's weight (`trajectory_dcg`) with the ratio
    of the items' exposures replaced by that of their groups'. Under DCG's assumptions its mean
    at m = ∞ is sum_a ε₀(x, a) q(x, a) ε(x, g(a)) / ε₀(x, g(a)) (ε(x, g) the group's total), which
    is the target's online reward when there is no direct effect — within a context an item's
    click probability depends on it only through its group — or when logger and target split each
    group's exposure in the same proportions; otherwise the bias is
    sum_g ε(x, g) (q̄₀(x, g) − q̄(x, g)), q̄ the exposure-weighted mean click probability of the
    group under the logger and under the target. The support is needed per group only, and the
    weights are ratios of group totals, so the variance falls as groups grow and the bias rises.

    rewards, viewed: as in `trajectory_dcg` [N, K]; logging_group_exposure, target_group_exposure:
    f32[N, K] the logged items' group exposures under logger and target. m: scalar or f32[M].
    Returns f32[N], or f32[M, N] for a vector m. Singleton groups give `trajectory_dcg`.
    """
    return trajectory_dcg(rewards, logging_group_exposure, target_group_exposure, viewed, m)


def dr_sweep(rewards, logging_exposure, target_exposure, viewed, predicted, direct, m) -> Estimate:
    """Mean and standard error of `trajectory_dr` for every m at once, in one fused pass over
    the log (as `dcg_sweep`). Value f64[M] (f64[] for a scalar m). Needs N >= 2."""
    residual, direct = _residuals(rewards, viewed, predicted, direct)
    return _sweep_estimate("dr_sweep", (residual, logging_exposure, target_exposure, viewed), direct, m)


# --------------------------------------------------------------------------------------------
# From a log and two policies
# --------------------------------------------------------------------------------------------

def support_loss(logging_table, target_table) -> jax.Array:
    """Target exposure on items the logging policy never exposes (KDD'24 Asm. 5, Eq. 7):

        lost(x) = sum_a ε(x, a) · 1[ε₀(x, a) = 0]

    logging_table, target_table: f32[B, A] exposure tables of the same contexts, in [0, 1]
    (`validate.exposures`). Returns f32[B]; the estimator's expected loss on context x is then
    sum_a q(x, a) ε(x, a) 1[ε₀ = 0].
    """
    logging_table, target_table = jnp.asarray(logging_table), jnp.asarray(target_table)
    if logging_table.shape != target_table.shape or logging_table.ndim != 2:
        raise ValueError(f"logging_table and target_table must be exposure tables of one shape "
                         f"[contexts, items], got {logging_table.shape} and {target_table.shape}")
    validate.exposures("logging_table", logging_table)
    validate.exposures("target_table", target_table)
    return jnp.sum(jnp.where(logging_table > 0, 0.0, target_table), axis=1)


def logged_exposures(log: Log, table, contexts=None) -> jax.Array:
    """Exposure of every logged item under a policy: ε(x_τ, a) for the items a that session τ
    viewed (KDD'24 Eq. 6, read off the policy's exposure table). With the logging policy's table
    it is ε₀ and with a target's it is ε, the two exposure arguments of `trajectory_dcg`.

    log: a `simrec.feed.Log` (users i32[N]; items i32[N, K], -1 where not viewed).
    table: f32[B, A], the policy's exposure table (values in [0, 1], `validate.exposures`), e.g.
    ``simrec.feed.exposure(key, policy, view, contexts).mean``; row b holds context contexts[b].
    contexts: i32[B], the distinct context ids of the table's rows (e.g. ``np.unique(log.users)``),
    or None when row x is context x (a table over all contexts 0..B-1).
    Returns f32[N, K]: table[row of x_τ, a] where viewed, 0 elsewhere. Raises ValueError when a
    logged context has no row or a logged item no column in the table.
    """
    table = jnp.asarray(table, jnp.float32)
    validate.exposures("table", table)
    n_rows, n_items = table.shape
    users = np.asarray(log.users)
    if contexts is None:
        validate.indices("log.users", users, n_rows, "rows of table; with contexts=None row x is "
                         "context x, else pass the contexts of its rows")
        rows = jnp.asarray(log.users, jnp.int32)
    else:
        contexts = np.asarray(contexts)
        validate.matrix_shape("contexts", contexts, (None,))
        validate.table_rows("table", table, contexts.shape[0], "contexts (entries of contexts)")
        order = np.argsort(contexts, kind="stable")
        ordered = contexts[order]
        if np.any(ordered[1:] == ordered[:-1]):
            raise ValueError("contexts must be distinct: one table row per context")
        position = np.minimum(np.searchsorted(ordered, users), max(len(ordered) - 1, 0))
        missing = ordered[position] != users if len(ordered) else np.ones(users.shape, bool)
        if missing.any():
            raise ValueError(f"log.users holds context {users[missing][0].item()}, which is not in contexts (the "
                             f"table has no row for it); compute the table for np.unique(log.users)")
        rows = jnp.asarray(order[position], jnp.int32)
    top = int(jnp.max(log.items)) if np.size(log.items) else -1
    if top >= n_items:
        raise ValueError(f"log.items holds item {top} but table covers items 0..{n_items - 1}; pass the "
                         f"exposure table of a policy over the log's catalogue")
    return exposure_of(table, rows, log.items)


def _signal_index(log: Log, signal: int | str) -> int:
    """The index of `signal` (a name or an index) among the log's signals."""
    if isinstance(signal, str):
        if signal not in log.signals:
            raise ValueError(f"unknown signal {signal!r}; the log has {log.signals}")
        return log.signals.index(signal)
    return validate.integer("signal", signal, low=0, high=len(log.signals) - 1)


def _exposure_tables(key, log: Log, logging_policy: Policy, target_policy: Policy, view: ViewModel,
                     num_samples: int, on_support_violation: str):
    """Shared by the log-level estimators: (the log's distinct contexts i32[B], each session's
    row in them i64[N], the logging and target exposure tables f32[B, A], mean lost target
    exposure per session), after the support check of `on_support_violation`."""
    validate.choice("on_support_violation", on_support_violation, ("raise", "count"))
    contexts, position = np.unique(np.asarray(log.users), return_inverse=True)
    k_log, k_target = jax.random.split(key) if key is not None else (None, None)
    logging_table = exposure(k_log, logging_policy, view, contexts, num_samples=num_samples).mean
    target_table = exposure(k_target, target_policy, view, contexts, num_samples=num_samples).mean
    lost = float(np.mean(np.asarray(support_loss(logging_table, target_table))[position]))
    if lost > 0 and on_support_violation == "raise":
        raise ValueError(f"support violation (Asm. 5): the target policy puts {lost:.4g} expected views "
                         f"per session on items the logging policy never exposes; add exploration to "
                         f"the logging policy, or pass on_support_violation='count' to estimate anyway")
    return contexts, position, logging_table, target_table, lost


def off_policy_estimate(key: jax.Array | None, log: Log, logging_policy: Policy, target_policy: Policy,
                        view: ViewModel, *, signal: int | str = 0, m=np.inf, num_samples: int = 1000,
                        on_support_violation: str = "raise") -> Estimate:
    """Clipped-IPS DCG estimate of `target_policy`'s online reward from `log` (KDD'24 Eq. 9).

    Both exposures are computed under `view` for the log's contexts (`simrec.feed.exposure`:
    the true view model, or `Logarithmic()` / `fit_view_model(log.viewed)` for the Table 2
    variants); for the true view and an exact logging policy ε₀ equals `log.logging_exposure`.
    signal: index or name of the reward signal. m: scalar or vector of clipping values.
    on_support_violation: "raise" (ValueError when the target exposes items the logger never
    does) or "count" (estimate anyway; `lost_exposure` reports the mean lost target exposure per
    session, `support_loss`).
    """
    signal = _signal_index(log, signal)
    contexts, _, logging_table, target_table, lost = _exposure_tables(
        key, log, logging_policy, target_policy, view, num_samples, on_support_violation)
    dcg = trajectory_dcg(log.rewards[signal], logged_exposures(log, logging_table, contexts),
                         logged_exposures(log, target_table, contexts), log.viewed, m)
    est = mean_estimate(dcg)
    return Estimate(est.value, est.standard_error, lost)


def doubly_robust_estimate(key: jax.Array | None, log: Log, logging_policy: Policy, target_policy: Policy,
                           view: ViewModel, reward_model: ItemFn, *, signal: int | str = 0, m=np.inf,
                           num_samples: int = 1000, on_support_violation: str = "raise") -> Estimate:
    """Doubly robust estimate of `target_policy`'s online reward from `log` (`trajectory_dr`),
    with the reward model q̂(x, a) = `reward_model` (an `ItemFn` over the log's contexts and the
    catalogue, e.g. `simrec.feed.from_table(q_hat)`). Exposures, signal, m and
    on_support_violation as in `off_policy_estimate`; items the logger never exposes still get
    the direct-method term, so the loss under a support violation is -sum_{ε₀ = 0} (q - q̂) ε.
    """
    if not isinstance(reward_model, ItemFn):
        raise ValueError("reward_model must be an ItemFn q̂(x, a), e.g. simrec.feed.from_table(q_hat)")
    if reward_model.num_items != num_items(target_policy):
        raise ValueError(f"reward_model covers {reward_model.num_items} items but the target policy ranks "
                         f"{num_items(target_policy)}")
    signal = _signal_index(log, signal)
    contexts, position, logging_table, target_table, lost = _exposure_tables(
        key, log, logging_policy, target_policy, view, num_samples, on_support_violation)
    reward_table = table_values(reward_model)
    if validate.has_shape(reward_table):
        validate.indices("log.users", np.asarray(log.users), reward_table.shape[0],
                         "contexts (rows of the reward_model table)")
    logging_exposure = logged_exposures(log, logging_table, contexts)
    target_exposure = logged_exposures(log, target_table, contexts)
    rows = jnp.asarray(position, jnp.int32)
    contexts = jnp.asarray(contexts, jnp.int32)
    catalogue = jnp.broadcast_to(jnp.arange(reward_model.num_items, dtype=jnp.int32),
                                 (contexts.shape[0], reward_model.num_items))
    direct = direct_method(item_values(reward_model, contexts, catalogue), target_table)[rows]
    predicted = item_values(reward_model, jnp.asarray(log.users, jnp.int32), jnp.maximum(log.items, 0))
    dr = trajectory_dr(log.rewards[signal], logging_exposure, target_exposure, log.viewed, predicted, direct, m)
    est = mean_estimate(dr)
    return Estimate(est.value, est.standard_error, lost)

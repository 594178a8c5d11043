"""Off-policy estimators of online reward from logged feeds: DCG as clipped IPS, nDCG, pnDCG.

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

Every function accepts a vector of clipping values m and then returns a leading axis [M];
`dcg_sweep` gives the estimate and its standard error for all m in one pass over the log.
Exposures of zero on viewed items, or target exposure on items the logger never exposes
(Asm. 5, `support_loss`), raise ValueError unless the caller asks to count the lost mass.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simrec.feed import Log, Policy, ViewModel, exposure, exposure_of

__all__ = [
    "Estimate", "trajectory_dcg", "dcg_sweep", "ideal_dcg", "trajectory_ndcg", "post_normalised_dcg",
    "self_normalised_dcg", "mean_estimate", "support_loss", "off_policy_estimate",
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

def _clip_values(m) -> tuple[jax.Array, bool]:
    arr = np.asarray(m, np.float64)
    if arr.ndim > 1 or arr.size == 0 or np.any(np.isnan(arr)) or np.any(arr < 1.0):
        raise ValueError(f"m must be a scalar or vector of clipping values >= 1 (inf for no clipping), got {m!r}")
    return jnp.asarray(np.atleast_1d(arr), jnp.float32), arr.ndim == 0


_MESSAGES = ("rewards must be finite", "logging_exposure must be finite and in [0, 1]",
             "target_exposure must be finite and in [0, 1]",
             "a viewed item has zero logging exposure but positive target exposure: the logged "
             "propensities are wrong (too few Monte Carlo samples?) or Asm. 5 fails; recompute them")


def _valid_entries(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """Entries that break no rule of `_MESSAGES`.  bool[N, K] (NaN fails every comparison, so
    the interval tests also catch it)."""
    def in_range(e):
        return (e >= 0) & (e <= 1.0 + 1e-5)
    return (jnp.isfinite(rewards) & in_range(logging_exposure) & in_range(target_exposure)
            & ~(viewed & (logging_exposure <= 0) & (target_exposure > 0)))


def _any_invalid(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """One fused pass: does any entry break a rule of `_MESSAGES`?  bool[]."""
    return ~jnp.all(_valid_entries(rewards, logging_exposure, target_exposure, viewed))


@jax.jit
def _flags(rewards, logging_exposure, target_exposure, viewed) -> jax.Array:
    """Which of the `_MESSAGES` apply.  bool[4]."""
    def bad_exposure(e):
        return jnp.any(~jnp.isfinite(e) | (e < 0) | (e > 1.0 + 1e-5))
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
    items. target_exposure: f32[N, K], ε in [0, 1]. viewed: bool[N, K]. m: a scalar >= 1 (inf =
    unclipped, 1 = raw labels) or a vector f32[M] of them, all computed in one pass. Returns
    f32[N], or f32[M, N] for a vector m. Raises ValueError on mismatched shapes, NaN, exposures
    outside [0, 1], or a viewed item with ε₀ = 0 and ε > 0.
    """
    m_vec, scalar = _clip_values(m)
    arrays = _check(rewards, logging_exposure, target_exposure, viewed)
    values, invalid = _dcg(*arrays, m_vec)
    _raise_if_invalid(invalid, *arrays)
    return values[0] if scalar else values


@jax.jit
def _sweep(rewards, logging_exposure, target_exposure, viewed, m):
    rewards = rewards.astype(jnp.float32)
    logging_exposure = logging_exposure.astype(jnp.float32)
    target_exposure = target_exposure.astype(jnp.float32)
    invalid = ~_valid_entries(rewards, logging_exposure, target_exposure, viewed)
    # an invalid entry turns its trajectory into NaN, so the check rides on the same single pass
    gain = jnp.where(invalid, jnp.nan, jnp.where(viewed, rewards * target_exposure, 0.0))   # [N, K]
    inverse = _inverse_propensity(logging_exposure, viewed)
    n, k = gain.shape

    def values_of(gain, inverse):                      # DCG_τ(m) for every m: f32[rows, M]
        if k <= 64:     # one fusion: each trajectory's K entries are read once for all m
            return sum(gain[:, i, None] * jnp.minimum(m[None, :], inverse[:, i, None]) for i in range(k))
        return jax.lax.fori_loop(0, k, lambda i, total: total + gain[:, i, None] * jnp.minimum(
            m[None, :], inverse[:, i, None]), jnp.zeros((gain.shape[0], m.shape[0])))

    shift = jnp.mean(values_of(gain[:1024], inverse[:1024]), axis=0)   # keeps one-pass variance exact
    centred = values_of(gain, inverse) - shift
    mean = jnp.sum(centred, axis=0) / n
    variance = jnp.maximum(jnp.sum(centred * centred, axis=0) - n * mean * mean, 0.0) / (n - 1)
    return shift + mean, jnp.sqrt(variance / n), jnp.any(jnp.isnan(mean))


def dcg_sweep(rewards, logging_exposure, target_exposure, viewed, m) -> Estimate:
    """The clipped-IPS DCG estimate mean_τ DCG_τ(m) and its standard error std_τ / sqrt(N) for
    every m at once (`trajectory_dcg`, same arguments), without storing the per-trajectory
    values: one fused pass over the log for the whole vector of m. Value f64[M] (f64[] for a
    scalar m). Needs N >= 2.
    """
    m_vec, scalar = _clip_values(m)
    arrays = _check(rewards, logging_exposure, target_exposure, viewed)
    if arrays[3].shape[0] < 2:
        raise ValueError("dcg_sweep needs at least 2 trajectories")
    mean, se, invalid = _sweep(*arrays, m_vec)
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


@functools.partial(jax.jit, static_argnames=("all_viewed",))
def _ideal(rewards, logging_exposure, viewed, discount, m, all_viewed: bool):
    rewards = rewards.astype(jnp.float32)
    logging_exposure = logging_exposure.astype(jnp.float32)
    debiased = rewards[None] * jnp.minimum(m[:, None, None], _inverse_propensity(logging_exposure, viewed)[None])
    labels = -jnp.sort(-debiased, axis=-1)                                          # decreasing
    values = jnp.sum(labels if all_viewed else labels * discount, axis=-1)
    return values, _any_invalid(rewards, logging_exposure, jnp.zeros_like(logging_exposure), viewed)


def ideal_dcg(rewards, logging_exposure, viewed, discount, m=np.inf, *, ideal: str = "same discount") -> jax.Array:
    """Per-trajectory ideal DCG: the logged items' debiased labels ĉ_a = c_a · min(m, 1/ε₀(x, a))
    in decreasing order, ĉ_(1) >= ĉ_(2) >= ..., under

        "same discount":  iDCG_τ = sum_j ĉ_(j) · discount[j]       (the target's view model)
        "all viewed":     iDCG_τ = sum_j ĉ_(j)                      (KDD'24 Table 1's ideal)

    discount: f32[L], P(V=1|R=j) of the ideal ranking (zero-padded or cut to K). Shapes and m as
    in `trajectory_dcg`. Returns f32[N] or f32[M, N].
    """
    if ideal not in IDEALS:
        raise ValueError(f"ideal must be one of {IDEALS}, got {ideal!r}")
    m_vec, scalar = _clip_values(m)
    rewards, logging_exposure, _, viewed = _check(rewards, logging_exposure, logging_exposure, viewed)
    values, invalid = _ideal(rewards, logging_exposure, viewed, _discount_vector(discount, viewed.shape[1]), m_vec,
                             ideal == "all viewed")
    _raise_if_invalid(invalid, rewards, logging_exposure, jnp.zeros_like(logging_exposure), viewed)
    return values[0] if scalar else values


def trajectory_ndcg(rewards, logging_exposure, target_exposure, viewed, discount, m=np.inf, *,
                    ideal: str = "same discount", zero_ideal: str = "zero") -> jax.Array:
    """Per-trajectory normalised DCG, nDCG_τ = DCG_τ / iDCG_τ (KDD'24 §5; `trajectory_dcg`,
    `ideal_dcg`). A trajectory with iDCG_τ = 0 (no positive label) gets 0 with
    ``zero_ideal="zero"`` or NaN with ``zero_ideal="skip"`` (then left out by `mean_estimate`).
    Returns f32[N] or f32[M, N].
    """
    if zero_ideal not in ("zero", "skip"):
        raise ValueError(f"zero_ideal must be 'zero' or 'skip', got {zero_ideal!r}")
    dcg = trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m)
    idcg = ideal_dcg(rewards, logging_exposure, viewed, discount, m, ideal=ideal)
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
    m_vec, scalar = _clip_values(m)
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
    m_vec, scalar = _clip_values(m)
    dcg = np.asarray(trajectory_dcg(rewards, logging_exposure, target_exposure, viewed, m_vec), np.float64)
    views = np.asarray(trajectory_dcg(np.ones(np.shape(viewed), np.float32), logging_exposure,
                                      target_exposure, viewed, m_vec), np.float64)
    if target_views is None:
        target_views = float(np.mean(np.sum(np.asarray(viewed), axis=1)))
    elif not (np.isfinite(target_views) and target_views > 0):
        raise ValueError(f"target_views must be a positive number, got {target_views!r}")
    est = _ratio(dcg, views, target_views)
    return Estimate(est.value[0], est.standard_error[0]) if scalar else est


# --------------------------------------------------------------------------------------------
# From a log and two policies
# --------------------------------------------------------------------------------------------

def support_loss(logging_table, target_table) -> jax.Array:
    """Target exposure on items the logging policy never exposes (KDD'24 Asm. 5, Eq. 7):

        lost(x) = sum_a ε(x, a) · 1[ε₀(x, a) = 0]

    logging_table, target_table: f32[B, A] exposure tables of the same contexts. Returns f32[B];
    the estimator's expected loss on context x is then sum_a q(x, a) ε(x, a) 1[ε₀ = 0].
    """
    logging_table, target_table = jnp.asarray(logging_table), jnp.asarray(target_table)
    if logging_table.shape != target_table.shape or logging_table.ndim != 2:
        raise ValueError(f"logging_table and target_table must be exposure tables of one shape "
                         f"[contexts, items], got {logging_table.shape} and {target_table.shape}")
    return jnp.sum(jnp.where(logging_table > 0, 0.0, target_table), axis=1)


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
    if on_support_violation not in ("raise", "count"):
        raise ValueError(f"on_support_violation must be 'raise' or 'count', got {on_support_violation!r}")
    if isinstance(signal, str):
        if signal not in log.signals:
            raise ValueError(f"unknown signal {signal!r}; the log has {log.signals}")
        signal = log.signals.index(signal)
    if not 0 <= signal < len(log.signals):
        raise ValueError(f"signal index {signal} out of range for signals {log.signals}")
    contexts, position = np.unique(np.asarray(log.users), return_inverse=True)
    k_log, k_target = jax.random.split(key) if key is not None else (None, None)
    logging_table = exposure(k_log, logging_policy, view, contexts, num_samples=num_samples).mean
    target_table = exposure(k_target, target_policy, view, contexts, num_samples=num_samples).mean
    lost = float(np.mean(np.asarray(support_loss(logging_table, target_table))[position]))
    if lost > 0 and on_support_violation == "raise":
        raise ValueError(f"support violation (Asm. 5): the target policy puts {lost:.4g} expected views "
                         f"per session on items the logging policy never exposes; add exploration to "
                         f"the logging policy, or pass on_support_violation='count' to estimate anyway")
    rows = jnp.asarray(position, jnp.int32)
    logging_exposure = exposure_of(logging_table, rows, log.items)
    target_exposure = exposure_of(target_table, rows, log.items)
    dcg = trajectory_dcg(log.rewards[signal], logging_exposure, target_exposure, log.viewed, m)
    est = mean_estimate(dcg)
    return Estimate(est.value, est.standard_error, lost)

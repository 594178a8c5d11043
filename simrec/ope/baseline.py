"""Optimal additive baselines: a control variate with known mean 0, weighted to minimise variance.

An importance-weighted estimator f_τ often comes with a statistic g_τ of the same weights whose
expectation under the logger is known to be 0: for item-exposure weights (DCG as clipped IPS,
`simrec.ope.dcg`) the weighted views minus the target's expected views,

    g_τ = Σ_{k viewed} ε(x_τ, s_k) / ε₀(x_τ, s_k) − Σ_k S(k),

and for the weight of a whole logged ranking (SIPS, `simrec.ope.slate`) g_τ = w_τ,D_τ − 1. Then
f_τ − β g_τ has the mean of f_τ for every β, and its variance is smallest at the regression
coefficient

    β* = Cov(f, g) / Var(g),

which, written with E[w] = 1, is the optimal baseline correction of β-IPS,
mean_τ [w_τ (r_τ − β)] + β (Gupta, Jeunen et al., RecSys'24). On the difference of two targets
on one log, f_τ(π) − f_τ(π_b) and g_τ(π) − g_τ(π_b), the same coefficient is Δβ-IPS's
variance-optimal control variate for pairs of policies (Jeunen & Ustimenko, RecSys'24): the
difference's own β, not the difference of the two targets' β.

β̂ is estimated on the same log, which adds a bias of order 1/N; the standard error treats it as
fixed (exact to first order when E[g] = 0). With clipping (finite m) E[g] is no longer 0, and the
estimator is the clipped estimator's value plus β̂ times the clipped control's bias.
"""
from __future__ import annotations

import numpy as np

__all__ = ["optimal_baseline"]


def optimal_baseline(values, control) -> tuple[np.ndarray, np.ndarray]:
    """(β̂ f64[M], adjusted values f_τ − β̂ g_τ f64[M, N]) of per-trajectory values f and a control
    g with known mean 0 (module docstring): β̂ = Cov̂(f, g) / Var̂(g) per row, 0 where g is constant.
    The mean of the adjusted values is the estimate; their standard error is the estimate's.

    values, control: f[M, N] (or f[N]) without NaN, N >= 2."""
    values, control = np.asarray(values, np.float64), np.asarray(control, np.float64)
    if values.shape != control.shape or values.ndim not in (1, 2) or values.shape[-1] < 2:
        raise ValueError(f"values and control must share one shape [M, N] (or [N]) with N >= 2 trajectories, "
                         f"got {values.shape} and {control.shape}")
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(control))):
        raise ValueError("values and control must be finite (no NaN or inf): an optimal baseline needs every "
                         "trajectory")
    centred = control - control.mean(axis=-1, keepdims=True)
    spread = np.sum(centred ** 2, axis=-1)
    covariance = np.sum(centred * (values - values.mean(axis=-1, keepdims=True)), axis=-1)
    beta = np.divide(covariance, spread, out=np.zeros_like(spread), where=spread > 0)
    return beta, values - beta[..., None] * control

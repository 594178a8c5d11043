"""MF-AUC (Lim §6): MF trained on the per-user AUC hinge [f(u, i⁻) - f(u, i⁺) + 1]₊.

Stochastic version of Lim's objective (1/|U|) Σᵤ (1/(|O⁺ᵤ||O⁻ᵤ|)) Σ_{i⁺, i⁻} [f(u,i⁻) - f(u,i⁺) + 1]₊:
u uniform over users with positives, i⁺ uniform in O⁺ᵤ, i⁻ uniform in O⁻ᵤ = I∖O⁺ᵤ, so the sampled
hinge is an unbiased estimate of it. Shares `OptADG`'s sampler of (u, i⁺) and its initialisation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from simrec import validate
from simrec.models.positives import SAMPLINGS, PositiveSets, unobserved_items
from simrec.models.mf import MF

__all__ = ["MFAUC", "draw_negatives"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class MFAUC:
    """MF-AUC: f(u,i) = <θᵤ,θᵢ> + bᵢ with k = dim, init N(0, init_scale²), trained on the AUC hinge.

    sampling: "user" (Lim's objective above) or "positive" ((u, i⁺) uniform over the training
    positives), as `OptADG.sampling`."""
    dim: int = field(default=50, metadata=dict(static=True))
    init_scale: float = field(default=0.1, metadata=dict(static=True))
    sampling: str = field(default="user", metadata=dict(static=True))

    def __post_init__(self):
        validate.integer("MFAUC.dim", self.dim, low=1)
        validate.finite("MFAUC.init_scale", self.init_scale, low=0.0)
        validate.choice("MFAUC.sampling", self.sampling, tuple(SAMPLINGS))


def draw_negatives(key: jax.Array, spec: MFAUC, params: MF, sets: PositiveSets, users: jax.Array,
                   positives: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """i⁻ uniform in I∖O⁺ᵤ for every pair, weight 1, and a mask of users that have such an item.

    Returns negatives: i32[B], weights: f32[B], has_unobserved: bool[B] (O⁺ᵤ = I: no step).
    """
    del spec, params, positives  # the negative does not depend on the model or on i⁺
    negatives, has_unobserved = unobserved_items(key, sets, users)
    return negatives, has_unobserved.astype(jnp.float32), has_unobserved

"""Feed scenarios over a simulated world: the world's users as contexts, its truth as rewards.

The bridge from the world layer to the feed simulator (the world layer, `simrec.world` and
`simrec.procedural`, never imports the feed). A `Scenario` over a world (a materialised
`simrec.world.World` or a `simrec.procedural.ProceduralWorld`) has

* contexts = the world's users 0..U-1, a session's user drawn with probability
  activity[u] = softmax(user log-activity)_u (`world_activity`, the user mix of
  `simrec.world.sample_users`);
* one reward signal per quality q_s(u, a): a table f[U, I] or an `ItemFn` over the world's
  catalogue; `world_quality` is the world's true quality q(u, a) of formula (1) of `simrec.world`;
* a view model, and the scenario switches of `Scenario` (satiation, fatigue).

    world = make_world(key, "tiny")                     # or procedural.make_procedural(key, config)
    scenario = feed.scenario_from_world(world, feed.Logarithmic())          # one signal: "click" = q
    scenario = feed.scenario_from_world(world, view, {"like": q_like, "watch": q_watch}, satiation=0.02)
"""
from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from simrec import validate
from simrec.feed.policies import ItemFn, from_table
from simrec.feed.sessions import Scenario
from simrec.feed.views import ViewModel
from simrec.procedural import ProceduralWorld, row_quality, user_log_activity
from simrec.world import World, quality

__all__ = ["world_quality", "world_activity", "scenario_from_world"]


def _check_world(world) -> None:
    if not isinstance(world, (World, ProceduralWorld)):
        raise ValueError(f"world must be a simrec.world.World or a simrec.procedural.ProceduralWorld, "
                         f"got {type(world).__name__}")


def world_quality(world: World | ProceduralWorld) -> ItemFn:
    """The world's true quality q(u, a) (formula (1) of `simrec.world`) as an `ItemFn` over its
    users (contexts 0..U-1) and its I items.

    A `World`: the table `simrec.world.quality` of every user (f32[U, I]; U·I floats, refused
    beforehand when they do not fit, `simrec.validate.fits_in_memory`). A `ProceduralWorld`:
    `simrec.procedural.row_quality`, computed per (session, item) pair from the keys, so no
    users x items table is ever held; context ids are not range-checked inside jit (as for every
    function `ItemFn`): ids >= U would silently be other users' draws, so keep them in 0..U-1.
    """
    _check_world(world)
    if isinstance(world, ProceduralWorld):
        return ItemFn(row_quality, world, world.n_items)
    return from_table(quality(world, jnp.arange(world.n_users, dtype=jnp.int32)))


def world_activity(world: World | ProceduralWorld) -> jax.Array:
    """The context distribution of a feed over the world's users: activity[u] =
    softmax(user log-activity)_u, computed in float32, renormalised in float64 and returned as
    f32[U] (non-negative, summing to 1 to float32 rounding, as `Scenario` requires). O(U) memory
    (a procedural world's log-activities are drawn for every user, `user_log_activity`)."""
    _check_world(world)
    if isinstance(world, ProceduralWorld):
        validate.fits_in_memory(f"world_activity: the activity of {world.n_users:,} users", 40 * world.n_users)
        log_activity = user_log_activity(world, np.arange(world.n_users, dtype=np.int32))
    else:
        log_activity = world.user_log_activity
    activity = np.asarray(jax.nn.softmax(log_activity), np.float64)
    return jnp.asarray(activity / activity.sum(), jnp.float32)


def scenario_from_world(world: World | ProceduralWorld, view: ViewModel,
                        signals: Mapping[str, ItemFn | np.ndarray | jax.Array] | None = None, *,
                        activity=None, satiation: float = 0.0, fatigue: float = 0.0) -> Scenario:
    """A feed `Scenario` over `world`, a `simrec.world.World` or a `simrec.procedural.ProceduralWorld`.

    Contexts are the world's users 0..U-1, drawn with probability `activity` (f[U]; default
    `world_activity(world)`, the world's user mix). signals: {name: quality}, one reward signal per
    entry, in order; a quality is an `ItemFn` over the world's I items or a table f[U, I] of
    probabilities (read by `from_table`); default {"click": world_quality(world)}, the world's
    true quality. view, satiation, fatigue: as in `Scenario`, which checks every value.
    """
    _check_world(world)
    if signals is None:
        signals = {"click": world_quality(world)}
    if not isinstance(signals, Mapping) or not signals:
        raise ValueError("signals must be a non-empty mapping {name: quality table f[U, I] or ItemFn}")
    qualities = []
    for name, q in signals.items():
        if not isinstance(name, str):
            raise ValueError(f"signal names must be strings, got {name!r}")
        if isinstance(q, ItemFn):
            if q.num_items != world.n_items:
                raise ValueError(f"signals[{name!r}] covers {q.num_items} items but the world has "
                                 f"{world.n_items}")
            qualities.append(q)
        else:
            validate.matrix_shape(f"signals[{name!r}]", q, (world.n_users, world.n_items),
                                  "a quality table [users, items] or an ItemFn")
            qualities.append(from_table(q))
    if activity is None:
        activity = world_activity(world)
    else:
        validate.matrix_shape("activity", activity, (world.n_users,), "one probability per user")
    return Scenario(view, tuple(qualities), activity, tuple(signals), satiation=satiation, fatigue=fatigue)

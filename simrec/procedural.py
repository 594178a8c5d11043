"""Procedural worlds: the truth of `simrec.world`, derived on demand from keys, never stored.

A `ProceduralWorld` holds a key, the catalogue sizes and the generator parameters of a
`simrec.world.WorldConfig` (formula (1) of `simrec.world`); every latent quantity of user u or
item i is a pure function of (key, id):

    x_u   = d^(-1/4) * Normal(fold_in(fold_in(key, 0), u), (d,))        user factors
    y_i   = d^(-1/4) * Normal(fold_in(fold_in(key, 1), i), (d,))        item factors
    r_i   = 1 + pi(i),  pi = a keyed pseudo-random permutation of 0..I-1 (fold_in(key, 2))
    b_i   = -popularity_exponent * (log r_i - log(I!) / I)               item (popularity) bias
    log a_u = activity_scale * Normal(fold_in(fold_in(key, 3), u), ())    user log-activity
    q(u, i) = sigmoid(affinity_scale * <x_u, y_i> + b_i + offset)       formula (1)

These are the generator of `simrec.world.make_world` (same key partition 0..3, same laws) with
the per-id draws keyed by the id instead of by a position in one big draw, so any block of users
or items is computed on its own in O(block) time and memory, and a world of 10^7 users x 10^6
items costs only the blocks in flight. The popularity ranks are an exact permutation of 1..I
(a balanced Feistel network with cycle walking, Black & Rogaway, CT-RSA 2002, §3-4), so the
multiset of item biases is exactly that of a materialised world; log(I!)/I is the mean of
log r_i over the catalogue, the centring `make_world` computes with jnp.mean. The logit
⟨x_u, y_i⟩ is summed over the d dimensions in a fixed order, elementwise, so a block's values do
not depend on the block's size, order or companions (bit-identical); the pair function of the
feed, fused into the caller's jit, agrees with them to float32 rounding (a few ulp).

`materialise` returns the `simrec.world.World` holding exactly these numbers (for small worlds:
O((U + I) d) memory), so every function of `simrec.world` / `simrec.missing` applies to it.
The per-block functions plug into the rest of simrec: `score_function` scores a block of users
for `simrec.metrics`, `row_quality` is the quality of (session, item) pairs that
`simrec.feed.world_quality` wraps as a feed `ItemFn` (this module never imports the feed; a
feed `Scenario` over a procedural world is `simrec.feed.scenario_from_world`), and
`prior_relevant_block` / `observe_srs_block` / `observe_mnar_quality_block` sample Lim et
al.'s P+ and O+ (`simrec.missing`) for a block of users with keys fold_in(key, u), so a user's
sets do not depend on the block it is sampled in. Memory: O(block * items) or O(block * d),
never users x items, except `prior_relevant`, which holds the dense bool rows (U * I bytes) of
the users it samples until its CSR is built. Every function that allocates a block, a
materialised world or those rows first estimates the bytes and refuses, in one line, what
exceeds the available memory (`simrec.validate.fits_in_memory`). Day-to-day drift
(`simrec.world.drift`) applies to a materialised world; the sampling of session users
(`simrec.world.sample_users`, the feed's `simrec.feed.world_activity`) needs the O(U) activity
vector, `user_log_activity(world, arange(U))`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from simrec import validate
from simrec.missing import broadcast_rates, csr_from_blocks, observed_sizes, prior_relevant_nbytes
from simrec.world import World, WorldConfig, user_blocks, world_config, world_nbytes

__all__ = [
    "ProceduralWorld", "make_procedural", "user_factors", "item_factors", "item_bias",
    "user_log_activity", "popularity_rank", "quality_logit", "quality", "quality_pairs",
    "materialise", "score_function", "row_quality", "prior_relevant_block", "prior_relevant",
    "observe_srs_block", "observe_mnar_quality_block",
]

_MAX_IDS = 2**31 - 1              # ids are int32 everywhere in simrec
_FEISTEL_ROUNDS = 6               # rounds of the popularity permutation's Feistel network
_MATERIALISE_CHUNK = 1 << 16      # ids drawn at once by `materialise` (bounds temporaries)
_MIN_BUCKET = 64                  # smallest padded id count of a compiled draw


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["key", "affinity_scale", "popularity_exponent", "offset",
                                "activity_scale"],
                   meta_fields=["n_users", "n_items", "dim"])
@dataclass(frozen=True)
class ProceduralWorld:
    """A world of formula (1) of `simrec.world` stored as its key and generator parameters only
    (module docstring). Build one with `make_procedural`."""
    key: jax.Array                   # typed PRNG key: every latent quantity derives from it
    affinity_scale: jax.Array        # f32[], sd of the personal part of the logit
    popularity_exponent: jax.Array   # f32[], Zipf exponent of the item bias
    offset: jax.Array                # f32[], global logit offset
    activity_scale: jax.Array        # f32[], sd of the users' log-activity
    n_users: int = field(metadata=dict(static=True))    # U, 1..2^31-1
    n_items: int = field(metadata=dict(static=True))    # I, 1..2^31-1
    dim: int = field(metadata=dict(static=True))        # d, latent dimension

    def __post_init__(self):
        for name in ("n_users", "n_items"):
            validate.integer(f"ProceduralWorld.{name}", getattr(self, name), low=1, high=_MAX_IDS)
        validate.integer("ProceduralWorld.dim", self.dim, low=1)


def make_procedural(key: jax.Array, config: WorldConfig | str) -> ProceduralWorld:
    """A `ProceduralWorld` with the generator parameters of `config` (a `simrec.world.WorldConfig`
    or a name in `simrec.world.PRESETS`).  O(1) memory whatever the sizes."""
    config = world_config(config)
    if not (isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
            and key.shape == ()):
        raise ValueError("key must be a single typed PRNG key, e.g. jax.random.key(0)")
    for name in ("n_users", "n_items"):
        if getattr(config, name) > _MAX_IDS:
            raise ValueError(f"config.{name} = {getattr(config, name)} exceeds 2^31 - 1 (ids are "
                             "int32); split the population into several worlds")
    return ProceduralWorld(key=key, affinity_scale=jnp.float32(config.affinity_scale),
                           popularity_exponent=jnp.float32(config.popularity_exponent),
                           offset=jnp.float32(config.offset),
                           activity_scale=jnp.float32(config.activity_scale),
                           n_users=config.n_users, n_items=config.n_items, dim=config.dim)


# --------------------------------------------------------------------------------------------
# Per-id draws
# --------------------------------------------------------------------------------------------
# Each draw is a traceable function of (stream key, ids) that does not depend on the world's
# sizes (only on d), so that one compiled program serves every world; outside jit, ids are padded
# to a power of two (>= _MIN_BUCKET) so that few shapes are ever compiled. Padding cannot change
# a value: every id's draw is computed on its own.

def _ids(name: str, ids, size: int, what: str) -> jax.Array:
    """ids as int32 (checked to lie in [0, size) when concrete: fold_in would not complain)."""
    if not isinstance(ids, jax.core.Tracer):
        ids = validate.indices(name, ids, size, what)
    return jnp.asarray(ids, jnp.int32)


def _pow2(n: int) -> int:
    """The smallest power of two >= max(n, _MIN_BUCKET)."""
    return 1 << (max(int(n), _MIN_BUCKET) - 1).bit_length()


def _per_id(fn, ids: jax.Array) -> jax.Array:
    """fn mapped over every id of an int array of any shape.  Returns [*ids.shape, ...]."""
    flat = jax.vmap(fn)(ids.reshape(-1))
    return flat.reshape(ids.shape + flat.shape[1:])


def _draw(raw, jitted, ids: jax.Array, *args) -> jax.Array:
    """raw(*args, ids) under a trace; else jitted(*args, padded flat ids), cut back to shape."""
    if isinstance(ids, jax.core.Tracer):
        return raw(*args, ids)
    flat = ids.reshape(-1)
    padded = jnp.pad(flat, (0, _pow2(flat.shape[0]) - flat.shape[0]))
    out = jitted(*args, padded)[: flat.shape[0]]
    return out.reshape(ids.shape + out.shape[1:])


def _normal_rows(key: jax.Array, dim: int, ids: jax.Array) -> jax.Array:
    """d^(-1/4) N(0, I_d) row of id j from fold_in(key, j).  f32[*ids.shape, dim]."""
    std = dim ** -0.25                                        # Var<x_u, y_i> = d * std^4 = 1
    return _per_id(lambda j: std * jax.random.normal(jax.random.fold_in(key, j), (dim,)), ids)


def _scaled_normals(key: jax.Array, scale: jax.Array, ids: jax.Array) -> jax.Array:
    """scale * N(0, 1) of id j from fold_in(key, j).  f32[*ids.shape]."""
    return scale * _per_id(lambda j: jax.random.normal(jax.random.fold_in(key, j)), ids)


def _mix32(x: jax.Array) -> jax.Array:
    """An invertible 32-bit integer hash with full avalanche (Wellons' "lowbias32" constants,
    github.com/skeeto/hash-prospector).  u32 -> u32."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _ranks(key: jax.Array, n: jax.Array, ids: jax.Array) -> jax.Array:
    """1 + pi(i) for a keyed pseudo-random permutation pi of 0..n-1 (n: u32[], traced).

    A balanced Feistel network on 2h bits (4^h >= n) with round functions
    F_r(R) = mix32(R xor k_r) mod 2^h, k_r = bits(key)[r], is a permutation of 0..4^h-1
    whatever F_r (Luby & Rackoff 1988); cycle walking (apply it again while the value is >= n)
    restricts it to a permutation of 0..n-1 (Black & Rogaway, CT-RSA 2002, §3). The expected
    number of passes is 4^h / n < 4. A cheap integer hash, not a PRNG call, as round function:
    any F_r gives a bijection, so the ranks are exactly 1..I; F_r only has to scramble the order.
    """
    n = jnp.asarray(n, jnp.uint32)
    bits = jnp.maximum(jnp.uint32(2), jnp.uint32(32) - jax.lax.clz(n - jnp.uint32(1)))
    half = (bits + jnp.uint32(1)) // jnp.uint32(2)
    mask = (jnp.uint32(1) << half) - jnp.uint32(1)
    round_keys = jax.random.bits(key, (_FEISTEL_ROUNDS,), jnp.uint32)

    def network(y):
        left, right = y >> half, y & mask
        for r in range(_FEISTEL_ROUNDS):
            left, right = right, left ^ (_mix32(right ^ round_keys[r]) & mask)
        return (left << half) | right

    def one(i):
        return jax.lax.while_loop(lambda y: y >= n, network, network(i.astype(jnp.uint32)))

    return (_per_id(one, ids) + jnp.uint32(1)).astype(jnp.int32)


def _biases(key: jax.Array, n: jax.Array, mean_log_rank: jax.Array, exponent: jax.Array,
            ids: jax.Array) -> jax.Array:
    """b_i = -exponent (log r_i - mean_log_rank).  f32[*ids.shape]."""
    return -exponent * (jnp.log(_ranks(key, n, ids).astype(jnp.float32)) - mean_log_rank)


_normal_rows_jit = jax.jit(_normal_rows, static_argnums=1)
_scaled_normals_jit = jax.jit(_scaled_normals)
_ranks_jit = jax.jit(_ranks)
_biases_jit = jax.jit(_biases)


def _user_factors(world: ProceduralWorld, users: jax.Array) -> jax.Array:
    return _draw(_normal_rows, _normal_rows_jit, users, jax.random.fold_in(world.key, 0), world.dim)


def _item_factors(world: ProceduralWorld, items: jax.Array) -> jax.Array:
    return _draw(_normal_rows, _normal_rows_jit, items, jax.random.fold_in(world.key, 1), world.dim)


def _popularity_rank(world: ProceduralWorld, items: jax.Array) -> jax.Array:
    return _draw(_ranks, _ranks_jit, items, jax.random.fold_in(world.key, 2),
                 jnp.uint32(world.n_items))


def _item_bias(world: ProceduralWorld, items: jax.Array) -> jax.Array:
    mean_log_rank = jnp.float32(math.lgamma(world.n_items + 1) / world.n_items)  # (1/I) sum log r
    return _draw(_biases, _biases_jit, items, jax.random.fold_in(world.key, 2),
                 jnp.uint32(world.n_items), mean_log_rank, world.popularity_exponent)


def _user_log_activity(world: ProceduralWorld, users: jax.Array) -> jax.Array:
    return _draw(_scaled_normals, _scaled_normals_jit, users, jax.random.fold_in(world.key, 3),
                 world.activity_scale)


def user_factors(world: ProceduralWorld, users) -> jax.Array:
    """Latent factors x_u of `users` (i32 ids, any shape).  Returns f32[*users.shape, d]."""
    return _user_factors(world, _ids("users", users, world.n_users, "users in the world"))


def item_factors(world: ProceduralWorld, items) -> jax.Array:
    """Latent factors y_i of `items` (i32 ids, any shape).  Returns f32[*items.shape, d]."""
    return _item_factors(world, _ids("items", items, world.n_items, "items in the world"))


def popularity_rank(world: ProceduralWorld, items) -> jax.Array:
    """Popularity rank r_i in 1..I of `items` (a permutation over the catalogue).  i32[*shape]."""
    return _popularity_rank(world, _ids("items", items, world.n_items, "items in the world"))


def item_bias(world: ProceduralWorld, items) -> jax.Array:
    """Item bias b_i = -popularity_exponent (log r_i - log(I!)/I) of `items`.  f32[*shape]."""
    return _item_bias(world, _ids("items", items, world.n_items, "items in the world"))


def user_log_activity(world: ProceduralWorld, users) -> jax.Array:
    """Log-activity of `users` (their log-weight in the session mix).  f32[*users.shape]."""
    return _user_log_activity(world, _ids("users", users, world.n_users, "users in the world"))


# --------------------------------------------------------------------------------------------
# Quality
# --------------------------------------------------------------------------------------------

def _affinity(x: jax.Array, y: jax.Array) -> jax.Array:
    """<x, y> over the last axis, summed in the fixed order 0..d-1 elementwise (no dot kernel),
    so every entry is computed identically whatever the surrounding shape."""
    total = x[..., 0] * y[..., 0]
    for k in range(1, x.shape[-1]):
        total = total + x[..., k] * y[..., k]
    return total


def _logit(scale: jax.Array, offset: jax.Array, x: jax.Array, y: jax.Array,
           b: jax.Array) -> jax.Array:
    """scale <x, y> + b + offset, broadcasting x [..., d], y [..., d], b [...]."""
    return scale * _affinity(x, y) + b + offset


@jax.jit
def _logit_block(scale, offset, x: jax.Array, y: jax.Array, b: jax.Array) -> jax.Array:
    """f32[B, J] logits of x f32[B, d] against y f32[J, d], b f32[J]."""
    return _logit(scale, offset, x[:, None, :], y[None], b[None])


def _check_block_memory(what: str, n_users: int, n_items: int, bytes_per_pair: int) -> None:
    """Refuse a block of n_users x n_items pairs of `bytes_per_pair` beyond the available memory."""
    validate.fits_in_memory(f"{what} of {n_users:,} users x {n_items:,} items",
                            bytes_per_pair * n_users * n_items)


def _block_logit(world: ProceduralWorld, users: jax.Array, items: jax.Array) -> jax.Array:
    if not isinstance(users, jax.core.Tracer) and not isinstance(items, jax.core.Tracer):
        _check_block_memory("quality block", users.shape[0], items.shape[0], 2 * 4)  # logit, q
    return _logit_block(world.affinity_scale, world.offset, _user_factors(world, users),
                        _item_factors(world, items), _item_bias(world, items))


def _block_items(world: ProceduralWorld, items):
    if items is None:
        return jnp.arange(world.n_items, dtype=jnp.int32)
    items = _ids("items", items, world.n_items, "items in the world")
    if items.ndim != 1:
        raise ValueError(f"items must be a 1-D array of item ids, got shape {items.shape}")
    return items


def _block_users(world: ProceduralWorld, users) -> jax.Array:
    users = _ids("users", users, world.n_users, "users in the world")
    if users.ndim != 1:
        raise ValueError(f"users must be a 1-D array of user ids, got shape {users.shape}")
    return users


def quality_logit(world: ProceduralWorld, users, items=None) -> jax.Array:
    """logit q(u, i) = affinity_scale ⟨x_u, y_i⟩ + b_i + offset for a block of users and items.

    users: i32[B]; items: i32[J] (default: the whole catalogue, J = I).  Returns f32[B, J];
    memory O(B J + (B + J) d).
    """
    return _block_logit(world, _block_users(world, users), _block_items(world, items))


def quality(world: ProceduralWorld, users, items=None) -> jax.Array:
    """True quality q(u, i) of formula (1) for a block: sigmoid of `quality_logit`.  f32[B, J]."""
    return jax.nn.sigmoid(quality_logit(world, users, items))


def row_quality(world: ProceduralWorld, users: jax.Array, items: jax.Array) -> jax.Array:
    """q(users[n], items[n, k]): each user against its own row of items, for users i32[N] and
    items i32[N, K] (or both i32[N]).  Returns f32[N, K] (f32[N]).

    Traceable (fused into the caller's jit) and without range checks: ids outside 0..U-1 or
    0..I-1 silently give other ids' draws (`quality_pairs` checks them). The pair function of the
    feed's `simrec.feed.world_quality`, so a feed `Scenario` needs no users x items table; it
    agrees with `quality` to float32 rounding (a few ulp)."""
    x = _user_factors(world, users)
    x = x.reshape(x.shape[:1] + (1,) * (items.ndim - users.ndim) + x.shape[1:])
    return jax.nn.sigmoid(_logit(world.affinity_scale, world.offset, x,
                                 _item_factors(world, items), _item_bias(world, items)))


_row_quality_jit = jax.jit(row_quality)


def quality_pairs(world: ProceduralWorld, users, items) -> jax.Array:
    """q(users[n], items[n]) for pairs (same shape i32[N]).  Returns f32[N]."""
    users = _ids("users", users, world.n_users, "users in the world")
    items = _ids("items", items, world.n_items, "items in the world")
    if users.shape != items.shape or users.ndim != 1:
        raise ValueError(f"users and items must be 1-D of the same length, got {users.shape} "
                         f"and {items.shape}")
    return _row_quality_jit(world, users, items)


# --------------------------------------------------------------------------------------------
# Materialised world, metrics scores
# --------------------------------------------------------------------------------------------

def _chunked(fn, world: ProceduralWorld, n: int) -> jax.Array:
    """fn(world, ids) over ids 0..n-1 in chunks of `_MATERIALISE_CHUNK` (values as one call)."""
    parts = [fn(world, jnp.arange(s, min(s + _MATERIALISE_CHUNK, n), dtype=jnp.int32))
             for s in range(0, n, _MATERIALISE_CHUNK)]
    return jnp.concatenate(parts)


def materialise(world: ProceduralWorld) -> World:
    """The `simrec.world.World` holding exactly the numbers of the block functions (factors, item
    bias and user activity are bit-identical to `user_factors`, `item_factors`, `item_bias`,
    `user_log_activity`). Memory O((U + I) d) (`simrec.world.world_nbytes`): for worlds that fit
    in one process; refused beforehand when they do not (`simrec.validate.fits_in_memory`)."""
    validate.fits_in_memory(f"materialise: a world of {world.n_users:,} users x {world.n_items:,} "
                            f"items (dim {world.dim})",
                            world_nbytes(world.n_users, world.n_items, world.dim))
    return World(user_factors=_chunked(_user_factors, world, world.n_users),
                 item_factors=_chunked(_item_factors, world, world.n_items),
                 item_bias=_chunked(_item_bias, world, world.n_items),
                 user_log_activity=_chunked(_user_log_activity, world, world.n_users),
                 affinity_scale=world.affinity_scale, offset=world.offset,
                 n_users=world.n_users, n_items=world.n_items)


def score_function(world: ProceduralWorld, *, logit: bool = True):
    """A score function for `simrec.metrics` (``users: int[B] -> f32[B, I]``): the oracle scores
    logit q(u, i) (or q itself with logit=False; the logit never saturates, so it ranks without
    float32 ties). The item factors and biases are drawn once here (O(I d) memory); each call
    then costs O(B I). Values equal `quality_logit(world, users)` / `quality(world, users)`."""
    validate.fits_in_memory(f"score_function: the item factors of {world.n_items:,} items "
                            f"(dim {world.dim})", 4 * world.n_items * (world.dim + 1))
    y, b = _chunked(_item_factors, world, world.n_items), _chunked(_item_bias, world, world.n_items)

    def score(users) -> np.ndarray:
        x = _user_factors(world, _block_users(world, users))
        _check_block_memory("score_function scores", x.shape[0], world.n_items, 2 * 4)
        block = _logit_block(world.affinity_scale, world.offset, x, y, b)
        return np.asarray(block if logit else jax.nn.sigmoid(block))

    return score



# --------------------------------------------------------------------------------------------
# Missing-data samplers (simrec.missing) for blocks of users
# --------------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnums=(2,))
def _row_uniforms_jit(key: jax.Array, users: jax.Array, n_items: int, low: jax.Array) -> jax.Array:
    return jax.vmap(lambda u: jax.random.uniform(jax.random.fold_in(key, u), (n_items,),
                                                 minval=low))(users)


def _row_uniforms(key: jax.Array, users: jax.Array, n_items: int, low=0.0) -> jax.Array:
    """f32[B, n_items]: row u ~ Uniform[low, 1) from fold_in(key, u) (the layout of
    `simrec.missing.prior_relevant`); users padded to a power of two (few compiled shapes)."""
    padded = jnp.pad(users, (0, _pow2(users.shape[0]) - users.shape[0]))
    return _row_uniforms_jit(key, padded, n_items, jnp.float32(low))[: users.shape[0]]


def prior_relevant_block(key: jax.Array, world: ProceduralWorld, users, *,
                         model: str = "bernoulli", threshold: float = 0.5) -> jax.Array:
    """Prior-relevant sets P+ (Lim §2.1; `simrec.missing.prior_relevant`) of a block of users.

    model="bernoulli": (u, i) in P+ independently with probability q(u, i), uniforms of user u
    from fold_in(key, u) (independent of the block); "threshold": q(u, i) >= threshold.
    users: i32[B].  Returns bool[B, I]; memory O(B I): 13 bytes per pair (f32 uniforms, logit and
    quality, bool result).
    """
    validate.choice("model", model, ("bernoulli", "threshold"))
    users = _block_users(world, users)
    if model == "threshold":
        validate.probability("threshold", threshold, low_open=True, high_open=True)
    _check_block_memory("prior_relevant_block", users.shape[0], world.n_items, 13)
    q = jax.nn.sigmoid(_block_logit(world, users, jnp.arange(world.n_items, dtype=jnp.int32)))
    if model == "threshold":
        return q >= jnp.float32(threshold)
    return _row_uniforms(key, users, world.n_items) < q


def prior_relevant(key: jax.Array, world: ProceduralWorld, users=None, *,
                   model: str = "bernoulli", threshold: float = 0.5,
                   block_size: int = 1024) -> sp.csr_matrix:
    """P+ of `users` (default all) as bool CSR [len(users), I], built block by block from
    `prior_relevant_block` (row n is user users[n]); memory: the dense bool rows of `users`
    (len(users) * I bytes) until the CSR is built, plus O(block_size I) per block
    (`simrec.missing.prior_relevant_nbytes`, checked beforehand). On a materialised world with
    users = all, equal to `simrec.missing.prior_relevant`."""
    users = np.arange(world.n_users, dtype=np.int32) if users is None else \
        np.asarray(_block_users(world, users))
    width = min(validate.integer("block_size", block_size, low=1), max(len(users), 1))
    validate.fits_in_memory(f"prior_relevant: P+ of {len(users):,} users x {world.n_items:,} items",
                            prior_relevant_nbytes(len(users), world.n_items, width))
    masks = []
    for rows in user_blocks(len(users), width):
        padded = np.pad(users[rows], (0, width - len(rows)), mode="edge")   # one compiled shape
        block = prior_relevant_block(key, world, padded, model=model, threshold=threshold)
        masks.append(np.asarray(block)[: len(rows)])
    return csr_from_blocks(masks, world.n_items)


@jax.jit
def _keep_first(uniforms: jax.Array, prior: jax.Array, sizes: jax.Array,
                log_weights: jax.Array) -> jax.Array:
    """Per row, the `sizes` entries of `prior` with the largest Gumbel(0, 1) + log_weights
    (Gumbel-top-k: successive sampling without replacement, prob. ∝ exp(log_weights)) with
    Gumbels -log(-log uniforms); ties (probability ~ n^2 2^-24 per user) go to the lower id."""
    scores = jnp.where(prior, -jnp.log(-jnp.log(uniforms)) + log_weights, -jnp.inf)
    order = jnp.argsort(-scores, axis=1, stable=True)
    positions = jnp.zeros_like(order).at[jnp.arange(order.shape[0])[:, None], order].set(
        jnp.arange(order.shape[1], dtype=order.dtype)[None])
    return prior & (positions < sizes[:, None])


def _observe(key, users, prior, rate, log_weights) -> jax.Array:
    users = _ids("users", users, _MAX_IDS, "possible user ids")
    prior = jnp.asarray(prior, bool)
    if prior.ndim != 2 or users.shape != prior.shape[:1]:
        raise ValueError(f"prior must be bool[B, I] with one row per user of users (i32[B]), got "
                         f"prior {prior.shape} and users {users.shape}")
    _check_block_memory("observe block", prior.shape[0], prior.shape[1], 17)   # 4 x f32/i32 + bool
    counts = np.asarray(prior.sum(axis=1))
    sizes = observed_sizes(counts, broadcast_rates(rate, prior.shape[0]))
    uniforms = _row_uniforms(key, users, prior.shape[1], jnp.finfo(jnp.float32).tiny)
    return _keep_first(uniforms, prior, jnp.asarray(sizes, jnp.int32), log_weights)


def observe_srs_block(key: jax.Array, users, prior, rate) -> jax.Array:
    """Observed sets O+ of a block as simple random samples of its P+ (Lim §2.1;
    `simrec.missing.observe_srs`): |O+_u| by the size rule of `simrec.missing` and every subset
    of that size equally likely, drawn with fold_in(key, u) so a user's O+ does not depend on
    the block. users: i32[B]; prior: bool[B, I] (e.g. `prior_relevant_block`); rate: scalar or
    f[B] in [0, 1].  Returns bool[B, I] ⊆ prior."""
    return _observe(key, users, prior, rate, jnp.float32(0.0))


def observe_mnar_quality_block(key: jax.Array, world: ProceduralWorld, users, prior, rate,
                               beta: float) -> jax.Array:
    """Quality-biased O+ of a block (`simrec.missing.observe_mnar_quality`): same sizes as
    `observe_srs_block`, items drawn without replacement with probability ∝ q(u, i)^beta
    (q floored at the smallest positive float32). beta = 0 gives `observe_srs_block` exactly.
    Returns bool[B, I] ⊆ prior."""
    validate.finite("beta", beta)
    users = _block_users(world, users)
    if np.shape(prior) != (users.shape[0], world.n_items):
        raise ValueError(f"prior must be bool[B, I] = ({users.shape[0]}, {world.n_items}), one row "
                         f"per user over the world's items, got {np.shape(prior)}")
    q = quality(world, users)
    log_q = jnp.log(jnp.maximum(q, jnp.finfo(jnp.float32).tiny))
    return _observe(key, users, prior, rate, jnp.float32(beta) * log_q)

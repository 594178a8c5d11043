"""Stochastic training of MF-ADG (OPT-ADG) and MF-AUC: one jitted `fori_loop` per epoch, row-sparse steps.

A step samples `batch_size` pairs (u, i⁺) with the spec's `sampling` rule (default "user": u
uniform over users with positives, i⁺ uniform in O⁺ᵤ, Lim Alg. 1 line 2; or "positive": uniform
over the training positives, `simrec.models.positives.SAMPLINGS`), draws one negative per pair with the model's rule, and applies the
optax `optimizer` to the gradient of `simrec.models.mf.pairwise_loss`: the sum over the batch of
the weighted hinge plus (λ/2)(‖θᵤ‖² + ‖θᵢ⁺‖² + ‖θₙ‖²) for every pair that takes a step. An epoch
is ⌈nnz(train)/batch_size⌉ steps, i.e. about one sampled pair per training positive.

The step is row-sparse (`sparse_step`): the loss only involves the rows of the batch's users and
items, so the step gathers those rows, differentiates the loss with respect to them, sums the
gradients of a row that occurs several times, runs the optimizer on the gathered rows and their
gathered optimizer state, and scatters both back. Its cost is O(batch_size · k), independent of
|U| and |I|. For element-wise optimizers whose update of a row with zero gradient is zero and
leaves its state unchanged (SGD, Adagrad, RMSProp) this is exactly the dense step on the full
tables; with momentum or Adam it is their "lazy" variant (rows not in the batch neither move nor
decay their moments), and transforms that look across rows (e.g. global-norm clipping) would see
repeated rows more than once.

A grid of members that differ only in λ and the learning rate trains as one program
(`train_epochs_grid`): `jax.vmap` over the members' parameters, optimizer states, λ and rates,
with the key shared, so every member samples the same pairs (drawn once) and the same negative
streams, exactly as if trained alone with the same key; the members' steps are batched into one
XLA loop. On a 2-core CPU this saves little, the step being compute-bound: 7 members x 20 epochs
of a 3,000-user lastfm-like fold took 11.1 s together against 13.3 s one by one (after compiling).

Training is not data-parallel over devices (`simrec.sharding`): a step is small and sequential in
the parameters (batch 256, dim 32: about 0.5 ms on a 2-core CPU), about the cost of one all-reduce
of its row updates across devices, and a split batch would sum repeated rows' gradients in another
order, changing trained parameters in the last bits (README, "Scaling out").
"""
from __future__ import annotations

import functools
import itertools
from typing import Callable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import optax

from simrec import validate
from simrec.models import mf_auc, opt_adg
from simrec.models.positives import SAMPLINGS, PositiveSets, as_positive_csr, positive_sets
from simrec.models.mf import MF, init_mf, pair_rows_loss

__all__ = ["train", "train_epochs", "Epoch", "train_epoch", "sparse_step", "train_epochs_grid",
           "train_epoch_grid", "member"]

_NEGATIVE_RULES = {opt_adg.OptADG: opt_adg.draw_negatives, mf_auc.MFAUC: mf_auc.draw_negatives}


def _is_table(node) -> bool:
    return isinstance(node, MF)


def _rows(tree, users: jax.Array, items: jax.Array):
    """Every `MF` in `tree` (the parameters, the optimizer state's per-parameter tables) restricted
    to the rows `users` and `items` (repeats allowed); other leaves (e.g. Adam's count) as they are."""
    def take(node):
        if not _is_table(node):
            return node
        return MF(user=node.user[users], item=node.item[items], item_bias=node.item_bias[items])
    return jax.tree.map(take, tree, is_leaf=_is_table)


def _put(tree, users: jax.Array, items: jax.Array, values):
    """`tree` with the rows `users` / `items` of every `MF` set to the rows of the matching `MF` in
    `values` (repeated rows must carry equal values); other leaves are taken from `values`."""
    def put(node, value):
        if not _is_table(node):
            return value
        return MF(user=node.user.at[users].set(value.user), item=node.item.at[items].set(value.item),
                  item_bias=node.item_bias.at[items].set(value.item_bias))
    return jax.tree.map(put, tree, values, is_leaf=_is_table)


def _row_totals(owner: jax.Array, stamp: jax.Array, rows: jax.Array, grads: jax.Array):
    """Sum the gradients of repeated rows: every occurrence gets the total of its row.

    owner: i32[R] (one entry per table row, all < stamp); rows: i32[n]; grads: f32[n, ...].
    Each row's occurrences agree on a representative, the last of them, by a scatter-max of
    stamp + position into `owner` (so `owner` never needs clearing: later stamps are larger).
    Returns (owner, f32[n, ...] totals).
    """
    n = rows.shape[0]
    owner = owner.at[rows].max(stamp + jnp.arange(n, dtype=owner.dtype))
    representative = owner[rows] - stamp
    sums = jnp.zeros_like(grads).at[representative].add(grads)
    return owner, sums[representative]


def sparse_step(optimizer: optax.GradientTransformation, params: MF, opt_state,
                owners: tuple[jax.Array, jax.Array], stamp: jax.Array, users: jax.Array,
                positives: jax.Array, negatives: jax.Array, weights: jax.Array, active: jax.Array,
                l2: jax.Array):
    """One optimizer step on `pairwise_loss`, touching only the rows the batch uses.

    users, positives, negatives: i32[B]; weights: f32[B]; active: bool[B]; l2: f32[]. The step
    gathers the B user rows and 2B item rows of the batch, differentiates the loss with respect
    to them, gives every occurrence of a row the sum of that row's gradients (as in the dense
    step), runs the optimizer on the gathered rows and their gathered state and writes both back
    (repeated rows write equal values). owners: (i32[U], i32[I]) bookkeeping for `_row_totals`,
    all entries < stamp: i32[], which must grow by at least 2B per step. O(B·k) work.
    Returns (params, opt_state, owners, loss).
    """
    batch = users.shape[0]
    items = jnp.concatenate([positives, negatives])
    local = _rows(params, users, items)
    rows_loss = lambda rows: pair_rows_loss(rows.user, rows.item[:batch], rows.item[batch:],
                                            rows.item_bias[:batch], rows.item_bias[batch:],
                                            weights, active, l2)
    loss, grads = jax.value_and_grad(rows_loss)(local)
    user_owner, user_grad = _row_totals(owners[0], stamp, users, grads.user)
    item_owner, item_grad = _row_totals(owners[1], stamp, items,
                                        jnp.concatenate([grads.item, grads.item_bias[:, None]], 1))
    grads = MF(user=user_grad, item=item_grad[:, :-1], item_bias=item_grad[:, -1])
    updates, local_state = optimizer.update(grads, _rows(opt_state, users, items), local)
    return (_put(params, users, items, optax.apply_updates(local, updates)),
            _put(opt_state, users, items, local_state), (user_owner, item_owner), loss)


def _epoch(key: jax.Array, spec, params: MF, opt_state, sets: PositiveSets, l2: jax.Array,
           steps: jax.Array, optimizer: optax.GradientTransformation, batch_size: int):
    """`train_epoch` before jit (also the member function of `train_epoch_grid`)."""
    draw_negatives = _NEGATIVE_RULES[type(spec)]
    sample = SAMPLINGS[spec.sampling]

    def step(index, carry):
        params, opt_state, owners, loss_sum, active_sum = carry
        pair_key, negative_key = jax.random.split(jax.random.fold_in(key, index))
        users, positives = sample(pair_key, sets, batch_size)
        negatives, weights, active = draw_negatives(negative_key, spec, params, sets, users, positives)
        params, opt_state, owners, loss = sparse_step(
            optimizer, params, opt_state, owners, index * (2 * batch_size), users, positives,
            negatives, weights, active, l2)
        return params, opt_state, owners, loss_sum + loss, active_sum + jnp.sum(active)

    zero = jnp.zeros((), jnp.float32)
    owners = (jnp.full(params.user.shape[:1], -1, jnp.int32),
              jnp.full(params.item.shape[:1], -1, jnp.int32))
    params, opt_state, _, loss_sum, active_sum = jax.lax.fori_loop(
        0, steps, step, (params, opt_state, owners, zero, zero))
    pairs = jnp.maximum(steps, 1) * batch_size
    return params, opt_state, loss_sum / pairs, active_sum / pairs


@functools.partial(jax.jit, static_argnames=("optimizer", "batch_size"))
def train_epoch(key: jax.Array, spec, params: MF, opt_state, sets: PositiveSets, l2: jax.Array,
                steps: jax.Array, *, optimizer: optax.GradientTransformation, batch_size: int):
    """`steps` training steps of `spec` (an `OptADG` or `MFAUC`); step s uses `fold_in(key, s)`.

    steps is traced (i32[]), so one compilation serves any number of steps; the whole epoch is one
    XLA loop without host round-trips. Each step draws batch_size (u, i⁺) pairs with the rule
    `SAMPLINGS[spec.sampling]` and takes a `sparse_step`. Returns (params, opt_state, mean_loss:
    f32[] per sampled pair, step_share: f32[]), where step_share is the share of sampled pairs
    that took a step (for OPT-ADG: that found a violator).
    """
    return _epoch(key, spec, params, opt_state, sets, l2, steps, optimizer, batch_size)


@functools.partial(jax.jit, static_argnames=("make_optimizer", "batch_size"))
def train_epoch_grid(key: jax.Array, spec, params: MF, opt_state, sets: PositiveSets,
                     l2s: jax.Array, learning_rates: jax.Array, steps: jax.Array, *,
                     make_optimizer: Callable[[jax.Array], optax.GradientTransformation],
                     batch_size: int):
    """`train_epoch` of M members at once: member m has λ = l2s[m] and the optimizer
    make_optimizer(learning_rates[m]) (e.g. `optax.adagrad`). params, opt_state: the members'
    states stacked on a leading axis [M, ...]; l2s, learning_rates: f32[M]; the key is shared.
    Returns (params, opt_state, mean_loss: f32[M], step_share: f32[M])."""
    def one(params, opt_state, l2, rate):
        return _epoch(key, spec, params, opt_state, sets, l2, steps, make_optimizer(rate),
                      batch_size)
    return jax.vmap(one)(params, opt_state, l2s, learning_rates)


class Epoch(NamedTuple):
    """A training run after `epochs` epochs: params, the last epoch's mean loss per sampled pair and
    share of sampled pairs that took a step (f32[] on the device; NaN before the first epoch), and
    pairs: the (u, i⁺) pairs sampled so far (epochs · ⌈nnz/batch_size⌉ · batch_size)."""
    epochs: int
    params: MF
    loss: jax.Array
    step_share: jax.Array
    pairs: int


def train_epochs(key: jax.Array, model_spec, train_matrix, *, batch_size: int,
                 optimizer: optax.GradientTransformation, l2: float) -> Iterator[Epoch]:
    """The run of `train` one epoch at a time, without an end: validates the arguments at once,
    then returns an iterator of `Epoch` states, first the initial parameters (epochs = 0), then
    the state after every epoch 1, 2, ... (exactly the parameters `train` returns for that many
    epochs). The consumer decides when to stop, e.g. on a validation metric."""
    validate.finite("l2", l2, low=0.0)
    if not (callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, "
                         f"got {type(optimizer).__name__}")
    loop_key, params, sets, steps, batch_size = _start(key, model_spec, train_matrix, batch_size)
    return _epochs(loop_key, model_spec, params, optimizer.init(params), sets, jnp.float32(l2),
                   steps, optimizer, batch_size)


def _start(key: jax.Array, model_spec, train_matrix, batch_size: int):
    """Validated common start of a run: (loop key, initial MF, PositiveSets, steps per epoch,
    batch_size)."""
    if type(model_spec) not in _NEGATIVE_RULES:
        raise ValueError(f"model_spec must be one of {[t.__name__ for t in _NEGATIVE_RULES]}, "
                         f"got {type(model_spec).__name__}")
    batch_size = validate.integer("batch_size", batch_size, low=1)
    csr = as_positive_csr(train_matrix, "train_matrix")
    n_users, n_items = csr.shape
    if n_items < 2:
        raise ValueError(f"train_matrix needs at least 2 items to draw negatives, got {n_items}")
    init_key, loop_key = jax.random.split(key)
    params = init_mf(init_key, n_users, n_items, model_spec.dim, model_spec.init_scale)
    return loop_key, params, positive_sets(csr), -(-csr.nnz // batch_size), batch_size


def train_epochs_grid(key: jax.Array, model_spec, train_matrix, *, batch_size: int,
                      make_optimizer: Callable[[jax.Array], optax.GradientTransformation],
                      l2s, learning_rates) -> Iterator[Epoch]:
    """`train_epochs` of M members that differ only in λ = l2s[m] and the optimizer
    make_optimizer(learning_rates[m]) (a hashable optax constructor such as `optax.adagrad`; pass
    the same object to reuse the compiled epoch), trained together (`train_epoch_grid`, module
    docstring). Every member starts from the same initial parameters and uses the same key, so
    member m's parameters after e epochs equal, up to float rounding, those of
    `train_epochs(key, model_spec, train_matrix, batch_size=batch_size,
    optimizer=make_optimizer(learning_rates[m]), l2=l2s[m])`. Yields `Epoch` states whose params
    are stacked [M, ...] (`member(params, m)` takes one) and whose loss, step_share are f32[M]."""
    l2s = [validate.finite(f"l2s[{m}]", v, low=0.0) for m, v in enumerate(l2s)]
    learning_rates = [validate.finite(f"learning_rates[{m}]", v, low=0.0)
                      for m, v in enumerate(learning_rates)]
    if not l2s or len(l2s) != len(learning_rates):
        raise ValueError(f"l2s and learning_rates must be non-empty and of equal length (one "
                         f"entry per member), got {len(l2s)} and {len(learning_rates)}")
    if not callable(make_optimizer):
        raise ValueError(f"make_optimizer must be an optax constructor taking the learning rate, "
                         f"e.g. optax.adagrad, got {type(make_optimizer).__name__}")
    loop_key, params, sets, steps, batch_size = _start(key, model_spec, train_matrix, batch_size)
    rates = jnp.asarray(learning_rates, jnp.float32)
    stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(l2s),) + x.shape), params)
    opt_state = jax.vmap(lambda p, rate: make_optimizer(rate).init(p))(stacked, rates)
    return _epochs_grid(loop_key, model_spec, stacked, opt_state, sets,
                        jnp.asarray(l2s, jnp.float32), rates, steps, make_optimizer, batch_size)


def member(params, m: int):
    """Member m of stacked parameters (`train_epochs_grid`).  Returns MF."""
    return jax.tree.map(lambda x: x[m], params)


def _epochs_grid(loop_key, model_spec, params: MF, opt_state, sets: PositiveSets, l2s, rates,
                 steps: int, make_optimizer, batch_size: int) -> Iterator[Epoch]:
    """`train_epochs_grid`' iterator; epoch e uses fold_in(loop_key, e) as `_epochs`."""
    nan = jnp.full(l2s.shape, jnp.nan, jnp.float32)
    yield Epoch(0, params, nan, nan, 0)
    for epoch in itertools.count():
        params, opt_state, loss, step_share = train_epoch_grid(
            jax.random.fold_in(loop_key, epoch), model_spec, params, opt_state, sets, l2s, rates,
            jnp.int32(steps), make_optimizer=make_optimizer, batch_size=batch_size)
        yield Epoch(epoch + 1, params, loss, step_share, (epoch + 1) * steps * batch_size)


def _epochs(loop_key, model_spec, params: MF, opt_state, sets: PositiveSets, l2: jax.Array,
            steps: int, optimizer, batch_size: int) -> Iterator[Epoch]:
    """`train_epochs`' iterator: epoch e (0-based) runs `train_epoch` with fold_in(loop_key, e)."""
    nan = jnp.float32(jnp.nan)
    yield Epoch(0, params, nan, nan, 0)
    for epoch in itertools.count():
        params, opt_state, loss, step_share = train_epoch(
            jax.random.fold_in(loop_key, epoch), model_spec, params, opt_state, sets, l2,
            jnp.int32(steps), optimizer=optimizer, batch_size=batch_size)
        yield Epoch(epoch + 1, params, loss, step_share, (epoch + 1) * steps * batch_size)


def train(key: jax.Array, model_spec, train_matrix, *, epochs: int, batch_size: int,
          optimizer: optax.GradientTransformation, l2: float,
          callback: Callable[[int, MF, dict], None] | None = None) -> MF:
    """Fit MF-ADG (`OptADG` spec) or MF-AUC (`MFAUC` spec) to the positives of `train_matrix`.

    train_matrix: scipy.sparse [U, I] of observed positives. Parameters start at
    `init_mf(split(key)[0], U, I, spec.dim, spec.init_scale)`, so both models start from the same
    point for the same key and dim (epochs=0 returns that point); epoch e uses
    `fold_in(split(key)[1], e)`. Same key => identical parameters. `optimizer` is any optax
    transformation (e.g. `optax.sgd(0.05)`, `optax.adagrad(0.1)`), applied row-sparsely to the
    gradient of the step's loss (see the module docstring); pass the same object to reuse the
    compiled epoch. `callback(epoch, params, {"loss": per-pair mean loss, "step_share": share of
    pairs that took a step})` runs on the host after each epoch. Returns MF.
    """
    epochs = validate.integer("epochs", epochs, low=0)
    run = train_epochs(key, model_spec, train_matrix, batch_size=batch_size, optimizer=optimizer,
                       l2=l2)
    for state in itertools.islice(run, epochs + 1):
        if callback is not None and state.epochs > 0:
            callback(state.epochs - 1, state.params,
                     {"loss": float(state.loss), "step_share": float(state.step_share)})
    return state.params

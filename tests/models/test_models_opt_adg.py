"""OPT-ADG's negative search, weights and step against a literal, loop-based Alg. 1 (Lim RecSys'15).

Searches and steps run on the planted world of conftest.py, with the MF-ADG trained there.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec.models.positives import positive_sets, sample_pairs
from simrec.models.mf import pairwise_loss
from simrec.models.opt_adg import (OptADG, find_violators, max_draws, pair_streams, rank_cost,
                                   violator_weight)
from simrec.models.training import train_epoch

_find_violators = jax.jit(find_violators)


def _alg1(params, user, positive, draws, gamma):
    """Alg. 1 lines 3-15 as written, on a given stream of draws: (violator or None, n, weight).

    Scores f(u, i) = θᵤ·θᵢ + bᵢ in float64 on the host.
    """
    user_vectors, item_vectors, bias = (np.asarray(x, np.float64) for x in
                                        (params.user, params.item, params.item_bias))
    n_items = item_vectors.shape[0]

    def f(item):
        return user_vectors[user] @ item_vectors[item] + bias[item]

    stream = iter(draws)
    count = 0
    while True:
        negative = next(stream)
        if f(positive) - f(negative) < 1:
            n = count + 1  # draws including the violator
            return negative, n, 1 - 1 / math.log2((n_items - 1) // n + 2)
        count += 1
        if count >= (n_items - 1) / gamma:
            return None, 0, 0.0


@pytest.mark.parametrize("layout", [{}, {"chunk_size": 16, "search_width": 1}],
                         ids=["chunks 4-4-2, blocks of 16", "one pass, own streams"])
def test_search_matches_loop_based_alg1(world, mf_adg, layout):
    """Same draws => same violator, same n (draws including it) and same weight as a literal Alg. 1.

    world.adg_spec: 10 draws at most, cut into chunks of 4 (the last one partial, so the search
    loops), blocks of 16 of the 100 pairs (the last one padded) share a stream that each pair
    reads in its own order; or all 10 draws in one pass with a stream per pair. The trained model
    leaves some pairs without a violator.
    """
    spec = dataclasses.replace(world.adg_spec, **layout)
    batch, key, n_items = 100, jax.random.key(7), world.n_items
    rng = np.random.default_rng(1)
    users = rng.integers(0, world.n_users, batch)
    positives = np.array([rng.choice(world.train[u].indices) for u in users])
    violators, n_draws, found = map(np.asarray, _find_violators(key, spec, mf_adg, jnp.asarray(users),
                                                                jnp.asarray(positives)))
    weights = np.asarray(violator_weight(np.maximum(n_draws, 1), n_items))
    cap = math.ceil((n_items - 1) / spec.gamma)
    streams = np.asarray(jax.jit(pair_streams, static_argnums=(1, 3))(key, spec, jnp.asarray(positives),
                                                                      n_items))
    assert streams.shape == (batch, cap)
    outcomes = []
    for b in range(batch):
        violator, n, weight = _alg1(mf_adg, users[b], positives[b], streams[b], spec.gamma)
        assert found[b] == (violator is not None)
        if violator is not None:
            assert (violators[b], n_draws[b]) == (violator, n)
            assert weights[b] == pytest.approx(weight, rel=1e-6)
        outcomes.append(n if violator is not None else -1)
    outcomes = np.array(outcomes)
    # the batch exercises immediate hits, hits past the first chunk and pairs without a violator
    assert np.any(outcomes == 1) and np.any(outcomes == -1)
    assert np.any(outcomes > 4)


def test_pair_streams_are_iid_uniform_on_the_other_items():
    """Every pair reads draws uniform on I∖{i⁺} (all positions pooled per positive), consecutive
    draws are independent (equal with probability 1/(|I|-1)), and the pairs of one block read
    re-orderings of one stream. 7 items, γ = 1: 6 draws in chunks of 4 and 2; blocks of 8 of 24
    pairs. Bounds: 4 standard errors of binomial counts."""
    n_items, batch, reps = 7, 24, 1500
    spec = OptADG(dim=2, gamma=1.0, chunk_size=4, search_width=8)
    positives = jnp.asarray(np.arange(batch) % n_items, jnp.int32)
    streams = jax.jit(jax.vmap(pair_streams, (0, None, None, None)), static_argnums=(1, 3))(
        jax.random.split(jax.random.key(5), reps), spec, positives, n_items)
    streams, positives = np.asarray(streams), np.asarray(positives)       # [reps, B, 6], [B]
    assert streams.shape == (reps, batch, max_draws(n_items, spec.gamma))
    for positive in range(n_items):
        draws = streams[:, positives == positive].ravel()
        counts = np.bincount(draws, minlength=n_items)
        assert counts[positive] == 0
        p = 1 / (n_items - 1)
        assert np.all(np.abs(np.delete(counts, positive) - draws.size * p)
                      <= 4 * np.sqrt(draws.size * p * (1 - p)))
    repeats = (streams[:, :, 1:] == streams[:, :, :-1]).ravel()
    p = 1 / (n_items - 1)
    assert abs(repeats.mean() - p) <= 4 * np.sqrt(p * (1 - p) / repeats.size)
    same = jnp.zeros(batch, jnp.int32)            # one positive: rows of a block are permutations
    rows = np.sort(np.asarray(jax.jit(pair_streams, static_argnums=(1, 3))(
        jax.random.key(6), spec, same, n_items)), axis=1).reshape(3, 8, -1)
    assert np.all(rows == rows[:, :1]) and not np.all(rows == rows[:1])


@pytest.mark.parametrize("n_items, gamma", [(2, 1.0), (200, 4.0), (200, 300.0), (101, 100.0),
                                             (102, 100.0), (10, 0.5)])
def test_max_draws_is_the_length_of_a_failed_alg1_search(n_items, gamma):
    draws = 0
    while True:  # Alg. 1 lines 5-12 when no draw violates
        draws += 1
        if draws >= (n_items - 1) / gamma:
            break
    assert max_draws(n_items, gamma) == draws


def test_rank_cost_values():
    k = np.array([0, 1, 2, 10, 1000])
    np.testing.assert_allclose(rank_cost(k), 1 - 1 / np.log2(k + 2), rtol=1e-6)


def test_sgd_step_is_gradient_of_the_written_out_loss(world, mf_adg):
    """One SGD step of train_epoch equals params - lr * grad of Lim's per-pair objective."""
    spec, batch, l2, lr = world.adg_spec, world.training["batch_size"], 0.3, world.learning_rate
    optimizer, n_items = world.optimizer, world.n_items
    sets = positive_sets(world.train)
    key = jax.random.key(11)
    new, _, _, share = train_epoch(key, spec, mf_adg, optimizer.init(mf_adg), sets, jnp.float32(l2),
                                   jnp.int32(1), optimizer=optimizer, batch_size=batch)
    # the step's samples: train_epoch splits fold_in(key, 0) into a pair key and a negative key
    pair_key, negative_key = jax.random.split(jax.random.fold_in(key, 0))
    users, positives = jax.jit(sample_pairs, static_argnums=2)(pair_key, sets, batch)
    violators, n_draws, found = _find_violators(negative_key, spec, mf_adg, users, positives)
    users, positives, violators, n_draws, found = map(np.asarray, (users, positives, violators,
                                                                   n_draws, found))
    assert 0 < found.sum() < batch and float(share) == pytest.approx(found.mean())
    weight = np.array([1 - 1 / math.log2((n_items - 1) // n + 2) if ok else 0.0
                       for n, ok in zip(n_draws, found)], np.float32)

    def objective(p):
        """Σ over pairs with a violator v after n draws of
        C(⌊(|I|-1)/n⌋)(f(u,v) - f(u,i⁺) + 1) + λ/2 (‖θᵤ‖² + ‖θᵢ⁺‖² + ‖θᵥ‖²)."""
        u, i, v = p.user[users], p.item[positives], p.item[violators]
        f_pos = jnp.sum(u * i, axis=1) + p.item_bias[positives]
        f_neg = jnp.sum(u * v, axis=1) + p.item_bias[violators]
        norms = jnp.sum(u * u, axis=1) + jnp.sum(i * i, axis=1) + jnp.sum(v * v, axis=1)
        return jnp.sum(weight * (f_neg - f_pos + 1) + np.where(found, l2 / 2, 0.0) * norms)

    grad = jax.jit(jax.grad(objective))(mf_adg)
    for name in ("user", "item", "item_bias"):
        expected = getattr(mf_adg, name) - lr * getattr(grad, name)
        np.testing.assert_allclose(getattr(new, name), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(new.user, mf_adg.user)


def test_pairwise_loss_gradient_matches_autodiff_of_direct_sum(mf_adg):
    params = mf_adg
    users, positives, negatives = np.array([0, 1, 1, 4]), np.array([3, 5, 5, 9]), np.array([7, 5, 8, 3])
    weights = np.array([0.5, 1.0, 0.0, 0.8], np.float32)
    active = np.array([True, True, False, True])
    l2 = 0.2

    def direct(p):
        total = 0.0
        for u, i, n, weight, takes_step in zip(users, positives, negatives, weights, active):
            margin = p.user[u] @ (p.item[n] - p.item[i]) + p.item_bias[n] - p.item_bias[i] + 1
            total = total + weight * jnp.maximum(margin, 0.0)
            if takes_step:
                total = total + l2 / 2 * (jnp.sum(p.user[u] ** 2) + jnp.sum(p.item[i] ** 2)
                                          + jnp.sum(p.item[n] ** 2))
        return total

    got_value, got = jax.jit(jax.value_and_grad(pairwise_loss))(params, users, positives, negatives,
                                                                weights, active, l2)
    want_value, want = jax.jit(jax.value_and_grad(direct))(params)
    assert float(got_value) == pytest.approx(float(want_value), rel=1e-5)
    for name in ("user", "item", "item_bias"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("field, value", [("dim", 0), ("gamma", 0.0), ("gamma", -1.0),
                                           ("gamma", float("nan")), ("chunk_size", 0),
                                           ("search_width", 0), ("init_scale", -0.1),
                                           ("sampling", "items"), ("sampling", 1)])
def test_spec_validation_names_the_argument(field, value):
    with pytest.raises(ValueError, match=field):
        OptADG(**{field: value})

"""Samplers of simrec.models.positives against brute-force enumeration and standard errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from simrec.models.positives import (as_positive_csr, nth_unobserved, positive_sets, sample_pairs,
                                sample_positives, unobserved_items)


def _rows(rows, n_items):
    """CSR from a list of item lists."""
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.concatenate([np.asarray(r, int) for r in rows]) if indptr[-1] else np.zeros(0, int)
    return sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(len(rows), n_items))


ROWS = [[0, 3, 4, 9], [], [1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [9], [2, 5, 6]]


def test_nth_unobserved_enumerates_the_complement_in_order():
    sets = positive_sets(_rows(ROWS, 10))
    complements = [[i for i in range(10) if i not in row] for row in ROWS]
    users = np.concatenate([np.full(len(c), u) for u, c in enumerate(complements)])
    ranks = np.concatenate([np.arange(len(c)) for c in complements])
    got = jax.jit(nth_unobserved)(sets, jnp.asarray(users, jnp.int32), jnp.asarray(ranks, jnp.int32))
    assert np.asarray(got).tolist() == sum(complements, [])


def test_unobserved_items_uniform_on_complement():
    sets = positive_sets(_rows(ROWS, 10))
    n = 40_000
    users = np.repeat(np.arange(len(ROWS)), n)
    items, has = map(np.asarray, jax.jit(unobserved_items)(jax.random.key(0), sets,
                                                           jnp.asarray(users, jnp.int32)))
    for user, row in enumerate(ROWS):
        complement = [i for i in range(10) if i not in row]
        assert np.all(has[users == user] == bool(complement))
        if not complement:
            continue
        counts = np.bincount(items[users == user], minlength=10)
        assert counts[row].sum() == 0
        p = 1 / len(complement)
        se = np.sqrt(n * p * (1 - p))
        assert np.all(np.abs(counts[complement] - n * p) <= 4 * se)


def test_sample_pairs_uniform_user_then_uniform_positive():
    sets = positive_sets(_rows(ROWS, 10))
    n = 120_000
    users, positives = jax.jit(sample_pairs, static_argnums=2)(jax.random.key(2), sets, n)
    users, positives = np.asarray(users), np.asarray(positives)
    active = [u for u, r in enumerate(ROWS) if r]
    for user, row in enumerate(ROWS):
        for item in range(10):
            count = np.sum((users == user) & (positives == item))
            p = (1 / len(active)) * (1 / len(row)) if item in row else 0.0
            assert abs(count - n * p) <= 4 * np.sqrt(n * p * (1 - p))


def test_sample_positives_uniform_over_the_training_positives():
    """P(u, i⁺) = 1/nnz for every stored (u, i⁺), 0 elsewhere (4 SE of each binomial count)."""
    sets = positive_sets(_rows(ROWS, 10))
    nnz = sum(len(r) for r in ROWS)
    n = 120_000
    users, positives = jax.jit(sample_positives, static_argnums=2)(jax.random.key(3), sets, n)
    users, positives = np.asarray(users), np.asarray(positives)
    assert users.dtype == np.int32 and positives.dtype == np.int32
    for user, row in enumerate(ROWS):
        for item in range(10):
            count = np.sum((users == user) & (positives == item))
            p = 1 / nnz if item in row else 0.0
            assert abs(count - n * p) <= 4 * np.sqrt(n * p * (1 - p))


def test_as_positive_csr_takes_booleans_or_0_1_and_validates():
    csr = as_positive_csr(sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])))
    assert csr.dtype == bool and csr.toarray().tolist() == [[False, True, False], [True, False, True]]
    assert csr.indices.dtype == np.int32 and csr.has_sorted_indices
    dense = as_positive_csr(np.array([[False, True], [True, True]]))
    assert dense.toarray().tolist() == [[False, True], [True, True]]
    with pytest.raises(ValueError, match="train"):
        as_positive_csr(sp.csr_matrix((3, 4)))
    with pytest.raises(ValueError, match="binarise"):               # ratings are not positives
        as_positive_csr(sp.csr_matrix(np.array([[0.0, 2.0, 0.5]])))
    with pytest.raises(ValueError, match="boolean"):
        as_positive_csr(sp.csr_matrix(np.array([[np.nan, 1.0]])))
    with pytest.raises(ValueError, match="boolean"):
        as_positive_csr(sp.csr_matrix(np.array([[-1.0, 1.0]])))
    with pytest.raises(ValueError, match="2-D"):
        as_positive_csr(np.ones(3))
    with pytest.raises(ValueError, match="scipy.sparse"):
        as_positive_csr([[1, 0]])


def test_padded_sets_draw_exactly_what_unpadded_arrays_draw_and_share_their_shapes():
    """`positive_sets` pads indices and active users to powers of two: every sampler reads only the
    real entries (the same draws as from the bare CSR arrays), and training sets of one catalogue
    whose sizes differ a little have the same shapes and statics, i.e. one compiled program."""
    csr = as_positive_csr(_rows(ROWS, 10))
    active = np.flatnonzero(np.diff(csr.indptr))
    padded = positive_sets(csr)
    assert padded.indices.shape == (32,) and padded.active_users.shape == (8,) and padded.max_degree == 15
    bare = type(padded)(indptr=padded.indptr, indices=jnp.asarray(csr.indices), active_users=jnp.asarray(active),
                        nnz=jnp.int32(csr.nnz), n_active=jnp.int32(active.size), n_items=10, max_degree=10)
    users = jnp.asarray(np.repeat(np.arange(len(ROWS)), 50), jnp.int32)
    for seed in range(3):
        key = jax.random.key(seed)
        for draw in (lambda sets: sample_pairs(key, sets, 500), lambda sets: sample_positives(key, sets, 500),
                     lambda sets: unobserved_items(key, sets, users)):
            for got, want in zip(draw(padded), draw(bare)):
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    smaller = positive_sets(_rows([r[:-1] if len(r) == 10 else r for r in ROWS], 10))     # nnz 18, max 9
    same = jax.tree_util.tree_structure(smaller) == jax.tree_util.tree_structure(padded)
    assert same and [a.shape for a in jax.tree_util.tree_leaves(smaller)] == \
        [a.shape for a in jax.tree_util.tree_leaves(padded)]

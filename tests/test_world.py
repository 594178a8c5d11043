import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec.missing import DEFAULT_OBSERVATION_RATE, expected_observed_count
from simrec.world import (PAPER_OBSERVED_POSITIVES, PRESETS, WorldConfig, drift,
                          make_world, quality, quality_logit, quality_pairs, sample_users,
                          user_blocks)


@pytest.fixture(scope="module")
def tiny():
    return make_world(jax.random.key(0), "tiny")


@pytest.fixture(scope="module")
def medium():
    return make_world(jax.random.key(4), WorldConfig(n_users=2000, n_items=2000, dim=8))


def _reference_quality(world):
    """Formula (1) in float64 numpy, straight from the world's fields."""
    x = np.asarray(world.user_factors, np.float64)
    y = np.asarray(world.item_factors, np.float64)
    logits = (float(world.affinity_scale) * x @ y.T + np.asarray(world.item_bias, np.float64)
              + float(world.offset))
    return 1 / (1 + np.exp(-logits))


def test_same_key_same_world_and_different_key_different_world(tiny):
    again = make_world(jax.random.key(0), "tiny")
    other = make_world(jax.random.key(1), "tiny")
    for a, b, c in zip(jax.tree.leaves(tiny), jax.tree.leaves(again), jax.tree.leaves(other)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(tiny.user_factors, other.user_factors)
    assert not np.array_equal(tiny.item_bias, other.item_bias)


def test_quality_matches_formula(tiny):
    users = jnp.arange(tiny.n_users)
    q = np.asarray(quality(tiny, users))
    assert q.shape == (tiny.n_users, tiny.n_items) and q.dtype == np.float32
    np.testing.assert_allclose(q, _reference_quality(tiny), rtol=1e-5, atol=1e-6)


def test_quality_pairs_matches_quality(tiny):
    rng = np.random.default_rng(0)
    users = rng.integers(0, tiny.n_users, 500)
    items = rng.integers(0, tiny.n_items, 500)
    expected = _reference_quality(tiny)[users, items]
    np.testing.assert_allclose(quality_pairs(tiny, users, items), expected, rtol=1e-5, atol=1e-6)


def test_item_bias_is_centred_zipf_over_a_permutation():
    config = dataclasses.replace(PRESETS["tiny"], popularity_exponent=1.3)
    world = make_world(jax.random.key(3), config)
    log_rank = np.log(np.arange(1, config.n_items + 1))
    expected = -1.3 * (log_rank - log_rank.mean())
    np.testing.assert_allclose(np.sort(world.item_bias)[::-1], expected, rtol=1e-5, atol=1e-5)


def test_affinity_has_unit_variance(medium):
    affinity = np.asarray(medium.user_factors @ medium.item_factors.T, np.float64)
    # Var<x, y> = d * (d^-1/2)^2 = 1 for x, y ~ N(0, d^-1/2 I); the sample variances of 2000 x 8
    # factor entries are within ~3% (4 SE) of their true values, so within 0.1 for the product.
    assert abs(affinity.var() - 1) < 0.1
    assert abs(affinity.mean()) < 0.05


def test_drift_is_deterministic_and_perturbs_bias_and_mix_only(tiny):
    key = jax.random.key(7)
    day3 = drift(key, tiny, 3, 0.5, 0.25)
    again = drift(key, tiny, 3, 0.5, 0.25)
    day4 = drift(key, tiny, 4, 0.5, 0.25)
    for a, b in zip(jax.tree.leaves(day3), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(day3.item_bias, day4.item_bias)
    np.testing.assert_array_equal(day3.user_factors, tiny.user_factors)
    np.testing.assert_array_equal(day3.item_factors, tiny.item_factors)
    assert float(day3.offset) == float(tiny.offset)
    jitted = jax.jit(lambda day: drift(key, tiny, day, 0.5, 0.25))(jnp.int32(3))
    np.testing.assert_allclose(jitted.item_bias, day3.item_bias, rtol=1e-6)
    unchanged = drift(key, tiny, 3, 0.0, 0.0)
    np.testing.assert_array_equal(unchanged.item_bias, tiny.item_bias)


def test_drift_noise_is_standard_normal_times_strength(medium):
    moved = drift(jax.random.key(1), medium, 11, 0.3, 0.6)
    for noise, strength in ((moved.item_bias - medium.item_bias, 0.3),
                            (moved.user_log_activity - medium.user_log_activity, 0.6)):
        z = np.asarray(noise, np.float64) / strength
        n = z.size
        assert abs(z.mean()) <= 4 / math.sqrt(n)                   # SE of the mean of N(0, 1)
        assert abs(z.var() - 1) <= 4 * math.sqrt(2 / n)            # SE of the variance


def test_sample_users_follows_activity(tiny):
    n = 200_000
    users = np.asarray(sample_users(jax.random.key(5), tiny, n))
    logits = np.asarray(tiny.user_log_activity, np.float64)
    expected = np.exp(logits - logits.max())
    expected /= expected.sum()
    empirical = np.bincount(users, minlength=tiny.n_users) / n
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(empirical - expected) <= 5 * se + 1e-9)   # 60 cells: 5 SE


def test_user_blocks_cover_users_in_order():
    blocks = user_blocks(10, 4)
    assert [len(b) for b in blocks] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate(blocks), np.arange(10))
    assert user_blocks(0, 4) == []
    with pytest.raises(ValueError, match="block_size"):
        user_blocks(10, 0)


@pytest.mark.parametrize("field, value", [("n_users", 0), ("n_items", 2.5), ("dim", 0),
                                          ("affinity_scale", -1.0), ("offset", math.nan),
                                          ("popularity_exponent", math.inf),
                                          ("activity_scale", -0.1)])
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(PRESETS["tiny"], **{field: value})


def test_bad_world_inputs_raise(tiny):
    with pytest.raises(ValueError, match="preset"):
        make_world(jax.random.key(0), "netflix")
    with pytest.raises(ValueError, match="item_bias"):
        dataclasses.replace(tiny, item_bias=jnp.zeros(tiny.n_items + 1))
    with pytest.raises(ValueError, match="latent"):
        dataclasses.replace(tiny, item_factors=jnp.zeros((tiny.n_items, 3)))
    with pytest.raises(ValueError, match="item_strength"):
        drift(jax.random.key(0), tiny, 0, -1.0)
    with pytest.raises(ValueError, match="day"):
        drift(jax.random.key(0), tiny, -1, 0.1)
    with pytest.raises(ValueError, match="users"):
        quality(tiny, jnp.array([0, tiny.n_users]))
    with pytest.raises(ValueError, match="items"):
        quality_pairs(tiny, jnp.array([0]), jnp.array([-1]))
    with pytest.raises(ValueError, match="same shape"):
        quality_pairs(tiny, jnp.array([0, 1]), jnp.array([0]))


def test_large_world_quality_is_blockwise_and_exact():
    # A 20k x 20k world is only ever materialised one user block at a time.
    world = make_world(jax.random.key(0), WorldConfig(n_users=20_000, n_items=20_000))
    users = jnp.arange(19_990, 20_000)
    block = np.asarray(quality(world, users))
    assert block.shape == (10, 20_000) and np.all((block >= 0) & (block <= 1))
    items = np.array([0, 17, 19_999])
    np.testing.assert_allclose(block[3, items], quality_pairs(world, jnp.full(3, 19_993), items),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("preset", sorted(PAPER_OBSERVED_POSITIVES))
def test_paper_preset_density_matches_lim(preset):
    """Expected observed positives (Bernoulli P+, SRS at the default rate) within 10% of Lim §6.

    The offsets were calibrated on the world of key 0; this checks the exact expectation over all
    users of another draw (key 1)."""
    world = make_world(jax.random.key(1), preset)
    expected = expected_observed_count(world, DEFAULT_OBSERVATION_RATE)
    target = PAPER_OBSERVED_POSITIVES[preset]
    assert abs(expected / target - 1) < 0.10, (preset, expected, target)


def test_quality_logit_is_the_logit_of_quality():
    world = make_world(jax.random.key(3), "tiny")
    users = jnp.arange(world.n_users)
    logit = quality_logit(world, users)
    # float32: the two programs are compiled separately, so XLA may fuse and round them differently
    # (observed up to 2e-6 relative in the far tail, q ~ 1e-8); 1e-5 is ~80 ulps
    np.testing.assert_allclose(jax.nn.sigmoid(logit), quality(world, users), rtol=1e-5)
    assert bool(jnp.all(jnp.isfinite(logit)))

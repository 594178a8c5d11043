"""Feed scenarios over a world (`simrec.feed.worlds`): `scenario_from_world` against the scenario
built by hand from the same pieces (same pytree, same log from the same key), on a materialised
and on a procedural world; the world's activity and quality against independent references; and
input errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed
from simrec import procedural as P
from simrec import world as W

VIEW = feed.Exponential(jnp.float32(0.8))


@pytest.fixture(scope="module")
def worlds():
    """(a tiny materialised world, a tiny procedural world, its materialisation): 60 users x 40 items."""
    pw = P.make_procedural(jax.random.key(3), "tiny")
    return W.make_world(jax.random.key(0), "tiny"), pw, P.materialise(pw)


def _policy(n_users, n_items, seed=1):
    scores = np.random.default_rng(seed).normal(size=(n_users, n_items)).astype(np.float32)
    return feed.Policy(feed.all_items(n_items), feed.EpsilonGreedy(feed.Sort(feed.from_table(scores)), 0.2), 6)


def _assert_same_scenario(a: feed.Scenario, b: feed.Scenario):
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b                          # signals, satiation, fatigue, the ItemFns' functions
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):                 # a procedural world's key
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(x, y)


def _assert_same_log(a: feed.Scenario, b: feed.Scenario, policy, n=2000):
    logs = [feed.simulate(jax.random.key(5), s, policy, n) for s in (a, b)]
    assert int(logs[0].rewards.sum()) > 50
    for x, y in zip(jax.tree.leaves(logs[0]), jax.tree.leaves(logs[1])):
        np.testing.assert_array_equal(x, y)


def _hand_activity(log_activity) -> jax.Array:
    activity = np.asarray(jax.nn.softmax(log_activity), np.float64)
    return jnp.asarray(activity / activity.sum(), jnp.float32)


def test_a_materialised_world_gives_the_hand_built_scenario_and_log(worlds):
    world = worlds[0]
    users = np.arange(world.n_users)
    q = np.asarray(W.quality(world, users))
    tables = {"like": 0.3 * q, "watch": q}
    built = feed.scenario_from_world(world, VIEW, tables, satiation=0.05)
    by_hand = feed.Scenario(VIEW, (feed.from_table(0.3 * q), feed.from_table(q)),
                            _hand_activity(world.user_log_activity), ("like", "watch"), satiation=0.05)
    _assert_same_scenario(built, by_hand)
    _assert_same_log(built, by_hand, _policy(world.n_users, world.n_items))
    # the default: one signal, the world's true quality
    default = feed.scenario_from_world(world, VIEW)
    assert default.signals == ("click",)
    np.testing.assert_array_equal(default.quality[0].params, q)


def test_a_procedural_world_gives_the_hand_built_scenario_and_log(worlds):
    _, pw, materialised = worlds
    built = feed.scenario_from_world(pw, VIEW)
    log_activity = P.user_log_activity(pw, np.arange(pw.n_users))
    by_hand = feed.Scenario(VIEW, (feed.world_quality(pw),), _hand_activity(log_activity), ("click",))
    _assert_same_scenario(built, by_hand)
    _assert_same_log(built, by_hand, _policy(pw.n_users, pw.n_items))
    # its quality is computed per pair (no table), its activity is the materialised world's
    assert feed.world_quality(pw).fn is P.row_quality and feed.world_quality(pw).params is pw
    np.testing.assert_array_equal(built.activity, feed.world_activity(materialised))
    # and it drives the feed like the materialised world's table (the pair function agrees with
    # the block function to float32 rounding, which these draws never straddle)
    _assert_same_log(built, feed.scenario_from_world(materialised, VIEW), _policy(pw.n_users, pw.n_items))


def test_world_activity_is_the_softmax_of_the_log_activity(worlds):
    world = worlds[0]
    x = np.asarray(world.user_log_activity, np.float64)
    reference = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    activity = np.asarray(feed.world_activity(world))
    assert activity.dtype == np.float32 and activity.shape == (world.n_users,)
    np.testing.assert_allclose(activity, reference, rtol=1e-6)
    assert abs(activity.astype(np.float64).sum() - 1) < 1e-6


def test_explicit_activity_and_item_functions_are_used_as_given(worlds):
    world = worlds[0]
    activity = np.full(world.n_users, 1 / world.n_users, np.float32)
    quality = feed.world_quality(world)
    scenario = feed.scenario_from_world(world, VIEW, {"click": quality}, activity=activity, fatigue=0.1)
    assert scenario.quality == (quality,) and scenario.activity is activity and scenario.fatigue == 0.1


@pytest.mark.parametrize("make, message", [
    (lambda w: feed.scenario_from_world(np.zeros((60, 40)), VIEW), "simrec.world.World"),
    (lambda w: feed.scenario_from_world(w, VIEW, {}), "non-empty mapping"),
    (lambda w: feed.scenario_from_world(w, VIEW, [np.zeros((60, 40))]), "non-empty mapping"),
    (lambda w: feed.scenario_from_world(w, VIEW, {1: np.zeros((60, 40))}), "signal names"),
    (lambda w: feed.scenario_from_world(w, VIEW, {"like": np.zeros((60, 41))}), r"signals\['like'\]"),
    (lambda w: feed.scenario_from_world(w, VIEW, {"like": feed.from_table(np.zeros((60, 41)))}), "41 items"),
    (lambda w: feed.scenario_from_world(w, VIEW, activity=np.full(59, 1 / 59)), "activity"),
    (lambda w: feed.scenario_from_world(w, VIEW, {"like": np.full((60, 40), 1.5)}), "like"),
    (lambda w: feed.world_quality("tiny"), "simrec.world.World"),
])
def test_invalid_inputs_raise(worlds, make, message):
    with pytest.raises(ValueError, match=message):
        make(worlds[0])

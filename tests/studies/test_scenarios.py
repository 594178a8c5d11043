"""The feed studies' shared scenarios (`simrec_studies.common.scenarios`): a day's `feed.Scenario`, built by
`simrec.feed.scenario_from_world`, is bit for bit the scenario of the hand-written recipe the
module used before (same pytree, same logs from the same keys), on both levels, several days, and
with the persistent drifts on. Every feed study (correlation, sensitivity, regimes, assumptions,
position_bias) builds its scenarios through `scenarios.day`, so their logs are unchanged."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed, validate
from simrec.config import ConfigError
from simrec.feed.policies import table_values
from simrec.world import drift, quality_logit
from simrec_studies.common import scenarios as S

SMOKE = S.PRESETS["smoke"]
SIGNALS = S.SignalConfig().names               # the default pair: like, watch
WALKING = dataclasses.replace(SMOKE, drift=dataclasses.replace(SMOKE.drift, item_walk=0.1, view_walk=0.2))


def _hand_built_day(platform, level: str, d: int) -> feed.Scenario:
    """The scenario of `S.day` as the module wrote it by hand before `feed.scenario_from_world`."""
    config = platform.config
    lv, dr, sg = S.level_config(config, level), config.drift, config.signals
    z_s, z_e = S.day_factors(platform, d)
    world = drift(jax.random.fold_in(platform.drift_key, 1), platform.world, d, dr.item_strength, dr.user_strength)
    if dr.item_walk > 0:
        world = dataclasses.replace(world, item_bias=world.item_bias + dr.item_walk * S.walk(platform, "item", d))
    log_length = dr.session * z_s
    if dr.view_walk > 0:
        log_length = log_length + dr.view_walk * float(S.walk(platform, "view", d)[0])
    shifts = jnp.array([sg.like_shift, sg.watch_shift], jnp.float32) + dr.engagement * z_e
    validate.fits_in_memory("test", 4 * (2 + len(SIGNALS)) * world.n_users * world.n_items)
    quality = np.asarray(S._day_quality(world, jnp.array([sg.like_slope, sg.watch_slope], jnp.float32), shifts))
    activity = np.asarray(jax.nn.softmax(world.user_log_activity), np.float64)
    return feed.Scenario(S._day_view(lv, log_length, SIGNALS), tuple(feed.from_table(q) for q in quality),
                         jnp.asarray(activity / activity.sum(), jnp.float32), SIGNALS,
                         satiation=float(lv.satiation))


@pytest.fixture(scope="module", params=[SMOKE, WALKING], ids=["smoke", "walks"])
def platform(request):
    """A smoke platform without trained slots (world, O⁺, candidates, keys: no model training)."""
    return S.platform(jax.random.key(0), request.param, 0, rankers=())


@pytest.mark.parametrize("level", S.LEVELS)
def test_a_day_is_the_hand_built_scenario_bit_for_bit(platform, level):
    logger = S.logging_policy(platform, level, S.scores(platform, S.Popularity()))
    for d in (0, 3):
        built, by_hand = S.day(platform, level, d).scenario, _hand_built_day(platform, level, d)
        leaves, tree = jax.tree.flatten(built)
        hand_leaves, hand_tree = jax.tree.flatten(by_hand)
        assert tree == hand_tree                       # view kind, signals, satiation, fatigue
        for a, b in zip(leaves, hand_leaves):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        exposure = S.logging_exposure(built, logger)
        np.testing.assert_array_equal(exposure, S.logging_exposure(by_hand, logger))
        logs = [feed.simulate(jax.random.fold_in(jax.random.key(1), d), s, logger, 1024, logging_exposure=exposure)
                for s in (built, by_hand)]
        assert int(logs[0].rewards.sum()) > 0
        for a, b in zip(jax.tree.leaves(logs[0]), jax.tree.leaves(logs[1])):
            np.testing.assert_array_equal(a, b)


def test_four_signals_follow_their_formulas_and_leave_the_default_pair_unchanged(platform):
    """A scenario with every signal of `SIGNAL_KINDS` (KDD'24 §6.2's four, in a new order) gives each
    signal the table sigmoid(slope · ℓ_d + shift + engagement · z_e) of its own slope and shift, the
    like and watch tables of the default pair bit for bit, and a cascade that stops on watch."""
    names = ("share", "watch", "replay", "like")
    config = dataclasses.replace(platform.config, signals=dataclasses.replace(platform.config.signals, names=names))
    four = dataclasses.replace(platform, config=config)
    d = 2
    pair = dict(zip(SIGNALS, S.day(platform, "level2", d).scenario.quality))
    scenario = S.day(four, "level2", d).scenario
    assert scenario.signals == names and scenario.view.stop_signal == names.index("watch")
    world = drift(jax.random.fold_in(platform.drift_key, 1), platform.world, d, config.drift.item_strength,
                  config.drift.user_strength)
    if config.drift.item_walk > 0:
        world = dataclasses.replace(world, item_bias=world.item_bias
                                    + config.drift.item_walk * S.walk(platform, "item", d))
    logit = np.asarray(quality_logit(world, jnp.arange(world.n_users)), np.float64)
    z_e = S.day_factors(platform, d)[1]
    for name, table in zip(names, scenario.quality):
        slope, shift = getattr(config.signals, f"{name}_slope"), getattr(config.signals, f"{name}_shift")
        expected = 1 / (1 + np.exp(-(slope * logit + shift + config.drift.engagement * z_e)))
        np.testing.assert_allclose(table_values(table), expected, rtol=2e-5, atol=1e-7)
        if name in pair:
            np.testing.assert_array_equal(table_values(table), table_values(pair[name]))
    with pytest.raises(ConfigError, match="must include 'watch'"):
        dataclasses.replace(config, signals=S.SignalConfig(names=("like", "share")))
    with pytest.raises(ConfigError, match="distinct names from"):
        S.SignalConfig(names=("like", "like"))

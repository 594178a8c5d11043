"""The deployed regime (`simrec_studies.common.deployed`): a deterministic logger over every candidate,
whose exposures are the view probabilities at the ranks (KDD'24 Eq. 9), so that DCG's weight of a
logged item is S(rank under R_t) / S(rank under R₀) and no target exposure is lost."""
import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed, ope
from simrec_studies import correlation, sensitivity
from simrec_studies.common import scenarios as S
from simrec_studies.common.deployed import deployed, is_deployed


def test_deployed_sets_a_deterministic_logger_over_every_candidate_and_keeps_the_rest():
    base = S.PRESETS["default"]
    scenario = deployed(base)
    for level in S.LEVELS:
        before, after = S.level_config(base, level), S.level_config(scenario, level)
        assert after.epsilon == 0 and after.candidates == after.feed_length == before.feed_length
        assert dataclasses.replace(after, epsilon=before.epsilon, candidates=before.candidates) == before
        assert is_deployed(scenario, [level]) and not is_deployed(base, [level])
    assert dataclasses.replace(scenario, level1=base.level1, level2=base.level2) == base
    assert sensitivity.PRESETS["deployed"].scenario.days == 5                     # 20 settings per target
    assert is_deployed(scenario) and not is_deployed(dataclasses.replace(scenario, level2=base.level2))
    assert all(is_deployed(preset.scenario) for preset in (sensitivity.PRESETS["deployed"],
                                                          correlation.PRESETS["deployed"]))


@pytest.mark.parametrize("view", [feed.ScrollBudget(jnp.float32(1.3)), feed.Exponential(jnp.float32(0.9))])
def test_deterministic_exposures_are_the_view_probabilities_at_the_ranks(view):
    """Eq. 9: with K = N and ε = 0 every candidate is exposed with S(its rank), under the logger and a
    target that orders the same candidates differently, so every DCG weight ε/ε₀ is a ratio of S."""
    rng = np.random.default_rng(0)
    n_contexts, n_items, k = 5, 12, 6
    candidates = np.stack([rng.choice(n_items, k, replace=False) for _ in range(n_contexts)]).astype(np.int32)
    generator = feed.FixedCandidates(jnp.asarray(candidates), n_items)
    logger_scores, target_scores = rng.normal(size=(2, n_contexts, n_items)).astype(np.float32)
    logger = feed.Policy(generator, feed.EpsilonGreedy(feed.Sort(feed.from_table(logger_scores)), jnp.float32(0.0)), k)
    target = feed.Policy(generator, feed.Sort(feed.from_table(target_scores)), k)
    contexts = np.arange(n_contexts)
    survival = np.asarray(feed.view_probability(view, k))
    tables = [np.asarray(feed.exposure(None, p, view, contexts).mean) for p in (logger, target)]
    for scores, table in zip((logger_scores, target_scores), tables):
        for x in range(n_contexts):
            order = candidates[x][np.argsort(-scores[x, candidates[x]], kind="stable")]
            np.testing.assert_allclose(table[x, order], survival, rtol=1e-6)
            assert np.count_nonzero(table[x]) == k                              # nothing outside G
    assert float(np.max(np.asarray(ope.support_loss(tables[0], tables[1])))) == 0.0

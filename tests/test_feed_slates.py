"""simrec.feed.slates: prefix probabilities against enumeration of every ranking and against the
sampler's frequencies."""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed

RNG = np.random.default_rng(0)
X, A, C, K = 3, 7, 4, 3
SCORES = RNG.normal(size=(X, A)).astype(np.float32)
SCORES[0, :2] = SCORES[0, 2]                          # ties, broken by the lower item id
CANDIDATES = np.stack([RNG.choice(A, C, replace=False) for _ in range(X)]).astype(np.int32)
TEMPERATURE, EPSILON = 0.7, 0.3


def _rankers():
    sort = feed.Sort(feed.from_table(SCORES))
    plackett_luce = feed.PlackettLuce(feed.from_table(SCORES), jnp.float32(TEMPERATURE))
    return {"sort": sort, "plackett_luce": plackett_luce,
            "epsilon_sort": feed.EpsilonGreedy(sort, jnp.float32(EPSILON)),
            "epsilon_plackett_luce": feed.EpsilonGreedy(plackett_luce, jnp.float32(EPSILON))}


def _ranking_probability(name: str, x: int, ranking) -> float:
    """P(σ = ranking) of a full ordering of context x's candidates, from the rankers' definitions."""
    base = name.removeprefix("epsilon_")
    if base == "sort":
        order = sorted(CANDIDATES[x], key=lambda a: (-SCORES[x, a], a))
        p = float(list(ranking) == order)
    else:
        weights, remaining, p = np.exp(SCORES[x].astype(np.float64) / TEMPERATURE), list(CANDIDATES[x]), 1.0
        for item in ranking:
            p *= weights[item] / sum(weights[r] for r in remaining)
            remaining.remove(item)
    if name.startswith("epsilon_"):
        p = (1 - EPSILON) * p + EPSILON / math.factorial(C)
    return p


def _enumerated(name: str, x: int, prefix) -> float:
    """π(prefix | x): the sum over every full ordering that starts with it."""
    return sum(_ranking_probability(name, x, ranking) for ranking in itertools.permutations(CANDIDATES[x])
               if list(ranking[:len(prefix)]) == list(prefix))


def _logged_prefixes():
    """Every K-prefix of every context's candidates, some cut short (-1), plus impossible ones: an
    item outside the candidates, a repeated item."""
    contexts, items = [], []
    for x in range(X):
        for prefix in itertools.permutations(CANDIDATES[x], K):
            contexts.append(x)
            items.append(list(prefix))
    items = np.array(items, np.int32)
    items[::3, 2:] = -1
    items[::5, 1:] = -1
    outside = [a for a in range(A) if a not in CANDIDATES[0]][0]
    extra = np.array([[CANDIDATES[0, 0], outside, -1], [CANDIDATES[0, 1], CANDIDATES[0, 1], CANDIDATES[0, 2]],
                      [-1, -1, -1]], np.int32)
    return np.array(contexts + [0, 0, 0], np.int32), np.concatenate([items, extra])


@pytest.mark.parametrize("generator", ["per_context", "top_k"])
@pytest.mark.parametrize("name", list(_rankers()))
def test_prefix_probabilities_equal_enumeration_over_every_ranking(name, generator):
    if generator == "per_context":
        candidates = feed.FixedCandidates(jnp.asarray(CANDIDATES), A)
    else:                        # a retrieval score whose top C are the same candidate sets
        retrieval = np.zeros((X, A), np.float32)
        np.put_along_axis(retrieval, CANDIDATES, 1.0, axis=1)
        candidates = feed.TopK(feed.from_table(retrieval), C)
    policy = feed.Policy(candidates, _rankers()[name], K)
    contexts, items = _logged_prefixes()
    got = np.exp(np.asarray(feed.prefix_log_probability(policy, contexts, items), np.float64))
    for n, (x, row) in enumerate(zip(contexts, items)):
        for k in range(K):
            expected = _enumerated(name, x, [a for a in row[:k + 1] if a >= 0])
            if len(set(row[:k + 1][row[:k + 1] >= 0])) < len(row[:k + 1][row[:k + 1] >= 0]):
                expected = 0.0                 # a repeated item: no ranking shows it
            assert got[n, k] == pytest.approx(expected, abs=2e-7, rel=2e-6), (name, x, row, k)


@pytest.mark.parametrize("per_context", [False, True])
@pytest.mark.parametrize("name", list(_rankers()))
def test_next_item_means_equal_enumeration_over_every_ranking(name, per_context):
    """v̄_k = Σ_a π(s_1:k-1, a) v(a) / π(s_1:k-1) by enumeration, wherever the prefix can be shown and
    is logged; 0 from two ranks past the logged prefix."""
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(CANDIDATES), A), _rankers()[name], K)
    contexts, items = _logged_prefixes()
    values = RNG.uniform(size=(X, A) if per_context else A)
    got = np.asarray(feed.next_item_mean(policy, contexts, items, values), np.float64)
    for n, (x, row) in enumerate(zip(contexts, items)):
        v = values[x] if per_context else values
        for k in range(K):
            prefix = list(row[:k])
            if any(a < 0 for a in prefix):
                assert got[n, k] == 0.0
                continue
            shown = _enumerated(name, x, prefix) if len(set(prefix)) == len(prefix) else 0.0
            if shown < 1e-12:
                assert np.isfinite(got[n, k])                      # any finite value: its weight is 0
                continue
            expected = sum(_enumerated(name, x, prefix + [a]) * v[a] for a in CANDIDATES[x]
                           if a not in prefix) / shown
            assert got[n, k] == pytest.approx(expected, abs=1e-6, rel=1e-5), (name, x, row, k)


def test_next_item_means_name_bad_values():
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(CANDIDATES), A), _rankers()["plackett_luce"], K)
    contexts, items = _logged_prefixes()
    with pytest.raises(ValueError, match="values must be"):
        feed.next_item_mean(policy, contexts, items, np.ones(A + 1))
    with pytest.raises(ValueError, match="values must be"):
        feed.next_item_mean(policy, contexts, items, np.ones((X + 1, A)))
    with pytest.raises(ValueError, match="finite"):
        feed.next_item_mean(policy, contexts, items, np.full(A, np.nan))


def test_prefix_probabilities_match_the_samplers_frequencies():
    """The closed form describes the law `sample_ranking` draws from (ε-greedy exploration and
    Plackett–Luce both drawn by first appearances), counted over 40,000 rankings: 4 SE."""
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(CANDIDATES), A), _rankers()["epsilon_plackett_luce"], 2)
    n = 40_000
    contexts = jnp.full(n, 1, jnp.int32)
    tables = feed.context_tables(policy, X)
    shown = np.asarray(feed.sample_ranking(jax.random.key(7), policy, contexts, tables))
    prefixes = list(itertools.permutations(CANDIDATES[1], 2))
    log_p = np.asarray(feed.prefix_log_probability(policy, np.ones(len(prefixes), np.int32),
                                                   np.array(prefixes, np.int32)))[:, -1]
    for prefix, p in zip(prefixes, np.exp(log_p.astype(np.float64))):
        frequency = np.mean(np.all(shown == np.array(prefix), axis=1))
        assert abs(frequency - p) <= 4 * math.sqrt(p * (1 - p) / n), (prefix, frequency, p)


def test_an_empty_prefix_has_probability_one_and_a_subset_of_sessions_its_own_values():
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(CANDIDATES), A), _rankers()["epsilon_plackett_luce"], K)
    contexts, items = _logged_prefixes()
    whole = np.asarray(feed.prefix_log_probability(policy, contexts, items))
    assert np.all(whole[-1] == 0.0)                                  # the [-1, -1, -1] row
    some = np.arange(0, len(items), 4)
    np.testing.assert_array_equal(whole[some], feed.prefix_log_probability(policy, contexts[some], items[some]))
    assert feed.prefix_log_probability(policy, np.zeros(0, np.int32), np.zeros((0, K), np.int32)).shape == (0, K)


def test_a_dominant_candidate_leaves_the_others_exact_probabilities():
    """Plackett–Luce with one candidate holding all but e^-30 of the weight: the later ranks'
    probabilities come from the small remaining weight, still exact (float64 on the host)."""
    scores = np.zeros((1, 4), np.float32)
    scores[0, 0] = 30.0
    policy = feed.Policy(feed.all_items(4), feed.PlackettLuce(feed.from_table(scores), jnp.float32(1.0)), 3)
    log_p = np.asarray(feed.prefix_log_probability(policy, np.zeros(1, np.int32), np.array([[0, 1, 2]], np.int32)))
    expected = np.cumsum([-np.log1p(3 * np.exp(-30.0)), -np.log(3.0), -np.log(2.0)])
    np.testing.assert_allclose(log_p[0], expected, atol=1e-6)


def test_bad_arguments_are_named():
    policy = feed.Policy(feed.FixedCandidates(jnp.asarray(CANDIDATES), A), _rankers()["sort"], K)
    contexts, items = np.zeros(2, np.int32), np.array([[CANDIDATES[0, 0], -1, -1]] * 2, np.int32)
    subset = feed.Policy(feed.RandomSubset(A, C), _rankers()["sort"], K)
    assert not feed.has_prefix_probability(subset) and feed.has_prefix_probability(policy)
    with pytest.raises(ValueError, match="RandomSubset"):
        feed.prefix_log_probability(subset, contexts, items)
    with pytest.raises(ValueError, match="a prefix"):
        feed.prefix_log_probability(policy, contexts, items[:, ::-1])
    with pytest.raises(ValueError, match="feed_length"):
        feed.prefix_log_probability(policy, contexts, np.full((2, K + 1), -1, np.int32))
    with pytest.raises(ValueError, match=r"ids in \[0, 7\)"):
        feed.prefix_log_probability(policy, contexts, items + 100)
    with pytest.raises(ValueError, match="contexts must be"):
        feed.prefix_log_probability(policy, np.zeros(3, np.int32), items)
    with pytest.raises(ValueError, match="contexts"):
        feed.prefix_log_probability(policy, np.array([0, X]), items)
    with pytest.raises(ValueError, match="integer"):
        feed.prefix_log_probability(policy, contexts, items.astype(np.float32))

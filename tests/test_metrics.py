"""Metrics against independent references: plain sort-based formulas (tie-free) and the exact
average over every order of tied items (tie-heavy), plus invariants and input validation."""
import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from simrec import metrics

ALL = ("dcg", "ndcg", "adg", "ap", "atop", "auc", "recall@3", "precision@3", "dcg@2", "ndcg@2",
       "ndcg@100", "recall@100")


# ---- an independent reference: plain metrics of one strict order -------------------------------

def plain_metrics(order, relevant, k_values=(2, 3, 100)):
    """Metrics of a strict ranked list ``order`` (item ids, best first) for a set ``relevant``."""
    n_items, rel = len(order), [i in relevant for i in order]
    n_rel = sum(rel)
    if n_rel == 0:
        return None
    disc = [1 / math.log2(p + 2) for p in range(n_items)]

    def dcg_at(k):
        return sum(disc[p] for p in range(min(k, n_items)) if rel[p])

    def idcg_at(k):
        return sum(1 / math.log2(j + 2) for j in range(min(k, n_rel)))

    hits, ap = 0, 0.0
    for p in range(n_items):
        if rel[p]:
            hits += 1
            ap += hits / (p + 1)
    n_irr = n_items - n_rel
    auc = (sum(sum(not rel[q] for q in range(p + 1, n_items)) for p in range(n_items) if rel[p])
           / n_rel / n_irr) if n_irr else float("nan")
    out = {"dcg": dcg_at(n_items), "ndcg": dcg_at(n_items) / idcg_at(n_items),
           "adg": dcg_at(n_items) / n_rel, "ap": ap / n_rel,
           "atop": sum((n_items - p) / n_items for p in range(n_items) if rel[p]) / n_rel,
           "auc": auc}
    for k in k_values:
        found = sum(rel[:k])
        out[f"dcg@{k}"], out[f"ndcg@{k}"] = dcg_at(k), dcg_at(k) / idcg_at(k)
        out[f"recall@{k}"], out[f"precision@{k}"] = found / n_rel, found / k
    return out


def tie_averaged(scores, relevant, exclude):
    """Exact expectation over every order of tied items, by enumeration (tiny rows only)."""
    items = [i for i in range(len(scores)) if not exclude[i]]
    rel = {i for i in items if relevant[i]}
    groups = [list(g) for _, g in itertools.groupby(sorted(items, key=lambda i: -scores[i]),
                                                    key=lambda i: -scores[i])]
    totals, count = None, 0
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        m = plain_metrics([i for p in perms for i in p], rel)
        if m is None:
            return None
        totals = m if totals is None else {k: totals[k] + m[k] for k in m}
        count += 1
    return {k: v / count for k, v in totals.items()}


def check_against_reference(scores, relevant, exclude=None, **kw):
    exclude = np.zeros_like(relevant) if exclude is None else exclude
    got = metrics.evaluate(scores, relevant, exclude=exclude, metrics=ALL, **kw)
    for u in range(scores.shape[0]):
        ref = tie_averaged(scores[u], relevant[u], exclude[u])
        for spec in ALL:
            if ref is None:
                assert np.isnan(got[spec][u]), (spec, u)
            else:
                np.testing.assert_allclose(got[spec][u], ref[spec], rtol=1e-10, atol=1e-12,
                                           err_msg=f"{spec} user {u}", equal_nan=True)


# ---- against the references ----------------------------------------------------------------------

def test_tie_free_random_scores_match_plain_formulas():
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((40, 9)).astype(np.float32)
    relevant = rng.random((40, 9)) < 0.3
    exclude = (rng.random((40, 9)) < 0.2) & ~relevant
    check_against_reference(scores, relevant, exclude)


def test_tie_heavy_rows_match_average_over_all_tie_orders():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 3, (60, 7)).astype(np.float32)     # at most 3 distinct values
    relevant = rng.random((60, 7)) < 0.4
    exclude = rng.random((60, 7)) < 0.15                          # may hit relevant items too
    check_against_reference(scores, relevant, exclude)


def test_all_tied_row_is_the_random_ranking_expectation():
    scores = np.zeros((1, 6), np.float32)
    relevant = np.array([[1, 0, 1, 0, 0, 0]], bool)
    got = metrics.evaluate(scores, relevant, metrics=("auc", "atop", "recall@3", "ndcg"))
    assert got["auc"][0] == pytest.approx(0.5)
    assert got["recall@3"][0] == pytest.approx(0.5)                 # 3 of 6 slots
    assert got["atop"][0] == pytest.approx(np.mean([(6 - p) / 6 for p in range(6)]))
    check_against_reference(scores, relevant)


def test_larger_catalogue_with_ties_and_many_relevant_items():
    """More than one 32-threshold chunk and several blocks: compare with a sort-based reference."""
    rng = np.random.default_rng(2)
    n_users, n_items = 23, 400
    scores = np.round(rng.standard_normal((n_users, n_items)), 1).astype(np.float32)  # many ties
    relevant = rng.random((n_users, n_items)) < rng.uniform(0, 0.4, (n_users, 1))
    exclude = rng.random((n_users, n_items)) < 0.1
    got = metrics.evaluate(scores, relevant, exclude=exclude, block_size=5,
                           metrics=("dcg", "dcg@10", "recall@10", "atop", "auc"))
    for u in range(n_users):
        keep = ~exclude[u]
        s, r = scores[u][keep], relevant[u][keep]
        if not r.any():
            assert np.isnan(got["dcg"][u])
            continue
        above = (s[None, :] > s[r][:, None]).sum(1)
        tied = (s[None, :] == s[r][:, None]).sum(1) - 1
        # expected discount over positions above..above+tied, directly
        exp_disc = [np.mean([1 / np.log2(p + 2) for p in range(a, a + t + 1)]) for a, t in zip(above, tied)]
        exp_disc10 = [np.mean([1 / np.log2(p + 2) * (p < 10) for p in range(a, a + t + 1)])
                      for a, t in zip(above, tied)]
        in10 = [np.mean([p < 10 for p in range(a, a + t + 1)]) for a, t in zip(above, tied)]
        n = len(s)
        below_irr = [((s < v) & ~r).sum() + 0.5 * ((s == v) & ~r).sum() for v in s[r]]
        np.testing.assert_allclose(got["dcg"][u], np.sum(exp_disc), rtol=1e-10)
        np.testing.assert_allclose(got["dcg@10"][u], np.sum(exp_disc10), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got["recall@10"][u], np.sum(in10) / r.sum(), rtol=1e-10)
        np.testing.assert_allclose(got["atop"][u], np.mean((n - above - tied / 2) / n), rtol=1e-10)
        np.testing.assert_allclose(got["auc"][u], np.mean(below_irr) / (~r).sum(), rtol=1e-10)


def test_ranks_is_the_strict_count_and_excluded_get_minus_one():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, (8, 10)).astype(np.float32)
    exclude = rng.random((8, 10)) < 0.3
    exclude[:, 0] = False
    got = metrics.ranks(scores, exclude=exclude)
    for u in range(8):
        for i in range(10):
            expected = -1 if exclude[u, i] else int(((scores[u] > scores[u, i]) & ~exclude[u]).sum())
            assert got[u, i] == expected
    np.testing.assert_array_equal(metrics.ranks(scores, exclude=sp.csr_matrix(exclude)), got)


# ---- dense masks, sparse masks and the score arrays' kinds -------------------------------------------

def _mask_kinds(mask):
    """The same 0/1 mask as dense numpy bool, dense JAX bool, dense int8, CSR and COO."""
    return [mask, jnp.asarray(mask), mask.astype(np.int8), sp.csr_matrix(mask), sp.coo_matrix(mask)]


def test_dense_and_sparse_masks_match_brute_force_with_ties_and_exclusions():
    rng = np.random.default_rng(15)
    scores = rng.integers(0, 3, (50, 7)).astype(np.float32)       # tie-heavy rows
    relevant = rng.random((50, 7)) < 0.4
    exclude = rng.random((50, 7)) < 0.25                           # hits relevant items too
    exclude[:, 0] = False
    refs = [tie_averaged(scores[u], relevant[u], exclude[u]) for u in range(50)]
    results = []
    for rel, ex in zip(_mask_kinds(relevant), _mask_kinds(exclude)):
        for block_size in (1, 8, None):
            got = metrics.evaluate(scores, rel, exclude=ex, metrics=ALL, block_size=block_size)
            for u, ref in enumerate(refs):
                for spec in ALL:
                    expected = np.nan if ref is None else ref[spec]
                    np.testing.assert_allclose(got[spec][u], expected, rtol=1e-10, atol=1e-12,
                                               equal_nan=True, err_msg=f"{spec} user {u}")
            results.append(got)
    for got in results[1:]:                  # exact counts in the same pair order: bit-identical
        for spec in ALL:
            np.testing.assert_array_equal(got[spec], results[0][spec], err_msg=spec)


def test_dense_and_csr_masks_are_bit_identical_on_a_larger_catalogue():
    rng = np.random.default_rng(16)
    n_users, n_items = 37, 500
    scores = np.round(rng.standard_normal((n_users, n_items)), 1).astype(np.float32)   # ties
    relevant = rng.random((n_users, n_items)) < rng.uniform(0, 0.5, (n_users, 1))
    relevant[3] = False                                            # a user without relevant items
    exclude = rng.random((n_users, n_items)) < rng.uniform(0, 0.5, (n_users, 1))
    exclude[5] = True
    exclude[5, 7] = False                                          # one ranked item left
    relevant[5, 7] = True
    dense = metrics.evaluate(jnp.asarray(scores), relevant, exclude=exclude, metrics=ALL)
    for block_size in (1, 6, None):
        for rel, ex in ((sp.csr_matrix(relevant), sp.csr_matrix(exclude)),
                        (jnp.asarray(relevant), sp.csr_matrix(exclude)),
                        (sp.csr_matrix(relevant), jnp.asarray(exclude))):
            got = metrics.evaluate(scores, rel, exclude=ex, metrics=ALL, block_size=block_size)
            for spec in ALL:
                np.testing.assert_array_equal(got[spec], dense[spec], err_msg=spec)
    assert np.isnan(dense["ndcg"][3]) and dense["ndcg"][5] == 1.0


def _integer_factors(rng, n_users, n_items, dim=3):
    """Small-integer factors: exact float32 scores, with many ties."""
    user = rng.integers(-2, 3, (n_users, dim)).astype(np.float32)
    item = rng.integers(-2, 3, (n_items, dim)).astype(np.float32)
    bias = rng.integers(-1, 2, n_items).astype(np.float32)
    return metrics.Factors(jnp.asarray(user), jnp.asarray(item), jnp.asarray(bias)), \
        user @ item.T + bias


def test_low_rank_factors_are_counted_exactly_as_brute_force_with_ties_and_exclusions():
    rng = np.random.default_rng(17)
    factors, scores = _integer_factors(rng, 40, 9)
    relevant = rng.random((40, 9)) < 0.4
    exclude = rng.random((40, 9)) < 0.3                            # hits relevant items too
    exclude[:, 0] = False
    refs = [tie_averaged(scores[u], relevant[u], exclude[u]) for u in range(40)]
    for rel, ex in zip(_mask_kinds(relevant), _mask_kinds(exclude)):
        got = metrics.evaluate(factors, rel, exclude=ex, metrics=ALL)
        for u, ref in enumerate(refs):
            for spec in ALL:
                expected = np.nan if ref is None else ref[spec]
                np.testing.assert_allclose(got[spec][u], expected, rtol=1e-10, atol=1e-12,
                                           equal_nan=True, err_msg=f"{spec} user {u}")


@pytest.mark.parametrize("packed_below", [metrics._PACKED_ITEMS, 1])     # 1: two sums, as for I >= 2^15
def test_low_rank_factors_equal_the_sorting_pass_bit_for_bit_on_a_larger_catalogue(monkeypatch, packed_below):
    monkeypatch.setattr(metrics, "_PACKED_ITEMS", packed_below)
    rng = np.random.default_rng(18)
    n_users, n_items = 300, 700                                   # > one chunk of pairs
    factors, scores = _integer_factors(rng, n_users, n_items, dim=4)
    relevant = rng.random((n_users, n_items)) < rng.uniform(0, 0.05, (n_users, 1))
    exclude = rng.random((n_users, n_items)) < rng.uniform(0, 0.3, (n_users, 1))
    exclude[11] = False                                           # a user with nothing excluded
    for ex in (None, sp.csr_matrix(exclude), exclude):
        got = metrics.evaluate(factors, sp.csr_matrix(relevant), exclude=ex, metrics=ALL)
        sorted_pass = metrics.evaluate(scores, relevant, exclude=ex, metrics=ALL)
        for spec in ALL:
            np.testing.assert_array_equal(got[spec], sorted_pass[spec], err_msg=spec)



def test_low_rank_factors_count_users_with_many_more_relevant_items_than_the_slot_width():
    """Skewed relevant counts: most users hold one relevant item (slot width 1 or 2), one holds
    300 (hundreds of slots, past `_MAX_SLOT_WIDTH` too), one none; the counts equal the sorting pass."""
    rng = np.random.default_rng(19)
    n_users, n_items = 50, 400
    factors, scores = _integer_factors(rng, n_users, n_items, dim=4)
    relevant = np.zeros((n_users, n_items), bool)
    relevant[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    relevant[7, rng.choice(n_items, 300, replace=False)] = True
    relevant[9] = False
    exclude = (rng.random((n_users, n_items)) < 0.2) & ~relevant
    for rel in (relevant, sp.csr_matrix(relevant)):
        got = metrics.evaluate(factors, rel, exclude=exclude, metrics=ALL)
        sorted_pass = metrics.evaluate(scores, relevant, exclude=exclude, metrics=ALL)
        for spec in ALL:
            np.testing.assert_array_equal(got[spec], sorted_pass[spec], err_msg=spec)
    many = np.zeros((n_users, n_items), bool)
    many[:, :200] = True                                           # mean 200: width capped at 128
    got = metrics.evaluate(factors, many, metrics=ALL)
    sorted_pass = metrics.evaluate(scores, many, metrics=ALL)
    for spec in ALL:
        np.testing.assert_array_equal(got[spec], sorted_pass[spec], err_msg=spec)

@pytest.mark.parametrize("field, value, message", [
    ("item_bias", np.zeros(4, np.float32), r"Factors.item_bias must have shape \(5,\)"),
    ("item", np.zeros((5, 2), np.float32), r"Factors.item must have shape \(any, 3\)"),
    ("user", np.full((4, 3), np.nan, np.float32), "Factors.user contains NaN"),
])
def test_bad_factors_raise_a_clear_error(field, value, message):
    good = {"user": np.zeros((4, 3), np.float32), "item": np.zeros((5, 3), np.float32),
            "item_bias": np.zeros(5, np.float32)}
    with pytest.raises(ValueError, match=message):
        metrics.Factors(**{**good, field: value})
    relevant = np.zeros((4, 5), bool)
    relevant[0, 1] = True
    with pytest.raises(ValueError, match="every item is excluded for user 2"):
        metrics.evaluate(metrics.Factors(**good), relevant,
                         exclude=np.eye(4, 5, dtype=bool) | (np.arange(4)[:, None] == 2))


def test_scores_of_excluded_items_are_ignored_and_inputs_left_untouched():
    rng = np.random.default_rng(17)
    scores = rng.integers(0, 4, (12, 15)).astype(np.float32)
    relevant = rng.random((12, 15)) < 0.3
    exclude = rng.random((12, 15)) < 0.3
    exclude[:, 0] = False
    ref = metrics.evaluate(scores, relevant, exclude=exclude, metrics=ALL)
    ref_ranks = metrics.ranks(scores, exclude=exclude)
    for masked in (np.where(exclude, -np.inf, scores), np.where(exclude, np.nan, scores)):
        kept = masked.copy()
        got = metrics.evaluate(masked, relevant, exclude=exclude, metrics=ALL, block_size=5)
        for spec in ALL:
            np.testing.assert_array_equal(got[spec], ref[spec], err_msg=spec)
        np.testing.assert_array_equal(metrics.ranks(masked, exclude=exclude), ref_ranks)
        np.testing.assert_array_equal(masked, kept)


# ---- edge cases -------------------------------------------------------------------------------------

def test_users_without_relevant_items_get_nan_and_mean_skips_them():
    scores = np.arange(12, dtype=np.float32).reshape(2, 6)
    relevant = np.array([[0, 0, 0, 0, 0, 1], [0] * 6], bool)
    out = metrics.ndcg(scores, relevant)
    assert out[0] == pytest.approx(1.0) and np.isnan(out[1])
    assert metrics.mean(out) == pytest.approx(1.0)
    assert np.isnan(metrics.mean([np.nan]))


def test_every_item_relevant_gives_perfect_metrics_and_undefined_auc():
    rng = np.random.default_rng(4)
    scores = rng.standard_normal((3, 5)).astype(np.float32)
    relevant = np.ones((3, 5), bool)
    got = metrics.evaluate(scores, relevant, metrics=("ndcg", "ap", "recall@5", "auc"))
    np.testing.assert_allclose(got["ndcg"], 1.0)
    np.testing.assert_allclose(got["ap"], 1.0)
    np.testing.assert_allclose(got["recall@5"], 1.0)
    assert np.all(np.isnan(got["auc"]))


def test_k_larger_than_catalogue_equals_whole_list():
    rng = np.random.default_rng(5)
    scores = rng.standard_normal((6, 7)).astype(np.float32)
    relevant = rng.random((6, 7)) < 0.5
    relevant[:, 0] = True
    np.testing.assert_allclose(metrics.dcg(scores, relevant, k=1000), metrics.dcg(scores, relevant))
    np.testing.assert_allclose(metrics.ndcg(scores, relevant, k=1000), metrics.ndcg(scores, relevant))
    np.testing.assert_allclose(metrics.recall_at(scores, relevant, k=1000), 1.0)
    np.testing.assert_allclose(metrics.precision_at(scores, relevant, k=1000),
                               relevant.sum(1) / 1000)


def test_excluded_relevant_items_are_not_relevant():
    scores = np.array([[5, 4, 3, 2, 1]], np.float32)
    relevant = np.array([[1, 0, 1, 0, 0]], bool)
    exclude = np.array([[1, 0, 0, 0, 0]], bool)
    # item 2 is the only relevant item left and sits at position 1 among 4 items
    assert metrics.adg(scores, relevant, exclude=exclude)[0] == pytest.approx(1 / np.log2(3))
    assert metrics.atop(scores, relevant, exclude=exclude)[0] == pytest.approx(3 / 4)


def test_input_kinds_agree_numpy_jax_sparse_and_score_function():
    rng = np.random.default_rng(6)
    scores = rng.standard_normal((30, 50)).astype(np.float32)
    relevant = rng.random((30, 50)) < 0.1
    exclude = (rng.random((30, 50)) < 0.2) & ~relevant
    ref = metrics.evaluate(scores, relevant, exclude=exclude, metrics=ALL)
    variants = [
        metrics.evaluate(jnp.asarray(scores), jnp.asarray(relevant), exclude=jnp.asarray(exclude), metrics=ALL),
        metrics.evaluate(scores, sp.csr_matrix(relevant), exclude=sp.csr_matrix(exclude), metrics=ALL),
        metrics.evaluate(scores, sp.coo_matrix(relevant), exclude=sp.csc_matrix(exclude), metrics=ALL),
        metrics.evaluate(lambda users: jnp.asarray(scores)[users], relevant, exclude=exclude,
                         metrics=ALL, block_size=7),
        metrics.evaluate(scores.astype(np.float64), relevant.astype(np.int8), exclude=exclude, metrics=ALL),
    ]
    for got in variants:
        for spec in ALL:
            np.testing.assert_allclose(got[spec], ref[spec], rtol=1e-12, equal_nan=True)


def test_block_size_does_not_change_results():
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 5, (41, 30)).astype(np.float32)
    relevant = rng.random((41, 30)) < rng.uniform(0, 0.6, (41, 1))
    a = metrics.evaluate(scores, relevant, metrics=ALL, block_size=1)
    b = metrics.evaluate(scores, relevant, metrics=ALL, block_size=1000)
    for spec in ALL:
        np.testing.assert_array_equal(a[spec], b[spec])


def test_named_functions_match_evaluate():
    rng = np.random.default_rng(8)
    scores = rng.standard_normal((10, 20)).astype(np.float32)
    relevant = rng.random((10, 20)) < 0.3
    got = metrics.evaluate(scores, relevant, metrics=("dcg@5", "ndcg@5", "adg", "ap", "recall@5",
                                                      "precision@5", "atop", "auc"))
    pairs = {"dcg@5": metrics.dcg(scores, relevant, k=5), "ndcg@5": metrics.ndcg(scores, relevant, k=5),
             "adg": metrics.adg(scores, relevant), "ap": metrics.average_precision(scores, relevant),
             "recall@5": metrics.recall_at(scores, relevant, k=5),
             "precision@5": metrics.precision_at(scores, relevant, k=5),
             "atop": metrics.atop(scores, relevant), "auc": metrics.auc(scores, relevant)}
    for spec, value in pairs.items():
        np.testing.assert_array_equal(value, got[spec])


# ---- validation ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda s, r: metrics.ndcg(s, r[:, :3]), r"relevant must have shape \(4, 6\)"),
    (lambda s, r: metrics.ndcg(s[0], r), "scores must have shape"),
    (lambda s, r: metrics.ndcg(s, r, exclude=np.zeros((2, 2), bool)), "exclude must have shape"),
    (lambda s, r: metrics.ndcg(s, r, k=0), "k must be an integer >= 1"),
    (lambda s, r: metrics.ndcg(s, r, k=2.5), "k must be an integer >= 1"),
    (lambda s, r: metrics.recall_at(s, r, k=None), "needs a cutoff"),
    (lambda s, r: metrics.evaluate(s, r, metrics=("ndgc",)), "unknown metric"),
    (lambda s, r: metrics.evaluate(s, r, metrics=("adg@5",)), "takes no cutoff"),
    (lambda s, r: metrics.ndcg(s, r, exclude=np.ones_like(r)), "every item is excluded for user 0"),
    (lambda s, r: metrics.ndcg(np.where(r, np.nan, s), r), "NaN or infinite"),
    (lambda s, r: metrics.ndcg(np.where(r, np.inf, s), r), "NaN or infinite"),
    (lambda s, r: metrics.ndcg(s, r.astype(np.float32) * 2), "relevant must be boolean"),
    (lambda s, r: metrics.ndcg(s, sp.csr_matrix(r * 2.0)), "relevant must be boolean"),
    (lambda s, r: metrics.ndcg(s, jnp.asarray(r, jnp.int32) * 3), "relevant must be boolean"),
    (lambda s, r: metrics.ndcg(s, r, exclude=np.where(r, 0.5, 0.0)), "exclude must be boolean"),
    (lambda s, r: metrics.ndcg(s, r, block_size=0), "block_size must be an integer >= 1"),
])
def test_bad_input_raises_a_clear_error(call, message):
    rng = np.random.default_rng(9)
    scores = rng.standard_normal((4, 6)).astype(np.float32)
    relevant = rng.random((4, 6)) < 0.5
    with pytest.raises(ValueError, match=message):
        call(scores, relevant)


# ---- invariants (hypothesis) ------------------------------------------------------------------------

rows = st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-3, 3), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n)))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(rows)
def test_bounds_and_ideal_ranking(row):
    values, rel = row
    scores = np.array([values], np.float32)
    relevant = np.array([rel], bool)
    got = metrics.evaluate(scores, relevant, metrics=("ndcg", "adg", "ap", "atop", "auc",
                                                      "recall@3", "precision@3", "ndcg@3"))
    for spec, v in got.items():
        if not any(rel) or (spec == "auc" and all(rel)):
            assert np.isnan(v[0])
        else:
            assert -1e-12 <= v[0] <= 1 + 1e-12, spec
    if any(rel):
        ideal = np.where(relevant, 10.0 + np.arange(len(rel)), -np.arange(len(rel))).astype(np.float32)
        perfect = metrics.evaluate(ideal, relevant, metrics=("ndcg", "ap", "ndcg@3"))
        for v in perfect.values():
            assert v[0] == pytest.approx(1.0)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(rows, st.integers(0, 8), st.integers(1, 4))
def test_raising_a_relevant_items_score_never_hurts(row, which, step):
    values, rel = row
    if not any(rel):
        return
    target = [i for i, r in enumerate(rel) if r][which % sum(rel)]
    before = np.array([values], np.float32)
    after = before.copy()
    after[0, target] += step
    relevant = np.array([rel], bool)
    specs = ("dcg", "ndcg", "adg", "ap", "atop", "auc", "recall@2", "dcg@2")
    a = metrics.evaluate(before, relevant, metrics=specs)
    b = metrics.evaluate(after, relevant, metrics=specs)
    for spec in specs:
        if not np.isnan(a[spec][0]):
            assert b[spec][0] >= a[spec][0] - 1e-12, spec


# ---- graded gains (dcg / ndcg with gains=) ------------------------------------------------------

def graded_tie_averaged(scores, gains, relevant, exclude, k):
    """(DCG@k, nDCG@k) of one row averaged over every order of its tied items, by enumeration;
    gain g_i on relevant items, 0 elsewhere; ideal from the gains sorted descending."""
    items = [i for i in range(len(scores)) if not exclude[i]]
    gain = {i: (float(gains[i]) if relevant[i] else 0.0) for i in items}
    if not any(relevant[i] for i in items):
        return None
    cut = len(items) if k is None else k
    groups = [list(g) for _, g in itertools.groupby(sorted(items, key=lambda i: -scores[i]),
                                                    key=lambda i: -scores[i])]
    total, count = 0.0, 0
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for p in perms for i in p]
        total += sum(gain[i] / math.log2(p + 2) for p, i in enumerate(order) if p < cut)
        count += 1
    ideal_gains = sorted((gain[i] for i in items if relevant[i]), reverse=True)
    ideal = sum(g / math.log2(j + 2) for j, g in enumerate(ideal_gains) if j < cut)
    dcg = total / count
    return dcg, (dcg / ideal if ideal > 0 else float("nan"))


@pytest.mark.parametrize("k", [None, 1, 2, 3, 100])
def test_graded_dcg_matches_the_average_over_all_tie_orders(k):
    rng = np.random.default_rng(10)
    scores = rng.integers(0, 3, (60, 7)).astype(np.float32)      # tie-heavy rows
    gains = rng.choice([0.0, 1.0, 2.0, 3.0, 7.0, 31.0], (60, 7))   # zeros and repeated gains too
    relevant = rng.random((60, 7)) < 0.6
    exclude = rng.random((60, 7)) < 0.15
    got_dcg = metrics.dcg(scores, relevant, k=k, exclude=exclude, gains=gains)
    got_ndcg = metrics.ndcg(scores, relevant, k=k, exclude=exclude, gains=gains)
    for u in range(60):
        ref = graded_tie_averaged(scores[u], gains[u], relevant[u], exclude[u], k)
        if ref is None:
            assert np.isnan(got_dcg[u]) and np.isnan(got_ndcg[u])
            continue
        np.testing.assert_allclose(got_dcg[u], ref[0], rtol=1e-10, atol=1e-12, err_msg=f"user {u}")
        np.testing.assert_allclose(got_ndcg[u], ref[1], rtol=1e-10, atol=1e-12, equal_nan=True,
                                   err_msg=f"user {u}")


def test_graded_tie_free_rows_match_the_plain_formula():
    rng = np.random.default_rng(11)
    scores = rng.standard_normal((30, 9)).astype(np.float32)
    gains = rng.uniform(0, 5, (30, 9))
    relevant = rng.random((30, 9)) < 0.5
    exclude = rng.random((30, 9)) < 0.2
    got = metrics.ndcg(scores, relevant, k=4, exclude=exclude, gains=gains)
    for u in range(30):
        ref = graded_tie_averaged(scores[u], gains[u], relevant[u], exclude[u], 4)
        np.testing.assert_allclose(got[u], np.nan if ref is None else ref[1], rtol=1e-10,
                                   equal_nan=True)


def test_unit_gains_reproduce_the_binary_metrics():
    rng = np.random.default_rng(12)
    scores = rng.integers(0, 4, (50, 40)).astype(np.float32)
    relevant = rng.random((50, 40)) < 0.2
    exclude = rng.random((50, 40)) < 0.1
    for k in (None, 5, 1000):
        for fn in (metrics.dcg, metrics.ndcg):
            np.testing.assert_allclose(
                fn(scores, relevant, k=k, exclude=exclude, gains=np.ones((50, 40))),
                fn(scores, relevant, k=k, exclude=exclude), rtol=1e-12, equal_nan=True)


def test_graded_gains_outside_relevant_are_ignored_and_zero_gains_give_nan_ndcg():
    scores = np.array([[4, 3, 2, 1], [4, 3, 2, 1], [4, 3, 2, 1]], np.float32)
    relevant = np.array([[0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], bool)
    gains = np.array([[9.0, 2.0, 5.0, 9.0], [0.0, 0.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    dcg = metrics.dcg(scores, relevant, gains=gains)
    ndcg = metrics.ndcg(scores, relevant, gains=gains)
    assert dcg[0] == pytest.approx(2 / np.log2(3) + 5 / np.log2(4))
    assert ndcg[0] == pytest.approx(dcg[0] / (5 + 2 / np.log2(3)))
    assert dcg[1] == 0.0 and np.isnan(ndcg[1])          # relevant items, all with gain 0
    assert np.isnan(dcg[2]) and np.isnan(ndcg[2])       # no relevant item


def test_graded_input_kinds_and_blocks_agree():
    rng = np.random.default_rng(13)
    scores = rng.integers(0, 5, (31, 25)).astype(np.float32)
    relevant = rng.random((31, 25)) < 0.4
    exclude = rng.random((31, 25)) < 0.2
    gains = np.where(rng.random((31, 25)) < 0.5, rng.integers(1, 6, (31, 25)), 0).astype(np.float64)
    ref = metrics.ndcg(scores, relevant, k=5, exclude=exclude, gains=gains)
    variants = [
        metrics.ndcg(jnp.asarray(scores), jnp.asarray(relevant), k=5, exclude=jnp.asarray(exclude),
                     gains=jnp.asarray(gains, jnp.float32)),
        metrics.ndcg(scores, sp.csr_matrix(relevant), k=5, exclude=sp.csc_matrix(exclude),
                     gains=sp.coo_matrix(gains)),
        metrics.ndcg(lambda users: scores[users], relevant, k=5, exclude=exclude, gains=gains,
                     block_size=4),
        metrics.ndcg(scores, relevant, k=5, exclude=exclude, gains=gains.astype(np.int64),
                     block_size=1),
    ]
    for got in variants:
        np.testing.assert_allclose(got, ref, rtol=1e-12, equal_nan=True)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(rows, st.lists(st.integers(0, 5), min_size=9, max_size=9))
def test_graded_ndcg_is_bounded_and_one_for_scores_sorted_by_gain(row, grades):
    values, rel = row
    scores = np.array([values], np.float32)
    relevant = np.array([rel], bool)
    gains = np.array([grades[:len(rel)]], np.float64)
    got = metrics.ndcg(scores, relevant, gains=gains)[0]
    effective = np.where(relevant, gains, 0.0)
    if not any(rel) or not effective.any():
        assert np.isnan(got)
        return
    assert -1e-12 <= got <= 1 + 1e-12
    ideal = metrics.ndcg(effective.astype(np.float32), relevant, gains=gains, k=2)[0]
    assert ideal == pytest.approx(1.0)        # ties only among equal gains: every order is ideal


@pytest.mark.parametrize("gains, message", [
    (np.ones((4, 5)), r"gains \(one per user and item\) must have shape \(4, 6\)"),
    (np.ones(6), "gains .* must have shape"),
    (np.where(np.eye(4, 6) > 0, np.nan, 1.0), "NaN or infinite"),
    (np.where(np.eye(4, 6) > 0, np.inf, 1.0), "NaN or infinite"),
    (np.where(np.eye(4, 6) > 0, -1.0, 1.0), ">= 0"),
    (sp.csr_matrix(-np.eye(4, 6)), ">= 0"),
    (np.full((4, 6), "a"), "numeric"),
])
def test_graded_bad_gains_raise_a_clear_error(gains, message):
    rng = np.random.default_rng(14)
    scores = rng.standard_normal((4, 6)).astype(np.float32)
    relevant = rng.random((4, 6)) < 0.5
    with pytest.raises(ValueError, match=message):
        metrics.ndcg(scores, relevant, gains=gains)
    with pytest.raises(ValueError, match=message):
        metrics.dcg(scores, relevant, gains=gains)



PUBLIC_METRICS = [
    lambda s, r: metrics.ndcg(s, r), lambda s, r: metrics.dcg(s, r, k=2), lambda s, r: metrics.adg(s, r),
    lambda s, r: metrics.average_precision(s, r), lambda s, r: metrics.recall_at(s, r, k=2),
    lambda s, r: metrics.precision_at(s, r, k=2), lambda s, r: metrics.atop(s, r), lambda s, r: metrics.auc(s, r),
    lambda s, r: metrics.evaluate(s, r, metrics=("ndcg",))["ndcg"],
    lambda s, r: metrics.ndcg(s, r, gains=np.ones(np.shape(r))),
]


def _small_scores(seed=21):
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((4, 6))
    relevant = rng.random((4, 6)) < 0.5
    relevant[:, 0] = True
    return scores, relevant


@pytest.mark.parametrize("call", PUBLIC_METRICS)
def test_complex_scores_are_refused_not_cut_to_their_real_part(call):
    """They used to give the metrics of the real part (numpy's ComplexWarning aside)."""
    scores, relevant = _small_scores()
    with pytest.raises(TypeError, match=r"^scores must hold real numbers .*got dtype complex128; take the "
                                        r"real part explicitly \(\.real\)"):
        call(scores.astype(complex), relevant)


def test_complex_scores_from_a_scoring_function_are_refused_too():
    scores, relevant = _small_scores()
    with pytest.raises(TypeError, match=r"scores of users 0\.\.3 \(from the scoring function\) must hold "
                                        r"real numbers .*complex128"):
        metrics.ndcg(lambda users: scores[users].astype(complex), relevant)
    with pytest.raises(TypeError, match=r"gains must hold real numbers, got dtype complex128"):
        metrics.ndcg(scores, relevant, gains=np.ones((4, 6), complex))


@pytest.mark.parametrize("call", PUBLIC_METRICS)
def test_rectangular_nested_lists_are_scores_like_arrays(call):
    scores, relevant = _small_scores()
    np.testing.assert_array_equal(call(scores.tolist(), relevant), call(scores, relevant))


@pytest.mark.parametrize("call", PUBLIC_METRICS + [lambda s, r: metrics.ranks(s)])
def test_ragged_or_flat_lists_of_scores_are_one_line_errors(call):
    """Ragged lists used to fail inside numpy ('inhomogeneous shape'), plain lists with
    AttributeError ('list' object has no attribute 'dtype')."""
    relevant = np.ones((2, 2), bool)
    with pytest.raises(ValueError) as error:
        call([[0.1, 0.2], [0.3]], relevant)
    assert str(error.value).startswith("scores must be a 2-D array [users, items], got a ragged nested list")
    assert "pad the rows" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"^scores must have shape \(any, any\), a 2-D array \[users, items\]; "
                                         r"got shape \(2,\)$"):
        call([0.1, 0.2], relevant)


def test_ranks_says_it_needs_a_dense_matrix_not_a_scoring_function():
    """ranks(fn) used to complain about `relevant` ('relevant must have shape (any, any)'), an
    argument ranks does not have; evaluate and the metrics do accept the function."""
    scores, relevant = _small_scores()
    np.testing.assert_array_equal(metrics.ndcg(lambda users: scores[users], relevant), metrics.ndcg(scores, relevant))
    with pytest.raises(TypeError, match=r"^ranks needs scores as a dense \[users, items\] array \(numpy or JAX\), "
                                        r"got a block-scoring function; evaluate and the metric functions accept it"):
        metrics.ranks(lambda users: scores[users])
    factors = metrics.Factors(np.ones((4, 2), np.float32), np.ones((6, 2), np.float32), np.zeros(6, np.float32))
    with pytest.raises(TypeError, match=r"ranks needs scores as a dense .*got Factors"):
        metrics.ranks(factors)
    np.testing.assert_array_equal(metrics.ranks(scores.tolist()), metrics.ranks(scores))


def test_graded_metrics_accept_factors():
    """ndcg(Factors, gains=...) used to fail with AttributeError ('Factors' has no dtype)."""
    rng = np.random.default_rng(22)
    user, item = rng.integers(-3, 4, (4, 2)).astype(np.float32), rng.integers(-3, 4, (6, 2)).astype(np.float32)
    relevant = rng.random((4, 6)) < 0.5
    gains = rng.integers(1, 4, (4, 6)).astype(np.float64)
    got = metrics.ndcg(metrics.Factors(user, item, np.zeros(6, np.float32)), relevant, gains=gains)
    np.testing.assert_array_equal(got, metrics.ndcg(user @ item.T, relevant, gains=gains))


# ---- observed-vs-complete helpers ----------------------------------------------------------------------

def test_idcg_and_thm2_factor_closed_forms():
    assert metrics.idcg(3)[()] == pytest.approx(1 + 1 / np.log2(3) + 1 / np.log2(4))
    assert metrics.idcg([5], k=2)[0] == pytest.approx(1 + 1 / np.log2(3))
    assert metrics.ndcg_bias_factor(4, 4) == pytest.approx(1.0)
    o, p = 2, 5
    expected = o * sum(1 / np.log2(j + 2) for j in range(p)) / (p * sum(1 / np.log2(j + 2) for j in range(o)))
    assert metrics.ndcg_bias_factor(o, p) == pytest.approx(expected)
    with pytest.raises(ValueError):
        metrics.ndcg_bias_factor(6, 5)


@pytest.mark.parametrize("call, message", [
    (lambda: metrics.idcg(2.7), r"^n_relevant must hold counts \(whole numbers >= 0\), found 2\.7; counts are "
                                r"never truncated: round them"),
    (lambda: metrics.idcg(np.array([3.0, 1.5])), r"n_relevant .*found 1\.5 at index \(1,\)"),
    (lambda: metrics.idcg(True), r"n_relevant must hold counts .*got True \(bool\)"),
    (lambda: metrics.idcg(-1), r"n_relevant must hold counts \(whole numbers >= 0\), found -1"),
    (lambda: metrics.ndcg_bias_factor(2.5, 5), r"^n_observed must hold counts \(whole numbers >= 1\), found 2\.5"),
    (lambda: metrics.ndcg_bias_factor(2, [5, 5.5]), r"^n_prior must hold counts .*found 5\.5 at index \(1,\)"),
    (lambda: metrics.ndcg_bias_factor(0, 5), r"n_observed must hold counts \(whole numbers >= 1\), found 0"),
])
def test_counts_must_be_whole_numbers_never_truncated(call, message):
    """idcg(2.7) used to be idcg(2) and ndcg_bias_factor(2.5, 5) the factor of (2, 5)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_whole_float_counts_are_counts():
    np.testing.assert_array_equal(metrics.idcg(np.array([3.0, 1.0])), metrics.idcg([3, 1]))
    assert metrics.ndcg_bias_factor(2.0, np.float32(5)) == metrics.ndcg_bias_factor(2, 5)


def test_mean_and_se():
    m, se = metrics.mean_and_se([1.0, 2.0, np.nan, 3.0])
    assert m == pytest.approx(2.0) and se == pytest.approx(1.0 / np.sqrt(3))


def test_atop_is_an_affine_function_of_auc_lim_section_6():
    """Lim et al. §6 note that ATOP is close to AUC; exactly, per user with P relevant among N
    candidates, ATOP = AUC (N - P) / N + (P + 1) / (2N): each relevant item's N - p(i) (0-based p)
    counts itself, the irrelevant items below it (AUC's pairs) and the relevant ones below it
    (P(P - 1)/2 in all), so ATOP → AUC when P ≪ N. Checked with heavy ties and exclusions, where
    both metrics average over the tied orders."""
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 6, (40, 30)).astype(np.float32)          # many ties
    relevant = rng.random((40, 30)) < 0.2
    relevant[0] = False                                                # a user without relevant items
    exclude = (rng.random((40, 30)) < 0.25) & ~relevant
    got = metrics.evaluate(scores, relevant, exclude=exclude, metrics=("atop", "auc"))
    n, p = (~exclude).sum(1), relevant.sum(1)
    ok = (p > 0) & (p < n)
    np.testing.assert_allclose(got["atop"][ok], (got["auc"] * (n - p) / n + (p + 1) / (2 * n))[ok], rtol=1e-12)
    assert np.isnan(got["atop"][0]) and np.isnan(got["auc"][0])

"""simrec.ope.registry: the registry and `compare` against the estimator functions, a brute-force
delta method, and the exact online difference (Monte Carlo)."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from simrec import feed, ope, stats
from tests.test_ope import (ACTIVITY, LOGGER, M_VALUES, Q, SCENARIO, TARGET, VIEW, WRONG_MODEL, X, log,  # noqa: F401
                            random_log, tables)

DISCOUNT = np.array([1.0, 0.7, 0.5, 0.4, 0.3, 0.25], np.float32)


def _data(seed=0, n=400):
    rewards, logging, target, viewed = random_log(seed, n=n)
    predicted = np.random.default_rng(seed + 1).uniform(0, 1, rewards.shape).astype(np.float32)
    direct = np.random.default_rng(seed + 2).uniform(0, 2, n).astype(np.float32)
    data = ope.LoggedData(rewards, viewed, logging, DISCOUNT, predicted)
    targets = {"R0": ope.Target(logging, direct * 0.9), "R1": ope.Target(target, direct)}
    return data, targets


def test_every_estimator_is_registered_once_with_its_documentation():
    assert list(ope.ESTIMATORS) == ["dcg", "ndcg", "ndcg_all", "pndcg", "sndcg", "dcg_beta", "dr", "mips", "rips",
                                    "snrips", "sips", "snsips", "sips_beta", "cascade_dr", "aips", "aips_chosen"]
    for estimator in ope.ESTIMATORS.values():
        assert estimator.label and estimator.assumption and estimator.reference
    with pytest.raises(ValueError, match="registered already"):
        ope.register(ope.ESTIMATORS["dcg"])
    with pytest.raises(ValueError, match="unknown estimator"):
        ope.lookup(["dcg", "nope"])


def test_compare_values_equal_the_estimator_functions():
    data, targets = _data()
    table = ope.compare(data, targets, M_VALUES).set_index(["estimator", "target", "m"]).sort_index()
    r, e0, e, v = data.rewards, data.logging_exposure, targets["R1"].exposure, data.viewed
    dcg = ope.dcg_sweep(r, e0, e, v, M_VALUES)
    np.testing.assert_allclose(table.loc[("dcg", "R1")].value, dcg.value, rtol=1e-6)
    np.testing.assert_allclose(table.loc[("dcg", "R1")].value_se, dcg.standard_error, rtol=1e-5)
    pn = ope.post_normalised_dcg(r, e0, e, v, DISCOUNT, M_VALUES)
    np.testing.assert_allclose(table.loc[("pndcg", "R1")].value, pn.value, rtol=1e-12)
    np.testing.assert_allclose(table.loc[("pndcg", "R1")].value_se, pn.standard_error, rtol=1e-12)
    sn = ope.self_normalised_dcg(r, e0, e, v, M_VALUES)
    np.testing.assert_allclose(table.loc[("sndcg", "R1")].value, sn.value, rtol=1e-12)
    np.testing.assert_allclose(table.loc[("sndcg", "R1")].value_se, sn.standard_error, rtol=1e-12)
    dr = ope.dr_sweep(r, e0, e, v, data.predicted, targets["R1"].direct, M_VALUES)
    np.testing.assert_allclose(table.loc[("dr", "R1")].value, dr.value, rtol=1e-6)
    for ideal, name in (("same discount", "ndcg"), ("all viewed", "ndcg_all")):
        per = np.asarray(ope.trajectory_ndcg(r, e0, e, v, DISCOUNT, M_VALUES, ideal=ideal), np.float64)
        np.testing.assert_allclose(table.loc[(name, "R1")].value, per.mean(axis=1), rtol=1e-12)


def test_paired_differences_against_a_brute_force_computation():
    data, targets = _data(seed=3)
    table = ope.compare(data, targets, M_VALUES, baseline="R0", confidence=0.95).set_index(
        ["estimator", "target", "m"]).sort_index()
    assert table.loc[("dcg", "R0")].difference.isna().all()
    r, e0, v = data.rewards, data.logging_exposure, data.viewed
    per = {name: np.asarray(ope.trajectory_dcg(r, e0, t.exposure, v, M_VALUES), np.float64)
           for name, t in targets.items()}
    delta = per["R1"] - per["R0"]
    row = table.loc[("dcg", "R1")]
    np.testing.assert_allclose(row.difference, delta.mean(axis=1), rtol=1e-12)
    se = delta.std(axis=1, ddof=1) / math.sqrt(delta.shape[1])
    np.testing.assert_allclose(row.se, se, rtol=1e-12)
    np.testing.assert_allclose(row.high - row.difference, 1.959963984540054 * se, rtol=1e-9)
    np.testing.assert_allclose(row.p, stats.one_sided_p(delta), rtol=1e-12)
    # the ratio's paired delta method, written out: φ = (a - r b) / b̄ per target, SE of φ_1 - φ_0
    idcg = np.asarray(ope.ideal_dcg(r, e0, v, DISCOUNT, M_VALUES), np.float64)
    phi = {}
    for name in targets:
        ratio = per[name].mean(axis=1) / idcg.mean(axis=1)
        phi[name] = (per[name] - ratio[:, None] * idcg) / idcg.mean(axis=1)[:, None]
    row = table.loc[("pndcg", "R1")]
    np.testing.assert_allclose(row.difference, (per["R1"].mean(1) - per["R0"].mean(1)) / idcg.mean(1), rtol=1e-9)
    np.testing.assert_allclose(row.se, (phi["R1"] - phi["R0"]).std(axis=1, ddof=1) / math.sqrt(delta.shape[1]),
                               rtol=1e-9)


def test_estimators_without_their_inputs_are_left_out_or_refused():
    data, targets = _data()
    bare = ope.LoggedData(data.rewards, data.viewed, data.logging_exposure)
    plain = {name: ope.Target(t.exposure) for name, t in targets.items()}
    assert set(ope.compare(bare, plain, 1.0).estimator) == {"dcg", "sndcg"}
    with pytest.raises(ValueError, match=r"dr need inputs the log or targets lack \(dr: \['direct', 'predicted'\]\)"):
        ope.compare(bare, plain, 1.0, estimators=["dcg", "dr"])
    with pytest.raises(ValueError, match="baseline 'R9' is not one of the targets"):
        ope.compare(bare, plain, 1.0, baseline="R9")


def test_a_new_estimator_appears_in_every_comparison(monkeypatch):
    monkeypatch.setattr(ope.registry, "ESTIMATORS", dict(ope.ESTIMATORS))
    ope.register(ope.Estimator("twice", "2 × DCG", lambda data, target, m, options, cache: ope.Contribution(
        2 * np.asarray(ope.trajectory_dcg(data.rewards, data.logging_exposure, target.exposure, data.viewed, m),
                       np.float64)), assumption="none", reference="a test"))
    data, targets = _data()
    table = ope.compare(data, targets, [1.0, math.inf]).set_index(["estimator", "target", "m"]).sort_index()
    np.testing.assert_allclose(table.loc[("twice", "R1")].value, 2 * table.loc[("dcg", "R1")].value, rtol=1e-12)


def test_the_dcg_difference_is_unbiased_for_the_exact_online_difference(log):  # noqa: F811
    """Monte Carlo: on the logger's log, compare's m = ∞ DCG and DR differences (target − logger)
    lie within 4 SE of the exact online difference; DR with a wrong reward model too."""
    truth = np.asarray(feed.online_value(None, SCENARIO, TARGET).mean) - np.asarray(
        feed.online_value(None, SCENARIO, LOGGER).mean)
    eps0, eps = tables(LOGGER), tables(TARGET)
    users = np.asarray(log.users)
    logged = {name: ope.logged_exposures(log, table, jnp.arange(X)) for name, table in (("R0", eps0), ("R1", eps))}
    items = np.maximum(np.asarray(log.items), 0)
    for signal in (0, 1):
        predicted = WRONG_MODEL[users[:, None], items].astype(np.float32)
        data = ope.LoggedData(log.rewards[signal], log.viewed, logged["R0"], predicted=predicted)
        targets = {name: ope.Target(logged[name], np.asarray(ope.direct_method(WRONG_MODEL, table))[users])
                   for name, table in (("R0", eps0), ("R1", eps))}
        table = ope.compare(data, targets, math.inf, estimators=["dcg", "dr"], baseline="R0")
        for row in table[table.target == "R1"].itertuples():
            assert abs(row.difference - truth[signal]) <= 4 * row.se, (row, truth[signal])
    assert abs(truth[1]) > 10 * table.se.max()                       # a real difference, seen clearly


def test_from_log_assembles_what_the_estimators_read(log):  # noqa: F811
    """Against the hand assembly: tables over the log's distinct contexts, logged exposures, the
    discount, and a reward model's predictions and direct terms."""
    small = log
    contexts = np.unique(np.asarray(small.users))
    on = ope.from_log(small, {"R0": LOGGER, "R1": TARGET}, VIEW, reward_models={"watch": WRONG_MODEL[contexts]})
    _, rows = np.unique(np.asarray(small.users), return_inverse=True)
    np.testing.assert_array_equal(on.rows, rows)
    for name, policy in (("R0", LOGGER), ("R1", TARGET)):
        table = feed.exposure(None, policy, VIEW, contexts).mean
        np.testing.assert_array_equal(np.asarray(on.tables[name]), np.asarray(table))
        np.testing.assert_array_equal(np.asarray(on.targets["like"][name].exposure),
                                      np.asarray(ope.logged_exposures(small, table, contexts)))
        assert on.targets["like"][name].direct is None
        expected = np.asarray(ope.direct_method(WRONG_MODEL[contexts], table))[rows]
        np.testing.assert_array_equal(on.targets["watch"][name].direct, expected)
    np.testing.assert_array_equal(np.asarray(on.data["like"].logging_exposure),
                                  np.asarray(on.targets["like"]["R0"].exposure))
    np.testing.assert_array_equal(np.asarray(on.data["like"].discount), np.asarray(feed.view_probability(VIEW, 5)))
    items = np.maximum(np.asarray(small.items), 0)
    np.testing.assert_array_equal(on.data["watch"].predicted, WRONG_MODEL[np.asarray(small.users)[:, None], items])
    assert on.data["like"].predicted is None
    assert set(ope.compare(on.data["watch"], on.targets["watch"], 1.0).estimator) >= {"dcg", "dr"}


def test_restrict_estimates_on_the_subset_of_trajectories():
    """summarise of restricted contributions equals the estimator functions on the sliced log (all
    estimators but SN-DCG's default T, which stays the whole log's), and mean_estimate with NaN
    outside the subset."""
    data, targets = _data(seed=5)
    rng = np.random.default_rng(9)
    use = rng.uniform(size=data.rewards.shape[0]) < 0.4
    options = {"target_views": 2.5}
    restricted = ope.summarise(ope.restrict(ope.contributions(data, targets, M_VALUES, options=options), use),
                               M_VALUES, baseline="R0")
    sliced_data = ope.LoggedData(*(None if a is None else np.asarray(a)[use] if np.ndim(a) == 2 else a
                                   for a in (data.rewards, data.viewed, data.logging_exposure, data.discount,
                                             data.predicted)))
    sliced = {name: ope.Target(t.exposure[use], t.direct[use]) for name, t in targets.items()}
    on_subset = ope.summarise(ope.contributions(sliced_data, sliced, M_VALUES, options=options), M_VALUES,
                              baseline="R0")
    assert restricted.keys() == on_subset.keys()
    for key, summary in restricted.items():
        for column, values in summary.items():
            np.testing.assert_allclose(values, on_subset[key][column], rtol=1e-12, err_msg=str((key, column)))
    r, e0, e, v = data.rewards, data.logging_exposure, targets["R1"].exposure, data.viewed
    per = np.asarray(ope.trajectory_dcg(r, e0, e, v, M_VALUES))
    reference = ope.mean_estimate(np.where(use[None], per, np.nan))
    np.testing.assert_allclose(restricted["dcg", "R1"]["value"], reference.value, rtol=1e-6)
    np.testing.assert_allclose(restricted["dcg", "R1"]["value_se"], reference.standard_error, rtol=1e-5)
    sn = ope.self_normalised_dcg(r[use], e0[use], e[use], v[use], M_VALUES, target_views=2.5)
    np.testing.assert_allclose(restricted["sndcg", "R1"]["value"], sn.value, rtol=1e-12)
    np.testing.assert_allclose(restricted["sndcg", "R1"]["value_se"], sn.standard_error, rtol=1e-12)
    indices = ope.restrict(ope.contributions(data, targets, M_VALUES), np.flatnonzero(use))
    np.testing.assert_array_equal(indices["dcg", "R1"].numerator, per[:, use])
    parts = ope.contributions(data, targets, M_VALUES)
    for rows, match in ((use[:-1], r"bool\[N\]"), (np.zeros_like(use), "selects no trajectory"),
                        (np.array([0, len(use)]), "integer indices in"), (np.array([0.5]), "integer indices in")):
        with pytest.raises(ValueError, match=match):
            ope.restrict(parts, rows)

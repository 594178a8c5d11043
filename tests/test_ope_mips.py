"""MIPS over item groups (`simrec.ope.trajectory_mips`, registry entry "mips"): group exposures
against a brute-force loop, singleton groups against DCG, and Monte Carlo against the exact
online value (no direct effect) and against its exact expectation (with a direct effect)."""
import math

import jax

import numpy as np
import pytest

from simrec import feed, ope
from tests.test_ope import ACTIVITY, LOGGER, Q, SCENARIO, TARGET, VIEW, A, N, X, log, tables  # noqa: F401

GROUPS = np.arange(A) % 6                                       # 6 groups of 4 items


def test_group_exposure_is_the_mean_exposure_of_the_items_group():
    table = np.random.default_rng(0).uniform(0, 1, (5, 9)).astype(np.float32)
    groups = np.array([2, 0, 2, 1, 0, 2, 4, 4, 1])                  # group 3 is empty
    expected = np.array([[np.mean([row[b] for b in range(9) if groups[b] == groups[a]]) for a in range(9)]
                         for row in table])
    np.testing.assert_allclose(np.asarray(ope.group_exposure(table, groups)), expected, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(ope.group_exposure(table, np.arange(9))), table)


@pytest.mark.parametrize("groups, match", [(np.arange(8), r"int\[9\]"), (np.arange(9.0), "integer"),
                                           (np.arange(9) - 1, ">= 0")])
def test_bad_item_groups_raise(groups, match):
    with pytest.raises(ValueError, match=match):
        ope.group_exposure(np.full((2, 9), 0.5, np.float32), groups)


def test_singleton_groups_make_mips_dcg(log):  # noqa: F811
    on = ope.from_log(log, {"R0": LOGGER, "R1": TARGET}, VIEW, item_groups=np.arange(A))
    table = ope.compare(on.data["like"], on.targets["like"], [1.0, 4.0, math.inf], estimators=["mips", "dcg"],
                        baseline="R0").set_index(["estimator", "target", "m"])
    for column in ("value", "value_se", "difference", "se"):
        np.testing.assert_array_equal(table.loc["mips"][column].to_numpy(), table.loc["dcg"][column].to_numpy())


def _mips(logged, signal):
    on = ope.from_log(logged, {"R0": LOGGER, "R1": TARGET}, VIEW, item_groups=GROUPS)
    table = ope.compare(on.data[signal], on.targets[signal], math.inf, estimators=["mips", "dcg"])
    return table[table.target == "R1"].set_index("estimator")


def test_mips_is_unbiased_without_a_direct_effect_and_its_weights_vary_less():
    """Click probabilities set by the item's group: MIPS at m = ∞ within 4 SE of the exact online
    value, as DCG is, with a smaller standard error (group weights are ratios of group totals)."""
    grouped = np.stack([q[:, GROUPS] for q in Q[:, :, :6]])        # q(x, a) = q(x, g(a))
    scenario = feed.Scenario(VIEW, (feed.from_table(grouped[0]), feed.from_table(grouped[1])), ACTIVITY,
                             ("like", "watch"))
    grouped_log = feed.simulate(jax.random.key(4), scenario, LOGGER, N)
    truth = np.asarray(feed.online_value(None, scenario, TARGET).mean)
    for s, signal in enumerate(("like", "watch")):
        table = _mips(grouped_log, signal)
        for name in ("mips", "dcg"):
            assert abs(table.loc[name].value - truth[s]) <= 4 * table.loc[name].value_se, (name, signal)
        assert table.loc["mips"].value_se < table.loc["dcg"].value_se


def test_with_a_direct_effect_mips_has_its_closed_form_mean_not_the_online_value(log):  # noqa: F811
    """Click probabilities that differ within a group (tests.test_ope's world): MIPS's mean is
    Σ_x p(x) Σ_a ε₀(x, a) q(x, a) ε(x, g(a)) / ε₀(x, g(a)) (group totals) within 4 SE, and its bias
    Σ_g ε(x, g)(q̄₀ − q̄) is beyond its SE (4 SE for like, 65 SE for watch)."""
    eps0, eps = tables(LOGGER), tables(TARGET)
    total0, total = (np.stack([e[:, GROUPS == g].sum(1) for g in range(6)], 1)[:, GROUPS] for e in (eps0, eps))
    truth = np.asarray(feed.online_value(None, SCENARIO, TARGET).mean)
    for s, signal in enumerate(("like", "watch")):
        expected = float(ACTIVITY @ (eps0 * Q[s] * total / total0).sum(1))
        row = _mips(log, signal).loc["mips"]
        assert abs(row.value - expected) <= 4 * row.value_se, (signal, row.value, expected)
        assert abs(expected - truth[s]) > {"like": 3, "watch": 10}[signal] * row.value_se   # the bias is real


def test_mips_needs_group_exposures_and_appears_only_with_them(log):  # noqa: F811
    on = ope.from_log(log, {"R0": LOGGER, "R1": TARGET}, VIEW)
    assert on.data["like"].logging_group_exposure is None and on.targets["like"]["R1"].group_exposure is None
    assert "mips" not in set(ope.compare(on.data["like"], on.targets["like"], 1.0).estimator)
    with pytest.raises(ValueError, match="mips"):
        ope.compare(on.data["like"], on.targets["like"], 1.0, estimators=["mips"])
    grouped = ope.from_log(log, {"R0": LOGGER, "R1": TARGET}, VIEW, item_groups=GROUPS)
    expected = ope.logged_exposures(log, ope.group_exposure(grouped.tables["R1"], GROUPS), np.unique(log.users))
    np.testing.assert_array_equal(np.asarray(grouped.targets["like"]["R1"].group_exposure), np.asarray(expected))
    sliced, targets = ope.subset(grouped.data["like"], grouped.targets["like"], np.arange(10))
    assert sliced.logging_group_exposure.shape[0] == 10 and targets["R1"].group_exposure.shape[0] == 10


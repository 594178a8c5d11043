"""Grid selection (simrec.models.select): the best point, and the edge flag on planted optima."""
import math

import numpy as np
import pytest

from simrec.models import Selection, select


def _planted(l2s, optimum=0.5):
    """Validation values peaked at l2 = optimum on a log scale: -(log10 l2 - log10 optimum)²."""
    grid = [{"l2": float(l2)} for l2 in l2s]
    return grid, [-(math.log10(l2) - math.log10(optimum)) ** 2 for l2 in l2s]


def test_edge_flag_fires_when_the_grid_excludes_the_planted_optimum():
    grid, values = _planted(np.logspace(-3, -1, 5))               # 1e-3 .. 1e-1, optimum 0.5
    chosen = select(grid, values)
    assert chosen == Selection(index=4, point={"l2": 0.1}, value=values[4], edges=("l2",),
                               unsearched=())


def test_no_edge_when_the_grid_brackets_the_planted_optimum():
    grid, values = _planted(np.logspace(-3, 0, 7))                # 1e-3 .. 1, optimum 0.5
    chosen = select(grid, values)
    assert chosen.point == {"l2": pytest.approx(10 ** -0.5)} and chosen.index == 5
    assert chosen.edges == () and chosen.unsearched == ()


def test_edges_per_hyperparameter_of_a_product_grid():
    """l2 peaks inside its grid, the learning rate at its smallest value, dim has 2 values."""
    grid = [{"l2": l2, "learning_rate": lr, "dim": dim}
            for l2 in (0.01, 0.1, 1.0) for lr in (0.01, 0.03, 0.1, 0.3) for dim in (8, 16)]
    values = [-(math.log10(p["l2"]) + 1) ** 2 - p["learning_rate"] + p["dim"] / 100
              for p in grid]
    chosen = select(grid, values)
    assert chosen.point == {"l2": 0.1, "learning_rate": 0.01, "dim": 16.0}
    assert chosen.edges == ("learning_rate",) and chosen.unsearched == ("dim",)


def test_lower_is_better_picks_the_minimum():
    grid, values = _planted([1e-3, 1e-2, 1e-1, 1.0, 10.0])
    losses = [-v for v in values]                                 # e.g. validation RMSE
    chosen = select(grid, losses, higher_is_better=False)
    assert chosen.index == 3 and chosen.value == losses[3] and chosen.edges == ()
    assert select(grid, losses).index == 0                        # the maximum otherwise


def test_nan_values_are_skipped_and_ties_pick_the_earliest():
    grid = [{"k": k} for k in (5, 10, 20, 40)]
    chosen = select(grid, [0.2, float("nan"), 0.3, 0.3])
    assert chosen.index == 2 and chosen.point == {"k": 20.0} and chosen.value == 0.3
    assert chosen.edges == ()                                     # 20 is interior of 5..40
    nan_best = select(grid, [0.1, 0.2, 0.3, float("nan")])        # the edge is over all points
    assert nan_best.index == 2 and nan_best.edges == ()
    assert select(grid[:1], [1.0]).unsearched == ("k",)


def test_two_value_grids_are_unsearched_not_edges():
    chosen = select([{"l2": 0.01}, {"l2": 0.05}], [0.1, 0.2])
    assert chosen.index == 1 and chosen.edges == () and chosen.unsearched == ("l2",)
    repeated = select([{"l2": 0.01}, {"l2": 0.05}, {"l2": 0.05}], [0.1, 0.2, 0.0])
    assert repeated.unsearched == ("l2",)                         # 2 distinct values of 3 points


@pytest.mark.parametrize("grid, values, match", [
    ([], [], r"grid is empty"),
    ([{"l2": 1.0}], [float("nan")], r"values are all NaN"),
    ([{"l2": 1.0}, {"l2": 2.0}], [0.1], r"values has 1 entries but grid has 2 points"),
    ([{"l2": 1.0}, {"dim": 2}], [0.1, 0.2], r"grid\[1\] has hyperparameters \['dim'\]"),
    ([{"l2": 1.0}, 2.0], [0.1, 0.2], r"grid\[1\] must be a mapping"),
    ([{}], [0.1], r"grid\[0\] has no hyperparameters"),
    ([{"l2": float("inf")}], [0.1], r"grid\[0\]\['l2'\] must be a finite number"),
    ([{"l2": "big"}], [0.1], r"grid\[0\]\['l2'\] must be a finite number"),
    ([{1: 1.0}], [0.1], r"non-string key"),
    ([{"l2": 1.0}], ["good"], r"values must be a sequence of numbers"),
    ([{"l2": 1.0}], [[0.1]], r"values must be a sequence of numbers"),
])
def test_bad_input_raises_naming_the_argument(grid, values, match):
    with pytest.raises(ValueError, match=match):
        select(grid, values)


def test_higher_is_better_must_be_bool():
    with pytest.raises(TypeError, match="higher_is_better must be bool"):
        select([{"l2": 1.0}], [0.1], higher_is_better="no")

"""Hyperparameter selection over a grid, with a flag for optima the grid may have cut off.

`select(grid, values)` picks the grid point with the best validation value, and reports each
hyperparameter whose selected value is the smallest or the largest it takes in the grid: there the
grid cannot show that the value is a maximum (the optimum may lie beyond the edge; widen the grid
on that side). A hyperparameter searched at fewer than 3 distinct values has no interior, so the
edge test means nothing for it: it is reported as not searched instead.

    grid   = [{"l2": 1e-3}, {"l2": 1e-2}, {"l2": 1e-1}]
    values = [0.20, 0.24, 0.27]                  # validation nDCG of each point
    select(grid, values)  ->  Selection(index=2, point={"l2": 0.1}, value=0.27, edges=("l2",),
                                        unsearched=())
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simrec import validate

__all__ = ["Selection", "select"]

#: a hyperparameter needs this many distinct grid values to have an interior
MIN_SEARCHED = 3


@dataclass(frozen=True)
class Selection:
    """The selected grid point of `select`.

    index: position of the point in the grid; point: its hyperparameters {name: value}; value: its
    validation value; edges: the hyperparameters (grid order) whose selected value is the smallest
    or largest of the >= 3 distinct values they take in the grid; unsearched: those that take
    fewer than 3 distinct values in the grid (no edge test)."""
    index: int
    point: Mapping[str, float]
    value: float
    edges: tuple[str, ...]
    unsearched: tuple[str, ...]


def select(grid: Sequence[Mapping[str, float]], values: Sequence[float], *,
           higher_is_better: bool = True) -> Selection:
    """The grid point with the best validation value, and where it lies in the grid.

    grid: P points, each a mapping {hyperparameter name: number} over the same names; values:
    f[P], the validation value of each point (NaN: not evaluated or failed, skipped). The best is
    the largest value (smallest with higher_is_better=False), the earliest among equals.
    Hyperparameter p with distinct grid values v₁ < … < v_m is an edge when m >= 3 and the
    selected value is v₁ or v_m; with m < 3 it is unsearched. Returns `Selection`.
    """
    grid = list(grid)
    if not grid:
        raise ValueError("grid is empty; pass at least one point, e.g. [{'l2': 0.1}]")
    points = [_point(i, point) for i, point in enumerate(grid)]
    names = tuple(points[0])
    for i, point in enumerate(points):
        if set(point) != set(names):
            raise ValueError(f"grid[{i}] has hyperparameters {sorted(point)} but grid[0] has "
                             f"{sorted(names)}; give every point the same names")
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iuf":
        raise validate.ArgumentTypeError(
            f"values must be a sequence of numbers, one per grid point (NaN for a point that was "
            f"not evaluated), got an array of dtype {values.dtype} and shape {values.shape}")
    values = values.astype(np.float64).tolist()
    if len(values) != len(points):
        raise ValueError(f"values has {len(values)} entries but grid has {len(points)} points; "
                         f"pass one value per grid point")
    if not isinstance(higher_is_better, bool):
        raise validate.ArgumentTypeError(f"higher_is_better must be bool, got "
                                         f"{type(higher_is_better).__name__}")
    evaluated = [i for i, value in enumerate(values) if not math.isnan(value)]
    if not evaluated:
        raise ValueError("values are all NaN, so no grid point can be selected; evaluate at least "
                         "one point")
    sign = 1.0 if higher_is_better else -1.0
    index = max(evaluated, key=lambda i: (sign * values[i], -i))
    edges, unsearched = [], []
    for name in names:
        distinct = sorted({point[name] for point in points})
        if len(distinct) < MIN_SEARCHED:
            unsearched.append(name)
        elif points[index][name] in (distinct[0], distinct[-1]):
            edges.append(name)
    return Selection(index=index, point=points[index], value=values[index], edges=tuple(edges),
                     unsearched=tuple(unsearched))


def _point(i: int, point) -> dict[str, float]:
    """grid[i] as {name: finite float}."""
    if not isinstance(point, Mapping):
        raise validate.ArgumentTypeError(f"grid[{i}] must be a mapping of hyperparameter name to "
                                         f"number, e.g. {{'l2': 0.1}}, got {type(point).__name__}")
    if not point:
        raise ValueError(f"grid[{i}] has no hyperparameters; give every point at least one")
    out = {}
    for name, value in point.items():
        if not isinstance(name, str):
            raise validate.ArgumentTypeError(f"grid[{i}] has a non-string key {name!r}; name "
                                             f"hyperparameters by strings")
        out[name] = validate.finite(f"grid[{i}][{name!r}]", value)
    return out


"""Eager argument checks shared by the feed simulator and the estimators.

Pytree dataclasses are rebuilt by JAX with arbitrary leaves (tracers, placeholders, shape
structs), so checks run only on concrete values (`is_value`) and never convert fields.
"""
from __future__ import annotations

import math

import jax
import numpy as np


def is_value(x) -> bool:
    """True for a concrete number or array (not a tracer or a JAX placeholder)."""
    if isinstance(x, jax.core.Tracer):
        return False
    return isinstance(x, (int, float, np.ndarray, np.generic, jax.Array)) and not isinstance(x, bool)


def check_scalar(name: str, value, *, low: float, high: float = math.inf,
                 low_open: bool = False, high_open: bool = False) -> None:
    """Raise ValueError unless the concrete scalar `value` lies in the given interval."""
    if not is_value(value):
        return
    arr = np.asarray(value, dtype=np.float64)
    v = float(arr) if arr.shape == () else math.nan
    ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:   # also catches NaN and non-scalars
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a scalar in {interval}, got {value!r}")


def check_int(name: str, value, *, low: int = 1) -> int:
    """Raise ValueError unless `value` is a Python/numpy integer >= low; returns it as int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_probabilities(name: str, values) -> None:
    """Raise ValueError unless the concrete array `values` holds probabilities in [0, 1]."""
    if not is_value(values):
        return
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 0.0 or arr.max() > 1.0):
        bad = arr[~(np.isfinite(arr) & (arr >= 0) & (arr <= 1))]
        raise ValueError(f"{name} must hold probabilities in [0, 1] (no NaN); found e.g. {bad.flat[0]!r}")

"""Argument validation: one rule per concept, used by every module of simrec.

Each function checks one kind of argument, returns it in canonical form (``int``, ``float``, a
numpy array, a boolean mask) and otherwise raises an error that names the argument, shows what it
got and says how to fix it:

- ``ValueError`` for a value of the right type that breaks the rule (``k=0``, NaN, a 3-row table
  looked up by 4 contexts);
- `ArgumentTypeError` for a value of the wrong type (``k=2.5``, ``k=True``, a string where a number
  belongs). It is a ``TypeError`` that is also a ``ValueError``, so callers that catch ``ValueError``
  for every bad argument keep working.

Scalars: `integer`, `finite` (a real number, optionally in an interval), `positive`, `probability`
(alias `in_unit_interval`), `choice`.  Arrays: `finite_values`, `no_nan`, `probabilities`,
`matrix_shape`, `indices` (ids in [0, size)), `table_rows` (a lookup table's rows against the
indices that gather from it, checked where the table is built so an out-of-range gather — which JAX
silently clamps to the last row — cannot happen) and `relevance_mask` (boolean or 0/1 only: "nonzero means relevant" is a modelling choice the caller makes
explicitly, with ``simrec.data.binarize(interactions, threshold)`` or ``(matrix > 0)``).

Pytree dataclasses are rebuilt by JAX with tracers and placeholders as leaves; guard their checks
with `is_concrete` so they run only on real values, and shape checks (`table_rows`, `matrix_shape`,
which work on tracers too) with `has_shape`.
"""
from __future__ import annotations

import math
import os
from typing import Sequence

import jax
import numpy as np
import scipy.sparse as sp

from simrec.config import ConfigError

__all__ = [
    "ArgumentTypeError", "is_concrete", "integer", "finite", "positive", "probability",
    "in_unit_interval", "choice", "finite_values", "no_nan", "probabilities", "matrix_shape",
    "table_rows", "has_shape", "indices", "relevance_mask", "MEMORY_LIMIT_ENV", "MemoryLimitError",
    "memory_limit", "fits_in_memory",
]

_BINARISE_HINT = ("binarise explicitly first, e.g. simrec.data.binarize(interactions, threshold) "
                 "or (matrix > 0) / (ratings >= 4)")


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type (also a ValueError, so `except ValueError` still catches it)."""


def is_concrete(x) -> bool:
    """True for a concrete number or array (not a JAX tracer, placeholder or shape struct)."""
    if isinstance(x, jax.core.Tracer):
        return False
    return isinstance(x, (int, float, np.ndarray, np.generic, jax.Array)) and not isinstance(x, bool)


def _got(value) -> str:
    """`value!r (type)` for error messages, short for arrays."""
    if isinstance(value, (np.ndarray, jax.Array)) and np.ndim(value) > 0:
        return f"an array of shape {tuple(value.shape)}"
    shown = value.item() if isinstance(value, np.generic) else value
    return f"{shown!r} ({type(value).__name__})"


def _interval(low, high, low_open: bool, high_open: bool) -> str:
    """' >= 1', ' in (0, 1]', ... (empty without bounds)."""
    low, high = (f"{b:g}" if isinstance(b, float) else b for b in (low, high))
    if low is None and high is None:
        return ""
    if high is None:
        return f" {'>' if low_open else '>='} {low}"
    if low is None:
        return f" {'<' if high_open else '<='} {high}"
    return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def _scalar(name: str, value, kinds: str, wanted: str):
    """The 0-d numpy view of a concrete real scalar whose dtype kind is in `kinds`, else a type error."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, jax.core.Tracer):
        raise ArgumentTypeError(f"{name} must be {wanted}, got {_got(value)}")
    if isinstance(value, (int, float, np.generic, np.ndarray, jax.Array)):
        arr = np.asarray(value)
        if arr.ndim == 0 and arr.dtype.kind in kinds:
            return arr
    raise ArgumentTypeError(f"{name} must be {wanted}, got {_got(value)}")


def integer(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """`value` as an ``int``, checked to lie in [low, high] (either bound optional).

    Accepts Python ints, numpy integers and 0-d integer arrays; rejects bool and floats (even 3.0),
    so a mistyped rate or flag never passes as a count.
    """
    wanted = "an integer" + _interval(low, high, False, False)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        raise ArgumentTypeError(f"{name} must be {wanted}, got {_got(value)}; pass {int(value)}")
    arr = _scalar(name, value, "iu", wanted)
    v = int(arr)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be {wanted}, got {v}")
    return v


def finite(name: str, value, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> float:
    """`value` as a finite ``float``, optionally in the interval given by low/high (closed unless
    low_open/high_open).  Accepts Python/numpy ints and floats and 0-d arrays; rejects bool, NaN, inf."""
    wanted = "a finite number" + _interval(low, high, low_open, high_open)
    v = float(_scalar(name, value, "iuf", wanted))
    inside = (low is None or (v > low if low_open else v >= low)) and \
             (high is None or (v < high if high_open else v <= high))
    if not math.isfinite(v) or not inside:
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    return v


def positive(name: str, value) -> float:
    """`value` as a finite ``float`` > 0."""
    return finite(name, value, low=0.0, low_open=True)


def probability(name: str, value, *, low_open: bool = False, high_open: bool = False) -> float:
    """`value` as a ``float`` in [0, 1] (or an open end: e.g. ``low_open=True`` for (0, 1])."""
    return finite(name, value, low=0.0, high=1.0, low_open=low_open, high_open=high_open)


in_unit_interval = probability


def choice(name: str, value, options: Sequence):
    """`value` if it is one of `options` (equal and of the same type, any str counting as one
    type; so True is not 1), else a ValueError listing them."""
    def same(option) -> bool:
        kinds_match = type(value) is type(option) or (isinstance(value, str) and isinstance(option, str))
        try:
            return kinds_match and bool(value == option)
        except (TypeError, ValueError):
            return False
    if not any(same(option) for option in options):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def _real_array(name: str, values) -> np.ndarray:
    """A numpy view of a real-valued (bool, int or float) array, else a type error."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return arr


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> str:
    index = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape)
    return f"{arr[index].item()!r} at index {tuple(int(i) for i in index)}"


def no_nan(name: str, values) -> np.ndarray:
    """`values` as a numpy array with no NaN (infinities allowed)."""
    arr = _real_array(name, values)
    bad = np.isnan(arr)
    if bad.any():
        raise ValueError(f"{name} contains NaN (found {_first_bad(arr, bad)}); drop or impute the "
                         "missing values first")
    return arr


def finite_values(name: str, values) -> np.ndarray:
    """`values` as a numpy array of finite numbers (no NaN, no inf)."""
    arr = _real_array(name, values)
    bad = ~np.isfinite(arr)
    if bad.any():
        what = "NaN" if np.isnan(arr).any() else "±inf"
        raise ValueError(f"{name} contains {what} (must be finite; found {_first_bad(arr, bad)}); "
                         "remove or replace those entries")
    return arr


def probabilities(name: str, values) -> np.ndarray:
    """`values` as a float64 numpy array of probabilities in [0, 1] (no NaN)."""
    arr = _real_array(name, values).astype(np.float64)
    bad = ~((arr >= 0.0) & (arr <= 1.0))          # NaN fails both comparisons
    if bad.any():
        raise ValueError(f"{name} must hold probabilities in [0, 1] (no NaN), found {_first_bad(arr, bad)}")
    return arr


def matrix_shape(name: str, array, shape: Sequence[int | None]) -> tuple[int, ...]:
    """The shape of `array` (numpy, JAX, scipy.sparse or a tracer), checked against `shape`,
    where None matches any length; e.g. ``matrix_shape("rate", r, (n_users,))``."""
    got = tuple(array.shape) if hasattr(array, "shape") else np.shape(array)
    want = tuple(shape)
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = "(" + ", ".join("any" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {shown}, got shape {got}")
    return got


def table_rows(name: str, table, n_rows: int, what: str) -> None:
    """Check that lookup table `table` has exactly `n_rows` rows, one per `what` it is indexed by.

    Call it where the table is combined with the thing that indexes it (a scenario, a policy), so a
    gather beyond the last row — which JAX clamps to the last row without an error — cannot happen.
    Works on tracers and shape structs (shapes are static).
    """
    shape = tuple(table.shape) if hasattr(table, "shape") else np.shape(table)
    rows = shape[0] if shape else None
    if rows != n_rows:
        raise ValueError(f"{name} has {'no rows (it is a scalar)' if rows is None else f'{rows} row(s)'} "
                         f"but is indexed by {n_rows} {what}; pass a table of shape ({n_rows}, ...), "
                         f"one row for each")


def has_shape(x) -> bool:
    """True when `x` has a static shape (an array, a tracer or a shape struct), False for the
    placeholders JAX puts in rebuilt pytrees."""
    return hasattr(x, "shape") and hasattr(x, "ndim")


def indices(name: str, values, size: int, what: str) -> np.ndarray:
    """`values` as an integer numpy array of ids in [0, size), `size` being how many `what` exist,
    e.g. ``indices("contexts", contexts, table.shape[0], "rows of the exposure table")``."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{name} must hold integer ids, got dtype {arr.dtype}")
    bad = (arr < 0) | (arr >= size)
    if bad.any():
        raise ValueError(f"{name} must hold ids in [0, {size}) ({size} {what}), found {_first_bad(arr, bad)}")
    return arr


def relevance_mask(name: str, array, shape: Sequence[int | None] | None = None):
    """A boolean copy of a relevance matrix: boolean or 0/1 only, never "any nonzero".

    `array` is dense (numpy or JAX; returns a bool numpy array of the same shape) or scipy.sparse
    (returns a bool CSR matrix with duplicates summed, explicit zeros dropped and sorted indices).
    Values other than 0/1 (ratings, counts, NaN) are a ValueError: binarise explicitly first. With
    `shape`, the shape is checked too (None entries match any length).
    """
    if sp.issparse(array):
        matrix = sp.csr_matrix(array, copy=True)
        matrix.sum_duplicates()
        values = matrix.data
    elif isinstance(array, jax.core.Tracer) or not (hasattr(array, "__array__") or isinstance(array, (list, tuple))):
        raise ArgumentTypeError(f"{name} must be a boolean (or 0/1) numpy, JAX or scipy.sparse array, "
                                f"got {type(array).__name__}")
    else:
        matrix = None
        values = np.asarray(array)
    if values.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{name} must be boolean (or 0/1), got dtype {values.dtype}")
    if values.dtype != bool:
        bad = ~((values == 0) | (values == 1))
        if bad.any():
            raise ValueError(f"{name} must be boolean (or 0/1), found {values[bad][0].item()!r}; "
                             f"relevance is never 'any nonzero': {_BINARISE_HINT}")
    if shape is not None:
        matrix_shape(name, array, shape)
    if matrix is None:
        return values.astype(bool)
    matrix = matrix.astype(bool)
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


# --------------------------------------------------------------------------------------------
# Memory: refuse an allocation that cannot fit, before making it
# --------------------------------------------------------------------------------------------

#: environment variable: the memory limit in GB (1e9 bytes) used instead of the available memory
MEMORY_LIMIT_ENV = "SIMREC_MEMORY_LIMIT_GB"


class MemoryLimitError(MemoryError):
    """An allocation estimated to exceed the memory limit (`fits_in_memory`); the ``simrec``
    command prints its one line without a traceback."""


def memory_limit() -> tuple[int, str]:
    """(bytes, where the number comes from): ``$SIMREC_MEMORY_LIMIT_GB`` when set (GB of 1e9
    bytes, a finite number >= 0), else MemAvailable of /proc/meminfo, else the machine's physical
    memory (``os.sysconf``)."""
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if text:
        try:
            gb = float(text)
        except ValueError:
            gb = math.nan
        if not (math.isfinite(gb) and gb >= 0):
            raise ConfigError(f"{MEMORY_LIMIT_ENV} must be a finite number of GB >= 0, got {text!r}; "
                              "unset it to use the available memory")
        return int(gb * 1e9), MEMORY_LIMIT_ENV
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "MemAvailable"
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "physical memory"


def fits_in_memory(what: str, nbytes: int) -> int:
    """Refuse an allocation before making it: `nbytes` (the bytes the caller's arrays hold at
    once, e.g. U * I * itemsize summed over them, from concrete Python ints) against
    `memory_limit`. Returns nbytes, or raises `MemoryLimitError` in one line stating the estimate,
    the limit and the fix. Host code only, never inside jit."""
    if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise ValueError(f"nbytes must be an integer >= 0 (bytes), got {_got(nbytes)}")
    nbytes = int(nbytes)
    limit, source = memory_limit()
    if nbytes > limit:
        def gb(n: int) -> str:
            return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e9:.2g} GB"
        have = (f"the limit of {gb(limit)} set by {MEMORY_LIMIT_ENV}" if source == MEMORY_LIMIT_ENV
                else f"the {gb(limit)} available ({source}; {MEMORY_LIMIT_ENV} overrides it)")
        raise MemoryLimitError(
            f"{what} needs an estimated {gb(nbytes)} of memory, more than {have}; use smaller "
            "n_users / n_items, or a simrec.procedural world, which is never materialised "
            "(computed per block of users)")
    return nbytes


__all__ += ["MEMORY_LIMIT_ENV", "MemoryLimitError", "memory_limit", "fits_in_memory"]

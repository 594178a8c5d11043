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
(alias `in_unit_interval`), `choice`.  Arrays: `real_array` (a real-valued array, e.g. a score
matrix, without copying it), `finite_values`, `no_nan`, `probabilities`, `numbers` (a scalar or
array of numbers in an interval, inf optionally allowed, e.g. clipping values), `counts` (whole
numbers), `exposures` (an exposure table: expected views in [0, 1]),
`matrix_shape`, `indices` (ids in [0, size)), `table_rows` (a lookup table's rows against the
indices that gather from it, checked where the table is built so an out-of-range gather — which JAX
silently clamps to the last row — cannot happen) and `relevance_mask` (boolean or 0/1 only: "nonzero means relevant" is a modelling choice the caller makes
explicitly, with ``simrec.data.binarize(interactions, threshold)`` or ``(matrix > 0)``).

A bool is never a number: ``True`` passed where a count, a rate or a clipping value belongs is a
type error in every scalar rule and in the array rules given a bare bool (or a list holding one);
boolean *arrays* stay valid data for the array rules (0/1 indicators), except where noted.

Nested Python lists are accepted wherever an array is (converted with ``numpy.asarray``); a ragged
one (rows of different lengths) is a one-line ValueError naming the argument.

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
    "in_unit_interval", "choice", "real_array", "finite_values", "no_nan", "probabilities", "numbers",
    "counts", "clipping_values", "exposures", "EXPOSURE_TOLERANCE", "matrix_shape", "table_rows", "has_shape", "indices",
    "relevance_mask", "MEMORY_LIMIT_ENV", "MemoryLimitError", "memory_limit", "fits_in_memory",
]

#: float32 rounding allowed above 1 in an exposure (a sum over ranks of P(rank) P(view) <= 1)
EXPOSURE_TOLERANCE = 1e-5

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


def _as_array(name: str, values, wanted: str = "a rectangular array") -> np.ndarray:
    """``numpy.asarray(values)``; a ragged nested list is a one-line ValueError naming `name`."""
    try:
        return np.asarray(values)
    except ValueError:
        if not isinstance(values, (list, tuple)):
            raise
        raise ValueError(f"{name} must be {wanted}, got a ragged nested list (rows of different "
                         "lengths); pad the rows to one length or pass a numpy array") from None


def _holds_bool(values) -> bool:
    """A bool scalar or array, or a (nested) list or tuple with a bool in it (which numpy would
    silently turn into 0/1)."""
    if hasattr(values, "dtype"):
        return np.dtype(values.dtype) == bool
    if isinstance(values, bool):
        return True
    return isinstance(values, (list, tuple)) and any(_holds_bool(v) for v in values)


def _dtype_hint(dtype) -> str:
    """How to fix a non-numeric dtype, for the end of a message."""
    kind = np.dtype(dtype).kind
    if kind == "c":
        return "; take the real part explicitly (.real) if the imaginary part is meant to be dropped"
    if kind == "b":
        return "; convert it explicitly (.astype(float)) if 0/1 numbers are meant"
    return "; convert it to a numeric (int or float) array first"


def real_array(name: str, values, shape: Sequence[int | None] | None = None, *, what: str = "",
               bool_ok: bool = True):
    """`values` checked to hold real numbers (int or float; bool too when `bool_ok`), never copied:
    a numpy, JAX (kept on its device) or scipy.sparse array is returned as given, a rectangular
    nested list as a numpy array. Complex, text and object dtypes are a type error (complex is
    never silently cut to its real part). With `shape` the shape is checked (`matrix_shape`);
    `what` names the axes in the messages, e.g. ``real_array("scores", s, (None, None),
    what="[users, items]")`` -> "scores must have shape (any, any), a 2-D array [users, items];
    got shape (3,)".
    """
    wanted = (f"a {len(shape)}-D array" if shape is not None else "a rectangular array") + \
        (f" {what}" if what else "")
    if not (hasattr(values, "dtype") and hasattr(values, "shape")):
        values = _as_array(name, values, wanted)
    dtype = np.dtype(values.dtype)
    if dtype.kind not in ("biuf" if bool_ok else "iuf"):
        raise ArgumentTypeError(f"{name} must hold real numbers{'' if bool_ok else ' (int or float, not bool)'}, "
                                f"got dtype {dtype}" + _dtype_hint(dtype))
    if shape is not None:
        matrix_shape(name, values, shape, wanted if what else "")
    return values


def _real_array(name: str, values) -> np.ndarray:
    """`real_array` as a numpy array; a bare bool (``True`` given for a number) is a type error."""
    if isinstance(values, bool) or (hasattr(values, "dtype") and np.ndim(values) == 0 and _holds_bool(values)):
        raise ArgumentTypeError(f"{name} must be a number or an array of numbers, got {_got(values)}")
    return np.asarray(real_array(name, values))


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


def numbers(name: str, values, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, inf: bool = False) -> np.ndarray:
    """`values` (a scalar or an array, e.g. a list) as a float64 numpy array of numbers in the
    interval given by low/high (closed unless low_open/high_open); +inf passes only with ``inf``
    (e.g. a clipping value m >= 1 where inf means no clipping). NaN is an error, and so is a bool
    anywhere (``m=True`` is not m = 1) or a non-real dtype."""
    wanted = "a number" + _interval(low, high, low_open, high_open) + (" or inf" if inf else "") + \
        " (or an array of them)"
    if _holds_bool(values):
        raise ArgumentTypeError(f"{name} must be {wanted}, got {_got(values)}; a bool is not a number "
                                "(True is not 1)")
    arr = _as_array(name, values, wanted)
    if arr.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must be {wanted}, got {_got(values)}"
                                + ("" if arr.ndim == 0 else f" of dtype {arr.dtype}") + _dtype_hint(arr.dtype))
    arr = arr.astype(np.float64)
    inside = np.isfinite(arr) | ((arr == np.inf) if inf else False)      # NaN is never inside
    if low is not None:
        inside &= arr > low if low_open else arr >= low
    if high is not None:
        inside &= arr < high if high_open else arr <= high
    if not inside.all():
        found = arr.item() if arr.ndim == 0 else _first_bad(arr, ~inside)
        raise ValueError(f"{name} must be {wanted}, got {found!r}" if arr.ndim == 0 else
                         f"{name} must be {wanted}, found {found}")
    return arr


def clipping_values(name: str, values) -> tuple[float, ...]:
    """A non-empty tuple of distinct clipping values m >= 1 (inf = no clipping; never a bool or
    NaN), e.g. a study's grid of m; a ValueError naming `name` otherwise."""
    arr = numbers(name, values, low=1, inf=True).ravel()
    if arr.size == 0 or len(set(arr.tolist())) != arr.size:
        raise ValueError(f"{name} must be distinct clipping values >= 1 (inf allowed), at least one, got "
                         f"{_got(values)}")
    return tuple(arr.tolist())


def counts(name: str, values, *, low: int = 0) -> np.ndarray:
    """`values` (a scalar or an array) as an int64 numpy array of whole numbers >= low.

    Integer dtypes pass; floats pass only when every value is a whole number (e.g. a row sum of a
    float matrix), so 2.7 is an error rather than a silent truncation to 2. Bool (a flag, not a
    count), NaN, inf, complex and text are errors."""
    wanted = f"whole numbers >= {low}"
    if _holds_bool(values):
        raise ArgumentTypeError(f"{name} must hold counts ({wanted}), got {_got(values)}; a bool is "
                                "a flag, not a count")
    arr = _as_array(name, values, f"an array of counts ({wanted})")
    if arr.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must hold counts ({wanted}), got dtype {arr.dtype}"
                                + _dtype_hint(arr.dtype))
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            found = repr(arr.item()) if arr.ndim == 0 else _first_bad(arr, bad)
            raise ValueError(f"{name} must hold counts ({wanted}), found {found}; counts are never "
                             "truncated: round them (np.round) or pass integers")
    bad = arr < low
    if bad.any():
        found = repr(arr.item()) if arr.ndim == 0 else _first_bad(arr, bad)
        raise ValueError(f"{name} must hold counts ({wanted}), found {found}")
    return arr.astype(np.int64)


def exposures(name: str, table, shape: Sequence[int | None] = (None, None)):
    """Check an exposure table ε(x, a) = sum_i P(a at rank i | x) P(V=1 | R=i): a [contexts, items]
    array (numpy or JAX) of expected views, so finite and in [0, 1] (up to `EXPOSURE_TOLERANCE` of
    float32 rounding above 1; zeros are legal: items a policy never shows). A scalar is not a
    table. Values are checked only when concrete (tracers: shape only). Returns `table` as given."""
    got = tuple(table.shape) if hasattr(table, "shape") else _as_array(name, table).shape
    if len(got) != len(shape):
        shown = " x ".join("any" if w is None else str(w) for w in shape)
        raise ValueError(f"{name} must be an exposure table of shape {shown} (contexts x items, e.g. "
                         f"simrec.feed.exposure(...).mean), got "
                         f"{'a scalar' if not got else f'shape {got}'}")
    matrix_shape(name, table, shape)
    if isinstance(table, jax.core.Tracer):
        return table
    arr = _real_array(name, table)
    bad = ~((arr >= 0) & (arr <= 1.0 + EXPOSURE_TOLERANCE))      # NaN fails both comparisons
    if bad.any():
        raise ValueError(f"{name} must hold exposures in [0, 1] (expected views of an item: the sum "
                         f"over ranks of P(rank) P(view)), found {_first_bad(arr, bad)}; pass an "
                         f"exposure table such as simrec.feed.exposure(...).mean")
    return table


def matrix_shape(name: str, array, shape: Sequence[int | None], what: str = "") -> tuple[int, ...]:
    """The shape of `array` (numpy, JAX, scipy.sparse or a tracer), checked against `shape`,
    where None matches any length; e.g. ``matrix_shape("rate", r, (n_users,))``. `what`, if
    given, describes the array in the message (e.g. "a 2-D array [users, items]")."""
    got = tuple(array.shape) if hasattr(array, "shape") else _as_array(name, array).shape
    want = tuple(shape)
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = "(" + ", ".join("any" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {shown}{f', {what};' if what else ','} got shape {got}")
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
    arr = _as_array(name, values)
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
        values = _as_array(name, array)
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

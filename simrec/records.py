"""A study's records: tidy rows checked against the columns the study declares.

A study's ``compute`` returns a list of records (dicts, or a DataFrame) whose keys are exactly the
declared ``Study.columns`` and whose values have the declared types (int, float, str, bool;
numpy and JAX scalars are converted, None is NaN in a float column). `check_records` turns them
into rows in column order, which the runner caches and the executor hands back; `records_frame`
makes one DataFrame of all rows with the declared dtypes. Used by `simrec.runner` and
`simrec.executor` (which computes cells without importing the runner).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["COLUMN_TYPES", "RecordError", "check_records", "records_frame"]

Cell = Mapping[str, Any]
#: the types a declared column may have
COLUMN_TYPES = (int, float, str, bool)


class RecordError(TypeError):
    """A study's ``compute`` returned records that do not match its declared columns."""


def _coerce(study: str, column: str, tp: type, value):
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)) and np.ndim(value) == 0:
        value = np.asarray(value).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if tp is float and value is None:
        return math.nan
    ok = (isinstance(value, bool) if tp is bool else
          isinstance(value, int) and not isinstance(value, bool) if tp is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if tp is float else
          isinstance(value, str))
    if not ok:
        raise RecordError(f"study {study!r}: column {column!r} is declared {tp.__name__} but a "
                          f"record holds {value!r} ({type(value).__name__})")
    return float(value) if tp is float else value


def check_records(study, cell: Cell, records) -> list[list]:
    """The records of one cell as rows in `Study.columns` order; `RecordError` when a record's
    keys differ from the declared columns or a value has the wrong type."""
    if hasattr(records, "to_dict"):                        # a DataFrame
        records = records.to_dict("records")
    if isinstance(records, Mapping) or not isinstance(records, (list, tuple)):
        raise RecordError(f"study {study.name!r}: compute must return a list of records (dicts), "
                          f"got {type(records).__name__} for cell {dict(cell)}")
    declared, rows = list(study.columns), []
    for i, record in enumerate(records):
        if not isinstance(record, Mapping) or set(record) != set(declared):
            got = set(record) if isinstance(record, Mapping) else type(record).__name__
            missing = sorted(set(declared) - got) if isinstance(got, set) else declared
            extra = sorted(got - set(declared)) if isinstance(got, set) else []
            raise RecordError(f"study {study.name!r}, cell {dict(cell)}: record {i} does not match "
                              f"the declared columns (missing {missing}, undeclared {extra})")
        rows.append([_coerce(study.name, c, study.columns[c], record[c]) for c in declared])
    return rows


def records_frame(study, rows: Sequence[Sequence]):
    """One DataFrame of all records with the declared column order and dtypes."""
    import pandas as pd
    frame = pd.DataFrame(list(rows), columns=list(study.columns))
    dtypes = {int: "int64", float: "float64", bool: "bool", str: object}
    return frame.astype({c: dtypes[tp] for c, tp in study.columns.items()})

"""Real interaction data: MovieLens-style files -> a sparse user x item matrix with id maps.

Three layouts are read, each holding the columns user, item[, rating[, timestamp]]:

* ``"csv"``: comma-separated with one header line, e.g. MovieLens ``ratings.csv``
  (``userId,movieId,rating,timestamp``);
* ``"tsv"``: tab-separated, e.g. MovieLens-100K ``u.data`` (no header) or HetRec
  ``user_artists.dat`` (header ``userID<TAB>artistID<TAB>weight``);
* ``"dat"``: ``::``-separated, e.g. MovieLens-1M/10M ``ratings.dat`` (no header).

A header line is read by name, in any column order: each name must be one of `COLUMN_NAMES`
(compared case-insensitively, ignoring ``_``, ``-``, ``.``, spaces and quotes, so ``userId``,
``user_id`` and ``USER ID`` are all the user), user and item are required, and a header with
an unknown or repeated name or without user or item is refused with one line naming the file,
the header and the names expected. A file without a header is read by position: user, item[,
rating[, timestamp]]. Whether line 1 is a header is ``header=``; by default a csv file must have
one and a tsv or dat file has one exactly when no field of line 1 is a number.

Ids are integers when every id in the column is one, text otherwise; rows and columns are the
users and items in increasing id order. A file without a rating column gets rating 1.0 for every
listed pair. Timestamps must be integers (e.g. Unix seconds, kept exact up to int64): text dates
are not parsed; convert them first (e.g. ``pandas.to_datetime(...).astype("int64")``). A
malformed file (a missing or extra field, a non-numeric rating or timestamp, a blank line inside
the data, a repeated (user, item) pair, an empty file) raises `DataError` naming the file and the
1-based line number.

Every loader failure is a `DataError` (a ValueError) whose message is one complete line: the file,
the 1-based line where known, the problem and the fix. Files are text in UTF-8 by default
(``encoding=`` of `load_interactions` reads others, e.g. ``"latin-1"``); a UTF-8 byte-order mark,
as Excel writes at the start of its CSV exports, is skipped. Before parsing, a file is scanned
once: a byte that is not valid in the encoding (e.g. Latin-1 text read as UTF-8), a NUL byte
(binary junk) or compressed data under a text name is refused with its line and byte offset,
never parsed into garbage ids; an error on a last line that ends without a newline says the file
may be truncated.

Preprocessing follows the papers: `binarize` keeps ratings >= a threshold as positives (Lim §6:
4 and 5 stars; Jeunen App. A: ratings >= 4), `filter_min_counts` takes the (min_user, min_item)
core (Jeunen App. A: items with >= 5 users), `densify_top` keeps the most active users and most
popular items (Lim §6). Per-user train/test splits are `simrec.missing.split_per_user`.

`load_coat` reads the Coat shopping data (Schnabel, Swaminathan, Singh, Chandak, Joachims,
ICML'16): dense whitespace-separated user x item matrices of self-selected (MNAR) ratings,
ratings of items assigned at random (MCAR) and the authors' estimated observation propensities.

`load_open_bandit` reads one log of the Open Bandit Dataset (Saito, Aihara, Matsutani, Narita,
NeurIPS'21 Datasets and Benchmarks): real (item, position) impressions of a uniform-random or a
Bernoulli-Thompson-sampling policy with their clicks and logging propensities
(`simrec.obp` converts them to Open Bandit Pipeline's dictionary and to a `simrec.feed.Log`).
"""
from __future__ import annotations

import codecs
import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import validate

__all__ = [
    "DataError", "FORMATS", "COLUMN_NAMES", "Interactions", "load_interactions", "user_index", "item_index", "binarize",
    "filter_ratings", "filter_min_counts", "densify_top", "COAT_FILES", "Coat", "load_coat",
    "OPEN_BANDIT_POLICIES", "OPEN_BANDIT_CAMPAIGNS", "OpenBandit", "open_bandit_file", "load_open_bandit",
]

FORMATS = ("csv", "tsv", "dat")
_SEPARATORS = {"csv": ",", "tsv": "\t", "dat": "::"}
_COLUMNS = ("user", "item", "rating", "timestamp")
COLUMN_NAMES = {     # header names of each column, normalised by `_normalise_name`
    "user": ("user", "userid", "uid", "u", "username", "customerid", "reviewerid", "visitorid"),
    "item": ("item", "itemid", "iid", "i", "movieid", "artistid", "trackid", "songid", "productid",
             "bookid", "isbn", "asin", "businessid"),
    "rating": ("rating", "score", "weight", "count", "r", "stars", "playcount", "value"),
    "timestamp": ("timestamp", "time", "ts", "t", "unixtime", "unixreviewtime"),
}


@dataclass(frozen=True)
class Interactions:
    """A user x item interaction matrix with the original ids of its rows and columns.

    ratings: f32 CSR [U, I] with sorted column indices and one stored entry per listed pair (a
        rating of 0 stays stored); user_ids [U] and item_ids [I]: the original ids (int64 or
        text), strictly increasing, so row u is user user_ids[u]; timestamps: i64[nnz] aligned
        with ratings.data (entry order of the CSR), or None when the file had no timestamps.
    """
    ratings: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    timestamps: np.ndarray | None = None

    def __post_init__(self):
        if not sp.issparse(self.ratings) or self.ratings.format != "csr" \
                or self.ratings.dtype != np.float32:
            raise ValueError(f"ratings must be a float32 scipy.sparse CSR matrix, got "
                             f"{type(self.ratings).__name__} of dtype {self.ratings.dtype}")
        if self.ratings.shape != (len(self.user_ids), len(self.item_ids)):
            raise ValueError(f"ratings has shape {self.ratings.shape} but there are "
                             f"{len(self.user_ids)} user ids and {len(self.item_ids)} item ids")
        for name, ids in (("user_ids", self.user_ids), ("item_ids", self.item_ids)):
            if len(ids) > 1 and not np.all(ids[1:] > ids[:-1]):
                raise ValueError(f"{name} must be strictly increasing (one row/column per id)")
        if self.timestamps is not None and self.timestamps.shape != (self.ratings.nnz,):
            raise ValueError(f"timestamps must have one entry per stored rating "
                             f"({self.ratings.nnz}), got shape {self.timestamps.shape}")


# --------------------------------------------------------------------------------------------
# Errors and text checks
# --------------------------------------------------------------------------------------------

class DataError(ValueError):
    """A data file (or a loader argument) that cannot be read as documented.

    The message is one complete line (the command line prints it as is): the file, the 1-based
    line where known, the problem and the fix. ``path`` and ``line`` (None where unknown) are kept
    as attributes. A ValueError, so ``except ValueError`` catches it too.
    """

    def __init__(self, message: str, path: Path | None = None, line: int | None = None):
        super().__init__(message)
        self.path, self.line = path, line


def _fail(path: Path, line: int, problem: str) -> DataError:
    return DataError(f"{path}, line {line}: {problem}", path, line)


def _error(path: Path, problem: str) -> DataError:
    """A DataError about the whole file (no line)."""
    return DataError(f"{path}: {problem}", path)


def _argument(check, *args):
    """A `simrec.validate` check of a loader argument, its error as a DataError."""
    try:
        return check(*args)
    except ValueError as error:
        raise DataError(str(error)) from None


def _codec(encoding) -> str:
    """The codec to read `encoding` with; UTF-8 reads as utf-8-sig, which skips a leading
    byte-order mark (Excel's CSV export) and is plain UTF-8 otherwise."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise DataError(f"encoding={encoding!r} is not a text encoding Python knows; pass e.g. "
                        "encoding='utf-8' or encoding='latin-1'") from None
    return "utf-8-sig" if name == "utf-8" else name


@dataclass(frozen=True)
class _TextFile:
    """What the scan of `path` learnt: the number of lines, and whether the last one has no newline."""
    path: Path
    lines: int
    unterminated: bool


_SCAN_BYTES = 1 << 24
_COMPRESSED = {b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz",
               b"\x28\xb5\x2f\xfd": "zstd"}
_WIDE = {b"\xff\xfe\x00\x00": "utf-32", b"\x00\x00\xfe\xff": "utf-32", b"\xff\xfe": "utf-16", b"\xfe\xff": "utf-16"}


def _encoding_fix(codec: str, with_argument: bool) -> str:
    if not with_argument:
        return "the file is corrupted or not in its documented format: get a fresh copy of it"
    return ("re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 OLD > NEW) or pass its encoding, "
            "e.g. encoding='latin-1'" if codec == "utf-8-sig" else
            "pass the file's actual encoding as encoding=, or re-encode the file as UTF-8")


def _check_start(path: Path, head: bytes, codec: str, with_argument: bool) -> None:
    """Compressed data or a UTF-16/32 byte-order mark where `codec` text should start."""
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            raise _error(path, f"{kind}-compressed data, not text (it starts with the {kind} magic "
                         f"bytes); decompress it first (e.g. gunzip -k) and load the decompressed file")
    if not codec.startswith(("utf-16", "utf-32")):
        for bom, kind in _WIDE.items():
            if head.startswith(bom):
                fix = f"pass encoding='{kind}' or re-encode it as UTF-8" if with_argument else \
                    "re-encode it as UTF-8"
                raise _error(path, f"{kind.upper()} text (it starts with a {kind.upper()} byte-order mark), "
                             f"not {codec.removesuffix('-sig')}; {fix}")


def _scan_text(path: Path, codec: str, *, with_argument: bool = False, gzipped: bool = False) -> _TextFile:
    """Check in one streaming pass that `path` (decompressed when `gzipped`) is text in `codec`.

    Raises DataError naming the 1-based line and the byte offset of the first byte that is not
    valid in the codec or of a NUL byte (binary junk), or for compressed data (or a gzip file that
    is not one, or ends early). with_argument: whether the loader takes ``encoding=`` (the fix
    suggests it). Returns the line count and whether the last line lacks a newline.
    """
    scan = "utf-8" if codec == "utf-8-sig" else codec
    decoder = codecs.getincrementaldecoder(scan)()
    newline = "\n".encode(scan)[len("".encode(scan)):]           # without a byte-order mark
    wide = scan.startswith(("utf-16", "utf-32"))
    where = " of the decompressed text" if gzipped else ""
    lines, offset, last = 0, 0, b""
    try:
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as file:
            while chunk := file.read(_SCAN_BYTES):
                skip = 0
                if offset == 0:
                    _check_start(path, chunk, codec, with_argument)
                    skip = 3 if codec == "utf-8-sig" and chunk.startswith(codecs.BOM_UTF8) else 0
                nul = -1 if wide else chunk.find(b"\x00")
                if nul >= 0:
                    raise _fail(path, lines + chunk.count(newline, 0, nul) + 1,
                                f"NUL byte at byte offset {offset + nul}{where}: binary data in a text file "
                                "(a corrupted copy?); get a fresh copy of the file")
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk[skip:])
                except UnicodeDecodeError as error:
                    at = offset + skip - pending + error.start
                    line = lines + chunk.count(newline, 0, max(at - offset, 0)) + 1
                    raise _fail(path, line, f"byte 0x{error.object[error.start]:02x} at byte offset {at}{where} "
                                f"is not valid {scan} text ({error.reason}); "
                                f"{_encoding_fix(codec, with_argument)}") from None
                lines += chunk.count(newline)
                offset += len(chunk)
                last = chunk[-len(newline):]
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as error:
                raise _fail(path, lines + 1, f"the file ends inside a multi-byte {scan} character (byte offset "
                            f"{offset - len(error.object) + error.start}{where}): it is truncated or not "
                            f"{scan}; {_encoding_fix(codec, with_argument)}") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        with open(path, "rb") as file:
            is_gzip = file.read(2) == b"\x1f\x8b"
        header = isinstance(error, gzip.BadGzipFile) and str(error).startswith("Not a gzipped file")
        if header and not is_gzip:
            problem = ("not gzip data, though its name ends in .gz; get a fresh copy (a plain CSV file must not "
                       "be named .gz)")
        elif header:
            problem = "bytes that are not gzip data follow the gzip stream (junk appended?); get a fresh copy"
        elif isinstance(error, EOFError):
            problem = "the gzip data ends early (a truncated copy?); get a complete copy"
        else:
            problem = f"corrupt gzip data ({error}); get a fresh copy"
        raise _error(path, problem) from None
    except OSError as error:
        raise _error(path, f"cannot read it ({error.strerror or error}); check the path and its permissions") from None
    unterminated = offset > 0 and last != newline
    return _TextFile(path, lines + unterminated, unterminated)


def _truncation_hint(error: DataError, text: _TextFile) -> DataError:
    """`error`, with a note when it is on a last line that ends without a newline."""
    if error.path != text.path or error.line is None or error.line != text.lines or not text.unterminated:
        return error
    return DataError(f"{error}; the file ends in the middle of this line without a newline, so it may be "
                     "truncated (an interrupted download or copy?): get a complete copy", error.path, error.line)


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------

def _detect_format(path: Path, first_line: str) -> str:
    """The layout from the file name (``*.csv``, ``*.dat``, ``*.tsv``, ``u.data``) or else
    from the separator found in the first line."""
    suffix = path.suffix.lower()
    if suffix == ".dat" and "::" not in first_line and "\t" in first_line:
        return "tsv"                                  # e.g. HetRec's tab-separated *.dat files
    if suffix in (".csv", ".tsv", ".dat"):
        return suffix[1:]
    if path.name == "u.data":
        return "tsv"
    for fmt in ("dat", "tsv", "csv"):
        if _SEPARATORS[fmt] in first_line:
            return fmt
    raise _error(path, f"cannot tell the format from the name or the first line; pass format= one of {FORMATS}")


def _parse_error(path: Path, error: Exception, fmt: str, n_columns: int) -> DataError:
    """pandas' tokenizer error as a DataError with the line it names."""
    text = str(error)
    fields = re.search(r"line (\d+), saw (\d+)", text)       # "Expected n fields in line L, saw m"
    if fields is not None:
        saw = int(fields.group(2))
        if fmt == "dat":
            saw = (saw + 1) // 2
        return _fail(path, int(fields.group(1)), f"{saw} fields, expected {n_columns}")
    quote = re.search(r"EOF inside string starting at row (\d+)", text)
    if quote is not None:                                      # rows count from 0 at line 1
        return _fail(path, int(quote.group(1)) + 1, "a field opens a quote (\") that never closes; remove "
                     "the stray quote or close it")
    detail = " ".join(text.split())
    return _error(path, f"cannot parse it as a {fmt} file of user, item[, rating[, timestamp]] lines "
                  f"({detail}); check the file's format and contents")


def _read_fields(path: Path, fmt: str, n_columns: int, header: bool, codec: str = "utf-8-sig") -> pd.DataFrame:
    """The raw table: one row per line after the header, columns 0..n_columns-1 (NaN = missing)."""
    if fmt == "dat":            # "::" as ":" with empty fields between (the fast C parser)
        names, sep = list(range(2 * n_columns - 1)), ":"
    else:
        names, sep = list(range(n_columns)), _SEPARATORS[fmt]
    try:
        table = pd.read_csv(path, sep=sep, header=None, names=names, skiprows=int(header),
                            skip_blank_lines=False, engine="c", encoding=codec)
    except (pd.errors.ParserError, UnicodeError) as error:
        raise _parse_error(path, error, fmt, n_columns) from error
    first_line = 1 + int(header)
    if fmt == "dat":
        spacers = table[names[1::2]].notna().any(axis=1).to_numpy()
        if spacers.any():
            row = int(np.flatnonzero(spacers)[0])
            raise _fail(path, row + first_line, "fields must be separated by '::'")
        table = table[names[::2]]
        table.columns = range(n_columns)
    empty = table.isna().all(axis=1).to_numpy()
    n_rows = len(empty) - int(np.argmin(empty[::-1])) if not empty.all() else 0
    if empty[:n_rows].any():                          # trailing blank lines are not data
        raise _fail(path, int(np.flatnonzero(empty)[0]) + first_line, "blank line inside the data")
    return table.iloc[:n_rows]


_INT64_LIMIT = 2.0 ** 63        # |x| below it fits an int64


def _int64(values: np.ndarray, column: pd.Series, path: Path, first_line: int, what: str) -> np.ndarray:
    """Whole numbers (an integer or float array) as int64; one beyond the int64 range (which a
    cast would wrap or clamp silently) is an error naming its line."""
    if values.dtype.kind == "f":
        bad = ~(np.abs(values) < _INT64_LIMIT)
    elif values.dtype.kind == "u":
        bad = values > np.iinfo(np.int64).max
    else:
        return values.astype(np.int64)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _fail(path, row + first_line, f"{what} {column.iloc[row]} is beyond the 64-bit integer range "
                    "(|x| < 2^63); fix the value (a corrupted field?)")
    return values.astype(np.int64)


def _ids(column: pd.Series, path: Path, first_line: int, what: str) -> np.ndarray:
    """Ids as int64 when all are integers, else as text; a missing id is an error."""
    missing = column.isna().to_numpy()
    if missing.any():
        raise _fail(path, int(np.flatnonzero(missing)[0]) + first_line, f"missing {what} id")
    values = column.to_numpy()
    if np.issubdtype(values.dtype, np.integer):
        return _int64(values, column, path, first_line, f"{what} id")
    if np.issubdtype(values.dtype, np.floating):
        fractional = values != np.floor(values)
        if fractional.any():
            row = int(np.flatnonzero(fractional)[0])
            raise _fail(path, row + first_line, f"{what} id {values[row].item()!r} is not an "
                        "integer; ids must be integers or text")
        return _int64(values, column, path, first_line, f"{what} id")
    return values.astype(str)


def _numbers(column: pd.Series, path: Path, first_line: int, what: str) -> np.ndarray:
    """f64 values of a numeric column; missing, non-numeric or infinite values are errors."""
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = column.iloc[row]
        problem = f"missing {what}" if pd.isna(raw) else f"{what} {raw!r} is not a finite number"
        raise _fail(path, row + first_line, problem)
    return values


def _timestamps(column: pd.Series, path: Path, first_line: int) -> np.ndarray:
    """i64 timestamps (kept exact when the column parses as integers, e.g. nanoseconds); text
    (e.g. ISO dates) is an error naming the line."""
    if pd.api.types.is_integer_dtype(column.dtype):
        return _int64(column.to_numpy(), column, path, first_line, "timestamp")
    stamps = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(stamps) | (stamps != np.floor(stamps))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = column.iloc[row]
        problem = "missing timestamp" if pd.isna(raw) else (
            f"timestamp {raw!r} is not an integer; timestamps must be whole numbers (e.g. Unix "
            f"seconds): convert text dates first, e.g. with pandas.to_datetime(...).astype('int64')")
        raise _fail(path, row + first_line, problem)
    return _int64(stamps, column, path, first_line, "timestamp")


def _normalise_name(name: str) -> str:
    """A header name compared case-insensitively, without quotes, spaces, '_', '-' or '.'."""
    return re.sub(r"[\s_\-.\"']", "", name).lower()


def _header_columns(path: Path, line: str, fields: list[str]) -> dict[str, int]:
    """{column: position} of the header `fields` (module docstring), or a one-line DataError
    naming the file, the header and the expected names."""
    role_of = {name: role for role, names in COLUMN_NAMES.items() for name in names}
    roles = [role_of.get(_normalise_name(field)) for field in fields]
    unknown = [field for field, role in zip(fields, roles) if role is None]
    repeated = sorted({role for role in roles if role is not None and roles.count(role) > 1})
    missing = [role for role in ("user", "item") if role not in roles]
    if unknown or repeated or missing:
        problem = "; ".join(
            ([f"unknown name(s) {', '.join(map(repr, unknown))}"] if unknown else [])
            + [f"more than one {role} column" for role in repeated]
            + ([f"no {' and no '.join(missing)} column"] if missing else []))
        expected = "; ".join(f"{role}: {', '.join(names)}" for role, names in COLUMN_NAMES.items())
        raise _fail(path, 1, f"cannot read header {line!r}: {problem}. Expected names (any case, '_' "
                    f"ignored) for user and item, optionally rating and timestamp: {expected}; "
                    f"rename the columns, or pass header=False if line 1 is data")
    return {role: position for position, role in enumerate(roles)}


def _first_line(path: Path, codec: str = "utf-8-sig") -> str:
    """Line 1 of a text file that `_scan_text` has accepted (a UTF-8 byte-order mark skipped)."""
    with open(path, encoding=codec, newline="") as file:
        for line in file:
            return line.rstrip("\r\n")
    return ""


def load_interactions(path, format: str | None = None, *, header: bool | None = None,
                      encoding: str = "utf-8") -> Interactions:
    """Read an interaction file (see the module docstring for the layouts and the header).

    format: one of `FORMATS`, or None to infer it from the file name, else from the separator in
    the first line. header: whether line 1 is a header naming the columns (read by name), or None
    to decide as the module docstring says; without a header the columns are user, item[,
    rating[, timestamp]] by position, as many as the first line has (2 to 4). encoding: the
    file's text encoding (UTF-8 by default, with or without a byte-order mark; e.g. "latin-1").
    Returns `Interactions`; any failure is a one-line `DataError`.
    """
    path = Path(path)
    if not path.is_file():
        raise _error(path, "no such file" + ("; it is a folder, pass the file inside it" if path.is_dir() else ""))
    if format is not None:
        _argument(validate.choice, "format", format, FORMATS)
    if header not in (None, True, False):
        raise DataError(f"header must be True, False or None (detect), got {header!r}")
    codec = _codec(encoding)
    text = _scan_text(path, codec, with_argument=True)
    try:
        return _interactions(path, format, header, codec)
    except DataError as error:
        raise _truncation_hint(error, text) from None


def _interactions(path: Path, format: str | None, header: bool | None, codec: str) -> Interactions:
    """`load_interactions` of a file that passed the text scan."""
    first = _first_line(path, codec)
    if not first.strip():
        raise _fail(path, 1, "blank; the file is empty or starts with a blank line")
    fmt = _detect_format(path, first) if format is None else format
    fields = first.split(_SEPARATORS[fmt])
    if not 2 <= len(fields) <= 4:
        raise _fail(path, 1, f"{len(fields)} fields; expected user, item[, rating[, timestamp]] "
                    f"separated by {_SEPARATORS[fmt]!r} (is format={fmt!r} right?)")
    numbers = [_is_number(field) for field in fields]
    if header is None:
        if fmt == "csv" and all(numbers):
            raise _fail(path, 1, "a csv file needs a header line (e.g. userId,movieId,rating,"
                        "timestamp) but line 1 holds numbers; add a header, or pass header=False")
        header = fmt == "csv" or not any(numbers)
    columns = (_header_columns(path, first, fields) if header
               else {role: position for position, role in enumerate(_COLUMNS[:len(fields)])})
    table = _read_fields(path, fmt, len(fields), header, codec)
    first_row_line = 1 + int(header)
    if len(table) == 0:
        raise _error(path, f"no interactions after the header (line {first_row_line}); the file holds a "
                     "header only")
    users = _ids(table[columns["user"]], path, first_row_line, "user")
    items = _ids(table[columns["item"]], path, first_row_line, "item")
    ratings = (_numbers(table[columns["rating"]], path, first_row_line, "rating") if "rating" in columns
               else np.ones(len(table)))
    timestamps = None
    if "timestamp" in columns:
        timestamps = _timestamps(table[columns["timestamp"]], path, first_row_line)
    user_ids, rows = np.unique(users, return_inverse=True)
    item_ids, cols = np.unique(items, return_inverse=True)
    order = np.lexsort((cols, rows))
    same = (rows[order][1:] == rows[order][:-1]) & (cols[order][1:] == cols[order][:-1])
    if same.any():
        first_seen, again = sorted(order[np.flatnonzero(same)[0]:][:2])
        raise _fail(path, int(again) + first_row_line,
                    f"repeats the (user, item) pair of line {int(first_seen) + first_row_line}")
    return _from_entries(rows[order], cols[order], ratings[order],
                         None if timestamps is None else timestamps[order], user_ids, item_ids)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _from_entries(rows, cols, ratings, timestamps, user_ids, item_ids) -> Interactions:
    """Interactions from entries sorted by (row, column), without duplicates."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(user_ids)))])
    matrix = sp.csr_matrix((np.asarray(ratings, np.float32), np.asarray(cols, np.int32), indptr),
                           shape=(len(user_ids), len(item_ids)))
    return Interactions(matrix, user_ids, item_ids, timestamps)


# --------------------------------------------------------------------------------------------
# Ids
# --------------------------------------------------------------------------------------------

def _lookup(known: np.ndarray, ids, what: str) -> np.ndarray:
    ids = np.asarray(ids)
    if (known.dtype.kind == "U") != (ids.dtype.kind == "U") or ids.dtype.kind not in "iuU":
        raise ValueError(f"{what} ids must be {'text' if known.dtype.kind == 'U' else 'integers'} "
                         f"like the data's, got dtype {ids.dtype}")
    index = np.clip(np.searchsorted(known, ids), 0, max(len(known) - 1, 0))
    unknown = (known[index] != ids) if len(known) else np.ones(ids.shape, bool)
    if np.any(unknown):
        first = ids[unknown].flat[0].item()
        raise ValueError(f"unknown {what} id {first!r}; not in the data (or filtered out)")
    return index.astype(np.int64)


def user_index(interactions: Interactions, user_ids) -> np.ndarray:
    """Row indices (i64, same shape) of original user ids; an unknown id is a ValueError."""
    return _lookup(interactions.user_ids, user_ids, "user")


def item_index(interactions: Interactions, item_ids) -> np.ndarray:
    """Column indices (i64, same shape) of original item ids; an unknown id is a ValueError."""
    return _lookup(interactions.item_ids, item_ids, "item")


# --------------------------------------------------------------------------------------------
# Preprocessing
# --------------------------------------------------------------------------------------------

def binarize(interactions: Interactions, threshold: float) -> sp.csr_matrix:
    """Positives = listed pairs with rating >= threshold (Lim §6, Jeunen App. A use 4 stars).

    Keeps every user and item (rows and columns as in `interactions`).  Returns bool CSR [U, I].
    This is the explicit binarise step: relevance matrices in simrec (`simrec.metrics`,
    `simrec.missing`) are boolean or 0/1 only (`simrec.validate.relevance_mask`), never "any
    nonzero rating"; for a bare rating matrix write ``ratings >= threshold`` (or ``> 0``).
    """
    threshold = validate.finite("threshold", threshold)
    ratings = interactions.ratings
    positive = ratings.data >= threshold
    return _entries_matrix(ratings, positive).astype(bool)


def _entries_matrix(matrix: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    """The CSR matrix holding the stored entries of `matrix` where keep[nnz] (order preserved)."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=matrix.shape[0]))])
    return sp.csr_matrix((matrix.data[keep], matrix.indices[keep], indptr), shape=matrix.shape)


def filter_ratings(interactions: Interactions, min_rating: float) -> Interactions:
    """The interactions with rating >= min_rating (same users and items; empty rows may remain,
    `filter_min_counts` drops them)."""
    min_rating = validate.finite("min_rating", min_rating)
    keep = interactions.ratings.data >= min_rating
    stamps = interactions.timestamps
    return Interactions(_entries_matrix(interactions.ratings, keep), interactions.user_ids,
                        interactions.item_ids, None if stamps is None else stamps[keep])


def _subset(interactions: Interactions, keep_users: np.ndarray, keep_items: np.ndarray
            ) -> Interactions:
    """The sub-matrix of the kept users (bool[U]) and items (bool[I]), ids carried along."""
    ratings = interactions.ratings
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    keep = keep_users[rows] & keep_items[ratings.indices]
    new_row = np.cumsum(keep_users) - 1
    new_col = np.cumsum(keep_items) - 1
    stamps = interactions.timestamps
    return _from_entries(new_row[rows[keep]], new_col[ratings.indices[keep]], ratings.data[keep],
                         None if stamps is None else stamps[keep],
                         interactions.user_ids[keep_users], interactions.item_ids[keep_items])


def filter_min_counts(interactions: Interactions, *, min_user: int = 1, min_item: int = 1
                      ) -> Interactions:
    """The (min_user, min_item) core: the largest sub-matrix in which every user has at least
    min_user interactions and every item at least min_item users (Jeunen App. A: min_item=5).

    Dropping an item can push a user below min_user and vice versa, so users and items failing
    their bound are removed repeatedly until none does (a fixed point). The result is unique:
    the union of two sub-matrices meeting both bounds meets them too, so every removal order ends
    at the same largest one. The defaults (1, 1) drop empty users and items. Counts are of stored
    entries, whatever their rating (apply `filter_ratings` first to count positives only).
    """
    min_user = validate.integer("min_user", min_user, low=0)
    min_item = validate.integer("min_item", min_item, low=0)
    ratings = interactions.ratings
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    keep_users = np.ones(ratings.shape[0], bool)
    keep_items = np.ones(ratings.shape[1], bool)
    while True:
        alive = keep_users[rows] & keep_items[ratings.indices]
        user_ok = np.bincount(rows[alive], minlength=ratings.shape[0]) >= min_user
        item_ok = np.bincount(ratings.indices[alive], minlength=ratings.shape[1]) >= min_item
        new_users, new_items = keep_users & user_ok, keep_items & item_ok
        if np.array_equal(new_users, keep_users) and np.array_equal(new_items, keep_items):
            return _subset(interactions, keep_users, keep_items)
        keep_users, keep_items = new_users, new_items


def _top(counts: np.ndarray, n: int) -> np.ndarray:
    """bool mask of the n largest counts (ties: lower index first)."""
    keep = np.zeros(len(counts), bool)
    keep[np.argsort(-counts, kind="stable")[:n]] = True
    return keep


def densify_top(interactions: Interactions, n_users: int, n_items: int) -> Interactions:
    """Keep the n_items most popular items, then the n_users users with the most interactions
    among them (Lim §6 densifies its data sets this way).

    Popularity and activity are numbers of stored entries; ties go to the lower index (smaller
    id). Fewer users or items than asked keeps them all. Rows and columns keep their id order.
    """
    n_users = validate.integer("n_users", n_users, low=1)
    n_items = validate.integer("n_items", n_items, low=1)
    ratings = interactions.ratings
    keep_items = _top(np.bincount(ratings.indices, minlength=ratings.shape[1]), n_items)
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    user_counts = np.bincount(rows[keep_items[ratings.indices]], minlength=ratings.shape[0])
    return _subset(interactions, _top(user_counts, n_users), keep_items)


# --------------------------------------------------------------------------------------------
# Coat (dense MNAR / MCAR rating matrices with propensities)
# --------------------------------------------------------------------------------------------

#: the files of a Coat folder, by `Coat` field
COAT_FILES = {"train": "train.ascii", "test": "test.ascii", "propensities": "propensities.ascii"}


@dataclass(frozen=True)
class Coat:
    """The Coat shopping data (Schnabel et al., ICML'16): U users x I coats.

    train: f32 CSR [U, I], the ratings users chose to give (missing not at random), 1..5 stars,
        unrated pairs not stored; test: f32 CSR [U, I], the ratings of items assigned uniformly at
        random (missing completely at random), same layout; the two may share pairs;
    propensities: f64[U, I] in (0, 1], the authors' estimate of P(pair (u, i) is rated in train).
    """
    train: sp.csr_matrix
    test: sp.csr_matrix
    propensities: np.ndarray

    def __post_init__(self):
        shape = self.propensities.shape
        for name in ("train", "test"):
            matrix = getattr(self, name)
            if not sp.issparse(matrix) or matrix.format != "csr" or matrix.shape != shape:
                raise ValueError(f"Coat.{name} must be a CSR matrix of the propensities' shape "
                                 f"{shape}, got {type(matrix).__name__} {matrix.shape}")


def _dense_matrix(path: Path) -> np.ndarray:
    """A dense matrix of whitespace-separated numbers, one row per line (trailing blank lines
    allowed); a ragged row, a non-number or a blank line inside is a DataError naming the line."""
    if not path.is_file():
        raise _error(path, f"no such file (a Coat folder holds {', '.join(COAT_FILES.values())})")
    text = _scan_text(path, "utf-8-sig")
    try:
        return _matrix_rows(path)
    except DataError as error:
        raise _truncation_hint(error, text) from None


def _matrix_rows(path: Path) -> np.ndarray:
    """`_dense_matrix` of a file that passed the text scan."""
    with open(path, encoding="utf-8-sig") as file:
        lines = file.read().split("\n")                   # universal newlines: one per line
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise _error(path, "empty file; expected a dense matrix, one row per line")
    rows = []
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            raise _fail(path, number, "blank line inside the matrix")
        try:
            row = np.array([float(field) for field in fields])
        except ValueError:
            bad = next(field for field in fields if not _is_number(field))
            raise _fail(path, number, f"{bad!r} is not a number") from None
        if rows and len(row) != len(rows[0]):
            raise _fail(path, number, f"{len(row)} columns, but line 1 has {len(rows[0])}")
        if not np.all(np.isfinite(row)):
            raise _fail(path, number, "NaN or infinite value")
        rows.append(row)
    return np.stack(rows)


def _first_bad(path: Path, bad: np.ndarray, values: np.ndarray, expected: str) -> DataError:
    row, column = np.argwhere(bad)[0]
    return _fail(path, int(row) + 1, f"column {int(column) + 1} holds {values[row, column]:g}; "
                 f"expected {expected}")


def load_coat(folder) -> Coat:
    """Read a Coat folder (`COAT_FILES`: train.ascii, test.ascii, propensities.ascii; dense
    whitespace-separated matrices with one user per line and one item per column).

    Ratings must be 0 (unrated) or in [1, 5]; propensities in (0, 1]; the three matrices must have
    the same shape. A violation is a `DataError` naming the file and the 1-based line (user).
    Returns `Coat` (ratings as f32 CSR with the unrated zeros not stored, propensities f64).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise _error(folder, f"no such folder; pass the folder holding {', '.join(COAT_FILES.values())}")
    paths = {name: folder / file for name, file in COAT_FILES.items()}
    matrices = {name: _dense_matrix(path) for name, path in paths.items()}
    shape = matrices["train"].shape
    for name, matrix in matrices.items():
        if matrix.shape != shape:
            raise _error(paths[name], f"a {matrix.shape[0]} x {matrix.shape[1]} matrix, but "
                         f"{paths['train'].name} is {shape[0]} x {shape[1]}; the three Coat "
                         f"files must have the same users (lines) and items (columns)")
    for name in ("train", "test"):
        ratings = matrices[name]
        bad = (ratings != 0) & ((ratings < 1) | (ratings > 5))
        if bad.any():
            raise _first_bad(paths[name], bad, ratings, "0 (unrated) or a rating in 1..5")
    propensities = matrices["propensities"]
    bad = (propensities <= 0) | (propensities > 1)
    if bad.any():
        raise _first_bad(paths["propensities"], bad, propensities, "a propensity in (0, 1]")
    return Coat(train=sp.csr_matrix(matrices["train"].astype(np.float32)),
                test=sp.csr_matrix(matrices["test"].astype(np.float32)),
                propensities=propensities)


# --------------------------------------------------------------------------------------------
# Open Bandit Dataset (logged bandit feedback with propensities)
# --------------------------------------------------------------------------------------------

#: the logging policies and campaigns of the Open Bandit Dataset
OPEN_BANDIT_POLICIES = ("random", "bts")
OPEN_BANDIT_CAMPAIGNS = ("all", "men", "women")
_OB_COLUMNS = ("timestamp", "item_id", "position", "click", "propensity_score")
_OB_USER, _OB_AFFINITY = "user_feature_", "user-item_affinity_"


@dataclass(frozen=True)
class OpenBandit:
    """One log of the Open Bandit Dataset (Saito, Aihara, Matsutani & Narita, NeurIPS'21 Datasets
    and Benchmarks): N rows, each one (item, position) impression of a three-slot recommendation
    widget, in the file's order (the shipped files are sorted by time).

    timestamp: i64[N], nanoseconds since the Unix epoch (UTC). item: i64[N], item ids 0..I-1.
    position: i64[N], the slot, 0-based (the files' 1, 2, 3 -> 0, 1, 2). click: bool[N].
    propensity: f64[N] in (0, 1], the logging policy's probability of putting this item at this
    position at that time (1/I for the uniform-random policy). user_features: str[N, F], the
    hashed categorical user features ``user_feature_0..F-1``. affinity: f32[N, I], the
    ``user-item_affinity_i`` columns. item_numeric: f64[I, Fn] and item_categorical: str[I, Fc],
    the numeric and the text columns of ``item_context.csv`` (row i = item i), named by
    item_numeric_names and item_categorical_names. policy, campaign: which log this is.
    """
    timestamp: np.ndarray
    item: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    user_features: np.ndarray
    affinity: np.ndarray
    item_numeric: np.ndarray
    item_categorical: np.ndarray
    item_numeric_names: tuple[str, ...] = ()
    item_categorical_names: tuple[str, ...] = ()
    policy: str = ""
    campaign: str = ""

    @property
    def n_items(self) -> int:
        """I, the campaign's number of items (rows of item_context.csv)."""
        return int(self.affinity.shape[1])

    @property
    def n_positions(self) -> int:
        """The number of slots, 1 + the largest 0-based position logged."""
        return int(self.position.max()) + 1 if self.position.size else 0


def open_bandit_file(folder, policy: str = "random", campaign: str = "all") -> Path:
    """The log file of (policy, campaign) below the dataset folder: ``POLICY/CAMPAIGN/CAMPAIGN.csv``
    or its gzipped form ``.csv.gz`` (the gzipped one when both exist)."""
    _argument(validate.choice, "policy", policy, OPEN_BANDIT_POLICIES)
    _argument(validate.choice, "campaign", campaign, OPEN_BANDIT_CAMPAIGNS)
    base = Path(folder) / policy / campaign / f"{campaign}.csv"
    gzipped = base.with_name(base.name + ".gz")
    return gzipped if gzipped.is_file() or not base.is_file() else base


def _ob_read(path: Path) -> tuple[pd.DataFrame, _TextFile]:
    """A comma-separated file with a header, every field as text (gzip-decompressed for a .gz
    name), after `_scan_text` (whose result comes along); any failure is a DataError naming the
    file (and line)."""
    gzipped = path.suffix.lower() == ".gz"
    if not gzipped:
        with open(path, "rb") as file:
            head = file.read(4)
        if head.startswith(b"\x1f\x8b"):
            raise _error(path, "gzip-compressed data under a plain .csv name; rename it to "
                         f"{path.name}.gz (or decompress it)")
    text = _scan_text(path, "utf-8-sig", gzipped=gzipped)
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False, encoding="utf-8-sig",
                           compression="gzip" if gzipped else None), text
    except pd.errors.ParserError as error:
        found = re.search(r"line (\d+), saw (\d+)", str(error))
        if found is None:
            detail = " ".join(str(error).split())
            raise _error(path, f"cannot parse it as a comma-separated file with a header ({detail}); get a fresh "
                         "copy of the file") from error
        line = int(found.group(1))
        raise _truncation_hint(_fail(path, line, f"{found.group(2)} fields, more than the header's"), text) from error
    except pd.errors.EmptyDataError:
        raise _error(path, "empty file; expected a header line and one row per impression") from None
    except (OSError, EOFError, zlib.error, UnicodeError) as error:        # the scan read it: should not happen
        raise _error(path, f"cannot read it ({' '.join(str(error).split())}); get a fresh copy of the file") from error


def _ob_column(path: Path, table: pd.DataFrame, name: str) -> pd.Series:
    """A column of `table`; an empty field (a short row or a blank line) names its line."""
    column = table[name]
    empty = (column == "").to_numpy()
    if empty.any():
        raise _fail(path, int(np.flatnonzero(empty)[0]) + 2, f"missing {name}")
    return column


def _ob_integers(path: Path, table: pd.DataFrame, name: str, low: int, high: int) -> np.ndarray:
    """i64 values of an integer column in [low, high]; anything else names its line (line 1 is
    the header)."""
    column = _ob_column(path, table, name)
    values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < low) | (values > high)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _fail(path, row + 2, f"{name} {column.iloc[row]!r} is not an integer in {low}..{high}")
    return values.astype(np.int64)


def _ob_floats(path: Path, table: pd.DataFrame, columns: list[str], what: str) -> np.ndarray:
    """f64[N, len(columns)] of finite numbers; a bad field names its line and column."""
    values = np.empty((len(table), len(columns)))
    for j, name in enumerate(columns):
        column = _ob_column(path, table, name)
        values[:, j] = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
        bad = ~np.isfinite(values[:, j])
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise _fail(path, row + 2, f"{what} {name} = {column.iloc[row]!r} is not a finite number")
    return values


def _ob_item_context(path: Path, n_items: int) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """(numeric f64[I, Fn], categorical str[I, Fc], their names) of ``item_context.csv``, whose
    ``item_id`` column must be 0..I-1 in order (I = the log's number of affinity columns)."""
    if not path.is_file():
        raise _error(path, "no such file (every Open Bandit log has an item_context.csv beside it)")
    table, text = _ob_read(path)
    try:
        return _ob_item_table(path, table, n_items)
    except DataError as error:
        raise _truncation_hint(error, text) from None


def _ob_item_table(path: Path, table: pd.DataFrame, n_items: int) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """`_ob_item_context` of the table read from `path`."""
    table = table.drop(columns=[c for c in table.columns if c == "" or c.startswith("Unnamed")])
    if "item_id" not in table.columns:
        raise _fail(path, 1, f"no item_id column in the header {list(table.columns)}")
    ids = _ob_integers(path, table, "item_id", 0, max(n_items - 1, 0))
    if len(ids) != n_items or not np.array_equal(ids, np.arange(n_items)):
        out_of_order = np.flatnonzero(ids[:n_items] != np.arange(min(len(ids), n_items)))
        wrong = int(out_of_order[0]) if out_of_order.size else min(len(ids), n_items)
        raise _fail(path, wrong + 2,         # the first row that is not the next item (or missing)
                    f"item_id must list the items 0..{n_items - 1} once each in order (the log has "
                    f"{n_items} user-item_affinity columns), found {len(ids)} rows")
    names = [c for c in table.columns if c != "item_id"]
    numeric = [c for c in names if pd.to_numeric(table[c], errors="coerce").notna().all()]
    categorical = [c for c in names if c not in numeric]
    for name in categorical:
        _ob_column(path, table, name)
    return (_ob_floats(path, table, numeric, "item feature"), table[categorical].to_numpy(str),
            tuple(numeric), tuple(categorical))


def load_open_bandit(folder, policy: str = "random", campaign: str = "all") -> OpenBandit:
    """Read one log of the Open Bandit Dataset: ``FOLDER/POLICY/CAMPAIGN/CAMPAIGN.csv[.gz]`` and
    the ``item_context.csv`` beside it (the layout of the full data set and of the sample shipped
    with obp; `open_bandit_file`).

    folder: the dataset folder holding ``random/`` and ``bts/``. policy: "random" (uniform
    random) or "bts" (Bernoulli Thompson sampling). campaign: "all", "men" or "women".

    The log must have a header naming ``timestamp`` (ISO date-time text, e.g. ``2019-11-24
    00:00:34.762830+00:00``), ``item_id`` (0..I-1), ``position`` (1-based slot), ``click`` (0 or
    1), ``propensity_score`` (in (0, 1]), ``user_feature_*`` and ``user-item_affinity_0..I-1``
    (one per item: they fix I, which item_context.csv must match); an unnamed first column (the
    row index) is ignored. A missing column, an empty or malformed field, an id or position
    out of range, a click other than 0/1 or a propensity outside (0, 1] raises `DataError` naming
    the file and the 1-based line, and so does a file that is not text (binary junk, bytes that are
    not UTF-8) or a .gz file that is not gzip data. Returns `OpenBandit` (rows in the file's order).
    """
    path = open_bandit_file(folder, policy, campaign)
    if not path.is_file():
        raise _error(path, f"no such file; pass the Open Bandit folder that holds "
                     f"{'/'.join(OPEN_BANDIT_POLICIES)} sub-folders, each with "
                     f"{'/'.join(OPEN_BANDIT_CAMPAIGNS)}/<campaign>.csv[.gz]")
    table, text = _ob_read(path)
    try:
        return _open_bandit(path, table, policy, campaign)
    except DataError as error:
        raise _truncation_hint(error, text) from None


def _open_bandit(path: Path, table: pd.DataFrame, policy: str, campaign: str) -> OpenBandit:
    """`load_open_bandit` of the log table read from `path`."""
    table = table.drop(columns=[c for c in table.columns if c == "" or c.startswith("Unnamed")])
    users = sorted((c for c in table.columns if c.startswith(_OB_USER)), key=lambda c: int(c[len(_OB_USER):])
                   if c[len(_OB_USER):].isdigit() else -1)
    affinity = [c for c in table.columns if c.startswith(_OB_AFFINITY)]
    expected = [f"{_OB_AFFINITY}{i}" for i in range(len(affinity))]
    missing = [c for c in _OB_COLUMNS if c not in table.columns]
    if missing or not affinity or sorted(affinity, key=lambda c: (len(c), c)) != expected:
        problem = (f"no column(s) {', '.join(missing)}" if missing else
                   f"the affinity columns must be {_OB_AFFINITY}0..{_OB_AFFINITY}{{I-1}}, one per item")
        raise _fail(path, 1, f"{problem}; an Open Bandit log has the columns {', '.join(_OB_COLUMNS)}, "
                    f"{_OB_USER}*, {_OB_AFFINITY}0..I-1")
    if len(table) == 0:
        raise _error(path, "no rows after the header (line 1); the file holds a header only")
    n_items = len(affinity)
    stamps = _ob_column(path, table, "timestamp")
    parsed = pd.to_datetime(stamps, utc=True, errors="coerce", format="ISO8601")
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _fail(path, row + 2, f"timestamp {stamps.iloc[row]!r} is not an ISO date-time")
    item = _ob_integers(path, table, "item_id", 0, n_items - 1)
    position = _ob_integers(path, table, "position", 1, np.iinfo(np.int32).max) - 1
    click = _ob_integers(path, table, "click", 0, 1).astype(bool)
    propensity = _ob_floats(path, table, ["propensity_score"], "")[:, 0]
    bad = ~((propensity > 0) & (propensity <= 1))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _fail(path, row + 2, f"propensity_score {table['propensity_score'].iloc[row]!r} is not a probability in (0, 1]")
    for name in users:
        _ob_column(path, table, name)
    numeric, categorical, numeric_names, categorical_names = _ob_item_context(path.parent / "item_context.csv",
                                                                              n_items)
    return OpenBandit(
        timestamp=parsed.dt.tz_convert(None).to_numpy().astype("datetime64[ns]").astype(np.int64), item=item, position=position,
        click=click, propensity=propensity, user_features=table[users].to_numpy(str).reshape(len(table), len(users)),
        affinity=_ob_floats(path, table, affinity, "affinity").astype(np.float32),
        item_numeric=numeric, item_categorical=categorical, item_numeric_names=numeric_names,
        item_categorical_names=categorical_names, policy=policy, campaign=campaign)

"""Real-data files: where they live, which ones a run reads, and their content digests.

The data folder is ``$SIMREC_DATA`` (set by ``simrec run --data-dir``) or, by default,
``../shared/data`` beside the checkout (`data_root`). A study names every file below it that its
setup and cells may read (``Study.data_files``); the runner digests each (`describe`: path,
bytes, sha256) into the cell and setup addresses and the manifest, so changed data is recomputed
and every output says which data it was computed from. `data_file` is how study code opens one;
inside a run it refuses a file the study did not declare (`declared`), so the addresses cannot
miss a file that was read.

Digests are cached by (path, size, modification time) in memory and, when a store file is given,
on disk (the runner keeps one in its cache folder), so a large file is hashed once.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

__all__ = ["DATA_ENV", "MissingDataWarning", "MissingDataError", "UndeclaredDataError", "DataFile", "data_root", "data_file",
           "skipped_note", "file_digest", "describe", "declared", "require"]

DATA_ENV = "SIMREC_DATA"
_CHUNK = 1 << 20


class MissingDataWarning(UserWarning):
    """A real data set was not found, so the part of a study that needs it is skipped."""


class MissingDataError(FileNotFoundError):
    """Declared data files are absent and the run was not told to go on without them."""


class UndeclaredDataError(RuntimeError):
    """Study code opened a data file that its ``Study.data_files`` does not list."""


@dataclass(frozen=True)
class DataFile:
    """One declared data file as a run found it: ``file`` relative to the data folder, its absolute
    ``path``, and ``bytes``/``sha256`` (None when the file is absent)."""
    file: str
    path: str
    bytes: int | None
    sha256: str | None

    @property
    def present(self) -> bool:
        return self.sha256 is not None

    def to_json(self) -> dict:
        return {"file": self.file, "path": self.path, "bytes": self.bytes, "sha256": self.sha256}


def data_root() -> Path:
    """The real-data folder: ``$SIMREC_DATA``, else ``../shared/data`` beside the checkout this
    package was installed from (editable install), else beside the current checkout (the working
    folder holding ``pyproject.toml``, for a regular install run from the repository)."""
    configured = os.environ.get(DATA_ENV)
    if configured:
        return Path(configured)
    for checkout in (Path(__file__).resolve().parents[1], Path.cwd()):
        if (checkout / "pyproject.toml").is_file() and (checkout.parent / "shared" / "data").is_dir():
            return checkout.parent / "shared" / "data"
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


_declared: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("simrec_data_files",
                                                                                  default=None)


@contextlib.contextmanager
def declared(files: Sequence[str]) -> Iterator[None]:
    """While active, `data_file` opens only ``files`` (a run's ``Study.data_files``)."""
    token = _declared.set(frozenset(files))
    try:
        yield
    finally:
        _declared.reset(token)


def data_file(relative: str) -> Path | None:
    """The file ``relative`` below `data_root`, or None when disabled (``""``) or absent (with a
    one-line `MissingDataWarning` naming the path and how to point simrec at the data). Inside a
    run, a file the study does not declare raises `UndeclaredDataError`."""
    if not relative:
        return None
    allowed = _declared.get()
    if allowed is not None and relative not in allowed:
        raise UndeclaredDataError(f"the study reads data file {relative!r}, which its data_files do "
                                  f"not list ({', '.join(sorted(allowed)) or 'none'}); add it to "
                                  f"Study.data_files so that its digest enters the cache address")
    path = data_root() / relative
    if path.is_file():
        return path
    warnings.warn(f"{path} not found: the real-data part is skipped (set --data-dir or "
                  f"{DATA_ENV} to the folder that holds {relative.split('/')[0]}/)",
                  MissingDataWarning, stacklevel=2)
    return None


def skipped_note(relative: str) -> str:
    """A README line saying why the real-data part of a study did not run."""
    if not relative:
        return "- real data disabled (its file is \"\")"
    return f"- {relative.split('/')[0]} skipped: `{data_root() / relative}` not found"


_digests: dict[tuple[str, int, int], str] = {}


def _load_store(store: Path | None) -> dict:
    if store is None:
        return {}
    try:
        table = json.loads(store.read_text())
        return table if isinstance(table, dict) else {}
    except (OSError, ValueError):
        return {}


def file_digest(path: Path | str, store: Path | str | None = None) -> str:
    """The sha256 (hex) of a file's bytes, computed once per (path, size, modification time):
    remembered in this process and, with ``store`` (a JSON file), across processes."""
    from simrec.output import atomic_write_text
    path = Path(path).absolute()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _digests:
        return _digests[key]
    store = Path(store) if store is not None else None
    table = _load_store(store)
    entry = table.get(key[0])
    if isinstance(entry, dict) and entry.get("bytes") == key[1] and entry.get("mtime_ns") == key[2]:
        digest = str(entry["sha256"])
    else:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        if store is not None:
            table[key[0]] = {"bytes": key[1], "mtime_ns": key[2], "sha256": digest}
            with contextlib.suppress(OSError):
                atomic_write_text(store, json.dumps(table, indent=1, sort_keys=True) + "\n")
    _digests[key] = digest
    return digest


def describe(files: Sequence[str], store: Path | str | None = None) -> list[DataFile]:
    """Every declared file (relative to `data_root`; ``""`` entries dropped, duplicates once) as a
    `DataFile`, in the given order; absent files have no bytes or digest."""
    root = data_root()
    out = []
    for relative in dict.fromkeys(f for f in files if f):
        path = (root / relative).absolute()
        if path.is_file():
            out.append(DataFile(relative, str(path), path.stat().st_size, file_digest(path, store)))
        else:
            out.append(DataFile(relative, str(path), None, None))
    return out


def require(files: Sequence[DataFile], study: str) -> None:
    """`MissingDataError` (one line: which files, where they were looked for, the two fixes) when
    any of ``files`` is absent."""
    missing = [f.file for f in files if not f.present]
    if missing:
        raise MissingDataError(
            f"study {study!r}: {len(missing)} data file(s) not found below {data_root()}: "
            f"{', '.join(missing)}; point --data-dir (or {DATA_ENV}) at the folder holding them, or "
            f"pass --allow-missing-data to run without the parts that need them")

"""Study runner: config -> setup -> grid of cells -> tidy records -> report, cached and resumable.

A study is a `Study` value with three pure steps (the protocol every study follows):

* ``setup(key, config) -> shared``: state every cell needs (worlds, trained models, platform
  state). Built once per run, memoised in memory across the runs of one command (`SetupMemo`)
  and, when ``cache_setup`` is set, pickled to the cache so a resumed run skips it. Shown as its
  own progress phase.
* ``compute(key, config, cell, shared) -> records``: one cell of the grid as tidy records, flat
  rows whose column names and types are declared in ``Study.columns`` (int, float, str, bool).
* ``report(config, records) -> Report``: tables, figures and a summary from the concatenation of
  every cell's records (one pandas DataFrame with the declared columns), written beside the
  tables as ``records.csv`` so a reader can load and re-plot them.

``key`` is the run's root key ``jax.random.key(seed)`` for both ``setup`` and ``compute``: shared
state draws from ``shared_key(key, name)``, a cell's own randomness from ``cell_key(key, cell)``
= ``fold_in(key, hash(cell))``, so adding or removing cells never changes the others.

The runner
* caches every finished cell on disk, content-addressed by (study, config, seed, cell, code
  version), written atomically (temp file + rename), so a killed run resumes with only the
  missing cells and gives byte-identical tables; a corrupt cache file is recomputed with a
  warning that names it;
* derives the code version from the source of every module the study imports, transitively,
  inside its own package and ``simrec`` (`simrec.codeversion`), never from hand-kept lists, and
  checks every cell's records against the declared columns (`simrec.records`);
* stages every output file in a hidden sibling folder marked incomplete and swaps the finished
  set into place, so ``manifest.json``, ``README.md``, tables, figures and ``records.csv`` always
  belong to one run (`OutputFolder`); a lock refuses a second run into the same folder;
* computes the missing cells through an executor (`simrec.executor`): one after another in this
  process by default, or on a Dask cluster, while the cache, the folder and the lock stay here;
* in a multi-host run (`simrec.sharding.initialize`) runs in every process, which compute the
  same cells together (each on its own devices); process 0 alone reads and writes the cache and
  the output folder, and records the device count, kind and process count in the manifest.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import io
import json
import os
import pickle
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from simrec import validate
from simrec.codeversion import INFRASTRUCTURE, code_version, module_closure, module_version, report_module
from simrec.config import MAX_SEED, ConfigError, config_fields, config_help, config_to_dict, with_overrides
from simrec.output import (OutputError, OutputFolder, atomic_write_bytes, atomic_write_text,
                           write_figure, write_table, write_results_index)
from simrec.records import COLUMN_TYPES, RecordError, check_records, records_frame

__all__ = [
    "ConfigError", "OutputError", "RecordError", "RunInterrupted", "CacheWarning", "Study",
    "Report", "RunSummary", "SetupMemo", "OutputFolder", "run", "cell_key", "shared_key", "key_id",
    "to_json", "config_fields", "config_help", "with_overrides", "config_to_dict",
    "atomic_write_bytes", "atomic_write_text", "write_table", "write_figure", "write_results_index",
    "Progress", "module_closure", "module_version", "code_version", "report_module", "INFRASTRUCTURE", "run_fields",
    "check_records", "records_frame", "check_seed", "MAX_SEED", "git_commit", "package_versions", "canonical_json",
]

Cell = Mapping[str, Any]


class CacheWarning(UserWarning):
    """A cache file was unreadable and is being recomputed."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; says how many cells were already cached."""

    def __init__(self, study: str, cached: int, total: int):
        super().__init__(study, cached, total)
        self.study, self.cached, self.total = study, cached, total


@dataclass
class Report:
    """What a study returns: tables (pandas DataFrames) and figures (matplotlib Figures).

    Table names should start with ``table``; each is written as ``NAME.csv``, ``NAME.md`` and
    ``NAME.tex``. Figures are written as ``NAME.png``. ``summary`` (Markdown) becomes the folder's
    ``README.md`` together with the list of files. ``claims`` (`simrec.reporting.Claim`): the
    claims of the sources the study tests, written as ``table_claims`` and a "Claims" section of
    the README.
    """
    tables: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    float_format: str = ".4g"
    claims: Sequence[Any] = ()


@dataclass(frozen=True)
class Study:
    """A reproducible experiment: presets, a grid of cells, setup, per-cell records, a report.

    columns: the record schema, ``{name: int | float | str | bool}``; every record of every cell
    has exactly these keys. expected_seconds: wall time of each preset on a 2-core CPU (shown by
    ``simrec show``). data_files: ``config -> [path below the data folder]``, every real-data file
    that setup and cells may read (`simrec.datafiles`; ``""`` entries are dropped); their content
    digests enter the cache addresses and the manifest, and study code opens them with
    `simrec.datafiles.data_file`, which refuses any other file during a run. report_fields: dotted config fields left out of the cache address; they
    may choose which cells exist and how the report shows them, never a cell's value (put the
    value a cell needs into its coordinates), e.g. a grid field whose points are cells.
    cell_threads: cells the local executor computes at once, in threads (`simrec.executor.Local`;
    ``--workers`` overrides it). More than one pays for cells that are long chains of small XLA
    programs, which keep one core busy at most; a cell's values do not depend on it.
    """
    name: str
    description: str
    presets: Mapping[str, Any]
    cells: Callable[[Any], Sequence[Cell]]
    compute: Callable[[Any, Any, Cell, Any], Any]
    report: Callable[[Any, Any], Report]
    columns: Mapping[str, type]
    setup: Callable[[Any, Any], Any] | None = None
    data_files: Callable[[Any], Sequence[str]] | None = None
    cache_setup: bool = False
    report_fields: tuple[str, ...] = ()
    expected_seconds: Mapping[str, float] = field(default_factory=dict)
    cell_threads: int = 1

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"study name must be an identifier, got {self.name!r}")
        if not self.columns:
            raise ValueError(f"study {self.name!r}: columns must declare at least one column")
        for column, tp in self.columns.items():
            if tp not in COLUMN_TYPES:
                raise ValueError(f"study {self.name!r}: column {column!r} has type {tp!r}; "
                                 f"use one of int, float, str, bool")
        if "default" not in self.presets:
            raise ValueError(f"study {self.name!r} needs a 'default' preset")
        if isinstance(self.cell_threads, bool) or not isinstance(self.cell_threads, int) or self.cell_threads < 1:
            raise ValueError(f"study {self.name!r}: cell_threads must be a positive integer, got {self.cell_threads!r}")

    def preset(self, name: str):
        if name not in self.presets:
            raise ConfigError(f"unknown preset {name!r} for study {self.name!r}; "
                              f"choose one of: {', '.join(self.presets)}")
        return self.presets[name]

    @property
    def module(self) -> str:
        """The module that defines the study's ``compute`` (the root of its code version)."""
        return self.compute.__module__


@dataclass(frozen=True)
class RunSummary:
    out: Path
    cells_total: int
    cells_computed: int
    cells_cached: int
    wall_time_s: float
    setup_s: float
    files: tuple[str, ...]


def check_seed(seed) -> int:
    """The seed as an int in [0, 2^32 - 1], or `ConfigError` naming the range."""
    try:
        return validate.integer("seed", seed, low=0, high=MAX_SEED)
    except ValueError as err:                        # validate's type errors are ValueErrors too
        raise ConfigError(str(err)) from None


# --------------------------------------------------------------------------------------------
# JSON, hashing, keys, atomic files
# --------------------------------------------------------------------------------------------

def to_json(value):
    """Convert numpy/JAX arrays and scalars (recursively) to JSON-able Python values."""
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(dataclasses.asdict(value))
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        arr = np.asarray(value)
        return arr.item() if arr.ndim == 0 else arr.tolist()
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def canonical_json(value) -> str:
    """``value`` (`to_json`) as canonical JSON: sorted keys, no spaces, NaN allowed. The text every
    digest of the runner hashes (cache addresses, setup addresses, row digests)."""
    return json.dumps(to_json(value), sort_keys=True, separators=(",", ":"), allow_nan=True)


def _digest(value) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _hash31(value) -> int:
    return int(_digest(value)[:8], 16) & 0x7FFFFFFF


def cell_key(root, cell: Cell):
    """The PRNG key of a cell: ``fold_in(root, h)`` with h a stable 31-bit hash of the cell."""
    import jax
    return jax.random.fold_in(root, _hash31(dict(cell)))


def shared_key(root, name: str):
    """The PRNG key of state shared by all cells of a run (e.g. ``"world"``)."""
    import jax
    return jax.random.fold_in(root, _hash31({"shared": name}))


def key_id(key) -> tuple[int, ...]:
    """A hashable identity of a PRNG key (for tests and diagnostics)."""
    import jax
    return tuple(np.asarray(jax.random.key_data(key)).ravel().tolist())


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------

class Progress:
    """A minimal progress display on stderr: a setup phase, then a bar over cells whose ETA counts
    cell time only (a line per 10 % when stderr is not a terminal)."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream=None):
        self.total, self.label, self.enabled = max(total, 0), label, enabled
        self.stream = stream or sys.stderr
        self.done, self.start, self._last_decile = 0, time.perf_counter(), -1
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def phase(self, text: str) -> None:
        """A one-line phase message (e.g. the setup), then the cell clock restarts."""
        if self.enabled:
            self.stream.write(f"{self.label}: {text}\n")
            self.stream.flush()
        self.start = time.perf_counter()

    def update(self, n: int = 1, note: str = "", computed: bool = True) -> None:
        if not computed:                      # cached cells do not count towards the ETA
            self.total -= n
            self.start = time.perf_counter() if self.done == 0 else self.start
            return
        self.done += n
        if not self.enabled or self.total <= 0:
            return
        frac = self.done / self.total
        elapsed = time.perf_counter() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        width = 28
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s eta {eta:5.1f}s {note}"
        if self.tty:
            self.stream.write("\r" + line[:160])
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        elif int(frac * 10) > self._last_decile:
            self._last_decile = int(frac * 10)
            self.stream.write(line + "\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------

def package_versions() -> dict[str, str]:
    """Python's and the installed versions of simrec and its numerical stack, for a manifest."""
    from importlib import metadata
    out = {"python": platform.python_version()}
    for pkg in ("simrec", "jax", "jaxlib", "numpy", "scipy", "optax", "statsmodels", "pandas",
                "seaborn", "matplotlib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


#: the instruction-set extensions XLA's CPU code generator uses; two machines that differ in them
#: can round some sums differently in the last bits (the committed results name theirs)
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile")


def cpu_description() -> dict[str, Any]:
    """{"model": the CPU's model name, "simd": its `SIMD_FLAGS`} from /proc/cpuinfo (Linux), else
    the model `platform.processor()` gives and no flags."""
    model, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and value.strip():
                model = value.strip()
            elif name.strip() == "flags":          # after its model name, in the first processor's block
                flags = set(value.split())
                break
    return {"model": model, "simd": [flag for flag in SIMD_FLAGS if flag in flags]}


def git_commit() -> str | None:
    """The checkout's HEAD commit when the run started (None outside a git checkout). A result is
    usually committed after the code that made it, so this is the code's parent commit; the code
    itself is identified by its content, the manifest's ``code_version``."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit or None


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------

def default_cache_dir(out: Path) -> Path:
    """Cell and setup caches live beside the output folder, never inside it (so swapping the
    finished outputs into place keeps them): ``OUT/../.simrec-cache``."""
    return Path(out).absolute().parent / ".simrec-cache"


def _cache_config(config, report_fields: Sequence[str]) -> dict:
    """The config as it enters the cache address: `config_to_dict` without the report fields."""
    out = config_to_dict(config)
    for dotted in report_fields:
        *path, leaf = dotted.split(".")
        node = out
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise ValueError(f"report field {dotted!r} is not a field of the config; "
                             f"valid keys: {', '.join(sorted(config_fields(config)))}")
        del node[leaf]
    return out


def _read_cache(path: Path, decode: Callable[[bytes], Any]):
    """The decoded cache file, or None when it is absent or unreadable (with a warning)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode(data)
    except Exception as err:                    # noqa: BLE001 - any corruption means recompute
        warnings.warn(f"cache file {path} is unreadable ({type(err).__name__}: {str(err)[:200]}); "
                      f"recomputing it", CacheWarning, stacklevel=3)
        return None


class SetupMemo:
    """In-memory memo of study setups across the runs of one command (``run all``, sweeps)."""

    def __init__(self):
        self._values: dict[str, Any] = {}

    def get(self, address: str):
        return self._values.get(address)

    def put(self, address: str, shared) -> None:
        self._values = {address: shared}               # one at a time: setups can be large


def _setup(study: Study, root, config, address: str, cache: Path, memo: SetupMemo | None, bar,
           hosts: "_Hosts"):
    """(shared, how) for one run: from the memo, the disk cache, or built now. In a multi-host
    run every process builds it (its work may be sharded over all of them, and the processes
    need not share a disk), and only the writer caches it."""
    if study.setup is None:
        return None, "none"
    if memo is not None and (shared := memo.get(address)) is not None:
        return shared, "memo"
    path = cache / study.name / f"setup-{address[:24]}.pkl"
    shared = _read_cache(path, pickle.loads) if study.cache_setup and hosts.processes == 1 else None
    how = "cached"
    if shared is None:
        bar.phase("setup (worlds, models) ...")
        started = time.perf_counter()
        shared = study.setup(root, config)
        how = f"built in {time.perf_counter() - started:.1f}s"
        if study.cache_setup and hosts.writer:
            atomic_write_bytes(path, pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL))
    if memo is not None:
        memo.put(address, shared)
    return shared, how


@dataclass(frozen=True)
class _Computed:
    rows: list
    computed: int
    setup_s: float
    #: the seconds every cell took when it was computed, in this run or the one that cached it
    #: (None when a cache entry predates the record), so a re-rendered report keeps the cost
    compute_s: float | None


@dataclass(frozen=True)
class _Hosts:
    """The processes of a run (`simrec.sharding`): how many, and whether this one writes."""
    processes: int
    writer: bool


def _hosts() -> _Hosts:
    import jax

    from simrec import sharding
    return _Hosts(jax.process_count(), sharding.is_writer())


def _cache_hits(study: Study, cells: list[dict], paths: list[Path], hosts: _Hosts) -> list:
    """The cached (rows, seconds) of each cell or None. In a multi-host run the writer reads its
    cache and the others learn which cells it holds (`simrec.sharding.broadcast_from_writer`),
    so that every process computes the same missing cells in the same order; their entries are
    ``()`` on the other processes (they never report)."""
    hits = [_read_cache(p, functools.partial(_cell_entry, study, cell)) for p, cell in zip(paths, cells)] \
        if hosts.writer else [None] * len(paths)
    if hosts.processes == 1:
        return hits
    from simrec import sharding
    held = sharding.broadcast_from_writer(np.array([hit is not None for hit in hits]))
    return [hit if hosts.writer else (() if h else None) for hit, h in zip(hits, held)]


def _compute_cells(study: Study, config, seed: int, cells: list[dict], base: dict, cache: Path,
                   memo: SetupMemo | None, bar: Progress, executor, hosts: _Hosts) -> _Computed:
    """Every cell's rows, from the cache or computed by ``executor`` (`simrec.executor`; setup
    only when a cell is missing). Each computed cell is written to the cache as soon as it
    arrives, whatever order the executor finishes them in; rows are concatenated in cell order.
    Only the writer (process 0 of a multi-host run) reads and writes the cache; the others
    compute the same cells with it and their rows are not used."""
    import jax

    from simrec.models.tuning import store
    root = jax.random.key(seed)
    paths = [cache / study.name / f"{_digest({**base, 'cell': c})[:24]}.json" for c in cells]
    started = time.perf_counter()
    try:
        with store(cache / "models", write=hosts.writer):     # fitted models shared across studies
            return _compute_in_store(study, config, seed, cells, base, cache, memo, bar, executor, hosts,
                                     root, paths, started)
    except KeyboardInterrupt:
        raise RunInterrupted(study.name, sum(p.exists() for p in paths), len(cells)) from None


def _compute_in_store(study: Study, config, seed: int, cells: list[dict], base: dict, cache: Path,
                      memo: SetupMemo | None, bar: Progress, executor, hosts: _Hosts, root, paths: list[Path],
                      started: float) -> _Computed:
    """The body of `_compute_cells`, inside the model store."""
    computed = 0
    hits = _cache_hits(study, cells, paths, hosts)
    setup_address = _digest({**base, "setup": True})
    shared, how = (None, "not needed") if all(c is not None for c in hits) else \
        _setup(study, root, config, setup_address, cache, memo, bar, hosts)
    setup_s = time.perf_counter() - started
    if study.setup is not None:
        bar.phase(f"setup {how}; {sum(c is None for c in hits)} of {len(cells)} cells to compute")
    for cell, hit in zip(cells, hits):
        if hit is not None:
            bar.update(1, note=canonical_json(cell)[:60], computed=False)
    todo = [(i, cell) for i, (cell, hit) in enumerate(zip(cells, hits)) if hit is None]
    with contextlib.closing(executor.map(study, seed, config, todo, shared, setup_address)) as results:
        for i, cell_rows, cell_s in results:
            if hosts.writer:
                atomic_write_text(paths[i], _cell_json(study, cells[i], cell_rows, cell_s))
            hits[i] = (cell_rows, cell_s)
            computed += 1
            bar.update(1, note=canonical_json(cells[i])[:60], computed=True)
    if not hosts.writer:
        return _Computed([], computed, time.perf_counter() - started, None)
    seconds = [hit[1] for hit in hits]
    return _Computed([row for hit in hits for row in hit[0]], computed, setup_s,
                     None if None in seconds else round(sum(seconds), 3))


_JSON_TYPES = {int: (int,), float: (float,), str: (str,), bool: (bool,)}


def _cell_json(study: Study, cell: Cell, rows: list, seconds: float | None) -> str:
    """A cell's cache entry: its cell, the declared columns, the rows with their digest, the time."""
    return json.dumps({"cell": cell, "columns": list(study.columns), "rows": rows,
                       "rows_sha256": _digest(rows), "seconds": seconds}, allow_nan=True)


def _cell_entry(study: Study, cell: Cell, data: bytes) -> tuple[list, float | None]:
    """(rows, seconds the cell took to compute, None if not recorded) of a cell cache entry, after
    checking it against the cell, the declared columns and types, and the rows' digest; a
    ValueError says what does not match (the entry is then recomputed)."""
    entry = json.loads(data)
    if not isinstance(entry, dict) or not isinstance(entry.get("rows"), list):
        raise ValueError("not a cell entry (no list of rows)")
    if canonical_json(entry.get("cell")) != canonical_json(cell):
        raise ValueError(f"it holds cell {entry.get('cell')!r}, not {dict(cell)!r}")
    if entry.get("columns") != list(study.columns):
        raise ValueError(f"its columns {entry.get('columns')!r} are not the declared {list(study.columns)}")
    types = [(name, _JSON_TYPES[tp]) for name, tp in study.columns.items()]
    for i, row in enumerate(entry["rows"]):
        if not isinstance(row, list) or len(row) != len(types):
            raise ValueError(f"row {i} does not have the {len(types)} declared columns")
        for value, (name, accepted) in zip(row, types):
            if not isinstance(value, accepted) or (accepted == (int,) and isinstance(value, bool)):
                raise ValueError(f"row {i}: column {name!r} holds {value!r}, not {accepted[0].__name__}")
    if entry.get("rows_sha256") != _digest(entry["rows"]):
        raise ValueError("its rows do not match their digest (edited or truncated)")
    return entry["rows"], entry.get("seconds")


@contextlib.contextmanager
def _plot_style():
    """Matplotlib's global style as it was before, whatever a report sets (e.g. ``sns.set_theme``),
    so a study's figures never depend on which study ran before it in the same process."""
    import matplotlib
    with matplotlib.rc_context():
        yield


def _write_report(folder: Path, records, report: Report) -> list[str]:
    """records.csv, the tables and the figures into ``folder``; the file names."""
    buf = io.StringIO()
    records.to_csv(buf, index=False, lineterminator="\n")
    atomic_write_text(folder / "records.csv", buf.getvalue())
    files = ["records.csv"]
    tables = dict(report.tables)
    if report.claims:
        from simrec.reporting import claims_table
        if "table_claims" in tables:
            raise ValueError("a report with claims writes table_claims itself; rename its own table_claims")
        tables["table_claims"] = claims_table(report.claims)
    for name, df in tables.items():
        files += write_table(folder, name, df, report.float_format)
    for name, fig in report.figures.items():
        files.append(write_figure(folder, name, fig))
    return sorted(files)


def _manifest(study: Study, config, preset, seed: int, done: _Computed, cells: int, version: str,
              wall: float, records: int, files: list[str], executor: dict, data) -> dict:
    import jax

    from simrec import sharding
    return {
        "study": study.name, "preset": preset, "seed": seed, "config": config_to_dict(config),
        "cells": {"total": cells, "computed": done.computed, "cached": cells - done.computed,
                  "compute_s": done.compute_s},
        "executor": executor,
        "wall_time_s": round(wall, 3), "setup_s": round(done.setup_s, 3),
        "finished_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(), "code_version": version,
        "code_modules": list(module_closure(study.module, (study.module.split(".")[0], "simrec"),
                                            [m for m in (report_module(study),) if m])),
        "data": [f.to_json() for f in data],
        "versions": package_versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "cpu": cpu_description(),
                    "devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
                    **sharding.devices_summary()},
        "command": " ".join(["simrec", *sys.argv[1:]]) if sys.argv else None,
        "records": {"file": "records.csv", "rows": records,
                    "columns": {c: tp.__name__ for c, tp in study.columns.items()}},
        "files": files,
    }


def _data_lines(data) -> list[str]:
    """The README's account of the real data a run read (or looked for)."""
    if not data:
        return []
    lines = ["Real data (below the data folder; digests in `manifest.json`):", ""]
    for f in data:
        lines.append(f"- `{f.file}`: {f.bytes:,} bytes, sha256 `{f.sha256[:16]}…`" if f.present else
                     f"- `{f.file}`: not found, the parts that need it were skipped")
    return lines + [""]


def _readme(study: Study, report: Report, preset, seed: int, notes: Sequence[str], files: list[str],
            data=(), version: str = "") -> str:
    lines = [f"# {study.name}", "", study.description, ""]
    if report.summary:
        lines += [report.summary.strip(), ""]
    if report.claims:
        from simrec.reporting import claims_markdown
        lines += [claims_markdown(report.claims).strip(), ""]
    lines += [f"- {note}" for note in notes] + ([""] if notes else [])
    lines += _data_lines(data)
    lines += [f"Preset `{preset}`, seed {seed}, code version `{version}` (a digest of the source of "
              "the modules listed in `manifest.json`; `simrec results` checks it against the code); "
              "see `manifest.json` for the exact config. `records.csv` holds every cell's tidy "
              "records (the input of every table).", "",
              "Files:", ""] + [f"- [{f}]({f})" for f in files]
    return "\n".join(lines) + "\n"


def _check_cache_dir(cache: Path) -> None:
    """`OutputError` (one line) unless ``cache`` is, or can be made, a writable folder."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(f"the cache folder {cache} is a file, not a folder; remove or rename it") from None
    except OSError as err:
        raise OutputError(f"cannot create the cache folder {cache}: {err.strerror or err}") from None
    if not os.access(cache, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write to the cache folder {cache}; fix its permissions or run elsewhere")


def run_fields(study: Study, config, preset, seed: int, version: str, data) -> dict[str, Any]:
    """What makes two runs the same run: the fields every process of a multi-host run must agree
    on (`simrec.sharding.agree`), also the identity `simrec results` checks a folder by."""
    return {"study": study.name, "preset": preset, "config": config_to_dict(config), "seed": seed,
            "code version": version, "data": {f.file: f.sha256 for f in data}}


def run(study: Study, config, *, seed: int = 0, out: Path | str, preset: str | None = None,
        cache_dir: Path | str | None = None, progress: bool = True, memo: SetupMemo | None = None,
        notes: Sequence[str] = (), executor=None, allow_missing_data: bool = False,
        force: bool = False) -> RunSummary:
    """Set up, compute every cell of ``study`` under ``config`` (cached, resumable) and write the
    report, records and manifest into ``out`` as one finished set (`OutputFolder`).

    Cell and setup caches go to ``cache_dir`` (default `default_cache_dir`), addressed by study,
    config, seed, code version and the content digest of every data file the study declares
    (``Study.data_files``), so re-running with the same inputs reads finished cells from the cache
    and computes only the missing ones, and changed data is recomputed. A declared data file that
    is absent is a `simrec.datafiles.MissingDataError` unless ``allow_missing_data`` (the study
    then skips the parts that need it). ``notes``: extra lines for the output README.
    ``executor``: where missing cells are computed (`simrec.executor.Local`, the default, or a
    `simrec.executor.DaskExecutor`); the driver keeps the cache, the output folder and its lock,
    and the records are the same wherever cells run. The manifest records it. ``force``: replace
    an output folder that holds another study's run. In a multi-host run, call it in every
    process with the same arguments (checked before any work, `simrec.sharding.agree`): only
    process 0 writes, the others return a summary without files.
    """
    from simrec import datafiles
    seed = check_seed(seed)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(out)
    started = time.perf_counter()
    data = datafiles.describe(study.data_files(config) if study.data_files else (),
                              store=cache / "data-digests.json" if cache.is_dir() else None)
    if not allow_missing_data:
        datafiles.require(data, study.name)
    with datafiles.declared([f.file for f in data]):
        cells = [dict(c) for c in study.cells(config)]
        if len({_digest(c) for c in cells}) != len(cells):
            raise ValueError(f"study {study.name!r} declares duplicate cells")
        version = code_version(study)
        base = {"study": study.name, "config": _cache_config(config, study.report_fields), "seed": seed,
                "code": version, "data": {f.file: f.sha256 for f in data}}
        if executor is None:
            from simrec.executor import Local
            executor = Local()
        hosts = _hosts()
        if hosts.processes > 1:
            from simrec import sharding
            sharding.agree(run_fields(study, config, preset, seed, version, data))
        if not hosts.writer:                # a multi-host run: compute with the others, write nothing
            done = _compute_cells(study, config, seed, cells, base, cache, memo,
                                  Progress(len(cells), study.name, enabled=False), executor, hosts)
            return RunSummary(Path(out), len(cells), done.computed, len(cells) - done.computed,
                              time.perf_counter() - started, done.setup_s, ())
        with OutputFolder(out, f"{study.name}, preset {preset}, seed {seed}", study=study.name,
                          force=force) as folder:
            _check_cache_dir(cache)
            bar = Progress(len(cells), study.name, enabled=progress)
            done = _compute_cells(study, config, seed, cells, base, cache, memo, bar, executor, hosts)
            records = records_frame(study, done.rows)
            with _plot_style():
                report = study.report(config, records)
                files = _write_report(folder.staging, records, report)
            wall = time.perf_counter() - started
            manifest = _manifest(study, config, preset, seed, done, len(cells), version, wall,
                                 len(records), files, executor.describe(), data)
            atomic_write_text(folder.staging / "manifest.json",
                              json.dumps(manifest, indent=2, allow_nan=True) + "\n")
            atomic_write_text(folder.staging / "README.md",
                              _readme(study, report, preset, seed, notes, files, data, version))
            folder.commit()
    return RunSummary(Path(out), len(cells), done.computed, len(cells) - done.computed, wall,
                      done.setup_s, tuple(files))

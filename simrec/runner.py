"""Study runner: config -> grid of cells -> cached, resumable computation -> tables, figures, manifest.

A study is a `Study` value: presets of a frozen config dataclass, a function listing the cells of
its grid (e.g. seed x fold x rate), a pure function computing one cell from
`(key, config, cell)`, and a function turning all cell results into a `Report` (tables and
figures). ``key`` is the run's root key ``jax.random.key(seed)``: state shared by every cell (a
world, trained models) comes from ``shared_key(key, "world")``, the cell's own randomness from
``cell_key(key, cell)`` = ``fold_in(key, hash(cell))``, so adding or removing cells never changes
the others. The runner
* caches every finished cell on disk, content-addressed by (study, config, seed, cell, code
  version), written atomically (temp file + rename), so a killed run resumes with only the
  missing cells and gives byte-identical tables;
* writes ``table*.csv|md|tex``, ``*.png`` and ``manifest.json`` atomically into the output folder.

Cell results must be JSON-serialisable (numbers, strings, lists, dicts); `to_json` converts numpy
and JAX arrays. Non-finite floats are stored as JSON ``NaN``/``Infinity``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import inspect
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = [
    "ConfigError", "Study", "Report", "CellResult", "RunSummary", "run", "cell_key", "shared_key",
    "key_id", "to_json",
    "config_fields", "with_overrides", "config_to_dict", "atomic_write_bytes", "atomic_write_text",
    "write_table", "write_results_index", "Progress",
]

Cell = Mapping[str, Any]


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names it and the valid choices."""


@dataclass(frozen=True)
class CellResult:
    """One finished cell: its coordinates and its JSON-able value."""
    cell: dict
    value: Any


@dataclass
class Report:
    """What a study returns: tables (pandas DataFrames) and figures (matplotlib Figures).

    Table names should start with ``table``; each is written as ``NAME.csv``, ``NAME.md`` and
    ``NAME.tex``. Figures are written as ``NAME.png``. ``summary`` (Markdown) becomes the folder's
    ``README.md`` together with the list of files.
    """
    tables: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    float_format: str = ".4g"


@dataclass(frozen=True)
class Study:
    """A reproducible experiment: presets, a grid of cells, a per-cell computation, a report."""
    name: str
    description: str
    presets: Mapping[str, Any]
    cells: Callable[[Any], Sequence[Cell]]
    compute: Callable[[Any, Any, Cell], Any]
    report: Callable[[Any, Sequence[CellResult]], Report]
    source: str = ""                     # module file, hashed into the cache address
    report_helpers: tuple = ()           # functions used only by `report` (not hashed, see below)
    #: dotted config fields left out of the cache address: they may choose which cells exist and
    #: how the report shows them, but never change a cell's value (put the value a cell needs
    #: into its coordinates). Runs that differ only in them share cached cells, e.g. a sweep over
    #: a grid field whose points are cells.
    report_fields: tuple[str, ...] = ()
    #: other files the cells' values depend on beyond simrec/ and `source` (e.g. a shared scenario
    #: module under studies/), hashed whole into the cache address
    dependencies: tuple[str, ...] = ()

    def preset(self, name: str):
        if name not in self.presets:
            raise ConfigError(f"unknown preset {name!r} for study {self.name!r}; "
                              f"choose one of: {', '.join(self.presets)}")
        return self.presets[name]


@dataclass(frozen=True)
class RunSummary:
    out: Path
    cells_total: int
    cells_computed: int
    cells_cached: int
    wall_time_s: float
    files: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Configs: frozen dataclasses, possibly nested; overrides from "a.b=value" strings.
# --------------------------------------------------------------------------------------------

def config_to_dict(config) -> dict:
    """Plain nested dict of a (nested) config dataclass, tuples as lists."""
    return json.loads(_canonical_json(dataclasses.asdict(config)))


def config_fields(config, prefix: str = "") -> dict[str, Any]:
    """Flat ``{"a.b": type}`` of every settable leaf field of a nested config dataclass."""
    out = {}
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(config_fields(value, prefix + f.name + "."))
        else:
            out[prefix + f.name] = hints.get(f.name, type(value))
    return out


def with_overrides(config, overrides: Mapping[str, str]):
    """Return ``config`` with dotted-path fields replaced by values parsed from strings.

    Raises `ConfigError` naming an unknown key (and listing the valid ones) or a value that does
    not parse as the field's type. The config's own ``__post_init__`` validation then runs.
    """
    valid = config_fields(config)
    for key in overrides:
        if key not in valid:
            raise ConfigError(f"unknown config key {key!r}; valid keys: {', '.join(sorted(valid))}")
    nested: dict[str, dict] = {}
    direct = {}
    for key, raw in overrides.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = raw
        else:
            direct[head] = _parse_value(key, raw, valid[key])
    for head, sub in nested.items():
        direct[head] = with_overrides(getattr(config, head), sub)
    try:
        return dataclasses.replace(config, **direct)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _parse_value(key: str, raw: str, tp) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    try:
        if origin in (typing.Union, types.UnionType):
            if raw.lower() in ("none", "null") and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            return _parse_value(key, raw, inner[0])
        if origin is typing.Literal:
            for choice in args:
                if str(choice) == raw:
                    return choice
            raise ConfigError(f"config key {key!r}: {raw!r} is not one of {', '.join(map(str, args))}")
        if origin is tuple:
            parts = [p for p in raw.replace(";", ",").split(",") if p.strip()]
            elem = args[0] if args else str
            return tuple(_parse_value(key, p.strip(), elem) for p in parts)
        if tp is bool:
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError
        if tp is int:
            return int(raw)
        if tp is float:
            return float(raw)
        if tp is str:
            return raw
    except ConfigError:
        raise
    except (ValueError, TypeError):
        pass
    else:
        raise ConfigError(f"config key {key!r} has unsupported type {tp}")
    raise ConfigError(f"config key {key!r} expects {getattr(tp, '__name__', tp)}, got {raw!r}")


# --------------------------------------------------------------------------------------------
# JSON, hashing, atomic files
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


def _canonical_json(value) -> str:
    return json.dumps(to_json(value), sort_keys=True, separators=(",", ":"), allow_nan=True)


def _digest(value) -> str:
    return hashlib.sha256(_canonical_json(value).encode()).hexdigest()


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
    """A hashable identity of a PRNG key (for in-memory memoisation of shared state)."""
    import jax
    return tuple(np.asarray(jax.random.key_data(key)).ravel().tolist())


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@functools.lru_cache(maxsize=None)
def _tree_digest(root: str) -> str:
    """Hash of every .py file below ``root`` (the code version of a cache entry)."""
    h = hashlib.sha256()
    infrastructure = {Path(__file__).name, "cli.py"}      # cannot change a cell's value
    for path in sorted(Path(root).rglob("*.py")):
        if path.parent == Path(root) and path.name in infrastructure:
            continue
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _study_digest(study: Study) -> str:
    """Hash of the study module without `report` and `report_helpers`, whose edits change only
    how cached cells are presented, so tables regenerate from the cache in seconds."""
    if not study.source:
        return ""
    lines = Path(study.source).read_text().splitlines(keepends=True)
    drop: set[int] = set()
    for fn in (study.report, *study.report_helpers):
        with contextlib.suppress(OSError, TypeError):
            if Path(inspect.getsourcefile(fn)).resolve() == Path(study.source).resolve():
                block, start = inspect.getsourcelines(fn)
                drop.update(range(start - 1, start - 1 + len(block)))
    kept = "".join(line for i, line in enumerate(lines) if i not in drop)
    return hashlib.sha256(kept.encode()).hexdigest()


def code_version(study: Study) -> str:
    """Digest of the library sources that compute cells (all of simrec/ except the runner and the
    CLI), of the study's compute code (its module less the report functions) and of the study's
    `dependencies`."""
    lib = _tree_digest(str(Path(__file__).parent))
    deps = "".join(hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in study.dependencies)
    return hashlib.sha256((lib + _study_digest(study) + deps).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------

class Progress:
    """A minimal progress bar on stderr (a line per 10 % when stderr is not a terminal)."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream=None):
        self.total, self.label, self.enabled = max(total, 0), label, enabled
        self.stream = stream or sys.stderr
        self.done, self.start, self._last_decile = 0, time.perf_counter(), -1
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if not self.enabled or self.total == 0:
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
# Table writers (CSV, Markdown, LaTeX) with deterministic formatting
# --------------------------------------------------------------------------------------------

def _fmt(value, float_format: str) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return format(float(value), float_format)
    return str(value)


_TEX_ESCAPE = {"|": r"$|$", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "∞": r"$\infty$",
               "†": r"$^\dagger$", "–": "--", "−": "-", "±": r"$\pm$", "≤": r"$\le$", "≥": r"$\ge$",
               "⁺": r"$^+$", "₀": r"$_0$", "τ": r"$\tau$", "ε": r"$\varepsilon$", "∖": r"$\setminus$",
               "×": r"$\times$", "Δ": r"$\Delta$"}


def _tex(text: str) -> str:
    # **bold** markers (Markdown) become \textbf{...}
    parts = text.split("**")
    out = []
    for i, part in enumerate(parts):
        esc = "".join(_TEX_ESCAPE.get(ch, ch) for ch in part)
        out.append(f"\\textbf{{{esc}}}" if i % 2 == 1 and len(parts) % 2 == 1 else esc)
    return "".join(out)


def write_table(out: Path, name: str, df, float_format: str = ".4g") -> list[str]:
    """Write a DataFrame as NAME.csv (full precision), NAME.md and NAME.tex (formatted)."""
    out = Path(out)
    index = df.index.name is not None or not isinstance(df.index, __import__("pandas").RangeIndex)
    frame = df.reset_index() if index else df
    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.10g", lineterminator="\n")
    atomic_write_text(out / f"{name}.csv", buf.getvalue())

    header = [str(c) for c in frame.columns]
    rows = [[_fmt(v, float_format) for v in row] for row in frame.itertuples(index=False)]
    md_cell = lambda text: text.replace("|", r"\|")  # noqa: E731  (a literal pipe ends a cell)
    md = ["| " + " | ".join(map(md_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    md += ["| " + " | ".join(map(md_cell, r)) + " |" for r in rows]
    atomic_write_text(out / f"{name}.md", "\n".join(md) + "\n")

    align = "l" + "r" * (len(header) - 1)
    tex = [r"\begin{tabular}{" + align + "}", r"\toprule",
           " & ".join(_tex(h) for h in header) + r" \\", r"\midrule"]
    tex += [" & ".join(_tex(c) for c in r) + r" \\" for r in rows]
    tex += [r"\bottomrule", r"\end{tabular}"]
    atomic_write_text(out / f"{name}.tex", "\n".join(tex) + "\n")
    return [f"{name}.csv", f"{name}.md", f"{name}.tex"]


def _write_figure(out: Path, name: str, fig) -> str:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(out / f"{name}.png", buf.getvalue())
    return f"{name}.png"


# --------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------

def _versions() -> dict[str, str]:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for pkg in ("simrec", "jax", "jaxlib", "numpy", "scipy", "optax", "statsmodels", "pandas",
                "seaborn", "matplotlib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "simrec", "studies"],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("-dirty" if dirty else "")) if commit else None


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------

def default_cache_dir(out: Path) -> Path:
    return Path(out) / ".cache"


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


def run(study: Study, config, *, seed: int = 0, out: Path | str, preset: str | None = None,
        cache_dir: Path | str | None = None, progress: bool = True) -> RunSummary:
    """Compute every cell of ``study`` under ``config`` (cached, resumable) and write the report.

    ``out`` receives the tables, figures, ``manifest.json`` and ``README.md``; cell caches go to
    ``cache_dir`` (default ``out/.cache``). Re-running with the same config, seed and code reads
    finished cells from the cache and recomputes only the missing ones.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    out = Path(out)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(out)
    started = time.perf_counter()
    cells = [dict(c) for c in study.cells(config)]
    ids = [_digest(c) for c in cells]
    if len(set(ids)) != len(ids):
        raise ValueError(f"study {study.name!r} declares duplicate cells")
    base = {"study": study.name, "config": _cache_config(config, study.report_fields), "seed": int(seed),
            "code": code_version(study)}
    import jax
    root = jax.random.key(int(seed))
    bar = Progress(len(cells), study.name, enabled=progress)
    results, computed = [], 0
    for cell in cells:
        path = cache / study.name / f"{_digest({**base, 'cell': cell})[:24]}.json"
        if path.exists():
            value = json.loads(path.read_text())["value"]
        else:
            value = to_json(study.compute(root, config, cell))
            atomic_write_text(path, json.dumps({"cell": cell, "value": value}, allow_nan=True))
            computed += 1
        results.append(CellResult(cell, value))
        bar.update(1, note=_canonical_json(cell)[:60])

    report = study.report(config, results)
    files: list[str] = []
    for name, df in report.tables.items():
        files += write_table(out, name, df, report.float_format)
    for name, fig in report.figures.items():
        files.append(_write_figure(out, name, fig))
    wall = time.perf_counter() - started
    manifest = {
        "study": study.name, "preset": preset, "seed": int(seed),
        "config": config_to_dict(config),
        "cells": {"total": len(cells), "computed": computed, "cached": len(cells) - computed},
        "wall_time_s": round(wall, 3),
        "finished_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(), "code_version": base["code"], "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "command": " ".join(["simrec", *sys.argv[1:]]) if sys.argv else None,
        "files": sorted(files),
    }
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2, allow_nan=True) + "\n")
    readme = [f"# {study.name}", "", study.description, ""]
    if report.summary:
        readme += [report.summary.strip(), ""]
    readme += [f"Preset `{preset}`, seed {seed}; see `manifest.json` for the exact config.", "",
               "Files:", ""] + [f"- [{f}]({f})" for f in sorted(files)]
    atomic_write_text(out / "README.md", "\n".join(readme) + "\n")
    return RunSummary(out, len(cells), computed, len(cells) - computed, wall, tuple(sorted(files)))


def write_results_index(root: Path | str) -> Path:
    """(Re)write ``root/README.md``: one row per study folder below ``root`` that has a manifest."""
    root = Path(root)
    rows = []
    for manifest_path in sorted(root.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        folder = manifest_path.parent.name
        readme = manifest_path.parent / "README.md"
        description = readme.read_text().split("\n")[2] if readme.exists() else ""
        tables = ", ".join(f"[{f[:-3]}]({folder}/{f})" for f in manifest["files"] if f.endswith(".md"))
        figures = ", ".join(f"[{f[:-4]}]({folder}/{f})" for f in manifest["files"] if f.endswith(".png"))
        rows.append(f"| [{manifest['study']}]({folder}/README.md) | {description} | "
                    f"{manifest.get('preset')} | {manifest['seed']} | {manifest['wall_time_s']:.0f} s | "
                    f"{tables} | {figures} |")
    text = ["# Results", "", "Committed outputs of every study at its default preset. Regenerate one "
            "with `simrec run STUDY` (or all with `simrec run all`); each folder's `manifest.json` "
            "holds the exact config, seed, package versions, git commit and wall time.", "",
            "| study | what it shows | preset | seed | wall time | tables | figures |",
            "|---|---|---|---|---|---|---|", *rows]
    atomic_write_text(root / "README.md", "\n".join(text) + "\n")
    return root / "README.md"


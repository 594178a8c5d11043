"""Code versions: a digest of the source a study's cells are computed from.

A study's code version hashes the source of every module in the static import closure of the
module of its ``compute`` (`module_closure`: ``import`` statements anywhere in a file, package
``__init__``s included), within its own top-level package and ``simrec``, less the infrastructure
modules that cannot change a cell's value (`INFRASTRUCTURE`) and less its report (`code_version`).
The runner puts it in every cache address and manifest; the executor checks that Dask workers
compute the driver's version; `simrec.provenance` compares it with a committed folder's.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["INFRASTRUCTURE", "module_closure", "module_version", "report_module", "code_version"]

#: modules that cannot change a cell's value (hashing them would void every cache on each edit);
#: `simrec.reporting` is presentation only, for reports, never for computing records
INFRASTRUCTURE = frozenset({"simrec.runner", "simrec.cli", "simrec.__main__", "simrec.config",
                            "simrec.output", "simrec.executor", "simrec.reporting", "simrec.provenance",
                            "simrec.records", "simrec.codeversion"})


def _imported_names(tree: ast.AST, package: str) -> set[str]:
    """Absolute names a module's import statements may refer to (modules or attributes)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                stem = f"{base}.{node.module}" if node.module else base
            else:
                stem = node.module or ""
            names.add(stem)
            names.update(f"{stem}.{alias.name}" for alias in node.names)
    return names


@functools.lru_cache(maxsize=1024)
def _file_imports(path: str, package: str, stamp: tuple[int, int]) -> tuple[str, ...]:
    """`_imported_names` of the file at ``path``, parsed once per process while its ``stamp``
    (modification time in ns, size) stays the same: a run, a staleness check and a test session
    ask for the closures of many studies that share most of their modules."""
    return tuple(sorted(_imported_names(ast.parse(Path(path).read_bytes(), filename=path), package)))


def _find(name: str):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    return spec if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def module_closure(module: str, packages: Sequence[str], skip: Sequence[str] = ()) -> dict[str, Path]:
    """``{name: file}`` of ``module`` and every module it imports, transitively, whose top-level
    package is one of ``packages`` (statically, from ``import`` statements anywhere in the file;
    a package's ``__init__`` counts when a submodule is imported). Infrastructure modules
    (`INFRASTRUCTURE`) and the modules in ``skip`` are left out, and not followed."""
    roots, skipped = tuple(packages), INFRASTRUCTURE | set(skip)
    todo, seen = [module], {}
    while todo:
        name = todo.pop()
        if name in seen or name in skipped or name.split(".")[0] not in roots:
            continue
        spec = _find(name)
        if spec is None:
            continue
        seen[name] = Path(spec.origin)
        package = name if spec.submodule_search_locations else name.rpartition(".")[0]
        stat = Path(spec.origin).stat()
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo.extend(parents + list(_file_imports(spec.origin, package or name, (stat.st_mtime_ns, stat.st_size))))
    return dict(sorted(seen.items()))


def _without_function(source: str, fn) -> str:
    """``source`` less the lines of function ``fn`` when ``fn`` is defined in it."""
    try:
        block, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return source
    lines = source.splitlines(keepends=True)
    if "".join(lines[start - 1:start - 1 + len(block)]) != "".join(block):
        return source
    return "".join(lines[:start - 1] + lines[start - 1 + len(block):])


def module_version(module: str, leave_out: Callable | None = None, skip: Sequence[str] = ()) -> str:
    """Digest of the source of every module in ``module``'s `module_closure` (its own top-level
    package and ``simrec``, less the modules in ``skip``), less the lines of function
    ``leave_out`` in ``module`` itself."""
    h = hashlib.sha256()
    for name, path in module_closure(module, (module.split(".")[0], "simrec"), skip).items():
        source = path.read_text(encoding="utf-8")
        if name == module and leave_out is not None:
            source = _without_function(source, leave_out)
        h.update(name.encode() + b"\0" + source.encode() + b"\0")
    return h.hexdigest()[:16]


def report_module(study) -> str | None:
    """The module of a study's ``report`` when it is not the module of its ``compute`` (a study
    package's ``report.py``), else None."""
    module = getattr(study.report, "__module__", None)
    return module if module and module != study.module else None


def code_version(study) -> str:
    """The digest of the compute side of a study: the `module_version` of the module of its
    ``compute``, less its report — the module of ``report`` when that is another module (a study
    package's ``report.py``, with everything only it imports), else the ``report`` function's own
    lines. So an edit to a report re-renders the tables from the cached cells in seconds; in a
    one-file study, helpers that ``report`` calls are hashed like any other code."""
    other = report_module(study)
    return module_version(study.module, None if other else study.report, (other,) if other else ())

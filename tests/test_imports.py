"""The import structure of the library and the studies, read from their source (nothing is imported).

Every ``import`` and ``from ... import`` statement anywhere in a file counts, function bodies
included, resolved to the modules of ``simrec/`` and of ``studies/`` (installed as
``simrec_studies``). Importing ``a.b.c`` also runs the ``__init__`` of the packages ``a`` and
``a.b``, so an import from outside a package is an edge to each of its enclosing packages too.

(a) no import cycle among the modules of ``simrec``;
(b) the world layer (``simrec.world``, ``.missing``, ``.procedural``, ``.data``) imports, even
    indirectly, nothing of ``simrec.feed``, ``.ope``, ``.models``, ``.runner``, ``.cli``;
(c) no module of ``simrec/`` or ``studies/`` imports a private (``_x``) name of another module,
    by ``from X import _x`` or as ``X._x``; a private module is imported only within its package;
(d) the benchmarks (``studies/bench_*.py``) never import ``simrec.cli``, even indirectly;
(e) no study imports another study: a study is an entry of ``[project.entry-points."simrec.studies"]``
    (module ``simrec_studies.NAME`` or package ``simrec_studies/NAME/``); it may import
    ``simrec.*``, ``simrec_studies.common[.*]`` and its own package;
(f) ``simrec`` never imports ``simrec_studies``.
"""
from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ((ROOT / "simrec", "simrec"), (ROOT / "studies", "simrec_studies"))

WORLD_LAYER = ("simrec.world", "simrec.missing", "simrec.procedural", "simrec.data")
ABOVE_THE_WORLD = ("simrec.feed", "simrec.ope", "simrec.models", "simrec.runner", "simrec.cli")
#: what every study may import besides its own package and the library
SHARED_STUDY_MODULES = ("simrec_studies.common",)
#: private names still imported across modules, each with the reason it is allowed; the test
#: fails when one of them is gone, so that this list only ever shrinks
KNOWN_PRIVATE_IMPORTS: dict = {}


@dataclass(frozen=True)
class Import:
    importer: str          # the importing module
    module: str            # the imported module, resolved (may lie outside the scanned packages)
    name: str | None       # the imported attribute of `module` (from X import name), else None
    line: int

    def __str__(self):
        return f"{self.importer}:{self.line} imports {self.module}{f'.{self.name}' if self.name else ''}"


def modules(sources=SOURCES) -> dict[str, Path]:
    """{module name: file} of every module of the scanned packages."""
    found = {}
    for folder, package in sources:
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imports(mods: dict[str, Path]) -> list[Import]:
    """Every import statement of every module (anywhere in the file), resolved."""
    out = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [Import(module, alias.name, None, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = _package_of(module, path).split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    out.append(Import(module, full, None, node.lineno) if full in mods else
                               Import(module, base, alias.name, node.lineno))
    return out


def _enclosing(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph(mods: dict[str, Path], found: list[Import]) -> dict[str, set[str]]:
    """{module: modules its imports run}: the imported module and every enclosing package of it
    that does not enclose the importer (its ``__init__`` runs first), among the scanned modules."""
    edges = {m: set() for m in mods}
    for imp in found:
        for target in (*_enclosing(imp.module), imp.module):
            if target in mods and target != imp.importer and not imp.importer.startswith(target + "."):
                edges[imp.importer].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    component of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(set(component))
    out = []
    for component in components:                  # a shortest cycle through the first member
        first = min(component)
        paths, seen = {first: [first]}, {first}
        queue = [first]
        while queue:
            node = queue.pop(0)
            for child in sorted(edges[node] & component):
                if child == first:
                    out.append(paths[node] + [first])
                    queue = []
                    break
                if child not in seen:
                    seen.add(child)
                    paths[child] = paths[node] + [child]
                    queue.append(child)
    return out


def reachable(edges: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """{module: a shortest import path from `start` to it} for every module `start` runs."""
    paths, queue = {start: [start]}, [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(edges.get(node, ())):
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return paths


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(mods: dict[str, Path], found: list[Import]) -> list[str]:
    """Imports of another module's private name (``from X import _x``, ``X._x``), and of a private
    module from outside its package, as (importer, module, name) triples and messages."""
    out = []
    for imp in found:
        if imp.name is not None and _is_private(imp.name) and imp.module != imp.importer:
            out.append(((imp.importer, imp.module, imp.name), str(imp)))
        parts = imp.module.split(".")
        for i, part in enumerate(parts):
            package = ".".join(parts[:i])
            if _is_private(part) and imp.module in mods and not imp.importer.startswith(package + "."):
                out.append(((imp.importer, imp.module, None), f"{imp}: a private module outside its package"))
    for module, path in mods.items():            # X._x, with X a module bound by an import
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in mods:
                        bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if not isinstance(value, ast.Name) or value.id not in bound:
                continue
            target = ".".join([bound[value.id], *chain])
            if target in mods and target != module:
                out.append(((module, target, node.attr), f"{module}:{node.lineno} uses {target}.{node.attr}"))
    return out


def studies() -> dict[str, str]:
    """{study name: its module or package} from pyproject.toml's ``simrec.studies`` entry points."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entries = project["project"]["entry-points"]["simrec.studies"]
    return {name: value.partition(":")[0] for name, value in entries.items()}


@pytest.fixture(scope="module")
def scanned():
    mods = modules()
    found = imports(mods)
    return mods, found, graph(mods, found)


# --------------------------------------------------------------------------------------------
# The scanner sees what it must (so that the rules cannot pass vacuously)
# --------------------------------------------------------------------------------------------

def test_the_scanner_resolves_absolute_relative_and_function_level_imports(scanned, tmp_path):
    mods, found, edges = scanned
    assert {"simrec.runner", "simrec.feed.exposure", "simrec_studies.common.scenarios"} <= set(mods)
    assert "simrec.executor" in edges["simrec.runner"]                      # from simrec.executor import ...
    assert "simrec.records" in edges["simrec.executor"]                     # inside compute_cell
    assert {"simrec.feed", "simrec.feed.policies"} <= edges["simrec.ope.dcg"]   # the package's __init__ too
    assert "simrec.feed" not in edges["simrec.feed.sessions"]               # not its own package
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import b\n")
    (package / "a.py").write_text("def f():\n    from .sub.b import g\n    import pkg.c as c\n    return c._h\n")
    (package / "sub" / "b.py").write_text("from .. import a\nfrom pkg.c import _h\n")
    (package / "c.py").write_text("_h = 1\n")
    toy = modules(((package, "pkg"),))
    toy_imports = imports(toy)
    toy_edges = graph(toy, toy_imports)
    assert toy_edges["pkg.a"] == {"pkg.sub", "pkg.sub.b", "pkg.c"}
    assert toy_edges["pkg.sub"] == {"pkg.sub.b"} and toy_edges["pkg.sub.b"] == {"pkg.a", "pkg.c"}
    assert cycles(toy_edges) == [["pkg.a", "pkg.sub.b", "pkg.a"]]
    assert {key for key, _ in private_imports(toy, toy_imports)} == {("pkg.a", "pkg.c", "_h"),
                                                                      ("pkg.sub.b", "pkg.c", "_h")}


# --------------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------------

def test_a_no_import_cycle_among_simrec_modules(scanned):
    _, _, edges = scanned
    library = {m: {t for t in targets if t.startswith("simrec.") or t == "simrec"}
               for m, targets in edges.items() if m == "simrec" or m.startswith("simrec.")}
    found = cycles(library)
    assert not found, "import cycles among simrec modules:\n" + "\n".join(" -> ".join(c) for c in found)


def test_b_the_world_layer_imports_no_feed_estimator_model_runner_or_cli(scanned):
    _, _, edges = scanned
    bad = [" -> ".join(path) for module in WORLD_LAYER for target, path in reachable(edges, module).items()
           if any(target == f or target.startswith(f + ".") for f in ABOVE_THE_WORLD)]
    assert not bad, "the world layer reaches modules above it:\n" + "\n".join(bad)


def test_c_no_module_imports_another_modules_private_name(scanned):
    mods, found, _ = scanned
    violations = private_imports(mods, found)
    unexpected = [message for key, message in violations if key not in KNOWN_PRIVATE_IMPORTS]
    assert not unexpected, "private names imported across modules:\n" + "\n".join(unexpected)
    gone = set(KNOWN_PRIVATE_IMPORTS) - {key for key, _ in violations}
    assert not gone, f"no longer imported, remove from KNOWN_PRIVATE_IMPORTS: {sorted(gone)}"


def test_d_benchmarks_do_not_import_the_cli(scanned):
    mods, _, edges = scanned
    benches = [m for m in mods if m.startswith("simrec_studies.bench_")]
    assert benches
    bad = [" -> ".join(path) for bench in benches for target, path in reachable(edges, bench).items()
           if target == "simrec.cli" or target.startswith("simrec.cli.")]
    assert not bad, "benchmarks that import the CLI:\n" + "\n".join(bad)


def test_e_no_study_imports_another_study(scanned):
    mods, found, _ = scanned
    owners = studies()
    assert owners and all(root in mods for root in owners.values()), owners

    def study_of(module: str) -> str | None:
        return next((name for name, root in owners.items() if module == root or module.startswith(root + ".")), None)

    def allowed(importer_study: str | None, target: str) -> bool:
        if not (target == "simrec_studies" or target.startswith("simrec_studies.")):
            return True                                               # simrec.*, numpy, ...
        own = owners.get(importer_study)
        return (any(target == s or target.startswith(s + ".") for s in SHARED_STUDY_MODULES)
                or (own is not None and (target == own or target.startswith(own + "."))))

    shared = [m for m in mods if any(m == s or m.startswith(s + ".") for s in SHARED_STUDY_MODULES)]
    bad = [str(imp) for imp in found
           if (study_of(imp.importer) is not None and not allowed(study_of(imp.importer), imp.module))
           or (imp.importer in shared and study_of(imp.module) is not None)]
    assert not bad, "studies that import another study (or a module they may not share):\n" + "\n".join(bad)


def test_f_simrec_never_imports_the_studies(scanned):
    _, found, _ = scanned
    bad = [str(imp) for imp in found if (imp.importer == "simrec" or imp.importer.startswith("simrec."))
           and (imp.module == "simrec_studies" or imp.module.startswith("simrec_studies."))]
    assert not bad, "the library imports the studies:\n" + "\n".join(bad)
    for path in (ROOT / "simrec").rglob("*.py"):                      # nor names them in an import string
        text = path.read_text(encoding="utf-8")
        assert "import simrec_studies" not in text and "from simrec_studies" not in text, path

"""simrec: simulation and off-policy evaluation for top-n recommendation.

Offline metrics and estimators measured against a simulated world whose truth is known.
See README.md and docs/design.md for the definitions.

Submodules are imported on first access (PEP 562), so ``import simrec`` stays cheap (no JAX, no
numpy) and ``simrec.metrics`` works without importing ``simrec.metrics`` first.
"""
import importlib as _importlib

__version__ = "0.1.0"

#: the public submodules, imported on first attribute access
SUBMODULES = ("cli", "codeversion", "config", "data", "datafiles", "executor", "feed", "metrics", "missing", "models",
              "obp", "ope", "output", "procedural", "provenance", "records", "reporting", "runner", "sharding", "stats",
              "validate", "world")


def __getattr__(name: str):
    if name in SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")    # also binds it on the package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))

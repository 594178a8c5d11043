"""Studies: thin compositions of the simrec library, one module per study.

Each study module defines ``STUDY`` (a `simrec.runner.Study`); each benchmark module defines
``main(argv) -> int``. Register new ones here; the CLI (`simrec list`, `simrec run`,
`simrec bench`) reads these tables.
"""
import importlib

#: study name -> module defining STUDY, in the order `simrec run all` runs them
STUDIES = {
    "correlation": "studies.correlation",
    "sensitivity": "studies.sensitivity",
    "unbiasedness": "studies.unbiasedness",
    "counterexample": "studies.counterexample",
    "opt_adg": "studies.opt_adg",
    "valid_vs_test": "studies.valid_vs_test",
    "disagreement": "studies.disagreement",
    "protocols": "studies.protocols",
    "fold_in": "studies.fold_in",
}

#: benchmark name -> module defining main(argv)
BENCHES = {
    "metrics": "studies.bench_metrics",
    "feed": "studies.bench_feed",
    "opt_adg": "studies.bench_opt_adg",
}


def load_study(name: str):
    """The `Study` registered under ``name`` (KeyError if unknown)."""
    return importlib.import_module(STUDIES[name]).STUDY


def load_bench(name: str):
    return importlib.import_module(BENCHES[name]).main

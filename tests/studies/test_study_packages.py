"""Every study package keeps its report out of its code version: the closure that `simrec.runner`
hashes into each cell's address is the compute side (the package's ``__init__`` and ``compute``,
`simrec_studies.common` and the library), never ``report.py``, the report kit or another study, so
an edit of a report re-renders from the cached cells. And no study module keeps state of its own:
shared state comes from ``setup``, keys from the runner, the plot style from the report kit. (The studies that compute with a shared
experiment, opt_adg and valid_vs_test, are checked in ``test_opt_adg.py``; ``test_runner.py`` edits
a package's report and checks that no cell address moves.)"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from importlib.metadata import entry_points

import pytest

from simrec import runner

SHARED_EXPERIMENT = ("opt_adg", "valid_vs_test")
PACKAGES = sorted(entry.name for entry in entry_points(group="simrec.studies")
                  if entry.name not in SHARED_EXPERIMENT
                  and importlib.util.find_spec(f"simrec_studies.{entry.name}").submodule_search_locations)

#: what a study's compute side must reach (the shared modules it computes with), and what only its
#: report may import
COMPUTES_WITH = {"assumptions": {"simrec_studies.common.comparison", "simrec_studies.common.scenarios"},
                 "coat": {"simrec_studies.common.rated", "simrec.models.tuning"},
                 "correlation": {"simrec_studies.common.table2", "simrec_studies.common.table2_estimates",
                                 "simrec_studies.common.scenarios", "simrec.ope.registry"},
                 "position_bias": {"simrec_studies.common.differences", "simrec.ope.registry"},
                 "protocols": {"simrec_studies.common.rated", "simrec.models.tuning"},
                 "regimes": {"simrec_studies.common.scenarios", "simrec_studies.common.table2_estimates",
                             "simrec.ope.registry"},
                 "sensitivity": {"simrec_studies.common.differences", "simrec.ope.registry"}}
REPORT_ONLY = {"regimes": {"simrec_studies.common.table2"}}

#: no memo caches, no key round trips, no global plot style, in any module of a study or of common/
NEVER_WRITTEN = ("lru_cache", "functools.cache", "wrap_key_data", "key_id", "set_theme")
#: stricter for some studies (their prose never needs these words)
ALSO_NEVER = {"assumptions": ("global ",), "position_bias": ("global ", "plt.subplots")}
STUDY_MODULES = sorted(
    {f"simrec_studies.{entry.name}" for entry in entry_points(group="simrec.studies")}
    | {f"simrec_studies.{entry.name}.{sub.name}" for entry in entry_points(group="simrec.studies")
       if importlib.util.find_spec(f"simrec_studies.{entry.name}").submodule_search_locations
       for sub in pkgutil.iter_modules(importlib.util.find_spec(f"simrec_studies.{entry.name}").submodule_search_locations)}
    | {f"simrec_studies.common.{sub.name}" for sub in pkgutil.iter_modules(
        importlib.util.find_spec("simrec_studies.common").submodule_search_locations)})


def test_the_converted_studies_are_packages():
    assert {"assumptions", "coat", "correlation", "disagreement", "fold_in", "open_bandit", "position_bias",
            "protocols", "regimes", "sensitivity"} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_a_report_only_edit_changes_no_cell_address(name):
    study = importlib.import_module(f"simrec_studies.{name}").STUDY
    package = f"simrec_studies.{name}"
    assert study.module == f"{package}.compute"
    assert runner.report_module(study) == f"{package}.report"
    closure = set(runner.module_closure(study.module, ("simrec_studies", "simrec"), [runner.report_module(study)]))
    assert {package, f"{package}.compute", *COMPUTES_WITH.get(name, ())} <= closure
    assert not {f"{package}.report", "simrec.reporting", *REPORT_ONLY.get(name, ())} & closure
    assert not [module for module in closure if module.startswith("simrec_studies.")
                and module.split(".")[1] not in (name, "common")]


@pytest.mark.parametrize("name", STUDY_MODULES)
def test_no_module_level_state(name):
    module = importlib.import_module(name)
    assert not [key for key, value in vars(module).items() if hasattr(value, "cache_info")]
    source = inspect.getsource(module)
    study = name.split(".")[1]
    for banned in NEVER_WRITTEN + ALSO_NEVER.get(study, ()):
        assert banned not in source, banned

"""The package `simrec` itself: cheap to import, submodules on first access (PEP 562)."""
import importlib
import pkgutil
import subprocess
import sys

import pytest

import simrec


def test_import_simrec_imports_neither_jax_nor_numpy():
    code = "import simrec, sys; assert 'jax' not in sys.modules and 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_submodules_are_every_public_module_of_the_package():
    found = {m.name for m in pkgutil.iter_modules(simrec.__path__) if not m.name.startswith("_")}
    assert set(simrec.SUBMODULES) == found


def test_attribute_access_imports_the_submodule_on_first_use():
    code = ("import simrec, sys; assert 'simrec.stats' not in sys.modules; "
            "m = simrec.stats; assert sys.modules['simrec.stats'] is m and m.__name__ == 'simrec.stats'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", simrec.SUBMODULES)
def test_every_submodule_is_the_imported_module(name):
    assert getattr(simrec, name) is importlib.import_module(f"simrec.{name}")


def test_unknown_attribute_is_the_usual_attribute_error():
    with pytest.raises(AttributeError, match=r"^module 'simrec' has no attribute 'nonexistent'$"):
        simrec.nonexistent
    assert not hasattr(simrec, "nonexistent")


def test_dir_lists_the_submodules_and_the_version():
    listed = dir(simrec)
    assert set(simrec.SUBMODULES) <= set(listed) and "__version__" in listed
    assert simrec.__version__ == "0.1.0"

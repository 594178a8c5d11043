"""Settings of every process of a test session: the pytest-xdist workers and the subprocesses the
tests start (CLI runs, multi-device and multi-process runs, benchmarks) inherit them through the
environment, which is why they are set here, before JAX is imported.

About half of the suite's CPU time is XLA compiling many small programs that then run for
milliseconds, so the session

* compiles at LLVM optimisation level 0 (``XLA_FLAGS``; the same programs, less optimised
  machine code; every comparison in the suite is between runs under the same flags or against a
  tolerance), unless ``XLA_FLAGS`` is already set: set it (even to ``""``) to test the fully
  optimised build;
* shares one persistent compilation cache (``JAX_COMPILATION_CACHE_DIR``, a fresh temporary folder
  removed at the end unless set beforehand), so a program compiled by one worker or subprocess is
  read back by the others;
* empties each worker's in-memory JAX caches after every test module (`_jax_caches_per_module`):
  measured on the 2-core machine, a worker's resident memory then peaks at 1.3 GB instead of 3.9
  GB, and the suite takes 470 s instead of 540 s;
* caps glibc's malloc arenas at two per process (``MALLOC_ARENA_MAX``, unless set): XLA's many
  threads otherwise each keep an arena of freed memory. With it, and the sharding test's
  processes started two at a time, the summed memory (PSS) of every process of the session peaked
  at 2.8 GB instead of 3.9 GB.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import shutil
import tempfile

import pytest

FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"

os.environ.setdefault("XLA_FLAGS", FAST_COMPILE)
os.environ.setdefault("MALLOC_ARENA_MAX", "2")
#: The cache folder this process made: set in the first process of the session (the xdist
#: controller, or the only one); its workers inherit the variable and so make none.
OWN_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    OWN_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="simrec-tests-xla-")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")


@pytest.fixture(autouse=True, scope="module")
def _jax_caches_per_module():
    """Each test module starts from empty in-memory JAX caches: a worker runs many modules, and
    without this it keeps every program it compiled, growing past 2 GB; a later module that needs
    one again reads it back from the shared persistent cache instead of compiling it. The memory
    freed is then handed back to the system (``malloc_trim``), which glibc does not do by itself
    for memory freed in the middle of its heap."""
    yield
    import jax
    jax.clear_caches()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):     # glibc only: give the freed heap back
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def pytest_unconfigure(config):
    """The process that made the cache folder removes it."""
    if OWN_CACHE:
        shutil.rmtree(OWN_CACHE, ignore_errors=True)


#: The modules that take longest in all (``--durations`` of a full run on 2 cores), run first: the
#: workers (a module stays on one, ``--dist loadscope``) then end the session on short modules and
#: finish together, instead of one waiting for the other's last end-to-end run. The order within
#: each module is kept.
SLOW_FIRST = ("tests/test_sharding.py", "tests/studies/test_assumptions.py", "tests/models/test_models_training.py",
              "tests/studies/test_correlation.py", "tests/test_docs.py", "tests/test_runner.py",
              "tests/test_feed_policies.py", "tests/studies/test_sensitivity.py", "tests/test_cli.py",
              "tests/studies/test_opt_adg.py", "tests/studies/test_bench_scale.py", "tests/studies/test_fold_in.py",
              "tests/test_feed_sessions.py", "tests/studies/test_position_bias.py", "tests/test_feed_position_bias.py",
              "tests/studies/test_regimes.py", "tests/studies/test_arena.py", "tests/studies/test_coat.py",
              "tests/studies/test_protocols.py", "tests/test_ope_slate.py")


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))

"""Executors: study cells computed in threads or on a Dask cluster give byte-identical outputs to
the local loop, the driver caches each cell as it arrives (a killed run resumes), and bad
``--executor`` values are one-line errors."""
import json
import sys
import threading
from dataclasses import replace

import pytest

from simrec import cli, executor, runner
from tests.test_cli import toy_registry  # noqa: F401 - fixture
from tests.test_runner import CALLS, TOY, ToyConfig, _outputs, toy_compute, toy_setup


# --------------------------------------------------------------------------------------------
# Parsing and errors (no Dask needed)
# --------------------------------------------------------------------------------------------

def test_executor_strings_parse_to_specs():
    assert executor.parse_executor(None) == executor.ExecutorSpec("local")
    assert executor.parse_executor("local") == executor.ExecutorSpec("local")
    assert executor.parse_executor("local", 3) == executor.ExecutorSpec("local", None, 3)
    pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install 'simrec[cluster]')")
    assert executor.parse_executor("dask", 3) == executor.ExecutorSpec("dask", None, 3)
    assert executor.parse_executor("dask://sched.example:8786") == \
        executor.ExecutorSpec("dask", "tcp://sched.example:8786")
    assert executor.parse_executor("tls://[::1]:8786").address == "tls://[::1]:8786"


@pytest.mark.parametrize("argv, message", [
    (["--executor", "ray"], "--executor expects one of local, dask, dask://HOST:PORT or tcp://HOST:PORT; got 'ray'"),
    (["--executor", "tcp://host"], "--executor expects one of local, dask"),
    (["--executor", "dask://host:port"], "--executor expects one of local, dask"),
    (["--workers", "0", "--executor", "dask"], "--workers expects a positive integer, got 0"),
    (["--workers", "two"], "--workers expects a positive integer, got 'two'"),
])
def test_bad_executor_values_are_one_line_errors_before_any_cell(toy_registry, tmp_path, capsys,  # noqa: F811
                                                                  argv, message):
    assert cli.main(["run", "toy", "--out", str(tmp_path / "out"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert CALLS["n"] == 0 and not (tmp_path / "out").exists()


def test_a_missing_dask_names_the_extra_to_install(toy_registry, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "distributed", None)          # import distributed -> ImportError
    for where in ("dask", "tcp://127.0.0.1:8786"):
        assert cli.main(["run", "toy", "--out", str(tmp_path / "out"), "--quiet", "--executor", where]) == 2
        err = capsys.readouterr().err.strip()
        assert "pip install 'simrec[cluster]'" in err and len(err.splitlines()) == 1
    assert CALLS["n"] == 0


def test_the_local_executor_is_the_default_and_recorded(tmp_path):
    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["executor"] == {"kind": "local", "address": None, "workers": 1}


# --------------------------------------------------------------------------------------------
# Threads in this process
# --------------------------------------------------------------------------------------------

def test_cells_in_threads_give_the_sequential_outputs_and_cache(tmp_path):
    runner.run(TOY, ToyConfig(), seed=5, out=tmp_path / "one", cache_dir=tmp_path / "c1", progress=False)
    runner.run(TOY, ToyConfig(), seed=5, out=tmp_path / "three", cache_dir=tmp_path / "c3", progress=False,
               executor=executor.Local(3))
    assert _outputs(tmp_path / "one") == _outputs(tmp_path / "three")
    rows = [{p.name: json.loads(p.read_text())["rows"] for p in (tmp_path / c / "toy").glob("[0-9a-f]*.json")}
            for c in ("c1", "c3")]
    assert len(rows[0]) == 9 and rows[0] == rows[1]
    manifest = json.loads((tmp_path / "three" / "manifest.json").read_text())
    assert manifest["executor"] == {"kind": "local", "address": None, "workers": 3}


def _meeting_compute(key, config, cell, shared):
    """TOY's compute, after meeting another cell's thread (a cell computed alone times out) and
    checking that the run's model store is visible in this thread."""
    from simrec.models import tuning
    shared["meeting"].wait(timeout=60)
    assert tuning._store.get() is not None, "the worker thread does not see the run's model store"
    return toy_compute(key, config, cell, shared)


def _meeting_setup(key, config):
    return {**toy_setup(key, config), "meeting": threading.Barrier(2)}


MEETING = replace(TOY, name="toy_meeting", setup=_meeting_setup, compute=_meeting_compute, cache_setup=False,
                  cell_threads=2)


def test_a_study_declaring_cell_threads_computes_that_many_cells_at_once(tmp_path):
    for _ in range(2):                                  # computed, then re-rendered from the cache
        runner.run(MEETING, ToyConfig(rates=(0.1, 0.5), draws=2), out=tmp_path / "out", progress=False)
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["executor"]["workers"] == 2 and manifest["cells"]["total"] == 4
    assert manifest["cells"]["cached"] == 4
    assert "computing every cell took" in runner.write_results_index(tmp_path).read_text()
    assert "s of cell time, 2 cells at a time)" in runner.write_results_index(tmp_path).read_text()
    with pytest.raises(ValueError, match="cell_threads must be a positive integer, got 0"):
        replace(TOY, cell_threads=0)


def test_an_interrupted_threaded_run_keeps_the_finished_cells_and_resumes(tmp_path):
    CALLS.update(fail_after=4)
    with pytest.raises(runner.RunInterrupted):
        runner.run(TOY, ToyConfig(), out=tmp_path / "out", cache_dir=tmp_path / "c", progress=False,
                   executor=executor.Local(2))
    cached = len(list((tmp_path / "c" / "toy").glob("[0-9a-f]*.json")))
    assert cached <= 4 and not (tmp_path / "out").exists()      # the failed cell and those after it are not cached
    CALLS.update(n=0, fail_after=None)
    summary = runner.run(TOY, ToyConfig(), out=tmp_path / "out", cache_dir=tmp_path / "c", progress=False,
                         executor=executor.Local(2))
    assert (summary.cells_computed, summary.cells_cached) == (9 - cached, cached) and CALLS["n"] == 9 - cached
    runner.run(TOY, ToyConfig(), out=tmp_path / "clean", cache_dir=tmp_path / "c0", progress=False)
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "out")


# --------------------------------------------------------------------------------------------
# A real two-worker cluster on localhost
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    """The cluster `--executor dask --workers 2` starts (two single-threaded worker processes on
    localhost), started once for the tests below."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install 'simrec[cluster]')")
    ex = executor.open_executor(executor.parse_executor("dask", 2))
    ex.client                                                       # start it
    yield ex
    ex.close()


def test_a_study_on_the_cluster_matches_the_local_run_byte_for_byte(tmp_path, cluster):
    runner.run(TOY, ToyConfig(), seed=5, out=tmp_path / "local", cache_dir=tmp_path / "c1", progress=False)
    summary = runner.run(TOY, ToyConfig(), seed=5, out=tmp_path / "dask", cache_dir=tmp_path / "c2",
                         progress=False, executor=cluster)
    assert summary.cells_computed == 9
    assert _outputs(tmp_path / "local") == _outputs(tmp_path / "dask")
    manifest = json.loads((tmp_path / "dask" / "manifest.json").read_text())
    assert manifest["executor"] == {"kind": "dask", "address": cluster.client.scheduler.address,
                                    "workers": 2, "local_cluster": True, "setup": "scattered"}
    # the driver cached every cell, with the same rows as the local run's cache
    local = {p.name: json.loads(p.read_text())["rows"] for p in (tmp_path / "c1" / "toy").glob("[0-9a-f]*.json")}
    remote = {p.name: json.loads(p.read_text())["rows"] for p in (tmp_path / "c2" / "toy").glob("[0-9a-f]*.json")}
    assert len(local) == 9 and local == remote


class _StopAfter:
    """Wraps an executor; Ctrl-C on the driver after ``n`` cells have arrived."""

    def __init__(self, inner, n):
        self.inner, self.n = inner, n

    def map(self, *args):
        for got, result in enumerate(self.inner.map(*args)):
            if got == self.n:
                raise KeyboardInterrupt
            yield result

    def describe(self):
        return self.inner.describe()


def test_a_run_killed_on_the_cluster_resumes_with_only_the_missing_cells(tmp_path, cluster):
    runner.run(TOY, ToyConfig(), out=tmp_path / "clean", cache_dir=tmp_path / "c0", progress=False)
    with pytest.raises(runner.RunInterrupted) as stop:
        runner.run(TOY, ToyConfig(), out=tmp_path / "out", cache_dir=tmp_path / "c", progress=False,
                   executor=_StopAfter(cluster, 3))
    assert (stop.value.cached, stop.value.total) == (3, 9) and not (tmp_path / "out").exists()
    cache = tmp_path / "c" / "toy"
    before = {p: p.stat().st_mtime_ns for p in cache.glob("[0-9a-f]*.json")}
    assert len(before) == 3
    summary = runner.run(TOY, ToyConfig(), out=tmp_path / "out", cache_dir=tmp_path / "c",
                         progress=False, executor=cluster)
    assert (summary.cells_computed, summary.cells_cached) == (6, 3)
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())      # never rewritten
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "out")
    # and a local run now finds every cell cached: the cluster's cells have the local address
    CALLS.update(n=0)
    again = runner.run(TOY, ToyConfig(), out=tmp_path / "again", cache_dir=tmp_path / "c", progress=False)
    assert again.cells_computed == 0 and CALLS["n"] == 0


def _unpicklable_setup(key, config):
    """TOY's setup plus a lock: a setup result that cannot be pickled."""
    import jax
    return {"offset": float(jax.random.uniform(runner.shared_key(key, "world"))), "lock": threading.Lock()}


UNPICKLABLE = replace(TOY, name="toy_unpicklable", setup=_unpicklable_setup, cache_setup=False,
                      compute=toy_compute)


def test_a_setup_that_cannot_be_pickled_is_rebuilt_on_each_worker(tmp_path, cluster):
    runner.run(UNPICKLABLE, ToyConfig(), out=tmp_path / "local", cache_dir=tmp_path / "c1", progress=False)
    runner.run(UNPICKLABLE, ToyConfig(), out=tmp_path / "dask", cache_dir=tmp_path / "c2", progress=False,
               executor=cluster)
    assert _outputs(tmp_path / "local") == _outputs(tmp_path / "dask")
    manifest = json.loads((tmp_path / "dask" / "manifest.json").read_text())
    assert manifest["executor"]["setup"] == "rebuilt on each worker"


def test_cli_runs_a_real_smoke_study_on_a_local_two_worker_cluster(tmp_path, cluster, monkeypatch):
    """`simrec run counterexample --preset smoke --executor dask --workers 2` writes the same
    tables and records as the local run. (The CLI would start and stop its own cluster; here it
    gets the module's, started by the same code from the same spec, to keep the test short.)"""
    class Shared:
        map, describe = cluster.map, cluster.describe

        def close(self):
            pass

    def open_executor(spec):
        assert spec == cluster.spec == executor.ExecutorSpec("dask", None, 2)
        return Shared()

    base = ["run", "counterexample", "--preset", "smoke", "--quiet"]
    assert cli.main([*base, "--out", str(tmp_path / "a" / "local")]) == 0
    monkeypatch.setattr(executor, "open_executor", open_executor)
    assert cli.main([*base, "--out", str(tmp_path / "b" / "dask"), "--executor", "dask", "--workers", "2"]) == 0
    local, dask = _outputs(tmp_path / "a" / "local"), _outputs(tmp_path / "b" / "dask")
    assert len([f for f in local if f.startswith("table")]) >= 3 and local == dask
    manifest = json.loads((tmp_path / "b" / "dask" / "manifest.json").read_text())
    assert {k: manifest["executor"][k] for k in ("kind", "workers", "local_cluster")} == \
        {"kind": "dask", "workers": 2, "local_cluster": True}
    assert manifest["cells"]["computed"] == manifest["cells"]["total"] == 9


def test_cli_connects_to_a_running_scheduler(toy_registry, tmp_path, cluster, capsys):  # noqa: F811
    address = cluster.client.scheduler.address
    assert cli.main(["run", "toy", "--preset", "smoke", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert cli.main(["run", "toy", "--preset", "smoke", "--out", str(tmp_path / "b" / "out"), "--quiet",
                     "--executor", address.replace("tcp://", "dask://")]) == 0
    assert "3 cells computed, 0 cached" in capsys.readouterr().out.splitlines()[-1]
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b" / "out")
    manifest = json.loads((tmp_path / "b" / "out" / "manifest.json").read_text())
    assert manifest["executor"] == {"kind": "dask", "address": address, "workers": 2,
                                    "local_cluster": False, "setup": "scattered"}


def _tuple_setup(key, config):
    import jax
    return ({"offset": float(jax.random.uniform(runner.shared_key(key, "world")))},)


def _tuple_compute(key, config, cell, shared):
    assert type(shared) is tuple and len(shared) == 1, f"the setup arrived as {type(shared).__name__}"
    return toy_compute(key, config, cell, shared[0])


TUPLE = replace(TOY, name="toy_tuple", setup=_tuple_setup, compute=_tuple_compute, cache_setup=False)


def _bad_compute(key, config, cell, shared):
    return [{"rate": cell["rate"]}]


def test_a_setup_arrives_whole_and_worker_errors_reach_the_driver(tmp_path, cluster):
    runner.run(TUPLE, ToyConfig(draws=1), out=tmp_path / "a", cache_dir=tmp_path / "c", progress=False,
               executor=cluster)
    with pytest.raises(runner.RecordError, match="missing"):
        runner.run(replace(TOY, compute=_bad_compute), ToyConfig(draws=1), out=tmp_path / "b",
                   cache_dir=tmp_path / "c", progress=False, executor=cluster)
    assert not (tmp_path / "b").exists()

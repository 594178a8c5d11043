"""Where a study's cells are computed: in this process (``local``, the default) or on a Dask
distributed cluster (``dask``: a local cluster of worker processes, or an existing scheduler).

The runner (`simrec.runner.run`) keeps everything that must live in one place: the cell cache,
the output folder and its lock, the setup, the progress display and the order of the records.
An executor only maps a cell's computation over the cells that are not cached yet and hands each
result back as soon as it finishes, so the driver writes it to the cache at once (a killed run
resumes with the missing cells only). Cells are pure functions of ``(root key, config, cell,
shared)``, so where they run never changes a value: the records, and the tables built from them
in cell order, are byte-identical to a local run.

Dask distributed is an optional extra (``pip install 'simrec[cluster]'``); it is imported only
when a ``dask`` executor is used. The setup runs once on the driver and its result is shipped to
every worker once (``scatter(..., broadcast=True)``); a setup result that cannot be pickled is
instead rebuilt once on each worker (``setup`` is a pure function of the root key and config).

Executor strings (``simrec run STUDY --executor ...``):

* ``local``: compute cells in this process (the default): one after another, or ``workers``
  at a time in threads (default: the study's `simrec.runner.Study.cell_threads`). Threads pay
  where a cell is a long chain of small XLA programs (sampled-pair SGD with early stopping), which
  leaves a core idle between dispatches; cells share the setup and the model store, and each
  thread computes in a copy of the caller's context. A multi-host run computes one cell at a
  time (its collectives need the same order on every process);
* ``dask``: start a `distributed.LocalCluster` of ``workers`` single-threaded worker processes
  on this machine (default: one per core) for the duration of the command;
* ``dask://HOST:PORT``, ``tcp://HOST:PORT``, ``tls://HOST:PORT``: connect to a running Dask
  scheduler (e.g. started with ``dask scheduler`` / ``dask worker`` or dask-jobqueue under
  SLURM); its workers need the same simrec and study code installed as the driver.
"""
from __future__ import annotations

import contextvars
import logging
import os
import pickle
import re
import time
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Iterator, Sequence

__all__ = ["ExecutorError", "ExecutorSpec", "parse_executor", "Local", "DaskExecutor",
           "open_executor", "compute_cell", "EXECUTOR_FORMS", "INSTALL_HINT"]

EXECUTOR_FORMS = "local, dask, dask://HOST:PORT or tcp://HOST:PORT"
INSTALL_HINT = "pip install 'simrec[cluster]'"
#: XLA flags for worker processes: one intra-op thread each, so N workers on N cores do not run
#: N x N compute threads (measured in docs/guide/scaling-out.md); Dask's nanny already sets
#: OMP/MKL/OPENBLAS_NUM_THREADS=1 the same way
WORKER_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_ADDRESS = re.compile(r"^(dask|tcp|tls)://([A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$")


class ExecutorError(ValueError):
    """An unusable ``--executor`` / ``--workers`` value or a missing optional dependency."""


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed executor string. kind: ``"local"`` or ``"dask"``; address: the scheduler's
    ``tcp://``/``tls://`` address, None for a local cluster; workers: threads of ``local`` (None:
    the study's ``cell_threads``) or worker processes of a local cluster (None: one per core;
    always None for an existing scheduler)."""
    kind: str
    address: str | None = None
    workers: int | None = None


def parse_executor(text: str | None, workers: int | None = None) -> ExecutorSpec:
    """The `ExecutorSpec` of an ``--executor`` string, or `ExecutorError` naming the valid forms.

    Checks that ``distributed`` is importable for a ``dask`` executor (before any cell runs)."""
    value = "local" if text is None else str(text).strip()
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ExecutorError(f"--workers expects a positive integer, got {workers!r}")
    if value == "local":
        return ExecutorSpec("local", None, workers)
    if value == "dask":
        spec = ExecutorSpec("dask", None, workers)
    elif match := _ADDRESS.match(value):
        if workers is not None:
            raise ExecutorError(f"--workers applies only to a local cluster (--executor dask); "
                                f"the scheduler at {value} has its own workers")
        scheme = "tcp" if match.group(1) == "dask" else match.group(1)
        spec = ExecutorSpec("dask", f"{scheme}://{match.group(2)}:{match.group(3)}", None)
    else:
        raise ExecutorError(f"--executor expects one of {EXECUTOR_FORMS}; got {value!r}")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ExecutorError(f"--executor {value} needs Dask distributed, which is not installed; "
                            f"install it with: {INSTALL_HINT}") from None
    return spec


def compute_cell(study, seed: int, config, cell, shared) -> tuple[list, float]:
    """(checked rows, seconds) of one cell: ``study.compute`` under the run's root key
    ``jax.random.key(seed)``, its records validated by `simrec.records.check_records`. The unit
    of work of every executor; a pure function of its arguments."""
    import jax

    from simrec.records import check_records
    started = time.perf_counter()
    rows = check_records(study, cell, study.compute(jax.random.key(seed), config, cell, shared))
    return rows, time.perf_counter() - started


class Local:
    """Cells in this process: one after another in cell order, or ``threads`` at a time (None:
    the study's ``cell_threads``), handed back as each finishes. An interrupted or failed map
    cancels the cells not started and waits for the running ones (their rows are dropped)."""

    def __init__(self, threads: int | None = None):
        self.spec = ExecutorSpec("local", None, threads)
        self._used = threads or 1                  # the threads of the last map, for `describe`

    def map(self, study, seed: int, config, todo: Sequence[tuple[int, dict]], shared,
            setup_address: str) -> Iterator[tuple[int, list, float]]:
        import jax
        self._used = self.spec.workers or study.cell_threads
        threads = 1 if jax.process_count() > 1 else min(self._used, max(len(todo), 1))
        if threads == 1:
            for i, cell in todo:
                yield (i, *compute_cell(study, seed, config, cell, shared))
            return
        pool = ThreadPoolExecutor(threads, thread_name_prefix=f"simrec-{study.name}")
        try:
            futures = {pool.submit(contextvars.copy_context().run, compute_cell, study, seed, config, cell,
                                   shared): i for i, cell in todo}
            for future in as_completed(futures):
                yield (futures[future], *future.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def describe(self) -> dict:
        return {"kind": "local", "address": None, "workers": self._used}

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------
# Dask distributed
# --------------------------------------------------------------------------------------------

#: a worker's setup rebuilt from the root key when the driver's could not be pickled: one entry,
#: {setup address: shared}, per worker process (setups can be large)
_WORKER_SETUP: dict[str, Any] = {}


def _worker_setup(study, seed: int, config, address: str):
    if address not in _WORKER_SETUP:
        import jax
        _WORKER_SETUP.clear()
        _WORKER_SETUP[address] = study.setup(jax.random.key(seed), config)
    return _WORKER_SETUP[address]


def _compute_on_worker(study, seed: int, config, cell, shared, setup_address: str | None):
    if setup_address is not None:                  # the setup could not be shipped: rebuild it
        shared = _worker_setup(study, seed, config, setup_address)
    return compute_cell(study, seed, config, cell, shared)


def _worker_code_version(study) -> str:
    from simrec.codeversion import code_version
    return code_version(study)


def _picklable(value) -> bool:
    try:
        import cloudpickle
        cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:                             # noqa: BLE001 - any failure means "not shippable"
        return False
    return True


class DaskExecutor:
    """Cells as Dask futures on a `distributed` cluster, yielded as they finish.

    With ``address`` None a `LocalCluster` of ``workers`` processes (one thread each, the XLA
    flags of `WORKER_XLA_FLAGS`) is started on first use and stopped by `close`; otherwise the
    client connects to the scheduler at ``address``. Before a study's first cell the workers'
    code version of the study is checked against the driver's, so a worker with other code can
    never fill the cache."""

    def __init__(self, spec: ExecutorSpec):
        self.spec = spec
        self._client = self._cluster = None
        self._checked: set[str] = set()
        self.shared_mode: str | None = None       # "scattered" | "rebuilt on each worker"

    @property
    def client(self):
        if self._client is None:
            from distributed import Client, LocalCluster
            if self.spec.address is None:
                flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), WORKER_XLA_FLAGS]))
                self._cluster = LocalCluster(
                    n_workers=self.spec.workers or os.cpu_count() or 1, threads_per_worker=1,
                    processes=True, dashboard_address=":0", host="127.0.0.1",
                    env={"XLA_FLAGS": flags}, silence_logs=logging.ERROR)
                self._client = Client(self._cluster)
            else:
                try:
                    self._client = Client(self.spec.address, timeout="30s")
                except OSError as err:
                    raise ExecutorError(f"--executor {self.spec.address}: cannot reach the Dask "
                                        f"scheduler ({err}); start it with `dask scheduler`") from None
        return self._client

    def _check_code(self, study) -> None:
        from simrec.codeversion import code_version
        if study.name in self._checked:
            return
        mine = code_version(study)
        theirs = self.client.run(_worker_code_version, study)
        if not theirs:
            raise ExecutorError(f"the Dask scheduler at {self.client.scheduler.address} has no workers")
        other = {w: v for w, v in theirs.items() if v != mine}
        if other:
            raise ExecutorError(f"study {study.name!r}: Dask workers {', '.join(sorted(other))} run "
                                f"other code (version {sorted(set(other.values()))} vs {mine} here); "
                                f"install the same simrec and studies on every worker")
        self._checked.add(study.name)

    def map(self, study, seed: int, config, todo: Sequence[tuple[int, dict]], shared,
            setup_address: str) -> Iterator[tuple[int, list, float]]:
        from distributed import as_completed
        if not todo:
            return
        client = self.client
        self._check_code(study)
        rebuild = None
        if study.setup is None or _picklable(shared):
            self.shared_mode = "scattered" if study.setup is not None else None
            # a one-element list, so a dict/tuple setup ships whole (scatter splits containers)
            shipped = client.scatter([shared], broadcast=True, hash=False)[0] if shared is not None else None
        else:
            self.shared_mode, shipped, rebuild = "rebuilt on each worker", None, setup_address
        futures = {client.submit(_compute_on_worker, study, seed, config, cell, shipped, rebuild,
                                 key=f"simrec-{study.name}-{i}-{time.time_ns()}", pure=False): i
                   for i, cell in todo}
        try:
            for future in as_completed(futures):
                rows, seconds = future.result()
                yield futures[future], rows, seconds
                future.release()
        finally:                                   # interrupted or failed: stop the rest
            client.cancel(list(futures))
            if shipped is not None:
                client.cancel([shipped])

    def describe(self) -> dict:
        out = {"kind": "dask", "address": self.spec.address, "workers": self.spec.workers}
        if self._client is not None:
            info = self._client.scheduler_info()
            out.update(address=self._client.scheduler.address, workers=len(info.get("workers", {})),
                       local_cluster=self._cluster is not None,
                       setup=self.shared_mode)
        return out

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None


def open_executor(spec: ExecutorSpec | str | None) -> Local | DaskExecutor:
    """The executor of a spec (or an executor string): `Local` or a lazily connecting
    `DaskExecutor`; use it as ``ex = open_executor(...); try: ... finally: ex.close()``."""
    spec = parse_executor(spec) if not isinstance(spec, ExecutorSpec) else spec
    return Local(spec.workers) if spec.kind == "local" else DaskExecutor(spec)

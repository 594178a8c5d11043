"""simrec.sharding: one simulation on 1 device, on 3 emulated devices and on two processes gives the
same values.

The multi-device tests run subprocesses with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
(the pytest process keeps its single device), started together so that their compilations overlap
on the CI machine's two cores. Three devices divide neither the 1,000 sessions nor the blocks of
the sweeps: every sharded function meets uneven, padded shards.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simrec import runner, sharding
from tests import sharding_job

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "JAX_COORDINATOR")


def _env(devices: int) -> dict:
    """The test process's environment for a child with `devices` emulated CPU devices, without
    any cluster variables (which would start a multi-host run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLUSTER_PREFIXES)}
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env.update(XLA_FLAGS=flags, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def _start(args: list[str], devices: int, cwd: Path = ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=_env(devices), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(processes: list[subprocess.Popen], timeout: float = 600) -> list[str]:
    """The stdout of every process, after checking that each exited with status 0."""
    outputs = []
    try:
        for p in processes:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"{p.args} failed:\n{err[-3000:]}"
            outputs.append(out)
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    return outputs


def _report(stdout: str) -> dict | None:
    """The JSON line of `tests.sharding_job` (gloo may print its own lines), None if absent."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- in-process: flags, environment, one-device identities ------------------------------------

@pytest.mark.parametrize("flags, message", [
    (("127.0.0.1:1234", 2, None), "missing --process-id"),
    ((None, 2, 0), "missing --coordinator"),
    (("localhost", 2, 0), "HOST:PORT"),
    (("localhost:99999", 2, 0), "HOST:PORT"),
    (("localhost:1234", 0, 0), "--num-processes must be a positive integer"),
    (("localhost:1234", 2, 2), r"--process-id must be an integer in \[0, 1\]"),
])
def test_distributed_settings_reject_bad_flags(flags, message):
    with pytest.raises(sharding.DistributedError, match=message):
        sharding.distributed_settings(*flags, environ={})


def test_distributed_settings_from_flags_and_environment():
    assert sharding.distributed_settings("node1:1234", 4, 3, environ={}) == ("node1:1234", 4, 3)
    assert sharding.distributed_settings(environ={}) is None
    slurm = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_NTASKS": "2"}
    assert sharding.distributed_settings(environ=slurm) == "auto"
    assert sharding.distributed_settings(environ={**slurm, "SLURM_NTASKS": "1"}) is None   # one task
    with pytest.raises(sharding.DistributedError, match="JAX_COORDINATOR_ADDRESS=n1:1234 is set but not this "
                                                       "process's place in the run: add --num-processes N"):
        sharding.distributed_settings(environ={"JAX_COORDINATOR_ADDRESS": "n1:1234"})
    assert sharding.distributed_settings(None, 2, 1, environ={"JAX_COORDINATOR_ADDRESS": "n1:1234"}) == ("n1:1234", 2, 1)
    assert sharding.distributed_settings(environ={"OMPI_MCA_orte_hnp_uri": "x", "OMPI_COMM_WORLD_SIZE": "3"}) == "auto"


def test_helpers_are_the_identity_on_one_device():
    x = jnp.arange(10.0)
    assert sharding.num_devices() == 1 and sharding.is_writer()
    assert jax.jit(lambda a: sharding.collect(sharding.replicated(sharding.batch(a))))(x) is not None
    assert sharding.gather(x) is x
    blocks = jax.jit(lambda a: sharding.map_blocks(lambda b: (jnp.sum(b), b[0]), (a,), 3, 3))(x)
    np.testing.assert_array_equal(blocks[0], [3.0, 12.0, 21.0])
    np.testing.assert_array_equal(blocks[1], [0.0, 3.0, 6.0])
    assert sharding.devices_summary() == {"device_count": 1, "device_kind": ["cpu"], "processes": 1}


@pytest.mark.parametrize("shape", [(7,), (2, 5), (3, 4, 5), (1,), (2, 1024)])
def test_words_by_index_are_random_words(shape):
    """The multi-device form of `random_words` (each word from its own index, for sharding without
    communication) gives JAX's `threefry_2x32` words bit for bit, odd sizes included."""
    from jax.extend.random import threefry_2x32

    from simrec.feed import sampling
    data = jax.random.key_data(jax.random.key(11))
    expected = threefry_2x32(data, jax.lax.iota(jnp.uint32, int(np.prod(shape)))).reshape(shape)
    np.testing.assert_array_equal(sampling._words_by_index(data, shape), expected)


@dataclass(frozen=True)
class ToyConfig:
    size: int = 2


def test_non_writer_process_computes_but_writes_nothing(tmp_path, monkeypatch):
    """Process 1 of a multi-host run: it follows the writer's cache (every cell missing, as the
    broadcast says), computes the cells and writes neither cache nor output."""
    study = runner.Study(name="toy", description="toy", presets={"default": ToyConfig()},
                         cells=lambda config: [{"i": 0}, {"i": 1}],
                         compute=lambda key, config, cell, shared: [{"i": cell["i"], "v": 1.0}],
                         report=lambda config, records: runner.Report(), columns={"i": int, "v": float})
    computed = []
    monkeypatch.setattr(runner, "_hosts", lambda: runner._Hosts(processes=2, writer=False))
    monkeypatch.setattr(sharding, "broadcast_from_writer", lambda held: computed.append(held) or np.zeros(2, bool))
    summary = runner.run(study, ToyConfig(), out=tmp_path / "out", progress=False)
    assert summary.cells_computed == 2 and summary.files == ()
    assert not any(tmp_path.iterdir())


# ---- subprocesses: 1 device, 3 devices, two processes ------------------------------------------

def test_sharded_simulation_and_estimates_equal_single_device():
    """Log, exposure tables and Factors metrics bit-identical, sweep estimates bit-identical (their
    block sums are added in block order), on 1 device (this process), on 3 devices of one process,
    and on two `jax.distributed` processes on localhost with 2 devices each (4 devices: sharding
    within and across processes). The 3-device run goes first, beside this process's own, and the
    two processes that need each other after it: at most three JAX processes at once."""
    port = _free_port()
    job = ["-m", "tests.sharding_job"]
    started = [_start(job, 3)]
    try:
        one = sharding_job.report()
    finally:
        runs = _finish(started)
    runs += _finish([_start(job + [f"127.0.0.1:{port}", "2", "0"], 2),
                     _start(job + [f"127.0.0.1:{port}", "2", "1"], 2)])
    three, distributed, other = (_report(r) for r in runs)
    assert other is None                                  # only process 0 reports
    assert (one["devices"], three["devices"], distributed["devices"], distributed["processes"]) == (1, 3, 4, 2)
    for key in ("log", "exposure", "metrics", "dcg", "dr"):
        assert one[key] == three[key] == distributed[key], key


def test_cli_tables_byte_identical_on_1_and_3_devices(tmp_path):
    """`simrec run counterexample --preset smoke` on 1 and on 3 devices writes byte-identical tables
    and records, and each manifest names its machine (the numerics of the sharded simulation,
    exposures, metrics and sweeps on 1, 3 and 2 x 2 devices are the test above; this one is the
    runner's path, with the study that costs least to compile)."""
    outs = {n: tmp_path / f"d{n}" / "out" for n in (1, 3)}
    _finish([_start(["-m", "simrec", "run", "counterexample", "--preset", "smoke", "--out", str(outs[n]),
                     "--quiet"], n) for n in outs])
    files = sorted(p.name for p in outs[1].iterdir())
    assert files == sorted(p.name for p in outs[3].iterdir()) and "records.csv" in files
    for name in files:
        if name != "manifest.json":
            assert (outs[1] / name).read_bytes() == (outs[3] / name).read_bytes(), name
    machines = [json.loads((outs[n] / "manifest.json").read_text())["machine"] for n in (1, 3)]
    assert [m["device_count"] for m in machines] == [1, 3]
    assert [m["processes"] for m in machines] == [1, 1] and machines[0]["device_kind"] == ["cpu"]


# ---- the processes of a run: who is missing, and the same command everywhere -------------------

def _one_line_error(proc: subprocess.Popen, timeout: float = 300) -> str:
    """The single stderr line of a process that must stop with status 2 and print nothing else."""
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in err.splitlines() if line.startswith("simrec: error:")]
    assert proc.returncode == 2, err[-3000:]
    assert len(lines) == 1 and "Traceback" not in err and out == "", (out, err[-3000:])
    return lines[0]


def test_processes_started_with_different_seeds_stop_with_one_line_each(tmp_path):
    """Two processes of one run, the second with another --seed: before any cell both stop with the
    same one-line error naming the field (and gloo's messages are not on stdout)."""
    port = _free_port()
    command = ["-m", "simrec", "run", "counterexample", "--preset", "smoke", "--out", str(tmp_path / "out"),
               "--quiet", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--peer-timeout", "120"]
    first, second = (_start(command + ["--process-id", "0"], 1),
                     _start(command + ["--process-id", "1", "--seed", "1"], 1))
    try:
        messages = [_one_line_error(p) for p in (first, second)]
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
    for message in messages:
        assert "process 1 differs in seed" in message and "same command" in message
    assert not (tmp_path / "out").exists()


def test_a_missing_process_is_named_and_the_wait_times_out_in_one_line(tmp_path):
    port = _free_port()
    alone = _start(["-m", "simrec", "run", "counterexample", "--preset", "smoke", "--out", str(tmp_path / "out"),
                    "--coordinator", f"127.0.0.1:{port}", "--num-processes", "3", "--process-id", "0",
                    "--peer-timeout", "3"], 1)
    message = _one_line_error(alone, timeout=120)
    assert "timed out after 3 s waiting for process(es) 1, 2 of 3" in message and "--peer-timeout" in message
    late = _start(["-m", "simrec", "run", "counterexample", "--coordinator", f"127.0.0.1:{_free_port()}",
                   "--num-processes", "2", "--process-id", "1", "--peer-timeout", "2"], 1)
    message = _one_line_error(late, timeout=120)
    assert "process 0 did not answer" in message and "--process-id 0" in message


def test_processes_that_disagree_on_the_count_stop_in_one_line():
    port = _free_port()
    host = _start(["-c", f"from simrec import sharding; sharding.rendezvous('127.0.0.1:{port}', 2, 0, timeout=60)"], 1)
    peer = _start(["-c", f"from simrec import sharding; sharding.rendezvous('127.0.0.1:{port}', 3, 1, timeout=60)"], 1)
    for p in (host, peer):
        _, err = p.communicate(timeout=120)
        assert p.returncode != 0 and "process 1 was started with --num-processes 3, process 0 with 2" in err

"""One simulation on many devices and many hosts: the batch axis over a `jax.sharding.Mesh`.

simrec's work is a batch of independent units (sessions of a log, contexts of an exposure table,
trajectories of an estimate, relevant pairs of a metric). Its jitted functions mark that axis with
`batch`, which shards it over a one-axis mesh of every device (`mesh`, axis ``"batch"``); XLA
partitions the work and inserts the collectives. Nothing is drawn per device: every random value
is a function of the key and the global index (JAX's partitionable Threefry, and simrec's own
`random_words` counters), so a key gives the same values on 1, 2 or 8 devices. Reductions that
would change with the device count (the estimator sweeps) sum fixed blocks of rows on whichever
device holds them and add the block sums in block order (`fold_blocks`), so they are bit-identical too.

A batch that the device count does not divide is padded by XLA (uneven shards); on one device
every helper is the identity, so single-device results are the code's plain results.

Many hosts: `initialize` starts `jax.distributed` from flags (coordinator, process count and id)
or from a cluster's environment (SLURM, Open MPI, or ``JAX_COORDINATOR_ADDRESS`` with the flags
for count and id); before JAX connects, the processes meet at the coordinator's address
(`rendezvous`), so that a missing process is named and the wait ends with one line after a
timeout. The mesh then spans every process's devices, each process computes the shards on its
own devices, and `collect` gathers a jitted function's result onto every process (so host code
reads it as before); only process 0 (`is_writer`) writes, and `agree` checks before any work that
every process runs the same command. CPU processes exchange data with gloo (JAX's default CPU
collectives), whose messages go to stderr.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import time
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["AXIS", "mesh", "num_devices", "batch", "replicated", "collect", "gather", "map_blocks", "fold_blocks",
           "devices_summary", "DistributedError", "distributed_settings", "initialize", "is_writer",
           "broadcast_from_writer", "rendezvous", "agree", "DEFAULT_PEER_TIMEOUT"]

#: the name of the mesh axis that the batch (sessions, contexts, trajectories, pairs) is split over
AXIS = "batch"


def mesh() -> Mesh:
    """The one-axis mesh ("batch") over every device of every process, in `jax.devices()` order."""
    return Mesh(np.asarray(jax.devices()), (AXIS,))


def num_devices() -> int:
    """Devices the batch axis is split over (all of them, every process's)."""
    return jax.device_count()


def batch(x: jax.Array, axis: int = 0) -> jax.Array:
    """Inside jit: ask XLA to split `x` along `axis` over the mesh (`jax.lax.with_sharding_constraint`;
    an axis the device count does not divide gets uneven, padded shards). The identity on one device."""
    if num_devices() == 1:
        return x
    spec = PartitionSpec(*([None] * axis + [AXIS]))
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh(), spec))


def replicated(tree):
    """Inside jit: keep every leaf of `tree` whole on every device, so that a reduction over it
    runs in one piece, in the same order as on one device. The identity on one device."""
    if num_devices() == 1:
        return tree
    whole = NamedSharding(mesh(), PartitionSpec())
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, whole), tree)


def collect(tree):
    """Inside jit: make every leaf of `tree` whole on every process (replicated), so that host code
    can read a result computed on many hosts. The identity in a single process (a sharded array
    there is already readable, and replicating it would copy it to every device)."""
    return tree if jax.process_count() == 1 else replicated(tree)


def gather(tree):
    """Outside jit: every leaf of `tree` that spans several devices as one ordinary array on the
    default device (through the host), so that the code downstream of a sharded function runs the
    single-device program and gives single-device values bit for bit. The identity on one device."""
    if num_devices() == 1:
        return tree
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, jax.Array)
                        and len(x.sharding.device_set) > 1 else x, tree)


def map_blocks(fn: Callable, arrays, block_rows: int, num_blocks: int):
    """Inside jit: ``fn(*block)`` for the first `num_blocks` blocks of `block_rows` rows of
    `arrays` (a tuple, each [>= num_blocks * block_rows, ...]), one block after another on
    whichever device holds it; returns the results stacked [num_blocks, ...]. With several devices
    the blocks are padded with zero blocks to a multiple of the device count, split over the mesh
    (`jax.shard_map`) and the padding's results dropped; a block's result does not depend on the
    device count, so adding them in block order gives a device-independent total. On one device
    the blocks are sliced in place (no copy of the arrays)."""
    devices = num_devices()
    if devices == 1:
        return jax.lax.map(lambda b: fn(*(jax.lax.dynamic_slice_in_dim(a, b * block_rows, block_rows)
                                          for a in arrays)), jnp.arange(num_blocks))
    pad = -num_blocks % devices

    def blocked(a):
        whole = a if a.shape[0] == num_blocks * block_rows else a[:num_blocks * block_rows]
        whole = whole.reshape(num_blocks, block_rows, *a.shape[1:])
        return jnp.concatenate([whole, jnp.zeros((pad,) + whole.shape[1:], a.dtype)]) if pad else whole

    spec = PartitionSpec(AXIS)
    per_device = jax.shard_map(lambda *local: jax.lax.map(lambda block: fn(*block), local), mesh=mesh(),
                               in_specs=spec, out_specs=spec, check_vma=False)
    return jax.tree.map(lambda r: r[:num_blocks], per_device(*map(blocked, arrays)))


def fold_blocks(fn: Callable, combine: Callable, init, arrays, block_rows: int, num_blocks: int):
    """Inside jit: ``combine(... combine(combine(init, fn(*block 0)), fn(*block 1)) ...)`` over the
    first `num_blocks` blocks of `block_rows` rows of `arrays` (as `map_blocks`), in block order.
    On one device block b's ``fn`` runs inside the loop (nothing is stored); on several the blocks'
    results are computed where the blocks live (`map_blocks`) and then combined in the same order,
    so the total is bit-identical on any number of devices."""
    if num_devices() == 1:
        return jax.lax.fori_loop(0, num_blocks, lambda b, carry: combine(carry, fn(*(
            jax.lax.dynamic_slice_in_dim(a, b * block_rows, block_rows) for a in arrays))), init)
    results = map_blocks(fn, arrays, block_rows, num_blocks)
    return jax.lax.fori_loop(0, num_blocks, lambda b, carry: combine(carry, jax.tree.map(lambda r: r[b], results)),
                             init)


def devices_summary() -> dict:
    """What a run computed on, for its manifest: the device count, their kinds (e.g. ["cpu"],
    ["NVIDIA H100 80GB HBM3"]) and the number of processes."""
    devices = jax.devices()
    return {"device_count": len(devices), "device_kind": sorted({d.device_kind for d in devices}),
            "processes": jax.process_count()}


# --------------------------------------------------------------------------------------------
# Many hosts
# --------------------------------------------------------------------------------------------

class DistributedError(ValueError):
    """Inconsistent multi-host settings (flags or environment)."""


#: seconds the processes of a multi-host run wait for each other before giving up
DEFAULT_PEER_TIMEOUT = 300.0


def distributed_settings(coordinator: str | None = None, num_processes: int | None = None,
                         process_id: int | None = None, environ: Mapping[str, str] | None = None):
    """The settings of a multi-host run: ``None`` for a single process, ``"auto"`` when a cluster's
    environment describes more than one process (SLURM with SLURM_NTASKS > 1, or Open MPI launched
    by mpirun with OMPI_COMM_WORLD_SIZE > 1; JAX reads the rest from it), else ``(coordinator
    "host:port", num_processes, process_id)`` from the flags (the coordinator may come from
    ``JAX_COORDINATOR_ADDRESS`` instead of its flag). Raises `DistributedError` naming the flag to
    fix when the settings are incomplete or out of range."""
    env = os.environ if environ is None else environ
    given = {"--coordinator": coordinator, "--num-processes": num_processes, "--process-id": process_id}
    if all(v is None for v in given.values()):
        slurm = "SLURM_JOB_ID" in env and "SLURM_STEP_NODELIST" in env and int(env.get("SLURM_NTASKS", "1")) > 1
        ompi = "OMPI_MCA_orte_hnp_uri" in env and int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1
        if slurm or ompi:
            return "auto"
        if env.get("JAX_COORDINATOR_ADDRESS"):
            raise DistributedError(f"JAX_COORDINATOR_ADDRESS={env['JAX_COORDINATOR_ADDRESS']} is set but "
                                   f"not this process's place in the run: add --num-processes N and "
                                   f"--process-id I, or unset JAX_COORDINATOR_ADDRESS for a one-process run")
        return None
    if coordinator is None and env.get("JAX_COORDINATOR_ADDRESS"):
        coordinator = given["--coordinator"] = env["JAX_COORDINATOR_ADDRESS"]
    missing = [flag for flag, v in given.items() if v is None]
    if missing:
        raise DistributedError(f"a multi-host run needs --coordinator HOST:PORT, --num-processes N and "
                               f"--process-id I together; missing {', '.join(missing)}")
    host, sep, port = coordinator.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"--coordinator must be HOST:PORT (the address of process 0, e.g. "
                               f"node1:12345), got {coordinator!r}")
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise DistributedError(f"--num-processes must be a positive integer, got {num_processes!r}")
    if isinstance(process_id, bool) or not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise DistributedError(f"--process-id must be an integer in [0, {num_processes - 1}] "
                               f"(--num-processes {num_processes}), got {process_id!r}")
    return coordinator, num_processes, process_id


def _auto_settings(timeout: float):
    """(coordinator, count, id) of a cluster environment, as JAX would read them; None when JAX's
    cluster detection cannot tell (JAX then detects them itself, without the rendezvous)."""
    try:
        from jax._src import clusters
        address, count, index, _ = clusters.ClusterEnv.auto_detect_unset_distributed_params(
            None, None, None, None, None, int(timeout))
    except Exception:                       # noqa: BLE001 - private API: fall back to JAX's own start
        return None
    return (address, count, index) if None not in (address, count, index) else None


def _note(stream, text: str) -> None:
    stream.write(f"simrec: {text}\n")
    stream.flush()


def _read_line(conn: socket.socket, deadline: float) -> str:
    """One newline-terminated line from ``conn`` (empty when the peer closed first)."""
    data = b""
    while not data.endswith(b"\n"):
        conn.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = conn.recv(256)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _missing(joined, count: int) -> str:
    return ", ".join(str(i) for i in range(count) if i not in joined)


def _host_rendezvous(port: int, count: int, timeout: float, stream) -> None:
    """Process 0: accept every other process at ``port``; name the missing ones while waiting."""
    deadline, next_note = time.monotonic() + timeout, time.monotonic() + 5.0
    conns: dict[int, socket.socket] = {}
    try:
        server = socket.create_server(("", port))
    except OSError as err:
        raise DistributedError(f"process 0 cannot listen on port {port}: {err.strerror or err} (another "
                               f"process 0 of this run, or another program, holds it); choose another "
                               f"--coordinator port") from None
    with server:
        server.settimeout(0.5)
        try:
            while len(conns) < count - 1:
                now = time.monotonic()
                if now > deadline:
                    raise DistributedError(
                        f"timed out after {timeout:.0f} s waiting for process(es) {_missing({0, *conns}, count)} "
                        f"of {count} at port {port}; start each with the same command and its --process-id "
                        f"(or allow longer with --peer-timeout)")
                if now > next_note:
                    _note(stream, f"waiting for process(es) {_missing({0, *conns}, count)} of {count} to join "
                                  f"at port {port} ({deadline - now:.0f} s left)")
                    next_note = now + 10.0
                try:
                    conn, _ = server.accept()
                except (socket.timeout, TimeoutError):
                    continue
                try:
                    index, _, their_count = _read_line(conn, time.monotonic() + 5.0).partition(" ")
                except OSError:
                    conn.close()
                    continue
                if not index.isdigit():          # not a simrec process: ignore it
                    conn.close()
                    continue
                problem = (f"process {index} was started with --num-processes {their_count}, process 0 with {count}"
                           if their_count != str(count) else
                           f"two processes were started with --process-id {index}" if int(index) in conns else "")
                if problem:
                    conn.sendall(f"error {problem}\n".encode())
                    conn.close()
                    raise DistributedError(f"{problem}; start every process with the same command and its own "
                                           f"--process-id")
                conns[int(index)] = conn
            for conn in conns.values():
                conn.sendall(b"go\n")
            for conn in conns.values():       # the peers close first, so the port is free for JAX
                _read_line(conn, time.monotonic() + 10.0)
        except DistributedError as err:
            for conn in conns.values():
                with contextlib.suppress(OSError):
                    conn.sendall(f"error process 0 stopped: {err}\n".encode())
            raise
        finally:
            for conn in conns.values():
                conn.close()


def _join_rendezvous(host: str, port: int, count: int, index: int, timeout: float, stream) -> None:
    """Process ``index`` > 0: report to process 0 at ``host:port`` and wait for all to have joined."""
    deadline, next_note = time.monotonic() + timeout, time.monotonic() + 5.0
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=2.0)
            break
        except OSError:
            now = time.monotonic()
            if now > deadline:
                raise DistributedError(f"process 0 did not answer at {host}:{port} within {timeout:.0f} s; "
                                       f"start it with the same command and --process-id 0 (or allow longer "
                                       f"with --peer-timeout)") from None
            if now > next_note:
                _note(stream, f"waiting for process 0 at {host}:{port} ({deadline - now:.0f} s left)")
                next_note = now + 10.0
            time.sleep(0.25)
    with conn:
        conn.sendall(f"{index} {count}\n".encode())
        try:
            reply = _read_line(conn, deadline)
        except OSError:
            reply = ""
    if reply != "go":
        raise DistributedError(reply.removeprefix("error ") if reply.startswith("error ") else
                               f"process 0 at {host}:{port} did not start the run within {timeout:.0f} s "
                               f"(waiting for other processes); start every process with the same command")


def rendezvous(coordinator: str, num_processes: int, process_id: int, timeout: float = DEFAULT_PEER_TIMEOUT,
               stream=None) -> None:
    """Meet every process of a multi-host run at the coordinator's address before JAX connects:
    process 0 listens on its port until the other ``num_processes - 1`` have joined, printing the
    missing ones every 10 s on ``stream`` (stderr); the others connect and wait for its go. After
    ``timeout`` seconds, or when two processes disagree on the count or share an id, every process
    that is there raises `DistributedError` with one line saying who is missing or what differs."""
    stream = sys.stderr if stream is None else stream
    host, _, port = coordinator.rpartition(":")
    if num_processes == 1:
        return
    if process_id == 0:
        _host_rendezvous(int(port), num_processes, timeout, stream)
    else:
        _join_rendezvous(host, int(port), num_processes, process_id, timeout, stream)


def _stdout_to_stderr() -> None:
    """Send what native code prints on file descriptor 1 (gloo's connection messages) to stderr,
    keeping Python's ``sys.stdout`` on the original standard output."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(kept, "w", buffering=1, encoding=sys.stdout.encoding or "utf-8")


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, timeout: float = DEFAULT_PEER_TIMEOUT) -> bool:
    """Start `jax.distributed` for the settings of `distributed_settings` (flags, else the
    cluster's environment) after the `rendezvous` of every process (``timeout`` seconds); whether
    a multi-host run was started. Call it before any other JAX work; every process must call it.
    Raises `DistributedError` on bad flags, a missing process or a mismatched count."""
    settings = distributed_settings(coordinator, num_processes, process_id)
    if settings is None:
        return False
    if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < float("inf")):
        raise DistributedError(f"--peer-timeout must be a positive number of seconds, got {timeout!r}")
    if settings == "auto":
        settings = _auto_settings(timeout)
    if settings is None:
        jax.distributed.initialize(initialization_timeout=int(timeout))
    else:
        address, count, index = settings
        rendezvous(address, count, index, timeout)
        jax.distributed.initialize(coordinator_address=address, num_processes=count, process_id=index,
                                   initialization_timeout=max(int(timeout), 1))
    _stdout_to_stderr()
    return True


def agree(fields: Mapping[str, str]) -> None:
    """Check that every process of a multi-host run has the same ``fields`` (name -> canonical
    text: study, preset, config, seed, code version, data digests), before any work; every process
    raises the same one-line `DistributedError` naming the fields and processes that differ. Does
    nothing in a single process."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils
    mine = np.array([int(hashlib.sha256(str(v).encode()).hexdigest()[:7], 16) for v in fields.values()], np.int32)
    everyone = np.asarray(multihost_utils.process_allgather(mine)).reshape(jax.process_count(), len(mine))
    differ = [(p, [name for name, a, b in zip(fields, everyone[0], everyone[p]) if a != b])
              for p in range(1, len(everyone))]
    differ = [(p, names) for p, names in differ if names]
    if differ:
        which = "; ".join(f"process {p} differs in {', '.join(names)}" for p, names in differ)
        raise DistributedError(f"the processes of this multi-host run were started with different commands "
                               f"({which}, from process 0); start every process with the same command, "
                               f"only --process-id differs")


def is_writer() -> bool:
    """Whether this process writes results: process 0 (the only process of a single-host run)."""
    return jax.process_index() == 0


def broadcast_from_writer(value: np.ndarray) -> np.ndarray:
    """Process 0's `value` (a numpy array of one shape and dtype on every process) on every
    process; `value` itself in a single-process run."""
    if jax.process_count() == 1:
        return np.asarray(value)
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.broadcast_one_to_all(np.asarray(value)))

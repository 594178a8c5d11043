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
or from a cluster's environment (SLURM, Open MPI, ``JAX_COORDINATOR_ADDRESS``); the mesh then
spans every process's devices, each process computes the shards on its own devices, and `collect`
gathers a jitted function's result onto every process (so host code reads it as before); only
process 0 (`is_writer`) writes. CPU processes exchange data with gloo (JAX's default CPU
collectives).
"""
from __future__ import annotations

import os
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["AXIS", "mesh", "num_devices", "batch", "replicated", "collect", "gather", "map_blocks", "fold_blocks",
           "devices_summary", "DistributedError", "distributed_settings", "initialize", "is_writer",
           "broadcast_from_writer"]

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


def distributed_settings(coordinator: str | None = None, num_processes: int | None = None,
                         process_id: int | None = None, environ: Mapping[str, str] | None = None):
    """The settings of a multi-host run: ``None`` for a single process, ``"auto"`` when a cluster's
    environment describes more than one process (SLURM with SLURM_NTASKS > 1, Open MPI launched by
    mpirun with OMPI_COMM_WORLD_SIZE > 1, or ``JAX_COORDINATOR_ADDRESS``; JAX reads the rest from
    it), else ``(coordinator "host:port", num_processes, process_id)`` from the flags. Raises
    `DistributedError` naming the flag to fix when the flags are incomplete or out of range."""
    given = {"--coordinator": coordinator, "--num-processes": num_processes, "--process-id": process_id}
    if all(v is None for v in given.values()):
        env = os.environ if environ is None else environ
        slurm = "SLURM_JOB_ID" in env and "SLURM_STEP_NODELIST" in env and int(env.get("SLURM_NTASKS", "1")) > 1
        ompi = "OMPI_MCA_orte_hnp_uri" in env and int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1
        return "auto" if slurm or ompi or env.get("JAX_COORDINATOR_ADDRESS") else None
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


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> bool:
    """Start `jax.distributed` for the settings of `distributed_settings` (flags, else the
    cluster's environment); whether a multi-host run was started. Call it before any other JAX
    work; every process must call it. Raises `DistributedError` on bad flags."""
    settings = distributed_settings(coordinator, num_processes, process_id)
    if settings is None:
        return False
    if settings == "auto":
        jax.distributed.initialize()
    else:
        address, count, index = settings
        jax.distributed.initialize(coordinator_address=address, num_processes=count, process_id=index)
    return True


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

"""Data parallelism by sharding annotations: the batch is split over a 'data' mesh axis, the
train state is replicated, and the unchanged `jax.jit` train step does the rest.

Why no pmap or explicit all-reduce: jit propagates input shardings through the program, so the
gradient of replicated parameters from a batch-sharded loss becomes an all-reduce that XLA
inserts itself, and the donated output state comes back replicated like the input state. The
same code runs on one CPU, eight GPUs or many hosts (after `maybe_initialize_distributed`).

    mesh = make_mesh()
    state = replicate(state, mesh)
    for step ...:
        state, metrics = train_step(state, shard_batch(batch, mesh), rng)
        metrics = jax.device_get(metrics)  # waiting for each step: see below

CPU caveat: with several forced host devices (`--xla_force_host_platform_device_count`) on a
machine with few cores, dispatching cross-device steps without waiting for them can deadlock
XLA's collective rendezvous; waiting for each step (reading the loss) avoids it.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"


def make_mesh(num_devices: Optional[int] = None) -> Mesh:
    """A 1-D mesh with axis 'data' over the first `num_devices` devices (default: all of them,
    across every process)."""
    devices = jax.devices()
    if num_devices is None:
        num_devices = len(devices)
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or not (
            1 <= num_devices <= len(devices)):
        raise ValueError(f"num_devices={num_devices!r} must be an integer in [1, {len(devices)}] "
                         f"(devices available: {len(devices)})")
    return Mesh(np.asarray(devices[:num_devices]), (DATA_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def shard_batch(batch: Any, mesh: Mesh) -> Any:
    """Every array of `batch` split along its first (batch) dimension over the 'data' axis.

    Single-process only: each array holds the global batch. (Multi-host input pipelines give
    each process its slice; build global arrays with `jax.make_array_from_process_local_data`.)
    """
    size = mesh.shape[DATA_AXIS]
    sharding = batch_sharding(mesh)

    def put(x):
        if np.ndim(x) == 0 or np.shape(x)[0] % size:
            raise ValueError(
                f"batch dimension {np.shape(x)[0] if np.ndim(x) else '(scalar)'} is not divisible "
                f"by the {size} devices of the 'data' mesh axis; use a batch size that is a "
                f"multiple of {size}")
        return jax.device_put(x, sharding)

    return jax.tree.map(put, batch)


def replicate(tree: Any, mesh: Mesh) -> Any:
    """A full copy of every array of `tree` on every device of `mesh`."""
    return jax.device_put(tree, replicated(mesh))


def maybe_initialize_distributed(coordinator: Optional[str] = None,
                                 num_processes: Optional[int] = None,
                                 process_id: Optional[int] = None, *,
                                 auto_detect: bool = False) -> bool:
    """Joins a multi-host (multi-process) run when one is configured; returns whether it did.

    Call it first, before anything touches JAX's devices. Either pass all three of
    `coordinator` ('host:port' of process 0), `num_processes` and `process_id`, or none of them:
    then it initializes only when `auto_detect` is set (JAX reads SLURM, Open MPI, Cloud TPU and
    GKE environments, and $JAX_COORDINATOR_ADDRESS) — otherwise this is a single-process run
    and nothing happens. After it, `jax.devices()` lists every process's devices and
    `make_mesh()` spans them all.
    """
    given = [coordinator, num_processes, process_id]
    if all(v is None for v in given):
        if not auto_detect:
            return False
        jax.distributed.initialize()
        return True
    if coordinator is None or num_processes is None or process_id is None:
        raise ValueError("multi-host needs all of coordinator ('host:port'), num_processes and "
                         f"process_id; got coordinator={coordinator!r}, "
                         f"num_processes={num_processes!r}, process_id={process_id!r}")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} must be in [0, num_processes={num_processes})")
    if num_processes == 1:
        return False
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)
    return True

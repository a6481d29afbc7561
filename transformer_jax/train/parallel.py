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

The trainer does this when there are several devices (`train.num_devices`, 0 = all: see
`data_mesh`), with the seeds of a study as a leading axis that stays whole (`axis=1`).

CPU caveat: with several forced host devices (`--xla_force_host_platform_device_count`) on a
machine with few cores, dispatching cross-device steps without waiting for them can deadlock
XLA's collective rendezvous; waiting for each step (reading the loss) avoids it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterator, NoReturn, Optional

import jax
import numpy as np
from absl import logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from transformer_jax.config import ConfigError

DATA_AXIS = "data"
HEARTBEAT_TIMEOUT_S = 30  # a process silent this long is dead (JAX's default: 100 s)
EXIT_LOST_PEER = 4  # main's exit status when another process of the run was lost


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


def data_mesh(num_devices: int, batch_size: int) -> Optional[Mesh]:
    """The trainer's mesh: `train.num_devices` (0 = all devices) checked against the batch size;
    None for a single device (the plain, unsharded program)."""
    available = len(jax.devices())
    count = num_devices or available
    if count > available:
        raise ConfigError(f"train.num_devices={num_devices} exceeds the {available} device(s) "
                          f"available ({jax.default_backend()}); use 0 (all) or 1..{available}")
    if batch_size % count:
        raise ConfigError(f"train.batch_size={batch_size} is not divisible by the {count} devices "
                          f"of the data-parallel mesh (train.num_devices={num_devices}); use a "
                          f"multiple of {count}")
    return make_mesh(count) if count > 1 else None


def batch_sharding(mesh: Mesh, axis: int = 0) -> NamedSharding:
    """Split along dimension `axis` (the batch) over the 'data' axis; the rest replicated."""
    return NamedSharding(mesh, P(*([None] * axis), DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def shard_batch(batch: Any, mesh: Mesh, axis: int = 0) -> Any:
    """Every array of `batch` split along dimension `axis` over the 'data' axis.

    Each process holds the whole global batch (ours is a pure function of seed and step) and
    contributes the rows of its own devices, so this is also right with several processes.
    """
    size = mesh.shape[DATA_AXIS]
    sharding = batch_sharding(mesh, axis)

    def put(x):
        x = np.asarray(x)
        if x.ndim <= axis or x.shape[axis] % size:
            raise ValueError(
                f"batch dimension {x.shape[axis] if x.ndim > axis else '(none)'} is not divisible "
                f"by the {size} devices of the 'data' mesh axis; use a batch size that is a "
                f"multiple of {size}")
        return _global_array(x, sharding)

    return jax.tree.map(put, batch)


def _global_array(x: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """One array over the mesh from the same host value on every process: each process fills
    its own devices' shards (so this works across hosts, unlike a plain device_put)."""
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def replicate(tree: Any, mesh: Mesh) -> Any:
    """A full copy of every array of `tree` on every device of `mesh`. Every process passes the
    same values (the trainer's initial or restored state, seeds' keys); PRNG keys stay keys."""
    sharding = replicated(mesh)

    def put(x):
        if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
            return jax.random.wrap_key_data(put(jax.random.key_data(x)), impl=jax.random.key_impl(x))
        return _global_array(np.asarray(x), sharding)

    return jax.tree.map(put, tree)


def maybe_initialize_distributed(coordinator: Optional[str] = None,
                                 num_processes: Optional[int] = None,
                                 process_id: Optional[int] = None, *,
                                 auto_detect: bool = False,
                                 heartbeat_timeout_s: int = HEARTBEAT_TIMEOUT_S) -> bool:
    """Joins a multi-host (multi-process) run when one is configured; returns whether it did.

    Call it first, before anything touches JAX's devices. Either pass all three of
    `coordinator` ('host:port' of process 0), `num_processes` and `process_id`, or none of them:
    then it initializes only when `auto_detect` is set (JAX reads SLURM, Open MPI, Cloud TPU and
    GKE environments, and $JAX_COORDINATOR_ADDRESS) — otherwise this is a single-process run
    and nothing happens. After it, `jax.devices()` lists every process's devices and
    `make_mesh()` spans them all. A process whose heartbeat stops for `heartbeat_timeout_s` is
    declared dead by the coordination service, which then ends every other process.
    """
    given = [coordinator, num_processes, process_id]
    # CPU processes need a collectives library for cross-process all-reduce (GPUs use NCCL,
    # TPUs their interconnect); this setting changes nothing else.
    enable_cpu_collectives = lambda: jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if all(v is None for v in given):
        if not auto_detect:
            return False
        enable_cpu_collectives()
        jax.distributed.initialize(heartbeat_timeout_seconds=heartbeat_timeout_s)
        return True
    if coordinator is None or num_processes is None or process_id is None:
        raise ConfigError("multi-host needs all of coordinator ('host:port'), num_processes and "
                          f"process_id; got coordinator={coordinator!r}, "
                          f"num_processes={num_processes!r}, process_id={process_id!r}")
    if not 0 <= process_id < num_processes:
        raise ConfigError(f"process_id={process_id} must be in [0, num_processes={num_processes})")
    if num_processes == 1:
        return False
    enable_cpu_collectives()
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id, heartbeat_timeout_seconds=heartbeat_timeout_s)
    return True


# --- What a cluster does to a multi-process run: preemption of one host, a dead peer ---------------


# A SIGTERM that reached this process while no run was training (a sweep worker between tasks,
# or still setting one up): the next run stops at its first chance. Only `remember_sigterm`
# sets it, and only in sweep workers; a process holds one such record by nature of signals.
_SIGTERM_BEFORE_TRAINING = threading.Event()


def remember_sigterm() -> None:
    """Makes SIGTERM only record a stop request while no run trains (sweep workers). A worker
    that died of it while idle would break the pool, and the sweep could then neither wait for
    the other workers' checkpoints nor exit (they would wait for work forever)."""
    signal.signal(signal.SIGTERM, lambda *_: _SIGTERM_BEFORE_TRAINING.set())


def sigterm_before_training() -> bool:
    return _SIGTERM_BEFORE_TRAINING.is_set()


@contextlib.contextmanager
def stop_requests() -> Iterator[Callable[[int], bool]]:
    """While active: `should_stop(call_index)`, asked once per compiled call by every process
    with the same consecutive indices, is True on the same call everywhere once any process got
    SIGTERM.

    Several processes: JAX's coordination-service preemption sync (its notifier catches SIGTERM
    itself, tells the service, and the service picks the first call index every process can
    still stop at); ~15 µs per call on CPU. One process: a SIGTERM flag. Our own Python handler
    would replace the notifier's, so it is installed only without the service.
    """
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        yield multihost_utils.reached_preemption_sync_point
        return
    requested = [sigterm_before_training()]
    previous = signal.signal(signal.SIGTERM, lambda *_: requested.__setitem__(0, True))
    try:
        yield lambda call_index: requested[0]
    finally:
        signal.signal(signal.SIGTERM, previous)


def lost_peers(timeout_s: float) -> Optional[list[int]]:
    """The processes the coordination service no longer hears from (it answers once a dead
    one's heartbeat timed out), or None if it gave no answer within `timeout_s`."""
    from jax._src import distributed

    answer: list = []
    everyone = list(range(jax.process_count()))
    asking = threading.Thread(
        target=lambda: answer.append(distributed.global_state.client.get_live_nodes(everyone)),
        daemon=True)
    asking.start()
    asking.join(timeout_s)
    return sorted(set(everyone) - set(answer[0])) if answer else None


def exit_lost_peer(error: BaseException, step: int) -> NoReturn:
    """A collective failed in a multi-process run: one line naming the lost process, then exit
    EXIT_LOST_PEER at once (a normal exit would wait in JAX's shutdown barrier for the dead)."""
    me, count = jax.process_index(), jax.process_count()
    others = [p for p in range(count) if p != me]
    lost = others if count == 2 else lost_peers(HEARTBEAT_TIMEOUT_S + 5) or others
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    line = (f"process {me}: lost process {', '.join(map(str, lost))} of {count} after step "
            f"{step} ({reason}); rerun the same command on every host to resume from the last "
            "complete checkpoint")
    logging.error(line)
    print(line, file=sys.stderr, flush=True)
    logging.flush()
    os._exit(EXIT_LOST_PEER)

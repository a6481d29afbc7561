"""`train_and_evaluate(config, workdir)`: one run, from a config to curves and checkpoints.

Everything that can be wrong with the input is checked before anything is compiled. A run
resumes from its newest checkpoint (the data order is a pure function of seed and step, so it
sees exactly the batches an uninterrupted run would), stops on NaN/inf and says so, and saves a
checkpoint on SIGTERM.

`train_replicas` reads top-down: restore (or start), then per compiled call: step, log,
evaluate, checkpoint; then finish. What one training carries from step to step is a `Training`.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from transformer_jax.config import TrainConfig
from transformer_jax.runtime import compile_memory
from transformer_jax.train import evaluation
from transformer_jax.train import parallel
from transformer_jax.train import programs as programs_lib
from transformer_jax.train import steps
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.train.checkpointing import Checkpointer
from transformer_jax.train.init import (Stream, init_model, init_params, init_states, seed_stream,
                                        seed_streams, take_replica)
from transformer_jax.train.run import (Run, build_run, check_config, check_differ_only_in_seed,
                                       describe_model, hparams)
from transformer_jax.train.summaries import NullWriter, SummaryWriter
from transformer_jax.train.terminal import Progress, duration
from transformer_jax.train.workdir import DIVERGED, FINISHED, PREEMPTED, has_ended

# What this module defines; the training layer's public names are transformer_jax.train's.
__all__ = ["Replica", "Training", "train_and_evaluate", "train_replicas"]

OnStart = Callable[[int, int], None]  # (the step training starts from, train.num_steps)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       extend_to: Optional[int] = None,
                       on_start: Optional[OnStart] = None) -> dict[str, Any]:
    """Trains (or resumes, or reports an already ended run); returns the run's final status.
    `extend_to`: continue the workdir's run up to this many steps (train.num_steps becomes it;
    workdir.prepare records the change and refuses any other). `on_start(step, num_steps)`:
    called before the first step this call trains, with the step it starts from (0, or the
    checkpoint's it resumes from); never for a run that had already ended."""
    if extend_to is not None:
        config = copy.deepcopy(config)
        config.train.num_steps = extend_to
    return train_replicas([config], [workdir], extend=extend_to is not None,
                          on_start=on_start)[0]


@dataclasses.dataclass
class Replica:
    """One run of a replicated training: its own workdir, checkpoints, curves and status."""

    config: ml_collections.ConfigDict
    run: Run
    workdir: str  # as given: the log lines name the run by it
    path: Path
    checkpoints: Checkpointer
    writer: Optional[SummaryWriter] = None
    last_finite: dict = dataclasses.field(default_factory=dict)
    result: dict = dataclasses.field(default_factory=dict)
    active: bool = True
    status: dict = dataclasses.field(default_factory=dict)  # as written to status.json


@dataclasses.dataclass
class Training:
    """What one training of replicas carries from call to call: the fixed parts (replicas,
    programs, devices) and the moving ones (the stacked state, the steps and calls done)."""

    replicas: list[Replica]
    cfg: TrainConfig
    fmt: str  # batch layout: 'encoder' or 'decoder'
    programs: programs_lib.Programs
    dropout_rngs: jax.Array
    mesh: Optional[Any]  # None: one device
    progress: Progress
    state: Any  # params, opt_state, step; leading replica axis
    done: int
    calls: int = 0
    # One replica's FLOPs per step, XLA's count of the one-step program (steps.flops_per_call),
    # logged as train/flops_per_step: nan until a one-step call has run (train.steps_per_call > 1
    # calls it only where a log, eval or checkpoint step falls between k-step calls)
    flops_per_step: float = math.nan

    @property
    def live(self) -> list[int]:
        """The replicas still training (not diverged)."""
        return [j for j, r in enumerate(self.replicas) if r.active]


def train_replicas(configs: Sequence[ml_collections.ConfigDict], workdirs: Sequence[str], *,
                   progress_bar: bool = True, extend: bool = False,
                   on_start: Optional[OnStart] = None) -> list[dict[str, Any]]:
    """Trains runs whose configs differ only in `seed` side by side, in one compiled program.

    Each run keeps its own workdir, checkpoints, curves and status, exactly as if trained alone;
    the step maps over a leading replica axis inside one program (`steps.over_replicas`: for
    small models on a CPU, three seeds cost little more than one). A diverging replica is stopped and recorded; the others
    go on. Returns each run's final status. progress_bar: a tqdm bar when stderr is a terminal.
    `on_start`: as train_and_evaluate's (replicas start at the same step; those whose
    checkpoints are of different steps train one by one, each calling it).
    """
    if len(configs) != len(workdirs) or not configs:
        raise ValueError("train_replicas needs one workdir per config")
    runs = [build_run(c) for c in configs]
    check_differ_only_in_seed(configs)
    mesh = parallel.data_mesh(runs[0].train.num_devices, runs[0].train.batch_size)  # None: 1 device
    paths = _prepare_workdirs(configs, workdirs, extend)
    statuses = [workdir_lib.read_status(p) for p in paths]
    todo = _still_to_train(runs, statuses, workdirs)
    if not todo:
        return statuses

    model_cfg, train_cfg = runs[todo[0]].model, runs[todo[0]].train
    built = programs_lib.for_training(model_cfg, train_cfg)
    fresh = built.init_states(jnp.asarray([runs[i].seed for i in todo], jnp.int32))  # [R, ...]
    replicas = [Replica(configs[i], runs[i], workdirs[i], paths[i],
                        Checkpointer(str(paths[i] / "checkpoints"),
                                     keep=train_cfg.keep_checkpoints))
                for i in todo]
    start, state = _restore_or_start(replicas, fresh)
    if start is None:  # interrupted between the replicas' saves: finish each alone
        for r in replicas:
            r.checkpoints.close()
        return [statuses[i] if i not in todo else
                train_replicas([configs[i]], [workdirs[i]], progress_bar=progress_bar,
                               on_start=on_start)[0]
                for i in range(len(configs))]
    _open_runs(replicas, start)
    if on_start is not None:
        on_start(start, train_cfg.num_steps)
    _log_what_trains(replicas, fresh["params"])
    training = _start_training(replicas, built, state, start, mesh, progress_bar)
    # SIGTERM to any process stops every process after the same call (parallel.stop_requests)
    with parallel.stop_requests() as should_stop, _lost_peer_exits(lambda: training.done):
        _train(training, should_stop)
        if training.done == train_cfg.num_steps:
            _finish(training)
    for r in replicas:
        r.checkpoints.close()
    training.progress.close()
    by_index = dict(zip(todo, replicas))
    return [by_index[i].status if i in by_index else statuses[i] for i in range(len(configs))]


def _still_to_train(runs: list[Run], statuses: list[Optional[dict]], workdirs: Sequence[str]
                    ) -> list[int]:
    """The indices of the runs that have not ended; logs the others."""
    todo = [i for i, s in enumerate(statuses) if not has_ended(s, runs[i].train.num_steps)]
    for i in sorted(set(range(len(runs))) - set(todo)):
        logging.info("run in %s already %s at step %d; nothing to do", workdirs[i],
                     statuses[i]["state"], statuses[i]["step"])
    return todo


# --- restore (or start) -------------------------------------------------------------------------

def _restore_or_start(replicas: list[Replica], fresh: dict) -> tuple[Optional[int], Any]:
    """(the step every replica resumes from, their stacked state): their newest checkpoints,
    stacked on the host, or `fresh` (step 0) when none has one. (None, None) when their newest
    checkpoints are of different steps."""
    one_replica = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), fresh)
    starts, restored_states = [], []
    for r in replicas:
        restored = r.checkpoints.restore(one_replica)
        start = 0
        if restored is not None:
            start, state, _ = restored
            restored_states.append(state)
            logging.info("resuming %s from step %d", r.workdir, start)
        starts.append(start)
    if len(set(starts)) > 1:
        return None, None
    if starts[0] == 0:
        return 0, fresh
    return starts[0], jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                                   *restored_states)


def _open_runs(replicas: list[Replica], start: int) -> None:
    """Each run's summary writer (one per run, on process 0), its HParams when it starts, the
    config change an --extend_to made at `start`, and its status: running."""
    for r in replicas:
        # Drop the events an interrupted process logged after its checkpoint: steps > start.
        r.writer = (SummaryWriter(str(r.path), purge_step=start + 1 if start else None)
                    if jax.process_index() == 0 else NullWriter())
        if start == 0:
            r.writer.hparams(hparams(r.config, r.run), metrics=["eval/loss", "eval/accuracy"])
        for change in workdir_lib.config_history(r.path):
            if change["step"] == start:
                r.writer.text(start, "config_change", json.dumps(change["change"]) + "; LR "
                              "schedule " + change["schedule"])
        _write_status(r.path, "running", start)


def _log_what_trains(replicas: list[Replica], stacked_params: dict) -> None:
    """One log line: the data, the model, its parameter count (per replica) and the seeds."""
    run = replicas[0].run
    count = sum(p.size // len(replicas) for p in jax.tree.leaves(stacked_params))
    logging.info("%s | %s | %d parameters | seeds %s", run.dataset.describe(),
                 describe_model(run.model), count, [r.run.seed for r in replicas])


def _start_training(replicas: list[Replica], built: programs_lib.Programs, state, start: int,
                    mesh, progress_bar: bool) -> Training:
    """The state placed on the devices (data parallel: on every one of them), each replica's
    dropout stream, and the progress clock started at `start`."""
    model_cfg, train_cfg = replicas[0].run.model, replicas[0].run.train
    if mesh is not None:  # data parallel: state on every device, each batch split over them
        state = parallel.replicate(state, mesh)
        logging.info("data parallel over %d devices (%s)", mesh.size, jax.default_backend())
    if train_cfg.steps_per_call == 1:  # each step a call, its temporaries allocated each time
        compile_memory.reuse_large_buffers()
    dropout_rngs = seed_streams(jnp.asarray([r.run.seed for r in replicas], jnp.int32),
                                Stream.DROPOUT)
    if mesh is not None:
        dropout_rngs = parallel.replicate(dropout_rngs, mesh)
    return Training(replicas, train_cfg, model_cfg.arch.value, built, dropout_rngs, mesh,
                    Progress(start, train_cfg.num_steps, bar=progress_bar), state, done=start)


# --- the loop -----------------------------------------------------------------------------------

def _train(t: Training, should_stop: Callable[[int], bool]) -> None:
    """Compiled calls until the last step, every replica's divergence, or a stop request."""
    total = t.cfg.num_steps
    while t.done < total:
        for metrics in _step(t):
            t.done += 1
            _stop_diverged_replicas(t, metrics)
            if not t.live:
                return
            _log(t, metrics)
        stopping = should_stop(t.calls)  # every process: the same answer for the same call
        t.calls += 1
        if _due(t.done, t.cfg.eval_every, total):  # the last: every eval batch
            _evaluate(t, max_batches=0 if t.done == total else t.cfg.eval_batches)
        if _due(t.done, t.cfg.checkpoint_every, total) or stopping:
            _checkpoint(t)
        if stopping and t.done < total:
            _preempt(t)
            return


def _due(step: int, every: int, total: int) -> bool:
    """Whether a periodic action (log, eval, checkpoint) runs after `step`: every `every`
    steps, and after the last."""
    return step % every == 0 or step == total


def _step(t: Training) -> list[dict[str, np.ndarray]]:
    """One compiled call: k steps (train.steps_per_call), ending on every log, eval and
    checkpoint step. Returns each step's metrics, every leaf [R, ...], fetched from the devices
    (which also waits for the call: a NaN is seen at once)."""
    boundaries = (t.cfg.log_every, t.cfg.eval_every, t.cfg.checkpoint_every)
    k = steps.next_call_size(t.done, t.cfg.num_steps, t.cfg.steps_per_call, boundaries)
    batch = _replica_batches(t.replicas, range(t.done, t.done + k), t.cfg.batch_size, t.fmt)
    call, batch_axis = (t.programs.multi_step, 2) if k > 1 else (t.programs.train_step, 1)
    if k == 1:
        batch = jax.tree.map(lambda x: x[0], batch)  # [R, B, ...]: no step axis
    if t.mesh is not None:
        batch = parallel.shard_batch(batch, t.mesh, axis=batch_axis)
    if k == 1 and math.isnan(t.flops_per_step):  # the lowering the call below compiles
        t.flops_per_step = steps.flops_per_call(call, t.state, batch, t.dropout_rngs)
    t.state, metrics = call(t.state, batch, t.dropout_rngs)
    metrics = jax.device_get(metrics)
    if k == 1:
        return [metrics]
    return [jax.tree.map(lambda x, i=i: x[i], metrics) for i in range(k)]  # leaves [k, R, ...]


def _replica_batches(replicas: list[Replica], steps_: range, batch_size: int, fmt: str
                     ) -> dict[str, np.ndarray]:
    """The train batches of `steps_` for every replica (its own seed's draws): [k, R, B, ...]."""
    return steps.stack_batches([
        steps.stack_batches([r.run.dataset.train_batch(step, batch_size, fmt) for r in replicas])
        for step in steps_])


def _stop_diverged_replicas(t: Training, metrics: dict[str, np.ndarray]) -> None:
    """Stops and records every live replica whose step `t.done` was not finite."""
    for j, r in enumerate(t.replicas):
        if r.active and not metrics["finite"][j]:
            _stop_diverged(r, t.done, _replica_metrics(metrics, j))


def _stop_diverged(r: Replica, step: int, metrics: dict[str, Any]) -> None:
    r.active = False
    r.writer.close()
    logging.error("diverged at step %d (seed %d): loss=%s grad_norm=%s; last finite metrics: %s",
                  step, r.run.seed, metrics["loss"], metrics["grad_norm"], r.last_finite)
    r.status = _write_status(r.path, DIVERGED, step, last_finite_metrics=r.last_finite,
                             loss=float(metrics["loss"]))


def _log(t: Training, metrics: dict[str, np.ndarray]) -> None:
    """The progress bar after every step; on logged steps the log line (mean over the live
    replicas) and each live replica's train scalars."""
    live = t.live
    t.progress.update(t.done, float(np.mean(metrics["loss"][live])))
    if not _due(t.done, t.cfg.log_every, t.cfg.num_steps):
        return
    t.progress.log(t.done, [float(metrics["loss"][j]) for j in live],
                   float(np.mean(metrics["accuracy"][live])))
    for j in live:
        r = t.replicas[j]
        r.last_finite = _train_scalars(_replica_metrics(metrics, j))
        r.last_finite["train/steps_per_sec"] = t.progress.rate
        if not math.isnan(t.flops_per_step):
            r.last_finite["train/flops_per_step"] = t.flops_per_step
        r.writer.scalars(t.done, r.last_finite)


def _replica_metrics(metrics: dict[str, np.ndarray], j: int) -> dict[str, Any]:
    return {key: v[j] for key, v in metrics.items()}


def _train_scalars(metrics: dict[str, Any]) -> dict[str, float]:
    scalars = {f"train/{k}": float(v) for k, v in metrics.items()
               if np.ndim(v) == 0 and k not in ("finite", "weight")}
    norms = np.asarray(metrics["layer_grad_norm"])
    for layer, value in enumerate(norms):
        scalars[f"layers/grad_norm/layer_{layer:02d}"] = float(value)
    for layer, value in enumerate(np.asarray(metrics["qk_grad_norm"])):  # through the softmax
        scalars[f"layers/qk_grad_norm/layer_{layer:02d}"] = float(value)
    rms = np.asarray(metrics["residual_rms"])  # activation range (Xiong et al. 2020)
    for layer, value in enumerate(rms):
        scalars[f"layers/residual_rms/layer_{layer:02d}"] = float(value)
    # the last layer's under one name at every depth, so a study can compare depths
    scalars["layers/residual_rms_last_layer"] = float(rms[-1])
    if len(norms) > 1 and norms[-1] > 0:
        # Xiong et al. 2020's picture as one number: the gradient that reaches the first layer
        # against the last's (about 1: depth-independent; far below: vanishing toward the input)
        scalars["layers/grad_norm_ratio"] = float(norms[0] / norms[-1])
    return scalars


def _evaluate(t: Training, max_batches: int) -> None:
    """Every live replica evaluated at `t.done`: its result kept for its status, its scalars
    and attention maps written."""
    live = t.live
    found = evaluation.evaluate(t.replicas[live[0]].run, live, t.fmt, t.programs.eval_step,
                                t.programs.probe, t.state["params"], t.done, t.mesh,
                                max_batches=max_batches)
    for j, e in zip(live, found):
        r = t.replicas[j]
        r.result = e.metrics
        r.writer.scalars(t.done, e.scalars)
        r.writer.images(t.done, e.images)
        r.writer.flush()
    compile_memory.give_back()  # the evaluation's buffers are free: hand their pages back


def _checkpoint(t: Training) -> None:
    for j in t.live:
        t.replicas[j].checkpoints.save(t.done, take_replica(t.state, j), {"step": t.done})


def _preempt(t: Training) -> None:
    """After a stop request's checkpoint: every live run recorded as preempted."""
    logging.warning("SIGTERM%s: saved a checkpoint at step %d; rerun the same command to resume",
                    " (to one process: all stop here)" if jax.process_count() > 1 else "",
                    t.done)
    for j in t.live:
        t.replicas[j].writer.close()
        t.replicas[j].status = _write_status(t.replicas[j].path, PREEMPTED, t.done)


# --- finish -------------------------------------------------------------------------------------

def _finish(t: Training) -> None:
    """Every live run reached its last step: recorded as finished, with its final evaluation."""
    for r in t.replicas:
        if r.active:
            r.writer.close()
            r.status = _write_status(r.path, FINISHED, t.done, eval=r.result,
                                     train=r.last_finite, seconds=t.progress.elapsed())
            logging.info("finished %d steps in %s (seed %d): %s", t.done,
                         duration(t.progress.elapsed()), r.run.seed,
                         evaluation.format_metrics(r.result))


@contextlib.contextmanager
def _lost_peer_exits(step: Callable[[], int]) -> Iterator[None]:
    """With several processes, a failed collective means a lost process: one line naming it and
    exit parallel.EXIT_LOST_PEER (parallel.exit_lost_peer) rather than a traceback, or a hang
    in JAX's shutdown barrier. `step()`: the last step done."""
    try:
        yield
    except (jax.errors.JaxRuntimeError, ValueError) as e:  # gloo's failures come as ValueError
        if jax.process_count() == 1:
            raise
        parallel.exit_lost_peer(e, step())


def _prepare_workdirs(configs, workdirs, extend: bool = False) -> list[Path]:
    """workdir.prepare for each run. With several processes (one run), process 0 creates them
    first, the others then check theirs against its config.json (on a shared filesystem they
    would otherwise see each other's half-written files)."""
    def prepare() -> list[Path]:
        return [workdir_lib.prepare(w, c.to_dict(), extend=extend)
                for c, w in zip(configs, workdirs)]

    if jax.process_count() == 1:
        return prepare()
    from jax.experimental import multihost_utils

    paths = prepare() if jax.process_index() == 0 else None
    multihost_utils.sync_global_devices("transformer_jax: workdirs prepared")
    return paths or prepare()


def _write_status(path: Path, state: str, step: int, **fields: Any) -> dict[str, Any]:
    """status.json, written by process 0 only (a multi-host run is one run); returns it."""
    if jax.process_index() == 0:
        return workdir_lib.write_status(path, state, step, **fields)
    return {"state": state, "step": step, **fields}

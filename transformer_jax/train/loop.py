"""`train_and_evaluate(config, workdir)`: one run, from a config to curves and checkpoints.

Everything that can be wrong with the input is checked before anything is compiled. A run
resumes from its newest checkpoint (the data order is a pure function of seed and step, so it
sees exactly the batches an uninterrupted run would), stops on NaN/inf and says so, and saves a
checkpoint on SIGTERM.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from transformer_jax import data as data_lib
from transformer_jax.train import parallel
from transformer_jax.train import steps
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.train.checkpointing import Checkpointer
from transformer_jax.config import ConfigError, Head, ModelConfig, NormType, TrainConfig
from transformer_jax.model.transformer import VARIABLES, Transformer
from transformer_jax.train.summaries import NullWriter, SummaryWriter, attention_map_image

FINISHED, DIVERGED, PREEMPTED = "finished", "diverged", "preempted"


@dataclasses.dataclass(frozen=True)
class Run:
    """The typed form of one run's config, validated as a whole."""

    seed: int
    model: ModelConfig
    train: TrainConfig
    dataset: Any  # transformer_jax.data.Dataset
    bits_name: str  # 'bits_per_char' for text, 'bits_per_token' otherwise


def check_config(config: ml_collections.ConfigDict) -> tuple[TrainConfig, ModelConfig]:
    """The checks that need no dataset (milliseconds): train, model and data fields. Returns the
    train config and the model config with placeholder vocabulary sizes (its arch is final)."""
    train = TrainConfig.from_config(config.train)
    model = ModelConfig.from_config(config.model, vocab_size=1, num_outputs=1)
    data_lib.DataConfig.from_config(config.data)
    if model.norm_type is NormType.BATCHNORM and train.microbatches > 1:
        raise ConfigError(f"train.microbatches={train.microbatches} would split the batch that "
                          "model.norm_type='batchnorm' takes its statistics over; use "
                          "train.microbatches=1")
    return train, model


def has_ended(status: Optional[dict], num_steps: Optional[int] = None) -> bool:
    """A run is over when it finished or diverged (a preempted or running one is not); given
    `num_steps`, a run finished short of it (then extended: `--extend_to`) is not over."""
    return bool(status) and (status["state"] == DIVERGED or status["state"] == FINISHED and (
        num_steps is None or status["step"] >= num_steps))


def build_run(config: ml_collections.ConfigDict) -> Run:
    """ConfigDict -> validated Run. Raises ConfigError / DataError with one-line messages."""
    train, placeholder = check_config(config)  # before the dataset is built (may take seconds)
    arch = placeholder.arch
    dataset = data_lib.make_dataset(config.data, seed=config.seed, fmt=arch.value)
    head = Head(dataset.head)
    model = ModelConfig.from_config(
        config.model, vocab_size=dataset.vocab_size, head=head,
        num_outputs=dataset.num_classes if head is Head.POOLED else dataset.vocab_size)
    longest = max(dataset.train_len, dataset.eval_len)
    if longest > model.max_len:
        raise ConfigError(f"sequences of length {longest} (data.seq_len / data.eval_seq_len) "
                          f"exceed model.max_len={model.max_len}; raise model.max_len")
    bits_name = "bits_per_char" if config.data.kind == "text" else "bits_per_token"
    return Run(seed=config.seed, model=model, train=train, dataset=dataset, bits_name=bits_name)


class Stream(enum.IntEnum):
    """The random streams of a run, each `fold_in(key(seed), stream)`: no two seeds or streams
    share a key (deriving seed s's dropout from key(s + 1) gave it seed s+1's initialization).
    The data order is drawn by numpy from (seed, step), apart from these (`data.batching`)."""
    PARAMS = 1
    DROPOUT = 2


def seed_stream(seed: int, stream: Stream) -> jax.Array:
    return jax.random.fold_in(jax.random.key(seed), int(stream))


def init_model(cfg: ModelConfig, seed: int) -> tuple[nnx.GraphDef, dict]:
    """(graphdef, params as a pure dict: the parameters and, with BatchNorm, its running
    statistics, which `steps.make_train_step` keeps out of the optimizer's hands). Initialization
    runs compiled: eagerly, the stacked layers' many small ops cost seconds even for a tiny model."""
    make = lambda key: _initial_params(cfg, key)
    return _graphdef(cfg), jax.jit(make)(seed_stream(seed, Stream.PARAMS))


def init_states(cfg: ModelConfig, tx, seeds: Sequence[int]) -> tuple[nnx.GraphDef, dict]:
    """(graphdef, the fresh train states of runs that differ only in seed, stacked on a leading
    replica axis [R, ...]): for each seed, init_model's parameters, `tx.init` of them and step 0.
    One compiled program for all of them (vmapped over the seeds): initializing, stacking and
    the optimizer's zeros eagerly compiled a small program per shape, ~1.5 s per variant."""
    def make(seed):
        params = _seed_params(cfg, seed)
        return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}

    return _graphdef(cfg), jax.jit(jax.vmap(make))(jnp.asarray(seeds, jnp.int32))


def init_params(cfg: ModelConfig, seeds: Sequence[int]) -> dict:
    """init_model's parameters for each of `seeds`, stacked [R, ...], from one compiled program
    (init_model once per seed traces and looks up a program each time, ~0.5 s)."""
    return jax.jit(jax.vmap(lambda seed: _seed_params(cfg, seed)))(jnp.asarray(seeds, jnp.int32))


def _seed_params(cfg: ModelConfig, seed) -> dict:
    return _initial_params(cfg, seed_stream(seed, Stream.PARAMS))


def _graphdef(cfg: ModelConfig) -> nnx.GraphDef:
    return nnx.graphdef(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(params=0))))


def _initial_params(cfg: ModelConfig, key: jax.Array) -> dict:
    return nnx.to_pure_dict(nnx.state(Transformer(cfg, rngs=nnx.Rngs(params=key)), VARIABLES))


@functools.partial(jax.jit, static_argnums=1)
def seed_streams(seeds: jax.Array, stream: Stream) -> jax.Array:
    """[R] seeds -> [R] keys, seed_stream of each (one program, not one eager op per seed)."""
    return jax.vmap(lambda seed: seed_stream(seed, stream))(seeds)


@jax.jit
def take_replica(tree, j: jax.Array):
    """Replica j of a stacked tree (one program per tree structure, where indexing each leaf
    eagerly compiled a slice per leaf shape)."""
    return jax.tree.map(lambda x: x[j], tree)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       extend_to: Optional[int] = None) -> dict[str, Any]:
    """Trains (or resumes, or reports an already ended run); returns the run's final status.
    `extend_to`: continue the workdir's run up to this many steps (train.num_steps becomes it;
    workdir.prepare records the change and refuses any other)."""
    if extend_to is None:
        return train_replicas([config], [workdir])[0]
    config = copy.deepcopy(config)
    config.train.num_steps = extend_to
    return train_replicas([config], [workdir], extend=True)[0]


@dataclasses.dataclass
class Replica:
    """One run of a replicated training: its own workdir, checkpoints, curves and status."""

    config: ml_collections.ConfigDict
    run: Run
    path: Path
    checkpoints: Checkpointer
    writer: Optional[SummaryWriter] = None
    last_finite: dict = dataclasses.field(default_factory=dict)
    result: dict = dataclasses.field(default_factory=dict)
    active: bool = True
    status: dict = dataclasses.field(default_factory=dict)  # as written to status.json


def train_replicas(configs: Sequence[ml_collections.ConfigDict], workdirs: Sequence[str], *,
                   progress_bar: bool = True, extend: bool = False) -> list[dict[str, Any]]:
    """Trains runs whose configs differ only in `seed` side by side, in one compiled program.

    Each run keeps its own workdir, checkpoints, curves and status, exactly as if trained alone;
    the step is `jax.vmap`-ed over a leading replica axis (for small models on a CPU, three
    seeds cost little more than one). A diverging replica is stopped and recorded; the others
    go on. Returns each run's final status. progress_bar: a tqdm bar when stderr is a terminal.
    """
    if len(configs) != len(workdirs) or not configs:
        raise ValueError("train_replicas needs one workdir per config")
    runs = [build_run(c) for c in configs]
    _check_differ_only_in_seed(configs)
    mesh = parallel.data_mesh(runs[0].train.num_devices, runs[0].train.batch_size)  # None: 1 device
    paths = _prepare_workdirs(configs, workdirs, extend)
    statuses = [workdir_lib.read_status(p) for p in paths]
    todo = [i for i, s in enumerate(statuses) if not has_ended(s, runs[i].train.num_steps)]
    for i in sorted(set(range(len(configs))) - set(todo)):
        logging.info("run in %s already %s at step %d; nothing to do", workdirs[i],
                     statuses[i]["state"], statuses[i]["step"])
    if not todo:
        return statuses

    model_cfg, train_cfg = runs[todo[0]].model, runs[todo[0]].train
    fmt = model_cfg.arch.value  # batch layout: 'encoder' or 'decoder'
    tx, schedule = steps.make_optimizer(train_cfg)
    graphdef, fresh = init_states(model_cfg, tx, [runs[i].seed for i in todo])  # [R, ...]
    one_replica = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), fresh)
    replicas, restored_states, starts = [], [], []
    for i in todo:
        checkpoints = Checkpointer(str(paths[i] / "checkpoints"), keep=train_cfg.keep_checkpoints)
        restored = checkpoints.restore(one_replica)
        start = 0
        if restored is not None:
            start, state, _ = restored
            restored_states.append(state)
            logging.info("resuming %s from step %d", workdirs[i], start)
        replicas.append(Replica(configs[i], runs[i], paths[i], checkpoints))
        starts.append(start)
    if len(set(starts)) > 1:  # interrupted between the replicas' saves: finish each alone
        for r in replicas:
            r.checkpoints.close()
        return [statuses[i] if i not in todo else
                train_replicas([configs[i]], [workdirs[i]], progress_bar=progress_bar)[0]
                for i in range(len(configs))]
    start = starts[0]
    for r in replicas:
        # Drop the events an interrupted process logged after its checkpoint: steps > start.
        r.writer = (SummaryWriter(str(r.path), purge_step=start + 1 if start else None)
                    if jax.process_index() == 0 else NullWriter())  # one writer per run
        if start == 0:
            r.writer.hparams(_hparams(r.config, r.run), metrics=["eval/loss", "eval/accuracy"])
        for change in workdir_lib.config_history(r.path):  # where an --extend_to took effect
            if change["step"] == start:
                r.writer.text(start, "config_change", json.dumps(change["change"]) + "; LR "
                              "schedule " + change["schedule"])
        _write_status(r.path, "running", start)
    logging.info("%s | %s | %d parameters | seeds %s", runs[todo[0]].dataset.describe(),
                 _describe(model_cfg), sum(p.size // len(replicas)
                                           for p in jax.tree.leaves(fresh["params"])),
                 [r.run.seed for r in replicas])

    state = fresh  # leading replica axis; resumed: the checkpoints, stacked on the host
    if start > 0:
        state = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *restored_states)
    if mesh is not None:  # data parallel: state on every device, each batch split over them
        state = parallel.replicate(state, mesh)
        logging.info("data parallel over %d devices (%s)", mesh.size, jax.default_backend())
    train_step = steps.make_train_step(graphdef, model_cfg, tx, schedule, replicas=True,
                                       microbatches=train_cfg.microbatches)
    eval_step = steps.make_eval_step(graphdef, model_cfg, replicas=True)
    probe = steps.make_probe(graphdef, replicas=True)
    dropout_rngs = seed_streams(jnp.asarray([r.run.seed for r in replicas], jnp.int32),
                                Stream.DROPOUT)
    if mesh is not None:
        dropout_rngs = parallel.replicate(dropout_rngs, mesh)
    progress = Progress(start, train_cfg.num_steps, bar=progress_bar)
    total = train_cfg.num_steps

    run_steps = None  # k steps per call: the logged (last) one with diagnostics, the rest without
    if train_cfg.steps_per_call > 1:
        run_steps = steps.make_logged_multi_step(graphdef, model_cfg, tx, schedule, train_step,
                                                 replicas=True,
                                                 microbatches=train_cfg.microbatches)
    boundaries = (train_cfg.log_every, train_cfg.eval_every, train_cfg.checkpoint_every)

    # SIGTERM to any process stops every process after the same call (parallel.stop_requests)
    with parallel.stop_requests() as should_stop, _lost_peer_exits(lambda: done):
        done, live, calls = start, list(range(len(replicas))), 0
        while done < total:
            # k steps in one compiled call (train.steps_per_call), ending on every log, eval and
            # checkpoint step; the metrics of each come back together.
            k = steps.next_call_size(done, total, train_cfg.steps_per_call, boundaries)
            batch = _replica_batches(replicas, range(done, done + k), train_cfg.batch_size, fmt)
            call, batch_axis = (run_steps, 2) if k > 1 else (train_step, 1)
            if k == 1:
                batch = jax.tree.map(lambda x: x[0], batch)  # [R, B, ...]: no step axis
            if mesh is not None:
                batch = parallel.shard_batch(batch, mesh, axis=batch_axis)
            state, metrics = call(state, batch, dropout_rngs)
            metrics = jax.device_get(metrics)  # also waits for the call: a NaN is seen at once
            each_step = ([metrics] if k == 1 else  # else every leaf is [k, R, ...]
                         [jax.tree.map(lambda x, i=i: x[i], metrics) for i in range(k)])
            for metrics in each_step:
                done += 1
                for j, r in enumerate(replicas):
                    if r.active and not metrics["finite"][j]:
                        _stop_diverged(r, done, {key: v[j] for key, v in metrics.items()})
                live = [j for j, r in enumerate(replicas) if r.active]
                if not live:
                    break
                progress.update(done, float(np.mean(metrics["loss"][live])))
                if done % train_cfg.log_every == 0 or done == total:
                    progress.log(done, [float(metrics["loss"][j]) for j in live],
                                 float(np.mean(metrics["accuracy"][live])))
                    for j in live:
                        r = replicas[j]
                        r.last_finite = _train_scalars({key: v[j] for key, v in metrics.items()})
                        r.last_finite["train/steps_per_sec"] = progress.rate
                        r.writer.scalars(done, r.last_finite)
            if not live:
                break
            stopping = should_stop(calls)  # every process: the same answer for the same call
            calls += 1
            if done % train_cfg.eval_every == 0 or done == total:  # the last: every eval batch
                evaluate(replicas, live, fmt, eval_step, probe, state["params"], done, mesh,
                         max_batches=0 if done == total else train_cfg.eval_batches)
            if done % train_cfg.checkpoint_every == 0 or done == total or stopping:
                for j in live:
                    replicas[j].checkpoints.save(done, take_replica(state, j), {"step": done})
            if stopping and done < total:
                logging.warning("SIGTERM%s: saved a checkpoint at step %d; rerun the same command "
                                "to resume", " (to one process: all stop here)"
                                if jax.process_count() > 1 else "", done)
                for j in live:
                    replicas[j].writer.close()
                    replicas[j].status = _write_status(replicas[j].path, PREEMPTED, done)
                break
        else:
            for r in replicas:
                if r.active:
                    r.writer.close()
                    r.status = _write_status(r.path, FINISHED, total, eval=r.result,
                                             train=r.last_finite, seconds=progress.elapsed())
                    logging.info("finished %d steps in %s (seed %d): %s", total,
                                 _duration(progress.elapsed()), r.run.seed, _format(r.result))
    for r in replicas:
        r.checkpoints.close()
    progress.close()
    by_index = dict(zip(todo, replicas))
    return [by_index[i].status if i in by_index else statuses[i]
            for i in range(len(configs))]


@contextlib.contextmanager
def _lost_peer_exits(step) -> Iterator[None]:
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
    prepare = lambda: [workdir_lib.prepare(w, c.to_dict(), extend=extend)
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


def _replica_batches(replicas: list[Replica], steps_: range, batch_size: int, fmt: str
                     ) -> dict[str, np.ndarray]:
    """The train batches of `steps_` for every replica (its own seed's draws): [k, R, B, ...]."""
    return steps.stack_batches([
        steps.stack_batches([r.run.dataset.train_batch(step, batch_size, fmt) for r in replicas])
        for step in steps_])


def _stop_diverged(r: Replica, step: int, metrics: dict[str, Any]) -> None:
    r.active = False
    r.writer.close()
    logging.error("diverged at step %d (seed %d): loss=%s grad_norm=%s; last finite metrics: %s",
                  step, r.run.seed, metrics["loss"], metrics["grad_norm"], r.last_finite)
    r.status = _write_status(r.path, DIVERGED, step, last_finite_metrics=r.last_finite,
                             loss=float(metrics["loss"]))


def _check_differ_only_in_seed(configs: Sequence[ml_collections.ConfigDict]) -> None:
    first = dict(configs[0].to_dict(), seed=None)
    for c in configs[1:]:
        differences = workdir_lib.config_differences(first, dict(c.to_dict(), seed=None))
        if differences:
            raise ConfigError(f"replicated runs may differ only in seed, not in {differences[0]}")


def evaluate(replicas: list[Replica], live: list[int], fmt: str, eval_step, probe, params,
             step: int, mesh=None, max_batches: int = 0) -> None:
    """Eval metrics over the eval split (its first `max_batches` batches; 0: all of it), and
    attention statistics of its first batch, for every live replica (the eval split is the same
    for all: it does not depend on the seed). The trainer's periodic evaluations take
    `train.eval_batches`; its final one always takes the whole split."""
    run = replicas[live[0]].run
    sums: dict[str, np.ndarray] = {}
    first, counted = None, 0
    for batch in run.dataset.eval_batches(run.train.batch_size, fmt):
        if max_batches and counted == max_batches:
            break
        first, counted = first or batch, counted + 1
        placed = batch if mesh is None else parallel.shard_batch(batch, mesh)
        for k, v in jax.device_get(eval_step(params, placed)).items():
            sums[k] = sums.get(k, 0.0) + np.asarray(v, np.float64)
    found = jax.device_get(probe(params, first))
    length = int(np.asarray(first["padding_mask"][0]).sum())
    for j in live:
        r = replicas[j]
        r.result = steps.finish_eval({k: float(v[j]) for k, v in sums.items()},
                                     bits_name=run.bits_name)
        scalars = {f"eval/{k}": v for k, v in r.result.items()}
        for name in ("entropy", "max_weight", "max_abs_logit"):
            for layer, value in enumerate(np.asarray(found[name][j]).reshape(-1)):
                scalars[f"attention/{name}/layer_{layer:02d}"] = float(value)
        r.writer.scalars(step, scalars)
        weights = np.asarray(found["example_weights"][j])[:, :, :length, :length]  # [L, H, t, t]
        r.writer.images(step, {f"attention_map/layer_{l:02d}": attention_map_image(weights[l])
                               for l in sorted({0, weights.shape[0] - 1})})
        r.writer.flush()
    logging.info("eval at step %d (%s): %s", step,
                 f"{counted} batches" if max_batches else "the whole eval split",
                 "; ".join(_format(replicas[j].result) for j in live))


def _train_scalars(metrics: dict[str, Any]) -> dict[str, float]:
    scalars = {f"train/{k}": float(v) for k, v in metrics.items()
               if np.ndim(v) == 0 and k not in ("finite", "weight")}
    for layer, value in enumerate(np.asarray(metrics["layer_grad_norm"])):
        scalars[f"layers/grad_norm/layer_{layer:02d}"] = float(value)
    return scalars


def _hparams(config: ml_collections.ConfigDict, run: Run) -> dict[str, Any]:
    flat = workdir_lib.flatten(config.to_dict())
    flat.update({f"model.{k}": v for k, v in run.model.to_dict().items()})
    return {k: v for k, v in flat.items() if isinstance(v, (bool, int, float, str))}


def _describe(cfg: ModelConfig) -> str:
    return (f"{cfg.arch.value} {cfg.num_layers}x(d={cfg.d_model}, h={cfg.num_heads}, ff={cfg.d_ff}) "
            f"position={cfg.position.value} norm={cfg.norm.value}({cfg.norm_type.value}) "
            f"attn_scale={cfg.attn_scale} qk_norm={cfg.qk_norm} residual={cfg.residual}")


def _format(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Progress:
    """Steps/s and ETA for the log lines; a tqdm bar only when stderr is a terminal."""

    def __init__(self, start: int, total: int, bar: bool = True):
        self.start, self.total = start, total
        self.t0 = self.t_last = time.perf_counter()
        self.step_last = start
        self.rate = 0.0
        self.bar = None
        if bar and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=start, unit="step", leave=False)

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def log(self, step: int, losses: list[float], accuracy: float) -> None:
        now = time.perf_counter()
        self.rate = (step - self.step_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.step_last = now, step
        eta = (self.total - step) / max(self.rate, 1e-9)
        each = f" (seeds: {', '.join(f'{l:.4f}' for l in losses)})" if len(losses) > 1 else ""
        logging.info("step %d/%d  loss %.4f%s  acc %.3f  |  %.1f steps/s  ETA %s", step,
                     self.total, float(np.mean(losses)), each, accuracy, self.rate,
                     _duration(eta))

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

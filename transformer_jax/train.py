"""`train_and_evaluate(config, workdir)`: one run, from a config to curves and checkpoints.

Everything that can be wrong with the input is checked before anything is compiled. A run
resumes from its newest checkpoint (the data order is a pure function of seed and step, so it
sees exactly the batches an uninterrupted run would), stops on NaN/inf and says so, and saves a
checkpoint on SIGTERM.
"""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from transformer_jax import data as data_lib
from transformer_jax import steps
from transformer_jax import workdir as workdir_lib
from transformer_jax.checkpointing import Checkpointer
from transformer_jax.config import ConfigError, Head, ModelConfig, TrainConfig
from transformer_jax.model import Transformer
from transformer_jax.summaries import SummaryWriter, attention_map_image

FINISHED, DIVERGED, PREEMPTED = "finished", "diverged", "preempted"


@dataclasses.dataclass(frozen=True)
class Run:
    """The typed form of one run's config, validated as a whole."""

    seed: int
    model: ModelConfig
    train: TrainConfig
    dataset: Any  # transformer_jax.data.Dataset
    bits_name: str  # 'bits_per_char' for text, 'bits_per_token' otherwise


def build_run(config: ml_collections.ConfigDict) -> Run:
    """ConfigDict -> validated Run. Raises ConfigError / DataError with one-line messages."""
    train = TrainConfig.from_config(config.train)
    # Validate the model fields before the dataset is built (which may take seconds).
    arch = ModelConfig.from_config(config.model, vocab_size=1, num_outputs=1).arch
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


@contextlib.contextmanager
def sigterm_requests_stop() -> Iterator[list[bool]]:
    """While active, SIGTERM sets a flag (checked between steps) instead of killing the process."""
    requested = [False]
    previous = signal.signal(signal.SIGTERM, lambda *_: requested.__setitem__(0, True))
    try:
        yield requested
    finally:
        signal.signal(signal.SIGTERM, previous)


def init_model(cfg: ModelConfig, seed: int) -> tuple[nnx.GraphDef, dict]:
    """(graphdef, params as a pure dict). Initialization runs compiled: eagerly, the stacked
    layers' many small ops cost seconds even for a tiny model."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(params=0))))
    make = lambda key: nnx.to_pure_dict(nnx.state(Transformer(cfg, rngs=nnx.Rngs(params=key)), nnx.Param))
    return graphdef, jax.jit(make)(jax.random.key(seed))


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Trains (or resumes, or reports an already ended run); returns the run's final status."""
    run = build_run(config)
    fmt = run.model.arch.value  # batch layout: 'encoder' or 'decoder'
    path = workdir_lib.prepare(workdir, config.to_dict())
    status = workdir_lib.read_status(path)
    if status and status["state"] in (FINISHED, DIVERGED):
        logging.info("run in %s already %s at step %d; nothing to do", workdir, status["state"],
                     status["step"])
        return status

    graphdef, params = init_model(run.model, run.seed)
    tx, schedule = steps.make_optimizer(run.train)
    state = {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}
    checkpoints = Checkpointer(str(path / "checkpoints"), keep=run.train.keep_checkpoints)
    restored = checkpoints.restore(state)
    start = 0
    if restored is not None:
        start, state, _ = restored
        logging.info("resuming %s from step %d", workdir, start)
    # Drop the events an interrupted process logged after its checkpoint: steps > start (those at
    # `start` itself were logged before that checkpoint was saved, and stay).
    writer = SummaryWriter(str(path), purge_step=start + 1 if start else None)
    if start == 0:
        writer.hparams(_hparams(config, run), metrics=["eval/loss", "eval/accuracy"])
    logging.info("%s | %s | %d parameters", run.dataset.describe(), _describe(run.model),
                 sum(p.size for p in jax.tree.leaves(params)))

    train_step = steps.make_train_step(graphdef, run.model, tx, schedule)
    eval_step = steps.make_eval_step(graphdef, run.model)
    probe = steps.make_probe(graphdef)
    dropout_rng = jax.random.key(run.seed + 1)
    progress = Progress(start, run.train.num_steps)
    last_finite: dict[str, float] = {}
    result: dict[str, Any] = {}
    workdir_lib.write_status(path, "running", start)

    with sigterm_requests_stop() as stop_requested:
        for step in range(start, run.train.num_steps):
            batch = run.dataset.train_batch(step, run.train.batch_size, fmt)
            state, metrics = train_step(state, batch, dropout_rng)
            metrics = jax.device_get(metrics)  # also waits for the step: a NaN is seen at once
            done = step + 1
            if not metrics["finite"]:
                writer.close()
                logging.error("diverged at step %d: loss=%s grad_norm=%s; last finite metrics: %s",
                              done, metrics["loss"], metrics["grad_norm"], last_finite)
                return workdir_lib.write_status(path, DIVERGED, done, last_finite_metrics=last_finite,
                                                loss=float(metrics["loss"]))
            progress.update(done, float(metrics["loss"]))
            if done % run.train.log_every == 0 or done == run.train.num_steps:
                last_finite = _train_scalars(metrics)
                progress.log(done, last_finite)  # adds train/steps_per_sec
                writer.scalars(done, last_finite)
            if done % run.train.eval_every == 0 or done == run.train.num_steps:
                result = evaluate(run, fmt, eval_step, probe, state["params"], writer, done)
            last = done == run.train.num_steps
            if done % run.train.checkpoint_every == 0 or last or stop_requested[0]:
                checkpoints.save(done, state, {"step": done})
            if stop_requested[0] and not last:
                writer.close()
                logging.warning("SIGTERM: saved a checkpoint at step %d; rerun the same command "
                                "to resume", done)
                return workdir_lib.write_status(path, PREEMPTED, done)
    writer.close()
    checkpoints.close()
    progress.close()
    final = workdir_lib.write_status(path, FINISHED, run.train.num_steps, eval=result,
                                     train=last_finite, seconds=progress.elapsed())
    logging.info("finished %d steps in %s: %s", run.train.num_steps,
                 _duration(progress.elapsed()), _format(result))
    return final


def evaluate(run: Run, fmt: str, eval_step, probe, params, writer: SummaryWriter,
             step: int) -> dict[str, float]:
    """Eval metrics over the eval split and attention statistics of its first batch."""
    sums: dict[str, float] = {}
    first = None
    for i, batch in enumerate(run.dataset.eval_batches(run.train.batch_size, fmt)):
        if run.train.eval_batches and i >= run.train.eval_batches:
            break
        first = batch if first is None else first
        for k, v in jax.device_get(eval_step(params, batch)).items():
            sums[k] = sums.get(k, 0.0) + float(v)
    metrics = steps.finish_eval(sums, bits_name=run.bits_name)
    scalars = {f"eval/{k}": v for k, v in metrics.items()}
    found = jax.device_get(probe(params, first))
    for name in ("entropy", "max_weight", "max_abs_logit"):
        for layer, value in enumerate(np.asarray(found[name]).reshape(-1)):
            scalars[f"attention/{name}/layer_{layer:02d}"] = float(value)
    writer.scalars(step, scalars)
    length = int(np.asarray(first["padding_mask"][0]).sum())
    weights = np.asarray(found["example_weights"])[:, :, :length, :length]  # [L, H, t, t]
    writer.images(step, {f"attention_map/layer_{l:02d}": attention_map_image(weights[l])
                         for l in sorted({0, weights.shape[0] - 1})})
    writer.flush()
    logging.info("eval at step %d: %s", step, _format(metrics))
    return metrics


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
            f"position={cfg.position.value} norm={cfg.norm.value} attn_scale={cfg.attn_scale} "
            f"residual={cfg.residual}")


def _format(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Progress:
    """Steps/s and ETA for the log lines; a tqdm bar only when stderr is a terminal."""

    def __init__(self, start: int, total: int):
        self.start, self.total = start, total
        self.t0 = self.t_last = time.perf_counter()
        self.step_last = start
        self.rate = 0.0
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=start, unit="step", leave=False)

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        now = time.perf_counter()
        self.rate = (step - self.step_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.step_last = now, step
        scalars["train/steps_per_sec"] = self.rate
        eta = (self.total - step) / max(self.rate, 1e-9)
        logging.info("step %d/%d  loss %.4f  acc %.3f  |  %.1f steps/s  ETA %s", step, self.total,
                     scalars["train/loss"], scalars["train/accuracy"], self.rate, _duration(eta))

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

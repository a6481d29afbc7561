"""A training's programs (initialization, step, k steps, evaluation, probe), built once per
model and optimizer in a process.

Building them is Python work before XLA sees anything: a jitted function is traced and lowered
at its first call (1-2 s for a tiny model on a CPU; then XLA compiles, or JAX's persistent cache
hands over the executable). A process that trains one configuration again (a notebook cell run
twice, in-process sweeps of studies that share a variant, the test suite) gets the same jitted
functions back, whose own caches then hold the trace, the lowering and the executable.

The key is everything the programs compute with: the model config and every `train.*` field
except those only the host loop reads (HOST_ONLY: when to log, evaluate and checkpoint, how many
checkpoints to keep, how many batches a periodic evaluation takes). Seeds, batches and the
replica count are arguments: jit keys its programs by their shapes.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional

import optax
from flax import nnx

from transformer_jax.config import ModelConfig, TrainConfig
from transformer_jax.train import steps
from transformer_jax.train.init import graphdef_of, states_initializer

# train.* fields that only the host loop reads; two trainings differing only in them share programs
HOST_ONLY = ("log_every", "eval_every", "checkpoint_every", "keep_checkpoints", "eval_batches")
KEPT = 8  # configurations whose programs a process keeps (the least recently used goes first)


@dataclasses.dataclass(frozen=True)
class Programs:
    """The jitted functions of a training, all over a leading replica axis (each compiles at its
    first call), with what they were built from."""

    graphdef: nnx.GraphDef
    tx: optax.GradientTransformation
    schedule: optax.Schedule
    init_states: Callable  # [R] int32 seeds -> the stacked fresh train states
    train_step: Callable  # (state, batch, rngs) -> (state, metrics), one step
    multi_step: Optional[Callable]  # k steps, the last with diagnostics (train.steps_per_call > 1)
    eval_step: Callable
    probe: Callable


def for_training(model: ModelConfig, train: TrainConfig) -> Programs:
    """The programs of a training of `model` with `train`: built at the first call with that
    pair (up to the HOST_ONLY fields), the same objects after."""
    return _build(model, dataclasses.replace(
        train, **{name: TrainConfig.field_defaults()[name] for name in HOST_ONLY}))


@functools.lru_cache(maxsize=KEPT)
def _build(model: ModelConfig, train: TrainConfig) -> Programs:
    tx, schedule = steps.make_optimizer(train)
    graphdef = graphdef_of(model)
    multi_step = None
    if train.steps_per_call > 1:
        multi_step = steps.make_logged_multi_step(graphdef, model, tx, schedule, replicas=True,
                                                  microbatches=train.microbatches)
    return Programs(graphdef, tx, schedule, states_initializer(model, tx),
                    steps.make_train_step(graphdef, model, tx, schedule, replicas=True,
                                          microbatches=train.microbatches),
                    multi_step, steps.make_eval_step(graphdef, model, replicas=True),
                    steps.make_probe(graphdef, replicas=True))

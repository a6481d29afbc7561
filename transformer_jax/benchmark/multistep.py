"""Train-step wrappers that do more work per compiled call, for the trainer to adopt.

- `make_multi_step`: k optimizer steps in one call (`jax.lax.scan` over k stacked batches).
  A small model on a CPU spends a large part of each step in per-call overhead (dispatch,
  argument handling, thread-pool wake-ups between many small kernels, the host loop); one call
  per k steps pays it once. The result is bit-for-bit the same training (same batches, same
  order): the scan body is the unchanged train step.
- `make_seeds_step`: S independent runs (seeds) of one variant as one program, `jax.vmap` over
  (state, batch): small matmuls become S times wider.

(`make_multi_step` and `next_call_size` now live in `transformer_jax.steps`: the trainer uses them
for `train.steps_per_call`.) Both take the jitted step of `steps.make_train_step` as it is: calling a jitted function inside
another traced function inlines it (its donation applies only at the outer call).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import jax
import numpy as np

from transformer_jax.steps import make_multi_step, next_call_size  # noqa: F401 (re-exported)

Batch = dict[str, Any]
TrainStep = Callable[[dict, Batch, jax.Array], tuple[dict, dict]]


def stack_batches(batches: Sequence[Batch]) -> Batch:
    """k batches -> one with a leading [k] axis on every array (host-side numpy)."""
    return jax.tree.map(lambda *xs: np.stack(xs), *batches)


def make_seeds_step(train_step: TrainStep) -> TrainStep:
    """(states [S, ...], batches [S, ...], rngs [S]) -> S independent train steps, one program.

    Stack S states (and batches) along a new leading axis (`stack_batches` does it for any
    tree); seed s trains on batches[s] with dropout key rngs[s], as a lone run would.
    """
    return jax.jit(jax.vmap(train_step), donate_argnums=(0,))


class MultiStepper:
    """(state, [batch] * n, rng) -> (state, [metrics of each step] * n), one call for n = k.

    Both programs share the train step; metrics are fetched to the host once per call (which
    also waits for it, as the trainer's per-step `device_get` does)."""

    def __init__(self, train_step: TrainStep, k: int):
        self.k = k
        self.single = train_step
        self.multi = make_multi_step(train_step) if k > 1 else None

    def __call__(self, state, batches: Sequence[Batch], rng):
        if len(batches) == 1:
            state, metrics = self.single(state, batches[0], rng)
            return state, [jax.device_get(metrics)]
        if self.multi is None or len(batches) != self.k:
            raise ValueError(f"{len(batches)} batches: a call runs 1 or {self.k} steps")
        state, metrics = self.multi(state, stack_batches(batches), rng)
        metrics = jax.device_get(metrics)  # [k, ...] per leaf
        return state, [jax.tree.map(lambda x, i=i: x[i], metrics) for i in range(len(batches))]

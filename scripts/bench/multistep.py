"""S independent runs (seeds) of one variant as one program, for the benchmark to measure.

`make_seeds_step`: `jax.vmap` over (state, batch), so small matmuls become S times wider. It
takes the jitted step of `steps.make_train_step` as it is: calling a jitted function inside
another traced function inlines it (its donation applies only at the outer call).

(Several steps per call, `make_multi_step` with `next_call_size`, and `stack_batches` live in
`transformer_jax.train.steps`: the trainer uses them for `train.steps_per_call`.)
"""
from __future__ import annotations

from typing import Any, Callable

import jax

Batch = dict[str, Any]
TrainStep = Callable[[dict, Batch, jax.Array], tuple[dict, dict]]


def make_seeds_step(train_step: TrainStep) -> TrainStep:
    """(states [S, ...], batches [S, ...], rngs [S]) -> S independent train steps, one program.

    Stack S states (and batches) along a new leading axis (`steps.stack_batches` does it for
    any tree); seed s trains on batches[s] with dropout key rngs[s], as a lone run would.
    """
    return jax.jit(jax.vmap(train_step), donate_argnums=(0,))

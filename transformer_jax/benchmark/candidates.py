"""Candidate changes to model/step code, applied as patches so the profiler can measure them
before anyone edits the real modules. Each `apply_*` replaces one method or function for the
rest of the process (profiling workers are one process per variant).
(Unrolling the layer scan, measured here first, is now in the model: `model.UNROLL_MAX_LAYERS`.)

- fused_qkv: one [d, 3d] matmul for q, k and v (the three kernels concatenated in the step;
  parameters and checkpoints unchanged): 1 dot forward and 2 backward instead of 3 and 6.
  Replaces `MultiHeadAttention.project` only.
- lean_metrics: every train step without param_norm, update_norm and per-layer gradient norms
  (three extra passes over the parameters each step) and in one pass per batch: what
  `make_train_step(diagnostics=False)` now gives the trainer for all but a call's last step.
- flat_optimizer: clipping and AdamW on one flat vector of all parameters (a few large
  kernels instead of several per array): measured slower, 0.847 vs 0.798 of the trainer.
(Two independent half-batch passes, measured here first as `halves_lean`, are now
`train.microbatches`.)
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

PATCHES: dict[str, Callable[[], None]] = {}


def _patch(fn):
    PATCHES[fn.__name__.removeprefix("apply_")] = fn
    return fn


@_patch
def apply_fused_qkv() -> None:
    from transformer_jax import attention as att

    def project(self, x):  # one [D, 3D] matmul instead of three [D, D] ones
        batch, length, _ = x.shape
        linears = (self.query, self.key, self.value)
        kernel = jnp.concatenate([l.kernel[...] for l in linears], axis=1)  # [D, 3D]
        qkv_bias = jnp.concatenate([l.bias[...] for l in linears])  # [3D]
        dtype = self.query.dtype or x.dtype
        qkv = jnp.dot(x.astype(dtype), kernel.astype(dtype)) + qkv_bias.astype(dtype)  # [B, T, 3D]
        split = lambda t: t.reshape(batch, length, self.num_heads, self.head_dim)  # noqa: E731
        q, k, v = (split(t) for t in jnp.split(qkv, 3, axis=-1))
        return q, k, v

    att.MultiHeadAttention.project = project


@_patch
def apply_lean_metrics() -> None:
    from transformer_jax import steps

    original = steps.make_train_step

    def make_train_step(*args, **kwargs):  # lean (and one pass per batch) whatever is asked
        return original(*args, **dict(kwargs, diagnostics=False, microbatches=1))

    steps.make_train_step = make_train_step


@_patch
def apply_flat_optimizer() -> None:
    """AdamW (and the clipping) on one flat vector of all parameters: a few large kernels
    instead of several small ones per parameter array."""
    import optax
    from jax.flatten_util import ravel_pytree

    from transformer_jax import steps

    original = steps.make_optimizer

    def make_optimizer(train):
        _, schedule = original(train)
        clip = (optax.clip_by_global_norm(train.grad_clip_norm) if train.grad_clip_norm > 0
                else optax.identity())
        adam = optax.scale_by_adam(b1=train.b1, b2=train.b2)

        def decay_vector(params):
            mask = jax.tree_util.tree_map_with_path(
                lambda path, p: jnp.full(p.shape, float(path[-1].key in steps.DECAYED), p.dtype),
                params)
            return ravel_pytree(mask)[0]

        def init(params):
            flat, _ = ravel_pytree(params)
            return {"clip": clip.init(flat), "adam": adam.init(flat), "count": jnp.zeros((), jnp.int32)}

        def update(grads, state, params):
            g, unravel = ravel_pytree(grads)
            p, _ = ravel_pytree(params)
            u, clip_state = clip.update(g, state["clip"], p)
            u, adam_state = adam.update(u, state["adam"], p)
            u = u + train.weight_decay * decay_vector(params) * p
            u = -schedule(state["count"]) * u
            return unravel(u), {"clip": clip_state, "adam": adam_state, "count": state["count"] + 1}

        return optax.GradientTransformation(init, update), schedule

    steps.make_optimizer = make_optimizer


def apply(names) -> None:
    for name in names:
        if name not in PATCHES:
            raise ValueError(f"unknown patch {name!r}; valid: {', '.join(PATCHES)}")
        PATCHES[name]()

"""Candidate changes to model/step code, applied as patches so the profiler can measure them
before anyone edits the real modules. Each `apply_*` replaces one method or function for the
rest of the process (profiling workers are one process per variant).
(Unrolling the layer scan, measured here first, is now in the model: `model.UNROLL_MAX_LAYERS`.)

- fused_qkv: one [d, 3d] matmul for q, k and v (the three kernels concatenated in the step;
  parameters and checkpoints unchanged): 1 dot forward and 2 backward instead of 3 and 6.
- lean_metrics: the train step without param_norm, update_norm and per-layer gradient norms
  (three extra passes over the parameters each step).
- flat_optimizer: clipping and AdamW on one flat vector of all parameters (a few large
  kernels instead of several per array): measured slower, 0.847 vs 0.798 of the trainer.
(Two independent half-batch passes, measured here first as `halves_lean`, are now
`train.microbatches`.)
"""
from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp

PATCHES: dict[str, Callable[[], None]] = {}


def _patch(fn):
    PATCHES[fn.__name__.removeprefix("apply_")] = fn
    return fn


@_patch
def apply_fused_qkv() -> None:
    from transformer_jax import attention as att
    from transformer_jax.config import AttentionImpl

    def __call__(self, x, *, mask=None, bias=None, qk_transform=None, probe=False):
        batch, length, d_model = x.shape
        linears = (self.query, self.key, self.value)
        kernel = jnp.concatenate([l.kernel[...] for l in linears], axis=1)  # [D, 3D]
        qkv_bias = jnp.concatenate([l.bias[...] for l in linears])  # [3D]
        dtype = self.query.dtype or x.dtype
        qkv = jnp.dot(x.astype(dtype), kernel.astype(dtype)) + qkv_bias.astype(dtype)  # [B, T, 3D]
        split = lambda t: t.reshape(batch, length, self.num_heads, self.head_dim)  # noqa: E731
        q, k, v = (split(t) for t in jnp.split(qkv, 3, axis=-1))
        if qk_transform is not None:
            q, k = qk_transform(q, k)
        scale = self.head_dim ** -0.5 if self.attn_scale else 1.0
        found: Optional[att.AttentionProbe] = None
        if probe or self.implementation is AttentionImpl.EXPLICIT:
            logits = att.attention_logits(q, k, mask=mask, bias=bias, scale=scale)
            weights = jax.nn.softmax(logits, axis=-1)
            heads = att.attend(weights, v)
            if probe:
                allowed = jnp.ones(logits.shape, bool) if mask is None else mask
                found = att.AttentionProbe(weights, jnp.max(jnp.where(allowed, jnp.abs(logits), 0.0)))
        else:
            heads = att.fused_attention(q, k, v, mask=mask, bias=bias, scale=scale)
        return self.out(heads.reshape(batch, length, d_model)), found

    att.MultiHeadAttention.__call__ = __call__


@_patch
def apply_lean_metrics() -> None:
    import optax
    from flax import nnx

    from transformer_jax import steps

    def make_train_step(graphdef, model_cfg, tx, schedule, **_):  # lean whatever is asked
        def train_step(state, batch, rng):
            dropout_key = jax.random.fold_in(rng, state["step"]) if model_cfg.dropout > 0 else None

            def loss_fn(params):
                model = nnx.merge(graphdef, params)
                logits, _ = model(batch["inputs"], batch["padding_mask"], dropout_key=dropout_key)
                return steps.loss_and_metrics(logits, batch, model_cfg.head)

            (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["params"])
            updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
            params = optax.apply_updates(state["params"], updates)
            metrics.update(learning_rate=schedule(state["step"]), grad_norm=optax.global_norm(grads))
            metrics["finite"] = jnp.isfinite(loss) & jnp.isfinite(metrics["grad_norm"])
            return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, metrics

        return jax.jit(train_step, donate_argnums=(0,))

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

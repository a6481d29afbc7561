"""Look inside the model, or change it, by naming an activation: TransformerLens's
`run_with_cache` and `run_with_hooks` for this project's `Transformer`.

    logits, cache = run_with_cache(model, tokens, names=["blocks.0.attn.weights"])
    knock_out = lambda value, name: value.at[:, :, 2].set(0.0)  # head 2's output before W_o
    logits, _ = run_with_hooks(model, tokens, hooks={"blocks.1.attn.head_out": knock_out})

A hook is `fn(value, name) -> value` of the same shape: it may read the value, replace it or
zero part of it, and the rest of the forward pass reads what it returns. Both functions are
plain traceable calls of the model, so they work eagerly, under `jax.jit` and `jax.grad`, and
on the scanned layer stack as on the unrolled one. `hook_names` lists every point of a model
(or config) with its shape; docs/hooks.md is that list for a small model.

The points sit on the lines of the forward pass they name (`hook_points.tap`), and a call
without hooks passes none: then no operation is added and the compiled program is the one the
model had before hook points existed (tests/model/test_hooks.py compares the programs).
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Union

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import ModelConfig
from transformer_jax.model.hook_points import HookFn, HookPoints, RecordAll
from transformer_jax.model.transformer import Transformer

Array = jax.Array


def run_with_cache(model: Transformer, *inputs, names: Optional[Iterable[str]] = None,
                   hooks: Optional[Mapping[str, HookFn]] = None,
                   **kwargs) -> tuple[Array, dict[str, Array]]:
    """model(*inputs, **kwargs)'s logits and {name: activation} for `names` (None: every hook
    point, as `hook_names` lists them). With `hooks` too, the pass is hooked as in
    `run_with_hooks` and the cache holds the values the rest of the pass read (after a hook).
    An unknown name is a one-line ValueError."""
    hooks = dict(_checked(model, hooks or {}))
    if names is None:
        points = RecordAll(hooks=hooks)
    else:
        points = HookPoints(hooks=hooks, names=_checked(model, names))
    logits, _ = model(*inputs, hooks=_or_none(points), **kwargs)
    return logits, dict(points.cache)


def run_with_hooks(model: Transformer, *inputs, hooks: Mapping[str, HookFn],
                   **kwargs) -> Array:
    """model(*inputs, **kwargs)'s logits with `hooks[name](value, name)` in place of each named
    activation. An unknown name is a one-line ValueError."""
    points = HookPoints(hooks=dict(_checked(model, hooks)))
    logits, _ = model(*inputs, hooks=_or_none(points), **kwargs)
    return logits


def _or_none(points: HookPoints) -> Optional[HookPoints]:
    """None when nothing is asked: then the model traces exactly its plain program (a context,
    even an empty one, gives the scanned stack its layer index)."""
    asked = points.hooks or points.names or isinstance(points, RecordAll)
    return points if asked else None


def hook_names(model_or_config: Union[Transformer, ModelConfig], batch: int = 1,
               length: Optional[int] = None) -> dict[str, tuple[int, ...]]:
    """Every hook point of the model (or of the model a config builds), in the order the
    forward pass reaches them, with its shape for tokens [batch, length] (length: max_len by
    default). Traced abstractly (`jax.eval_shape`): nothing is computed."""
    cfg = model_or_config if isinstance(model_or_config, ModelConfig) else model_or_config.cfg
    return dict(_abstract_names(cfg, batch, length or cfg.max_len,
                                _abstract_state(model_or_config)))


def _abstract_state(model_or_config) -> tuple[nnx.GraphDef, nnx.State]:
    """The model's graph and its state as shapes (a config's model is never built)."""
    if isinstance(model_or_config, ModelConfig):
        model = nnx.eval_shape(lambda: Transformer(model_or_config, rngs=nnx.Rngs(0)))
    else:
        model = model_or_config
    graphdef, state = nnx.split(model)
    return graphdef, jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)


def _abstract_names(cfg: ModelConfig, batch: int, length: int, split) -> Iterable:
    graphdef, state = split
    tokens = jax.ShapeDtypeStruct((batch, length), jnp.int32)
    order = []  # the forward pass's order: eval_shape's dict comes back sorted

    def cache_of(state, tokens):
        points = RecordAll()
        nnx.merge(graphdef, state)(tokens, hooks=points)
        order.extend(points.cache)
        return points.cache

    shapes = jax.eval_shape(cache_of, state, tokens)
    return [(name, tuple(shapes[name].shape)) for name in order]


_KNOWN: dict = {}  # ModelConfig -> frozenset of its names (a config fixes them)


def _checked(model: Transformer, names: Iterable[str]):
    """`names` itself (a list or a {name: hook} mapping), or a ValueError naming the first name
    the model does not have."""
    names = names if isinstance(names, Mapping) else list(names)
    known = _KNOWN.get(model.cfg)
    if known is None:
        known = _KNOWN[model.cfg] = frozenset(hook_names(model.cfg, length=1))
    for name in names:
        if name not in known:
            raise ValueError(f"no hook point {name!r} in this model; hook_names(model) lists "
                             f"its {len(known)} names, e.g. {sorted(known)[:3]}")
    return names

"""Named hook points: the lines of the forward pass where a caller may read or replace a value.

A hooked line reads `x = tap(hooks, "resid_pre", x)`. The model's methods take `hooks=None`,
and then `tap` returns its value untouched while tracing: no operation enters the compiled
program, so a model nobody hooks is bit for bit the model without hook points (and the train
step, which never passes hooks, compiles to the same program). `transformer_jax.model.hooks`
builds a `HookPoints` for `run_with_cache` and `run_with_hooks`; this module only holds the
machinery the layers import, so that the layers need not import the Transformer.

Names are dotted paths: a `Scope` prefixes what a sub-layer taps (`attn.q` inside block 3 is
`blocks.3.attn.q`). The scanned layer stack traces one block for every layer, so there the
layer index is a traced value: `LayerHooks` runs a hook of one layer through `lax.switch` on it,
and hands the values asked to be cached out of the loop as its stacked outputs.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional

import jax

Array = jax.Array
HookFn = Callable[[Array, str], Array]  # fn(value, name) -> value of the same shape


def apply_hook(fn: HookFn, value: Array, name: str) -> Array:
    """fn(value, name), held to the value's shape and dtype: the rest of the forward pass (and a
    scanned stack's loop, whose layers must agree) is traced for that shape."""
    out = fn(value, name)
    if out is None:
        raise ValueError(f"hook for {name!r} returned None: a hook returns the value (return it "
                         f"unchanged to only read it)")
    if out.shape != value.shape:
        raise ValueError(f"hook for {name!r} returned shape {tuple(out.shape)}; the value it "
                         f"replaces has shape {tuple(value.shape)}")
    return out if out.dtype == value.dtype else out.astype(value.dtype)


class HookPoints:
    """One forward pass's requests: hook functions by full name, and the names whose values to
    keep in `cache` (each value as the rest of the pass reads it: after its hook, if any)."""

    def __init__(self, hooks: Mapping[str, HookFn] | None = None, names: Iterable[str] = ()):
        self.hooks = dict(hooks or {})
        self.names = frozenset(names)
        self.cache: dict[str, Array] = {}

    def __call__(self, name: str, value: Array) -> Array:
        fn = self.hooks.get(name)
        if fn is not None:
            value = apply_hook(fn, value, name)
        if self.keeps(name):
            self.cache[name] = value
        return value

    def asks(self, name: str) -> bool:
        """Whether this pass hooks or caches `name` (the attention reads it to decide whether it
        must compute the weights, which the fused kernel does not return)."""
        return name in self.hooks or self.keeps(name)

    def keeps(self, name: str) -> bool:
        """Whether the value at `name` goes into `cache`."""
        return name in self.names


class RecordAll(HookPoints):
    """Keeps every value it is shown: what `hook_names` traces to list the names and shapes."""

    def keeps(self, name: str) -> bool:
        """Every name: RecordAll keeps everything."""
        return True


class Scope:
    """The hook points of a sub-layer: `name` here is `prefix.name` in `parent`."""

    def __init__(self, parent, prefix: str):
        self.parent, self.prefix = parent, prefix

    def __call__(self, name: str, value: Array) -> Array:
        return self.parent(f"{self.prefix}.{name}", value)

    def asks(self, name: str) -> bool:
        """Whether the parent hooks or caches `prefix.name`."""
        return self.parent.asks(f"{self.prefix}.{name}")


class LayerHooks:
    """The hook points of the block the scanned stack runs as layer `layer` (a traced int32):
    `name` here is `blocks.<layer>.name` in `root`."""

    def __init__(self, root: HookPoints, layer: Array, num_layers: int):
        self.root, self.layer, self.num_layers = root, layer, num_layers
        self.cache: dict[str, Array] = {}  # name -> this layer's value: the loop's outputs

    def full_names(self, name: str) -> list[str]:
        """`name` in every layer: blocks.0.name, blocks.1.name, ..."""
        return [f"blocks.{i}.{name}" for i in range(self.num_layers)]

    def __call__(self, name: str, value: Array) -> Array:
        full = self.full_names(name)
        fns = [self.root.hooks.get(f) for f in full]
        if any(fn is not None for fn in fns):  # each layer's own hook, or none
            branches = [_hook_or_identity(fn, f) for fn, f in zip(fns, full)]
            value = jax.lax.switch(self.layer, branches, value)
        if any(self.root.keeps(f) for f in full):
            self.cache[name] = value
        return value

    def asks(self, name: str) -> bool:
        """Whether any layer hooks or caches `name`: the block is traced once for all."""
        return any(self.root.asks(f) for f in self.full_names(name))


def keep_layers(root: HookPoints, stacked: Mapping[str, Array]) -> None:
    """Hands a scanned stack's cached outputs ({name: [num_layers, ...]}) to `root` as
    `blocks.<i>.name`, for the layers it keeps, layer by layer."""
    num_layers = min((values.shape[0] for values in stacked.values()), default=0)
    for layer in range(num_layers):
        for name, values in stacked.items():
            full = f"blocks.{layer}.{name}"
            if root.keeps(full):
                root.cache[full] = values[layer]


def _hook_or_identity(fn: Optional[HookFn], name: str) -> Callable[[Array], Array]:
    if fn is None:
        return lambda value: value
    return lambda value: apply_hook(fn, value, name)


def tap(hooks, name: str, value: Array) -> Array:
    """The hook point `name` on `value`: `value` itself when nothing is hooked (hooks None)."""
    return value if hooks is None else hooks(name, value)


def scope(hooks, prefix: str):
    """The hook points under `prefix`, or None when nothing is hooked."""
    return None if hooks is None else Scope(hooks, prefix)


def asks(hooks, name: str) -> bool:
    """Whether `name` is hooked or cached (False when nothing is: hooks None)."""
    return hooks is not None and hooks.asks(name)

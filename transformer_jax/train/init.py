"""A run's starting point: its random streams, its parameters and its fresh train state.

Every function here is pure in (model config, seed): the same seed gives the same parameters
alone, stacked with other seeds (replicas), or restored by an analysis.
"""
from __future__ import annotations

import enum
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import ModelConfig
from transformer_jax.model.transformer import VARIABLES, Transformer


class Stream(enum.IntEnum):
    """The random streams of a run, each `fold_in(key(seed), stream)`: no two seeds or streams
    share a key (deriving seed s's dropout from key(s + 1) would give it seed s+1's
    initialization). The data order is drawn by numpy from (seed, step), apart from these
    (`data.batching`)."""
    PARAMS = 1
    DROPOUT = 2


def seed_stream(seed: int, stream: Stream) -> jax.Array:
    return jax.random.fold_in(jax.random.key(seed), int(stream))


@functools.partial(jax.jit, static_argnums=1)
def seed_streams(seeds: jax.Array, stream: Stream) -> jax.Array:
    """[R] seeds -> [R] keys, seed_stream of each (one program, not one eager op per seed)."""
    return jax.vmap(lambda seed: seed_stream(seed, stream))(seeds)


def init_model(cfg: ModelConfig, seed: int) -> tuple[nnx.GraphDef, dict]:
    """(graphdef, params as a pure dict: the parameters and, with BatchNorm, its running
    statistics, which `steps.make_train_step` keeps out of the optimizer's hands).
    Initialization runs compiled: eagerly, the stacked layers' many small ops would cost seconds
    even for a tiny model."""
    return graphdef_of(cfg), _params_program(cfg)(seed_stream(seed, Stream.PARAMS))


def param_shapes(cfg: ModelConfig) -> dict:
    """init_model's params as shapes and dtypes (jax.ShapeDtypeStruct leaves): traced once per
    config in a process, nothing compiled; what a checkpoint of the model restores into."""
    return jax.tree.map(lambda leaf: leaf, _param_shapes(cfg))  # a copy the caller may change


def state_shapes(cfg: ModelConfig, tx) -> dict:
    """A fresh train state's shapes and dtypes (one seed's of init_states), nothing compiled:
    what a checkpoint restores into and what lowering a train step needs."""
    params = param_shapes(cfg)
    return {"params": params, "opt_state": jax.eval_shape(tx.init, params),
            "step": jax.ShapeDtypeStruct((), jnp.int32)}


def init_states(cfg: ModelConfig, tx, seeds: Sequence[int]) -> tuple[nnx.GraphDef, dict]:
    """(graphdef, the fresh train states of runs that differ only in seed, stacked on a leading
    replica axis [R, ...]): for each seed, init_model's parameters, `tx.init` of them and step 0.
    One compiled program for all of them (vmapped over the seeds): initializing, stacking and
    the optimizer's zeros eagerly would compile a small program per shape, ~1.5 s per variant."""
    return graphdef_of(cfg), states_initializer(cfg, tx)(jnp.asarray(seeds, jnp.int32))


def states_initializer(cfg: ModelConfig, tx):
    """init_states' program: [R] int32 seeds -> their stacked fresh train states (a new jitted
    function at each call: `train.programs` keeps one per model and optimizer)."""
    def make(seed):
        params = _seed_params(cfg, seed)
        return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}

    return jax.jit(jax.vmap(make))


def init_params(cfg: ModelConfig, seeds: Sequence[int]) -> dict:
    """init_model's parameters for each of `seeds`, stacked [R, ...], from one compiled program
    (init_model once per seed traces and looks up a program each time, ~0.5 s)."""
    return _stacked_params_program(cfg)(jnp.asarray(seeds, jnp.int32))


# The programs above, one per model config in a process: a jitted function made anew at each
# call traces the model again (0.1-0.5 s for a tiny one), where the same one's caches hold the
# trace and the executable. Configs are frozen dataclasses; GraphDefs are immutable.
KEPT = 16


@functools.lru_cache(maxsize=KEPT)
def _params_program(cfg: ModelConfig):
    return jax.jit(functools.partial(_initial_params, cfg))


@functools.lru_cache(maxsize=KEPT)
def _stacked_params_program(cfg: ModelConfig):
    return jax.jit(jax.vmap(lambda seed: _seed_params(cfg, seed)))


@functools.lru_cache(maxsize=KEPT)
def _param_shapes(cfg: ModelConfig) -> dict:
    key = jax.eval_shape(lambda: seed_stream(0, Stream.PARAMS))
    return jax.eval_shape(_params_program(cfg), key)


@jax.jit
def take_replica(tree, j: jax.Array):
    """Replica j of a stacked tree (one program per tree structure, where indexing each leaf
    eagerly would compile a slice per leaf shape)."""
    return jax.tree.map(lambda x: x[j], tree)


def _seed_params(cfg: ModelConfig, seed) -> dict:
    return _initial_params(cfg, seed_stream(seed, Stream.PARAMS))


@functools.lru_cache(maxsize=KEPT)
def graphdef_of(cfg: ModelConfig) -> nnx.GraphDef:
    """The model's structure without its values (nnx.merge of it and params is the model)."""
    return nnx.graphdef(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(params=0))))


def _initial_params(cfg: ModelConfig, key: jax.Array) -> dict:
    return nnx.to_pure_dict(nnx.state(Transformer(cfg, rngs=nnx.Rngs(params=key)), VARIABLES))

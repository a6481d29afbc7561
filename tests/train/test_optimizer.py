"""`steps.make_optimizer` against hand formulas: the warm-up + cosine schedule, the weight-decay
mask (kernels, embedding and position tables decayed; biases and norm parameters not), global-norm
clipping, and AdamW's update itself, step by step in numpy."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax import NormType, Norm, Position, Transformer
from transformer_jax.train import steps
from transformer_jax.config import TrainConfig

PEAK, END_FACTOR = 0.1, 0.1
DECAYED_NAMES = {"kernel", "embedding", "table"}  # weight matrices; the rest (biases, norm
NOT_DECAYED_NAMES = {"bias", "scale", "alpha"}  # scales and offsets, DyT's alpha) never decay


def lr_by_hand(step: int, warmup: int, total: int) -> float:
    """make_optimizer's docstring: lr(t) = peak·(t + 1)/(warmup + 1) for t <= warmup, then a
    half cosine from peak down to peak·end_learning_rate_factor at t = num_steps."""
    if step <= warmup:
        return PEAK * (step + 1) / (warmup + 1)
    end = PEAK * END_FACTOR
    progress = min(step - warmup, total - warmup) / (total - warmup)
    return end + (PEAK - end) * 0.5 * (1 + math.cos(math.pi * progress))


def train_config(**changes) -> TrainConfig:
    values = dict(num_steps=20, warmup_steps=4, learning_rate=PEAK,
                  end_learning_rate_factor=END_FACTOR, weight_decay=0.1, b1=0.9, b2=0.99,
                  grad_clip_norm=1.0)
    return TrainConfig(**{**values, **changes})


@pytest.mark.parametrize("warmup, total", [(4, 20), (0, 10), (1, 3)])
def test_schedule_is_warmup_then_cosine(warmup, total):
    _, schedule = steps.make_optimizer(train_config(warmup_steps=warmup, num_steps=total))
    for step in range(total + 1):
        assert float(schedule(step)) == pytest.approx(lr_by_hand(step, warmup, total), rel=1e-5,
                                                      abs=1e-9), step
    assert float(schedule(0)) > 0  # the first step already learns
    assert float(schedule(warmup)) == pytest.approx(PEAK)
    assert float(schedule(total)) == pytest.approx(PEAK * END_FACTOR)


def model_params() -> dict:
    """Parameter shapes of a model with every kind of parameter (learned positions, qk-norm,
    DyT norms, pre-norm's final norm), filled with nonzero numbers."""
    cfg = tiny_config(position=Position.LEARNED, qk_norm=True, norm=Norm.PRE,
                      norm_type=NormType.DYT)
    shapes = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))),
                                        nnx.Param))
    rng = np.random.default_rng(0)
    return jax.tree.map(lambda s: jnp.asarray(rng.uniform(0.5, 1.5, s.shape), jnp.float32), shapes)


def leaf_name(path) -> str:
    return path[-1].key


def test_weight_decay_applies_to_weight_matrices_only():
    """With zero gradients AdamW's step is the decay alone: -lr·wd·p on kernels, embedding and
    position tables; nothing on biases, norm scales and DyT's alpha."""
    params = model_params()
    names = {leaf_name(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)}
    assert names == DECAYED_NAMES | NOT_DECAYED_NAMES, names  # every kind is in the test
    train = train_config(weight_decay=0.3)
    tx, schedule = steps.make_optimizer(train)
    state = tx.init(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    update = jax.jit(tx.update)  # one program for the many small leaves
    for step in range(3):
        updates, state = update(zeros, state, params)
        lr = float(schedule(step))
        assert lr > 0
        for (path, u), p in zip(jax.tree_util.tree_leaves_with_path(updates),
                                jax.tree.leaves(params)):
            expected = -lr * 0.3 * np.asarray(p) if leaf_name(path) in DECAYED_NAMES else 0 * p
            np.testing.assert_allclose(u, expected, rtol=1e-6, atol=0,
                                       err_msg=f"step {step} {jax.tree_util.keystr(path)}")


def nest(flat: dict) -> dict:
    """{'dense/kernel': x} -> {'dense': {'kernel': x}}: a pure dict like a model's params."""
    out: dict = {}
    for name, x in flat.items():
        module, leaf = name.split("/")
        out.setdefault(module, {})[leaf] = jnp.asarray(x)
    return out


def adamw_by_hand(params: dict, grads_per_step: list[dict], train: TrainConfig) -> list[dict]:
    """AdamW (Loshchilov & Hutter; optax's eps=1e-8 outside the root) after global-norm
    clipping, with the decay on DECAYED_NAMES only; params after each step, numpy float64."""
    flat = {k: np.asarray(v, np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in flat.items()}
    v = {k: np.zeros_like(x) for k, x in flat.items()}
    out = []
    for step, grads in enumerate(grads_per_step):
        g = {k: np.asarray(x, np.float64) for k, x in grads.items()}
        norm = math.sqrt(sum(np.sum(x ** 2) for x in g.values()))
        if train.grad_clip_norm > 0 and norm > train.grad_clip_norm:
            g = {k: x * train.grad_clip_norm / norm for k, x in g.items()}
        lr, t = lr_by_hand(step, train.warmup_steps, train.num_steps), step + 1
        for k in flat:
            m[k] = train.b1 * m[k] + (1 - train.b1) * g[k]
            v[k] = train.b2 * v[k] + (1 - train.b2) * g[k] ** 2
            adam = (m[k] / (1 - train.b1 ** t)) / (np.sqrt(v[k] / (1 - train.b2 ** t)) + 1e-8)
            decay = train.weight_decay * flat[k] if k.split("/")[-1] in DECAYED_NAMES else 0.0
            flat[k] = flat[k] - lr * (adam + decay)
        out.append(dict(flat))
    return out


@pytest.mark.parametrize("clip", [1.0, 0.0])  # 0 disables clipping
def test_updates_equal_clipped_adamw_by_hand(clip):
    """Six steps whose gradient norms alternate above and below the clipping norm (clipping
    changes Adam's step only through the ratio of successive gradients: so several steps)."""
    rng = np.random.default_rng(1)
    names = ("dense/kernel", "dense/bias", "norm/scale", "embed/embedding", "pos/table")
    shapes = ((3, 4), (4,), (4,), (5, 4), (6, 4))
    flat = {n: rng.normal(0, 1, s).astype(np.float32) for n, s in zip(names, shapes)}
    grads = []
    for norm in (5.0, 0.3, 2.0, 0.05, 10.0, 0.5):
        g = {n: rng.normal(0, 1, s) for n, s in zip(names, shapes)}
        scale = norm / math.sqrt(sum(np.sum(x ** 2) for x in g.values()))
        grads.append({n: (x * scale).astype(np.float32) for n, x in g.items()})
    train = train_config(num_steps=8, warmup_steps=2, grad_clip_norm=clip, weight_decay=0.2)
    expected = adamw_by_hand(flat, grads, train)

    tx, _ = steps.make_optimizer(train)
    params = nest(flat)
    state, update = tx.init(params), jax.jit(tx.update)
    for step, g in enumerate(grads):
        updates, state = update(nest(g), state, params)
        params = jax.tree.map(lambda p, u: p + u, params, updates)
        for name in names:
            a, b = name.split("/")
            np.testing.assert_allclose(params[a][b], expected[step][name], rtol=2e-5, atol=2e-6,
                                       err_msg=f"step {step} {name}")
    unclipped = adamw_by_hand(flat, grads, train_config(num_steps=8, warmup_steps=2,
                                                        grad_clip_norm=0.0, weight_decay=0.2))
    gap = max(np.max(np.abs(expected[-1][n] - unclipped[-1][n])) for n in names)
    assert (gap > 1e-3) == (clip > 0), gap  # the case is one where clipping shows

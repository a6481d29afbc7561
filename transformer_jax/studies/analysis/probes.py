"""Step-0 probes: the mechanisms behind each claim, measured at initialization in seconds.

- `score_scale`: var(q·k) grows like d_k; dividing by √d_k keeps it at 1, and the softmax out of
  saturation (max weight, entropy).
- `grad_norm_by_depth`: per-layer gradient norms of post- vs pre-norm stacks (Xiong et al. 2020).
- `token_similarity_by_depth`: how alike token representations become layer by layer, with and
  without residuals (rank collapse, Dong et al. 2021).
- `permutation_gap`: an encoder without positions is permutation-equivariant; with any scheme it
  is not.
Each returns rows (for a markdown table) and can draw a PNG.
"""
from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from transformer_jax.config import Arch, ModelConfig, Norm, Position
from transformer_jax.model.transformer import Transformer, attention_mask
from transformer_jax.model.positions import sinusoidal_table
# markdown_table and plot_lines: experiment files use them, as probes' names
from transformer_jax.studies.render.markdown import markdown_table  # noqa: F401
from transformer_jax.studies.render.plots import plot_lines  # noqa: F401


def score_scale(head_dims: Sequence[int] = (16, 64, 256), length: int = 64, samples: int = 4096,
                seed: int = 0) -> list[tuple]:
    """Unit-variance random q, k: var(q·k), and the softmax over `length` keys, scaled or not.

    Rows: (d_k, var(q·k), var(q·k/√d_k), max weight unscaled, max weight scaled, normalized
    entropy unscaled, normalized entropy scaled).
    """
    rows = []
    for d in head_dims:
        kq, kk = jax.random.split(jax.random.key(seed + d))
        q = jax.random.normal(kq, (samples // length, 1, d))  # [S, 1, d]
        k = jax.random.normal(kk, (samples // length, length, d))  # [S, T, d]
        scores = jnp.einsum("sqd,skd->sqk", q, k)[:, 0]  # [S, T]
        stats = []
        for scale in (1.0, d ** -0.5):
            w = jax.nn.softmax(scores * scale, axis=-1)
            entropy = -jnp.sum(w * jnp.log(w + 1e-30), -1) / jnp.log(length)
            stats.append((float(w.max(-1).mean()), float(entropy.mean())))
        rows.append((d, float(scores.var()), float((scores * d ** -0.5).var()),
                     stats[0][0], stats[1][0], stats[0][1], stats[1][1]))
    return rows


def _tiny(**overrides) -> ModelConfig:
    base = dict(vocab_size=32, num_outputs=32, d_model=64, num_heads=4, num_layers=2, d_ff=256,
                arch=Arch.DECODER, position=Position.SINUSOIDAL, norm=Norm.POST)
    return ModelConfig(**{**base, **overrides})


def _batch(cfg: ModelConfig, batch: int = 16, length: int = 32, seed: int = 0):
    tokens = jax.random.randint(jax.random.key(seed), (batch, length + 1), 1, cfg.vocab_size)
    return tokens[:, :-1], tokens[:, 1:]


def layer_grad_norms(cfg: ModelConfig, seed: int = 0) -> np.ndarray:
    """Per-layer gradient norm [num_layers] of the LM loss on random tokens, at initialization."""
    inputs, targets = _batch(cfg, seed=seed)

    @jax.jit
    def norms(key):
        graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=key)), nnx.Param)

        def loss(params):
            logits, _ = nnx.merge(graphdef, params)(inputs)
            return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

        grads = nnx.to_pure_dict(jax.grad(loss)(params))["layers"]
        return jnp.sqrt(sum(jnp.sum(jnp.square(g).reshape(cfg.num_layers, -1), 1)
                            for g in jax.tree.leaves(grads)))

    return np.asarray(norms(jax.random.key(seed)))


def grad_norm_by_depth(depths: Sequence[int] = (2, 4, 6, 8, 12)) -> dict[str, dict[int, np.ndarray]]:
    """{'post': {depth: per-layer norms}, 'pre': {...}}."""
    return {norm.value: {d: layer_grad_norms(_tiny(norm=norm, num_layers=d)) for d in depths}
            for norm in (Norm.POST, Norm.PRE)}


def token_similarity_by_depth(residual: bool, depth: int = 12, seed: int = 0,
                              norm: Norm = Norm.PRE) -> np.ndarray:
    """Mean pairwise cosine similarity of token vectors after each layer: [depth + 1] (0 = input)."""
    cfg = _tiny(num_layers=depth, residual=residual, norm=norm, arch=Arch.ENCODER)
    model = Transformer(cfg, rngs=nnx.Rngs(params=seed))
    inputs, _ = _batch(cfg, seed=seed)
    x = model.embed(inputs) * cfg.d_model ** 0.5  # [B, T, D], as in Transformer.__call__
    x = x + sinusoidal_table(x.shape[1], cfg.d_model)
    graphdef, stacked = nnx.split(model.layers.blocks)
    sims = [_mean_cosine(x)]
    for layer in range(depth):
        block = nnx.merge(graphdef, jax.tree.map(lambda p: p[layer], stacked))
        x, _ = block(x, mask=attention_mask(None, x.shape[1], causal=False))
        sims.append(_mean_cosine(x))
    return np.asarray(sims)


def _mean_cosine(x: jax.Array) -> float:
    unit = x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-9)  # [B, T, D]
    sim = jnp.einsum("btd,bsd->bts", unit, unit)
    t = x.shape[1]
    return float((sim.sum((1, 2)) - t).mean() / (t * (t - 1)))


def permutation_gap(position: Position, seed: int = 0) -> float:
    """max |f(P·x) - P·f(x)| for a tiny bidirectional encoder with `position` at
    initialization (0 = exactly permutation-equivariant)."""
    return model_permutation_gap(_tiny(arch=Arch.ENCODER, position=position), seed)


def model_permutation_gap(cfg: ModelConfig, seed: int = 0) -> float:
    """max |f(P·x) - P·f(x)| over the logits of `cfg`'s model at initialization (params from
    `seed`; an encoder with a token head, one output per position), on 4 random sequences of
    12 tokens and one random permutation of their positions."""
    inputs, _ = _batch(cfg, batch=4, length=12, seed=seed)
    perm = np.random.default_rng(seed).permutation(inputs.shape[1])
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=seed)))
    return float(_permutation_gap_fn(graphdef)(params, inputs, jnp.asarray(perm)))


@functools.lru_cache(maxsize=16)
def _permutation_gap_fn(graphdef: nnx.GraphDef):
    """(params, inputs [B, T], perm [T]) -> the gap: one compiled program per model (its ops
    one at a time take seconds on a CPU)."""
    def gap(params, inputs, perm):
        model = nnx.merge(graphdef, params)
        out, _ = model(inputs)
        out_perm, _ = model(inputs[:, perm])
        return jnp.abs(out_perm - out[:, perm]).max()
    return jax.jit(gap)

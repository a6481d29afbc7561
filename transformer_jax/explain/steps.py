"""The numbers behind `python -m transformer_jax.trace`: one attention step through the project's
own modules, as pure functions that return numpy arrays, so that `trace.py` can print them and
the tests can check each one against numpy on the same weights.

All of it runs as one compiled program: compiling op by op (eager JAX) would spend many seconds of
a 2-core CPU on a trace whose arithmetic takes microseconds.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.model import positions as pos
from transformer_jax.model.attention import (MultiHeadAttention, attention_logits,
                                             scaled_dot_product_attention)
from transformer_jax.model.blocks import Block
from transformer_jax.config import Arch, ConfigError, ModelConfig, Norm, Position, parse_enum
from transformer_jax.model.transformer import attention_mask, count_params

VOCAB = ("dog", "bites", "man", "the", "a", "cat", "sees", "bird", "big", "small", "chases", "runs")
MAX_WORDS = 12
SCALE_DIMS = (8, 64, 512)  # part 2: d_k of the random q, k
SHIFTS = 4  # part 4: positions the rotary pair moves by
# Block's sub-layers and norms in the order Block.__call__ calls them (absent ones are None).
BLOCK_STAGES = ("norm_before_attention", "attention", "norm_after_attention",
                "norm_before_feed_forward", "feed_forward", "norm_after_feed_forward")
Numbers = dict  # name -> np.ndarray


@dataclasses.dataclass(frozen=True)
class TraceConfig:
    """What the command line chooses; validated here, so bad input is one ConfigError line."""

    sentence: str
    d_model: int = 8
    heads: int = 2
    seed: int = 0
    token: Optional[str] = None  # a word of the sentence or its 0-based position; None: the last
    position: Position = Position.SINUSOIDAL  # of the input vectors (parts 1 and 5)
    norm: Norm = Norm.POST  # placement in the block of part 5

    def __post_init__(self):
        object.__setattr__(self, "position", parse_enum(Position, self.position, "--position"))
        object.__setattr__(self, "norm", parse_enum(Norm, self.norm, "--norm"))
        for name in ("d_model", "heads"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"--{name}={getattr(self, name)} must be a positive integer")
        if self.d_model % self.heads:
            valid = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            raise ConfigError(f"--heads={self.heads} does not divide --d_model={self.d_model}; "
                              f"valid --heads: {', '.join(map(str, valid))}")
        if (self.d_model // self.heads) % 2:
            raise ConfigError(f"--d_model/--heads={self.d_model}/{self.heads} is odd; rotary "
                              f"positions (part 4) rotate pairs: choose an even head dimension")
        self.token_index  # noqa: B018  (checks the sentence and the token)

    @property
    def words(self) -> tuple[str, ...]:
        words = tuple(self.sentence.lower().split())
        if not words:
            raise ConfigError(f"the sentence is empty; give words of the vocabulary: "
                              f"{', '.join(VOCAB)}")
        for word in words:
            if word not in VOCAB:
                raise ConfigError(f"unknown word {word!r}; the vocabulary: {', '.join(VOCAB)}")
        if len(words) > MAX_WORDS:
            raise ConfigError(f"the sentence has {len(words)} words; at most {MAX_WORDS}")
        return words

    @property
    def tokens(self) -> np.ndarray:
        return np.asarray([VOCAB.index(w) for w in self.words], np.int32)  # [T]

    @property
    def token_index(self) -> int:
        words, token = self.words, self.token
        if token is None:
            return len(words) - 1
        if token.isdigit() and int(token) < len(words):
            return int(token)
        if token.lower() in words:
            return words.index(token.lower())
        raise ConfigError(f"--token={token!r} is not a word of the sentence nor a position "
                          f"0..{len(words) - 1}; the words: {', '.join(words)}")

    def model_config(self, position: Optional[Position] = None) -> ModelConfig:
        """A one-block bidirectional encoder (part 5 adds the causal mask itself)."""
        return ModelConfig(vocab_size=len(VOCAB), num_outputs=len(VOCAB), d_model=self.d_model,
                           num_heads=self.heads, num_layers=1, d_ff=4 * self.d_model,
                           position=position or self.position, norm=self.norm,
                           arch=Arch.ENCODER, max_len=MAX_WORDS)


class TraceModel(nnx.Module):
    """The modules the trace runs: token embeddings as `Transformer` makes them, a learned
    position table (used when a part asks for learned positions) and one `Block`."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab_size, cfg.d_model, rngs=rngs,  # as in Transformer
                               embedding_init=jax.nn.initializers.normal(cfg.d_model ** -0.5))
        self.learned = pos.LearnedPositions(cfg.max_len, cfg.d_model, rngs=rngs)
        self.block = Block(cfg, rngs=rngs)


def embed(model: TraceModel, tokens: jax.Array, position: Position):
    """Token vectors [B, T, D] for tokens [B, T], and the position scheme where
    `Transformer.__call__` puts it: added to x (sinusoidal, learned), a q/k rotation (rotary) or
    a logit bias (ALiBi)."""
    cfg, length = model.cfg, tokens.shape[-1]
    x = model.embed(tokens) * cfg.d_model ** 0.5  # [B, T, D], as in Transformer.__call__
    if position is Position.SINUSOIDAL:
        x = x + pos.sinusoidal_table(length, cfg.d_model)
    elif position is Position.LEARNED:
        x = x + model.learned(length)
    bias = pos.alibi_bias(cfg.num_heads, length, length) if position is Position.ALIBI else None
    rotate = pos.rotary_qk_transform(length, cfg.d_k) if position is Position.ROTARY else None
    return x, bias, rotate


def trace_numbers(trace: TraceConfig, queries: int = 256, keys: int = 32
                  ) -> tuple[TraceModel, dict]:
    """The model (initialized from trace.seed) and the numbers of parts 1, 2, 4 and 5 (part 3 is
    `head_shapes`): {"steps", "flow", "scale", "permutation", "rotary", "causal"}, each a dict of
    numpy arrays, "sinusoidal" (the table's first T rows) and "scale_samples" (queries, keys).
    Initialization and all parts are one compiled program (one compile: ~4 s of CPU, where two
    took ~5)."""
    samples = score_samples(trace.seed, queries, keys)
    model, found = _numbers(jax.random.key(trace.seed), jnp.asarray(trace.tokens), samples,
                            cfg=trace.model_config(), position=trace.position,
                            token=trace.token_index)
    found = jax.device_get(found)
    found["flow"] = flow(found["steps"], trace.token_index)
    found["permutation"] = permutation(trace.tokens, found["permutation"])
    found["rotary"] = rotary_shift(found["rotary"], trace.token_index, 0)
    found["scale_samples"] = (queries, keys)
    return model, found


@functools.partial(nnx.jit, static_argnames=("cfg", "position", "token"))
def _numbers(key, tokens, samples, *, cfg, position, token):
    model = TraceModel(cfg, rngs=nnx.Rngs(params=key))
    steps = four_steps(model, tokens, position)
    return model, dict(steps=steps, scale=softmax_stats(samples),
                permutation={p.value: both_orders(model, tokens, p) for p in Position},
                rotary=rotated_scores(steps["q"][token, 0], steps["k"][0, 0], tokens.shape[0]),
                causal=causal_block(model, tokens, position),
                sinusoidal=pos.sinusoidal_table(tokens.shape[0], model.cfg.d_model))


# --- part 1: the four steps ---------------------------------------------------------------------

def four_steps(model: TraceModel, tokens: jax.Array, position: Position) -> dict:
    """x; W_q, W_k, W_v -> Q, K, V [T, H, d_k]; Q·Kᵀ and ÷√d_k [H, T, T]; softmax; weights·V;
    W_o. `module_output` is MultiHeadAttention's own call on the same x (must equal `output`)."""
    x, bias, rotate = embed(model, tokens[None], position)
    attention = model.block.attention
    q, k, v = attention.project(x)  # [1, T, H, d_k] each
    if rotate is not None:
        q, k = rotate(q, k)
    raw = attention_logits(q, k, scale=1.0)  # Q·Kᵀ [1, H, T, T]
    scaled = attention_logits(q, k, bias=bias)  # ÷√d_k (+ ALiBi's bias)
    heads, weights = scaled_dot_product_attention(q, k, v, bias=bias)  # [1, T, H, d_k], [1, H, T, T]
    merged = heads.reshape(x.shape)  # concat heads: [1, T, D]
    module_output, _ = attention(x, bias=bias, qk_transform=rotate)
    linear = {name: getattr(attention, name) for name in ("query", "key", "value", "out")}
    return dict(x=x[0], q=q[0], k=k[0], v=v[0], raw=raw[0], scaled=scaled[0], weights=weights[0],
                row_sums=weights[0].sum(-1), heads=heads[0], output=attention.out(merged)[0],
                module_output=module_output[0],
                **{f"kernel_{n}": m.kernel[...] for n, m in linear.items()},
                **{f"bias_{n}": m.bias[...] for n, m in linear.items()})


def flow(steps: dict, i: int) -> dict:
    """Token i's view of part 1, per head: its query, its scores against every key, its row of
    weights, each value's share w_ij·v_j [H, T, d_k] and their sum, the token's new head vectors."""
    shares = steps["weights"][:, i, :, None] * steps["v"].transpose(1, 0, 2)  # [H, T, d_k]
    return dict(query=steps["q"][i], raw=steps["raw"][:, i], scaled=steps["scaled"][:, i],
                weights=steps["weights"][:, i], shares=shares, blend=shares.sum(1))


# --- part 2: why ÷√d_k --------------------------------------------------------------------------

def score_samples(seed: int, queries: int, keys: int, dims=SCALE_DIMS) -> dict:
    """{d_k: (q [queries, 1, 1, d_k], k [queries, keys, 1, d_k])}, unit-variance normal (numpy's
    generator: drawing 4 M numbers with JAX's would cost more than the whole trace)."""
    rng = np.random.default_rng(seed)
    return {d: (rng.standard_normal((queries, 1, 1, d), np.float32),
                rng.standard_normal((queries, keys, 1, d), np.float32)) for d in dims}


def softmax_stats(samples: dict) -> dict:
    """For each d_k's q [B, 1, 1, d_k] and k [B, Tk, 1, d_k] (B queries, one head): the
    variance of the raw and scaled scores, and per scale (raw, scaled) the softmax's mean max
    weight, mean entropy (nats; uniform = ln Tk) and mean Frobenius norm of its Jacobian
    ∂softmax/∂scores. {d_k: {"var_raw": ..., "grad_scaled": ...}}."""
    scores = jnp.stack([attention_logits(q, k, scale=scale)[:, 0, 0]  # [B, Tk] each
                        for q, k in samples.values() for scale in (1.0, None)])  # None: 1/√d_k
    w = jax.nn.softmax(scores, axis=-1)  # [2·dims, B, Tk]
    jacobian = jax.vmap(jax.vmap(jax.jacrev(jax.nn.softmax)))(scores)  # [2·dims, B, Tk, Tk]
    stats = dict(var=scores.var((1, 2)), max_weight=w.max(-1).mean(-1),
                 entropy=-jnp.sum(jax.scipy.special.xlogy(w, w), -1).mean(-1),
                 grad=jnp.sqrt(jnp.sum(jacobian ** 2, (2, 3))).mean(-1))  # [2·dims] each
    return {d: {f"{name}_{scale}": value[2 * n + s]
                for name, value in stats.items() for s, scale in enumerate(("raw", "scaled"))}
            for n, d in enumerate(samples)}


# --- part 3: the shapes of multi-head attention -------------------------------------------------

def head_shapes(d_model: int = 512, heads: int = 8, length: int = 3) -> dict:
    """Every array's shape through MultiHeadAttention(d_model, heads) on x [1, length, d_model]
    (abstract evaluation: no arithmetic), and the parameter counts of `heads` heads and of one."""
    abstract = lambda h: nnx.eval_shape(lambda: MultiHeadAttention(d_model, h, rngs=nnx.Rngs(0)))
    module = abstract(heads)
    graphdef, state = nnx.split(module)

    def stages(state, x):
        attention = nnx.merge(graphdef, state)
        q, k, v = attention.project(x)
        heads_out, weights = scaled_dot_product_attention(q, k, v)
        merged = heads_out.reshape(x.shape)
        return {"x": x, "W_q": attention.query.kernel[...], "Q = x·W_q": attention.query(x),
                "Q split into heads": q, "Q·Kᵀ ÷√d_k": attention_logits(q, k),
                "softmax weights": weights, "weights·V": heads_out, "heads concatenated": merged,
                "W_o": attention.out.kernel[...], "output": attention.out(merged)}

    shapes = jax.eval_shape(stages, state, jax.ShapeDtypeStruct((1, length, d_model), jnp.float32))
    return dict(shapes={k: tuple(v.shape) for k, v in shapes.items()},
                params={heads: count_params(module), 1: count_params(abstract(1))})


# --- part 4: positions --------------------------------------------------------------------------

def both_orders(model: TraceModel, tokens: jax.Array, position: Position) -> dict:
    """The block's outputs [T, D] for the sentence and for it reversed, under `position`."""
    x, bias, rotate = embed(model, jnp.stack([tokens, tokens[::-1]]), position)  # [2, T, D]
    out = model.block(x, bias=bias, qk_transform=rotate)[0]
    return dict(output=out[0], reversed=out[1])


def permutation(tokens: np.ndarray, outputs: dict) -> dict:
    """`perm` with reversed = tokens[perm], and per scheme max |out(reversed) - out[perm]|."""
    perm = np.arange(len(tokens))[::-1].copy()
    diffs = {p: float(np.max(np.abs(o["reversed"] - o["output"][perm])))
             for p, o in outputs.items()}
    return dict(perm=perm, max_diff=diffs, outputs=outputs)


def rotated_scores(q: jax.Array, k: jax.Array, length: int) -> jax.Array:
    """q [d] and k [d] rotated by `apply_rotary` to every position < length + SHIFTS:
    scores[m, n] = rot(q, m)·rot(k, n)."""
    length += SHIFTS
    angles = pos.rotary_angles(length, q.shape[-1])  # [P, d/2]
    at_every_position = lambda v: pos.apply_rotary(  # noqa: E731
        jnp.broadcast_to(v, (1, length, 1, v.shape[-1])), angles)[0, :, 0]  # [P, d]
    return at_every_position(q) @ at_every_position(k).T  # [P, P]


def rotary_shift(scores: np.ndarray, i: int, j: int) -> dict:
    """q at position i+s and k at j+s for s = 0..SHIFTS-1: the score stays; with only q moving
    (i+s, j) it changes."""
    s = np.arange(SHIFTS)
    return dict(shift=s, i=i, j=j, both_move=scores[i + s, j + s], query_moves=scores[i + s, j])


# --- part 5: the causal mask and one block ------------------------------------------------------

def causal_block(model: TraceModel, tokens: jax.Array, position: Position) -> dict:
    """One pass of x through the block with the causal mask: the mask, the weights the block's
    attention used, and each sub-layer's and norm's input and output ("stage/in", "stage/out")
    for those present (`BLOCK_STAGES` gives their order)."""
    x, bias, rotate = embed(model, tokens[None], position)
    block = nnx.merge(*nnx.split(model.block))  # a copy: the taps below replace its sub-modules
    mask = attention_mask(None, x.shape[1], causal=True)  # [1, 1, T, T]
    found = {}
    for name in BLOCK_STAGES:
        inner = getattr(block, name)
        if inner is not None:
            setattr(block, name, _Tap(name, inner, found))
    output, probe = block(x, mask=mask, bias=bias, qk_transform=rotate, probe=True)
    return found | dict(x=x[0], mask=mask[0, 0], weights=probe.weights[0], output=output[0])


class _Tap:
    """Calls a block's sub-layer or norm and keeps its input and output."""

    def __init__(self, name, inner, found):
        self.name, self.inner, self.found = name, inner, found

    def __call__(self, x, *args, **kwargs):
        out = self.inner(x, *args, **kwargs)
        y = out[0] if isinstance(out, tuple) else out  # attention returns (y, probe)
        self.found[f"{self.name}/in"], self.found[f"{self.name}/out"] = x[0], y[0]
        return out


def rms(x: np.ndarray) -> np.ndarray:
    """Root mean square over the last axis: the scale of each token's vector."""
    return np.sqrt(np.mean(np.square(x), -1))

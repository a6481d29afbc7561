"""The numbers behind `python -m transformer_jax.trace`: one attention step of the project's own
`Transformer` (one block, under each positional scheme), read at its named hook points
(`model.hooks.run_with_cache`) and worked by hand beside them (Q·Kᵀ, ÷√d_k, softmax, weights·V,
W_o), as pure functions that return numpy arrays, so that `trace.py` can print them and the
tests can check each one against numpy on the same weights. The trace runs no forward pass of
its own: positions and norms act where the model puts them, and where the hand steps miss what
the model did, the printout's agreement lines show the difference.

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

from transformer_jax.config import Arch, ConfigError, ModelConfig, Norm, Position, parse_enum
from transformer_jax.model import positions as pos
from transformer_jax.model.attention import attention_logits
from transformer_jax.model.hooks import hook_names, run_with_cache
from transformer_jax.model.pretrained import with_config
from transformer_jax.model.transformer import Transformer, count_params

VOCAB = ("dog", "bites", "man", "the", "a", "cat", "sees", "bird", "big", "small", "chases", "runs")
MAX_WORDS = 12
SCALE_DIMS = (8, 64, 512)  # part 2: d_k of the random q, k
SHIFTS = 4  # part 4: positions the rotary pair moves by
LAYER = "blocks.0."  # the trace's model has one block: its hook points' prefix
# Each hand step of part 1 and the model's hook point (in block 0) that must equal it.
MODEL_POINTS = {"raw": "attn.logits", "scaled": "attn.scaled_logits", "weights": "attn.weights",
                "heads": "attn.head_out", "output": "attn.out"}
# Block 0's sub-layers and norms as its hook points show them, per norm placement, in the order
# Block.__call__ calls them: (the points whose sum is the input, the point of the output).
# Post-LN's norms read the residual sum x + branch, which has no point of its own.
STAGES = {
    Norm.POST: {"attention": (("resid_pre",), "attn.out"),
                "norm_after_attention": (("resid_pre", "attn.out"), "ln1.out"),
                "feed_forward": (("resid_mid",), "mlp.out"),
                "norm_after_feed_forward": (("resid_mid", "mlp.out"), "ln2.out")},
    Norm.PRE: {"norm_before_attention": (("resid_pre",), "ln1.out"),
               "attention": (("ln1.out",), "attn.out"),
               "norm_before_feed_forward": (("resid_mid",), "ln2.out"),
               "feed_forward": (("ln2.out",), "mlp.out")},
    Norm.NONE: {"attention": (("resid_pre",), "attn.out"),
                "feed_forward": (("resid_mid",), "mlp.out")},
}


@dataclasses.dataclass(frozen=True)
class TraceConfig:
    """What the command line chooses; validated here, so bad input is one ConfigError line."""

    sentence: str
    d_model: int = 8
    heads: int = 2
    seed: int = 0
    token: Optional[str] = None  # a word of the sentence or its 0-based position; None: the last
    position: Position = Position.SINUSOIDAL  # of the input vectors (parts 1 and 5)
    norm: Norm = Norm.POST  # placement in the block (parts 1, 4 and 5)

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

    def model_config(self) -> ModelConfig:
        """A one-block bidirectional encoder (part 5 runs it as a causal decoder)."""
        return ModelConfig(vocab_size=len(VOCAB), num_outputs=len(VOCAB), d_model=self.d_model,
                           num_heads=self.heads, num_layers=1, d_ff=4 * self.d_model,
                           position=self.position, norm=self.norm, arch=Arch.ENCODER,
                           max_len=MAX_WORDS)


def scheme_models(cfg: ModelConfig, key: jax.Array) -> dict[str, Transformer]:
    """A `Transformer` of `cfg` under each positional scheme ({position.value: model}), all with
    the same parameters, drawn from `key` once (with the learned position table, which only the
    learned scheme reads): part 4 compares the schemes on the same weights."""
    shared = Transformer(dataclasses.replace(cfg, position=Position.LEARNED),
                         rngs=nnx.Rngs(params=key))
    return {p.value: with_config(shared, position=p) for p in Position}


def trace_numbers(trace: TraceConfig, queries: int = 256, keys: int = 32
                  ) -> tuple[dict[Position, Transformer], dict]:
    """The models ({position: model}, initialized from trace.seed: `scheme_models`) and the
    numbers of parts 1, 2, 4 and 5 (part 3 is `head_shapes`): {"steps", "flow", "scale",
    "permutation", "rotary", "causal"}, each a dict of numpy arrays, "sinusoidal" (the table's
    first T rows) and "scale_samples" (queries, keys). Initialization and all parts are one
    compiled program: one compile, ~6 s of CPU on a 2-core EPYC; the command takes ~3 s with its
    compilation cache warm, most of it tracing the model's eight hooked passes."""
    samples = score_samples(trace.seed, queries, keys)
    models, found = _numbers(jax.random.key(trace.seed), jnp.asarray(trace.tokens), samples,
                             cfg=trace.model_config(), token=trace.token_index)
    found = jax.device_get(found)
    found["flow"] = flow(found["steps"], trace.token_index)
    found["permutation"] = permutation(trace.tokens, found["permutation"])
    found["rotary"] = rotary_shift(found["rotary"], trace.token_index, 0)
    found["scale_samples"] = (queries, keys)
    return {Position(p): model for p, model in models.items()}, found


@functools.partial(nnx.jit, static_argnames=("cfg", "token"))
def _numbers(key, tokens, samples, *, cfg, token):
    models = scheme_models(cfg, key)
    model = models[cfg.position.value]
    steps = four_steps(model, tokens)
    sinusoidal = cached(models[Position.SINUSOIDAL.value], tokens[None], ["embed.position"])
    return models, dict(
        steps=steps, scale=softmax_stats(samples),
        permutation={p: both_orders(m, tokens) for p, m in models.items()},
        rotary=rotated_scores(steps["q"][token, 0], steps["k"][0, 0], tokens.shape[0]),
        causal=causal_block(model, tokens), sinusoidal=sinusoidal["embed.position"])


def cached(model: Transformer, tokens: jax.Array, names) -> dict:
    """The model's activations at `names` for tokens [B, T], from one `run_with_cache` pass:
    block 0's hook points without their `blocks.0.` prefix, the embeddings' (`embed.*`) as
    they are."""
    full = {name: name if name.startswith("embed.") else LAYER + name for name in names}
    _, cache = run_with_cache(model, tokens, names=list(full.values()))
    return {name: cache[point] for name, point in full.items()}


# --- part 1: the four steps ---------------------------------------------------------------------

def four_steps(model: Transformer, tokens: jax.Array) -> dict:
    """Part 1 on tokens [T], from block 0's hook points: what its attention reads (x [T, D]: the
    embeddings, normed first with pre-norm) and its q, k, v [T, H, d_k] (rotated by rotary);
    from them, by hand (`by_hand`), Q·Kᵀ and ÷√d_k [H, T, T], softmax, weights·V [T, H, d_k]
    and W_o [T, D]; under "model" the model's own values of those steps (`MODEL_POINTS`)."""
    cfg = model.cfg
    (attention_input,), _ = STAGES[cfg.norm]["attention"]
    found = cached(model, tokens[None], [attention_input, "attn.q", "attn.k", "attn.v",
                                         *MODEL_POINTS.values()])
    found = {name: value[0] for name, value in found.items()}  # the batch of one
    attention = model.layers.block(0).attention
    q, k, v = found["attn.q"], found["attn.k"], found["attn.v"]
    hand = by_hand(q, k, v, attention.out, logit_bias(cfg, tokens.shape[0]))
    linear = {name: getattr(attention, name) for name in ("query", "key", "value", "out")}
    return dict(x=found[attention_input], q=q, k=k, v=v, **hand,
                row_sums=hand["weights"].sum(-1),
                model={step: found[point] for step, point in MODEL_POINTS.items()},
                **{f"kernel_{n}": m.kernel[...] for n, m in linear.items()},
                **{f"bias_{n}": m.bias[...] for n, m in linear.items()})


def by_hand(q: jax.Array, k: jax.Array, v: jax.Array, out: nnx.Module, bias) -> dict:
    """The steps written out on q, k, v [T, H, d_k]: Q·Kᵀ, ÷√d_k (+ bias [H, T, T]), softmax,
    weights·V, then concat·W_o + b_o with `out`'s kernel and bias."""
    raw = jnp.einsum("qhd,khd->hqk", q, k)  # Q·Kᵀ: [H, T, T]
    scaled = raw / jnp.sqrt(q.shape[-1]) + bias  # ÷√d_k
    weights = jax.nn.softmax(scaled, axis=-1)  # each row sums to 1
    heads = jnp.einsum("hqk,khd->qhd", weights, v)  # weights·V: [T, H, d_k]
    merged = heads.reshape(heads.shape[0], -1)  # concat heads: [T, H·d_k]
    return dict(raw=raw, scaled=scaled, weights=weights, heads=heads,
                output=merged @ out.kernel[...] + out.bias[...])


def logit_bias(cfg: ModelConfig, length: int):
    """What the hand step adds to Q·Kᵀ/√d_k: ALiBi's penalty [H, T, T], else 0. A scheme that
    acts on the logits and is missing here shows as a difference from `attn.scaled_logits`."""
    if cfg.position is Position.ALIBI:
        return pos.alibi_bias(cfg.num_heads, length, length)[0]
    return 0.0


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
    """Every array's shape through the attention of a one-block Transformer(d_model, heads) on
    tokens [1, length]: its hook points' (`hook_names`, abstract: no arithmetic), its kernels',
    and the two reshapes between them that no point shows (Q before the split into heads, the
    heads concatenated); and the attention's parameter counts with `heads` heads and with one."""
    model = abstract_model(d_model, heads, length)
    points = {name[len(LAYER):]: shape
              for name, shape in hook_names(model, length=length).items()}
    kernel = lambda name: getattr(attention_of(model), name).kernel.shape[1:]  # noqa: E731
    x, w_q, heads_out = points["resid_pre"], kernel("query"), points["attn.head_out"]
    shapes = {"x": x, "W_q": w_q, "Q = x·W_q": (*x[:-1], w_q[-1]),
              "Q split into heads": points["attn.q"], "Q·Kᵀ ÷√d_k": points["attn.scaled_logits"],
              "softmax weights": points["attn.weights"], "weights·V": heads_out,
              "heads concatenated": (*heads_out[:2], heads_out[2] * heads_out[3]),
              "W_o": kernel("out"), "output": points["attn.out"]}
    one_head = abstract_model(d_model, 1, length)
    return dict(shapes={k: tuple(v) for k, v in shapes.items()},
                params={h: count_params(attention_of(m)) for h, m in ((heads, model),
                                                                       (1, one_head))})


def abstract_model(d_model: int, heads: int, length: int) -> Transformer:
    """A one-block post-norm Transformer of that width as shapes only (nothing drawn)."""
    cfg = ModelConfig(vocab_size=len(VOCAB), num_outputs=len(VOCAB), d_model=d_model,
                      num_heads=heads, num_layers=1, d_ff=4 * d_model, norm=Norm.POST,
                      max_len=length)
    return nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))


def attention_of(model: Transformer) -> nnx.Module:
    """The attention of the model's one block (its parameters stacked [1, ...])."""
    return model.layers.blocks.attention


# --- part 4: positions --------------------------------------------------------------------------

def both_orders(model: Transformer, tokens: jax.Array) -> dict:
    """The block's outputs [T, D] (`resid_post`) for the sentence and for it reversed."""
    out = cached(model, jnp.stack([tokens, tokens[::-1]]), ["resid_post"])["resid_post"]
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

def causal_block(model: Transformer, tokens: jax.Array) -> dict:
    """The model as a causal decoder (the same weights) on tokens [T], from block 0's hook
    points: the mask it applied (True where a key's logit was kept), its attention weights,
    each sub-layer's and norm's input and output ("stage/in", "stage/out"; `STAGES` gives them
    in order), the block's input x and its output."""
    stages = STAGES[model.cfg.norm]
    names = {name for inputs, output in stages.values() for name in (*inputs, output)}
    names |= {"resid_pre", "resid_post", "attn.masked_logits", "attn.weights"}
    decoder = with_config(model, arch=Arch.DECODER)
    found = {n: v[0] for n, v in cached(decoder, tokens[None], sorted(names)).items()}
    blocked = jnp.finfo(found["attn.masked_logits"].dtype).min  # what the mask writes
    taps = {}
    for stage, (inputs, output) in stages.items():
        taps[f"{stage}/in"] = sum(found[n] for n in inputs)  # Post-LN's norms: x + branch
        taps[f"{stage}/out"] = found[output]
    return taps | dict(x=found["resid_pre"], mask=found["attn.masked_logits"][0] != blocked,
                       weights=found["attn.weights"], output=found["resid_post"])


def rms(x: np.ndarray) -> np.ndarray:
    """Root mean square over the last axis: the scale of each token's vector."""
    return np.sqrt(np.mean(np.square(x), -1))

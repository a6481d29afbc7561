"""Encoder and causal decoder stacks: embeddings (+ positions) → N blocks → (final norm) → head.

The N blocks are one stacked module scanned with `jax.lax.scan`, so compile time does not grow
with depth. Stacks of up to UNROLL_MAX_LAYERS layers are unrolled (the scan written out): on a
CPU that saves the loop's slicing of stacked parameters and gradients, 15-20 % of a small
model's step (measured: 2 layers 21.6 -> 17.3 ms, 6 layers 72.1 -> 60.2 ms), while deeper
stacks stay one compiled loop body. Positional schemes enter where they act: added to the
embeddings, as a q/k transform, or as a logit bias.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.model import initializers, positions as pos
from transformer_jax.model.attention import AttentionProbe, Mask
from transformer_jax.model.blocks import Block, compute_dtype, dropout, norm_layer
from transformer_jax.config import Head, ModelConfig, Norm, Position
from transformer_jax.model.dense import Dense
from transformer_jax.model.hook_points import LayerHooks, keep_layers, tap
from transformer_jax.model.norms import apply_norm

Array = jax.Array
UNROLL_MAX_LAYERS = 6  # deeper stacks are a loop: compile time flat in depth
# A model's state as the trainer keeps it (one pure dict): its parameters and, with BatchNorm,
# the running statistics that evaluation normalizes with.
VARIABLES = nnx.Any(nnx.Param, nnx.BatchStat)


def attention_mask(padding_mask: Optional[Array], length: int, causal: bool) -> Optional[Array]:
    """Boolean [B or 1, 1, T, T]: True where query i may attend to key j.

    padding_mask [B, T] (True = real token) blocks padded keys; causal blocks j > i.
    """
    mask = None
    if causal:
        mask = jnp.tril(jnp.ones((length, length), bool))[None, None]  # [1, 1, T, T]
    if padding_mask is not None:
        keys = padding_mask[:, None, None, :]  # [B, 1, 1, T]
        mask = keys if mask is None else mask & keys
    return mask


def structured_attention_mask(padding_mask: Optional[Array], length: int, causal: bool
                              ) -> Optional[Mask]:
    """`attention_mask` together with its parts (causal; real tokens per row), so that the fused
    path can mask without the dense [B, 1, T, T] array. The lengths assume right padding (real
    tokens first), which every batch format here has (`data/batching.py`)."""
    dense = attention_mask(padding_mask, length, causal)
    if dense is None:
        return None
    lengths = None if padding_mask is None else jnp.sum(padding_mask, axis=-1, dtype=jnp.int32)
    return Mask(dense, causal, lengths)  # lengths: [B]


class StackedBlocks(nnx.Module):
    """num_layers Blocks whose parameters are stacked on a leading [num_layers] axis."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        layer_keys = jax.random.split(rngs.params(), cfg.num_layers)
        self.blocks = nnx.vmap(lambda key: Block(cfg, rngs=nnx.Rngs(params=key)))(layer_keys)
        self.num_layers = cfg.num_layers

    def block(self, layer: int) -> Block:
        """Layer `layer`'s Block, holding its slice of the stacked parameters (a trace or an
        analysis that runs the layers one at a time)."""
        graphdef, stacked = nnx.split(self.blocks)
        return nnx.merge(graphdef, jax.tree.map(lambda a: a[layer], stacked))

    def __call__(self, x: Array, *, key: Optional[Array] = None, probe: bool = False,
                 head_mask: Optional[Array] = None, **kwargs
                 ) -> tuple[Array, Optional[AttentionProbe]]:
        """x [B, T, D] through every block; head_mask [num_layers, H] gives each block its row;
        probes come back stacked [num_layers, ...]. kwargs['hooks']: `with_residual_rms`."""
        x, found, _ = self.with_residual_rms(x, key=key, probe=probe, head_mask=head_mask,
                                             **kwargs)
        return x, found

    def with_residual_rms(self, x: Array, *, key: Optional[Array] = None, probe: bool = False,
                          head_mask: Optional[Array] = None, hooks=None, **kwargs
                          ) -> tuple[Array, Optional[AttentionProbe], Array]:
        """As __call__, and the RMS of the residual stream after each block (its output: for
        Post-LN after the block's last norm) over the real tokens of `kwargs['token_mask']`:
        [num_layers]. Unused, it costs nothing: jit drops it.

        hooks (`hook_points.HookPoints` or None): block l's points are `blocks.<l>.<name>`. The
        loop traces one block for all layers, so each layer's hook runs under `lax.switch` on
        the layer index, and cached values leave the loop stacked (`LayerHooks`)."""
        graphdef, stacked = nnx.split(self.blocks)
        layer_keys = None if key is None else jax.random.split(key, self.num_layers)
        token_mask = kwargs.get("token_mask")
        layer_ids = None if hooks is None else jnp.arange(self.num_layers)  # only when hooked
        cached_names = []  # in the order the block reaches them (the loop's dict sorts its keys)

        def one_layer(x, layer):
            params, layer_key, layer_head_mask, layer_id = layer
            block = nnx.merge(graphdef, params)
            layer_hooks = None if hooks is None else LayerHooks(hooks, layer_id, self.num_layers)
            x, found = block(x, key=layer_key, probe=probe, head_mask=layer_head_mask,
                             hooks=layer_hooks, **kwargs)
            cached = None if hooks is None else tuple(layer_hooks.cache.values())
            cached_names[:] = [] if hooks is None else list(layer_hooks.cache)
            # BatchNorm's running statistics; the stream's RMS after this block
            return x, (found, nnx.state(block, nnx.BatchStat), residual_rms(x, token_mask),
                       cached)

        x, (found, stats, rms, cached) = jax.lax.scan(
            one_layer, x, (stacked, layer_keys, head_mask, layer_ids),
            unroll=self.num_layers <= UNROLL_MAX_LAYERS)
        if hooks is not None:
            keep_layers(hooks, dict(zip(cached_names, cached)))
        if any(getattr(m, "use_running_average", True) is False  # BatchNorm, training mode:
               for _, m in nnx.iter_modules(self.blocks)):  # keep what the batch moved them to
            nnx.update(self.blocks, stats)
        return x, found, rms


class Transformer(nnx.Module):
    """`Transformer(cfg, rngs=nnx.Rngs(0))(tokens, padding_mask)` -> (outputs, probes)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dtype = compute_dtype(cfg)
        # Unit-variance token vectors: N(0, 1/d_model) scaled by √d_model, as in the paper.
        self.embed = nnx.Embed(cfg.vocab_size, cfg.d_model, dtype=dtype, rngs=rngs,
                               embedding_init=initializers.normal(cfg.d_model ** -0.5))
        # BERT's segment embedding (sentence A / B), added like the positions; none by default
        self.token_type_embed = (nnx.Embed(cfg.token_types, cfg.d_model, dtype=dtype, rngs=rngs)
                                 if cfg.token_types else None)
        self.embed_norm = norm_layer(cfg, rngs) if cfg.embed_norm else None  # BERT's
        learned = cfg.position is Position.LEARNED
        self.positions = pos.LearnedPositions(cfg.max_len, cfg.d_model, rngs=rngs) if learned else None
        self.layers = StackedBlocks(cfg, rngs=rngs)
        self.final_norm = norm_layer(cfg, rngs) if cfg.norm is Norm.PRE else None  # same type
        self.head = Dense(cfg.d_model, cfg.num_outputs, matmul=cfg.dense_matmul, dtype=dtype,
                          rngs=rngs)

    def __call__(self, tokens: Array, padding_mask: Optional[Array] = None, *,
                 dropout_key: Optional[Array] = None, probe: bool = False,
                 head_mask: Optional[Array] = None, training: bool = False,
                 token_types: Optional[Array] = None, hooks=None
                 ) -> tuple[Array, Optional[AttentionProbe]]:
        """(logits, probes): see `with_residual_rms`, which also returns the stream's RMS."""
        logits, probes, _ = self.with_residual_rms(tokens, padding_mask, dropout_key=dropout_key,
                                                   probe=probe, head_mask=head_mask,
                                                   training=training, token_types=token_types,
                                                   hooks=hooks)
        return logits, probes

    def with_residual_rms(self, tokens: Array, padding_mask: Optional[Array] = None, *,
                          dropout_key: Optional[Array] = None, probe: bool = False,
                          head_mask: Optional[Array] = None, training: bool = False,
                          token_types: Optional[Array] = None, hooks=None
                          ) -> tuple[Array, Optional[AttentionProbe], Array]:
        """tokens [B, T] int, padding_mask [B, T] bool (True = real token; real tokens first).
        token_types [B, T] int (segment ids, with model.token_types > 0; None: all type 0).

        Returns float32 logits — [B, T, num_outputs] for a token head, [B, num_outputs] for a
        pooled head — and, with probe=True, each layer's attention weights and logit scale
        stacked [num_layers, ...]. dropout_key=None means evaluation (no dropout).
        head_mask [num_layers, num_heads]: each head's output is multiplied by its entry before
        W_o, so 0 knocks that head out and changes nothing else (None: every head as trained).
        training=True: the train step's call; only `model.causal_mask` reads it (dropout follows
        dropout_key, BatchNorm `nnx.view`).
        Third: the RMS of the residual stream after each block over the real tokens,
        [num_layers] float32 (`residual_rms`; before the final norm: for Pre-LN the stream the
        blocks add to, which Xiong et al. 2020 show growing with depth).
        hooks: the named hook points `model.hooks.run_with_cache` and `run_with_hooks` pass
        (None: none, and nothing enters the program); `model.hooks.hook_names` lists them.
        """
        cfg = self.cfg
        check_inputs(cfg, tokens, padding_mask)
        batch, length = tokens.shape
        embed_key, layers_key = (None, None) if dropout_key is None else jax.random.split(dropout_key)

        x = self.embeddings(tokens, padding_mask, token_types=token_types, dropout_key=embed_key,
                            hooks=hooks)

        bias = pos.alibi_bias(cfg.num_heads, length, length) if cfg.position is Position.ALIBI else None
        rotate = (pos.rotary_qk_transform(length, cfg.d_k)
                  if cfg.position is Position.ROTARY else None)
        # model.causal_mask=False lifts the causal mask in training only: evaluation, like
        # generation, has no future to look at, so a decoder always masks there, and what an
        # unmasked decoder learned is judged as it would be used.
        causal = cfg.causal and (cfg.causal_mask or not training)
        mask = structured_attention_mask(padding_mask, length, causal)
        if head_mask is not None and head_mask.shape != (cfg.num_layers, cfg.num_heads):
            raise ValueError(f"head_mask has shape {head_mask.shape}; it must be [num_layers, "
                             f"num_heads] = [{cfg.num_layers}, {cfg.num_heads}]")
        x, probes, rms = self.layers.with_residual_rms(
            x, mask=mask, bias=bias, qk_transform=rotate, key=layers_key, probe=probe,
            token_mask=padding_mask, head_mask=head_mask, hooks=hooks)
        if self.final_norm is not None:
            x = tap(hooks, "ln_final.out", apply_norm(self.final_norm, x, padding_mask))

        if cfg.head is Head.POOLED:  # mean over real tokens: [B, T, D] -> [B, D]
            weights = (jnp.ones((batch, length), x.dtype) if padding_mask is None
                       else padding_mask.astype(x.dtype))
            x = jnp.sum(x * weights[..., None], axis=1) / jnp.maximum(
                jnp.sum(weights, axis=1, keepdims=True), 1.0)
            x = tap(hooks, "pooled", x)  # [B, D]
        return self.head(x).astype(jnp.float32), probes, rms

    def embeddings(self, tokens: Array, padding_mask: Optional[Array] = None, *,
                   token_types: Optional[Array] = None, dropout_key: Optional[Array] = None,
                   hooks=None) -> Array:
        """What the first block reads: token vectors (+ token types, + positions added to
        them), BERT's embedding norm, dropout. tokens [B, T] -> [B, T, D]. Its own method so
        that an analysis can run the blocks one at a time (studies/analysis/checkpoint_probe.py).
        Hook points: `embed.token` (the token vectors, × √d_model where scaled),
        `embed.token_type`, `embed.position` ([T, D]: sinusoidal or learned), `embed.norm.out`."""
        cfg, length = self.cfg, tokens.shape[1]
        x = self.embed(tokens)  # [B, T, D]
        x = x * cfg.d_model ** 0.5 if cfg.embed_scale else x  # the paper's √d_model; BERT: none
        x = tap(hooks, "embed.token", x)
        types = self.token_type_embedding(tokens, token_types)  # [B, T, D] or None
        x = x if types is None else x + tap(hooks, "embed.token_type", types)
        if cfg.position is Position.SINUSOIDAL:
            x = x + tap(hooks, "embed.position",
                        pos.sinusoidal_table(length, cfg.d_model).astype(x.dtype))
        elif cfg.position is Position.LEARNED:
            x = x + tap(hooks, "embed.position", self.positions(length).astype(x.dtype))
        if self.embed_norm is not None:  # BERT's embedding LayerNorm
            x = tap(hooks, "embed.norm.out", apply_norm(self.embed_norm, x, padding_mask))
        return dropout(x, cfg.dropout, dropout_key)

    def token_type_embedding(self, tokens: Array, token_types: Optional[Array]
                             ) -> Optional[Array]:
        """The token-type rows [B, T, D] to add (type 0 where token_types is None, as BERT
        reads a missing segment), or None for a model without token types."""
        if self.token_type_embed is None:
            if token_types is not None:
                raise ValueError("token_types given, but model.token_types=0: this model has "
                                 "no token-type embedding")
            return None
        if token_types is None:
            token_types = jnp.zeros_like(tokens)
        if tuple(token_types.shape) != tuple(tokens.shape):
            raise ValueError(f"token_types has shape {tuple(token_types.shape)}; it must be "
                             f"[batch, length] = {list(tokens.shape)}, like tokens")
        return self.token_type_embed(token_types)


def residual_rms(x: Array, token_mask: Optional[Array]) -> Array:
    """√(mean of x²) over every entry of the real tokens: x [B, T, D], token_mask [B, T] (True =
    real; None: every token) -> float32 scalar. Padded positions are left out: no loss reads
    them, and their vectors would make the value depend on how much of the batch is padding."""
    square = jnp.mean(jnp.square(x.astype(jnp.float32)), axis=-1)  # [B, T]
    if token_mask is None:
        return jnp.sqrt(jnp.mean(square))
    real = token_mask.astype(jnp.float32)
    return jnp.sqrt(jnp.sum(square * real) / jnp.maximum(jnp.sum(real), 1.0))


def check_inputs(cfg: ModelConfig, tokens: Array, padding_mask: Optional[Array]) -> None:
    """One-line errors for inputs the model cannot mean: a wrong layout, and token ids outside
    the vocabulary, which the embedding would otherwise clamp silently. Ids are read only when
    they are concrete: inside jit they are tracers, and the program cannot stop on a value
    (checkify could, at a cost on every step), so a jitted call clamps as the embedding does."""
    if tokens.ndim != 2 or not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise ValueError(f"tokens has shape {tuple(tokens.shape)} and dtype {tokens.dtype}; the "
                         f"model takes integer token ids [batch, length]")
    if tokens.shape[1] > cfg.max_len:
        raise ValueError(f"sequence length {tokens.shape[1]} exceeds model.max_len={cfg.max_len}")
    if padding_mask is not None and tuple(padding_mask.shape) != tuple(tokens.shape):
        raise ValueError(f"padding_mask has shape {tuple(padding_mask.shape)}; it must be "
                         f"[batch, length] = {list(tokens.shape)}, like tokens")
    try:  # numpy: a traced value cannot be read (and jnp.min of a constant is traced)
        ids = np.asarray(tokens)
    except jax.errors.TracerArrayConversionError:
        return
    if ids.size:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= cfg.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"token id {bad} is outside the vocabulary: ids must be in "
                             f"[0, {cfg.vocab_size}) (model.vocab_size={cfg.vocab_size})")


def count_params(module: nnx.Module) -> int:
    return sum(p.size for p in jax.tree.leaves(nnx.state(module, nnx.Param)))

"""Scaled dot-product attention and multi-head attention, written out line by line.

    Attention(Q, K, V) = softmax(Q·Kᵀ · scale + bias, masked) · V,   scale = 1/√d_k by default

Layout follows `jax.nn.dot_product_attention`: q/k/v are [batch, length, heads, head_dim], masks
and biases broadcast to [batch, heads, q_len, kv_len]. The explicit path returns the attention
weights for inspection; the fused path (`jax.nn.dot_product_attention`, cuDNN on NVIDIA GPUs in
half precision) gets the same scale, mask and bias, so an ablation means the same on both.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import AttentionImpl, DenseMatmul
from transformer_jax.model import initializers
from transformer_jax.model.dense import Dense
from transformer_jax.model.hook_points import asks, tap
from transformer_jax.model.norms import qk_norm as qk_layer_norm

Array = jax.Array
QKTransform = Callable[[Array, Array], tuple[Array, Array]]


def attention_logits(query: Array, key: Array, *, mask: Optional[Array] = None,
                     bias: Optional[Array] = None, scale: Optional[float] = None,
                     hooks=None) -> Array:
    """Q·Kᵀ · scale + bias, with disallowed positions set to the dtype's lowest value.

    Returns float32 logits [batch, heads, q_len, kv_len] (softmax runs in float32 whatever the
    compute dtype: bfloat16 logits lose the small differences that decide the weights).
    Hook points (`hook_points`): `logits` (Q·Kᵀ), `scaled_logits` (× scale + bias),
    `masked_logits` (what the softmax reads).
    """
    check_mask_and_bias(mask, bias, query, key)
    head_dim = query.shape[-1]
    scale = head_dim ** -0.5 if scale is None else scale  # None: the paper's 1/√d_k
    logits = jnp.einsum("bqhd,bkhd->bhqk", query, key,
                        preferred_element_type=jnp.float32)  # [B, H, Tq, Tk]
    logits = tap(hooks, "logits", logits)
    logits = logits * scale
    if bias is not None:
        logits = logits + bias.astype(jnp.float32)
    logits = tap(hooks, "scaled_logits", logits)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    return tap(hooks, "masked_logits", logits)


def attend(weights: Array, value: Array) -> Array:
    """Weighted sum of values: [B, H, Tq, Tk] x [B, Tk, H, D] -> [B, Tq, H, D]."""
    return jnp.einsum("bhqk,bkhd->bqhd", weights.astype(value.dtype), value)


def check_qkv(query: Array, key: Array, value: Array) -> None:
    """One line naming the layout when q, k, v do not fit it (shapes are static, so this holds
    inside jit too): query and key [batch, q_len | kv_len, heads, head_dim], value [batch, kv_len,
    heads, value_dim] (value_dim may differ from head_dim)."""
    shapes = {"query": query.shape, "key": key.shape, "value": value.shape}
    if any(len(s) != 4 for s in shapes.values()):
        fits = False
    else:
        (b, _, h, d), (kb, kt, kh, kd), (vb, vt, vh, _) = shapes.values()
        fits = b == kb == vb and h == kh == vh and d == kd and kt == vt
    if not fits:
        given = ", ".join(f"{n} {tuple(s)}" for n, s in shapes.items())
        raise ValueError(f"attention takes query [batch, q_len, heads, head_dim], key [batch, "
                         f"kv_len, heads, head_dim] and value [batch, kv_len, heads, value_dim]; "
                         f"given {given}")


def check_mask_and_bias(mask: Optional[Array], bias: Optional[Array], query: Array,
                        key: Array) -> None:
    """One line when the mask is not boolean or either does not broadcast to the logits
    [batch, heads, q_len, kv_len]. Why refuse a float mask: `where(mask, ...)` reads any nonzero
    as True, so an additive mask (0 = attend, -inf = blocked, as PyTorch and Hugging Face write
    it) would silently attend only where it blocks. Dtypes and shapes are static: checked while
    tracing, so a jitted call pays nothing."""
    for name, array in (("mask", mask), ("bias", bias)):
        if array is None:
            continue
        logits_shape = _logits_shape(query, key)
        expected = f"[batch, heads, q_len, kv_len] = {list(logits_shape)}"
        dtype, shape = jnp.result_type(array), jnp.shape(array)
        if name == "mask" and dtype != jnp.bool_:
            raise ValueError(f"mask: {dtype} {list(shape)}; attention takes a boolean mask (True "
                             f"= may attend) broadcastable to {expected}; an additive mask "
                             f"(0 / -inf) goes in bias=")
        if not _broadcasts_to(shape, logits_shape):
            raise ValueError(f"{name}: shape {list(shape)} ({dtype}) does not broadcast to the "
                             f"logits' {expected}")


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of `shape` broadcasts to `target` (numpy's rules, `target` unchanged)."""
    return len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def scaled_dot_product_attention(query: Array, key: Array, value: Array, *,
                                 mask: Optional[Array] = None, bias: Optional[Array] = None,
                                 scale: Optional[float] = None) -> tuple[Array, Array]:
    """softmax(Q·Kᵀ·scale + bias)·V, returning (output [B, Tq, H, D], weights [B, H, Tq, Tk]).

    Args:
      query: [batch, q_len, heads, head_dim]; key, value: [batch, kv_len, heads, head_dim].
      mask: boolean, broadcastable to [batch, heads, q_len, kv_len]; True = may attend. Any
        other dtype or shape is a one-line ValueError (`check_mask_and_bias`).
      bias: added to the logits (e.g. ALiBi, or an additive 0 / -inf mask), broadcastable like
        `mask`.
      scale: multiplies Q·Kᵀ; None means 1/√head_dim, a float is used as given (1.0 = unscaled).
    A row whose keys are all masked gets uniform weights, as in `jax.nn.dot_product_attention`.
    """
    check_qkv(query, key, value)
    logits = attention_logits(query, key, mask=mask, bias=bias, scale=scale)
    weights = jax.nn.softmax(logits, axis=-1)  # rows sum to 1; masked keys get exactly 0
    return attend(weights, value), weights.astype(query.dtype)


def fused_kernel(dtype, head_dim: int, device: Optional[jax.Device] = None) -> str:
    """The kernel `fused_attention` asks `jax.nn.dot_product_attention` for: 'cudnn' (cuDNN's
    flash attention) on an NVIDIA GPU for float16/bfloat16 with head_dim a multiple of 8 up to
    128, 'xla' (the same math as XLA ops) everywhere else. JAX's own default (None) is XLA
    even on GPUs, so the choice has to be made here."""
    device = device or jax.devices()[0]
    nvidia = device.platform == "gpu" and "nvidia" in getattr(device, "device_kind", "").lower()
    half = jnp.dtype(dtype) in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
    return "cudnn" if nvidia and half and head_dim % 8 == 0 and head_dim <= 128 else "xla"


def fused_attention(query: Array, key: Array, value: Array, *, mask: Optional[Array] = None,
                    bias: Optional[Array] = None, scale: Optional[float] = None,
                    is_causal: bool = False, kv_lengths: Optional[Array] = None,
                    implementation: Optional[str] = None) -> Array:
    """The same function through `jax.nn.dot_product_attention` (no weights); `implementation`
    'xla' or 'cudnn', None = `fused_kernel`'s choice (cuDNN on NVIDIA GPUs in half precision).

    is_causal (key j <= query i) and kv_lengths ([B] int32: key j < kv_lengths[b], real keys
    first) mask without a dense mask: cuDNN then skips the masked blocks instead of reading one.
    They combine with `mask` if both are given.
    """
    check_mask_and_bias(mask, bias, query, key)
    implementation = implementation or fused_kernel(query.dtype, query.shape[-1])
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    if bias is not None:
        bias = jnp.broadcast_to(bias, _logits_shape(query, key)).astype(query.dtype)
    if mask is not None:
        mask = jnp.broadcast_to(mask, _logits_shape(query, key))
    if kv_lengths is not None:
        kv_lengths = kv_lengths.astype(jnp.int32)
    return jax.nn.dot_product_attention(query, key, value, bias=bias, mask=mask, scale=scale,
                                        is_causal=is_causal, key_value_seq_lengths=kv_lengths,
                                        implementation=implementation)


class Mask(NamedTuple):
    """An attention mask kept with what it is made of, so that each path reads the form it is
    fast with (`model.structured_attention_mask` builds it; a plain boolean array works too).

    dense: bool [B or 1, 1, Tq, Tk], True = may attend: the explicit path and the probes read it.
    causal, kv_lengths: the same mask as "key j <= query i" and "key j < kv_lengths[b]" (real
    tokens first: right padding): what the fused path passes on to `fused_attention`. With
    neither (causal False, kv_lengths None) the fused path reads `dense` too.
    """

    dense: Array
    causal: bool
    kv_lengths: Optional[Array]  # [B] int32, or None: no padding


def _logits_shape(query: Array, key: Array) -> tuple[int, int, int, int]:
    (batch, q_len, heads, _), kv_len = query.shape, key.shape[1]
    return batch, heads, q_len, kv_len


class AttentionProbe(NamedTuple):
    """What a diagnostic call returns per attention layer."""

    weights: Array  # [B, H, Tq, Tk]
    max_abs_logit: Array  # scalar: the largest |Q·Kᵀ·scale + bias| over real queries' allowed keys


def max_abs_allowed_logit(logits: Array, mask: Optional[Array]) -> Array:
    """The largest |logit| [B, H, Tq, Tk] -> scalar over the pairs that count: allowed keys of
    real queries. A query is real when it may attend to itself (the mask's diagonal: padding
    blocks a padded token's own key, causality never blocks j = i), so a padded query's row,
    which no loss reads, does not enter the maximum."""
    if mask is None:
        return jnp.max(jnp.abs(logits))
    allowed = jnp.broadcast_to(mask, logits.shape)  # [B, H, Tq, Tk]
    real_query = jnp.diagonal(allowed, axis1=-2, axis2=-1)[..., None]  # [B, H, Tq, 1]
    return jnp.max(jnp.where(allowed & real_query, jnp.abs(logits), 0.0))


LINEAR_INIT = initializers.lecun_normal  # nnx.Linear's own default: var 1/fan_in


def scaled_init(init: Callable, factor: float) -> Callable:
    """`init` with every draw multiplied by `factor` (1.0: the same values, bit for bit)."""
    return lambda key, shape, dtype=jnp.float32: factor * init(key, shape, dtype)


class MultiHeadAttention(nnx.Module):
    """h heads of width d_k; W_q, W_k, W_v project d_model -> h·d_k, W_o mixes the heads back.

    d_k is `head_dim`, or d_model / h when it is None (the paper's: the heads partition d_model).
    Parameters: 4·d_model·h·d_k weights + 3·h·d_k + d_model biases (4·d_model² + 4·d_model at
    the default), + 2·d_k norm scales with qk_norm: one LayerNorm γ for queries, one for keys,
    shared by the heads.
    """

    def __init__(self, d_model: int, num_heads: int, *, head_dim: Optional[int] = None,
                 attn_scale: bool = True, qk_norm: bool = False, qk_init_scale: float = 1.0,
                 implementation: AttentionImpl = AttentionImpl.EXPLICIT,
                 dtype=jnp.float32, dense_matmul: DenseMatmul = DenseMatmul.COMPUTE,
                 rngs: nnx.Rngs):
        if not head_dim and d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model} "
                             "(give head_dim to choose the heads' width)")
        self.num_heads = num_heads
        self.head_dim = head_dim or d_model // num_heads
        inner = num_heads * self.head_dim  # = d_model at the default
        self.attn_scale = attn_scale
        self.qk_norm = qk_norm
        self.implementation = implementation
        dense = lambda fan_in, fan_out, init=LINEAR_INIT: Dense(  # noqa: E731
            fan_in, fan_out, matmul=dense_matmul, dtype=dtype, kernel_init=init, rngs=rngs)
        # W_q and W_k start at qk_init_scale times their usual draw: with d_k^(-1/4) each, an
        # unscaled model's Q·Kᵀ starts with the variance a scaled one's has (1 rather than d_k)
        qk_init = scaled_init(LINEAR_INIT, qk_init_scale)
        self.query, self.key = dense(d_model, inner, qk_init), dense(d_model, inner, qk_init)
        self.value, self.out = dense(d_model, inner), dense(inner, d_model)
        norm = lambda: qk_layer_norm(self.head_dim, dtype=dtype, rngs=rngs)  # noqa: E731
        self.query_norm, self.key_norm = (norm(), norm()) if qk_norm else (None, None)

    def project(self, x: Array) -> tuple[Array, Array, Array]:
        """x [B, T, d_model] -> q, k, v [B, T, H, D]: W_q, W_k, W_v, then the split into heads."""
        batch, length, _ = x.shape
        split = lambda t: t.reshape(batch, length, self.num_heads, self.head_dim)  # noqa: E731
        return split(self.query(x)), split(self.key(x)), split(self.value(x))

    def __call__(self, x: Array, *, mask: Optional[Array | Mask] = None,
                 bias: Optional[Array] = None, qk_transform: Optional[QKTransform] = None,
                 probe: bool = False, head_mask: Optional[Array] = None, hooks=None
                 ) -> tuple[Array, Optional[AttentionProbe]]:
        """Self-attention over x [B, T, d_model] -> ([B, T, d_model], probe or None).

        probe=True also returns the weights and the logit scale (a separate compiled program:
        the training step, which never asks, pays nothing for it). head_mask [H] multiplies each
        head's output before W_o: 0 knocks a head out (Michel et al. 2019), 1 keeps it as it is.
        hooks: hook points `q`, `k` (as Q·Kᵀ reads them: after QK-norm and qk_transform), `v`,
        `logits`, `scaled_logits`, `masked_logits`, `weights`, `head_out` (each head's output,
        after head_mask, before W_o). Asking for the logits or weights runs the explicit path,
        as probe=True does: the fused kernel does not return them.
        """
        batch, length, _ = x.shape
        q, k, v = self.project(x)  # [B, T, H, D] each
        q, k = (self.query_norm(q), self.key_norm(k)) if self.qk_norm else (q, k)  # QK-norm
        if qk_transform is not None:  # e.g. rotary positions rotate q and k
            q, k = qk_transform(q, k)
        q, k, v = tap(hooks, "q", q), tap(hooks, "k", k), tap(hooks, "v", v)
        scale = self.head_dim ** -0.5 if self.attn_scale else 1.0  # the ÷√d_k switch
        dense = mask.dense if isinstance(mask, Mask) else mask  # [B or 1, 1, T, T] or None
        found = None
        if probe or self.implementation is AttentionImpl.EXPLICIT or _asks_weights(hooks):
            logits = attention_logits(q, k, mask=dense, bias=bias, scale=scale,
                                      hooks=hooks)  # [B, H, T, T]
            weights = tap(hooks, "weights", jax.nn.softmax(logits, axis=-1))
            heads = attend(weights, v)  # [B, T, H, D]
            if probe:
                found = AttentionProbe(weights, max_abs_allowed_logit(logits, dense))
        elif isinstance(mask, Mask) and (mask.causal or mask.kv_lengths is not None):
            heads = fused_attention(q, k, v, bias=bias, scale=scale, is_causal=mask.causal,
                                    kv_lengths=mask.kv_lengths)  # no dense mask read
        else:
            heads = fused_attention(q, k, v, mask=dense, bias=bias, scale=scale)
        if head_mask is not None:  # head knock-out: [H] -> [1, 1, H, 1]
            heads = heads * head_mask.astype(heads.dtype)[None, None, :, None]
        heads = tap(hooks, "head_out", heads)
        merged = heads.reshape(batch, length, self.num_heads * self.head_dim)  # concat: [B, T, H·D]
        return self.out(merged), found


def _asks_weights(hooks) -> bool:
    """Whether a hook or the cache wants a value only the explicit path computes."""
    return any(asks(hooks, name) for name in ("logits", "scaled_logits", "masked_logits",
                                                "weights"))

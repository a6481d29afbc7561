"""`Dense`: `nnx.Linear` whose matmul is always 2-D, the shape CPUs multiply fastest.

Same parameters (`kernel` [in, out], `bias` [out]), checkpoints and results as `nnx.Linear`.
The difference is in the backward pass: for an input [B, T, in], the kernel's gradient
contracts over two axes (batch and length), and XLA:CPU computes that dot ~2.5× slower than the
same product on the flattened [B·T, in] (measured on this project's 2-core machine: gradient of
a d_model 128 → 512 → 128 MLP on [12, 64, 128] in 9.0 ms, on [768, 128] in 3.6 ms). Flattening
costs nothing (a reshape of contiguous memory).

`model.dense_matmul=bfloat16` (`DenseMatmul.BFLOAT16`) rounds both operands of every product to
bfloat16 and accumulates in float32: the forward x·W and both gradient products, g·Wᵀ and xᵀ·g.
Activations, parameters and everything else stay in `model.dtype`. The custom gradient is the
point: autodiff of a bfloat16 dot would multiply the float32 cotangent in float32, and XLA:CPU
multiplies bfloat16 x bfloat16 -> float32 on AMX / AVX512-BF16 units (1.9-3.7× its float32 rate
on the char LM's four Dense shapes, [384, 128] x [128, 128] to [128, 384] x [384, 128], on an
Intel Xeon with AMX), while bfloat16 x bfloat16 -> bfloat16 runs at its float32 rate. The
char LM's whole step gains less (`scripts/benchmark.py --profile`, docs/performance.md): half
its time is outside the Dense products.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import DenseMatmul
from transformer_jax.model import initializers

MATMUL_2D = (((1,), (0,)), ((), ()))  # [N, in] · [in, out]: contract in, no batch axes


def _bf16_dot(a: jax.Array, b: jax.Array, a_axis: int, b_axis: int) -> jax.Array:
    """a · b contracted over a's `a_axis` and b's `b_axis` (2-D each), both rounded to bfloat16,
    summed in float32 -> float32. The axes are named rather than the operands transposed
    (a.T): XLA:CPU then writes no transposed copy (measured, char LM at 10 steps per call:
    20.7 against 22.8 ms per step)."""
    return jax.lax.dot_general(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
                               (((a_axis,), (b_axis,)), ((), ())),
                               preferred_element_type=jnp.float32)


@jax.custom_vjp
def bfloat16_matmul(x: jax.Array, w: jax.Array) -> jax.Array:
    """x [N, in] · w [in, out] -> [N, out] in x's dtype (w's must match), each product of
    bfloat16-rounded operands accumulated in float32, in the forward pass and in both gradients."""
    if x.dtype != w.dtype:
        raise TypeError(f"bfloat16_matmul: x is {x.dtype} and w is {w.dtype}; give both the "
                        f"same dtype (the output's and the gradients')")
    return _bf16_dot(x, w, 1, 0).astype(x.dtype)  # [N, in] · [in, out]


def _bfloat16_matmul_forward(x, w):
    xb, wb = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)  # saved at half the bytes
    return bfloat16_matmul(x, w), (xb, wb)


def _bfloat16_matmul_backward(saved, g):
    xb, wb = saved  # g [N, out] in x's dtype, which the gradients keep
    dx = _bf16_dot(g, wb, 1, 1)  # [N, out] · [in, out] over out -> [N, in]
    dw = _bf16_dot(xb, g, 0, 0)  # [N, in] · [N, out] over N -> [in, out]
    return dx.astype(g.dtype), dw.astype(g.dtype)


bfloat16_matmul.defvjp(_bfloat16_matmul_forward, _bfloat16_matmul_backward)


def bfloat16_dot_general(lhs, rhs, dimension_numbers, precision=None,
                         preferred_element_type=None, out_sharding=None):
    """`lax.dot_general` for `Dense`'s 2-D product, through `bfloat16_matmul` (`nnx.Linear`
    has already cast both operands to the layer's dtype)."""
    if (dimension_numbers != MATMUL_2D or lhs.ndim != 2 or out_sharding is not None
            or preferred_element_type not in (None, lhs.dtype)):
        raise ValueError(f"bfloat16_dot_general multiplies [N, in] · [in, out] into the operands' "
                         f"dtype only, got {lhs.shape} · {rhs.shape} with {dimension_numbers}")
    return bfloat16_matmul(lhs, rhs)


class Dense(nnx.Linear):
    def __init__(self, in_features: int, out_features: int, *,
                 matmul: DenseMatmul = DenseMatmul.COMPUTE, **linear_kwargs):
        if matmul is DenseMatmul.BFLOAT16:
            linear_kwargs["dot_general"] = bfloat16_dot_general
        linear_kwargs.setdefault("kernel_init", initializers.lecun_normal)  # nnx.Linear's, flat
        super().__init__(in_features, out_features, **linear_kwargs)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x [..., in] -> [..., out], computed as [N, in] @ [in, out]."""
        lead = x.shape[:-1]
        return super().__call__(x.reshape(-1, x.shape[-1])).reshape(*lead, self.out_features)

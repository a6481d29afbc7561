"""`model.dense_matmul=bfloat16`: every Dense layer's products (the forward x·W and both gradient
products) take bfloat16-rounded operands and sum in float32; nothing else changes.

The reference is exact arithmetic on the rounded operands (numpy float64): a product of two
bfloat16 numbers is exact in float32, so the op may differ from it only by float32 summation
order (~1e-6 relative), while leaving out a rounding anywhere moves it by ~1e-3.
"""
from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax import ConfigError, DenseMatmul, ModelConfig, Transformer
from transformer_jax.model.dense import Dense, bfloat16_dot_general, bfloat16_matmul

ROUNDING_TOL = 1e-5  # relative: summation order only
BF16_EFFECT = 1e-4  # relative: a rounding left out moves the result by more than this


def bf16(a) -> np.ndarray:
    """a rounded to bfloat16, as float64."""
    return np.asarray(jnp.asarray(a, jnp.float32).astype(jnp.bfloat16).astype(jnp.float32),
                      np.float64)


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / np.abs(want).max())


def operands(n=24, d_in=16, d_out=40, seed=0):
    rng = np.random.default_rng(seed)
    x, w, g = (rng.normal(0, 1, shape).astype(np.float32)
               for shape in ((n, d_in), (d_in, d_out), (n, d_out)))
    return jnp.asarray(x), jnp.asarray(w), jnp.asarray(g)


def test_forward_is_the_product_of_the_rounded_operands():
    x, w, _ = operands()
    y = jax.jit(bfloat16_matmul)(x, w)
    assert y.dtype == jnp.float32 and y.shape == (24, 40)
    assert rel_err(y, bf16(x) @ bf16(w)) < ROUNDING_TOL
    exact = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    assert rel_err(y, exact) > BF16_EFFECT  # it did round: not float32's product


def test_both_gradients_multiply_rounded_operands():
    x, w, g = operands()
    _, vjp = jax.vjp(bfloat16_matmul, x, w)
    dx, dw = jax.jit(vjp)(g)
    assert dx.dtype == dw.dtype == jnp.float32 and dx.shape == x.shape and dw.shape == w.shape
    assert rel_err(dx, bf16(g) @ bf16(w).T) < ROUNDING_TOL  # g·Wᵀ, g rounded too
    assert rel_err(dw, bf16(x).T @ bf16(g)) < ROUNDING_TOL  # xᵀ·g
    g64, x64, w64 = (np.asarray(a, np.float64) for a in (g, x, w))
    assert rel_err(dx, g64 @ w64.T) > BF16_EFFECT and rel_err(dw, x64.T @ g64) > BF16_EFFECT


def test_bfloat16_compute_dtype_keeps_its_dtype_through_the_gradient():
    x, w, g = (a.astype(jnp.bfloat16) for a in operands())
    y, vjp = jax.vjp(bfloat16_matmul, x, w)
    dx, dw = vjp(g)
    assert y.dtype == dx.dtype == dw.dtype == jnp.bfloat16
    assert rel_err(y.astype(jnp.float32), bf16(y)) == 0.0
    assert rel_err(dx.astype(jnp.float32), bf16(bf16(g) @ bf16(w).T)) < 1e-2


def test_mixed_operand_dtypes_and_other_products_are_refused():
    x, w, _ = operands()
    with pytest.raises(TypeError, match="float32 and w is bfloat16"):
        bfloat16_matmul(x, w.astype(jnp.bfloat16))
    with pytest.raises(ValueError, match=r"\[N, in\] · \[in, out\]"):
        bfloat16_dot_general(x[None], w, (((2,), (0,)), ((), ())))


def test_dense_switch_changes_the_product_and_nothing_else():
    x = operands(n=2 * 5)[0].reshape(2, 5, 16)  # [B, T, in]
    plain = Dense(16, 40, rngs=nnx.Rngs(0))
    rounded = Dense(16, 40, matmul=DenseMatmul.BFLOAT16, rngs=nnx.Rngs(0))
    reference = nnx.Linear(16, 40, rngs=nnx.Rngs(0))
    # same parameters, names and shapes (checkpoints load either way)
    same = jax.tree.map(np.array_equal, nnx.state(plain, nnx.Param), nnx.state(rounded, nnx.Param))
    assert all(jax.tree.leaves(same))
    np.testing.assert_array_equal(plain(x), reference(x))  # the default is nnx.Linear's product
    kernel, bias = (np.asarray(plain.kernel[...]), np.asarray(plain.bias[...]))
    want = (bf16(x.reshape(10, 16)) @ bf16(kernel) + bias).reshape(2, 5, 40)
    assert rel_err(rounded(x), want) < ROUNDING_TOL
    assert rel_err(plain(x), want) > BF16_EFFECT


def dense_layers(model) -> list[Dense]:
    return [m for _, m in nnx.iter_modules(model) if isinstance(m, Dense)]


def test_the_config_reaches_every_dense_layer_of_the_model():
    model = Transformer(tiny_config(dense_matmul=DenseMatmul.BFLOAT16), rngs=nnx.Rngs(0))
    layers = dense_layers(model)
    assert len(layers) == 4 + 2 + 1  # W_q, W_k, W_v, W_o; the feed-forward's two; the head
    assert all(m.dot_general is bfloat16_dot_general for m in layers)
    default = Transformer(tiny_config(), rngs=nnx.Rngs(0))
    assert all(m.dot_general is jax.lax.dot_general for m in dense_layers(default))


def _count_dots(jaxpr) -> dict[str, int]:
    """dot_general equations by operand dtype, through the custom_vjp and scan sub-jaxprs."""
    counts: dict[str, int] = {}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            kind = str(eqn.invars[0].aval.dtype)
            counts[kind] = counts.get(kind, 0) + 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            for k, v in _count_dots(sub).items():
                counts[k] = counts.get(k, 0) + v
    return counts


def test_the_gradient_step_multiplies_every_dense_product_in_bfloat16():
    model = Transformer(tiny_config(dense_matmul=DenseMatmul.BFLOAT16), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)
    tokens = jnp.zeros((2, 6), jnp.int32)

    def loss(params):
        logits, _ = nnx.merge(graphdef, params)(tokens)
        return jnp.mean(logits ** 2)

    counts = _count_dots(jax.make_jaxpr(jax.grad(loss))(params).jaxpr)
    dense = 4 + 2 + 1  # one layer's Dense layers and the head
    # forward + g·Wᵀ + xᵀ·g for each Dense, all on bfloat16 operands; attention's Q·Kᵀ and ·V
    # (forward and two gradients each) stay float32
    assert counts == {"bfloat16": 3 * dense, "float32": 3 * 2}


def test_model_with_bfloat16_dense_products_stays_near_float32():
    cfg32, cfg16 = tiny_config(), tiny_config(dense_matmul=DenseMatmul.BFLOAT16)
    model32, model16 = Transformer(cfg32, rngs=nnx.Rngs(0)), Transformer(cfg16, rngs=nnx.Rngs(0))
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 13, (2, 6)))
    out32, out16 = model32(tokens)[0], model16(tokens)[0]
    assert out16.dtype == jnp.float32
    diff = rel_err(out16, out32)
    assert BF16_EFFECT < diff < 2e-2  # rounded (not float32's logits), and only by rounding


def test_config_parses_the_switch_and_names_the_choices():
    model = ml_collections.ConfigDict({"dense_matmul": "bfloat16"})
    cfg = ModelConfig.from_config(model, vocab_size=13, num_outputs=13)
    assert cfg.dense_matmul is DenseMatmul.BFLOAT16 and cfg.to_dict()["dense_matmul"] == "bfloat16"
    assert ModelConfig(vocab_size=13, num_outputs=13).dense_matmul is DenseMatmul.COMPUTE
    with pytest.raises(ConfigError,
                       match="model.dense_matmul='bf16' is not one of: compute, bfloat16"):
        ModelConfig.from_config(ml_collections.ConfigDict({"dense_matmul": "bf16"}),
                                vocab_size=13, num_outputs=13)

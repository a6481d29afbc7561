"""`model.branch_init`: each scheme against its paper's formula, and the default left as it was.

At L = 8 layers the formulas give round numbers, so a wrong exponent cannot hide in rounding:
GPT-2's 1/√(2L) = 1/4; DeepNet's α = (2L)^(1/4) = 2 and β = (8L)^(-1/4) = 2^(-3/2).
A scheme scales the same draws (same rng) by its factor, so a scaled kernel equals float32(factor)
times the standard one bit for bit and every other kernel is untouched.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax.config import ADDED_FIELDS, BranchInit, ConfigError, Norm
from transformer_jax.model.blocks import Block
from transformer_jax.model.transformer import Transformer

LAYERS = 8
KERNELS = ("attention.query", "attention.key", "attention.value", "attention.out",
           "feed_forward.hidden", "feed_forward.output")


def block(branch_init: str, norm: Norm = Norm.POST, layers: int = LAYERS, **overrides) -> Block:
    cfg = tiny_config(num_layers=layers, norm=norm, branch_init=branch_init, **overrides)
    return Block(cfg, rngs=nnx.Rngs(0))


def kernel(module: Block, path: str) -> np.ndarray:
    owner, layer = path.split(".")
    return np.asarray(getattr(getattr(module, owner), layer).kernel[...])


def inputs(seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).normal(0, 1, (2, 5, 16)), jnp.float32)


def assert_scaled(scheme: str, factor: float, scaled: tuple[str, ...]):
    standard, other = block("standard"), block(scheme)
    for path in KERNELS:
        want = np.float32(factor) * kernel(standard, path) if path in scaled \
            else kernel(standard, path)
        np.testing.assert_array_equal(kernel(other, path), want, err_msg=path)
        ratio = np.std(kernel(other, path)) / np.std(kernel(standard, path))
        assert ratio == pytest.approx(factor if path in scaled else 1.0, rel=1e-6), path


def test_depth_scaled_draws_each_branchs_output_projection_times_one_over_root_2l():
    assert (2 * LAYERS) ** -0.5 == 0.25
    assert_scaled("depth_scaled", 0.25, ("attention.out", "feed_forward.output"))


def test_deepnet_draws_value_out_and_both_ffn_kernels_times_beta():
    beta = 2.0 ** -1.5  # (8·8)^(-1/4)
    assert_scaled("deepnet", beta, ("attention.value", "attention.out", "feed_forward.hidden",
                                    "feed_forward.output"))


def test_deepnet_multiplies_the_residual_by_alpha_inside_the_post_norm():
    model, x = block("deepnet"), inputs()
    alpha = 2.0  # (2·8)^(1/4)
    y, _ = model.attention(x)
    h = model.norm_after_attention(alpha * x + y)  # LN(α·x + G(x))
    want = model.norm_after_feed_forward(alpha * h + model.feed_forward(h))
    got, _ = model(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    plain = model.norm_after_feed_forward(h + model.feed_forward(h))  # α left out: caught
    assert not np.allclose(np.asarray(got), np.asarray(plain), atol=1e-3)


def test_the_stacked_layers_scale_every_layer_the_same_way():
    """StackedBlocks builds its layers under nnx.vmap: each layer's W_o is its draw × 1/√(2L)."""
    standard = Transformer(tiny_config(), rngs=nnx.Rngs(0))
    scaled = Transformer(tiny_config(branch_init="depth_scaled"), rngs=nnx.Rngs(0))
    for owner, layer in (("attention", "out"), ("feed_forward", "output")):
        get = lambda m: np.asarray(  # noqa: E731
            getattr(getattr(m.layers.blocks, owner), layer).kernel[...])  # [L, in, out]
        np.testing.assert_array_equal(get(scaled), np.float32(0.5) * get(standard))  # L = 2
    np.testing.assert_array_equal(scaled.layers.blocks.attention.query.kernel[...],
                                  standard.layers.blocks.attention.query.kernel[...])


@pytest.mark.parametrize("norm", [Norm.NONE, Norm.PRE])
@pytest.mark.parametrize("layers", [2, 8])  # the stack unrolled, and a lax.scan over layers
def test_rezero_makes_each_block_and_the_stack_the_identity_at_initialization(norm, layers):
    x = inputs()
    got, _ = block("rezero", norm)(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x))
    cfg = tiny_config(norm=norm, branch_init="rezero", num_layers=layers)
    stacked, _ = Transformer(cfg, rngs=nnx.Rngs(0)).layers(x)
    np.testing.assert_array_equal(np.asarray(stacked), np.asarray(x))


def test_rezero_gates_start_at_zero_and_get_a_gradient():
    model, x = block("rezero", Norm.PRE), inputs()
    target = inputs(seed=1)
    graphdef, params = nnx.split(model, nnx.Param)
    assert float(model.attention_gate[...]) == 0.0 == float(model.feed_forward_gate[...])

    def loss(params):
        out, _ = nnx.merge(graphdef, params)(x)
        return jnp.sum(out * target)

    grads = nnx.to_pure_dict(jax.grad(loss)(params))
    assert abs(float(grads["attention_gate"])) > 1e-3
    assert abs(float(grads["feed_forward_gate"])) > 1e-3
    # with α = 0 nothing reaches a branch's own weights yet: ReZero's first step moves α alone
    assert float(jnp.max(jnp.abs(grads["feed_forward"]["output"]["kernel"]))) == 0.0


def test_the_default_is_todays_block_bit_for_bit():
    """The default draws the same parameters (no gate, nothing scaled) and computes
    norm(x + F(x)) with no extra factor: the block as it was before model.branch_init."""
    cfg = tiny_config(num_layers=LAYERS)
    assert cfg.branch_init is BranchInit.STANDARD
    assert ADDED_FIELDS["model.branch_init"] == BranchInit.STANDARD.value
    default = Block(cfg, rngs=nnx.Rngs(0))
    paths = {p for p, _ in nnx.to_flat_state(nnx.state(default, nnx.Param))}
    assert not [p for p in paths if "gate" in "".join(map(str, p))]
    first = nnx.Linear(16, 16, rngs=nnx.Rngs(0))  # the first draw of the same stream: W_q
    np.testing.assert_array_equal(kernel(default, "attention.query"), first.kernel[...])
    x = inputs()
    y, _ = default.attention(x)
    h = default.norm_after_attention(x + y)
    want = default.norm_after_feed_forward(h + default.feed_forward(h))
    np.testing.assert_array_equal(np.asarray(default(x)[0]), np.asarray(want))


def test_an_unknown_scheme_names_the_choices_in_one_line():
    with pytest.raises(ConfigError, match=r"^model\.branch_init='fixup' is not one of: standard, "
                                          r"depth_scaled, rezero, deepnet$"):
        tiny_config(branch_init="fixup")


@pytest.mark.parametrize("overrides, fragment", [
    (dict(branch_init="deepnet", norm=Norm.PRE), r"needs model\.norm='post'.*got model\.norm='pre'"),
    (dict(branch_init="deepnet", norm=Norm.NONE), r"needs model\.norm='post'"),
    (dict(branch_init="rezero", residual=False), r"needs model\.residual=True"),
    (dict(branch_init="deepnet", residual=False), r"needs model\.residual=True"),
])
def test_a_scheme_without_what_it_acts_on_is_refused_in_one_line(overrides, fragment):
    with pytest.raises(ConfigError, match=rf"^model\.branch_init=[^\n]*{fragment}[^\n]*$"):
        tiny_config(**overrides)


def test_depth_scaled_keeps_96_layers_without_norms_finite_where_the_standard_is_not():
    """The issue's measurement as a loose property (the numbers: docs/configuration.md's note):
    an encoder of width 16 without norms, one forward pass at initialization."""
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 13, (4, 16)), jnp.int32)
    rms = {}
    for scheme in ("standard", "depth_scaled"):
        cfg = tiny_config(arch="encoder", norm=Norm.NONE, num_layers=96, branch_init=scheme)
        _, _, per_layer = Transformer(cfg, rngs=nnx.Rngs(0)).with_residual_rms(tokens)
        rms[scheme] = float(per_layer[-1])
    assert not np.isfinite(rms["standard"]) or rms["standard"] > 1e4
    assert np.isfinite(rms["depth_scaled"]) and rms["depth_scaled"] < 10

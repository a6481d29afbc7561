"""Head knock-out: a per-head mask on the attention output before W_o. Zero removes that head and
changes nothing else; ones change nothing at all."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax import MultiHeadAttention, Transformer
from transformer_jax.config import AttentionImpl, Norm, Position

D_MODEL, HEADS = 16, 4
HEAD_DIM = D_MODEL // HEADS


def identity_output(mha: MultiHeadAttention) -> MultiHeadAttention:
    """W_o = I, b_o = 0: the layer returns the concatenated heads themselves."""
    mha.out.kernel[...] = jnp.eye(D_MODEL)
    mha.out.bias[...] = jnp.zeros(D_MODEL)
    return mha


@pytest.mark.parametrize("impl", [AttentionImpl.EXPLICIT, AttentionImpl.FUSED])
@pytest.mark.parametrize("knocked", [0, 2])
def test_knocking_out_a_head_zeroes_it_and_leaves_the_others_bitwise(impl, knocked):
    mha = identity_output(MultiHeadAttention(D_MODEL, HEADS, implementation=impl,
                                             rngs=nnx.Rngs(0)))
    x = jax.random.normal(jax.random.key(1), (2, 5, D_MODEL))
    mask = jnp.ones(HEADS).at[knocked].set(0.0)
    call = nnx.jit(lambda m, x, hm: m(x, head_mask=hm)[0])
    full, cut = (np.asarray(call(mha, x, hm)).reshape(2, 5, HEADS, HEAD_DIM)
                 for hm in (jnp.ones(HEADS), mask))
    assert np.all(cut[:, :, knocked] == 0.0)
    others = [h for h in range(HEADS) if h != knocked]
    assert np.array_equal(cut[:, :, others], full[:, :, others])
    assert np.abs(full[:, :, knocked]).max() > 0  # the knocked head did contribute


@pytest.mark.parametrize("num_layers", [2, 7])  # 7: the layers run as a loop (lax.scan)
def test_a_mask_of_ones_is_no_mask(num_layers):
    cfg = tiny_config(num_layers=num_layers, num_heads=HEADS, position=Position.ALIBI)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(2), (2, 6), 0, cfg.vocab_size)
    padding = jnp.arange(6)[None, :] < jnp.array([[6], [4]])
    call = nnx.jit(lambda m, t, p, hm: m(t, p, head_mask=hm)[0])
    plain = nnx.jit(lambda m, t, p: m(t, p)[0])
    assert np.array_equal(call(model, tokens, padding, jnp.ones((num_layers, HEADS))),
                          plain(model, tokens, padding))


@pytest.mark.parametrize("norm", [Norm.PRE, Norm.POST])
def test_knock_out_equals_zeroing_that_heads_rows_of_w_o(norm):
    """Removing head j of layer l is the same model as one whose W_o never reads head j."""
    cfg = tiny_config(num_heads=HEADS, norm=norm)
    layer, head = 1, 2
    model = Transformer(cfg, rngs=nnx.Rngs(3))
    tokens = jax.random.randint(jax.random.key(4), (2, 6), 0, cfg.vocab_size)
    mask = jnp.ones((cfg.num_layers, HEADS)).at[layer, head].set(0.0)
    knocked = nnx.jit(lambda m, t, hm: m(t, head_mask=hm)[0])(model, tokens, mask)
    kernel = model.layers.blocks.attention.out.kernel  # [L, d_model, d_model]: rows read heads
    rows = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
    kernel[...] = kernel[...].at[layer, rows].set(0.0)
    zeroed = nnx.jit(lambda m, t: m(t)[0])(model, tokens)
    np.testing.assert_allclose(knocked, zeroed, rtol=0, atol=1e-6)
    untouched = Transformer(cfg, rngs=nnx.Rngs(3))
    assert np.abs(knocked - nnx.jit(lambda m, t: m(t)[0])(untouched, tokens)).max() > 1e-4


def test_a_mask_of_the_wrong_shape_names_both_shapes():
    cfg = tiny_config(num_heads=HEADS)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"\(4,\).*\[2, 4\]"):
        model(jnp.zeros((1, 3), jnp.int32), head_mask=jnp.ones(HEADS))

"""Named hook points (transformer_jax.model.hooks): a model nobody hooks is the model as it was,
bit for bit and op for op; a hook that returns its value changes nothing; a cached value is the
quantity it names (computed here by hand in NumPy); a hook that zeroes a head is that head's
rows of W_o zeroed; and all of it holds under jit and grad, on the unrolled and the scanned
layer stack."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax.config import Arch, AttentionImpl, Head, Norm, Position
from transformer_jax.model import hook_points, transformer
from transformer_jax.model.hooks import hook_names, run_with_cache, run_with_hooks

HEADS = 2
STACKS = ["unrolled", "scanned"]


@pytest.fixture(params=STACKS)
def stack(request, monkeypatch):
    """The layers as the written-out scan (2 layers) or as a loop (lax.scan, not unrolled)."""
    if request.param == "scanned":
        monkeypatch.setattr(transformer, "UNROLL_MAX_LAYERS", 0)
    return request.param


def model_and_tokens(seed: int = 0, **overrides):
    cfg = tiny_config(num_heads=HEADS, **overrides)
    model = transformer.Transformer(cfg, rngs=nnx.Rngs(seed))
    tokens = jax.random.randint(jax.random.key(seed + 1), (2, 6), 0, cfg.vocab_size)
    return model, tokens


def identity(value, name):
    return value


@pytest.mark.parametrize("overrides", [dict(norm=Norm.PRE), dict(norm=Norm.POST,
                                       position=Position.ROTARY)], ids=["pre", "post-rotary"])
def test_identity_hooks_and_a_full_cache_leave_the_logits_bit_identical(stack, overrides):
    model, tokens = model_and_tokens(**overrides)
    plain, _ = model(tokens)
    every = {name: identity for name in hook_names(model)}
    hooked = run_with_hooks(model, tokens, hooks=every)
    cached, cache = run_with_cache(model, tokens)
    assert np.array_equal(hooked, plain) and np.array_equal(cached, plain)
    assert list(cache) == list(hook_names(model, batch=2, length=6))


def lowered_text(call, model, tokens) -> str:
    graphdef, state = nnx.split(model)

    def program(state, tokens):  # one name for every variant: the module's name is in the text
        return call(nnx.merge(graphdef, state), tokens)

    return jax.jit(program).lower(state, tokens).as_text(debug_info=False)


def test_asking_for_nothing_compiles_the_plain_program(stack):
    """run_with_hooks(hooks={}) and run_with_cache(names=[]) lower to the very program of the
    model's own call: the hook points add no operation when nothing is asked. Identity hooks
    on every point do not either (JAX drops a switch whose branches all return their input)."""
    model, tokens = model_and_tokens(norm=Norm.PRE)
    plain = lowered_text(lambda m, t: m(t)[0], model, tokens)
    assert lowered_text(lambda m, t: run_with_hooks(m, t, hooks={}), model, tokens) == plain
    assert lowered_text(lambda m, t: run_with_cache(m, t, names=[])[0], model, tokens) == plain
    every = {name: identity for name in hook_names(model)}
    assert lowered_text(lambda m, t: run_with_hooks(m, t, hooks=every), model, tokens) == plain
    double = {"blocks.1.resid_pre": lambda value, name: 2 * value}
    asked = lowered_text(lambda m, t: run_with_hooks(m, t, hooks=double), model, tokens)
    assert asked != plain  # the comparison sees a change: a hook adds the layer switch


def test_the_train_step_builds_no_hook_points(monkeypatch):
    """The trainer's step never passes hooks: lowering it constructs no hook context at all."""
    from transformer_jax.config import TrainConfig
    from transformer_jax.train import init, steps

    def refuse(*args, **kwargs):
        raise AssertionError("the train step built a hook context")

    for cls in (hook_points.HookPoints, hook_points.Scope, hook_points.LayerHooks):
        monkeypatch.setattr(cls, "__init__", refuse)
    cfg = tiny_config(num_outputs=13)
    tx, schedule = steps.make_optimizer(TrainConfig(num_steps=10, batch_size=2, warmup_steps=2))
    graphdef, params = init.init_model(cfg, 0)
    step = steps.make_train_step(graphdef, cfg, tx, schedule)
    batch = dict(inputs=np.ones((2, 6), np.int32), targets=np.ones((2, 6), np.int32),
                 weights=np.ones((2, 6), np.float32), padding_mask=np.ones((2, 6), bool))
    state = {"params": params, "opt_state": tx.init(params), "step": np.zeros((), np.int32)}
    assert "stablehlo.case" not in step.lower(state, batch, jax.random.key(0)).as_text()


def numpy_layer_norm(x, scale, bias, eps):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * scale + bias


def numpy_sinusoids(length, d_model):
    pos, i = np.arange(length)[:, None], np.arange(0, d_model, 2)[None, :]
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(pos / 10000 ** (i / d_model))
    table[:, 1::2] = np.cos(pos / 10000 ** (i / d_model))
    return table


def layer_params(model, layer):
    """Block `layer`'s parameters as float64 NumPy arrays: {'attention.query.kernel': ...}."""
    state = nnx.to_pure_dict(nnx.state(model.layers.blocks, nnx.Param))
    flat = jax.tree_util.tree_flatten_with_path(state)[0]
    return {".".join(str(k.key) for k in path): np.asarray(leaf[layer], np.float64)
            for path, leaf in flat}


def test_cached_values_are_the_quantities_they_name_computed_by_hand(stack):
    """Pre-LN causal decoder with sinusoidal positions: the first block's input, layer 1's
    normalized input, attention weights, head outputs and mid-block residual, in NumPy from
    the parameters and the cached block input."""
    model, tokens = model_and_tokens(norm=Norm.PRE)
    cfg, layer = model.cfg, 1
    _, cache = run_with_cache(model, tokens, names=[
        "blocks.0.resid_pre", "blocks.1.resid_pre", "blocks.1.ln1.out", "blocks.1.attn.weights",
        "blocks.1.attn.head_out", "blocks.1.resid_mid"])
    table = np.asarray(model.embed.embedding[...], np.float64)
    embedded = table[np.asarray(tokens)] * cfg.d_model ** 0.5 + numpy_sinusoids(6, cfg.d_model)
    np.testing.assert_allclose(cache["blocks.0.resid_pre"], embedded, atol=1e-5)

    p = layer_params(model, layer)
    x = np.asarray(cache["blocks.1.resid_pre"], np.float64)  # [B, T, D]
    normed = numpy_layer_norm(x, p["norm_before_attention.scale"],
                              p["norm_before_attention.bias"], cfg.norm_eps)
    np.testing.assert_allclose(cache["blocks.1.ln1.out"], normed, atol=1e-5)

    def heads(name):  # [B, T, D] -> [B, T, H, d_k]
        y = normed @ p[f"attention.{name}.kernel"] + p[f"attention.{name}.bias"]
        return y.reshape(2, 6, HEADS, cfg.d_k)

    q, k, v = heads("query"), heads("key"), heads("value")
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(cfg.d_k)
    logits = np.where(np.tril(np.ones((6, 6), bool)), logits, -np.inf)  # causal
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(cache["blocks.1.attn.weights"], weights, atol=1e-5)
    head_out = np.einsum("bhqk,bkhd->bqhd", weights, v)
    np.testing.assert_allclose(cache["blocks.1.attn.head_out"], head_out, atol=1e-5)
    mid = x + head_out.reshape(2, 6, -1) @ p["attention.out.kernel"] + p["attention.out.bias"]
    np.testing.assert_allclose(cache["blocks.1.resid_mid"], mid, atol=1e-5)


@pytest.mark.parametrize("norm", [Norm.PRE, Norm.POST])
def test_zeroing_a_heads_output_equals_zeroing_its_rows_of_w_o(stack, norm):
    layer, head = 1, 1
    model, tokens = model_and_tokens(seed=3, norm=norm)
    knock_out = lambda value, name: value.at[:, :, head].set(0.0)  # noqa: E731
    hooked = jax.jit(lambda t: run_with_hooks(
        model, t, hooks={f"blocks.{layer}.attn.head_out": knock_out}))(tokens)
    plain, _ = model(tokens)
    d_k = model.cfg.d_k
    kernel = model.layers.blocks.attention.out.kernel  # [num_layers, H·d_k, d_model]
    kernel[...] = kernel[...].at[layer, head * d_k:(head + 1) * d_k].set(0.0)
    zeroed, _ = model(tokens)
    np.testing.assert_allclose(hooked, zeroed, atol=1e-5)
    assert np.abs(np.asarray(hooked) - np.asarray(plain)).max() > 1e-3  # the head mattered


def test_a_hook_reaches_its_own_layer_only(stack):
    """On the scanned stack one block is traced for every layer: a hook named for layer 1 must
    run in layer 1 and nowhere else."""
    model, tokens = model_and_tokens(norm=Norm.PRE)
    names = ["blocks.0.attn.weights", "blocks.1.resid_pre", "blocks.1.attn.weights"]
    _, plain = run_with_cache(model, tokens, names=names)
    zero = lambda value, name: jnp.zeros_like(value)  # noqa: E731
    hooks = {"blocks.1.resid_pre": zero}
    _, cache = jax.jit(lambda t: run_with_cache(model, t, names=names, hooks=hooks))(tokens)
    assert np.array_equal(cache["blocks.0.attn.weights"], plain["blocks.0.attn.weights"])
    assert np.all(np.asarray(cache["blocks.1.resid_pre"]) == 0.0)
    assert not np.allclose(cache["blocks.1.attn.weights"], plain["blocks.1.attn.weights"])


def test_the_gradient_with_respect_to_a_heads_output(stack):
    """d loss / d head_out, taken through a hook that adds δ = 0, agrees with the head mask's
    gradient (the existing knock-out switch): ∂L/∂m_h = Σ head_out_h · ∂L/∂head_out_h."""
    layer, head = 1, 0
    model, tokens = model_and_tokens(seed=5, norm=Norm.PRE)
    name = f"blocks.{layer}.attn.head_out"
    _, cache = run_with_cache(model, tokens, names=[name])

    def loss_of_delta(delta):
        logits = run_with_hooks(model, tokens, hooks={name: lambda value, _: value + delta})
        return jnp.mean(jax.nn.log_softmax(logits)[..., 0])

    def loss_of_mask(mask):
        return jnp.mean(jax.nn.log_softmax(model(tokens, head_mask=mask)[0])[..., 0])

    by_hook = jax.jit(jax.grad(loss_of_delta))(jnp.zeros_like(cache[name]))
    by_mask = jax.grad(loss_of_mask)(jnp.ones((model.cfg.num_layers, HEADS)))
    through_hook = float(jnp.sum(by_hook[:, :, head] * cache[name][:, :, head]))
    np.testing.assert_allclose(through_hook, by_mask[layer, head], rtol=1e-4, atol=1e-7)
    assert np.all(np.asarray(by_hook[:, :, 1 - head]) != 0.0)  # the other head's too


def test_the_fused_model_computes_the_weights_it_is_asked_for():
    """A fused-attention model has no weights to hand out: asking for them runs the explicit
    path, whose weights are the explicit model's."""
    fused, tokens = model_and_tokens(attention=AttentionImpl.FUSED, norm=Norm.PRE)
    explicit, _ = model_and_tokens(attention=AttentionImpl.EXPLICIT, norm=Norm.PRE)
    name = "blocks.1.attn.weights"
    (_, a), (_, b) = (run_with_cache(m, tokens, names=[name]) for m in (fused, explicit))
    np.testing.assert_allclose(a[name], b[name], atol=1e-6)


@pytest.mark.parametrize("overrides, present, absent", [
    (dict(norm=Norm.POST), ["blocks.0.ln1.out", "embed.position"], ["ln_final.out"]),
    (dict(norm=Norm.NONE, position=Position.ROTARY), [], ["blocks.0.ln1.out", "embed.position"]),
    (dict(norm=Norm.PRE, token_types=2, embed_norm=True, head=Head.POOLED,
          arch=Arch.ENCODER),
     ["embed.token_type", "embed.norm.out", "ln_final.out", "pooled"], []),
])
def test_hook_names_lists_the_points_the_model_has(overrides, present, absent):
    cfg = tiny_config(**overrides)
    names = hook_names(cfg, batch=3, length=5)
    assert all(n in names for n in present) and not any(n in names for n in absent)
    assert names["blocks.1.attn.weights"] == (3, cfg.num_heads, 5, 5)
    assert names["blocks.0.attn.head_out"] == (3, 5, cfg.num_heads, cfg.d_k)
    assert names["blocks.0.mlp.hidden"] == (3, 5, cfg.d_ff)


def test_unknown_names_and_misshapen_hooks_are_one_line_errors():
    model, tokens = model_and_tokens()
    with pytest.raises(ValueError, match="no hook point 'blocks.9.resid_pre'"):
        run_with_cache(model, tokens, names=["blocks.9.resid_pre"])
    with pytest.raises(ValueError, match="returned shape"):
        run_with_hooks(model, tokens, hooks={"blocks.0.resid_pre": lambda v, n: v[:, :1]})
    with pytest.raises(ValueError, match="returned None"):
        run_with_hooks(model, tokens, hooks={"embed.token": lambda v, n: None})

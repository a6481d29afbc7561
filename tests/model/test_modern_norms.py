"""The modern alternatives to ÷√d_k and LayerNorm: QK-norm (`model.qk_norm`) and the norm's
function as its own axis (`model.norm_type` = layernorm | rmsnorm | dyt). Parity with PyTorch and
NumPy, the logit bound QK-norm exists for, every combination built and differentiated, config
errors (in-process and through the CLI), and the qk_norm study's declaration."""
from __future__ import annotations

import concurrent.futures
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from flax import nnx

from conftest import assert_close, kernel_and_bias, randomize_biases_and_scales, tiny_config
from helpers_train import SYNTHETIC, error_lines, main_args, run_main
from transformer_jax import (AttentionImpl, ConfigError, DType, DynamicTanh, ModelConfig,
                             MultiHeadAttention, Norm, NormType, Transformer, attention_mask,
                             make_norm)
from transformer_jax.model.attention import Mask
from transformer_jax.model.norms import NORM_EPSILON, BatchNorm
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
BATCH, LENGTH, D_MODEL, HEADS = 2, 6, 16, 2
HEAD_DIM = D_MODEL // HEADS


def qk_norm_mha(attn_scale=True, implementation=AttentionImpl.EXPLICIT, dtype=jnp.float32):
    mha = MultiHeadAttention(D_MODEL, HEADS, attn_scale=attn_scale, qk_norm=True,
                             implementation=implementation, dtype=dtype, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(mha)  # γ_q, γ_k away from 1, so a swapped or dropped γ shows
    return mha


def causal_padding():
    padding = np.arange(LENGTH)[None, :] < np.array([LENGTH, 4])[:, None]  # [B, T], real first
    return padding, attention_mask(jnp.asarray(padding), LENGTH, causal=True)


def torch_qk_norm_attention(mha, x: np.ndarray, allowed: np.ndarray | None, attn_scale: bool):
    """The same attention in PyTorch ops: W_q/W_k/W_v, split heads, layer_norm over head_dim
    (scale only) on q and k, softmax(q·kᵀ·scale)·v, W_o."""
    t = torch.from_numpy(x)
    def linear(dense, h):
        kernel, bias = (torch.from_numpy(np.array(a)) for a in kernel_and_bias(dense))
        return h @ kernel + bias
    heads = lambda h: h.reshape(BATCH, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)  # [B, H, T, D]
    gamma = lambda norm: torch.from_numpy(np.array(norm.scale[...]))  # noqa: E731
    q = F.layer_norm(heads(linear(mha.query, t)), (HEAD_DIM,), weight=gamma(mha.query_norm),
                     eps=NORM_EPSILON)
    k = F.layer_norm(heads(linear(mha.key, t)), (HEAD_DIM,), weight=gamma(mha.key_norm),
                     eps=NORM_EPSILON)
    v = heads(linear(mha.value, t))
    scale = HEAD_DIM ** -0.5 if attn_scale else 1.0
    logits = q @ k.transpose(-1, -2) * scale  # [B, H, T, T]
    if allowed is not None:
        logits = logits.masked_fill(~torch.from_numpy(np.array(allowed)), float("-inf"))
    out = torch.softmax(logits, dim=-1) @ v  # [B, H, T, D]
    return linear(mha.out, out.transpose(1, 2).reshape(BATCH, LENGTH, D_MODEL)).numpy()


# --- QK-norm ------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn_scale", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_qk_norm_mha_matches_torch(rng, attn_scale, masked):
    mha = qk_norm_mha(attn_scale)
    x = rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32)
    padding, mask = causal_padding()
    allowed = np.asarray(mask) if masked else None
    ours, _ = mha(jnp.asarray(x), mask=mask if masked else None)
    reference = torch_qk_norm_attention(mha, x, allowed, attn_scale)
    assert_close(ours, reference)


def test_qk_norm_comes_before_the_qk_transform(rng):
    """Rotary positions (the qk_transform) receive the normalized q and k: the norm acts on the
    projection, the rotation on the normalized vectors (as in OLMo 2, Gemma)."""
    mha = qk_norm_mha()
    x = jnp.asarray(rng.normal(0, 3, (BATCH, LENGTH, D_MODEL)).astype(np.float32))
    seen = {}

    def record(q, k):
        seen.update(q=q, k=k)
        return q, k

    mha(x, qk_transform=record)
    q, k, _ = mha.project(x)
    assert_close(seen["q"], mha.query_norm(q))
    assert_close(seen["k"], mha.key_norm(k))
    unscaled = np.asarray(seen["q"]) / np.asarray(mha.query_norm.scale[...])  # [B, T, H, D]
    assert_close(unscaled.mean(-1), np.zeros(unscaled.shape[:-1]), atol=1e-5)
    assert_close(unscaled.std(-1), np.ones(unscaled.shape[:-1]), atol=1e-3)


@pytest.mark.parametrize("attn_scale", [True, False])
def test_qk_norm_bounds_the_logits_whatever_the_input_scale(rng, attn_scale):
    """|q̂·k̂|·scale ≤ scale·head_dim·max|γ_q|·max|γ_k|: scaling the input ×1000 leaves the max logit
    within that bound (and about where it was), where without QK-norm it grows ×10⁶."""
    with_norm = qk_norm_mha(attn_scale)
    without = MultiHeadAttention(D_MODEL, HEADS, attn_scale=attn_scale, rngs=nnx.Rngs(0))
    scale = HEAD_DIM ** -0.5 if attn_scale else 1.0
    gamma = lambda n: float(np.abs(np.asarray(n.scale[...])).max())  # noqa: E731
    bound = scale * HEAD_DIM * gamma(with_norm.query_norm) * gamma(with_norm.key_norm)
    x = jnp.asarray(rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32))
    logit = lambda m, s: float(m(x * s, probe=True)[1].max_abs_logit)  # noqa: E731
    for s in (1e-3, 1.0, 1e3):
        assert logit(with_norm, s) <= bound * (1 + 1e-5)
    assert logit(with_norm, 1e3) < 2.0 * logit(with_norm, 1.0)
    assert logit(without, 1e3) > 1e5 * logit(without, 1.0)


@pytest.mark.parametrize("dtype, atol", [(jnp.float32, 1e-5), (jnp.bfloat16, 0.1)])
def test_qk_norm_explicit_and_fused_agree(rng, dtype, atol):
    explicit = qk_norm_mha(dtype=dtype)
    fused = MultiHeadAttention(D_MODEL, HEADS, qk_norm=True, implementation=AttentionImpl.FUSED,
                               dtype=dtype, rngs=nnx.Rngs(0))
    nnx.update(fused, nnx.state(explicit))
    x = jnp.asarray(rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32)).astype(dtype)
    padding, dense = causal_padding()
    reference, _ = explicit(x, mask=dense)
    in_parts = Mask(dense, True, jnp.sum(jnp.asarray(padding), axis=-1, dtype=jnp.int32))
    ours = fused(x, mask=in_parts)[0]
    assert ours.dtype == reference.dtype == dtype
    assert_close(ours.astype(jnp.float32), reference.astype(jnp.float32), atol=atol)


def test_qk_norm_adds_two_head_dim_scales():
    count = lambda m: sum(p.size for p in jax.tree.leaves(nnx.state(m, nnx.Param)))  # noqa: E731
    plain = MultiHeadAttention(D_MODEL, HEADS, rngs=nnx.Rngs(0))
    assert count(qk_norm_mha()) - count(plain) == 2 * HEAD_DIM


# --- norm types ---------------------------------------------------------------------------------


def test_dyt_matches_numpy_and_alpha_gets_a_gradient(rng):
    dyt = DynamicTanh(D_MODEL, rngs=nnx.Rngs(0))
    assert float(dyt.alpha[...]) == 0.5  # Zhu et al. 2025's α₀
    np.testing.assert_array_equal(dyt.scale[...], np.ones(D_MODEL))
    np.testing.assert_array_equal(dyt.bias[...], np.zeros(D_MODEL))
    alpha, gamma, beta = 0.7, rng.normal(1, 0.2, D_MODEL), rng.normal(0, 0.2, D_MODEL)
    dyt.alpha[...] = jnp.float32(alpha)
    dyt.scale[...], dyt.bias[...] = jnp.asarray(gamma, jnp.float32), jnp.asarray(beta, jnp.float32)
    x = rng.normal(0, 2, (BATCH, LENGTH, D_MODEL)).astype(np.float32)
    assert_close(dyt(jnp.asarray(x)), gamma * np.tanh(alpha * x) + beta)

    grads = nnx.grad(lambda m: jnp.sum(m(jnp.asarray(x))))(dyt)
    expected = np.sum(gamma * x * (1 - np.tanh(alpha * x) ** 2))  # ∂/∂α Σ γ·tanh(α·x) + β
    np.testing.assert_allclose(float(grads.alpha[...]), expected, rtol=1e-4)


@pytest.mark.parametrize("norm_type", list(NormType))
def test_make_norm_matches_its_formula(rng, norm_type):
    norm = make_norm(norm_type, D_MODEL, dtype=jnp.float32, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(norm)
    x = rng.normal(0.5, 2, (BATCH, LENGTH, D_MODEL)).astype(np.float32)
    params = {k: np.asarray(v[...]) for k, v in nnx.state(norm, nnx.Param).items()}
    t, weight = torch.from_numpy(x), torch.from_numpy(params["scale"])
    if norm_type is NormType.LAYERNORM:
        reference = F.layer_norm(t, (D_MODEL,), weight, torch.from_numpy(params["bias"]),
                                 eps=NORM_EPSILON).numpy()
    elif norm_type is NormType.RMSNORM:
        assert set(params) == {"scale"}  # no β, no centring
        reference = F.rms_norm(t, (D_MODEL,), weight, eps=NORM_EPSILON).numpy()
    elif norm_type is NormType.BATCHNORM:  # as built, evaluation: running mean 0, variance 1
        reference = F.batch_norm(t.reshape(-1, D_MODEL), torch.zeros(D_MODEL), torch.ones(D_MODEL),
                                 weight, torch.from_numpy(params["bias"]), training=False,
                                 eps=NORM_EPSILON).numpy().reshape(x.shape)  # training: test_batchnorm
    else:
        reference = params["scale"] * np.tanh(params["alpha"] * x) + params["bias"]
    assert_close(norm(jnp.asarray(x)), reference)


COMBOS = [dict(norm=n, norm_type=t) for n in Norm for t in NormType] + [
    dict(norm=Norm.PRE, qk_norm=True, attention=a, dtype=d)
    for a in AttentionImpl for d in DType]


@pytest.mark.parametrize("overrides", COMBOS, ids=lambda o: "-".join(
    str(getattr(v, "value", v)) for v in o.values()))
def test_model_runs_and_differentiates_with_every_norm(overrides):
    cfg = tiny_config(**overrides)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    expected = {NormType.LAYERNORM: nnx.LayerNorm, NormType.RMSNORM: nnx.RMSNorm,
                NormType.DYT: DynamicTanh, NormType.BATCHNORM: BatchNorm}[cfg.norm_type]
    if cfg.norm is Norm.PRE:  # the final norm after a Pre-LN stack is of the same type
        assert isinstance(model.final_norm, expected)
    norms = [model.layers.blocks.norm_before_attention, model.layers.blocks.norm_after_attention]
    assert [type(n) for n in norms if n is not None] == ([] if cfg.norm is Norm.NONE else [expected])
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (BATCH, LENGTH)))
    padding = jnp.asarray(causal_padding()[0])
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)  # rest: BatchNorm's statistics

    @jax.jit
    def loss_and_grads(params, rest):
        def loss(params):
            logits, _ = nnx.merge(graphdef, params, rest)(tokens, padding)
            return jnp.mean(jax.nn.logsumexp(logits, -1) - logits[..., 0])
        return jax.value_and_grad(loss)(params)

    loss, grads = loss_and_grads(params, rest)
    assert np.isfinite(float(loss))
    flat = {jax.tree_util.keystr(p): np.asarray(g, np.float32)
            for p, g in jax.tree_util.tree_flatten_with_path(grads)[0]}
    assert all(np.all(np.isfinite(g)) for g in flat.values())
    for name, g in flat.items():  # every norm parameter learns (α of DyT, γ of QK-norm, ...)
        if "norm" in name:
            assert np.any(g != 0), name


def test_qk_norm_model_explicit_and_fused_agree():
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, 13, (BATCH, LENGTH)))
    padding = jnp.asarray(causal_padding()[0])
    outs = [Transformer(tiny_config(qk_norm=True, norm=Norm.PRE, attention=a),
                        rngs=nnx.Rngs(0))(tokens, padding)[0] for a in AttentionImpl]
    assert_close(*outs)


# --- configuration ------------------------------------------------------------------------------


def model_config(**model):
    return ModelConfig.from_config(model, vocab_size=13, num_outputs=7)


def test_config_parses_norm_type_and_qk_norm():
    cfg = model_config(norm="pre", norm_type="dyt", qk_norm=True)
    assert cfg.norm is Norm.PRE and cfg.norm_type is NormType.DYT and cfg.qk_norm is True
    assert cfg.to_dict()["norm_type"] == "dyt"
    default = model_config()
    assert default.norm_type is NormType.LAYERNORM and default.qk_norm is False


@pytest.mark.parametrize("model, fragments, absent", [
    (dict(norm_type="bogus"), ["model.norm_type='bogus'", "layernorm, rmsnorm, dyt, batchnorm"],
     []),
    (dict(norm="dyt"), ["model.norm='dyt'", "post, pre, none", "model.norm_type=dyt"], []),
    (dict(norm="rmsnorm"), ["model.norm='rmsnorm'", "model.norm_type=rmsnorm"], []),
    (dict(norm="middle"), ["model.norm='middle'", "post, pre, none"], ["norm_type"]),
    (dict(qk_norm="yes"), ["model.qk_norm='yes'", "True or False"], []),
    (dict(qk_norm=1), ["model.qk_norm=1", "True or False"], []),
])
def test_bad_values_fail_with_one_line_naming_the_choices(model, fragments, absent):
    with pytest.raises(ConfigError) as error:
        model_config(**model)
    message = str(error.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    for fragment in absent:
        assert fragment not in message, (fragment, message)


def test_a_norm_type_given_as_a_string_is_parsed_and_a_bad_one_refused():
    assert tiny_config(norm_type="dyt").norm_type is NormType.DYT
    with pytest.raises(ConfigError, match="model.norm_type='dy' is not one of: layernorm"):
        tiny_config(norm_type="dy")


CLI_CASES = {
    "norm_type": ({"model.norm_type": "bogus"}, ["model.norm_type='bogus'",
                                                 "layernorm, rmsnorm, dyt, batchnorm"]),
    "norm_is_a_type": ({"model.norm": "dyt"}, ["model.norm='dyt'", "post, pre, none",
                                               "model.norm_type=dyt"]),
    "batchnorm_microbatches": ({"model.norm_type": "batchnorm", "train.microbatches": 2},
                               ["train.microbatches=2", "model.norm_type='batchnorm'"]),
}


def test_cli_bad_norm_values_exit_2_with_one_error_line(tmp_path, tj_data_dir):
    def run(name):
        overrides = CLI_CASES[name][0]
        return run_main(main_args(f"{SYNTHETIC}:tiny", tmp_path / name, tj_data_dir, overrides))

    with concurrent.futures.ThreadPoolExecutor(len(CLI_CASES)) as pool:
        procs = dict(zip(CLI_CASES, pool.map(run, CLI_CASES)))
    for name, proc in procs.items():
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr + proc.stdout
        lines = error_lines(proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("error: "), lines
        for fragment in CLI_CASES[name][1]:
            assert fragment in lines[0], (fragment, lines[0])
        assert not (tmp_path / name).exists()


# --- the qk_norm study --------------------------------------------------------------------------


def test_qk_norm_study_is_complete_at_every_size():
    """(tests/studies/test_sweep.py checks the other experiment files this way.)"""
    for size in ("tiny", "default", "large"):
        study = load_study(REPO / "experiments" / "qk_norm.py", size)
        assert study.claim and study.published and study.expectations
        assert len(study.seeds) >= 3
        assert any(m.startswith("attention/max_abs_logit/") for m in study.metrics)
        for variant in study.variants:
            config = study.config(variant, study.seeds[0])
            cfg = ModelConfig.from_config(config.model, vocab_size=13, num_outputs=7)
            assert cfg.attn_scale or not cfg.qk_norm  # QK-norm variants keep ÷√d_k on

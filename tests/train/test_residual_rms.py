"""`layers/residual_rms/layer_NN`, the RMS of the residual stream after each layer, checked layer
by layer against the blocks run by hand on the same batch and parameters, with the RMS taken in
NumPy over the real tokens. The model has 3 layers and 2 heads (a layer index read as a head index
would show) and its batch has padding; planted bugs (padded positions counted; the stream before
the layer instead of after it) fail the same comparison."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from helpers_train import tiny_config
from transformer_jax import train
from transformer_jax.config import ModelConfig, Norm
from transformer_jax.model import transformer
from transformer_jax.model.positions import sinusoidal_table
from transformer_jax.train import steps, summaries

LAYERS = 3
RTOL = 1e-5  # float32 sums of a few thousand squares in another order


def _config(tj_data_dir, norm: str = "pre"):
    return tiny_config(overrides={"data.data_dir": tj_data_dir, "model.num_layers": LAYERS,
                                  "model.norm": norm, "train.num_steps": 2,
                                  "train.warmup_steps": 0, "train.log_every": 1,
                                  "train.eval_every": 2, "train.checkpoint_every": 2})


def _first_batch(run):
    return run.dataset.train_batch(0, run.train.batch_size, run.model.arch.value)


def direct_rms(run) -> tuple[np.ndarray, np.ndarray]:
    """(RMS of the stream after each block, RMS of each block's input): [num_layers] each, of the
    step-0 parameters on the first train batch, over its real tokens. The embedding as
    Transformer.__call__ computes it (sinusoidal positions), then each block by hand."""
    graphdef, params = train.init_model(run.model, run.seed)
    model, batch = nnx.merge(graphdef, params), _first_batch(run)
    real = np.asarray(batch["padding_mask"])
    d = run.model.d_model
    x = model.embed(batch["inputs"]) * d ** 0.5 + sinusoidal_table(real.shape[1], d)
    mask = transformer.attention_mask(batch["padding_mask"], real.shape[1], causal=False)
    block_def, stacked = nnx.split(model.layers.blocks)
    rms = lambda x: np.sqrt(np.mean(np.asarray(x, np.float64)[real] ** 2))  # noqa: E731
    after, before = [], []
    for layer in range(run.model.num_layers):
        block = nnx.merge(block_def, jax.tree.map(lambda p: p[layer], stacked))
        before.append(rms(x))
        x, _ = block(x, mask=mask, token_mask=batch["padding_mask"])
        after.append(rms(x))
    return np.asarray(after), np.asarray(before)


def check(logged, direct) -> None:
    np.testing.assert_allclose(np.asarray(logged, np.float64), direct, rtol=RTOL)


def step_metrics(run, microbatches: int = 1) -> dict:
    """The train step's own metrics (what the trainer logs) at the step-0 parameters."""
    graphdef, params = train.init_model(run.model, run.seed)
    tx, schedule = steps.make_optimizer(run.train)
    step = steps.make_train_step(graphdef, run.model, tx, schedule, microbatches=microbatches)
    state = {"params": params, "opt_state": tx.init(params), "step": np.int32(0)}
    return step(jax.tree.map(np.array, state), _first_batch(run), jax.random.key(0))[1]


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_logged_residual_rms_is_the_stream_after_each_layer(tmp_path, tj_data_dir):
    config = _config(tj_data_dir)
    train.train_and_evaluate(config, str(tmp_path))
    scalars = summaries.read_scalars(str(tmp_path))
    logged = [dict(scalars[f"layers/residual_rms/layer_{l:02d}"])[1] for l in range(LAYERS)]
    run = train.build_run(config)
    assert not np.asarray(_first_batch(run)["padding_mask"]).all()  # padding to leave out
    after, before = direct_rms(run)
    assert len(set(np.round(after, 5))) == LAYERS  # distinct per layer: a shuffle would show
    # the stream before each layer is far from the one after it: reading it would fail the check
    assert np.all(np.abs(after - before) > 100 * RTOL * after)
    check(logged, after)
    assert dict(scalars["layers/residual_rms_last_layer"])[1] == logged[-1]
    assert f"layers/residual_rms/layer_{LAYERS:02d}" not in scalars


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_a_planted_bug_counting_padded_positions_fails_the_check(tj_data_dir, monkeypatch):
    run = train.build_run(_config(tj_data_dir))
    after, _ = direct_rms(run)
    check(step_metrics(run)["residual_rms"], after)
    every_position = transformer.residual_rms
    monkeypatch.setattr(transformer, "residual_rms", lambda x, mask: every_position(x, None))
    with pytest.raises(AssertionError):
        check(step_metrics(run)["residual_rms"], after)


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_microbatches_combine_to_the_whole_batch(tj_data_dir):
    """Two microbatches with different numbers of real tokens: their RMS combined by
    `steps.combine_rms` is the whole batch's."""
    run = train.build_run(_config(tj_data_dir))
    real = np.asarray(_first_batch(run)["padding_mask"])
    assert real[0::2].sum() != real[1::2].sum()  # the strided parts differ: weights matter
    check(step_metrics(run, microbatches=2)["residual_rms"], direct_rms(run)[0])


def test_post_ln_stream_is_unit_scale_and_pre_ln_grows():
    """What activation_range's expectations rest on, at initialization: a LayerNorm output with
    unit gain and zero bias has RMS √(var/(var + ε)) ≈ 1; Pre-LN's stream adds every block's
    update to the embedding and grows layer by layer."""
    tokens = np.random.default_rng(0).integers(0, 16, (4, 12))
    found = {}
    for norm in (Norm.POST, Norm.PRE):
        cfg = ModelConfig(vocab_size=16, num_outputs=16, d_model=32, num_heads=2, d_ff=64,
                          num_layers=4, norm=norm)
        model = transformer.Transformer(cfg, rngs=nnx.Rngs(params=0))
        found[norm] = np.asarray(model.with_residual_rms(tokens)[2])
    np.testing.assert_allclose(found[Norm.POST], 1.0, atol=1e-3)
    assert np.all(np.diff(found[Norm.PRE]) > 0) and found[Norm.PRE][0] > 1.1

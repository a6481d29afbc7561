"""`layers/qk_grad_norm/layer_NN`, the gradient that reaches W_q and W_k through the softmax,
checked layer by layer against jax.grad of the loss on the same batch and parameters. The model
has 3 layers and 2 heads, so a layer index read as a head index would show; a planted bug (the
norm of W_v's gradient instead, which bypasses the softmax) fails the same comparison."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from helpers_train import tiny_config
from transformer_jax import train
from transformer_jax.model.norms import TRAINING
from transformer_jax.train import steps, summaries

LAYERS = 3
RTOL = 1e-4  # float32 sums of a few thousand squares in another order


def _config(tj_data_dir):
    return tiny_config(overrides={"data.data_dir": tj_data_dir, "model.num_layers": LAYERS,
                                  "train.num_steps": 2, "train.warmup_steps": 0,
                                  "train.log_every": 1, "train.eval_every": 2,
                                  "train.checkpoint_every": 2})


def direct_qk_norms(run, kernels=("query", "key")) -> np.ndarray:
    """Per layer, sqrt(|dL/dW_q|² + |dL/dW_k|²) of the step-0 parameters on the first train
    batch, by jax.grad of the loss and NumPy: [num_layers]."""
    graphdef, params = train.init_model(run.model, run.seed)
    batch = run.dataset.train_batch(0, run.train.batch_size, run.model.arch.value)

    def loss(params):
        model = nnx.view(nnx.merge(graphdef, params), **TRAINING)
        logits, _ = model(batch["inputs"], batch["padding_mask"], training=True)
        return steps.loss_and_metrics(logits, batch, run.model.head)[0]

    attention = jax.grad(loss)(params)["layers"]["blocks"]["attention"]
    grads = [np.asarray(attention[name]["kernel"], np.float64) for name in kernels]
    return np.sqrt(sum(np.sum(g.reshape(LAYERS, -1) ** 2, axis=1) for g in grads))


def check(logged, direct) -> None:
    np.testing.assert_allclose(np.asarray(logged, np.float64), direct, rtol=RTOL)


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_logged_qk_gradient_norm_is_jax_grad_of_the_loss_layer_by_layer(tmp_path, tj_data_dir):
    config = _config(tj_data_dir)
    train.train_and_evaluate(config, str(tmp_path))
    scalars = summaries.read_scalars(str(tmp_path))
    logged = [dict(scalars[f"layers/qk_grad_norm/layer_{l:02d}"])[1] for l in range(LAYERS)]
    direct = direct_qk_norms(train.build_run(config))
    assert len(set(np.round(direct, 6))) == LAYERS  # distinct per layer: a shuffle would show
    check(logged, direct)
    assert f"layers/qk_grad_norm/layer_{LAYERS:02d}" not in scalars


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_a_planted_bug_reading_the_value_projection_fails_the_check(tj_data_dir, monkeypatch):
    """The train step's own diagnostic (the value the trainer logs) with QK_KERNELS pointed at
    W_v: the comparison above rejects it."""
    run = train.build_run(_config(tj_data_dir))
    graphdef, params = train.init_model(run.model, run.seed)
    tx, schedule = steps.make_optimizer(run.train)
    batch = run.dataset.train_batch(0, run.train.batch_size, run.model.arch.value)
    direct = direct_qk_norms(run)
    for kernels, caught in ((("query", "key"), False), (("value",), True)):
        monkeypatch.setattr(steps, "QK_KERNELS", kernels)
        step = steps.make_train_step(graphdef, run.model, tx, schedule)
        state = {"params": params, "opt_state": tx.init(params), "step": np.int32(0)}
        _, metrics = step(jax.tree.map(np.array, state), batch, jax.random.key(0))
        if caught:
            with pytest.raises(AssertionError):
                check(metrics["qk_grad_norm"], direct)
        else:
            check(metrics["qk_grad_norm"], direct)

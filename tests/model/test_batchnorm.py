"""BatchNorm (`model.norm_type=batchnorm`): the one norm whose output for a token depends on the
rest of the batch while training. Exact property tests against LayerNorm (a token's LayerNorm
output ignores other examples and padding; BatchNorm's training output does not, its evaluation
output with running statistics does), parity with torch.nn.BatchNorm1d on the unpadded tokens,
running statistics through the train step, the checkpoint and the evaluation."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from conftest import assert_close, randomize_biases_and_scales, tiny_config
from transformer_jax import Arch, Norm, NormType, Transformer, make_norm
from transformer_jax.model.norms import (BATCHNORM_MOMENTUM, NORM_EPSILON, TRAINING, BatchNorm,
                                         apply_norm)

BATCH, LENGTH, D = 3, 5, 8
LENGTHS = (3, 5, 4)  # real tokens per example, first; example 0 has two padded positions


def token_mask(lengths=LENGTHS) -> np.ndarray:
    return np.arange(LENGTH)[None, :] < np.array(lengths)[:, None]  # [B, T]


def inputs(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.5, 2.0, (BATCH, LENGTH, D)).astype(np.float32)


def norm_output(kind: str, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A fresh norm (same random γ, β every time) applied to x [B, T, D] with mask [B, T]:
    'layernorm', 'batchnorm_train' (batch statistics) or 'batchnorm_eval' (running ones, moved
    once by an unrelated training batch so that they are not the identity's 0 and 1)."""
    norm_type = NormType.LAYERNORM if kind == "layernorm" else NormType.BATCHNORM
    norm = make_norm(norm_type, D, dtype=jnp.float32, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(norm)
    if kind == "batchnorm_eval":
        apply_norm(nnx.view(norm, **TRAINING), jnp.asarray(inputs(seed=9)))
    elif kind == "batchnorm_train":
        norm = nnx.view(norm, **TRAINING)
    return np.asarray(apply_norm(norm, jnp.asarray(x), jnp.asarray(mask)))


def changes(kind: str) -> dict[str, float]:
    """Max |Δ| of example 0's real tokens' outputs when (a) the other examples, (b) the values
    at padded positions, (c) how much of another example is padding change."""
    x, mask = inputs(), token_mask()
    base = norm_output(kind, x, mask)[0, :LENGTHS[0]]
    others = x.copy()
    others[1:] = inputs(seed=1)[1:]
    padding = np.where(mask[..., None], x, 100.0 * inputs(seed=2)).astype(np.float32)
    shorter = token_mask((3, 2, 4))
    out = {name: norm_output(kind, xs, m)[0, :LENGTHS[0]]
           for name, xs, m in (("others", others, mask), ("padding", padding, mask),
                               ("padding_amount", x, shorter))}
    return {name: float(np.max(np.abs(o - base))) for name, o in out.items()}


def test_layernorm_output_of_a_token_ignores_the_rest_of_the_batch():
    assert changes("layernorm") == {"others": 0.0, "padding": 0.0, "padding_amount": 0.0}


def test_batchnorm_training_output_depends_on_other_examples_not_on_padding_values():
    found = changes("batchnorm_train")
    assert found["others"] > 1e-2, found  # the batch statistics changed
    assert found["padding_amount"] > 1e-3, found  # fewer real tokens counted: other statistics
    assert found["padding"] == 0.0, found  # padded values are excluded from the statistics


def test_batchnorm_evaluation_output_ignores_the_rest_of_the_batch():
    assert changes("batchnorm_eval") == {"others": 0.0, "padding": 0.0, "padding_amount": 0.0}


def test_masked_batch_statistics_match_torch_batchnorm1d_on_the_unpadded_tokens():
    """Two training batches, then evaluation: outputs and running statistics against PyTorch
    (momentum 0.1 = our 0.9 on the old value). PyTorch's running variance takes the unbiased
    batch variance (n/(n−1)), Flax's the biased one, which normalization itself uses: the
    running variance is checked against that formula."""
    ours = BatchNorm(D, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(ours)
    theirs = torch.nn.BatchNorm1d(D, eps=NORM_EPSILON, momentum=1 - BATCHNORM_MOMENTUM)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(np.array(ours.scale[...])))
        theirs.bias.copy_(torch.from_numpy(np.array(ours.bias[...])))
    training = nnx.view(ours, **TRAINING)
    expected_var = np.ones(D)
    for seed, lengths in ((0, LENGTHS), (1, (1, 4, 2))):
        x, mask = inputs(seed), token_mask(lengths)
        out = np.asarray(training(jnp.asarray(x), jnp.asarray(mask)))
        real = x[mask]  # [N, D]: the unpadded tokens
        theirs.train()
        assert_close(out[mask], theirs(torch.from_numpy(real)).detach().numpy())
        expected_var = BATCHNORM_MOMENTUM * expected_var + (1 - BATCHNORM_MOMENTUM) * real.var(0)
        assert_close(ours.mean[...], theirs.running_mean.numpy())
        assert_close(ours.var[...], expected_var)
    with torch.no_grad():
        theirs.running_var.copy_(torch.from_numpy(np.array(ours.var[...])))
    theirs.eval()
    x = inputs(3)
    assert_close(ours(jnp.asarray(x), jnp.asarray(token_mask())),
                 theirs(torch.from_numpy(x.reshape(-1, D))).detach().numpy().reshape(x.shape))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_model_running_statistics_move_in_training_and_make_evaluation_per_example(norm):
    """Through the scanned stack: every layer's statistics (and Pre-LN's final norm's) move in
    training mode; in evaluation mode example 0's logits do not depend on example 1, in
    training mode they do."""
    cfg = tiny_config(norm=Norm(norm), norm_type=NormType.BATCHNORM, arch=Arch.ENCODER)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    before = nnx.to_pure_dict(nnx.state(model, nnx.BatchStat))
    tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, LENGTH))
    mask = jnp.asarray(token_mask((4, 5))[:2])
    other = tokens.copy()
    other[1] = (other[1] + 1) % cfg.vocab_size
    logits = lambda m, t: np.asarray(m(jnp.asarray(t), mask)[0])  # noqa: E731
    training = nnx.view(model, **TRAINING)
    assert max(np.abs(logits(training, tokens)[0] - logits(training, other)[0]).ravel()) > 1e-3
    after = nnx.to_pure_dict(nnx.state(model, nnx.BatchStat))
    moved = jax.tree.map(lambda a, b: bool(np.all(np.any(np.asarray(a) != np.asarray(b), -1))),
                         before, after)
    assert all(jax.tree.leaves(moved)), moved  # every layer's every statistic
    assert_close(logits(model, tokens)[0], logits(model, other)[0], atol=1e-6)


# --- through the trainer: train step, checkpoint, evaluation -------------------------------------


def test_running_statistics_go_through_the_train_step_checkpoint_and_evaluation(tmp_path,
                                                                               tj_data_dir):
    """A tiny Pre-LN BatchNorm run: its checkpoint holds running statistics that training moved,
    and the run's final eval loss is what evaluating with exactly those statistics gives (with
    the initial 0 and 1 in their place it is another)."""
    import helpers_train
    from transformer_jax.train import steps
    from transformer_jax import train

    config = helpers_train.tiny_config(overrides={
        "model.norm": "pre", "model.norm_type": "batchnorm", "data.data_dir": tj_data_dir,
        "train.num_steps": 8, "train.eval_every": 8, "train.checkpoint_every": 8})
    status = train.train_and_evaluate(config, str(tmp_path / "run"))
    assert status["state"] == train.FINISHED
    step, state = helpers_train.restore_newest(tmp_path / "run", config)
    assert step == 8
    run = train.build_run(config)
    graphdef, initial = train.init_model(run.model, run.seed)
    stats = lambda params: {k: v for k, v in jax.tree_util.tree_leaves_with_path(params)  # noqa
                            if k[-1].key in ("mean", "var")}
    assert len(stats(state["params"])) == 2 * 3  # mean, var: two stacked block norms, final norm
    for path, value in stats(state["params"]).items():
        assert np.all(np.asarray(value) != np.asarray(stats(initial)[path])), path

    def eval_loss(params) -> float:
        eval_step = steps.make_eval_step(graphdef, run.model)
        sums = {}
        for batch in run.dataset.eval_batches(run.train.batch_size, run.model.arch.value):
            for k, v in jax.device_get(eval_step(params, batch)).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        return steps.finish_eval(sums)["loss"]

    assert eval_loss(state["params"]) == pytest.approx(status["eval"]["loss"], rel=1e-5)
    reset = steps.replace_leaves(state["params"], {"layers": {"blocks": {
        name: {"mean": jnp.zeros_like(v["mean"]), "var": jnp.ones_like(v["var"])}
        for name, v in state["params"]["layers"]["blocks"].items() if "mean" in v}}})
    assert abs(eval_loss(reset) - status["eval"]["loss"]) > 1e-3


def test_other_norms_keep_no_statistics_so_old_checkpoints_still_restore():
    """The trainer's params gained BatchNorm's statistics only where there is a BatchNorm: for
    every other norm the checkpointed tree is the parameters alone, as before the switch."""
    from transformer_jax import train

    for norm_type in (NormType.LAYERNORM, NormType.RMSNORM, NormType.DYT):
        _, params = train.init_model(tiny_config(norm_type=norm_type), 0)
        names = {p[-1].key for p, _ in jax.tree_util.tree_leaves_with_path(params)}
        assert not names & {"mean", "var"}, (norm_type, names)


def test_batchnorm_with_microbatches_is_refused_in_one_line():
    import helpers_train
    from transformer_jax import ConfigError
    from transformer_jax import train

    config = helpers_train.tiny_config(overrides={"model.norm_type": "batchnorm",
                                                  "train.microbatches": 2})
    with pytest.raises(ConfigError) as error:
        train.check_config(config)
    assert "\n" not in str(error.value)
    assert "train.microbatches=2" in str(error.value) and "batchnorm" in str(error.value)

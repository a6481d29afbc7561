"""model.causal_mask: a decoder trained without the causal mask sees the future, while
evaluation masks whatever the switch says, as generation must. Each planted bug fails here: the
switch ignored (training masked anyway), evaluation unmasked too, the train step not asking for
training mode, or the new field moving the fingerprints of the committed studies."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import PARITY_ATOL, max_abs_diff, tiny_config
from transformer_jax import Transformer
from transformer_jax.config import Arch, AttentionImpl, ConfigError, ModelConfig, TrainConfig
from transformer_jax.studies.study import load_study
from transformer_jax.train import defaults, steps
from transformer_jax.train.init import init_model

REPO = Path(__file__).resolve().parents[2]
BATCH, LENGTH = 2, 6
IMPLS = [AttentionImpl.EXPLICIT, AttentionImpl.FUSED]  # fused: jax.nn.dot_product_attention
train_call = nnx.jit(lambda m, t, p: m(t, p, training=True)[0])  # as the train step calls it
eval_call = nnx.jit(lambda m, t, p: m(t, p)[0])  # as evaluation (and generation) calls it


def model(**overrides) -> Transformer:
    """A tiny decoder; every variant built from the same seed has the same parameters (the
    switch adds none)."""
    return Transformer(tiny_config(arch=Arch.DECODER, **overrides), rngs=nnx.Rngs(0))


def tokens_and_a_changed_future(seed: int = 0):
    """tokens [B, T], the same with only the last token changed, and a padding mask of ones."""
    tokens = jax.random.randint(jax.random.key(seed), (BATCH, LENGTH), 0, 13)
    changed = tokens.at[:, -1].set((tokens[:, -1] + 1) % 13)
    return tokens, changed, jnp.ones((BATCH, LENGTH), bool)


@pytest.mark.parametrize("impl", IMPLS)
def test_unmasked_training_sees_the_future_and_masked_training_does_not(impl):
    tokens, changed, padding = tokens_and_a_changed_future()
    masked = model(attention=impl)
    a, b = (np.asarray(train_call(masked, t, padding)) for t in (tokens, changed))
    assert np.array_equal(a[:, :-1], b[:, :-1])  # bitwise: no earlier position saw it
    assert max_abs_diff(a[:, -1], b[:, -1]) > 1e-3  # the changed token's own position did
    unmasked = model(attention=impl, causal_mask=False)
    a, b = (np.asarray(train_call(unmasked, t, padding)) for t in (tokens, changed))
    assert max_abs_diff(a[:, 0], b[:, 0]) > 1e-3  # the first position reads the last token


@pytest.mark.parametrize("impl", IMPLS)
def test_evaluation_masks_whatever_the_switch_says(impl):
    tokens, changed, padding = tokens_and_a_changed_future(1)
    masked, unmasked = model(attention=impl), model(attention=impl, causal_mask=False)
    assert np.array_equal(eval_call(unmasked, tokens, padding), eval_call(masked, tokens, padding))
    assert np.array_equal(eval_call(masked, tokens, padding), train_call(masked, tokens, padding))
    a, b = (np.asarray(eval_call(unmasked, t, padding)) for t in (tokens, changed))
    assert np.array_equal(a[:, :-1], b[:, :-1])
    # ... and not because the switch does nothing: the same model trains on other logits
    assert max_abs_diff(train_call(unmasked, tokens, padding), a) > 1e-3


def test_unmasked_training_is_the_encoder_with_the_same_parameters():
    """Without the causal mask a decoder is the bidirectional stack: an encoder (same
    parameters, token head) gives the same logits, with or without a padding mask."""
    tokens, _, padding = tokens_and_a_changed_future(2)
    unmasked = model(causal_mask=False)
    encoder = Transformer(tiny_config(arch=Arch.ENCODER), rngs=nnx.Rngs(0))
    for p in (padding, padding.at[1, -2:].set(False)):
        assert max_abs_diff(train_call(unmasked, tokens, p), eval_call(encoder, tokens, p)) == 0.0


def test_both_modes_match_jax_nn_dot_product_attention():
    """The explicit path (softmax written out) against the fused one, whose masks are
    jax.nn.dot_product_attention's own: is_causal=True in evaluation, no causal mask in
    unmasked training (padding as kv lengths in both)."""
    tokens, _, padding = tokens_and_a_changed_future(3)
    padding = padding.at[0, -1].set(False)
    for call in (train_call, eval_call):
        ours = call(model(causal_mask=False), tokens, padding)
        fused = call(model(causal_mask=False, attention=AttentionImpl.FUSED), tokens, padding)
        assert max_abs_diff(ours, fused) < PARITY_ATOL


def _batch(cfg: ModelConfig) -> dict:
    rng = np.random.default_rng(4)
    return {"inputs": jnp.asarray(rng.integers(0, cfg.vocab_size, (BATCH, LENGTH))),
            "targets": jnp.asarray(rng.integers(0, cfg.num_outputs, (BATCH, LENGTH))),
            "weights": jnp.ones((BATCH, LENGTH), jnp.float32),
            "padding_mask": jnp.ones((BATCH, LENGTH), bool)}


def test_the_train_step_trains_unmasked_and_the_eval_step_masks():
    """The compiled steps the trainer runs, on the same parameters: the eval step's sums are
    the masked model's, bitwise; the train step's loss (at the parameters before its update)
    is the unmasked model's, which saw the future."""
    masked, unmasked = (tiny_config(arch=Arch.DECODER, causal_mask=s) for s in (True, False))
    graphdef, params = init_model(masked, seed=0)
    unmasked_graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(unmasked,
                                                                        rngs=nnx.Rngs(0))))
    batch = _batch(masked)
    sums = [steps.make_eval_step(g, masked)(params, batch) for g in (graphdef, unmasked_graphdef)]
    assert jax.tree.all(jax.tree.map(np.array_equal, *sums))
    tx, schedule = steps.make_optimizer(TrainConfig(num_steps=4, warmup_steps=0))
    state = {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}
    expected, _ = steps.loss_and_metrics(train_call(nnx.merge(unmasked_graphdef, params),
                                                    batch["inputs"], batch["padding_mask"]),
                                         batch, unmasked.head)
    _, metrics = steps.make_train_step(unmasked_graphdef, unmasked, tx, schedule,
                                       diagnostics=False)(state, batch, jax.random.key(0))
    assert abs(float(metrics["loss"]) - float(expected)) < 1e-6
    masked_eval = float(sums[0]["loss"] / sums[0]["weight"])
    assert abs(float(metrics["loss"]) - masked_eval) > 1e-3  # training saw the future


def test_the_switch_on_an_encoder_is_a_one_line_error():
    with pytest.raises(ConfigError) as error:
        tiny_config(arch=Arch.ENCODER, causal_mask=False)
    assert str(error.value) == ("model.causal_mask=False needs model.arch='decoder': an "
                                "encoder has no causal mask to remove")
    with pytest.raises(ConfigError, match=r"model.causal_mask='no' must be True or False"):
        ModelConfig.from_config({"causal_mask": "no"}, vocab_size=5, num_outputs=5)
    assert tiny_config(arch=Arch.ENCODER, causal_mask=True).causal_mask  # the default: fine


def test_one_default_for_python_and_the_command_line():
    assert ModelConfig(vocab_size=5, num_outputs=5).causal_mask is True
    assert defaults.base_config().model.causal_mask is True


def test_the_new_field_at_its_default_leaves_the_fingerprints_where_they_were():
    """Committed verdicts were judged with designs that had no model.causal_mask: at its default
    the field is left out of the design; any other value is part of it."""
    study = load_study(REPO / "experiments" / "scaling.py", "tiny")
    assert study.base.model.causal_mask is True
    without = study.base.copy_and_resolve_references()
    without.unlock()
    del without.model["causal_mask"]
    unmasked = study.base.copy_and_resolve_references()
    unmasked.model.causal_mask = False
    fingerprint = lambda base: dataclasses.replace(study, base=base).fingerprint()  # noqa: E731
    assert fingerprint(without) == study.fingerprint()
    assert fingerprint(unmasked) != study.fingerprint()
    assert "causal_mask" not in study.design()["base"]["model"]

"""ModelConfig: built from a ConfigDict in one place, frozen, and every invalid combination fails
with one line that names the bad value and the valid choices."""
from __future__ import annotations

import dataclasses

import ml_collections
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_jax import (Arch, AttentionImpl, ConfigError, DType, Head, ModelConfig, Norm,
                             Position)

DATA = dict(vocab_size=50, num_outputs=50)  # dataset facts, given by the pipeline


def build(**model):
    return ModelConfig.from_config(ml_collections.ConfigDict(model), **DATA)


def config_error(**model) -> str:
    with pytest.raises(ConfigError) as error:
        build(**model)
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_from_config_parses_enums_and_keeps_the_rest():
    cfg = build(d_model=32, num_heads=4, num_layers=3, d_ff=64, dropout=0.1,
                position="rotary", norm="pre", arch="encoder", head="pooled",
                attention="fused", dtype="bfloat16", attn_scale=False, residual=True, max_len=64)
    assert (cfg.position, cfg.norm, cfg.arch, cfg.head, cfg.attention, cfg.dtype) == (
        Position.ROTARY, Norm.PRE, Arch.ENCODER, Head.POOLED, AttentionImpl.FUSED,
        DType.BFLOAT16)
    assert (cfg.vocab_size, cfg.num_outputs, cfg.d_model, cfg.num_heads, cfg.head_dim) == (
        50, 50, 32, 4, 8)
    assert cfg.attn_scale is False and not cfg.causal
    # to_dict gives plain values that build the same config again
    plain = cfg.to_dict()
    assert plain["position"] == "rotary" and plain["dtype"] == "bfloat16"
    for key in DATA:
        plain.pop(key)
    assert build(**plain) == cfg


def test_defaults_and_enum_members_are_accepted():
    cfg = build()
    assert cfg == ModelConfig(**DATA)
    assert cfg.causal and cfg.position is Position.SINUSOIDAL and cfg.norm is Norm.PRE
    assert build(position=Position.ALIBI).position is Position.ALIBI


def test_config_is_frozen():
    cfg = build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64  # type: ignore[misc]
    assert issubclass(ConfigError, ValueError)


def test_heads_must_divide_d_model_and_the_message_lists_valid_head_counts():
    message = config_error(d_model=12, num_heads=5)
    assert "num_heads=5" in message and "d_model=12" in message
    assert message.endswith("valid num_heads: 1, 2, 3, 4, 6, 12")


@settings(max_examples=30, deadline=None)
@given(d_model=st.integers(1, 64), num_heads=st.integers(1, 16))
def test_any_head_count_is_valid_exactly_when_it_divides_d_model(d_model, num_heads):
    if d_model % num_heads == 0:
        assert build(d_model=d_model, num_heads=num_heads, position="none").head_dim == (
            d_model // num_heads)
    else:
        message = config_error(d_model=d_model, num_heads=num_heads, position="none")
        valid = [int(v) for v in message.split("valid num_heads: ")[1].split(", ")]
        assert valid == [h for h in range(1, d_model + 1) if d_model % h == 0]


def test_rotary_needs_an_even_head_dimension():
    message = config_error(d_model=18, num_heads=6, position="rotary")
    assert "rotary" in message and "18/6=3" in message
    assert build(d_model=18, num_heads=6, position="alibi").head_dim == 3  # only rotary cares


@pytest.mark.parametrize("field, kind", [("position", Position), ("norm", Norm), ("arch", Arch),
                                         ("head", Head), ("attention", AttentionImpl),
                                         ("dtype", DType)])
def test_unknown_enum_value_lists_the_choices(field, kind):
    message = config_error(**{field: "bogus"})
    assert f"model.{field}='bogus'" in message
    assert message.endswith(", ".join(m.value for m in kind))


def test_a_string_instead_of_an_enum_member_is_rejected_when_built_directly():
    """Built directly (not through from_config) a string would match no enum member and silently
    switch the feature off; it must fail instead."""
    with pytest.raises(ConfigError, match="Position.ROTARY") as error:
        ModelConfig(**DATA, position="rotary")  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("field, value", [("d_model", 0), ("num_heads", -2), ("num_layers", 0),
                                          ("d_ff", -1), ("max_len", 0), ("d_model", 16.0),
                                          ("num_layers", True)])
def test_sizes_must_be_positive_integers(field, value):
    message = config_error(**{field: value})
    assert message == f"model.{field}={value!r} must be a positive integer"


def test_dataset_sizes_must_be_positive():
    with pytest.raises(ConfigError, match="model.vocab_size=0 must be a positive integer"):
        ModelConfig.from_config(ml_collections.ConfigDict({}), vocab_size=0, num_outputs=5)


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
def test_dropout_must_be_in_unit_interval(value):
    message = config_error(dropout=value)
    assert message == f"model.dropout={value!r} must be in [0, 1)"


def test_switches_must_be_booleans():
    assert "model.attn_scale=1 must be True or False" == config_error(attn_scale=1)


def test_unknown_field_is_rejected_with_the_valid_names():
    message = config_error(n_layers=4)
    assert message.startswith("model.n_layers is not a model field; valid: ")
    valid = message.split("valid: ")[1].split(", ")
    assert "num_layers" in valid and "d_model" in valid
    assert "vocab_size" not in valid  # a dataset fact, not a flag


def test_dataset_facts_cannot_be_overridden_from_the_config():
    message = config_error(vocab_size=10)
    assert message.startswith("model.vocab_size is not a model field")


def test_pooled_head_needs_the_encoder():
    message = config_error(head="pooled", arch="decoder")
    assert "pooled" in message and "encoder" in message
    assert build(head="pooled", arch="encoder").head is Head.POOLED


def test_train_microbatches_must_divide_the_batch():
    from transformer_jax.config import TrainConfig

    assert TrainConfig(batch_size=12, microbatches=3).microbatches == 3
    with pytest.raises(ConfigError) as error:
        TrainConfig(batch_size=12, microbatches=5)
    assert str(error.value) == ("train.microbatches=5 does not divide train.batch_size=12; "
                                "use a divisor of it")
    with pytest.raises(ConfigError, match=r"train.microbatches=0 must be a positive integer"):
        TrainConfig(microbatches=0)

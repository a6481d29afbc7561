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
    assert (cfg.vocab_size, cfg.num_outputs, cfg.d_model, cfg.num_heads, cfg.d_k) == (
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
        assert build(d_model=d_model, num_heads=num_heads, position="none").d_k == (
            d_model // num_heads)
    else:
        message = config_error(d_model=d_model, num_heads=num_heads, position="none")
        valid = [int(v) for v in message.split("valid num_heads: ")[1].split(", ")]
        assert valid == [h for h in range(1, d_model + 1) if d_model % h == 0]


def test_rotary_needs_an_even_head_dimension():
    message = config_error(d_model=18, num_heads=6, position="rotary")
    assert "rotary" in message and "18/6=3" in message
    assert build(d_model=18, num_heads=6, position="alibi").d_k == 3  # only rotary cares


@pytest.mark.parametrize("field, kind", [("position", Position), ("norm", Norm), ("arch", Arch),
                                         ("head", Head), ("attention", AttentionImpl),
                                         ("dtype", DType)])
def test_unknown_enum_value_lists_the_choices(field, kind):
    message = config_error(**{field: "bogus"})
    assert f"model.{field}='bogus'" in message
    assert message.endswith(", ".join(m.value for m in kind))


def test_an_enum_value_given_as_a_string_is_parsed_when_built_directly():
    """Strings are the natural first try (`ModelConfig(position="rotary")`): built directly they
    become the enum member, as from_config's do; one that names no member, or a value of another
    kind, is the one-line error with the choices."""
    assert ModelConfig(**DATA, position="rotary").position is Position.ROTARY
    assert ModelConfig(**DATA, norm="pre") == ModelConfig(**DATA, norm=Norm.PRE)
    with pytest.raises(ConfigError, match="model.position='rotry' is not one of: sinusoidal"):
        ModelConfig(**DATA, position="rotry")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="model.norm=3 must be a Norm member") as error:
        ModelConfig(**DATA, norm=3)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)

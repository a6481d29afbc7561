"""The model's typed configuration: one frozen dataclass, built from a ConfigDict in one place.

Every ablation axis is an enum (`Position`, `Norm`, ...) and every true on/off switch a bool
(`attn_scale`, `residual`). `ModelConfig.__post_init__` validates the whole combination, so an
invalid run fails before anything is compiled, with one line that names the bad value and the
valid choices. Nothing mutates the config afterwards.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, TypeVar


class ConfigError(ValueError):
    """A bad configuration value; the message is one line naming the value and the choices."""


class Position(enum.Enum):
    """Positional scheme, grouped by where it acts (see `transformer_jax.positions`)."""

    SINUSOIDAL = "sinusoidal"  # added to the embeddings, fixed (Vaswani et al. 2017)
    LEARNED = "learned"  # added to the embeddings, trained table
    ROTARY = "rotary"  # rotates q and k (Su et al. 2021)
    ALIBI = "alibi"  # biases the attention logits (Press et al. 2021)
    NONE = "none"


class Norm(enum.Enum):
    """Where LayerNorm sits in a block."""

    POST = "post"  # x = norm(x + sublayer(x))            (original Transformer)
    PRE = "pre"  # x = x + sublayer(norm(x)), final norm after the stack
    NONE = "none"  # x = x + sublayer(x)


class Arch(enum.Enum):
    ENCODER = "encoder"  # bidirectional, padding mask
    DECODER = "decoder"  # causal, decoder-only language model


class Head(enum.Enum):
    TOKEN = "token"  # one prediction per position
    POOLED = "pooled"  # one prediction per sequence (mean over real tokens)


class AttentionImpl(enum.Enum):
    EXPLICIT = "explicit"  # our softmax(Q·Kᵀ·scale + bias)·V, exposes the weights
    FUSED = "fused"  # jax.nn.dot_product_attention (cuDNN on GPU), same scale/mask/bias


class DType(enum.Enum):
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"  # compute dtype; parameters stay float32


E = TypeVar("E", bound=enum.Enum)


def parse_enum(kind: type[E], value: Any, name: str) -> E:
    """`parse_enum(Norm, 'pre', 'model.norm')` -> Norm.PRE, or a ConfigError naming the choices."""
    if isinstance(value, kind):
        return value
    for member in kind:
        if member.value == value:
            return member
    choices = ", ".join(m.value for m in kind)
    raise ConfigError(f"{name}={value!r} is not one of: {choices}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything that defines a model. Field names match the `model.*` command-line flags."""

    vocab_size: int  # input token ids (from the dataset)
    num_outputs: int  # output classes: vocabulary for a token head, labels for a pooled head
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.0
    position: Position = Position.SINUSOIDAL
    norm: Norm = Norm.POST
    attn_scale: bool = True
    residual: bool = True
    arch: Arch = Arch.DECODER
    head: Head = Head.TOKEN
    max_len: int = 512  # longest sequence the model accepts (size of a learned table)
    attention: AttentionImpl = AttentionImpl.EXPLICIT
    dtype: DType = DType.FLOAT32

    def __post_init__(self):
        for name in ("vocab_size", "num_outputs", "d_model", "num_heads", "num_layers", "d_ff",
                     "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model.{name}={value!r} must be a positive integer")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout={self.dropout!r} must be in [0, 1)")
        for name in ("attn_scale", "residual"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"model.{name}={getattr(self, name)!r} must be True or False")
        if self.d_model % self.num_heads:
            raise ConfigError(
                f"model.num_heads={self.num_heads} does not divide model.d_model={self.d_model}; "
                f"valid num_heads: {', '.join(map(str, _divisors(self.d_model)))}")
        if self.position is Position.ROTARY and self.head_dim % 2:
            raise ConfigError(
                f"model.position='rotary' needs an even head dimension, got d_model/num_heads="
                f"{self.d_model}/{self.num_heads}={self.head_dim}")
        if self.head is Head.POOLED and self.arch is Arch.DECODER:
            raise ConfigError("model.arch='decoder' has no pooled head; use model.arch='encoder'")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def causal(self) -> bool:
        return self.arch is Arch.DECODER

    @classmethod
    def from_config(cls, model: Mapping[str, Any], **from_data: Any) -> "ModelConfig":
        """Builds the config from the `model` ConfigDict plus dataset facts (vocab_size, ...).

        The one place where config fields become typed values: enums are parsed here, unknown
        fields are rejected here.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = dict(from_data)
        for key, value in dict(model).items():
            if key not in fields or key in from_data:
                valid = sorted(k for k in fields if k not in from_data)
                raise ConfigError(f"model.{key} is not a model field; valid: {', '.join(valid)}")
            values[key] = value
        enums = {"position": Position, "norm": Norm, "arch": Arch, "head": Head,
                 "attention": AttentionImpl, "dtype": DType}
        for key, kind in enums.items():
            if key in values:
                values[key] = parse_enum(kind, values[key], f"model.{key}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (enums as strings), e.g. for hyperparameter logging."""
        return {k: (v.value if isinstance(v, enum.Enum) else v)
                for k, v in dataclasses.asdict(self).items()}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]

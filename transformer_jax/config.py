"""The model's typed configuration: one frozen dataclass, built from a ConfigDict in one place.

Every ablation axis is an enum (`Position`, `Norm`, ...) and every true on/off switch a bool
(`attn_scale`, `residual`). `ModelConfig.__post_init__` validates the whole combination, so an
invalid run fails before anything is compiled, with one line that names the bad value and the
valid choices. Nothing mutates the config afterwards.
"""
from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, Mapping, TypeVar


class ConfigError(ValueError):
    """A bad configuration value; the message is one line naming the value and the choices."""


class Position(enum.Enum):
    """Positional scheme, grouped by where it acts (see `transformer_jax.model.positions`)."""

    SINUSOIDAL = "sinusoidal"  # added to the embeddings, fixed (Vaswani et al. 2017)
    LEARNED = "learned"  # added to the embeddings, trained table
    ROTARY = "rotary"  # rotates q and k (Su et al. 2021)
    ALIBI = "alibi"  # biases the attention logits (Press et al. 2021)
    NONE = "none"


class Norm(enum.Enum):
    """Where the norm sits in a block (what it computes is `NormType`)."""

    POST = "post"  # x = norm(x + sublayer(x))            (original Transformer)
    PRE = "pre"  # x = x + sublayer(norm(x)), final norm after the stack
    NONE = "none"  # x = x + sublayer(x)


class NormType(enum.Enum):
    """What sits in the places `Norm` chooses (see `transformer_jax.model.norms`)."""

    LAYERNORM = "layernorm"  # γ·(x − mean)/std + β   (Ba et al. 2016)
    RMSNORM = "rmsnorm"  # γ·x/rms(x)              (Zhang & Sennrich 2019)
    DYT = "dyt"  # γ·tanh(α·x) + β, no statistics (Zhu et al. 2025)
    BATCHNORM = "batchnorm"  # γ·(x − mean)/std + β per channel over batch × length, padding
    # excluded; running statistics in evaluation (Ioffe & Szegedy 2015)


class Arch(enum.Enum):
    ENCODER = "encoder"  # bidirectional, padding mask
    DECODER = "decoder"  # causal, decoder-only language model


class Head(enum.Enum):
    TOKEN = "token"  # one prediction per position
    POOLED = "pooled"  # one prediction per sequence (mean over real tokens)


class AttentionImpl(enum.Enum):
    EXPLICIT = "explicit"  # our softmax(Q·Kᵀ·scale + bias)·V, exposes the weights
    FUSED = "fused"  # jax.nn.dot_product_attention (cuDNN on NVIDIA GPUs in bf16/fp16), same
    # scale, mask and bias


class Activation(enum.Enum):
    """The feed-forward layer's nonlinearity (see `transformer_jax.model.blocks.ACTIVATIONS`)."""

    RELU = "relu"  # max(0, x)                               (Vaswani et al. 2017)
    GELU = "gelu"  # x·Φ(x), Φ through erf: exact           (Hendrycks & Gimpel 2016; BERT)
    GELU_TANH = "gelu_tanh"  # Φ's tanh approximation       (GPT-2)


class BranchInit(enum.Enum):
    """How each block's two branches (attention, feed-forward) start (`model.blocks.branch_scales`);
    L = model.num_layers."""

    STANDARD = "standard"  # every kernel at nnx.Linear's draw, x + F(x)
    DEPTH_SCALED = "depth_scaled"  # W_o, the FFN's second kernel × 1/√(2L) (GPT-2, Radford 2019)
    REZERO = "rezero"  # x + α·F(x), α a learned scalar per branch from 0 (Bachlechner et al. 2020)
    DEEPNET = "deepnet"  # Post-LN: LN(α·x + F(x)), α = (2L)^(1/4); W_v, W_o, both FFN kernels
    # × β = (8L)^(-1/4) (Wang et al. 2022, encoder- or decoder-only)


class DType(enum.Enum):
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"  # compute dtype; parameters stay float32


class DenseMatmul(enum.Enum):
    """The operands of every Dense layer's products (see `transformer_jax.model.dense`)."""

    COMPUTE = "compute"  # in model.dtype, as nnx.Linear multiplies them
    BFLOAT16 = "bfloat16"  # rounded to bfloat16 and summed in float32, forward and both
    # gradients (AMX / AVX512-BF16 CPUs, tensor cores); attention's Q·Kᵀ and ·V stay in model.dtype


E = TypeVar("E", bound=enum.Enum)


def parse_enum(kind: type[E], value: Any, name: str) -> E:
    """`parse_enum(Norm, 'pre', 'model.norm')` -> Norm.PRE, or a ConfigError naming the choices."""
    if isinstance(value, kind):
        return value
    for member in kind:
        if member.value == value:
            return member
    choices = ", ".join(m.value for m in kind)
    raise ConfigError(f"{name}={value!r} is not one of: {choices}{_neighbour_hint(kind, value)}")


# An axis whose values are easily given to its neighbour: `model.norm=dyt` means the norm's
# function (`model.norm_type`), not its placement.
NEIGHBOUR_AXES: dict[type[enum.Enum], tuple[type[enum.Enum], str]] = {
    Norm: (NormType, "model.norm_type")}


def _neighbour_hint(kind: type[enum.Enum], value: Any) -> str:
    neighbour, flag = NEIGHBOUR_AXES.get(kind, (None, ""))
    if neighbour is None or not any(m.value == value for m in neighbour):
        return ""
    return f" (the placement); {value!r} is what the norm computes: set {flag}={value}"


MODEL_ENUMS: dict[str, type[enum.Enum]] = {
    "position": Position, "norm": Norm, "norm_type": NormType, "arch": Arch, "head": Head,
    "attention": AttentionImpl, "dtype": DType, "dense_matmul": DenseMatmul,
    "activation": Activation, "branch_init": BranchInit}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything that defines a model. Field names match the `model.*` command-line flags, and
    these defaults are the command line's (`train.defaults.base_config()` reads them from here):
    `ModelConfig(vocab_size=V, num_outputs=V)` is the model `python -m transformer_jax.main` builds
    for a vocabulary of V when no config file changes a model field."""

    vocab_size: int  # input token ids (a fact of the dataset)
    num_outputs: int  # output classes: vocabulary for a token head, labels for a pooled head (data)
    d_model: int = 128  # width of the residual stream
    num_heads: int = 4  # attention heads per layer
    head_dim: int = 0  # each head's query/key/value width d_k (W_q, W_k, W_v: d_model -> num_heads
    # x head_dim, W_o back); 0: d_model / num_heads (which must then divide d_model)
    num_layers: int = 4  # blocks in the stack
    d_ff: int = 512  # hidden width of each block's feed-forward layer
    dropout: float = 0.0  # on attention weights and on each sublayer's output, in training
    position: Position = Position.SINUSOIDAL  # sinusoidal | learned | rotary | alibi | none
    norm: Norm = Norm.PRE  # where the norm sits: post | pre | none
    norm_type: NormType = NormType.LAYERNORM  # what it computes: layernorm | rmsnorm | dyt | batchnorm
    attn_scale: bool = True  # divide Q·Kᵀ by √d_k
    qk_init_scale: float = 1.0  # W_q and W_k initialized at this times their usual draw (d_k^(-1/4):
    # an unscaled model's Q·Kᵀ starts with a scaled one's variance)
    qk_norm: bool = False  # LayerNorm on each head's q and k before Q·Kᵀ (and before rotary)
    residual: bool = True  # x + sublayer(x); False: sublayer(x) alone
    branch_init: BranchInit = BranchInit.STANDARD  # how the branches start: standard |
    # depth_scaled (W_o, FFN out × 1/√(2L)) | rezero (x + α·F(x), α from 0) | deepnet (Post-LN only)
    arch: Arch = Arch.DECODER  # encoder (bidirectional, padding mask) | decoder (causal)
    causal_mask: bool = True  # decoder: False trains without the causal mask (it sees the
    # future); evaluation masks whatever this says, as generation must
    head: Head = Head.TOKEN  # token | pooled: chosen by the dataset's task, not a flag
    max_len: int = 512  # longest sequence the model accepts (size of a learned position table)
    attention: AttentionImpl = AttentionImpl.EXPLICIT  # explicit | fused (jax.nn.dot_product_attention)
    dtype: DType = DType.FLOAT32  # compute dtype: float32 | bfloat16 (parameters stay float32)
    dense_matmul: DenseMatmul = DenseMatmul.COMPUTE  # compute | bfloat16 (operands of the Dense
    # layers' products rounded to bfloat16, summed in float32; everything else in dtype)
    # What a BERT-family checkpoint needs (`transformer_jax.model.pretrained`); each default is
    # the model as it was before them.
    activation: Activation = Activation.RELU  # the feed-forward nonlinearity: relu | gelu | gelu_tanh
    embed_scale: bool = True  # token embeddings × √d_model (Vaswani et al.); BERT does not scale
    embed_norm: bool = False  # a norm (norm_type) on the summed embeddings, before the blocks (BERT)
    token_types: int = 0  # rows of a token-type (segment) embedding added to the embeddings; 0: none
    norm_eps: float = 1e-5  # ε of every norm over d_model (PyTorch's default; BERT: 1e-12)

    DATA_FIELDS = ("vocab_size", "num_outputs", "head")  # set from the dataset, not by a flag

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """The `model.*` fields a config sets, with their defaults as plain values (enums as
        strings): the `model` section of every config file starts from these."""
        return {f.name: (f.default.value if isinstance(f.default, enum.Enum) else f.default)
                for f in dataclasses.fields(cls) if f.name not in cls.DATA_FIELDS}

    def __post_init__(self):
        for name in ("vocab_size", "num_outputs", "d_model", "num_heads", "num_layers", "d_ff",
                     "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model.{name}={value!r} must be a positive integer")
        if (not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool)
                or not 0.0 <= self.dropout < 1.0):
            raise ConfigError(f"model.dropout={self.dropout!r} must be in [0, 1)")
        if (not isinstance(self.qk_init_scale, (int, float)) or isinstance(self.qk_init_scale, bool)
                or not (math.isfinite(self.qk_init_scale) and self.qk_init_scale > 0)):
            raise ConfigError(f"model.qk_init_scale={self.qk_init_scale!r} must be a positive "
                              "number (a multiplier on W_q's and W_k's initial draw; 1 = as usual)")
        if not isinstance(self.token_types, int) or isinstance(self.token_types, bool) or \
                self.token_types < 0:
            raise ConfigError(f"model.token_types={self.token_types!r} must be a non-negative "
                              "integer (rows of the token-type embedding; 0: none)")
        if (not isinstance(self.norm_eps, (int, float)) or isinstance(self.norm_eps, bool)
                or not (math.isfinite(self.norm_eps) and self.norm_eps > 0)):
            raise ConfigError(f"model.norm_eps={self.norm_eps!r} must be a positive number")
        for name, kind in MODEL_ENUMS.items():  # 'rotary' as Position.ROTARY: a string left
            value = getattr(self, name)  # as it is would silently match no member
            if isinstance(value, str) and not isinstance(value, kind):
                object.__setattr__(self, name, parse_enum(kind, value, f"model.{name}"))
            elif not isinstance(value, kind):
                raise ConfigError(
                    f"model.{name}={value!r} must be a {kind.__name__} member or its value, one "
                    f"of: {', '.join(m.value for m in kind)}")
        for name in ("attn_scale", "qk_norm", "residual", "causal_mask", "embed_scale",
                     "embed_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"model.{name}={getattr(self, name)!r} must be True or False")
        if not isinstance(self.head_dim, int) or isinstance(self.head_dim, bool) or \
                self.head_dim < 0:
            raise ConfigError(f"model.head_dim={self.head_dim!r} must be a non-negative integer "
                              "(each head's width d_k; 0: d_model / num_heads)")
        if not self.head_dim and self.d_model % self.num_heads:
            raise ConfigError(
                f"model.num_heads={self.num_heads} does not divide model.d_model={self.d_model} "
                f"(model.head_dim=0: d_k = d_model / num_heads; set it to choose d_k); "
                f"valid num_heads: {', '.join(map(str, _divisors(self.d_model)))}")
        if self.position is Position.ROTARY and self.d_k % 2:
            raise ConfigError(
                f"model.position='rotary' needs an even head dimension, got {self._d_k_text()}")
        if not self.causal_mask and self.arch is not Arch.DECODER:
            raise ConfigError(f"model.causal_mask=False needs model.arch='decoder': an "
                              f"{self.arch.value} has no causal mask to remove")
        if self.head is Head.POOLED and self.arch is Arch.DECODER:
            raise ConfigError("model.arch='decoder' has no pooled head; use model.arch='encoder'")
        self._check_branch_init()

    def _check_branch_init(self) -> None:
        """ReZero gates and DeepNet scales the residual sum, which residual=False removes; DeepNet's
        α and β are derived for Post-LN (Wang et al. 2022), whose norm bounds α·x."""
        if self.branch_init in (BranchInit.REZERO, BranchInit.DEEPNET) and not self.residual:
            raise ConfigError(f"model.branch_init={self.branch_init.value!r} needs model.residual"
                              f"=True: it acts on the residual sum x + F(x), which residual=False "
                              f"removes; valid with it: standard, depth_scaled")
        if self.branch_init is BranchInit.DEEPNET and self.norm is not Norm.POST:
            raise ConfigError(f"model.branch_init='deepnet' needs model.norm='post' (DeepNet's α "
                              f"and β are derived for Post-LN), got model.norm={self.norm.value!r};"
                              f" valid with it: standard, depth_scaled, rezero")

    @property
    def d_k(self) -> int:
        """Each head's width: `head_dim`, or d_model / num_heads where it is 0 (the default)."""
        return self.head_dim or self.d_model // self.num_heads

    def _d_k_text(self) -> str:
        if self.head_dim:
            return f"model.head_dim={self.head_dim}"
        return f"d_model/num_heads={self.d_model}/{self.num_heads}={self.d_k}"

    @property
    def causal(self) -> bool:
        return self.arch is Arch.DECODER

    @classmethod
    def from_config(cls, model: Mapping[str, Any], **from_data: Any) -> "ModelConfig":
        """Builds the config from the `model` ConfigDict plus dataset facts (vocab_size, ...)."""
        return build_dataclass(cls, "model", model, MODEL_ENUMS, **from_data)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (enums as strings), e.g. for hyperparameter logging."""
        return {k: (v.value if isinstance(v, enum.Enum) else v)
                for k, v in dataclasses.asdict(self).items()}


# The learning rate after the warm-up (train/steps.make_optimizer). "cosine" decays over
# train.num_steps, so extending a run (--extend_to) recomputes it and the LR jumps back up;
# "constant" does not depend on num_steps, so a run trained to B and extended to 2B is the run
# trained straight to 2B: what a study's plateau budget needs (studies/plateau.py).
SCHEDULES = ("cosine", "constant")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimization and bookkeeping; field names match the `train.*` command-line flags, and
    these defaults are the command line's (`train.defaults.base_config()` reads them)."""

    num_steps: int = 2000  # optimizer steps (a finished run trains on with --extend_to)
    batch_size: int = 32  # examples per step
    learning_rate: float = 1e-3  # peak of the warmup + cosine schedule (AdamW)
    warmup_steps: int = 100  # linear warm-up to learning_rate (0: none)
    end_learning_rate_factor: float = 0.1  # cosine decays to learning_rate * this
    schedule: str = "cosine"  # after the warm-up: cosine decay over num_steps, or constant
    weight_decay: float = 0.01  # AdamW's decoupled weight decay
    b1: float = 0.9  # AdamW's beta1
    b2: float = 0.99  # AdamW's beta2
    grad_clip_norm: float = 1.0  # global-norm clipping; 0 disables it
    log_every: int = 50  # steps between logged train metrics (train.log, TensorBoard)
    eval_every: int = 250  # steps between evaluations
    checkpoint_every: int = 500  # steps between checkpoints (one is also written at the end)
    keep_checkpoints: int = 3  # how many of the newest checkpoints are kept
    eval_batches: int = 8  # batches per periodic evaluation (0 = all); the final one takes all
    num_devices: int = 0  # data parallel over this many devices; 0 = all (1 device: plain jit)
    steps_per_call: int = 1  # optimizer steps per compiled call (lax.scan); ends on every log/eval/ckpt
    microbatches: int = 1  # independent forward/backward passes per batch, run concurrently (CPU)

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """The `train.*` fields with their defaults: the `train` section of every config."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    def __post_init__(self):
        for name in ("num_steps", "batch_size", "log_every", "eval_every", "checkpoint_every",
                     "keep_checkpoints", "steps_per_call", "microbatches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"train.{name}={value!r} must be a positive integer")
        for name in ("warmup_steps", "eval_batches", "num_devices"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"train.{name}={value!r} must be a non-negative integer")
        if self.batch_size % self.microbatches:
            raise ConfigError(f"train.microbatches={self.microbatches} does not divide "
                              f"train.batch_size={self.batch_size}; use a divisor of it")
        if self.warmup_steps and self.warmup_steps >= self.num_steps:
            # the cosine decay needs at least one step after the warm-up (optax raises otherwise)
            raise ConfigError(f"train.warmup_steps={self.warmup_steps} must be less than "
                              f"train.num_steps={self.num_steps} (or 0: no warm-up)")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"train.schedule={self.schedule!r}; valid: {', '.join(SCHEDULES)}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ConfigError(f"train.learning_rate={self.learning_rate!r} must be a positive number")
        for name, low, high in (("b1", 0.0, 1.0), ("b2", 0.0, 1.0),
                                ("end_learning_rate_factor", 0.0, 1.0)):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"train.{name}={value!r} must be in [{low}, {high}]")
        for name in ("weight_decay", "grad_clip_norm"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"train.{name}={getattr(self, name)!r} must be >= 0")

    @classmethod
    def from_config(cls, train: Mapping[str, Any]) -> "TrainConfig":
        return build_dataclass(cls, "train", train, {})


# Config fields added after runs existed, with the value that computes what runs without them did.
# A workdir's config.json that lacks one resumes under exactly that value and no other
# (train/workdir.py); a study's design leaves one out at that value, so that its fingerprint stays
# the one its committed verdict was judged with (studies/study.py), except where every
# fingerprint already holds the field: it was added before fingerprints existed (4f1c347).
ADDED_FIELDS = {"model.norm_type": "layernorm", "model.qk_norm": False,
                "model.causal_mask": True, "model.dense_matmul": "compute",
                "model.qk_init_scale": 1.0, "model.activation": "relu",
                "model.embed_scale": True, "model.embed_norm": False, "model.token_types": 0,
                "model.norm_eps": 1e-5, "model.branch_init": "standard",
                "model.head_dim": 0, "train.schedule": "cosine"}
IN_EVERY_FINGERPRINT = frozenset({"model.norm_type", "model.qk_norm"})


def build_dataclass(cls, section: str, values: Mapping[str, Any],
                    enums: Mapping[str, type[enum.Enum]], **fixed: Any):
    """The one place where a config section becomes typed values.

    Unknown fields are rejected with the valid names, enum strings are parsed, `fixed` values
    (facts from the dataset) cannot be overridden from the command line.
    """
    fields = {f.name for f in dataclasses.fields(cls)}
    out = dict(fixed)
    for key, value in dict(values).items():
        if key not in fields or key in fixed:
            valid = sorted(fields - set(fixed))
            raise ConfigError(f"{section}.{key} is not a {section} field; valid: {', '.join(valid)}")
        out[key] = value
    for key, kind in enums.items():
        if key in out:
            out[key] = parse_enum(kind, out[key], f"{section}.{key}")
    return cls(**out)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]

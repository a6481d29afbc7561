"""A run's config, checked as a whole before anything is compiled: ConfigDict -> `Run`.

Every check raises ConfigError / DataError with a one-line message naming the bad value; the
cheap ones (`check_config`, milliseconds) run before the dataset is built (which may take
seconds).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import ml_collections

from transformer_jax import data as data_lib
from transformer_jax.config import ConfigError, Head, ModelConfig, NormType, TrainConfig
from transformer_jax.train import workdir as workdir_lib


@dataclasses.dataclass(frozen=True)
class Run:
    """The typed form of one run's config, validated as a whole."""

    seed: int
    model: ModelConfig
    train: TrainConfig
    dataset: Any  # transformer_jax.data.Dataset
    bits_name: str  # 'bits_per_char' for text, 'bits_per_token' otherwise


def check_config(config: ml_collections.ConfigDict) -> tuple[TrainConfig, ModelConfig]:
    """The checks that need no dataset (milliseconds): train, model and data fields. Returns the
    train config and the model config with placeholder vocabulary sizes (its arch is final)."""
    train = TrainConfig.from_config(config.train)
    model = ModelConfig.from_config(config.model, vocab_size=1, num_outputs=1)
    data_lib.DataConfig.from_config(config.data)
    if model.norm_type is NormType.BATCHNORM and train.microbatches > 1:
        raise ConfigError(f"train.microbatches={train.microbatches} would split the batch that "
                          "model.norm_type='batchnorm' takes its statistics over; use "
                          "train.microbatches=1")
    return train, model


def build_run(config: ml_collections.ConfigDict) -> Run:
    """ConfigDict -> validated Run. Raises ConfigError / DataError with one-line messages."""
    train, placeholder = check_config(config)  # before the dataset is built (may take seconds)
    arch = placeholder.arch
    dataset = data_lib.make_dataset(config.data, seed=config.seed, fmt=arch.value)
    head = Head(dataset.head)
    model = ModelConfig.from_config(
        config.model, vocab_size=dataset.vocab_size, head=head,
        num_outputs=dataset.num_classes if head is Head.POOLED else dataset.vocab_size)
    longest = max(dataset.train_len, dataset.eval_len)
    if longest > model.max_len:
        raise ConfigError(f"sequences of length {longest} (data.seq_len / data.eval_seq_len) "
                          f"exceed model.max_len={model.max_len}; raise model.max_len")
    bits_name = "bits_per_char" if config.data.kind == "text" else "bits_per_token"
    return Run(seed=config.seed, model=model, train=train, dataset=dataset, bits_name=bits_name)


def check_differ_only_in_seed(configs: Sequence[ml_collections.ConfigDict]) -> None:
    """Replicated runs share one compiled program: their configs may differ in seed alone."""
    first = dict(configs[0].to_dict(), seed=None)
    for c in configs[1:]:
        differences = workdir_lib.config_differences(first, dict(c.to_dict(), seed=None))
        if differences:
            raise ConfigError(f"replicated runs may differ only in seed, not in {differences[0]}")


def describe_model(cfg: ModelConfig) -> str:
    """The model in one log line: its shape and every ablation axis."""
    shape = f"{cfg.num_layers}x(d={cfg.d_model}, h={cfg.num_heads}, ff={cfg.d_ff})"
    return (f"{cfg.arch.value} {shape} "
            f"position={cfg.position.value} norm={cfg.norm.value}({cfg.norm_type.value}) "
            f"attn_scale={cfg.attn_scale} qk_norm={cfg.qk_norm} residual={cfg.residual}"
            + ("" if cfg.causal_mask else " causal_mask=False (training only)"))


def hparams(config: ml_collections.ConfigDict, run: Run) -> dict[str, Any]:
    """TensorBoard's HParams of a run: its config's scalar fields and its resolved model's."""
    flat = workdir_lib.flatten(config.to_dict())
    flat.update({f"model.{k}": v for k, v in run.model.to_dict().items()})
    return {k: v for k, v in flat.items() if isinstance(v, (bool, int, float, str))}

"""The benchmark's model/run configurations and how to build our train state for them.

Everything goes through the project's own code path: `data.make_dataset`, `init.init_model`,
`steps.make_optimizer`, `steps.make_train_step`, as `train.train_and_evaluate` runs them.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections

from transformer_jax import data as data_lib
from transformer_jax.train import init, steps
from transformer_jax.config import ModelConfig, TrainConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TEXT = os.path.join(REPO, "..", "shared", "data", "tinyshakespeare.txt")


@dataclasses.dataclass(frozen=True)
class CharLM:
    """The character-LM race: nanoGPT-like baby model on tiny Shakespeare."""
    num_steps: int = 2000
    batch_size: int = 12
    seq_len: int = 64
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 512
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    end_learning_rate_factor: float = 0.1
    eval_windows: int = 200
    seed: int = 0
    microbatches: int = 1  # train.microbatches (the benchmark sets configs/lm.py's)


def lm_train():
    """configs/lm.py's train section: the benchmark races the trainer as configured."""
    from transformer_jax.studies.study import load_config
    return load_config(os.path.join(REPO, "configs", "lm.py")).train


def text_dataset(text_path: str, seq_len: int, num_eval: int, seed: int = 0,
                 data_dir: str = "") -> data_lib.Dataset:
    cfg = data_lib.default_config()
    cfg.kind, cfg.text_path, cfg.seq_len, cfg.num_eval = "text", text_path, seq_len, num_eval
    cfg.data_dir = data_dir
    return data_lib.make_dataset(cfg, seed=seed, fmt="decoder")


def model_config(vocab_size: int, *, d_model: int, num_heads: int, num_layers: int, d_ff: int,
                 seq_len: int, **overrides: Any) -> ModelConfig:
    """A pre-norm decoder with sinusoidal positions, dropout 0 (the benchmark's architecture)."""
    base = dict(arch="decoder", norm="pre", position="sinusoidal", dropout=0.0,
                d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff,
                max_len=seq_len)
    base.update(overrides)
    return ModelConfig.from_config(ml_collections.ConfigDict(base), vocab_size=vocab_size,
                                   num_outputs=vocab_size)


def charlm_configs(run: CharLM, vocab_size: int, **model_overrides: Any
                   ) -> tuple[ModelConfig, TrainConfig]:
    model = model_config(vocab_size, d_model=run.d_model, num_heads=run.num_heads,
                         num_layers=run.num_layers, d_ff=run.d_ff, seq_len=run.seq_len,
                         **model_overrides)
    tcfg = TrainConfig(num_steps=run.num_steps, batch_size=run.batch_size,
                       learning_rate=run.learning_rate, warmup_steps=min(run.warmup_steps, run.num_steps),
                       end_learning_rate_factor=run.end_learning_rate_factor, b1=0.9, b2=0.99,
                       microbatches=run.microbatches)
    return model, tcfg


@dataclasses.dataclass
class Ours:
    """Our compiled train step and its state, built exactly as the trainer builds them."""
    model: ModelConfig
    train: TrainConfig
    graphdef: Any
    state: dict
    train_step: Any  # jitted, state donated
    eval_step: Any
    schedule: Any
    tx: Any

    @classmethod
    def build(cls, model: ModelConfig, tcfg: TrainConfig, seed: int = 0) -> "Ours":
        graphdef, params = init.init_model(model, seed)
        tx, schedule = steps.make_optimizer(tcfg)
        state = {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}
        train_step = steps.make_train_step(graphdef, model, tx, schedule,
                                           microbatches=tcfg.microbatches)
        return cls(model, tcfg, graphdef, state, train_step,
                   steps.make_eval_step(graphdef, model), schedule, tx)

    def multi_step(self):
        """k steps per call, as the trainer builds it (`train.steps_per_call`)."""
        return steps.make_logged_multi_step(self.graphdef, self.model, self.tx, self.schedule,
                                            microbatches=self.train.microbatches)

    def evaluate(self, batches) -> float:
        """Mean eval loss over the batches (weighted, as `train.evaluate` sums it)."""
        sums: dict[str, float] = {}
        for batch in batches:
            for k, v in jax.device_get(self.eval_step(self.state["params"], batch)).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        return steps.finish_eval(sums)["loss"]

"""The benchmark's model/run configurations and how to build our train state for them.

Everything goes through the project's own code path: `run.build_run`, `init.init_model`,
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
from transformer_jax.config import ModelConfig, TrainConfig
from transformer_jax.studies.design.loading import load_config
from transformer_jax.train import init, steps
from transformer_jax.train import run as run_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TEXT = os.path.join(REPO, "..", "shared", "data", "tinyshakespeare.txt")
LM_CONFIG = os.path.join(REPO, "configs", "lm.py")


# What the race changes in configs/lm.py: its held-out split scored as 200 windows of the
# sequence length, not all of it (seconds, not a minute, per contender and evaluation).
RACE_SETTINGS = (("data.num_eval", 200),)


@dataclasses.dataclass(frozen=True)
class CharLM:
    """The character-LM race: configs/lm.py's run (nanoGPT's baby model on tiny Shakespeare),
    changed only by `settings`: ("section.field", value) pairs, as --config.FIELD=VALUE sets
    them. The values live in configs/lm.py and the defaults it starts from, not here."""
    settings: tuple[tuple[str, Any], ...] = RACE_SETTINGS

    def override(self, settings: dict[str, Any]) -> "CharLM":
        """This run with `settings` ({"train.num_steps": 200, ...}) set as well."""
        return CharLM(tuple({**dict(self.settings), **settings}.items()))

    @property
    def config(self) -> ml_collections.ConfigDict:
        """configs/lm.py's config with the settings applied (a fresh copy each time)."""
        config = load_config(LM_CONFIG)
        for dotted, value in self.settings:
            section, field = dotted.split(".")
            config[section][field] = value  # an unknown field raises (the config is locked)
        return config

    def configs(self, vocab_size: int) -> tuple[ModelConfig, TrainConfig]:
        """The typed model and train configs, as the trainer makes them (`run.build_run`),
        for a text of `vocab_size` characters."""
        config = self.config
        tcfg, _ = run_lib.check_config(config)
        return ModelConfig.from_config(config.model, vocab_size=vocab_size,
                                       num_outputs=vocab_size), tcfg

    def build(self, text_path: str, data_dir: str = "") -> run_lib.Run:
        """The run the trainer makes of this config (dataset, model, train) on that text."""
        config = self.config
        config.data.text_path, config.data.data_dir = text_path, data_dir
        return run_lib.build_run(config)


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
        tx, schedule = steps.make_optimizer(tcfg)
        graphdef, state = _fresh_state(model, tx, seed)
        return cls(model, tcfg, graphdef, state, _train_step(graphdef, model, tcfg, tx, schedule),
                   steps.make_eval_step(graphdef, model), schedule, tx)

    @classmethod
    def seeds(cls, model: ModelConfig, tcfg: TrainConfig, seeds) -> tuple[list["Ours"], dict]:
        """Runs that differ only in seed, as the trainer initializes several seeds of a variant
        (`init.init_states`: one compiled program for all), sharing one compiled train step;
        and their states stacked on a leading seed axis."""
        tx, schedule = steps.make_optimizer(tcfg)
        graphdef, states = init.init_states(model, tx, seeds)
        train_step = _train_step(graphdef, model, tcfg, tx, schedule)
        eval_step = steps.make_eval_step(graphdef, model)
        return [cls(model, tcfg, graphdef, init.take_replica(states, j), train_step, eval_step,
                    schedule, tx) for j in range(len(seeds))], states

    @staticmethod
    def abstract(model: ModelConfig, tcfg: TrainConfig) -> tuple[Any, dict]:
        """The jitted train step `build` makes and the shapes of its state, with no
        initialization compiled or run: what lowering the step needs."""
        tx, schedule = steps.make_optimizer(tcfg)
        graphdef = init.graphdef_of(model)
        return _train_step(graphdef, model, tcfg, tx, schedule), init.state_shapes(model, tx)

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


def _fresh_state(model: ModelConfig, tx, seed: int) -> tuple[Any, dict]:
    """(graphdef, the train state at step 0), as the trainer initializes them."""
    graphdef, params = init.init_model(model, seed)
    return graphdef, {"params": params, "opt_state": tx.init(params),
                      "step": jnp.zeros((), jnp.int32)}


def _train_step(graphdef, model: ModelConfig, tcfg: TrainConfig, tx, schedule):
    return steps.make_train_step(graphdef, model, tx, schedule, microbatches=tcfg.microbatches)

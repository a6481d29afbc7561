"""The config every config file (configs/*.py) starts from: `base_config()`, plus the `tiny` size
and the `get_config(arg)` argument parser they share.

A config file calls `base_config()` and changes what its family needs. Field names are the
command-line contract (`--config.model.position=rotary`, `--config.train.learning_rate=3e-4`).
"""
import ml_collections

from transformer_jax import data
from transformer_jax.config import ModelConfig, TrainConfig

# The sizes a config file itself knows (`get_config("tiny")`): its default and a seconds-long smoke
# test. Not a study's sizes (studies/design/loading.py's STUDY_SIZES, which add `large`): an
# experiment scales its runs itself, with overrides, whatever config size it starts from.
CONFIG_SIZES = ("default", "tiny")


def parse_arg(arg: str | None, **defaults: str) -> ml_collections.ConfigDict:
    """`get_config("tiny")` or `get_config("size=tiny,task=sort")` -> ConfigDict of options.

    A bare word sets `size`; unknown keys or sizes fail with the valid choices.
    """
    options = dict(size="default", **defaults)
    for item in filter(None, (arg or "").split(",")):
        key, value = item.split("=", 1) if "=" in item else ("size", item)
        if key not in options:
            raise ValueError(f"config argument {key!r} is not one of: {', '.join(options)}")
        options[key] = value
    if options["size"] not in CONFIG_SIZES:
        raise ValueError(f"config size {options['size']!r} is not one of: "
                         f"{', '.join(CONFIG_SIZES)}")
    return ml_collections.ConfigDict(options)


def base_config() -> ml_collections.ConfigDict:
    """Every field a run has, at its default. The defaults are declared once, with a comment per
    field, where they are validated: `ModelConfig`, `TrainConfig` (transformer_jax.config) and
    `DataConfig` (transformer_jax.data); so `ModelConfig(vocab_size=V, num_outputs=V)` in Python
    and this config on the command line describe the same model."""
    config = ml_collections.ConfigDict()
    config.seed = 0  # parameters, dropout and data order all derive from it
    config.model = ml_collections.ConfigDict(ModelConfig.field_defaults())
    config.train = ml_collections.ConfigDict(TrainConfig.field_defaults())
    config.data = data.default_config()
    return config


# The seconds-long smoke size of any config (the `tiny` config argument), as settings.
TINY = {"model.d_model": 32, "model.num_heads": 2, "model.num_layers": 2, "model.d_ff": 64,
        "train.num_steps": 20, "train.batch_size": 8, "train.warmup_steps": 5,
        "train.log_every": 5, "train.eval_every": 10, "train.checkpoint_every": 10,
        "train.eval_batches": 2, "data.num_train": 512, "data.num_eval": 64}


def tiny(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """`config` at the `tiny` size (TINY's settings), returned."""
    for key, value in TINY.items():
        section, field = key.split(".")
        config[section][field] = value
    return config

"""One set of defaults: what Python's dataclasses declare is what the command line runs.

`ModelConfig(vocab_size=V, num_outputs=V)`, `TrainConfig()` and `DataConfig` declare the
defaults; `base_config()` (the command line's, and every config file's start) reads them. These
tests fail when a default is typed a second time somewhere and the two drift apart.
"""
import dataclasses

import ml_collections
import pytest

from transformer_jax import data as data_lib
from transformer_jax.config import Head, ModelConfig, Norm, TrainConfig
from transformer_jax.train import defaults
from transformer_jax.train import check_config


def test_model_config_defaults_are_the_command_lines_model():
    config = defaults.base_config()
    # check_config is what main runs first: the model with placeholder dataset facts
    _, cli_model = check_config(config)
    assert cli_model == ModelConfig(vocab_size=1, num_outputs=1)
    assert ModelConfig.from_config(config.model, vocab_size=65, num_outputs=65) == ModelConfig(
        vocab_size=65, num_outputs=65)
    # the command line's default model: a 4-layer Pre-LN decoder
    assert cli_model.norm is Norm.PRE and cli_model.num_layers == 4 and cli_model.causal


def test_every_model_field_but_the_datasets_is_a_config_field():
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    assert set(defaults.base_config().model) == fields - set(ModelConfig.DATA_FIELDS)
    assert ModelConfig(vocab_size=3, num_outputs=3).head is Head.TOKEN


def test_train_defaults_are_the_command_lines():
    config = defaults.base_config()
    assert TrainConfig.from_config(config.train) == TrainConfig()
    assert set(config.train) == {f.name for f in dataclasses.fields(TrainConfig)}


def test_data_defaults_are_the_command_lines(tmp_path):
    config = defaults.base_config()
    assert config.data.to_dict() == data_lib.default_config().to_dict()
    assert set(config.data) == {f.name for f in dataclasses.fields(data_lib.DataConfig)}
    # a data config that leaves every field out gets the same task and sizes
    empty = data_lib.DataConfig.from_config(ml_collections.ConfigDict({"data_dir": str(tmp_path)}))
    full = data_lib.DataConfig.from_config(
        ml_collections.ConfigDict(dict(config.data.to_dict(), data_dir=str(tmp_path))))
    assert empty == full and empty.task == "reverse"


@pytest.mark.parametrize("field", ["d_model", "num_layers", "norm", "position"])
def test_a_config_change_reaches_the_model(field):
    """The config's model section is not a copy the model ignores: changing it changes the model."""
    config = defaults.base_config()
    changed = {"d_model": 64, "num_layers": 2, "norm": "post", "position": "rotary"}[field]
    config.model[field] = changed
    _, model = check_config(config)
    value = getattr(model, field)
    assert (value.value if hasattr(value, "value") else value) == changed

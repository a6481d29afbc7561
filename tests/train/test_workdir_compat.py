"""A run made before a model field existed resumes under the value that reproduces it, and only
under that value (curves must never mix)."""
import json

import pytest

from transformer_jax.config import ADDED_FIELDS
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.train.workdir import WorkdirError, config_differences


def _config(train=None, **model):
    return {"seed": 0, "model": {"d_model": 16, **model},
            "train": {"num_steps": 5, **(train or {})}}


def _with(field, value):
    """_config() with the dotted `field` (a model.* or train.* one) at `value`."""
    section, leaf = field.split(".")
    return _config(**{leaf: value}) if section == "model" else _config(train={leaf: value})


@pytest.mark.parametrize("field", sorted(ADDED_FIELDS))
def test_an_added_field_at_its_old_behaviour_is_no_difference(field):
    assert config_differences(_config(), _with(field, ADDED_FIELDS[field])) == []


@pytest.mark.parametrize("field,other", [("model.norm_type", "dyt"), ("model.qk_norm", True),
                                         ("train.schedule", "constant")])
def test_an_added_field_at_another_value_is_refused(tmp_path, field, other):
    (tmp_path / workdir_lib.CONFIG_FILE).write_text(json.dumps(_config()))
    with pytest.raises(WorkdirError, match=f"{field}: {ADDED_FIELDS[field]!r} -> {other!r}"):
        workdir_lib.prepare(str(tmp_path), _with(field, other))
    workdir_lib.prepare(str(tmp_path), _with(field, ADDED_FIELDS[field]))  # resumes


def test_other_absent_fields_still_differ():
    assert config_differences(_config(), _config(d_ff=64)) == ["model.d_ff: '<absent>' -> 64"]

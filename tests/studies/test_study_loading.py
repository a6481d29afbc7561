"""Loading a user's experiment file: a size it does not define and a misspelt override key are
one line each, naming what is valid, before anything runs."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fork_server import run_command

from transformer_jax.config import ConfigError
from transformer_jax.studies.design.loading import load_study

REPO = Path(__file__).resolve().parents[2]

# The tutorial's shape (docs/examples/my_study.py), sized for a CPU only: no "large".
STUDY = '''
from transformer_jax.studies.study import Comparison, Expectation, Study, load_config

SIZES = {"tiny": dict(steps=20), "default": dict(steps=300)}


def get_study(size):
    s = SIZES[size]
    base = load_config(%(config)r, "task=sort")
    base.unlock()
    base.train.num_steps = s["steps"]
    return Study(name="mine", claim="c", published="p", base=base,
                 variants={"layernorm": {"model.norm_type": "layernorm"},
                           "rmsnorm": {%(key)r: "rmsnorm"}},
                 seeds=(0, 1), metrics=("eval/accuracy",),
                 expectations=(Expectation("e", "eval/accuracy", "rmsnorm", Comparison.WITHIN,
                                           0.05, b="layernorm"),))
'''


def write_study(tmp_path: Path, key: str = "model.norm_type") -> Path:
    path = tmp_path / "mine.py"
    path.write_text(STUDY % {"config": str(REPO / "configs" / "synthetic.py"), "key": key})
    return path


def test_a_size_the_study_lacks_names_the_sizes_it_has(tmp_path):
    path = write_study(tmp_path)
    assert load_study(path, "tiny").config("rmsnorm", 0).train.num_steps == 20
    with pytest.raises(ConfigError) as caught:
        load_study(path, "large")
    assert str(caught.value) == f"--size='large': {path} has no 'large' size; its sizes: default, tiny"


def test_a_misspelt_override_names_the_variant_and_the_nearest_field(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_study(write_study(tmp_path, key="model.norm_typ"), "tiny")
    assert str(caught.value) == ("study 'mine', variant 'rmsnorm': override 'model.norm_typ' "
                                 "names no config field; did you mean 'model.norm_type'?")
    with pytest.raises(ConfigError, match="override 'optimizer.lr' names no config field$"):
        load_study(write_study(tmp_path, key="optimizer.lr"), "tiny")  # nothing near it


def test_the_sweep_says_so_in_one_line_and_exits_2(tmp_path):
    done = run_command(
        [sys.executable, "-m", "transformer_jax.sweep", f"--experiment={write_study(tmp_path)}",
         f"--workdir={tmp_path / 'runs'}", "--size=large"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: --size='large': {tmp_path / 'mine.py'} has no 'large' size; its sizes: default, tiny"]
    assert not (tmp_path / "runs").exists()

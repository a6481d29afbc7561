"""Bad input to `python -m transformer_jax.main`: exit code 2, one `error:` line on stderr that
names the bad value (and the valid choices where there are some), no traceback, and nothing
written into the run directory it was pointed at."""
from __future__ import annotations

import shutil
import time

import pytest

from helpers_train import (LM, SYNTHETIC, error_lines, main_args, run_main, tree_hashes)

pytestmark = pytest.mark.usefixtures("compilation_cache")

S, L = f"{SYNTHETIC}:tiny", f"{LM}:tiny"

# id -> (config, overrides, extra arguments, fragments the error line must contain)
CASES = {
    "unknown_key": (S, {"model.foo": 1}, (), [
        "--config.model.foo is not a config field", "valid:", "config.model.d_model",
        "config.model.position", "config.model.norm"]),
    "unknown_section": (S, {"modl.d_model": 16}, (), [
        "--config.modl.d_model is not a config field", "did you mean config.model.d_model"]),
    "bad_position": (S, {"model.position": "sideways"}, (), [
        "model.position='sideways'", "sinusoidal, learned, rotary, alibi, none"]),
    "bad_norm": (S, {"model.norm": "middle"}, (), ["model.norm='middle'", "post, pre, none"]),
    "heads_not_dividing": (S, {"model.num_heads": 3}, (), [
        "model.num_heads=3", "model.d_model=32", "valid num_heads: 1, 2, 4, 8, 16, 32"]),
    "rotary_odd_head_dim": (S, {"model.d_model": 6, "model.num_heads": 2,
                                "model.position": "rotary"}, (), [
        "model.position='rotary'", "even head dimension", "6/2=3"]),
    "zero_d_model": (S, {"model.d_model": 0}, (), ["model.d_model=0", "positive integer"]),
    "negative_layers": (S, {"model.num_layers": -1}, (), ["model.num_layers=-1", "positive integer"]),
    "zero_steps": (S, {"train.num_steps": 0}, (), ["train.num_steps=0", "positive integer"]),
    "negative_learning_rate": (S, {"train.learning_rate": -1.0}, (), ["train.learning_rate=-1.0"]),
    "seq_len_beyond_max_len": (S, {"model.position": "learned", "data.seq_len": 16,
                                   "model.max_len": 8}, (), [
        "length 16", "model.max_len=8"]),
    "bad_task": (S, {"data.task": "bogus"}, (), ["data.task='bogus'", "copy, reverse, sort, order"]),
    "bad_data_kind": (S, {"data.kind": "video"}, (), ["data.kind='video'", "synthetic, text"]),
    "not_an_integer": (S, {"model.d_model": "abc"}, (), ["--config.model.d_model=abc", "'abc'"]),
    "bad_config_arg": (f"{SYNTHETIC}:huge", {}, (), [
        "configs/synthetic.py:huge", "'huge'", "default, tiny"]),
    "missing_config_file": ("configs/nope.py", {}, (), [
        "configs/nope.py", "not a file", "configs/lm.py", "configs/synthetic.py"]),
    "stray_argument": (S, {}, ("extra",), ["unexpected arguments", "'extra'"]),
    # text files: {texts} is replaced by the directory of the files written below
    "missing_text_file": (L, {"data.text_path": "{texts}/missing.txt"}, (), [
        "data.text_path=", "missing.txt", "does not exist"]),
    "empty_text_file": (L, {"data.text_path": "{texts}/empty.txt"}, (), ["empty.txt", "is empty"]),
    "binary_text_file": (L, {"data.text_path": "{texts}/binary.bin"}, (), [
        "binary.bin", "is not UTF-8 text"]),
    "text_shorter_than_a_sequence": (L, {"data.text_path": "{texts}/short.txt"}, (), [
        "short.txt", "too short", "data.seq_len+1=33"]),
}


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    d = tmp_path_factory.mktemp("texts")
    (d / "empty.txt").write_bytes(b"")
    (d / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (d / "short.txt").write_text("To be, or not to be\n")
    return d


@pytest.fixture(scope="module")
def existing_run(finished_tiny_run, tmp_path_factory):
    """A copy of a finished run: every bad input is pointed at it and must leave it untouched."""
    _, proc, workdir = finished_tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path_factory.mktemp("existing") / "run"
    shutil.copytree(workdir, copy)
    return copy


def assert_one_error_line(proc, *fragments: str) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, texts, existing_run, tj_data_dir):
    config, overrides, extra, fragments = CASES[case]
    overrides = {k: str(v).replace("{texts}", str(texts)) for k, v in overrides.items()}
    before = tree_hashes(existing_run)
    proc = run_main(main_args(config, existing_run, tj_data_dir, overrides, *extra))
    assert_one_error_line(proc, *fragments)
    assert tree_hashes(existing_run) == before


def test_bad_input_creates_no_workdir(tmp_path, tj_data_dir):
    workdir = tmp_path / "new"
    proc = run_main(main_args(S, workdir, tj_data_dir, {"model.position": "sideways"}))
    assert_one_error_line(proc, "sideways")
    assert not workdir.exists()


def test_workdir_is_a_file(tmp_path, tj_data_dir):
    path = tmp_path / "afile"
    path.write_text("not a run")
    proc = run_main(main_args(S, path, tj_data_dir))
    assert_one_error_line(proc, f"--workdir='{path}'", "is a file")
    assert path.read_text() == "not a run"


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_unwritable_workdir(where, tmp_path, tj_data_dir):
    # We may run as root, so permission bits would not stop us: a path below a regular file, or
    # in /proc, cannot be created by anyone.
    if where == "under_a_file":
        (tmp_path / "afile").write_text("x")
        workdir = tmp_path / "afile" / "run"
    else:
        workdir = "/proc/transformer_jax_test_run"
    proc = run_main(main_args(S, workdir, tj_data_dir))
    assert_one_error_line(proc, f"--workdir='{workdir}'", "is not writable")


def test_workdir_with_a_different_config(existing_run, tj_data_dir):
    before = tree_hashes(existing_run)
    proc = run_main(main_args(S, existing_run, tj_data_dir, {"model.position": "rotary"}))
    line = assert_one_error_line(
        proc, f"--workdir='{existing_run}'", "different config",
        "model.position: 'sinusoidal' -> 'rotary'", "to resume it", "choose a new --workdir")
    assert str(existing_run / "config.json") in line
    assert tree_hashes(existing_run) == before


def test_workdir_holding_other_files(tmp_path, tj_data_dir):
    (tmp_path / "notes.txt").write_text("mine")
    proc = run_main(main_args(S, tmp_path, tj_data_dir))
    assert_one_error_line(proc, "is not empty and holds no run", "choose a new or empty directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_offline_hub_dataset_fails_fast(tmp_path, existing_run):
    """configs/lm.py without a text file wants TFDS tiny_shakespeare; offline (forced here through
    a proxy nobody listens on) that is one line naming data.text_path, in seconds."""
    before = tree_hashes(existing_run)
    start = time.monotonic()
    proxy = "http://127.0.0.1:9"
    proc = run_main(main_args(L, existing_run, tmp_path / "empty_data_dir", {"data.text_path": ""}),
                    env={"https_proxy": proxy, "HTTPS_PROXY": proxy})
    elapsed = time.monotonic() - start
    assert_one_error_line(proc, "data.text_path=''", "tiny_shakespeare", "offline",
                          "--config.data.text_path=")
    assert elapsed < 20, f"took {elapsed:.1f}s"
    assert tree_hashes(existing_run) == before


def test_debug_shows_the_traceback(tmp_path, tj_data_dir):
    proc = run_main(main_args(S, tmp_path / "new", tj_data_dir, {"model.position": "sideways"},
                              "--debug"))
    assert proc.returncode not in (0, 2), proc.stderr[-3000:]
    assert "Traceback (most recent call last)" in proc.stderr
    assert "ConfigError: model.position='sideways'" in proc.stderr
    proc = run_main(main_args(S, tmp_path / "new", tj_data_dir, {"model.foo": 1}, "--debug"))
    assert proc.returncode not in (0, 2) and "Traceback (most recent call last)" in proc.stderr

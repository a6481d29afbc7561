"""Bad input to `python -m transformer_jax.main`: exit code 2, one `error:` line on stderr that
names the bad value (and the valid choices where there are some), no traceback, and nothing
written into the run directory it was pointed at.

Each case is one process running `transformer_jax.main` as `__main__`, forked from one of a few
servers that did main's imports once (helpers_train.MainServer: a fresh process would spend ~2 s
of CPU on them per case); the module runs them all at once, a few in parallel (`outcomes`), and
the tests then judge one result each."""
from __future__ import annotations

import concurrent.futures
import queue
import shutil
import time

import pytest

from helpers_train import LM, SYNTHETIC, MainServer, error_lines, main_args, tree_hashes

pytestmark = pytest.mark.usefixtures("compilation_cache")

S, L = f"{SYNTHETIC}:tiny", f"{LM}:tiny"

# id -> (config, overrides, extra arguments, fragments the error line must contain)
CASES = {
    "unknown_key": (S, {"model.foo": 1}, (), [
        "--config.model.foo is not a config field", "valid:", "config.model.d_model",
        "config.model.position", "config.model.norm"]),
    "bad_position": (S, {"model.position": "sideways"}, (), [
        "model.position='sideways'", "sinusoidal, learned, rotary, alibi, none"]),
    "bad_norm": (S, {"model.norm": "middle"}, (), ["model.norm='middle'", "post, pre, none"]),
    "heads_not_dividing": (S, {"model.num_heads": 3}, (), [
        "model.num_heads=3", "model.d_model=32", "valid num_heads: 1, 2, 4, 8, 16, 32"]),
    "rotary_odd_head_dim": (S, {"model.d_model": 6, "model.num_heads": 2,
                                "model.position": "rotary"}, (), [
        "model.position='rotary'", "even head dimension", "6/2=3"]),
    "causal_mask_on_encoder": (S, {"model.causal_mask": False}, (), [
        "model.causal_mask=False", "needs model.arch='decoder'", "an encoder has no causal mask"]),
    "zero_d_model": (S, {"model.d_model": 0}, (), ["model.d_model=0", "positive integer"]),
    "negative_layers": (S, {"model.num_layers": -1}, (), ["model.num_layers=-1", "positive integer"]),
    "zero_steps": (S, {"train.num_steps": 0}, (), ["train.num_steps=0", "positive integer"]),
    # the default warm-up (100 steps) is the whole run: refused, not optax's traceback
    "warmup_is_the_whole_run": (S, {"train.num_steps": 100, "train.warmup_steps": 100}, (), [
        "train.warmup_steps=100", "less than train.num_steps=100", "or 0"]),
    # (a seq_len the data_dir does not hold yet would prepare that dataset first, with progress
    # bars on stderr: keep the tiny size's seq_len 8)
    "seq_len_beyond_max_len": (S, {"model.position": "learned", "model.max_len": 4}, (), [
        "length 8", "model.max_len=4"]),
    "bad_task": (S, {"data.task": "bogus"}, (), ["data.task='bogus'", "copy, reverse, sort, order"]),
    "bad_config_arg": (f"{SYNTHETIC}:huge", {}, (), [
        "configs/synthetic.py:huge", "'huge'", "default, tiny"]),
    "missing_config_file": ("configs/nope.py", {}, (), [
        "configs/nope.py", "not a file", "configs/lm.py", "configs/synthetic.py"]),
    # text files: {texts} is replaced by the directory of the files written below
    "missing_text_file": (L, {"data.text_path": "{texts}/missing.txt"}, (), [
        "data.text_path=", "missing.txt", "does not exist"]),
    "empty_text_file": (L, {"data.text_path": "{texts}/empty.txt"}, (), ["empty.txt", "is empty"]),
    "binary_text_file": (L, {"data.text_path": "{texts}/binary.bin"}, (), [
        "binary.bin", "is not UTF-8 text"]),
    "bad_head_dim": (S, {"model.head_dim": -4}, (), [
        "model.head_dim=-4", "must be a non-negative integer", "0: d_model / num_heads"]),
    "text_shorter_than_a_sequence": (L, {"data.text_path": "{texts}/short.txt"}, (), [
        "short.txt", "too short", "data.seq_len+1=33"]),
}


PARALLEL = 2  # servers (each imports once); a case takes well under a second
NEW_WORKDIR = ("bad_norm", "missing_config_file")  # pointed at a new directory; the rest at a run
OFFLINE_PROXY = "http://127.0.0.1:9"  # nobody listens there: the hub looks unreachable at once


@pytest.fixture(scope="module")
def existing_run(finished_tiny_run, tmp_path_factory):
    """A copy of a finished run: bad inputs are pointed at it and must leave it untouched."""
    _, proc, workdir = finished_tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path_factory.mktemp("existing") / "run"
    shutil.copytree(workdir, copy)
    return copy


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, existing_run, tj_data_dir):
    """Runs every case of this module; {name: (args, process, seconds)} plus the paths used.
    `existing_run`'s file hashes are taken before and after all of them."""
    tmp = tmp_path_factory.mktemp("cli_errors")
    texts = tmp / "texts"
    texts.mkdir()
    (texts / "empty.txt").write_bytes(b"")
    (texts / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (texts / "short.txt").write_text("To be, or not to be\n")
    (tmp / "afile").write_text("not a run")
    (tmp / "other_files").mkdir()
    (tmp / "other_files" / "notes.txt").write_text("mine")
    paths = {"afile": tmp / "afile", "under_a_file": tmp / "afile" / "run",
             "other_files": tmp / "other_files",
             "new": tmp / "new"}
    jobs = {}
    for name, (config, overrides, extra, _) in CASES.items():
        overrides = {k: str(v).replace("{texts}", str(texts)) for k, v in overrides.items()}
        workdir = paths["new"] if name in NEW_WORKDIR else existing_run
        jobs[name] = (main_args(config, workdir, tj_data_dir, overrides, *extra), None)
    jobs.update({
        "workdir_is_a_file": (main_args(S, paths["afile"], tj_data_dir), None),
        "workdir_under_a_file": (main_args(S, paths["under_a_file"], tj_data_dir), None),
        "different_config": (main_args(S, existing_run, tj_data_dir, {"model.position": "rotary"}),
                             None),
        "other_files": (main_args(S, paths["other_files"], tj_data_dir), None),
        "offline_hub": (main_args(L, existing_run, tmp / "empty_data_dir", {"data.text_path": ""}),
                        {"https_proxy": OFFLINE_PROXY, "HTTPS_PROXY": OFFLINE_PROXY}),
        "debug_config_error": (main_args(S, paths["new"], tj_data_dir,
                                         {"model.position": "sideways"}, "--debug"), None),
    })

    servers: queue.Queue = queue.Queue()
    for i in range(PARALLEL):
        servers.put(MainServer(tmp / f"server_{i}"))

    def timed(args, env):
        server = servers.get()
        try:
            start = time.monotonic()
            proc = server.run(args, env)
            return args, proc, time.monotonic() - start
        finally:
            servers.put(server)

    before = tree_hashes(existing_run)
    try:
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            futures = {name: pool.submit(timed, *job) for name, job in jobs.items()}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        while not servers.empty():
            servers.get().close()
    return {"results": results, "paths": paths, "existing_before": before,
            "existing_after": tree_hashes(existing_run), "existing_run": existing_run}


def assert_one_error_line(proc, *fragments: str) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, outcomes):
    _, proc, _ = outcomes["results"][case]
    assert_one_error_line(proc, *CASES[case][3])


def test_nothing_written_into_the_existing_run(outcomes):
    """Most cases above (and the different-config and offline ones) were pointed at it."""
    assert outcomes["existing_after"] == outcomes["existing_before"]


def test_bad_input_creates_no_workdir(outcomes):
    assert not outcomes["paths"]["new"].exists()  # NEW_WORKDIR cases and --debug used it


def test_workdir_is_a_file(outcomes):
    path = outcomes["paths"]["afile"]
    assert_one_error_line(outcomes["results"]["workdir_is_a_file"][1], f"--workdir='{path}'",
                          "is a file")
    assert path.read_text() == "not a run"


def test_unwritable_workdir(outcomes):
    # We may run as root, so permission bits would not stop us: a path below a regular file
    # cannot be created by anyone.
    proc = outcomes["results"]["workdir_under_a_file"][1]
    assert_one_error_line(proc, f"--workdir='{outcomes['paths']['under_a_file']}'",
                          "is not writable", "Not a directory")


def test_workdir_with_a_different_config(outcomes):
    existing = outcomes["existing_run"]
    line = assert_one_error_line(
        outcomes["results"]["different_config"][1], f"--workdir='{existing}'", "different config",
        "model.position: 'sinusoidal' -> 'rotary'", "to resume it", "choose a new --workdir")
    assert str(existing / "config.json") in line
    assert outcomes["existing_after"] == outcomes["existing_before"]


def test_workdir_holding_other_files(outcomes):
    assert_one_error_line(outcomes["results"]["other_files"][1], "is not empty and holds no run",
                          "choose a new or empty directory")
    assert sorted(p.name for p in outcomes["paths"]["other_files"].iterdir()) == ["notes.txt"]


def test_offline_hub_dataset_fails_fast(outcomes):
    """configs/lm.py without a text file wants TFDS tiny_shakespeare; offline (forced here through
    a proxy nobody listens on) that is one line naming data.text_path, in seconds: at most the
    reachability probe (5 s) more than a config error, where TFDS's downloader would retry for
    minutes. (Compared with a config error's time, not absolute, and with a minute's margin:
    a busy machine slows one command more than another; minutes of retries still fail.)"""
    _, proc, seconds = outcomes["results"]["offline_hub"]
    assert_one_error_line(proc, "data.text_path=''", "tiny_shakespeare", "offline",
                          "--config.data.text_path=")
    baseline = outcomes["results"]["bad_task"][2]
    assert seconds < baseline + 60, f"took {seconds:.1f}s, a config error {baseline:.1f}s"


def test_debug_shows_the_traceback(outcomes):
    proc = outcomes["results"]["debug_config_error"][1]
    assert proc.returncode not in (0, 2), proc.stderr[-3000:]
    assert "Traceback (most recent call last)" in proc.stderr
    assert "ConfigError: model.position='sideways'" in proc.stderr

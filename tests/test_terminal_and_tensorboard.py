"""What a person meets after a sweep: the terminal (one line per variant, the verdict, a summary,
no per-step lines or library noise, the full log in a file, a TensorBoard command that runs) and
TensorBoard itself, driven through its HTTP API on the sweep's runs (runs, tags, HParams trials
named by run, the attention-map images).

One tiny sweep (tests/tiny_study.py, test_sweep's study: 2 variants × 2 seeds, 6 steps) runs once, as the
command line runs it with two worker processes; every test here reads its results.
"""
from __future__ import annotations

import json
import logging as std_logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOISE = ("backend 'tpu'", "Unknown size", "Downloading and preparing", "Using custom data "
         "configuration", "Reusing dataset")
STEP_LINE = re.compile(r"step \d+/6 ")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(completed process of `python -m transformer_jax.sweep ...`, logdir, study root)."""
    tmp = tmp_path_factory.mktemp("terminal")
    experiment = tmp / "tiny.py"
    experiment.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "from pathlib import Path\n"
        "from tiny_study import tiny_study\n\n"
        "def get_study(size):\n"
        f"    return tiny_study(Path({str(tmp / 'data')!r}), seeds=(0, 1))\n")
    logdir = tmp / "runs"
    env = {**os.environ, "MPLCONFIGDIR": str(tmp / "mpl"), "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-m", "transformer_jax.sweep", f"--experiment={experiment}",
         f"--workdir={logdir / 'tiny'}", "--jobs=2"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result, logdir, logdir / "tiny"


def test_terminal_shows_progress_verdict_and_summary_only(sweep):
    result, _, root = sweep
    out = result.stdout
    for variant in ("scaled", "unscaled"):  # one line per variant: its metric, done of all, time
        assert re.search(rf"^\[[12]/2\] tiny/{variant} +eval/accuracy \d\.\d+ \(\d\.\d+, \d\.\d+\)"
                         rf" +\| \d+", out, re.M), out
    assert re.search(r"^\[1/2\] .*, ~\d+(s|m\d\ds) left$", out, re.M), out
    assert "tiny: Verdict: the claim holds on this run" in out
    assert re.search(r"^ +holds +scaled is not worse$", out, re.M), out
    assert out.index("tiny: Verdict") > out.index("[2/2]")  # as soon as the study ended
    assert re.search(r"^study +variants +diverged runs +holds +does not hold +inconclusive +"
                     r"verdict$", out, re.M), out
    assert re.search(r"^tiny +2 +0 +1 +0 +0 +holds$", out, re.M), out
    both = out + result.stderr
    assert not STEP_LINE.search(both), both  # the per-step lines are in the log file
    for noise in NOISE:
        assert noise not in both, noise
    assert len(both.splitlines()) < 25, both


def test_the_full_log_is_in_each_variants_file(sweep):
    _, _, root = sweep
    for variant in ("scaled", "unscaled"):
        log = (root / variant / "train.log").read_text()
        assert STEP_LINE.search(log) and "finished 6 steps" in log, log
        assert "step 6/6" in log and "eval at step 6" in log


def test_printed_tensorboard_command_runs_in_a_fresh_shell(sweep):
    result, logdir, _ = sweep
    command = re.search(r"^TensorBoard: +(\S+) --logdir (\S+)", result.stdout, re.M)
    assert command, result.stdout
    executable = REPO / command.group(1)
    assert executable.is_file() and os.access(executable, os.X_OK), executable
    assert Path(command.group(2)) == logdir / "tiny"
    url = re.search(r"^  tiny +(http://localhost:6006/\S+)$", result.stdout, re.M)
    assert url, result.stdout
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url.group(1)).query)
    assert query["runColorGroup"] == ["regex:^([^/]+)"]  # the seeds of a variant: one colour
    assert json.loads(query["pinnedCards"][0]) == [{"plugin": "scalars", "tag": "eval/accuracy"},
                                                   {"plugin": "scalars", "tag": "eval/loss"}]


def test_verbosity_brings_the_log_back_to_the_terminal(tmp_path, capfd):
    from absl import logging
    from transformer_jax.train import cli

    handler = logging.get_absl_handler()
    installed = handler in std_logging.root.handlers
    logging.use_absl_handler()
    try:
        cli.set_terminal_level(std_logging.WARNING)  # the default, --verbosity=-1
        with cli.log_to_file(tmp_path / "run" / "train.log"):
            logging.info("step 2/6  loss 1.0")
            print("a library's own print")
            logging.warning("diverged")
        err = capfd.readouterr().err
        assert "step 2/6" not in err and "diverged" in err and "own print" not in err
        log = (tmp_path / "run" / "train.log").read_text()
        assert "step 2/6  loss 1.0" in log and "a library's own print" in log and "diverged" in log
        cli.set_terminal_level(std_logging.INFO)  # --verbosity=0
        logging.info("step 4/6  loss 0.5")
        assert "step 4/6" in capfd.readouterr().err
    finally:
        cli.set_terminal_level(std_logging.INFO)
        if not installed:
            std_logging.root.removeHandler(handler)


def test_main_log_waits_for_the_run(tmp_path):
    """main's log file appears only once `ready` (the run has started): bad input leaves none,
    and the lines before are kept."""
    from absl import logging
    from transformer_jax.train import cli

    workdir = tmp_path / "run"
    ready = lambda: (workdir / "config.json").exists()
    with cli.log_to_file(workdir / "train.log", ready=ready):
        logging.info("before the run exists")
    assert not workdir.exists()
    with cli.log_to_file(workdir / "train.log", ready=ready):
        logging.info("checking the config")
        workdir.mkdir()
        (workdir / "config.json").write_text("{}")
        logging.info("training")
    log = (workdir / "train.log").read_text()
    assert "checking the config" in log and "training" in log and "before" not in log


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def tensorboard(sweep):
    """The venv's tensorboard serving the sweep's logdir: its base URL."""
    _, logdir, _ = sweep
    port = _free_port()
    executable = Path(sys.executable).parent / "tensorboard"
    process = subprocess.Popen(
        [str(executable), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
         "--reload_interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                if len(_get(f"{base}/data/runs")) == 4:  # every run loaded
                    break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            assert time.monotonic() < deadline, "tensorboard did not serve the runs in 120 s"
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


RUNS = [f"tiny/{v}/seed_{s}" for v in ("scaled", "unscaled") for s in (0, 1)]


def test_tensorboard_serves_runs_tags_and_images(tensorboard):
    assert sorted(_get(f"{tensorboard}/data/runs")) == RUNS
    scalars = _get(f"{tensorboard}/data/plugin/scalars/tags")
    assert sorted(scalars) == RUNS
    for run in RUNS:
        assert {"eval/loss", "eval/accuracy", "train/loss", "train/grad_norm",
                "attention/entropy/layer_00"} <= set(scalars[run]), scalars[run]
    images = _get(f"{tensorboard}/data/plugin/images/tags")
    for run in RUNS:
        assert set(images[run]) == {"attention_map/layer_00", "attention_map/layer_01"}


def test_tensorboard_hparams_trials_are_named_by_run(tensorboard):
    experiment = _get(f"{tensorboard}/data/plugin/hparams/experiment", {"experimentName": ""})
    names = [h["name"] for h in experiment["hparamInfos"]]
    assert names[:3] == ["seed", "study", "variant"], names[:6]  # the first columns
    groups = _get(f"{tensorboard}/data/plugin/hparams/session_groups", {
        "startIndex": 0, "sliceSize": 100,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                            "STATUS_RUNNING"]})
    by_name = {g["name"]: g for g in groups["sessionGroups"]}
    assert sorted(by_name) == RUNS
    for name, group in by_name.items():
        study, variant, seed = name.split("/")
        assert group["hparams"]["study"] == study and group["hparams"]["variant"] == variant
        assert group["hparams"]["seed"] == int(seed.removeprefix("seed_"))
        assert [s["name"] for s in group["sessions"]] == [name]

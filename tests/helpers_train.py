"""Helpers shared by the training-entrypoint tests (test_train, test_cli_errors, test_faults).

Runs go through `python -m transformer_jax.main` as subprocesses (each bounded by a timeout, so
a hang fails instead of stalling CI) or in-process through `train.train_and_evaluate`.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SYNTHETIC, LM = "configs/synthetic.py", "configs/lm.py"
TIMEOUT_S = 120  # per subprocess; a tiny run takes ~10 s with a warm compilation cache
ABSL_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")

# The fault tests' run: the tiny synthetic model for 40 steps, checkpointed every 4, evaluated
# after every step (eval only writes summaries; it slows the run enough that signals land mid-run).
FAULT_OVERRIDES = {"train.num_steps": 40, "train.checkpoint_every": 4, "train.keep_checkpoints": 2,
                   "train.eval_every": 1}


def shakespeare_path() -> str:
    return os.environ.get("TJ_SHAKESPEARE",
                          str(REPO.parent / "shared" / "data" / "tinyshakespeare.txt"))


def main_args(config: str, workdir, data_dir, overrides: dict[str, Any] | None = None,
              *extra: str) -> list[str]:
    """Command-line arguments of one run; `overrides` as {'train.num_steps': 40}."""
    args = [f"--config={config}", f"--workdir={workdir}", f"--config.data.data_dir={data_dir}"]
    args += [f"--config.{k}={v}" for k, v in (overrides or {}).items()]
    return args + list(extra)


def _command(args: Iterable[str]) -> list[str]:
    return [sys.executable, "-m", "transformer_jax.main", *map(str, args)]


def run_main(args: Iterable[str], env: dict[str, str] | None = None,
             timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs the training entrypoint to completion (stdout/stderr captured as text)."""
    command = _command(args)
    try:
        return subprocess.run(command, cwd=REPO, env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        pytest.fail(f"timed out after {timeout}s: {' '.join(command)}\n{(err or '')[-3000:]}")


def start_main(args: Iterable[str], log_path: Path) -> subprocess.Popen:
    """Starts a run in the background; its stderr (the absl log) goes to `log_path`."""
    log = open(log_path, "w")
    try:
        return subprocess.Popen(_command(args), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                text=True)
    finally:
        log.close()  # the child holds its own descriptor


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = TIMEOUT_S,
             log_path: Path | None = None, poll_s: float = 0.005) -> None:
    """Polls `predicate()` until it holds; fails if `proc` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log = log_path.read_text()[-3000:] if log_path else ""
            pytest.fail(f"never saw {what} (exit code {proc.returncode})\n{log}")
        time.sleep(poll_s)


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT_S) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"run did not end within {timeout}s")


def checkpoint_steps(workdir) -> list[int]:
    """Finalized checkpoint steps (Orbax's tmp directories are not digits)."""
    d = Path(workdir) / "checkpoints"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def error_lines(stderr: str) -> list[str]:
    """stderr's non-empty lines that are not absl log records (the user-facing part)."""
    return [line for line in stderr.splitlines() if line.strip() and not ABSL_LOG_LINE.match(line)]


def tree_hashes(root) -> dict[str, str]:
    """{relative path: sha256} of every file under `root` (to show nothing was touched)."""
    root = Path(root)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def tiny_config(config_file: str = SYNTHETIC, arg: str = "tiny",
                overrides: dict[str, Any] | None = None):
    """A config file's ConfigDict with dotted `overrides` applied, locked like main's."""
    from transformer_jax import study

    config = study.load_config(REPO / config_file, arg)
    config.unlock()
    for dotted, value in (overrides or {}).items():
        *parents, leaf = dotted.split(".")
        node = config
        for p in parents:
            node = node[p]
        assert leaf in node, f"{dotted} is not a config field"
        node[leaf] = value
    config.lock()
    return config


def restore_newest(workdir, config) -> tuple[int, dict]:
    """(step, state) of the newest readable checkpoint of a run, restored into the structure the
    trainer saves (params, optimizer state, step)."""
    import jax.numpy as jnp

    from transformer_jax import steps, train
    from transformer_jax.checkpointing import Checkpointer

    run = train.build_run(config)
    _, params = train.init_model(run.model, run.seed)
    tx, _ = steps.make_optimizer(run.train)
    target = {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}
    with Checkpointer(str(Path(workdir) / "checkpoints")) as checkpoints:
        found = checkpoints.restore(target)
    assert found is not None, f"no checkpoint in {workdir}"
    step, state, _ = found
    return step, state


def assert_trees_equal(actual, expected) -> None:
    """Bitwise equality of two pytrees of arrays (same structure, dtypes, shapes, values)."""
    import jax

    paths_a = jax.tree_util.tree_flatten_with_path(actual)[0]
    paths_e = jax.tree_util.tree_flatten_with_path(expected)[0]
    assert [p for p, _ in paths_a] == [p for p, _ in paths_e]
    for (path, a), (_, e) in zip(paths_a, paths_e):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, jax.tree_util.keystr(path)
        np.testing.assert_array_equal(a, e, err_msg=jax.tree_util.keystr(path))

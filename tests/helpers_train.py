"""Helpers shared by the training-entrypoint tests (test_train, test_cli_errors, test_faults).

Runs go through `python -m transformer_jax.main`, as commands that the pytest worker's fork server
starts (tests/fork_server.py; each bounded by a timeout, so a hang fails instead of stalling CI), or
in-process through `train.train_and_evaluate`.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pytest

import fork_server

REPO = Path(__file__).resolve().parents[1]
SYNTHETIC, LM = "configs/synthetic.py", "configs/lm.py"
TIMEOUT_S = 120  # per subprocess; a tiny run takes ~10 s with a warm compilation cache
ABSL_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")

# The fault tests' run: the tiny synthetic model for 24 steps, checkpointed every 4, evaluated
# after every step (eval only writes summaries; it slows the run enough that signals land mid-run).
FAULT_OVERRIDES = {"train.num_steps": 24, "train.checkpoint_every": 4, "train.keep_checkpoints": 2,
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


def main_command(args: Iterable[str]) -> list[str]:
    """--verbosity=0: the log lines (steps, resumes) on stderr too, for the tests to read."""
    return [sys.executable, "-m", "transformer_jax.main", "--verbosity=0", *map(str, args)]


def run_main(args: Iterable[str], env: dict[str, str] | None = None,
             timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs the training entrypoint to completion (stdout/stderr captured as text), as
    `python -m transformer_jax.main` would in this process's environment (with `env` on top),
    in a fork of this pytest worker's fork server (tests/fork_server.py): main's imports are done
    once per worker instead of ~2 CPU-s per command."""
    return fork_server.run_command(main_command(args), timeout, env)


def start_main(args: Iterable[str], log_path: Path) -> fork_server.Forked:
    """Starts a run in the background, from this worker's fork server (a Popen-like handle to
    signal and wait for); its stdout and stderr (the absl log) go to `log_path`."""
    return fork_server.start_command(main_command(args), log_path)


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
    from transformer_jax.studies import study

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

    from transformer_jax.train import steps
    from transformer_jax import train
    from transformer_jax.train.checkpointing import Checkpointer

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


# A two-variant study of the tiny synthetic model for the sweep fault tests (test_faults,
# test_sweep_interrupt, test_slurm): 24 steps, a checkpoint every 6; variant b's `b_changes`
# (overrides) can make it longer, so that it is still training when a has finished; `steps` sets
# both variants'. Variant b differs only where the compiled program does not (it evaluates less
# often): a run of b after one of a compiles nothing (the compilation cache has it).
# The tests' longer runs all train LONG_SWEEP_STEPS steps: one more program to compile, not one
# per test.
LONG_SWEEP_STEPS = 72
SWEEP_EXPERIMENT = '''
from pathlib import Path
from transformer_jax.studies.study import Comparison, Expectation, Study, load_config

def get_study(size):
    base = load_config(Path({repo!r}) / "configs/synthetic.py", "tiny,task=sort")
    base.unlock()
    base.data.data_dir = {data_dir!r}
    base.train.update(num_steps={steps!r}, log_every=3, eval_every=2, checkpoint_every=6)
    return Study(name="interrupted", claim="c", published="p", base=base,
                 variants={{"a": {{}}, "b": {{"train.eval_every": 3, **{b_changes!r}}}}},
                 seeds=(0, 1), metrics=("eval/loss",),
                 expectations=(Expectation("t", "eval/loss", "a", Comparison.AT_MOST, 1e9),))
'''


def sweep_command(tmp_path: Path, data_dir: str, jobs: int,
                  b_changes: dict[str, Any] | None = None, steps: int = 24
                  ) -> tuple[list[str], Path]:
    """(the sweep command of SWEEP_EXPERIMENT written into tmp_path, the study's directory)."""
    experiment = Path(tmp_path) / "interrupted.py"
    experiment.write_text(SWEEP_EXPERIMENT.format(repo=str(REPO), data_dir=data_dir,
                                                  b_changes=b_changes or {}, steps=steps))
    root = Path(tmp_path) / "study"
    return [sys.executable, "-m", "transformer_jax.sweep", f"--experiment={experiment}",
            f"--workdir={root}", f"--jobs={jobs}", "--verbosity=0"], root  # (its INFO lines too)


def sweep_workers(process) -> list:
    """A sweep's worker processes: its descendants, except multiprocessing's resource tracker."""
    import psutil

    return [p for p in psutil.Process(process.pid).children(recursive=True)
            if "resource_tracker" not in " ".join(p.cmdline())]


def assert_no_worker_outlives(workers, count: int | None = None) -> None:
    """The sweep's `workers` (sweep_workers, taken while it ran; `count` of them if given) are
    all gone within 30 s of its end."""
    import psutil

    assert count is None or len(workers) == count, workers
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"workers outlived the sweep: {alive}"


def sweep_logs(printed: str, root: Path) -> str:
    """What a sweep printed, and what its tasks logged into files of their own (if they do:
    <study>/<variant>/*.log)."""
    return "\n".join([printed] + [f.read_text() for f in sorted(Path(root).glob("*/*.log"))])


# --- Commands run in the background (tests/conftest.py: pytest_collection_modifyitems) ---------
#
# A test that only starts a command and then judges its output leaves one of the two cores idle
# while the command runs, and the in-process tests leave the other one mostly idle (one Python
# thread). A module may list such commands as `BACKGROUND = {key: (users, build)}`: `users` the
# names of the tests or fixtures that ask for it, `build(paths) -> (command, timeout_s)` or
# `(command, timeout_s, env_overlay)`, where `paths` has
# `.data_dir` (a data_dir only background commands use, one at a time), `.tj_data_dir` (the
# session's, for a dataset that no other test prepares), `.tmp` (a session directory) and
# `.shakespeare`. The suite then runs those modules last, and their commands from
# its start, one at a time in a daemon thread; the test asks for `BACKGROUND_RUNS.result(key)` and
# gets the same CompletedProcess the command would have given it, run in the foreground when the
# session did not plan it (or on a retry).


class _Job:
    def __init__(self, command, timeout, env=None):
        self.command, self.timeout, self.env = [str(c) for c in command], timeout, env
        self.done = threading.Event()
        self.started = False
        self.proc: subprocess.CompletedProcess | None = None
        self.stderr_on_timeout: str | None = None
        self.popen: subprocess.Popen | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.lock = threading.Lock()

    def run(self) -> None:
        self.started = True
        try:
            with self.lock:
                if self.cancelled:
                    raise RuntimeError("the session ended before this command ran")
            if fork_server.serves(self.command):  # a timeout fails the test that asks for it
                self.proc = fork_server.run_command(self.command, self.timeout, self.env)
                return
            with self.lock:
                self.popen = subprocess.Popen(self.command, cwd=REPO,
                                              env={**os.environ, **(self.env or {})},
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
            try:
                out, err = self.popen.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                _, err = self.popen.communicate()
                self.stderr_on_timeout = err or ""
            else:
                self.proc = subprocess.CompletedProcess(self.command, self.popen.returncode, out, err)
        except BaseException as e:  # e.g. no such executable: the test reports it
            self.error = e
        finally:
            self.done.set()


class BackgroundRuns:
    def __init__(self):
        self._jobs: dict[str, _Job] = {}
        self._builders: dict[str, Any] = {}
        self._order: list[str] = []
        self._paths = None
        self._lock = threading.Lock()
        self._stopped = False

    def plan(self, builders: dict[str, Any]) -> None:
        """Keys (with their command builders) in the order they will be asked for."""
        for key, build in builders.items():
            if key not in self._builders:
                self._builders[key] = build
                self._order.append(key)

    def register(self, builders: dict[str, Any]) -> None:
        """Keys a test may ask for, run only when asked (none in the background)."""
        for key, build in builders.items():
            self._builders.setdefault(key, build)

    @property
    def paths(self):
        return self._paths

    def start(self, paths) -> None:
        """Runs every planned command, one at a time, from now on (a daemon thread)."""
        self._paths = paths
        if self._order:
            threading.Thread(target=self._work, name="background-runs", daemon=True).start()

    def _job(self, key: str) -> _Job:
        with self._lock:
            if key not in self._jobs:
                try:
                    self._jobs[key] = _Job(*self._builders[key](self._paths))
                except Exception as e:  # a broken builder: the test that asks for it reports it
                    self._jobs[key] = job = _Job([], 0)
                    job.started, job.error = True, e
                    job.done.set()
                self._jobs[key].cancelled = self._stopped
            return self._jobs[key]

    def _work(self) -> None:
        for key in self._order:
            job = self._job(key)
            with self._lock:
                if job.started:
                    continue
                job.started = True
            job.run()

    def stop(self) -> None:
        """Kills a command still running at the end of the session; starts no other."""
        with self._lock:
            self._stopped = True
            jobs = list(self._jobs.values())
        for job in jobs:
            with job.lock:
                job.cancelled = True
                if job.popen is not None and job.popen.poll() is None:
                    job.popen.kill()

    def result(self, key: str) -> subprocess.CompletedProcess:
        """The command's outcome (waiting for it); fails the test as a timeout would."""
        job = self._job(key)
        with self._lock:
            run_here = not job.started
            job.started = True
        if run_here:
            job.run()
        job.done.wait()
        if job.error is not None:
            raise job.error
        if job.proc is None:
            pytest.fail(f"timed out after {job.timeout}s: {' '.join(job.command)}\n"
                        f"{(job.stderr_on_timeout or '')[-3000:]}")
        return job.proc


BACKGROUND_RUNS = BackgroundRuns()


class MainServer:
    """A fork server of its own (tests/fork_server.py) for main's command lines: the CLI tests run
    many at once from several threads, one command per server at a time."""

    def __init__(self, scratch: Path, timeout: float = TIMEOUT_S):
        self.server = fork_server.ForkServer(scratch, timeout)

    def run(self, args: Iterable[str], env: dict[str, str] | None = None,
            timeout: float = TIMEOUT_S, whole_env: bool = False) -> subprocess.CompletedProcess:
        """What a fresh `python -m transformer_jax.main *args` would return, with `env` on top of
        the server's environment, or as the whole environment."""
        return self.server.run("transformer_jax.main", args, env, timeout, whole_env)

    def close(self) -> None:
        self.server.close()

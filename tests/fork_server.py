"""`python -m transformer_jax.main` and `python -m transformer_jax.sweep` without paying their
imports per command.

A command that trains a tiny model for seconds spends ~1.6 CPU-s importing JAX, Flax, Orbax and
TFDS first. A ForkServer process does what both entry points import once (after the same
huge-page restart they do first), then runs each command in a fork of itself: the module as
`__main__` (runpy, as -m does) with the command's arguments, environment and working directory,
in a process group of its own (as a shell starts a foreground job), stdin from /dev/null, stdout
and stderr into files, and its exit status as the interpreter would set it (SystemExit's code; 1
after an uncaught exception, whose traceback sys.excepthook prints). What the server's imports
printed on stderr is put in front of a command's captured stderr, as a fresh process would have
printed it. Nothing else is shared: each command's JAX backend, flags, threads and files are its
own process's, and its sweep workers are spawned by it as they would be from a fresh one.

`start` returns a Popen-like handle on the running command (pid, poll, wait, send_signal, kill),
so tests can signal it and watch its children; its signals go through a pidfd, which cannot reach
another process that reuses the pid once the command has exited. `run` waits for it and returns
what subprocess.run(capture_output=True, text=True) would. A test that needs a fresh interpreter
(TJ_HUGEPAGES, a different Python, the import itself under test) starts a real one.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120
MODULES = ("transformer_jax.main", "transformer_jax.sweep")

_SERVER = r'''
import json, os, runpy, signal, sys
from transformer_jax.runtime import hugepages
hugepages.reexec_if_useful()  # as the entry points do first; the forks inherit its environment
import absl.app, absl.flags, absl.logging, ml_collections.config_flags  # noqa: E401 their imports
from transformer_jax.train import cli, loop, parallel  # noqa: F401
# what the sweep imports, but not studies.sweep itself: it defines --workdir, as main.py does
from transformer_jax.studies import plateau, report, study
from transformer_jax.studies.design import catalog  # noqa: F401
from transformer_jax.studies.render import board, pages  # noqa: F401
from transformer_jax.studies.run import jobs, plan, schedule, terminal  # noqa: F401
scratch = sys.argv[1]


def reap(*_):  # every exited command's status, into <scratch>/<pid>.status
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = os.path.join(scratch, f"{pid}.status")
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(os.waitstatus_to_exitcode(status)))
        os.replace(path + ".tmp", path)


def command(request):  # in the fork; never returns
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the command reaps its own children
        os.setpgid(0, 0)
        if request["whole_env"]:
            os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT, 0o644)  # made empty by start
        err = out if request["err"] is None else os.open(request["err"], os.O_WRONLY | os.O_CREAT,
                                                         0o644)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        module = request["module"]
        sys.argv = [module] + request["args"]  # run_module makes argv[0] the module's file
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
        except BaseException:
            sys.excepthook(*sys.exc_info())
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


signal.signal(signal.SIGCHLD, reap)
sys.stderr.flush()
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        command(json.loads(line))
    print(json.dumps(pid), flush=True)
'''


class Forked:
    """A command running in a fork of a ForkServer, with the parts of subprocess.Popen's
    interface the tests use."""

    def __init__(self, args: list[str], pid: int, status_path: Path):
        self.args, self.pid, self.returncode = args, pid, None
        self._status_path = status_path
        try:
            self._pidfd: Optional[int] = os.pidfd_open(pid)
        except ProcessLookupError:  # already exited and reaped: its status is on its way
            self._pidfd = None

    def poll(self) -> Optional[int]:
        if self.returncode is None and self._status_path.exists():
            self.returncode = json.loads(self._status_path.read_text())
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None and self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:  # exited since
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """One server process (above); `start` and `run` may be called from any thread."""

    def __init__(self, scratch: Path, timeout: float = TIMEOUT_S):
        self.scratch, self.count = Path(scratch), 0
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._started: list[Forked] = []
        with open(self.scratch / "server.err", "w") as err:
            self.process = subprocess.Popen([sys.executable, "-c", _SERVER, str(self.scratch)],
                                            cwd=REPO, text=True, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, process_group=0)
        self._expect("ready", timeout)
        self.import_stderr = (self.scratch / "server.err").read_text()

    def _expect(self, what: str, timeout: float) -> str:
        reply: list[str] = []
        reader = threading.Thread(target=lambda: reply.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not reply or not reply[0]:
            self.close()
            err = (self.scratch / "server.err").read_text()[-3000:]
            pytest.fail(f"the fork server gave no {what} within {timeout}s\n{err}")
        return reply[0]

    def start(self, module: str, args: Iterable[str], out: Path, err: Optional[Path] = None,
              env: Optional[Mapping[str, str]] = None, whole_env: bool = False,
              cwd: Path = REPO) -> Forked:
        """`python -m module *args` from a fork: stdout into `out`, stderr into `err` (None: into
        `out` too); `env` on top of the server's environment, or as the whole environment."""
        assert module in MODULES, module
        args = [str(a) for a in args]
        for path in (out, err):  # there, empty, before this returns (as Popen's caller opens them)
            if path is not None:
                open(path, "w").close()
        request = {"module": module, "args": args, "env": dict(env or {}), "whole_env": whole_env,
                   "out": str(out), "err": None if err is None else str(err), "cwd": str(cwd)}
        with self._lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = json.loads(self._expect(f"pid of {module} {args}", 30))
            forked = Forked([sys.executable, "-m", module, *args], pid,
                            self.scratch / f"{pid}.status")
            self._started.append(forked)
        return forked

    def run(self, module: str, args: Iterable[str], env: Optional[Mapping[str, str]] = None,
            timeout: float = TIMEOUT_S, whole_env: bool = False, cwd: Path = REPO
            ) -> subprocess.CompletedProcess:
        """What subprocess.run([python, -m, module, *args], capture_output=True, text=True)
        would return; a command still running after `timeout` is killed and fails the test."""
        with self._lock:
            self.count += 1
            out, err = self.scratch / f"{self.count}.out", self.scratch / f"{self.count}.err"
        forked = self.start(module, args, out, err, env, whole_env, cwd)
        try:
            code = forked.wait(timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            pytest.fail(f"{' '.join(forked.args)} did not end within {timeout}s\n"
                        f"{err.read_text()[-3000:]}")
        return subprocess.CompletedProcess(forked.args, code, out.read_text(),
                                           self.import_stderr + err.read_text())

    def close(self) -> None:
        """Ends the server and kills every command it started that still runs."""
        for forked in self._started:
            forked.kill()
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


_SHARED: list = []  # this process's ForkServer (started at its first use)
_SHARED_LOCK = threading.Lock()


def shared() -> ForkServer:
    """This pytest worker's ForkServer: started at the first call, restarted if it was closed."""
    with _SHARED_LOCK:
        if not _SHARED or _SHARED[0].process.poll() is not None:
            import atexit
            import tempfile

            _SHARED[:] = [ForkServer(Path(tempfile.mkdtemp(prefix="tj_fork_server_")))]
            atexit.register(_SHARED[0].close)
        return _SHARED[0]


def serves(command: list) -> bool:
    """Whether `command` is one a ForkServer runs: `[python, -m, main or sweep, ...]`."""
    command = [str(c) for c in command]
    return command[:2] == [sys.executable, "-m"] and len(command) > 2 and command[2] in MODULES


def _module_and_args(command: list) -> tuple[str, list[str]]:
    assert serves(command), command
    command = [str(c) for c in command]
    return command[2], command[3:]


def start_command(command: list, log_path: Path,
                  env: Optional[Mapping[str, str]] = None) -> Forked:
    """`[python, -m, module, *args]` started as subprocess.Popen(command, cwd=REPO, stdout=log,
    stderr=STDOUT) would start it (this process's environment, with `env` on top), from this
    worker's ForkServer."""
    module, args = _module_and_args(command)
    return shared().start(module, args, log_path, env={**os.environ, **(env or {})},
                          whole_env=True)


def run_command(command: list, timeout: float = TIMEOUT_S,
                env: Optional[Mapping[str, str]] = None) -> subprocess.CompletedProcess:
    """What subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    would return, from this worker's ForkServer (a timeout fails the test)."""
    module, args = _module_and_args(command)
    return shared().run(module, args, {**os.environ, **(env or {})}, timeout, whole_env=True)

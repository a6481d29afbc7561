"""A sweep's work as independent tasks, run here or in N worker processes (`--jobs=N`).

A task is one variant's seeds (one compiled program, `train.train_replicas`) or one study's
step-0 probes. Tasks never share a directory, so N of them can run at once: a small model on a
CPU spends much of its time single-threaded (compiling, many small ops), and two workers on two
cores finish scripts/run.sh sooner than one process (measured in the README).

Workers are spawned (JAX is multithreaded: no fork), die with their parent (PR_SET_PDEATHSIG:
a kill -9 of the sweep leaves no orphan writing into a run), draw no progress bars, and prefix
their log lines with the task. Every task logs into its own file (a variant's train.log, a
study's report.log); the terminal gets what the parent's terminal level lets through. SIGTERM or Ctrl-C to the sweep becomes SIGTERM to each worker,
which saves a checkpoint and stops, as a single run does; rerunning the command resumes.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import dataclasses
import logging as std_logging
import multiprocessing
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from absl import flags, logging

from transformer_jax.studies.plateau import needs_extending
from transformer_jax.studies.records.record import REPORT_LOG

PR_SET_PDEATHSIG = 1


@dataclasses.dataclass(frozen=True)
class Task:
    study: str  # the study's name
    root: str  # the study's directory
    experiment: Optional[str]  # its experiment file (workers load the study from it)
    size: str
    variant: Optional[str] = None  # None: the study's step-0 probes
    seeds: tuple[int, ...] = ()
    cost: float = 0.0  # relative run time, to start the longest tasks first
    steps: Optional[int] = None  # a plateau budget's stage (runs started short are extended)

    @property
    def label(self) -> str:
        return f"{self.study}/{self.variant or 'probes'}"


def execute(task: Task, study, progress_bar: bool = True) -> list[dict]:
    """Runs one task; returns the statuses of its runs ([] for probes)."""
    from transformer_jax.train import cli
    from transformer_jax.train.loop import train_replicas

    root = Path(task.root)
    if task.variant is None:
        with cli.log_to_file(root / REPORT_LOG):
            study.probe_markdown(root)
        return []
    stopped = diverged_runs(task)
    seeds = [s for s in task.seeds if s not in stopped]
    if not seeds:
        return [stopped[s] for s in task.seeds]
    workdirs = [root / task.variant / f"seed_{s}" for s in seeds]
    extend = task.steps is not None and any(needs_extending(w, task.steps) for w in workdirs)
    with cli.log_to_file(root / task.variant / cli.LOG_FILE):
        logging.info("[%s] %s, seeds %s: %s%s", task.study, task.variant, seeds,
                     root / task.variant, f", extended to {task.steps} steps" if extend else "")
        trained = dict(zip(seeds, train_replicas(
            [study.config(task.variant, s, task.steps) for s in seeds],
            [str(w) for w in workdirs], progress_bar=progress_bar, extend=extend)))
    return [trained.get(s) or stopped[s] for s in task.seeds]


def diverged_runs(task: Task) -> dict[int, dict]:
    """seed -> status of the task's runs that diverged at an earlier stage of a plateau budget
    (none without one): they stay where they stopped, the others train on."""
    if task.steps is None:
        return {}
    from transformer_jax.studies import rundir
    statuses = {s: rundir.RunRecord.of(task.root, task.variant, s).status() for s in task.seeds}
    return {s: status for s, status in statuses.items()
            if (status or {}).get("state") == rundir.DIVERGED}


def run_tasks(tasks: Sequence[Task], studies: dict, jobs: int,
              done: Callable[[Task, list[dict]], bool],
              tick: Optional[Callable[[], None]] = None,
              added: Optional[Callable[[], Sequence[Task]]] = None) -> None:
    """Runs `tasks`; calls done(task, statuses) as each ends, then `added()` for the tasks
    that ending made (a plateau budget's next stage, a grid's next candidates), which join the
    queue at once: no worker waits for a stage to end. When `done` returns False (a run was
    preempted) no further task starts. jobs=1: in order, in this process. `tick`: called about
    every second while workers train (a progress bar's clock). `studies`: name -> study, read
    when a task starts (a grown grid's study replaces its entry)."""
    more = added or (lambda: ())
    if jobs <= 1:
        pending = list(tasks)
        while pending:
            task = pending.pop(0)
            if not done(task, execute(task, studies[task.study])):
                return
            pending += more()
        return
    queue = _Queue(tasks, studies)
    from transformer_jax.train import cli
    with _Pool(jobs, cli.terminal_level()) as pool:
        running: dict[cf.Future, Task] = {}
        while queue or running:
            while queue and len(running) < jobs and not pool.stopping:
                task = queue.pop()
                running[pool.submit(_execute_in_worker, task)] = task
            if not running:
                return
            ended, _ = cf.wait(running, timeout=1.0, return_when=cf.FIRST_COMPLETED)
            if tick is not None:
                tick()
            for future in ended:
                task = running.pop(future)
                if future.cancelled():
                    continue
                try:
                    statuses = future.result()
                except cf.process.BrokenProcessPool:
                    if pool.stopping:
                        continue  # a worker ended by our SIGTERM outside its training loop
                    raise
                if not done(task, statuses) or pool.stopping:
                    pool.stop(signal_workers=False)
                    queue.clear()
                else:
                    queue.extend(more())


class _Queue:
    """The tasks not started yet, the next one first: probes (seconds; a study's verdict waits
    for them), then the tasks of studies with a later stage (a plateau budget, a grid that may
    grow), so that stage is decided while other studies still train, then the longest."""

    def __init__(self, tasks: Sequence[Task], studies: dict):
        self.studies, self.tasks = studies, []
        self.extend(tasks)

    def _order(self, task: Task) -> tuple:
        study = self.studies.get(task.study)
        staged = any(getattr(study, stage, None) is not None
                     for stage in ("plateau", "extend_grid"))
        return task.variant is not None, not staged, -task.cost

    def extend(self, tasks: Sequence[Task]) -> None:
        self.tasks = sorted([*self.tasks, *tasks], key=self._order)

    def pop(self) -> Task:
        return self.tasks.pop(0)

    def clear(self) -> None:
        self.tasks = []

    def __bool__(self) -> bool:
        return bool(self.tasks)


class _Pool:
    """A ProcessPoolExecutor whose workers stop cleanly with the sweep."""

    def __init__(self, jobs: int, terminal_level: int):
        self.stopping = False
        self.executor = cf.ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(terminal_level,))
        self.previous: dict[int, object] = {}

    def __enter__(self) -> "_Pool":
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def submit(self, fn, *args) -> cf.Future:
        return self.executor.submit(fn, *args)

    def _on_signal(self, signum, frame) -> None:
        del frame
        if self.stopping and signum == signal.SIGINT:  # a second Ctrl-C: stop at once
            for pid in self._worker_pids():
                _kill(pid, signal.SIGKILL)
            raise KeyboardInterrupt
        logging.warning("%s: asking every worker to save a checkpoint and stop; rerun the same "
                        "command to resume", signal.Signals(signum).name)
        self.stop(signal_workers=True)

    def stop(self, signal_workers: bool) -> None:
        self.stopping = True
        if signal_workers:
            for pid in self._worker_pids():
                _kill(pid, signal.SIGTERM)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _worker_pids(self) -> list[int]:
        return list(getattr(self.executor, "_processes", None) or {})

    def __exit__(self, kind, error, traceback) -> None:
        if error is not None and not self.stopping:
            self.stop(signal_workers=True)  # an error in one task: the others save and stop
        self.executor.shutdown(wait=True, cancel_futures=True)
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _init_worker(terminal_level: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which relays it
    from transformer_jax.train import parallel
    parallel.remember_sigterm()  # an idle worker lives on until the pool's shutdown ends it
    # On a GPU, JAX would give each process 75 % of its memory up front: N workers could not.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    flags.FLAGS.mark_as_parsed()  # workers read no flags; absl logs without complaint
    logging.use_absl_handler()  # the parent's log format (time, file:line)
    from transformer_jax.train import cli
    cli.set_terminal_level(terminal_level)  # the parent's: --verbosity reaches the workers
    cli.set_up_compilation()
    cli.quiet_progress_bars()


def _execute_in_worker(task: Task) -> list[dict]:
    from transformer_jax.train import parallel
    from transformer_jax.studies import study as study_lib
    from transformer_jax.studies import rundir
    if parallel.sigterm_before_training():  # the sweep is stopping: start nothing new
        return [rundir.RunRecord.of(task.root, task.variant or "", s).status()
                or {"state": "preempted", "step": 0} for s in task.seeds]
    from transformer_jax.studies import grid
    study = study_lib.load_study(task.experiment, task.size)
    with _log_prefix(task.label):  # a candidate the grid extension added is no declared variant
        return execute(task, grid.including(study, [task.variant]), progress_bar=False)


@contextlib.contextmanager
def _log_prefix(label: str) -> Iterator[None]:
    """Every absl log line of this process starts with [label] while the block runs."""
    class Prefix(std_logging.Filter):
        def filter(self, record: std_logging.LogRecord) -> bool:
            record.msg = f"[{label}] {record.msg}"
            return True

    logger, prefix = logging.get_absl_logger(), Prefix()
    logger.addFilter(prefix)
    try:
        yield
    finally:
        logger.removeFilter(prefix)


def cost(study, variant: str, seeds: tuple[int, ...], steps: Optional[int] = None) -> float:
    """Relative run time of a variant: steps × layers × seeds (+ a compile-sized constant)."""
    config = study.config(variant, seeds[0], steps)
    return (config.train.num_steps * max(config.model.num_layers, 1) + 1000) * len(seeds)

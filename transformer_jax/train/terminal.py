"""What a person running one training reads: steps/s and time left on the logged lines, a bar
while stderr is a terminal, one line when a run resumes, and the outcome in one line with where
to look next (the log file, TensorBoard). The sweep's terminal (`studies.terminal`) shares the
durations and the TensorBoard command.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional, TextIO

import numpy as np
from absl import logging


def duration(seconds: float) -> str:
    """'45s', '3m07s', '1h02m'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def tensorboard_executable() -> str:
    """The tensorboard beside this Python (the venv's), as a path that works in a fresh shell:
    relative to the current directory when below it."""
    found = Path(sys.executable).parent / "tensorboard"
    if not found.exists():
        which = shutil.which("tensorboard")
        found = Path(which) if which else found
    try:
        return str(found.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(found.absolute())


def resumed(step: int, total: int) -> str:
    """The line a resumed run shows on the terminal as it picks up its checkpoint."""
    return f"resuming from step {step} of {total}"


class Start:
    """A trainer's `on_start`: records the step training started from (None: it did not start,
    the run had already ended) and, when that is a resume, says so in one line on stderr (while
    a run trains, stdout goes to its log file)."""

    def __init__(self, out: Optional[TextIO] = None):
        self.out = out
        self.step: Optional[int] = None

    def __call__(self, step: int, num_steps: int) -> None:
        self.step = step
        if step:
            print(resumed(step, num_steps), file=self.out or sys.stderr, flush=True)


def outcome(status: dict[str, Any], already_ended: bool = False) -> str:
    """The run's outcome in one line: its state, step, time and final eval metrics; a run that
    had ended before this command (`already_ended`) says that it trained nothing."""
    state, step = status.get("state", "?"), status.get("step", 0)
    if already_ended:
        hint = " (rerun with --extend_to=N to train on)" if state == "finished" else ""
        return f"already {state} at step {step}; nothing to do{hint}"
    seconds = status.get("seconds")
    metrics = ", ".join(f"{k} {v:.4g}" for k, v in (status.get("eval") or {}).items())
    return (f"{state} at step {step}" + (f" in {duration(seconds)}" if seconds else "")
            + (f": {metrics}" if metrics and state == "finished" else ""))


class Progress:
    """Steps/s and ETA for the log lines; a tqdm bar only when stderr is a terminal."""

    def __init__(self, start: int, total: int, bar: bool = True):
        self.start, self.total = start, total
        self.t0 = self.t_last = time.perf_counter()
        self.step_last = start
        self.rate = 0.0
        self.bar: Optional[Any] = None
        if bar and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=start, unit="step", leave=False)

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def log(self, step: int, losses: list[float], accuracy: float) -> None:
        now = time.perf_counter()
        self.rate = (step - self.step_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.step_last = now, step
        eta = (self.total - step) / max(self.rate, 1e-9)
        each = f" (seeds: {', '.join(f'{l:.4f}' for l in losses)})" if len(losses) > 1 else ""
        logging.info("step %d/%d  loss %.4f%s  acc %.3f  |  %.1f steps/s  ETA %s", step,
                     self.total, float(np.mean(losses)), each, accuracy, self.rate,
                     duration(eta))

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

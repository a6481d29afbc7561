"""A sweep's training without JAX, for the tests of its stages (plateau budgets, grown grids):
jobs.execute 'trains' each run to its task's steps (a status and a saved train.num_steps),
report.collect reads back the curves `run(study, variant, step)` gives, and publish records the
study's name instead of writing its report."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from transformer_jax.studies import grid, report
from transformer_jax.studies.run import jobs, schedule
from transformer_jax.train import workdir as workdir_lib

RunAt = Callable[[Any, str, int], dict]  # (study, variant, step) -> {"status", "curves"}


class FakeTrainer:
    def __init__(self, monkeypatch, run: RunAt):
        self.run = run
        self.trained: list[tuple[str, int, int]] = []  # (variant, from step, to step)
        self.published: list[str] = []
        monkeypatch.setattr(jobs, "execute", self.execute)
        monkeypatch.setattr(report, "collect", self.collect)
        monkeypatch.setattr(schedule, "publish", lambda study, *a, **k:
                            self.published.append(study.name))

    def execute(self, task, study, progress_bar=True):
        statuses = []
        for seed in task.seeds:
            run = Path(task.root) / task.variant / f"seed_{seed}"
            run.mkdir(parents=True, exist_ok=True)
            before = (workdir_lib.read_status(run) or {}).get("step", 0)
            steps = task.steps or study.base.train.num_steps
            (run / workdir_lib.CONFIG_FILE).write_text(f'{{"train": {{"num_steps": {steps}}}}}')
            self.trained.append((task.variant, before, steps))
            statuses.append(workdir_lib.write_status(run, "finished", steps))
        return statuses

    def collect(self, study, root):
        return {(v, s): self.run(study, v, workdir_lib.read_status(root / v / f"seed_{s}")["step"])
                for v, s in study.runs()}

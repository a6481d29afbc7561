"""A run's directory as studies/ reads and writes it: the one seam between the studies and the
trainer's format (train/workdir.py: a run's status, its saved config, the versions it ran with,
atomic JSON writes). The rest of studies/ reads run directories through here, so a change of that
format is met in one place (.importlinter's run-seam contract names the modules that still
import train.workdir themselves, and why).

    run = RunRecord.of(root, "sinusoidal", 0)    # root/sinusoidal/seed_0
    run.status(), run.state(), run.ended(num_steps), run.config_file
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

from transformer_jax.train import workdir

# The trainer's names, for the studies: what a run's status says, its saved config's file name,
# its errors, and the writes and reads of its files.
CONFIG_FILE = workdir.CONFIG_FILE
FINISHED, DIVERGED, PREEMPTED = workdir.FINISHED, workdir.DIVERGED, workdir.PREEMPTED
WorkdirError = workdir.WorkdirError
flatten = workdir.flatten  # a nested config as {"model.d_model": 64, ...}
write_json_atomic = workdir.write_json_atomic
prepare = workdir.prepare  # a study's or a run's directory, made or checked against its config
stack_versions = workdir.stack_versions  # the versions of the stack this process runs
has_ended = workdir.has_ended  # whether a status is an end (finished or diverged)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One run's directory: <study root>/<variant>/seed_<seed>."""

    path: Path

    @classmethod
    def of(cls, root: str | Path, variant: str, seed: int) -> "RunRecord":
        """The run of `variant` and `seed` under a study's `root`."""
        return cls(Path(root) / variant / f"seed_{seed}")

    def status(self) -> Optional[dict[str, Any]]:
        """The run's status file (state, step, the last evaluation), None before it started."""
        return workdir.read_status(self.path)

    def state(self) -> Optional[str]:
        """finished, diverged, preempted, running, ... (None before it started)."""
        return (self.status() or {}).get("state")

    def ended(self, num_steps: Optional[int] = None) -> bool:
        """Whether the run has ended (at `num_steps`, where given: a longer budget goes on)."""
        return has_ended(self.status(), num_steps)

    @property
    def config_file(self) -> Path:
        """The config the run was trained with, as the trainer saved it (JSON)."""
        return self.path / CONFIG_FILE

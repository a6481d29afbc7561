"""A run's directory: one config per workdir, a status file, nothing ever mixed or overwritten.

    workdir/config.json       the config that made the run (written once, checked on restart)
    workdir/status.json       running | finished | diverged | preempted, step, metrics
    workdir/versions.json     the package, Python and JAX stack that ran it (a list: one per resume
                              under another stack, which warns but is not refused)
    workdir/checkpoints/      Orbax checkpoints
    workdir/events.out.*      TensorBoard event files
"""
from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from absl import logging

from transformer_jax._version import __version__

CONFIG_FILE, STATUS_FILE, VERSIONS_FILE = "config.json", "status.json", "versions.json"
# The distributions that compute a curve or store its checkpoints, recorded beside each run.
STACK = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint")
# Fields that change bookkeeping but not a single number of the curves: a restart may change them.
NOT_IDENTITY = ("train.log_every", "train.checkpoint_every", "train.keep_checkpoints",
                "data.data_dir", "train.num_devices", "train.steps_per_call")
# (devices and steps per call change how a step runs, not its result beyond float rounding)
# Fields added after runs existed, with the value that computes what runs without them did: a
# config.json that lacks one of them resumes under exactly that value, and no other.
ADDED_FIELDS = {"model.norm_type": "layernorm", "model.qk_norm": False}


class WorkdirError(ValueError):
    """A workdir that cannot hold this run; one line naming the directory and what to do."""


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'model': {'d_model': 8}} -> {'model.d_model': 8}."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    a, b = flatten(old), flatten(new)
    a = {**{k: v for k, v in ADDED_FIELDS.items() if k in b}, **a}  # an older run's implicit values
    keys = sorted((set(a) | set(b)) - set(NOT_IDENTITY))
    return [f"{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}" for k in keys
            if a.get(k) != b.get(k)]


def write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    """Write to a temp file in the same directory, then rename: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True, default=float)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prepare(workdir: str, config: Mapping[str, Any]) -> Path:
    """Creates or re-opens `workdir` for this config; raises WorkdirError if it cannot.

    A workdir that holds a run with another config is refused (curves must never mix); one that
    holds files but no run of ours is refused too (e.g. the parent `runs/` by mistake).
    """
    path = Path(workdir)
    if path.exists() and not path.is_dir():
        raise WorkdirError(f"--workdir={workdir!r} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test.")
        probe.close()
    except OSError as e:
        raise WorkdirError(f"--workdir={workdir!r} is not writable ({e.strerror or e})") from None
    saved = path / CONFIG_FILE
    resumed = saved.exists()
    if resumed:
        differences = config_differences(json.loads(saved.read_text()), config)
        if differences:
            shown = "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")
            raise WorkdirError(
                f"--workdir={workdir!r} holds a run with a different config ({shown}); rerun "
                f"with its config (saved in {saved}) to resume it, or choose a new --workdir")
    else:
        if any(p for p in path.iterdir() if not p.name.startswith(".write-test.")):
            raise WorkdirError(f"--workdir={workdir!r} is not empty and holds no run "
                               f"(no {CONFIG_FILE}); choose a new or empty directory")
        write_json_atomic(saved, config)
        resumed = False
    record_versions(path, stack_versions(), resumed=resumed)
    return path


def stack_versions() -> dict[str, str | None]:
    """{'transformer_jax': '0.1.0', 'python': '3.11.7', 'jax': '0.10.2', ...} as installed now."""
    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None
    return {"transformer_jax": __version__, "python": platform.python_version(),
            **{name: installed(name) for name in STACK}}


def record_versions(path: Path, versions: Mapping[str, Any], *, resumed: bool) -> None:
    """Appends `versions` to the run's versions.json unless the last entry has the same ones.

    Not part of the config comparison: a run resumed under another stack goes on, with a warning,
    and versions.json then tells from when (`since`) its curve came from which stack."""
    file = path / VERSIONS_FILE
    stacks = json.loads(file.read_text())["stacks"] if file.exists() else []
    last = stacks[-1]["versions"] if stacks else None
    if last == dict(versions):
        return
    if last is not None:
        changed = ", ".join(f"{k} {last.get(k)} -> {v}" for k, v in versions.items()
                            if last.get(k) != v)
        logging.warning("%s: resuming under another stack than the run's last (%s); recorded in %s",
                        path, changed, file)
    stacks.append({"since": time.time(), "on": "resume" if resumed else "start",
                   "versions": dict(versions)})
    write_json_atomic(file, {"stacks": stacks})


def read_status(workdir: str | Path) -> dict[str, Any] | None:
    path = Path(workdir) / STATUS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_status(workdir: str | Path, state: str, step: int, **fields: Any) -> dict[str, Any]:
    status = {"state": state, "step": step, "time": time.time(), **fields}
    write_json_atomic(Path(workdir) / STATUS_FILE, status)
    return status

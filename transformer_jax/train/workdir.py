"""A run's directory: one config per workdir, a status file, nothing ever mixed or overwritten.

    workdir/config.json       the config that made the run (written once, checked on restart)
    workdir/status.json       running | finished | diverged | preempted, step, metrics
    workdir/config_history.json  each `--extend_to` (train.num_steps raised), with its step
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
from transformer_jax.config import ADDED_FIELDS

CONFIG_FILE, STATUS_FILE, VERSIONS_FILE = "config.json", "status.json", "versions.json"
HISTORY_FILE = "config_history.json"  # the run's allowed config changes: [{step, change, ...}]
EXTENDABLE = "train.num_steps"  # the one identity field `--extend_to` may change
# The distributions that compute a curve or store its checkpoints, recorded beside each run.
STACK = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint")
# Fields that change bookkeeping but not a single number of the curves: a restart may change them.
NOT_IDENTITY = ("train.log_every", "train.checkpoint_every", "train.keep_checkpoints",
                "data.data_dir", "train.num_devices", "train.steps_per_call")
# (devices and steps per call change how a step runs, not its result beyond float rounding)


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
    # an older run's config.json lacks the fields added since: it ran at their ADDED_FIELDS value
    a = {**{k: v for k, v in ADDED_FIELDS.items() if k in b}, **a}
    keys = sorted((set(a) | set(b)) - set(NOT_IDENTITY))
    return [f"{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}" for k in keys
            if a.get(k) != b.get(k)]


def write_json_atomic(path: Path, payload: Mapping[str, Any], *, exclusive: bool = False) -> bool:
    """Write to a temp file in the same directory, then rename: readers never see half a file.
    `exclusive`: only if `path` does not exist yet (a hard link, which fails if it does);
    returns whether the file was written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True, default=float)
        f.flush()
        os.fsync(f.fileno())
    if not exclusive:
        os.replace(tmp, path)
        return True
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def prepare(workdir: str, config: Mapping[str, Any], *, extend: bool = False) -> Path:
    """Creates or re-opens `workdir` for this config; raises WorkdirError if it cannot.

    A workdir that holds a run with another config is refused (curves must never mix); one that
    holds files but no run of ours is refused too (e.g. the parent `runs/` by mistake).
    `extend`: the run's train.num_steps may be raised to the config's (and nothing else changed):
    see `_extend`.
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
    if not saved.exists():
        if extend:
            raise WorkdirError(f"--extend_to continues an existing run, and --workdir={workdir!r} "
                               f"holds none (no {CONFIG_FILE}); drop --extend_to to start one")
        # (files that appeared since may be another process's that is starting this run at the
        # same moment, e.g. two sweep shards on one study: then compare with its config below)
        temporary = (".write-test.", f".{CONFIG_FILE}.")
        if any(not p.name.startswith(temporary) for p in path.iterdir()) and not saved.exists():
            raise WorkdirError(f"--workdir={workdir!r} is not empty and holds no run "
                               f"(no {CONFIG_FILE}); choose a new or empty directory")
        if write_json_atomic(saved, config, exclusive=True):
            record_versions(path, stack_versions(), resumed=False)
            return path
    differences = config_differences(json.loads(saved.read_text()), config)
    if extend and [d.split(":")[0] for d in differences] == [EXTENDABLE]:
        differences = _extend(path, json.loads(saved.read_text()), config)
    if differences:
        shown = "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")
        raise WorkdirError(
            f"--workdir={workdir!r} holds a run with a different config ({shown}); rerun "
            f"with its config (saved in {saved}) to resume it"
            f"{_extend_hint(json.loads(saved.read_text()), config, extend)}, or choose a new "
            f"--workdir")
    record_versions(path, stack_versions(), resumed=True)
    return path


def _extend_hint(old: Mapping[str, Any], new: Mapping[str, Any], extend: bool) -> str:
    """Where the refused change raises train.num_steps: the flag that trains the run on."""
    before, after = flatten(old).get(EXTENDABLE), flatten(new).get(EXTENDABLE)
    if extend or not (isinstance(before, int) and isinstance(after, int) and after > before):
        return ""
    return f" (--extend_to={after} in place of {EXTENDABLE}={after} trains it on to {after} steps)"


def _extend(path: Path, saved: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """Raises the run's train.num_steps to the config's: config.json takes the new value and
    config_history.json records the step the run resumes from (its newest checkpoint) and the
    change. The cosine schedule is a function of train.num_steps, so from that step on the decay
    is the one of the new total (the LR jumps up there); train.schedule "constant" is not, so
    the extended run is the one trained straight to the new total. Returns [] (nothing else to
    refuse)."""
    old, new = flatten(saved)[EXTENDABLE], flatten(config)[EXTENDABLE]
    status = read_status(path) or {}
    if status.get("state") == "diverged":
        raise WorkdirError(f"--extend_to={new}: the run in {path} diverged at step "
                           f"{status.get('step')}; start a new --workdir instead")
    if new <= old:
        raise WorkdirError(f"--extend_to={new} must exceed the run's {EXTENDABLE}={old}")
    checkpoints = path / "checkpoints"
    step = max((int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()), default=0) \
        if checkpoints.is_dir() else 0
    history_file = path / HISTORY_FILE
    history = config_history(path)
    constant = flatten(config).get("train.schedule") == "constant"
    history.append({"step": step, "time": time.time(), "change": {EXTENDABLE: [old, new]},
                    "schedule": "constant: the learning rate goes on as before" if constant else
                                f"recomputed for {new} steps: from step {step} on the learning "
                                f"rate follows the longer schedule"})
    write_json_atomic(history_file, {"changes": history})
    write_json_atomic(path / CONFIG_FILE, config)
    logging.warning("--extend_to=%d: %s %d -> %d, resuming %s from step %d (%s); recorded in %s",
                    new, EXTENDABLE, old, new, path, step,
                    "the learning rate is constant: it goes on as before" if constant else
                    "the learning-rate schedule is recomputed for the new total", history_file)
    return []


def config_history(workdir: str | Path) -> list[dict[str, Any]]:
    """The run's recorded config changes (config_history.json), oldest first; [] if none."""
    file = Path(workdir) / HISTORY_FILE
    return json.loads(file.read_text())["changes"] if file.exists() else []


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


FINISHED, DIVERGED, PREEMPTED = "finished", "diverged", "preempted"  # status.json's states


def has_ended(status: dict[str, Any] | None, num_steps: int | None = None) -> bool:
    """A run is over when it finished or diverged (a preempted or running one is not); given
    `num_steps`, a run finished short of it (then extended: `--extend_to`) is not over."""
    return bool(status) and (status["state"] == DIVERGED or status["state"] == FINISHED and (
        num_steps is None or status["step"] >= num_steps))


def read_status(workdir: str | Path) -> dict[str, Any] | None:
    path = Path(workdir) / STATUS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_status(workdir: str | Path, state: str, step: int, **fields: Any) -> dict[str, Any]:
    status = {"state": state, "step": step, "time": time.time(), **fields}
    write_json_atomic(Path(workdir) / STATUS_FILE, status)
    return status

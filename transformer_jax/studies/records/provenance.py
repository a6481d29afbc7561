"""Where a study's results came from: the machine, the software stack and the code that wrote
its report, in provenance.json beside them, so that a results page can say so and a verdict from
a 2-core laptop is not read as one from an H200.

It describes the sweep process that trained the study's last runs and wrote the report (a rerun
that trains nothing keeps the record it finds): with `--shard=i/n` or a resumed sweep, other runs
may have trained elsewhere (each run's own versions.json records its stack).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Optional

# Which CPU this is lives below every layer (runtime/machine.py); named here too, as before.
from transformer_jax.runtime.machine import (  # noqa: F401
    CPU_FLAGS, UNKNOWN, parse_cpuinfo, read_cpuinfo)
from transformer_jax.studies import rundir

FILE = "provenance.json"
SCHEMA = 1
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the checkout holding transformer_jax/


def describe(*, study: str, suite: str, size: str, seeds: tuple[int, ...], runs: int,
             shard: tuple[int, int], cpuinfo: str, cpus: Optional[int], system: str,
             stack: Mapping[str, Optional[str]], commit: str, dirty: Optional[bool],
             date: str) -> dict[str, Any]:
    """The provenance record, from what was read off the machine (pure: `collect` reads)."""
    return {"schema": SCHEMA, "study": study, "suite": suite, "date": date,
            "sweep": {"size": size, "seeds": list(seeds), "runs": runs,
                      "shard": f"{shard[0]}/{shard[1]}"},
            "machine": machine_record(cpuinfo, cpus, system),
            "stack": dict(stack),
            "code": {"commit": commit, "dirty": dirty}}


def collect(study, size: str, shard: tuple[int, int] = (0, 1),
            now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """This machine's and this checkout's provenance record for `study` (a Study) at `size`."""
    commit, dirty = git_commit(PACKAGE_ROOT)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return describe(study=study.name, suite=study.suite, size=size, seeds=tuple(study.seeds),
                    runs=len(study.runs()), shard=shard, cpuinfo=read_cpuinfo(),
                    cpus=os.cpu_count(), system=f"{platform.system()} {platform.machine()}",
                    stack=stack_versions(), commit=commit, dirty=dirty,
                    date=now.isoformat(timespec="seconds"))


def machine_record(cpuinfo: str, cpus: Optional[int], system: str) -> dict[str, Any]:
    """A provenance record's "machine", from what was read off it (pure)."""
    model, flags = parse_cpuinfo(cpuinfo)
    return {"cpu": model, "cpus": cpus, "cpu_flags": list(flags), "system": system}


def this_machine() -> dict[str, Any]:
    """This machine as a provenance record's "machine" (what `collect` records)."""
    return machine_record(read_cpuinfo(), os.cpu_count(),
                          f"{platform.system()} {platform.machine()}")


def machine_words(machine: Optional[Mapping[str, Any]]) -> str:
    """'AMD EPYC, 2 CPUs (avx2, avx512f)': the CPU a figure's values come from (XLA:CPU rounds
    by instruction set, docs/verdicts.md); 'machine not recorded' for None."""
    if not machine:
        return "machine not recorded"
    flags = f" ({', '.join(machine['cpu_flags'])})" if machine.get("cpu_flags") else ""
    return f"{machine['cpu']}, {machine['cpus']} CPUs{flags}"


# The widest vector instructions a CPU has, widest first: what a table cell names, since
# XLA:CPU's values and speed differ by it (the AVX2 and AVX-512 EPYCs share a model name).
WIDEST = (("amx_tile", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))


def machine_cell(machine: Optional[Mapping[str, Any]]) -> str:
    """'AMD EPYC, 2 CPUs, AVX-512': a machine in one table cell, named by its widest vector
    instructions ('machine not recorded' for None; no third part where no flag was read)."""
    if not machine:
        return "machine not recorded"
    flags = set(machine.get("cpu_flags") or ())
    widest = next((words for flag, words in WIDEST if flag in flags), None)
    return ", ".join([machine["cpu"], f"{machine['cpus']} CPUs", *([widest] if widest else [])])


def stack_versions() -> dict[str, Optional[str]]:
    """The versions each run records (python, jax, jaxlib, flax, optax, ...) and numpy's."""
    try:
        numpy = metadata.version("numpy")
    except metadata.PackageNotFoundError:
        numpy = None
    return {**rundir.stack_versions(), "numpy": numpy}


def git(directory: Path, *args: str) -> Optional[str]:
    """`git -C directory args...`'s output, or None when git is missing or fails."""
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def is_checkout_top(directory: Path) -> bool:
    top = git(directory, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() == Path(directory).resolve()


def git_commit(directory: Path) -> tuple[str, Optional[bool]]:
    """(HEAD's commit, whether tracked files differ from it) when `directory` is the top of a
    git checkout; (UNKNOWN, None) otherwise (an installed package, no git). Untracked files
    (runs/, results) do not count as changes to the code."""
    if not is_checkout_top(directory):
        return UNKNOWN, None  # not a checkout, or a checkout that only contains this directory
    commit = git(directory, "rev-parse", "HEAD")
    changes = git(directory, "status", "--porcelain", "--untracked-files=no")
    if commit is None or changes is None:
        return UNKNOWN, None
    return commit, bool(changes)


def write(path: Path, record: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(record, indent=2) + "\n")  # in `describe`'s order
    return path


def read(path: Path) -> Optional[dict[str, Any]]:
    """The record at `path`; None where there is none (results from before provenance files)."""
    return json.loads(path.read_text()) if path.exists() else None

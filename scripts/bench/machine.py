"""The machine a benchmark figure was measured on, recorded beside it in every JSON the
benchmarks write: a ratio from a 2-core AMD EPYC with AVX2 is not one from an Intel Xeon with
AVX-512 and AMX, because XLA:CPU and PyTorch pick different kernels on each.

The CPU's model name comes from the package's own reader (`runtime.machine.parse_cpuinfo`);
the flags are every vector and matrix extension the CPU lists (avx2, avx512f and each AVX-512
subset, amx_*), more than runtime.machine's fixed CPU_FLAGS, because which AVX-512 subsets a CPU
has (bf16, fp16, vnni) is what differs between the Intel CPUs these runs land on.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from transformer_jax.runtime import machine as cpu_info

# avx2, avx512f, avx512bw, avx512_bf16, avx512_fp16, amx_tile, amx_bf16, ...
VECTOR_FLAG = re.compile(r"^(avx2|avx512.*|amx_.*)$")
PACKAGES = ("jax", "jaxlib", "torch", "numpy")


def vector_flags(cpuinfo: str) -> list[str]:
    """The VECTOR_FLAG flags of the first processor in /proc/cpuinfo's text, sorted; [] where
    it lists none (not x86, or not Linux)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return sorted(f for f in set(value.split()) if VECTOR_FLAG.match(f))
    return []


def describe(cpuinfo: str, cpus: Optional[int], versions: dict[str, Optional[str]],
             date: str) -> dict[str, Any]:
    """The machine record, from what was read off the machine (pure: `record` reads)."""
    model, _ = cpu_info.parse_cpuinfo(cpuinfo)
    return {"cpu": model, "cpus": cpus, "cpu_flags": vector_flags(cpuinfo),
            "system": f"{platform.system()} {platform.machine()}", **versions, "date": date}


def record(now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """This machine's record: CPU model, logical CPUs, vector flags, package versions, date."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return describe(cpu_info.read_cpuinfo(), os.cpu_count(),
                    {name: _version(name) for name in PACKAGES}, now.isoformat(timespec="seconds"))


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def emit(result: dict[str, Any], out: str = "") -> None:
    """A benchmark's last line: `result` with this machine's record, one JSON object, printed
    and, with `out`, written to that file (scripts/bench/results/ for the performance page)."""
    line = json.dumps({**result, "machine": record()})
    print(line)
    if out:
        Path(out).write_text(line + "\n")

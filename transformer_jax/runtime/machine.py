"""Which CPU this is: its model name and the instruction-set flags that decide which XLA:CPU
kernels run, read from /proc/cpuinfo. Below every layer: a study's provenance, its step profile
and the benchmarks name the machine their numbers come from with these.
"""
from __future__ import annotations

import platform
from pathlib import Path

UNKNOWN = "unknown"
# The CPU features that decide which XLA kernels run (vector width, bf16 and matrix units).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")


def parse_cpuinfo(text: str) -> tuple[str, tuple[str, ...]]:
    """(model name, the CPU_FLAGS it has, in CPU_FLAGS order) of the first processor listed in
    /proc/cpuinfo's text; (UNKNOWN, ()) where it names none (e.g. an ARM board's)."""
    model, flags = UNKNOWN, ()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == UNKNOWN:
            model = " ".join(value.split())
        elif key == "flags" and not flags:
            present = set(value.split())
            flags = tuple(f for f in CPU_FLAGS if f in present)
    return model, flags


def read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> str:
    try:
        return path.read_text()
    except OSError:  # not Linux
        return f"model name: {platform.processor() or UNKNOWN}\n"

"""Transparent huge pages for XLA:CPU's buffers, through glibc's `glibc.malloc.hugetlb=1`.

Why: every call of a compiled program allocates its buffers anew (the mid-size benchmark step:
about 2 GB), and glibc serves large blocks with a fresh `mmap`, so each call page-faults them
in again, 4 KiB at a time. With the tunable, glibc asks the kernel for 2 MiB pages on those
blocks (`madvise(MADV_HUGEPAGE)`), where the kernel's THP mode is `madvise`, as it is here.
Measured on the 2-core machine, mid-size step (6×512, T=256, B=16), three alternating pairs of
processes: page faults per step 527 000 -> 31 000, system time 0.96 -> 0.43 s, median step
3.27 -> 3.06 s (154 -> 165 model GFLOP/s, +7 %). A jitted `x*2+1` over 64 MB: 7 -> 15 GB/s.
The char-LM step (buffers of KBs to a few MB) is unchanged within noise.

Why not keep those blocks in malloc's heaps instead (`compile_memory.reuse_large_buffers`, which
the char LM's 40 MiB buffers take): the mid-size step's temporaries are one 1.9 GB block, and
XLA allocates it on a PJRT worker thread, whose glibc arena grows in heaps of at most 64 MiB;
glibc maps any larger block with its own mmap and unmaps it on free, whatever M_MMAP_THRESHOLD
says. Measured on an Intel Xeon (AVX-512, AMX), 2 CPUs, 2026-12-04, one step per call: 460,000-
560,000 page faults, 0.65-0.85 s of system time, 2.29-2.38 s per step. Forcing every thread into
one arena with 4 GiB thresholds,
    GLIBC_TUNABLES=glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296
ends the faults, but the shared arena's lock takes most of the gain back: 2.21-2.23 s, peak
4.4 GB against 2.7. jemalloc (outside the stack) keeping all it frees: 2.0 s, 4.5 GB. Neither
is worth its memory.

Off unless asked for (`TJ_HUGEPAGES=1`): it pays only for programs whose buffers are large.
On the char-LM run of configs/lm.py (500 steps, warm compilation cache, Intel Xeon with AVX-512
and AMX, 2 CPUs; two alternating rounds) it cost time and memory: wall 24.8-25.1 s against
23.2 s without (the restart), peak 677-685 MiB against 663.

glibc reads tunables only when a process starts, so the entry points (`main`, `sweep`, the
benchmark) call `reexec_if_useful()` first: with TJ_HUGEPAGES=1 it re-executes the same command
once with the tunable added to GLIBC_TUNABLES, costing one more interpreter start (~1 s).
Nothing happens where it cannot help (not Linux with glibc >= 2.35, THP mode `never` or
`always`) or where GLIBC_TUNABLES already says something about `glibc.malloc.hugetlb` (the
user's choice wins). The cost: memory is mapped in 2 MiB steps, so RSS grows.
"""
from __future__ import annotations

import os
import sys
from typing import Mapping, Optional

TUNABLE = "glibc.malloc.hugetlb"
OPT_IN = "TJ_HUGEPAGES"  # "1": re-execute with huge pages where they can work
_THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"


def thp_mode(path: str = _THP_MODE) -> Optional[str]:
    """The kernel's transparent-huge-page mode ('always', 'madvise', 'never'), None if unknown."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def glibc_version() -> Optional[tuple[int, int]]:
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()  # e.g. "glibc 2.36"
        major, minor = version.split(".")[:2]
        return (int(major), int(minor)) if name == "glibc" else None
    except (AttributeError, OSError, ValueError):  # not glibc (macOS, musl) or not Linux
        return None


def environ_with_hugepages(environ: Mapping[str, str], *, mode: Optional[str],
                           glibc: Optional[tuple[int, int]]) -> Optional[dict[str, str]]:
    """The environment to re-execute with, or None when re-executing would not help. Pure."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    if (environ.get(OPT_IN) != "1" or mode != "madvise" or glibc is None or glibc < (2, 35)
            or TUNABLE in tunables):
        return None
    new = dict(environ)
    new["GLIBC_TUNABLES"] = f"{tunables}:{TUNABLE}=1" if tunables else f"{TUNABLE}=1"
    return new


def tunables(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The glibc tunables this environment starts a process with: {name: value}."""
    return dict(item.partition("=")[::2] for item in environ.get("GLIBC_TUNABLES", "").split(":")
                if item)


def active(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process was started with glibc's huge-page tunable on."""
    return tunables(environ).get(TUNABLE, "0") not in ("", "0")


def reexec_if_useful() -> None:
    """Re-executes this very command with huge pages on, when asked for and they can work."""
    if not sys.platform.startswith("linux"):
        return
    env = environ_with_hugepages(os.environ, mode=thp_mode(), glibc=glibc_version())
    if env is None:
        return
    print(f"transformer_jax: restarting with GLIBC_TUNABLES={env['GLIBC_TUNABLES']} "
          f"(huge pages for XLA's buffers, as {OPT_IN}=1 asks)", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execve(sys.executable, list(sys.orig_argv), env)

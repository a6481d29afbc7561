"""Give the memory XLA's compiler used back to the system after each compile.

Why: compiling a train step on XLA:CPU allocates a few hundred MiB for a moment (LLVM, the
optimizer's passes) and frees it, but glibc keeps the freed pages in its heaps, so the
process's resident memory stays at the compile's high-water mark and the next compile (eval
step, probe, a 1-step program) stacks its own on top. `malloc_trim(0)` after each compile
returns those pages. Measured in alternating whole runs of configs/lm.py (500 steps, warm
compilation cache, Intel Xeon with AVX-512 and AMX, 2 CPUs): peak 663 -> 591 MiB, wall
unchanged (23.2 vs 23.0 s); the benchmarks' figures since are on docs/performance.md. A trim
takes milliseconds; a run compiles a handful of programs.

Why glibc's malloc arenas are left at its default (8 per core): capping them at 2 (mallopt
M_ARENA_MAX, as the entry points once did) made every thread that allocates share two heaps and
their locks. Where the process compiled its programs itself, that contention stayed through
training. Measured in whole 2,000-step runs of scripts/vs_nanogpt.sh's configs/lm.py command
with model.dense_matmul=bfloat16 (Intel Xeon with AVX-512 and AMX, 2 CPUs, two rounds, each a
cold then a warm compilation cache): cold 63.6 / 63.7 s with the cap against 55.6 / 55.1 s
without (40-42 steps/s against 46), 263,000-307,000 voluntary context switches against
115,000-117,000, peak 739 / 695 MiB against 711 / 727; warm 49.3 / 48.9 s against 49.8 /
49.0 s, peak 495 / 486 MiB against 506 / 513. The cap saved ~20 MiB of a warm run's peak and
cost 8 s of a cold one. A user who wants it still can: GLIBC_TUNABLES=glibc.malloc.arena_max=2.

Only where the C library is glibc (Linux); elsewhere nothing happens.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import Any, Callable, Mapping, Optional

from transformer_jax.runtime import hugepages

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # jax.monitoring's event


@functools.cache
def _glibc() -> Optional[ctypes.CDLL]:
    """The C library where it is glibc (Linux); None elsewhere."""
    try:
        if os.confstr("CS_GNU_LIBC_VERSION") is None:
            return None
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except (AttributeError, OSError, ValueError):  # no confstr name (not Linux), no libc
        return None


def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's malloc_trim, or None where the C library has none."""
    libc = _glibc()
    return None if libc is None else libc.malloc_trim


def user_set(tunable: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process was started with glibc's malloc `tunable` (e.g. "mmap_threshold")
    set, in GLIBC_TUNABLES or its MALLOC_* variable. Then the value is the user's, as huge pages'
    tunable is (`hugepages`): a mallopt here would replace it silently, after the start at
    which glibc applied it."""
    return (f"glibc.malloc.{tunable}" in hugepages.tunables(environ)
            or f"MALLOC_{tunable.upper()}_" in environ or f"MALLOC_{tunable.upper()}" in environ)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MAP_ABOVE = 1 << 30  # allocations up to this size come from the heaps, not from mmap
KEEP_FREE = 64 << 20  # free memory at the top of a heap kept up to this, not returned


def reuse_large_buffers(map_above: int = MAP_ABOVE, keep_free: int = KEEP_FREE) -> bool:
    """Makes glibc serve allocations up to `map_above` bytes from its heaps, and keep up to
    `keep_free` bytes freed at the top of a heap, instead of mapping each allocation above
    its mmap threshold (which adapts up to 32 MiB) afresh and unmapping it when freed.

    Why: every compiled call allocates its temporary buffers anew. The char LM's train step
    (configs/lm.py, 2 microbatches) needs ~40 MiB of them, above 32 MiB, so at one step per
    call each call mapped fresh pages and faulted every one in: ~10,000 page faults and 17 ms
    of system time per step. Measured on an Intel Xeon (AVX-512, AMX), 2 CPUs, alternating
    processes: 40.8 / 40.9 -> 32.0 / 32.6 ms per step at one step per call; whole 400-step
    runs of configs/lm.py at one step per call (warm compilation cache) 20.5 / 20.4 ->
    17.6 / 17.0 s, system time 7.3 / 7.2 -> 1.0 / 1.0 s, peak memory 437 / 437 -> 475 / 515
    MiB (the heap keeps what it reuses). At k steps per call those faults are paid once per
    k steps. At 10 (configs/lm.py's count then) it bought no speed while the whole run's peak
    rose (scripts/vs_nanogpt.sh, warm: 489 -> 543 MiB; cold: 647 -> 729); with malloc's
    arenas at glibc's default it bought a little: vs_nanogpt's command with bf16 Dense
    products, warm, two alternating rounds, 49.9 / 49.5 -> 47.5 / 47.7 s, page faults 2.27 M
    -> 0.26-0.47 M, peak 505 / 515 -> 564 / 566 MiB, 1.5x nanoGPT's (~374). 50 steps per
    call (configs/lm.py's count now) bought as much at no memory (see its comment). So the
    trainer sets it for runs of one step per call only. Process-wide and kept: a later run in
    the same process (a sweep) keeps it.
    Returns whether both were set (False without glibc, or where the process was started
    with either threshold set: the user's values stay)."""
    libc = _glibc()
    if libc is None or user_set("mmap_threshold") or user_set("trim_threshold"):
        return False
    return (libc.mallopt(M_MMAP_THRESHOLD, map_above) == 1
            and libc.mallopt(M_TRIM_THRESHOLD, keep_free) == 1)


def give_back() -> None:
    """Hands glibc's free heap pages back to the system now (nothing without glibc). The
    trainer calls it after each evaluation: an evaluation's batches, outputs and attention maps
    are freed by then, and without it RSS crept up by 7-30 MiB at each of the first
    evaluations of a configs/lm.py run."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def trim_after_compile(event: str, seconds: float, **_: Any) -> None:
    """A jax.monitoring duration listener: trims glibc's heaps after each backend compile."""
    del seconds
    trim = _malloc_trim()
    if event == BACKEND_COMPILE and trim is not None:
        trim(0)


def release_after_compiles() -> None:
    """Registers `trim_after_compile` with jax.monitoring, once per process (a second call
    replaces the first registration)."""
    from jax import monitoring
    try:
        monitoring.unregister_event_duration_listener(trim_after_compile)
    except (AssertionError, ValueError):  # not registered yet
        pass
    monitoring.register_event_duration_secs_listener(trim_after_compile)

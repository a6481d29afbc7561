"""Keep XLA:CPU's scratch memory mapped between calls (glibc `mallopt`): `--malloc=keep`.

Measured on an idle 2-core machine with the current char-LM step: 69 ms/step with it, 61
without (not analysed; arena_max=1 serializing the threads' allocations is one suspect), so
neither the trainer nor the benchmark's default uses it. It was a win in an earlier build,
measured under load, for the reason below.

Why: every call of a compiled program allocates its temporary buffer (46 MB for the charlm
step, 1.6 GB for the midsize one) with malloc and frees it on return. glibc serves blocks over
its mmap threshold (at most 32 MB) with a fresh `mmap` and returns them with `munmap`, so each
call page-faults the whole buffer in again: 11 361 minor faults per charlm step (= 46.5 MB /
4 KiB), ~35 ms of system time on a 2-core machine, more than the model's own arithmetic.
With mmap disabled and trimming off, the freed buffer stays in the heap and the next call reuses
the same, already-mapped pages (≈0 faults per step).

`keep_freed_memory()` sets this at runtime (`mallopt`): no environment variables, no preload.
It must run before JAX starts its threads for `arena_max=1` to cover them (otherwise threads
that already have their own arena keep it; blocks over 64 MB from those arenas still fall
back to mmap). The cost: memory the process freed is not returned to the OS (RSS stays at its
peak), which is what a training process wants anyway. Equivalent environment:
MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=<huge> MALLOC_ARENA_MAX=1.

What the entry points use instead: huge pages (`transformer_jax/hugepages.py`), which cut the
faults ~17× and the TLB misses too, with no arena change.

No-op (returns False) outside glibc (macOS, musl) or when a different malloc is preloaded.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_ARENA_MAX = -1, -2, -4, -8
_applied: list[bool] = []


def keep_freed_memory(arena_max: int = 1, top_pad: int = 64 << 20) -> bool:
    """Turns off glibc's mmap for large blocks and heap trimming; returns whether it applied."""
    if _applied:
        return _applied[0]
    ok = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            ok = all([mallopt(M_MMAP_MAX, 0) == 1,
                      mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1) == 1,
                      mallopt(M_TOP_PAD, top_pad) == 1,
                      arena_max <= 0 or mallopt(M_ARENA_MAX, arena_max) == 1])
    _applied.append(ok)
    return ok

"""JAX's persistent compilation cache, which every entry point and the README's example turn on.

Why: on a CPU nearly all the time a small model takes to build and first run is XLA compiling
(an eager call compiles one program per new operation and shape, ~50 ms each), and the cache
keeps those programs on disk across processes. Measured with scripts/bench/eager_example.py
(README example, AMD EPYC): building plus the first call 8.6 s cold, 1.1 s from the second run.
Runs of a sweep that differ only in seed compile to the same program; so do restarts.
"""
from __future__ import annotations

import os


def enable_compilation_cache() -> None:
    """Persist compiled programs across processes in $TJ_JAX_CACHE_DIR ('' disables; default
    ~/.cache/transformer_jax/jax_cache), every program however quick its compile."""
    import jax  # when called: importing this module loads nothing heavy (runtime/__init__.py)
    path = os.environ.get("TJ_JAX_CACHE_DIR",
                          os.path.join(os.path.expanduser("~/.cache"), "transformer_jax", "jax_cache"))
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

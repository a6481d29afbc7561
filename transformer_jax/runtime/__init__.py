"""The process's runtime tuning, below every layer: what glibc's malloc and the kernel do with
XLA's buffers and the compiler's memory. It serves every entry point (main, sweep, trace, the
benchmarks), not training alone.

    hugepages       huge pages for large buffers, which glibc reads only when a process starts:
                    `hugepages.reexec_if_useful()` is the first line of an entry point
    compile_memory  the compiler's memory given back after each compile; malloc's thresholds for
                    runs whose buffers are allocated anew at each call
    compile_cache   JAX's persistent compilation cache (`enable_compilation_cache`)
    machine         which CPU this is (/proc/cpuinfo): what provenance and profiles name

Nothing here imports JAX, or anything of the package, when it is imported: an entry point
restarts itself through `hugepages` before it has loaded anything heavy.
"""

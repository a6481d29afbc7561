"""The compiler's memory is handed back after each compile: the listener trims on a backend
compile, only then, and the entry points register it once; malloc's arenas are left at glibc's
default and the calls' large buffers reused."""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest
import jax.numpy as jnp
from jax import monitoring  # public: register/unregister listeners

from transformer_jax.runtime import compile_memory
from transformer_jax.train import cli


def _recording_trim(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(compile_memory, "_malloc_trim", lambda: calls.append)
    return calls


def test_a_compile_trims_and_nothing_else_does(monkeypatch):
    calls = _recording_trim(monkeypatch)
    compile_memory.release_after_compiles()
    jax.jit(lambda x: jnp.sin(x) * 3.0 + 0.5)(jnp.arange(7.0)).block_until_ready()  # a new program
    assert calls and set(calls) == {0}, calls  # malloc_trim(0): every heap, all the way down
    calls.clear()
    compile_memory.trim_after_compile("/jax/core/compile/jaxpr_trace_duration", 0.1)
    compile_memory.trim_after_compile("/jax/compilation_cache/cache_retrieval_time_sec", 0.1)
    assert calls == []
    compile_memory.trim_after_compile(compile_memory.BACKEND_COMPILE, 0.1)
    assert calls == [0]


def test_registered_once_by_the_entry_points_set_up(monkeypatch):
    monkeypatch.setattr(cli, "enable_compilation_cache", lambda: None)  # this session's cache stays
    for _ in range(3):
        cli.set_up_compilation()
    monitoring.unregister_event_duration_listener(compile_memory.trim_after_compile)
    try:  # a second registration would still be there
        monitoring.unregister_event_duration_listener(compile_memory.trim_after_compile)
    except (AssertionError, ValueError):
        pass
    else:
        raise AssertionError("trim_after_compile was registered more than once")
    cli.set_up_compilation()  # as it was


def test_glibc_trim_is_found_here():
    """This project's machines are Linux with glibc: the real function, which returns 0 or 1."""
    trim = compile_memory._malloc_trim()
    assert trim is not None and trim(0) in (0, 1)


class RecordingGlibc:
    """A stand-in for glibc that records mallopt's parameters and succeeds."""

    def __init__(self):
        self.params: list[int] = []

    def mallopt(self, param: int, value: int) -> int:
        self.params.append(param)
        return 1


def test_the_entry_points_set_up_changes_no_malloc_setting(monkeypatch):
    """No mallopt at all: a cap on the arenas (M_ARENA_MAX, -8 in malloc.h) made the threads of a
    process that compiled its own programs contend for two heaps (compile_memory's docstring)."""
    glibc = RecordingGlibc()
    monkeypatch.setattr(compile_memory, "_glibc", lambda: glibc)
    monkeypatch.setattr(cli, "enable_compilation_cache", lambda: None)
    cli.set_up_compilation()
    assert glibc.params == []


@pytest.mark.parametrize("steps_per_call", [1, 2])
def test_the_trainer_reuses_large_buffers_at_one_step_per_call_only(monkeypatch, tmp_path,
                                                                   steps_per_call):
    from helpers_train import tiny_config
    from transformer_jax.train import loop
    calls = []
    monkeypatch.setattr(compile_memory, "reuse_large_buffers", lambda *a: calls.append(a) or True)
    config = tiny_config(overrides={"train.num_steps": 2, "train.steps_per_call": steps_per_call,
                                    "train.eval_every": 2, "train.log_every": 2,
                                    "train.checkpoint_every": 2, "train.warmup_steps": 0,
                                    "data.data_dir": str(tmp_path / "d")})
    loop.train_and_evaluate(config, str(tmp_path / "run"))
    assert calls == ([()] if steps_per_call == 1 else [])


_FAULTS_PER_BUFFER = """
import ctypes, resource, sys
from transformer_jax.runtime import compile_memory
if sys.argv[1] == "reuse":
    assert compile_memory.reuse_large_buffers()
libc, size = ctypes.CDLL("libc.so.6"), 40 << 20  # a char-LM step's temporary buffers
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
def call():  # what each compiled call does with them: allocate, write, free
    buffer = libc.malloc(size)
    ctypes.memset(buffer, 1, size)
    libc.free(buffer)
call()  # the first call faults its pages in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    call()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def test_reusing_large_buffers_ends_the_page_faults_of_each_call():
    """The real mallopt calls, each mode in a fresh process: a freed 40 MiB buffer (a char-LM
    step's temporaries) is unmapped by glibc's default, so the next call faults its pages in
    again (10,240 of 4 KiB here; fewer where transparent huge pages back it); with the buffers
    reused it comes back from the heap, already resident."""
    faults = {}
    env = {k: v for k, v in os.environ.items()  # glibc's defaults: no malloc setting of yours
           if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    for mode in ("default", "reuse"):
        done = subprocess.run([sys.executable, "-c", _FAULTS_PER_BUFFER, mode], env=env,
                              capture_output=True, text=True, check=True)
        faults[mode] = float(done.stdout.split()[-1])
    assert faults["default"] >= 10, faults
    assert faults["reuse"] <= faults["default"] / 10, faults


def test_the_trainer_gives_memory_back_after_each_evaluation(monkeypatch, tmp_path):
    from helpers_train import tiny_config
    from transformer_jax.train import loop
    calls = []
    monkeypatch.setattr(compile_memory, "give_back", lambda: calls.append(1))
    config = tiny_config(overrides={"train.num_steps": 6, "train.eval_every": 2,
                                    "train.warmup_steps": 0, "data.data_dir": str(tmp_path / "d")})
    loop.train_and_evaluate(config, str(tmp_path / "run"))
    assert len(calls) == 3  # evaluations after steps 2, 4 and 6


def test_a_malloc_tunable_the_process_started_with_is_the_users():
    assert compile_memory.user_set("arena_max", {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"})
    assert compile_memory.user_set("arena_max", {"MALLOC_ARENA_MAX": "4"})
    assert compile_memory.user_set(
        "mmap_threshold", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=9"})
    assert compile_memory.user_set("trim_threshold", {"MALLOC_TRIM_THRESHOLD_": "0"})
    for environ in ({}, {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"},
                    {"GLIBC_TUNABLES": "glibc.malloc.arena_max_x=1"}, {"MALLOC_ARENA_TEST": "1"}):
        assert not compile_memory.user_set("arena_max", environ), environ


def test_the_users_malloc_tunables_are_not_overridden(monkeypatch):
    """With a threshold given at start, the buffer reuse calls no mallopt (a recording stand-in
    for glibc says so) and reports False."""
    glibc = RecordingGlibc()
    calls = glibc.params
    monkeypatch.setattr(compile_memory, "_glibc", lambda: glibc)
    for name in [k for k in os.environ if k.startswith("MALLOC_")]:  # only the settings below
        monkeypatch.delenv(name)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=9")
    assert compile_memory.reuse_large_buffers() is False
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=9")
    assert compile_memory.reuse_large_buffers() is False
    assert calls == []
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    assert compile_memory.reuse_large_buffers() is True
    assert calls == [compile_memory.M_MMAP_THRESHOLD, compile_memory.M_TRIM_THRESHOLD]

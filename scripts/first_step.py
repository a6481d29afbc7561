"""Where the seconds go from process start to the first optimizer step of the char-LM run.

    .venv/bin/python scripts/first_step.py [--text_path FILE] [--runs 2] [--out FILE]

Runs `python -m transformer_jax.main --config=configs/lm.py` (nanoGPT's README CPU model) for
one compiled call, in fresh processes that share one new compilation-cache directory: the first
run is cold (empty cache), the later ones warm (the cache the first filled; the TFDS files too).
Each run is the real entry point, started as a user starts it, with a hook that timestamps its
stages and sums JAX's own compile events (`jax.monitoring`):

  interpreter   process start to the first line of Python (and the huge-page re-exec, if any)
  imports       everything `transformer_jax.main` imports (JAX, Flax, optax, Orbax, TFDS, ...),
                up to the first line of its main()
  data          flags and config parsed, the workdir prepared, the config turned into a run:
                the text prepared (TFDS files) and loaded
  init          the model's parameters and optimizer state for every seed
  first call    the first compiled call (k = train.steps_per_call steps), of which:
                trace (Python: jaxpr), lower (jaxpr -> StableHLO), compile (XLA, or a load
                from the persistent cache), and the rest: running the k steps
  to first step process start to the end of that call

The last line is one JSON object with every number and the machine (bench/machine.py).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's package, as the measured process (cwd REPO) uses
from transformer_jax.runtime import compile_memory  # noqa: E402
SHARED_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"

# Runs inside the measured process, before main's imports: stamps each stage and sums JAX's
# compile events; after the first compiled call it prints one JSON line and exits.
HOOK = r"""
import json, os, resource, sys, time
T = {"python": time.time()}  # after a huge-page re-exec: the second interpreter's start
from transformer_jax.runtime import hugepages
hugepages.reexec_if_useful()  # as main does, first
import runpy
from collections import defaultdict
import jax
from jax import monitoring
EVENTS = defaultdict(float)
monitoring.register_event_duration_secs_listener(
    lambda name, secs, **kw: EVENTS.__setitem__(name, EVENTS[name] + secs))
monitoring.register_event_listener(lambda name, **kw: EVENTS.__setitem__(name, EVENTS[name] + 1))
import dataclasses
from transformer_jax.train import cli, loop
PEAK = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
set_up, build_run, for_training, step = (cli.set_up_compilation, loop.build_run,
                                         loop.programs_lib.for_training, loop._step)
def timed_set_up(*a, **k):  # the first thing main() does: every import of main's module is done
    T["imports"] = time.time(); T["peak imports"] = PEAK(); return set_up(*a, **k)
def timed_build_run(*a, **k):
    out = build_run(*a, **k); T["data"] = time.time(); T["peak data"] = PEAK(); return out
def timed_for_training(*a, **k):  # the trainer's programs, whose init_states starts the run
    built = for_training(*a, **k)
    def timed_init_states(*a, **k):
        out = built.init_states(*a, **k); jax.block_until_ready(out); T["init"] = time.time()
        T["peak init"] = PEAK(); T["events_before_call"] = dict(EVENTS); return out
    return dataclasses.replace(built, init_states=timed_init_states)
def timed_step(*a, **k):
    out = step(*a, **k)  # fetches the metrics: the call has finished
    T["first call"] = time.time(); T["events"] = dict(EVENTS)
    T["peak first call"] = PEAK()
    sys.__stdout__.write("FIRST_STEP " + json.dumps(T) + "\n"); sys.__stdout__.flush()  # main redirects stdout to train.log
    os._exit(0)
cli.set_up_compilation = timed_set_up
loop.build_run, loop.programs_lib.for_training, loop._step = (timed_build_run, timed_for_training,
                                                              timed_step)
sys.argv = ["transformer_jax.main"] + sys.argv[1:]
runpy.run_module("transformer_jax.main", run_name="__main__", alter_sys=True)
"""
TRACE, LOWER = ("/jax/core/compile/jaxpr_trace_duration",
                 "/jax/core/compile/jaxpr_to_mlir_module_duration")
COMPILE = compile_memory.BACKEND_COMPILE  # the event the trainer trims memory after
HITS = "/jax/compilation_cache/cache_hits"


def one_run(args: list[str], env: dict) -> dict:
    """Starts the entry point with the hook; the stages' seconds from the process's start."""
    start = time.time()
    out = subprocess.run([sys.executable, "-c", HOOK, *args], env=env, cwd=REPO,
                         capture_output=True, text=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("FIRST_STEP ")]
    if not line:
        raise RuntimeError(f"the run printed no first step:\n{out.stdout[-2000:]}{out.stderr[-4000:]}")
    t = json.loads(line[0].split(" ", 1)[1])
    during = {k: t["events"].get(k, 0.0) - t["events_before_call"].get(k, 0.0)
              for k in (TRACE, LOWER, COMPILE, HITS)}
    call = t["first call"] - t["init"]
    return {"interpreter": t["python"] - start, "imports": t["imports"] - t["python"],
            "data": t["data"] - t["imports"], "init": t["init"] - t["data"],
            "first call": call, "to first step": t["first call"] - start,
            "first call: trace": during[TRACE], "first call: lower": during[LOWER],
            "first call: compile": during[COMPILE],
            "first call: run": call - during[TRACE] - during[LOWER] - during[COMPILE],
            "compile, whole process": t["events"].get(COMPILE, 0.0),
            "cache hits": int(t["events"].get(HITS, 0)),
            **{f"peak MiB, {stage}": t[f"peak {stage}"]
               for stage in ("imports", "data", "init", "first call")}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text_path", default=os.environ.get("TJ_SHAKESPEARE", str(SHARED_TEXT)))
    parser.add_argument("--runs", type=int, default=2, help="the first cold, the others warm")
    parser.add_argument("--config", default="configs/lm.py")
    parser.add_argument("--out", default="", help="also write the JSON line to this file")
    args, extra = parser.parse_known_args(argv)
    if not os.path.isfile(args.text_path):
        print(f"error: --text_path {args.text_path!r} does not exist", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="tj_first_step_"))
    env = {**os.environ, "TJ_JAX_CACHE_DIR": str(scratch / "jax_cache")}
    common = [f"--config={args.config}", f"--config.data.text_path={args.text_path}",
              f"--config.data.data_dir={scratch / 'tfds'}", *extra]
    runs = []
    for i in range(args.runs):
        runs.append(one_run([*common, f"--workdir={scratch / f'run_{i}'}"], env))
    names = list(runs[0])
    print(f"{'seconds':24s}" + "".join(f"{'cold' if i == 0 else f'warm {i}':>9s}"
                                       for i in range(len(runs))))
    for name in names:
        fmt = "{:9d}" if name == "cache hits" else "{:9.0f}" if "MiB" in name else "{:9.2f}"
        print(f"{name:24s}" + "".join(fmt.format(r[name]) for r in runs))
    sys.path.insert(0, str(REPO / "scripts"))
    from bench import machine
    machine.emit({"first_step": runs, "args": common[:1] + extra,
                  "hugepages_env": os.environ.get("GLIBC_TUNABLES", "")}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

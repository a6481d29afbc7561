"""Where a variant's train-step time goes, kernel by kernel: a study analysis (`Study.analyses`)
that explains a measured step time that FLOPs do not (the `heads` study: equal FLOPs, unequal
time).

For each chosen variant it builds the train step its runs ran (every seed in one program,
`steps.make_train_step(replicas=True)`, from the first finished run's config), compiles it,
runs it `STEPS` times under `jax.profiler.trace` (`train.op_profile`), then times it in
`ROUNDS` rounds, the variants taking turns, and records: wall milliseconds per step (the
rounds' median, and each round's), kernels per step,
kernel time per step and per kernel, the timed matmuls' share, XLA's FLOPs per replica step
(`steps.flops_per_call`), and the largest kernel groups. The numbers are of this machine, at
the moment the analysis ran (named: the CPU and its core count), not of the runs.

Writes the data into the study dir as `step_profile.json` and returns its markdown, rendered
from that JSON (`render`), which links the JSON so it is exported beside the page.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import ml_collections
import numpy as np

from transformer_jax.runtime import machine
from transformer_jax.studies.analysis.restore import finished_run_dirs
from transformer_jax.studies.render.markdown import markdown_table
from transformer_jax.train import op_profile, steps
from transformer_jax.train.init import init_states
from transformer_jax.train.run import build_run

FILE = "step_profile.json"
STEPS, WARMUP = 20, 5  # steps per timed round and per trace, after WARMUP untimed ones
ROUNDS = 7  # timed rounds per variant, taken in turns: the wall time is their median
TOP = 4  # kernel groups shown per variant


def variant_programs(run_dirs: dict[int, Path]) -> tuple[Callable, str, float]:
    """(one call of the variant's train step, its compiled HLO text, XLA's FLOPs per replica
    step) for its seeds' runs, on the first step's batches, with fresh parameters."""
    configs = [ml_collections.ConfigDict(json.loads((d / "config.json").read_text()))
               for _, d in sorted(run_dirs.items())]
    runs = [build_run(c) for c in configs]
    model, train = runs[0].model, runs[0].train
    tx, schedule = steps.make_optimizer(train)
    graphdef, state = init_states(model, tx, [r.seed for r in runs])
    program = steps.make_train_step(graphdef, model, tx, schedule, replicas=True,
                                    microbatches=train.microbatches)
    batch = steps.stack_batches([r.dataset.train_batch(0, train.batch_size, model.arch.value)
                                 for r in runs])
    rngs = jax.random.split(jax.random.key(0), len(runs))
    flops = steps.flops_per_call(program, state, batch, rngs)
    compiled = program.lower(state, batch, rngs).compile()
    held = {"state": state}

    def step():  # the state is donated: each call takes the one the last returned
        held["state"], metrics = compiled(held["state"], batch, rngs)
        jax.block_until_ready((held["state"], metrics))

    return step, compiled.as_text(), flops


def interleaved_wall_ms(calls: dict[str, Callable], rounds: int, steps: int) -> dict[str, list]:
    """variant -> its milliseconds per step in each of `rounds` rounds of `steps` steps, the
    variants taking turns (the order rotated each round), so that a load that comes and goes
    on a shared machine falls on every variant alike rather than on whichever ran then."""
    names, out = list(calls), {name: [] for name in calls}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(steps):
                calls[name]()
            out[name].append(1e3 * (time.perf_counter() - start) / steps)
    return out


def profile_variants(root: Path, runs: dict, variants: Sequence[str]) -> dict[str, Any]:
    """The profile of each of `variants` that has a finished run, and the machine, as data."""
    dirs = finished_run_dirs(root, runs)
    out: dict[str, Any] = {"cpu": machine.parse_cpuinfo(machine.read_cpuinfo())[0],
                           "cpus": os.cpu_count(), "steps": STEPS, "rounds": ROUNDS,
                           "variants": {}}
    built = {v: variant_programs(dirs[v]) for v in variants if v in dirs}
    traced = {v: op_profile.profile(step, hlo, steps=STEPS, warmup=WARMUP)
              for v, (step, hlo, _) in built.items()}
    wall = interleaved_wall_ms({v: step for v, (step, _, _) in built.items()}, ROUNDS, STEPS)
    for v, found in traced.items():
        out["variants"][v] = {
            "seeds": len(dirs[v]), "flops_per_replica_step": built[v][2],
            "wall_ms": float(np.median(wall[v])), "wall_ms_rounds": wall[v],
            "kernels": found["kernels"], "kernel_ms": found["kernel_ms"],
            "matmul_ms": found["matmul_ms"], "top": found["rows"][:TOP]}
    return out


def explanation(found: dict[str, Any]) -> str:
    """The last variant against the first, in ratios: wall time, FLOPs, kernel time, kernels
    per step and time per kernel."""
    (a, first), (b, last) = next(iter(found.items())), list(found.items())[-1]
    flops = last["flops_per_replica_step"] / first["flops_per_replica_step"]
    per_kernel = [1e3 * p["kernel_ms"] / p["kernels"] for p in (first, last)]
    wall, kernel_time = (last[k] / first[k] for k in ("wall_ms", "kernel_ms"))
    fastest = min(last["wall_ms_rounds"]) / min(first["wall_ms_rounds"])
    return (f"{b} against {a}: {wall:.2f}× the wall time (fastest rounds: {fastest:.2f}×) for "
            f"{flops:.4f}× the FLOPs and "
            f"{kernel_time:.2f}× the kernel time; "
            f"{last['kernels'] / first['kernels']:.2f}× the kernels per step "
            f"({first['kernels']:.0f} → {last['kernels']:.0f}), each "
            f"{per_kernel[1] / per_kernel[0]:.2f}× as long ({per_kernel[0]:.1f} → "
            f"{per_kernel[1]:.1f} µs).")


def render(data: dict[str, Any]) -> str:
    """The profile's markdown, from its JSON."""
    found = data["variants"]
    if not found:
        return "### Where the step time goes\n\nNo finished run to profile.\n"
    name = next(iter(found))
    first = found[name]
    fastest = {v: min(p["wall_ms_rounds"]) for v, p in found.items()}
    rows = [(v, f"{p['wall_ms']:.2f} ({fastest[v]:.1f}–{max(p['wall_ms_rounds']):.1f})",
             f"{p['wall_ms'] / first['wall_ms']:.2f}", f"{fastest[v] / fastest[name]:.2f}",
             f"{p['kernels']:.0f}", f"{p['kernel_ms']:.2f}",
             f"{1e3 * p['kernel_ms'] / p['kernels']:.1f}",
             f"{p['matmul_ms']:.2f}", f"{p['flops_per_replica_step']:.4g}",
             f"{p['flops_per_replica_step'] / first['flops_per_replica_step']:.4f}")
            for v, p in found.items()]
    table = markdown_table(["variant", "wall ms / step (rounds' range)", f"÷ {name}",
                            f"fastest round ÷ {name}'s",
                            "kernels / step", "kernel ms / step", "µs / kernel",
                            "timed matmul ms", "FLOPs / replica step", "FLOPs ratio"], rows)
    tops = [(v, f"{r['kind']} {r['op']} → {r['shape']}", f"{r['ms']:.3f}", f"{r['kernels']:.0f}")
            for v, p in found.items() for r in p["top"]]
    top = markdown_table(["variant", "kernel group (kind, op → output)", "ms / step",
                          "kernels / step"], tops)
    why = explanation(found)
    return (f"### Where the step time goes\n\nThe train step of each variant as its runs ran "
            f"it ({first['seeds']} seeds in one program), compiled and profiled on "
            f"**{data['cpu']}** ({data['cpus']} CPUs, shared with whatever else ran then): "
            f"wall time the median of {data['rounds']} rounds of {data['steps']} untraced steps, "
            f"the variants taking turns; kernels from one `jax.profiler` trace of "
            f"{data['steps']} more (kernel time summed over the "
            f"threads that launched them; `train/op_profile.py`). FLOPs: XLA's count of one "
            f"replica's step. Data: [{FILE}]({FILE}).\n\n{table}\n\n{why}\n\nLargest kernel groups:"
            f"\n\n{top}\n")


def make_analysis(variants: Sequence[str]) -> Callable[[Path, dict], str]:
    """An analysis (root, runs) -> markdown that profiles `variants`' train steps."""
    variants = tuple(variants)

    def step_profile(root: Path, runs: dict) -> str:
        data = profile_variants(Path(root), runs, variants)
        (Path(root) / FILE).write_text(json.dumps(data, indent=1))
        return render(data)

    return step_profile

"""Where a compiled train step's time goes, kernel by kernel: `scripts/benchmark.py ops NAME`, and
the `heads` study's step profile (studies/analysis/step_profile.py).

Runs the step `steps` times under `jax.profiler.trace`, reads the Perfetto trace it writes, and
joins every kernel event to its instruction in the compiled program's HLO: output shape, the
JAX operation it came from (`op_name` metadata) and, for matmuls, its FLOPs (2 · output size ·
contracted size). Rows group kernels by (matmul or not, output shape, operation); matmul rows
also show the rate they ran at.

Read the times as kernel time summed over the threads that launched them: two kernels running
at once on the two cores both count, and a kernel that splits itself over the thread pool counts
once, for the thread that launched it. The step's wall time (measured untraced, just before)
is printed beside the total. Rows of kind `matmul*` are XLA's own (unfused, Eigen) dot kernels:
their events end before their work does (rates far above the machine's peak show it), so their
time is a lower bound and they are left out of the matmul total.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import glob
import gzip
import json
import math
import os
import re
import tempfile
import time
from typing import Any, Callable, Iterable

import jax

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = (\w+\[[\d,]*\])\S*\s+([\w\-]+)\((.*)$")
_COMPUTATION = re.compile(r"^%?([\w.\-]+) \(.*\) -> .* \{$")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")


@dataclasses.dataclass(frozen=True)
class Instruction:
    shape: str  # e.g. "f32[768,128]"
    opcode: str  # "fusion", "dot", "copy", ...
    op: str  # the JAX operation it came from, e.g. "dot_general", "reduce_sum"
    flops: float  # matmul FLOPs (0 for everything else)


def _dims(shape: str) -> list[int]:
    inside = shape[shape.index("[") + 1:shape.index("]")]
    return [int(d) for d in inside.split(",") if d]


def parse_hlo(text: str) -> dict[str, Instruction]:
    """Every instruction of an optimized HLO module (`compiled.as_text()`), by name. A fusion
    that calls a computation containing a dot gets that dot's FLOPs."""
    shapes: dict[str, str] = {}
    lines: dict[str, tuple[str, str, str, str]] = {}  # name -> (computation, shape, opcode, rest)
    computation = ""
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            computation = header.group(1)
            continue
        m = _INSTRUCTION.match(line)
        if m:
            name, shape, opcode, rest = m.groups()
            shapes[name] = shape
            lines[name] = (computation, shape, opcode, rest)

    def dot_flops(shape: str, rest: str) -> float:
        operands = re.findall(r"%([\w.\-]+)", rest.split(")")[0])
        contracting = _CONTRACTING.search(rest)
        if not operands or operands[0] not in shapes or not contracting:
            return 0.0
        lhs = _dims(shapes[operands[0]])
        inner = math.prod(lhs[int(d)] for d in contracting.group(1).split(",") if d)
        return 2.0 * math.prod(_dims(shape)) * inner

    flops_of_computation: dict[str, float] = collections.defaultdict(float)
    for name, (comp, shape, opcode, rest) in lines.items():
        if opcode == "dot":
            flops_of_computation[comp] += dot_flops(shape, rest)
    out = {}
    for name, (comp, shape, opcode, rest) in lines.items():
        op_name = _OP_NAME.search(rest)
        op = op_name.group(1).split("/")[-1] if op_name else opcode
        calls = _CALLS.search(rest)
        if opcode == "dot":
            flops = dot_flops(shape, rest)
        else:
            flops = flops_of_computation.get(calls.group(1), 0.0) if calls else 0.0
        out[name] = Instruction(shape, opcode, op, flops)
    return out


def kernel_times(trace_dir: str) -> dict[str, tuple[float, int]]:
    """{event name: (total µs, count)} of the complete ('X') events in the Perfetto trace."""
    paths = glob.glob(os.path.join(trace_dir, "**", "*perfetto_trace.json.gz"), recursive=True)
    if not paths:
        raise FileNotFoundError(f"no Perfetto trace under {trace_dir}")
    with gzip.open(paths[0]) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    totals: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for event in events:
        if event.get("ph") == "X":
            totals[event["name"]][0] += float(event.get("dur", 0.0))
            totals[event["name"]][1] += 1
    return {name: (t, n) for name, (t, n) in totals.items()}


def summarize(instructions: dict[str, Instruction], times: dict[str, tuple[float, int]],
              steps: int) -> dict[str, Any]:
    """Rows {kind, shape, op, ms, kernels, gflops} per step, largest first, and totals."""
    groups: dict[tuple[str, str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0, 0.0])
    for name, (micros, count) in times.items():
        ins = instructions.get(name)
        if ins is None:  # runtime events (executor, dispatch), not kernels
            continue
        # XLA's own (unfused) dot kernels return before their work ends: time not comparable
        kind = ("matmul*" if ins.opcode == "dot" else "matmul") if ins.flops else "other"
        row = groups[(kind, ins.shape, ins.op)]
        row[0] += micros / 1e3 / steps
        row[1] += count / steps
        row[2] += ins.flops * count / steps
    rows = [{"kind": k, "shape": s, "op": o, "ms": ms, "kernels": n,
             "gflops": flops / (ms * 1e6) if ms and flops else 0.0}
            for (k, s, o), (ms, n, flops) in groups.items()]
    rows.sort(key=lambda r: -r["ms"])
    matmul = [r for r in rows if r["kind"] == "matmul"]  # the timed ones only
    matmul_ms = sum(r["ms"] for r in matmul)
    matmul_flops = sum(r["gflops"] * r["ms"] * 1e6 for r in matmul)
    return {"rows": rows, "kernel_ms": sum(r["ms"] for r in rows), "matmul_ms": matmul_ms,
            "matmul_gflops": matmul_flops / (matmul_ms * 1e6) if matmul_ms else 0.0,
            "kernels": sum(r["kernels"] for r in rows)}


def profile(step: Callable[[], Any], compiled_text: str, steps: int = 5, warmup: int = 2,
            trace_dir: str = "") -> dict[str, Any]:
    """Traces `steps` calls of `step` (each must block until done) after `warmup` calls.

    trace_dir: where the trace goes and stays (open it in ui.perfetto.dev or TensorBoard's
    profile tab); '' uses a temporary directory, removed afterwards.
    """
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):  # untraced: the profiler slows the steps it records
        step()
    wall_ms = 1e3 * (time.perf_counter() - t0) / steps
    with (contextlib.nullcontext(trace_dir) if trace_dir else tempfile.TemporaryDirectory()) as where:
        with jax.profiler.trace(where, create_perfetto_trace=True):
            for _ in range(steps):
                step()
        times = kernel_times(where)
    result = summarize(parse_hlo(compiled_text), times, steps)
    result["wall_ms"] = wall_ms
    result["steps"] = steps
    return result


def format_table(result: dict[str, Any], top: int = 25) -> str:
    lines = [f"{'ms/step':>8s} {'share':>6s} {'kernels':>7s} {'GFLOP/s':>8s}  {'kind':7s} "
             f"{'output':24s} from"]
    total = result["kernel_ms"] or 1.0
    rows: Iterable[dict] = result["rows"][:top]
    for r in rows:
        rate = f"{r['gflops']:8.0f}" if r["gflops"] else f"{'':8s}"
        lines.append(f"{r['ms']:8.2f} {100 * r['ms'] / total:5.1f}% {r['kernels']:7.0f} {rate}  "
                     f"{r['kind']:7s} {r['shape']:24s} {r['op']}")
    rest = result["rows"][top:]
    if rest:
        lines.append(f"{sum(r['ms'] for r in rest):8.2f} {100 * sum(r['ms'] for r in rest) / total:5.1f}% "
                     f"{sum(r['kernels'] for r in rest):7.0f} {'':8s}  ({len(rest)} more groups)")
    lines.append(f"kernel time {result['kernel_ms']:.1f} ms/step over {result['kernels']:.0f} "
                 f"kernels (summed over threads); timed matmuls {result['matmul_ms']:.1f} ms at "
                 f"{result['matmul_gflops']:.0f} GFLOP/s"
                 + (f"; wall {result['wall_ms']:.1f} ms/step (untraced)" if "wall_ms" in result else ""))
    return "\n".join(lines)

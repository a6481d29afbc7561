"""Matmul throughput on the models' own shapes: XLA:CPU's dot, through each backend its flags can
select, against PyTorch's `mm` and NumPy's BLAS (`scripts/benchmark.py gemm`).

Why: the two goals of the performance issue that are not met (the char LM ≤ 0.8× PyTorch's
wall time; mid-size model FLOP/s ≥ 0.6× the best measured matmul peak) are bounded by how fast
the matmuls of those models run. This measures exactly that, shape by shape, so the claim can be
checked again on a new jaxlib or another machine.

Each measurement is a chain of `steps` iterations in one call (for JAX one compiled loop), each
the three matmuls of a linear layer's training step: forward h = x·W ([m, k] x [k, n]), the
input gradient's shape h·W2 ([m, n] x [n, k], which feeds the next iteration) and the weight
gradient's xᵀ·h ([k, m] x [m, n], summed over iterations). It is timed as the best of `repeats`
calls, so JAX's dispatch is paid once per chain, not per matmul. XLA flags are read once per
process, so each backend runs in its own worker process.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any, Callable

import numpy as np

from bench import measure, worker_env

YNN_FUSION_TYPE = "--xla_cpu_experimental_ynn_fusion_type="  # + which fusions go to YNNPACK
_ONE_DOT = "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"
BACKENDS: dict[str, str] = {  # name -> XLA_FLAGS of its worker
    "xla": "",  # as the project runs: XLA's default (YNNPACK dots in jaxlib 0.10.2)
    "eigen": YNN_FUSION_TYPE,  # alone (an empty list): no YNNPACK dots, so Eigen's
    "onednn": f"{YNN_FUSION_TYPE} --xla_cpu_experimental_onednn_fusion_type={_ONE_DOT}",
    "xnnpack": f"{YNN_FUSION_TYPE} --xla_cpu_experimental_xnn_fusion_type={_ONE_DOT}",
}


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    m: int
    k: int
    n: int

    @property
    def flops_per_step(self) -> float:  # forward, input and weight gradient: 2·m·k·n each
        return 6.0 * self.m * self.k * self.n


# The char LM runs its batch of 12×64 tokens as 2 microbatches of 384 rows (configs/lm.py);
# the mid-size model has 16×256 = 4096 rows.
SHAPES = (
    Shape("char LM q/k/v/out projection", 384, 128, 128),
    Shape("char LM feed-forward", 384, 128, 512),
    Shape("mid-size q/k/v/out projection", 4096, 512, 512),
    Shape("mid-size feed-forward", 4096, 512, 2048),
    Shape("square (the peak's shape)", 2048, 2048, 2048),
)
SMOKE_SHAPES = (Shape("smoke", 64, 32, 48),)


def _operands(shape: Shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [m, k] and W [k, n], W2 [n, k] scaled to keep the chain's magnitude near 1."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((shape.m, shape.k), np.float32)
    w = (rng.standard_normal((shape.k, shape.n)) / np.sqrt(shape.k)).astype(np.float32)
    w2 = (rng.standard_normal((shape.n, shape.k)) / np.sqrt(shape.n)).astype(np.float32)
    return x, w, w2


Chain = Callable[[], tuple[Any, Any]]  # runs the chain to completion -> (x [m, k], grad_w [k, n])


def jax_chain(shape: Shape, steps: int) -> Chain:
    """The chain compiled as one XLA program (a loop) on the default device."""
    import jax
    import jax.numpy as jnp

    x0, w, w2 = (jnp.asarray(a) for a in _operands(shape))

    def step(_, carry):
        x, grad_w = carry                                  # [m, k], [k, n]
        h = jnp.dot(x, w)                                  # [m, n]
        return jnp.dot(h, w2), grad_w + jnp.dot(x.T, h)   # [m, k], [k, n]

    chain = jax.jit(lambda x, g: jax.lax.fori_loop(0, steps, step, (x, g)))
    grad_w0 = jnp.zeros((shape.k, shape.n), jnp.float32)
    return lambda: jax.block_until_ready(chain(x0, grad_w0))


def torch_chain(shape: Shape, steps: int, threads: int) -> Chain:
    """The chain in eager PyTorch (`torch.mm`, `addmm_`) on `threads` threads."""
    import torch
    torch.set_num_threads(threads)
    x0, w, w2 = (torch.from_numpy(a) for a in _operands(shape))

    @torch.inference_mode()
    def chain():
        x, grad_w = x0, torch.zeros(shape.k, shape.n)
        for _ in range(steps):
            h = torch.mm(x, w)
            grad_w.addmm_(x.t(), h)
            x = torch.mm(h, w2)
        return x, grad_w

    return chain


def numpy_chain(shape: Shape, steps: int) -> Chain:
    """The chain through NumPy's BLAS, into preallocated buffers."""
    x0, w, w2 = _operands(shape)
    h, x = np.empty((shape.m, shape.n), np.float32), np.empty_like(x0)
    grad_w, product = (np.empty((shape.k, shape.n), np.float32) for _ in range(2))

    def chain():
        x[...], grad_w[...] = x0, 0.0
        for _ in range(steps):
            np.matmul(x, w, out=h)
            np.add(grad_w, np.matmul(x.T, h, out=product), out=grad_w)
            np.matmul(h, w2, out=x)  # x's last use was the line above
        return x, grad_w

    return chain


def chain_gflops(make_chain: Callable[[Shape, int], Chain], shapes: tuple[Shape, ...],
                 repeats: int) -> dict[str, float]:
    """{shape name: GFLOP/s} of `make_chain(shape, steps)`'s chain, best of `repeats` runs after
    a warm-up (compile, page faults); steps: enough for ~20 ms at 200 GFLOP/s, 2 to 200."""
    out = {}
    for shape in shapes:
        steps = min(200, max(2, int(4e9 / shape.flops_per_step)))
        seconds = measure.best_time(make_chain(shape, steps), repeats)
        out[shape.name] = shape.flops_per_step * steps / seconds / 1e9
    return out


def worker(shapes: tuple[Shape, ...], repeats: int) -> dict[str, float]:
    """This process's JAX (its XLA_FLAGS decide the backend): {shape name: GFLOP/s}."""
    return chain_gflops(jax_chain, shapes, repeats)


def run(backends: list[str], smoke: bool = False, repeats: int = 5, rounds: int = 3,
        torch_threads: int = 2, log: Callable[[str], None] = print) -> dict[str, Any]:
    """{'shapes': [...], 'gflops': {library: {shape name: GFLOP/s}}}: the best of `rounds`
    rounds, each of which runs every XLA backend (a worker process each), then PyTorch and NumPy
    in this process, so that the machine's drift over minutes touches every library alike."""
    shapes = SMOKE_SHAPES if smoke else SHAPES
    gflops: dict[str, dict[str, float]] = {}

    def keep_best(library: str, measured: dict[str, float]) -> None:
        best = gflops.setdefault(library, {})
        for name, value in measured.items():
            best[name] = max(best.get(name, 0.0), value)

    for round_index in range(rounds):
        for name in backends:
            env = worker_env(dict(os.environ, XLA_FLAGS=BACKENDS[name]))
            proc = subprocess.run(
                [sys.executable, "-m", "bench.gemm", "--worker",
                 "--repeats", str(repeats)] + (["--smoke"] if smoke else []),
                env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode:
                raise RuntimeError(f"gemm worker for backend {name!r} failed:\n"
                                   f"{proc.stderr[-2000:]}")
            keep_best(f"jax/{name}", json.loads(proc.stdout.strip().splitlines()[-1]))
        keep_best(f"torch/{torch_threads}t", chain_gflops(
            lambda shape, steps: torch_chain(shape, steps, torch_threads), shapes, repeats))
        keep_best("numpy", chain_gflops(numpy_chain, shapes, repeats))
        log(f"  gemm round {round_index + 1}/{rounds} done")
    return {"shapes": [dataclasses.asdict(s) for s in shapes], "gflops": gflops,
            "rounds": rounds}


def format_table(result: dict[str, Any]) -> str:
    """Markdown: one row per shape, GFLOP/s per library, and the best JAX over PyTorch."""
    libraries = list(result["gflops"])
    torch_name = next(name for name in libraries if name.startswith("torch/"))
    header = (["shape (m×k×n; forward, input and weight gradient)"] + libraries
              + ["best jax / torch"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for shape in result["shapes"]:
        name = shape["name"]
        row = {lib: result["gflops"][lib][name] for lib in libraries}
        best_jax = max(v for lib, v in row.items() if lib.startswith("jax/"))
        cells = [f"{name} ({shape['m']}×{shape['k']}×{shape['n']})"]
        cells += [f"{row[lib]:.0f}" for lib in libraries]
        cells.append(f"{best_jax / row[torch_name]:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.worker:
        parser.error("run it through scripts/benchmark.py gemm")
    print(json.dumps(worker(SMOKE_SHAPES if args.smoke else SHAPES, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

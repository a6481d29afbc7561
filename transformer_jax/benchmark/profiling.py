"""Where the charlm step's time goes: each variant in its own worker process, measured in turns.

Why workers: XLA flags are read once, when JAX creates its CPU backend, so a flag variant needs
its own process; and on a shared machine only measurements taken close together in time are
comparable. The driver starts every worker (each builds and compiles its variant, then waits on
stdin, costing nothing), then asks them in turn, round after round, to run `chunk` more training
steps, and reports each variant's time relative to the baseline — the trainer's loop as it is
now — measured in the same rounds (median of per-round ratios, robust to load bursts).

    python scripts/benchmark.py --profile [--profile_rounds 6 --profile_chunk 50]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable


# name -> (extra XLA_FLAGS, variant kind, description)
VARIANTS: dict[str, tuple[str, str, str]] = {
    "trainer": ("", "trainer", "baseline: one call per step + device_get(metrics), as train.py"),
    "no_device_get": ("", "no_device_get", "one call per step, no host read (block at chunk end)"),
    "no_donate": ("", "no_donate", "as trainer, state buffers not donated"),
    "loss_only": ("", "loss_only", "as trainer, but only the loss is read back"),
    "scan_10": ("", "scan_10", "10 steps per call (lax.scan over stacked batches)"),
    "scan_50": ("", "scan_50", "50 steps per call"),
    "fused_attention": ("", "fused", "model.attention=fused (jax.nn.dot_product_attention)"),
    "bfloat16": ("", "bf16", "model.dtype=bfloat16 (compute), params float32"),
    "sync_dispatch": ("", "sync_dispatch", "jax_cpu_enable_async_dispatch=False"),
    "eigen_1_thread": ("--xla_cpu_multi_thread_eigen=false", "trainer",
                       "XLA flag: single-threaded Eigen ops"),
    "no_thunk_runtime": ("--xla_cpu_use_thunk_runtime=false", "trainer",
                         "XLA flag (deprecated in this jaxlib: accepted, ignored, warns)"),
    "xnnpack": ("--xla_cpu_use_xnnpack=true", "trainer", "XLA flag: XNNPACK dot/fusions"),
    "onednn": ("--xla_cpu_use_onednn=true", "trainer", "XLA flag: oneDNN (x86 only)"),
    "fast_math": ("--xla_cpu_enable_fast_math=true", "trainer", "XLA flag: fast math (numerics!)"),
    "opt_level_0": ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true",
                    "trainer", "as the test suite compiles: cheaper compile, slower code?"),
    "scan_10+eigen_1": ("--xla_cpu_multi_thread_eigen=false", "scan_10", "both"),
    "torch_2_threads": ("", "torch2", "the PyTorch reference, torch.set_num_threads(2)"),
    "torch_1_thread": ("", "torch1", "the PyTorch reference, torch.set_num_threads(1)"),
}
DEFAULT_SET = list(VARIANTS)


# --- worker side ---------------------------------------------------------------------------------

def _make_runner(kind: str, text_path: str, data_dir: str) -> Callable[[int], None]:
    """Builds one variant of the charlm step; returns run(n) that trains n more steps."""
    import jax

    from transformer_jax.benchmark import multistep, setups

    run = setups.CharLM()
    ds = setups.text_dataset(text_path, run.seq_len, run.eval_windows, data_dir=data_dir)
    overrides = {"fused": dict(attention="fused"), "bf16": dict(dtype="bfloat16")}.get(kind, {})
    model, tcfg = setups.charlm_configs(run, ds.vocab_size, **overrides)
    ours = setups.Ours.build(model, tcfg)
    rng = jax.random.key(1)
    counter = [0]

    def batch():
        b = ds.train_batch(counter[0], run.batch_size, "decoder")
        counter[0] += 1
        return b

    if kind.startswith("torch"):
        import torch

        from transformer_jax.benchmark import torch_reference as ref
        torch.set_num_threads(2 if kind == "torch2" else 1)
        trainer = ref.TorchTrainer(
            ref.TorchGPT.from_params(jax.device_get(ours.state["params"]), model.num_heads),
            learning_rate=tcfg.learning_rate, warmup_steps=tcfg.warmup_steps,
            num_steps=tcfg.num_steps, end_learning_rate=tcfg.learning_rate * tcfg.end_learning_rate_factor)

        def run_torch(n):
            for _ in range(n):
                trainer.step(batch())
        return run_torch

    step = ours.train_step
    if kind == "no_donate":
        step = jax.jit(step.__wrapped__)
    if kind.startswith("scan_"):
        k = int(kind.split("_")[1])
        multi = multistep.make_multi_step(ours.train_step)

        def run_scan(n):
            for _ in range(n // k):
                stacked = multistep.stack_batches([batch() for _ in range(k)])
                ours.state, metrics = multi(ours.state, stacked, rng)
                jax.device_get(metrics)
        return run_scan

    def run_steps(n):
        for _ in range(n):
            ours.state, metrics = step(ours.state, batch(), rng)
            if kind == "loss_only":
                float(metrics["loss"])
            elif kind != "no_device_get":
                jax.device_get(metrics)
        jax.block_until_ready(ours.state)
    return run_steps


def worker_main(kind: str, text_path: str, data_dir: str, warm_steps: int) -> None:
    """Protocol: prints 'ready' after compiling; then per stdin line 'N' runs N steps and prints
    one JSON line {wall, cpu}; an empty line or EOF ends it."""
    if kind == "sync_dispatch":
        import jax
        jax.config.update("jax_cpu_enable_async_dispatch", False)
        kind = "trainer"
    t0 = time.perf_counter()
    run = _make_runner(kind, text_path, data_dir)
    run(warm_steps)  # compiles (and warms up caches)
    print(json.dumps({"ready": True, "setup_s": time.perf_counter() - t0}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        n = int(line)
        c0, t0 = os.times(), time.perf_counter()
        run(n)
        wall, c1 = time.perf_counter() - t0, os.times()
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        print(json.dumps({"wall": wall, "cpu": cpu, "sys": c1.system - c0.system}), flush=True)


# --- driver side ---------------------------------------------------------------------------------

class Worker:
    def __init__(self, name: str, text_path: str, data_dir: str, warm_steps: int):
        flags, kind, _ = VARIANTS[name]
        env = dict(os.environ)
        env["XLA_FLAGS"] = flags  # not the caller's: each variant runs with its flags only
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "transformer_jax.benchmark.profiling", "--worker", kind,
             "--text_path", text_path, "--data_dir", data_dir, "--warm_steps", str(warm_steps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env)

    def read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"profile worker {self.name!r} died (exit {self.proc.wait()})")
        return json.loads(line)

    def run(self, n: int) -> dict[str, Any]:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def profile(names: list[str], text_path: str, data_dir: str = "", rounds: int = 6,
            chunk: int = 50, parallel_start: int = 3, log=print) -> dict[str, dict[str, float]]:
    """Runs the variants in turns; returns {name: {ms_per_step, ratio_vs_trainer, ...}}."""
    if "trainer" not in names:
        names = ["trainer"] + names
    workers: list[Worker] = []
    try:
        for i in range(0, len(names), parallel_start):  # start a few at a time (memory, load)
            group = [Worker(n, text_path, data_dir, warm_steps=chunk) for n in names[i:i + parallel_start]]
            for w in group:
                info = w.read()
                log(f"  worker {w.name}: ready after {info['setup_s']:.1f} s")
            workers += group
        samples: dict[str, list[dict[str, float]]] = {w.name: [] for w in workers}
        for r in range(rounds):
            order = workers[r % len(workers):] + workers[:r % len(workers)]  # rotate the order
            for w in order:
                samples[w.name].append(w.run(chunk))
            log(f"  round {r + 1}/{rounds} done, load {os.getloadavg()[0]:.1f}")
    finally:
        for w in workers:
            w.close()
    base = samples["trainer"]
    out = {}
    for name, s in samples.items():
        ratios = [a["wall"] / b["wall"] for a, b in zip(s, base)]
        out[name] = {"ms_per_step": 1e3 * statistics.median(x["wall"] for x in s) / chunk,
                     "ratio_vs_trainer": statistics.median(ratios),
                     "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "cpu_per_wall": sum(x["cpu"] for x in s) / sum(x["wall"] for x in s),
                     "sys_share": sum(x["sys"] for x in s) / max(sum(x["cpu"] for x in s), 1e-9)}
    return out


def format_table(results: dict[str, dict[str, float]]) -> str:
    lines = [f"{'variant':18s} {'ms/step':>8s} {'vs trainer':>10s} {'[min, max]':>14s} "
             f"{'cpu/wall':>8s} {'sys%':>5s}  what"]
    for name, r in sorted(results.items(), key=lambda kv: kv[1]["ratio_vs_trainer"]):
        lines.append(f"{name:18s} {r['ms_per_step']:8.1f} {r['ratio_vs_trainer']:10.3f} "
                     f"[{r['ratio_min']:5.2f}, {r['ratio_max']:5.2f}] {r['cpu_per_wall']:8.2f} "
                     f"{100 * r['sys_share']:5.0f}  {VARIANTS[name][2]}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", required=True)
    parser.add_argument("--text_path", required=True)
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--warm_steps", type=int, default=50)
    a = parser.parse_args()
    worker_main(a.worker, a.text_path, a.data_dir, a.warm_steps)

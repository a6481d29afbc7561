"""The charlm trainer's variants, each in its own worker process, measured in turns.

Why workers: each variant gets a process of its own (its own compiled programs, allocator and
thread pool, as a training run has), and on a shared machine only measurements taken close
together in time are comparable. The driver starts every worker (each builds and compiles its variant, then waits on
stdin, costing nothing), then asks them in turn, round after round, to run `chunk` more training
steps, and reports each variant's time relative to the baseline — the trainer's loop as it is
now — measured in the same rounds (median of per-round ratios, robust to load bursts).

    python scripts/benchmark.py --profile [--profile_rounds 6 --profile_chunk 50]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from bench import worker_env


@dataclasses.dataclass(frozen=True)
class Variant:
    what: str
    kind: str = "trainer"  # what the worker runs, see _make_runner


# What the trainer's defaults were adopted over (README "What moved the steps"). The variants
# measured and not adopted (XLA flags and dot backends, glibc malloc, fused q/k/v, a flat
# AdamW, 3-4 microbatches, bfloat16, ...) are the README's table; their machinery is gone.
VARIANTS: dict[str, Variant] = {
    "trainer": Variant("baseline: one call per step + device_get(metrics), as train.py "
                       "(train.microbatches of configs/lm.py, as every variant unless _mb1)"),
    "scan_10": Variant("10 steps per call (lax.scan over stacked batches), configs/lm.py's",
                       "scan_10"),
    "scan_10_mb1": Variant("10 steps per call, train.microbatches=1", "scan_10_mb1"),
    "torch_2_threads": Variant("the PyTorch reference, torch.set_num_threads(2)", "torch2"),
    "torch_1_thread": Variant("the PyTorch reference, torch.set_num_threads(1)", "torch1"),
}


# --- worker side ---------------------------------------------------------------------------------

def _make_runner(kind: str, text_path: str, data_dir: str) -> Callable[[int], None]:
    """Builds one variant of the charlm step; returns run(n) that trains n more steps."""
    import jax

    from transformer_jax.train import steps
    from bench import setups

    lm_train = setups.lm_train()
    kind, _, passes = kind.partition("_mb")  # _mbN: train.microbatches=N, not configs/lm.py's
    run = setups.CharLM(microbatches=int(passes) if passes else lm_train.microbatches)
    ds = setups.text_dataset(text_path, run.seq_len, run.eval_windows, data_dir=data_dir)
    model, tcfg = setups.charlm_configs(run, ds.vocab_size)
    ours = setups.Ours.build(model, tcfg)
    rng = jax.random.key(1)
    counter = [0]

    def batch():
        b = ds.train_batch(counter[0], run.batch_size, "decoder")
        counter[0] += 1
        return b

    if kind.startswith("torch"):
        import torch

        from bench import torch_reference as ref
        torch.set_num_threads(2 if kind == "torch2" else 1)
        trainer = ref.TorchTrainer(
            ref.TorchGPT.from_params(jax.device_get(ours.state["params"]), model.num_heads),
            learning_rate=tcfg.learning_rate, warmup_steps=tcfg.warmup_steps,
            num_steps=tcfg.num_steps, end_learning_rate=tcfg.learning_rate * tcfg.end_learning_rate_factor)

        def run_torch(n):
            for _ in range(n):
                trainer.step(batch())
        return run_torch

    if kind.startswith("scan_"):
        k = int(kind.split("_")[1])
        multi = ours.multi_step()

        def run_scan(n):
            for _ in range(n // k):
                stacked = steps.stack_batches([batch() for _ in range(k)])
                ours.state, metrics = multi(ours.state, stacked, rng)
                jax.device_get(metrics)
        return run_scan

    def run_steps(n):
        for _ in range(n):
            ours.state, metrics = ours.train_step(ours.state, batch(), rng)
            jax.device_get(metrics)
        jax.block_until_ready(ours.state)
    return run_steps


def worker_main(kind: str, text_path: str, data_dir: str, warm_steps: int) -> None:
    """Protocol: prints 'ready' after compiling; then per stdin line 'N' runs N steps and prints
    one JSON line {wall, cpu}; an empty line or EOF ends it.

    Protocol lines alone go to stdout: whatever else writes there (TFDS announcing a dataset
    it prepares, C++ logging) is sent to stderr, which the driver keeps for error messages."""
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    t0 = time.perf_counter()
    run = _make_runner(kind, text_path, data_dir)
    run(warm_steps)  # compiles (and warms up caches)
    print(json.dumps({"ready": True, "setup_s": time.perf_counter() - t0}), file=protocol, flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        n = int(line)
        c0, t0 = os.times(), time.perf_counter()
        run(n)
        wall, c1 = time.perf_counter() - t0, os.times()
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        print(json.dumps({"wall": wall, "cpu": cpu, "sys": c1.system - c0.system}), file=protocol,
              flush=True)


# --- driver side ---------------------------------------------------------------------------------

class Worker:
    def __init__(self, name: str, text_path: str, data_dir: str, warm_steps: int):
        variant = VARIANTS[name]
        env = worker_env(dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        self.name = name
        self.stderr = tempfile.TemporaryFile("w+")  # read back if the worker dies
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.profiling", "--worker", variant.kind,
             "--text_path", text_path, "--data_dir", data_dir, "--warm_steps", str(warm_steps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            env=env)

    def read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.stderr.seek(0)
            tail = "".join(self.stderr.readlines()[-15:])
            raise RuntimeError(f"profile worker {self.name!r} died (exit {code}); its stderr "
                               f"ends:\n{tail}")
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
        self.stderr.close()


def profile(names: list[str], text_path: str, data_dir: str = "", rounds: int = 6,
            chunk: int = 50, group_size: int = 8, log=print) -> dict[str, dict[str, float]]:
    """Runs the variants in turns; returns {name: {ms_per_step, ratio_vs_trainer, ...}}.

    At most `group_size` workers live at once (each holds ~0.7 GB); every group includes the
    baseline, and each variant's ratio is to the baseline of its own group and rounds.
    """
    from bench import setups
    # the dataset the workers read (_make_runner's), prepared once, here, not by several at once
    setups.text_dataset(text_path, setups.CharLM.seq_len, setups.CharLM.eval_windows,
                        data_dir=data_dir)
    others = [n for n in dict.fromkeys(names) if n != "trainer"]
    per_group = max(group_size - 1, 1)
    out: dict[str, dict[str, float]] = {}
    for g in range(0, max(len(others), 1), per_group):
        group = ["trainer"] + others[g:g + per_group]
        log(f"profile group {g // per_group + 1}: {', '.join(group)}")
        samples = _run_group(group, text_path, data_dir, rounds, chunk, log)
        base = samples["trainer"]
        for name, s in samples.items():
            ratios = [a["wall"] / b["wall"] for a, b in zip(s, base)]
            result = {"ms_per_step": 1e3 * statistics.median(x["wall"] for x in s) / chunk,
                      "ratio_vs_trainer": statistics.median(ratios),
                      "ratio_min": min(ratios), "ratio_max": max(ratios),
                      "cpu_per_wall": sum(x["cpu"] for x in s) / sum(x["wall"] for x in s),
                      "sys_share": sum(x["sys"] for x in s) / max(sum(x["cpu"] for x in s), 1e-9)}
            if name != "trainer" or name not in out:
                out[name] = result
        log(format_table({n: out[n] for n in group}))
    return out


def _run_group(names: list[str], text_path: str, data_dir: str, rounds: int, chunk: int,
               log) -> dict[str, list[dict[str, float]]]:
    workers: list[Worker] = []
    try:
        for i in range(0, len(names), 3):  # start three at a time: compiling is CPU-bound
            started = [Worker(n, text_path, data_dir, warm_steps=chunk) for n in names[i:i + 3]]
            workers += started
            for w in started:
                log(f"  worker {w.name}: ready after {w.read()['setup_s']:.1f} s")
        samples: dict[str, list[dict[str, float]]] = {w.name: [] for w in workers}
        for r in range(rounds):
            order = workers[r % len(workers):] + workers[:r % len(workers)]  # rotate the order
            for w in order:
                samples[w.name].append(w.run(chunk))
            log(f"  round {r + 1}/{rounds}, load {os.getloadavg()[0]:.1f}")
        return samples
    finally:
        for w in workers:
            w.close()


def format_table(results: dict[str, dict[str, float]]) -> str:
    """One row per variant, fastest first. 'vs torch' chains the two ratios through the
    baseline: (variant / trainer) / (torch_2_threads / trainer)."""
    torch = results.get("torch_2_threads", {}).get("ratio_vs_trainer")
    lines = [f"{'variant':18s} {'ms/step':>8s} {'vs trainer':>10s} {'[min, max]':>14s} "
             f"{'vs torch':>8s} {'cpu/wall':>8s} {'sys%':>5s}  what"]
    for name, r in sorted(results.items(), key=lambda kv: kv[1]["ratio_vs_trainer"]):
        vs_torch = f"{r['ratio_vs_trainer'] / torch:8.3f}" if torch else f"{'-':>8s}"
        lines.append(f"{name:18s} {r['ms_per_step']:8.1f} {r['ratio_vs_trainer']:10.3f} "
                     f"[{r['ratio_min']:5.2f}, {r['ratio_max']:5.2f}] {vs_torch} "
                     f"{r['cpu_per_wall']:8.2f} {100 * r['sys_share']:5.0f}  {VARIANTS[name].what}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", required=True)
    parser.add_argument("--text_path", required=True)
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--warm_steps", type=int, default=50)
    a = parser.parse_args()
    worker_main(a.worker, a.text_path, a.data_dir, a.warm_steps)

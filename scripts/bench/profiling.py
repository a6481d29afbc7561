"""The charlm trainer's variants, each in its own worker process, measured in turns.

Why workers: each variant gets a process of its own (its own compiled programs, allocator,
thread pool and XLA_FLAGS, as a training run has), and on a shared machine only measurements
taken close together in time are comparable. The driver starts every worker (each builds and
compiles its variant, then waits on stdin, costing nothing), then asks them in turn, round after
round, to run `chunk` more training steps, and reports each variant's time relative to the
baseline — the trainer's loop as it is now — measured in the same rounds (median of per-round
ratios, robust to load bursts), and each worker's peak resident memory (its compiles included).

The `xla_*` variants are the k-step program under one of XLA:CPU's options (an XLA_FLAGS of
their worker), and the `model_*` variants under a model.* setting (`model_bf16_dense`:
model.dense_matmul=bfloat16): their ratio is to the same program without it, measured in the
same rounds, and `same_arithmetic` says whether the parameters after the last round (every
step the workers ran, on the same batches) are bitwise that program's. An option that pays on
your CPU and keeps the arithmetic can be set by exporting XLA_FLAGS; one that changes it would
change the committed studies' results.

    python scripts/benchmark.py profile [--rounds 6 --chunk 50]
    python scripts/benchmark.py profile --variants xla_vector_512,xla_no_ynn
    python scripts/benchmark.py profile --smoke --rounds 1 --chunk 10   # tiny shapes (the tests')

`settings` (the run's configs/lm.py settings beside the variant's, e.g. the suite's --smoke
shapes) reach each worker as JSON on its command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional

from bench import measure, worker_env
from bench.gemm import YNN_FUSION_TYPE


@dataclasses.dataclass(frozen=True)
class Variant:
    what: str
    kind: str = "trainer"  # what the worker runs, see _make_runner
    xla_flags: str = ""  # added to its worker's XLA_FLAGS; then it is compared with `kind`
    model: tuple[tuple[str, str], ...] = ()  # model.* (field, value) settings; likewise


_YNN = f"{YNN_FUSION_TYPE}LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"  # + which other fusions

# What the trainer's defaults were adopted over, and XLA:CPU's options for this step. Other
# candidates measured and not adopted (glibc malloc, fused q/k/v, a flat AdamW, 3-4
# microbatches, bfloat16 activations, ...) are in the issues' closing notes and git history.
VARIANTS: dict[str, Variant] = {
    "trainer": Variant("baseline: one call per step + device_get(metrics), as train.py "
                       "(train.microbatches of configs/lm.py, as every variant unless _mb1)"),
    "scan_10": Variant("10 steps per call (lax.scan over stacked batches), configs/lm.py's "
                       "until it took 50", "scan_10"),
    "scan_50": Variant("50 steps per call, configs/lm.py's (one log interval)", "scan_50"),
    "scan_10_mb1": Variant("10 steps per call, train.microbatches=1", "scan_10_mb1"),
    "torch_2_threads": Variant("the PyTorch reference, torch.set_num_threads(2)", "torch2"),
    "torch_1_thread": Variant("the PyTorch reference, torch.set_num_threads(1)", "torch1"),
    "xla_vector_512": Variant("scan_10, XLA's loops in 512-bit vectors (it prefers 256)",
                              "scan_10", "--xla_cpu_prefer_vector_width=512"),
    "xla_legacy_emitters": Variant("scan_10, XLA's older LLVM IR fusion emitters",
                                   "scan_10", "--xla_cpu_use_fusion_emitters=false"),
    "xla_ynn_eltwise": Variant("scan_10, elementwise fusions in YNNPACK too (default: dots "
                               "and reductions)", "scan_10",
                               f"{_YNN},LIBRARY_FUSION_TYPE_ELTWISE,LIBRARY_FUSION_TYPE_REDUCE"),
    "xla_no_ynn": Variant("scan_10 without YNNPACK: Eigen's dots, XLA's reductions", "scan_10",
                          YNN_FUSION_TYPE),
    "xla_concurrency_scheduler": Variant(
        "scan_10, XLA's concurrency-optimized scheduler", "scan_10",
        "--xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED"),
    "model_bf16_dense": Variant(
        "scan_10, every Dense product on bfloat16 operands summed in float32 (AMX, AVX512-BF16)",
        "scan_10", model=(("dense_matmul", "bfloat16"),)),
}


def steps_per_call(name: str) -> int:
    """The steps each compiled call of variant `name` runs (a chunk must be a multiple)."""
    return _kind_steps_per_call(VARIANTS[name].kind)


def _kind_steps_per_call(kind: str) -> int:
    """k of a worker kind 'scan_k[_...]', 1 for the others (one step per call)."""
    return int(kind.split("_")[1]) if kind.startswith("scan_") else 1


def changes(variant: Variant) -> str:
    """What a variant adds to its reference's program, as a user would set it ('' for none)."""
    return " ".join([*(f"model.{field}={value}" for field, value in variant.model),
                     *([f"XLA_FLAGS={variant.xla_flags}"] if variant.xla_flags else [])])


def worker_xla_flags(user_flags: str, variant: Variant) -> str:
    """The worker's XLA_FLAGS: the user's, then the variant's (a flag given twice: the last)."""
    return " ".join(filter(None, [user_flags.strip(), variant.xla_flags]))


def params_digest(params: Any) -> str:
    """SHA-256 of every parameter's bytes, in tree order: equal only for bitwise-equal weights."""
    import jax
    import numpy as np
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{leaf.dtype}{leaf.shape}".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


# --- worker side ---------------------------------------------------------------------------------

def _make_runner(kind: str, text_path: str, data_dir: str, model_settings: dict[str, str],
                 settings: Optional[dict[str, Any]] = None
                 ) -> tuple[Callable[[int], None], Callable[[], Optional[str]]]:
    """Builds one variant of the charlm step (the run's `settings`, then the variant's model.*
    settings); returns run(n), which trains n more steps, and digest(), the parameters' digest
    now (None for PyTorch's)."""
    import jax

    from transformer_jax.train import steps
    from bench import setups

    kind, _, passes = kind.partition("_mb")  # _mbN: train.microbatches=N, not configs/lm.py's
    settings = {**(settings or {}),
                **{f"model.{field}": value for field, value in model_settings.items()}}
    if passes:
        settings["train.microbatches"] = int(passes)
    run = setups.CharLM().override(settings)
    ds = setups.text_dataset(text_path, run.config.data.seq_len, run.config.data.num_eval,
                             data_dir=data_dir)
    model, tcfg = run.configs(ds.vocab_size)
    ours = setups.Ours.build(model, tcfg)
    rng = jax.random.key(1)
    counter = [0]

    def batch():
        b = ds.train_batch(counter[0], tcfg.batch_size, "decoder")
        counter[0] += 1
        return b

    if kind.startswith("torch"):
        return _torch_runner(2 if kind == "torch2" else 1, ours, batch), lambda: None

    def digest():
        return params_digest(ours.state["params"])

    if kind.startswith("scan_"):
        k = _kind_steps_per_call(kind)
        multi = ours.multi_step()

        def run_scan(n):
            for _ in range(n // k):
                stacked = steps.stack_batches([batch() for _ in range(k)])
                ours.state, metrics = multi(ours.state, stacked, rng)
                jax.device_get(metrics)
        return run_scan, digest

    from transformer_jax.runtime import compile_memory
    compile_memory.reuse_large_buffers()  # as the trainer does at one step per call

    def run_steps(n):
        for _ in range(n):
            ours.state, metrics = ours.train_step(ours.state, batch(), rng)
            jax.device_get(metrics)
        jax.block_until_ready(ours.state)
    return run_steps, digest


def _torch_runner(threads: int, ours, batch: Callable[[], dict]) -> Callable[[int], None]:
    """PyTorch's reference from our initial weights, on `threads` threads: run(n)."""
    import jax
    import torch

    from bench import torch_reference as ref
    torch.set_num_threads(threads)
    tcfg = ours.train
    trainer = ref.TorchTrainer(
        ref.TorchGPT.from_params(jax.device_get(ours.state["params"]), ours.model.num_heads),
        learning_rate=tcfg.learning_rate, warmup_steps=tcfg.warmup_steps,
        num_steps=tcfg.num_steps,
        end_learning_rate=tcfg.learning_rate * tcfg.end_learning_rate_factor)

    def run_torch(n):
        for _ in range(n):
            trainer.step(batch())
    return run_torch


def worker_main(kind: str, text_path: str, data_dir: str, warm_steps: int,
                model_settings: dict[str, str],
                settings: Optional[dict[str, Any]] = None) -> None:
    """Protocol: prints 'ready' after compiling; then per stdin line 'N' runs N steps and prints
    one JSON line {wall, cpu, sys, digest, peak_mib} (the parameters' digest, taken after the
    timing; the process's peak resident memory so far); an empty line or EOF ends it.

    Protocol lines alone go to stdout: whatever else writes there (TFDS announcing a dataset
    it prepares, C++ logging) is sent to stderr, which the driver keeps for error messages."""
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    t0 = time.perf_counter()
    run, digest = _make_runner(kind, text_path, data_dir, model_settings, settings)
    run(warm_steps)  # compiles (and warms up caches)
    print(json.dumps({"ready": True, "setup_s": time.perf_counter() - t0}), file=protocol, flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        clock = measure.Clock()
        with clock:
            run(int(line))
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        print(json.dumps({"wall": clock.wall, "cpu": clock.cpu, "sys": clock.system,
                          "digest": digest(), "peak_mib": peak_mib}), file=protocol, flush=True)


# --- driver side ---------------------------------------------------------------------------------

class Worker:
    def __init__(self, name: str, text_path: str, data_dir: str, warm_steps: int,
                 settings: Optional[dict[str, Any]] = None):
        variant = VARIANTS[name]
        env = worker_env(dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        env["XLA_FLAGS"] = worker_xla_flags(env.get("XLA_FLAGS", ""), variant)
        self.name = name
        self.stderr = tempfile.TemporaryFile("w+")  # read back if the worker dies
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.profiling", "--worker", variant.kind,
             "--text_path", text_path, "--data_dir", data_dir, "--warm_steps", str(warm_steps),
             *(f"--model={field}={value}" for field, value in variant.model),
             "--settings", json.dumps(settings or {})],
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
            chunk: int = 50, group_size: int = 8, log=print,
            settings: Optional[dict[str, Any]] = None) -> dict[str, dict[str, Any]]:
    """Runs the variants in turns; returns {name: {ms_per_step, ratio_vs_trainer, ...}}, and
    for an `xla_*` or `model_*` variant also its reference (the same program without the
    option, run in the same group), ratio_vs_reference, same_arithmetic and `changes` (what
    the option is, as a user sets it).

    At most `group_size` workers live at once (each holds ~0.7 GB); every group includes the
    baseline, and each variant's ratio is to the baseline of its own group and rounds.
    """
    from bench import setups
    # the dataset the workers read (_make_runner's), prepared once, here, not by several at once
    data = setups.CharLM().override(settings or {}).config.data
    setups.text_dataset(text_path, data.seq_len, data.num_eval, data_dir=data_dir)
    out: dict[str, dict[str, Any]] = {}
    for g, group in enumerate(groups(names, group_size)):
        log(f"profile group {g + 1}: {', '.join(group)}")
        samples = _run_group(group, text_path, data_dir, rounds, chunk, log, settings)
        for name, s in samples.items():
            if name not in out:  # a baseline or reference run in several groups: the first
                out[name] = _result(s, samples["trainer"], chunk)
                reference = _reference(name)
                if reference:
                    out[name].update(_versus(s, samples[reference]), reference=reference,
                                     xla_flags=VARIANTS[name].xla_flags,
                                     changes=changes(VARIANTS[name]))
        log(format_table({n: out[n] for n in group}))
    return out


def _reference(name: str) -> Optional[str]:
    """The variant an option's variant is compared with: its program without the option."""
    variant = VARIANTS[name]
    return variant.kind if changes(variant) else None


def groups(names: list[str], group_size: int) -> list[list[str]]:
    """The workers to run together: each group the baseline, then the variants, each XLA
    option's reference before it in its group; at most `group_size` where the references allow."""
    out: list[list[str]] = []
    current: list[str] = []
    for name in dict.fromkeys(names):
        if name == "trainer" or name in current:
            continue
        members = [n for n in (_reference(name), name) if n and n != "trainer"]
        need = [n for n in members if n not in current]
        if current and 1 + len(current) + len(need) > group_size:
            out.append(current)
            current = members
        else:
            current += need
    if current or not out:
        out.append(current)
    return [["trainer"] + group for group in out]


def _result(samples: list[dict], base: list[dict], chunk: int) -> dict[str, float]:
    ratios = [a["wall"] / b["wall"] for a, b in zip(samples, base)]
    return {"ms_per_step": 1e3 * statistics.median(x["wall"] for x in samples) / chunk,
            "ratio_vs_trainer": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "cpu_per_wall": sum(x["cpu"] for x in samples) / sum(x["wall"] for x in samples),
            "sys_share": sum(x["sys"] for x in samples) / max(sum(x["cpu"] for x in samples), 1e-9),
            "peak_mib": samples[-1]["peak_mib"]}


def _versus(samples: list[dict], reference: list[dict]) -> dict[str, Any]:
    """A variant against its reference, same rounds: the median per-round ratio of wall
    times, and whether both workers' parameters are bitwise equal after the last round (they
    ran the same steps on the same batches)."""
    return {"ratio_vs_reference": statistics.median(
                a["wall"] / b["wall"] for a, b in zip(samples, reference)),
            "same_arithmetic": samples[-1]["digest"] == reference[-1]["digest"]}


def _run_group(names: list[str], text_path: str, data_dir: str, rounds: int, chunk: int,
               log, settings: Optional[dict[str, Any]] = None
               ) -> dict[str, list[dict[str, float]]]:
    workers: list[Worker] = []
    try:
        for i in range(0, len(names), 3):  # start three at a time: compiling is CPU-bound
            started = [Worker(n, text_path, data_dir, warm_steps=chunk, settings=settings)
                       for n in names[i:i + 3]]
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


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """One row per variant, fastest first. 'vs torch' chains the two ratios through the
    baseline: (variant / trainer) / (torch_2_threads / trainer); 'vs ref' and 'same math' are
    an XLA option's against its program without it."""
    torch = results.get("torch_2_threads", {}).get("ratio_vs_trainer")
    lines = [f"{'variant':26s} {'ms/step':>8s} {'vs trainer':>10s} {'[min, max]':>14s} "
             f"{'vs torch':>8s} {'vs ref':>7s} {'same math':>9s} {'cpu/wall':>8s} {'sys%':>5s}"
             f" {'MiB':>5s}  what"]
    for name, r in sorted(results.items(), key=lambda kv: kv[1]["ratio_vs_trainer"]):
        vs_torch = f"{r['ratio_vs_trainer'] / torch:8.3f}" if torch else f"{'-':>8s}"
        vs_ref = f"{r['ratio_vs_reference']:7.3f}" if "reference" in r else f"{'-':>7s}"
        same = {True: "yes", False: "no"}.get(r.get("same_arithmetic"), "-")
        lines.append(f"{name:26s} {r['ms_per_step']:8.1f} {r['ratio_vs_trainer']:10.3f} "
                     f"[{r['ratio_min']:5.2f}, {r['ratio_max']:5.2f}] {vs_torch} {vs_ref} "
                     f"{same:>9s} {r['cpu_per_wall']:8.2f} {100 * r['sys_share']:5.0f} "
                     f"{r['peak_mib']:5.0f}  {VARIANTS[name].what}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", required=True)
    parser.add_argument("--text_path", required=True)
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--warm_steps", type=int, default=50)
    parser.add_argument("--model", action="append", default=[],
                        help="FIELD=VALUE, a model.* setting")
    parser.add_argument("--settings", default="{}",
                        help="JSON {section.field: value}: the run's configs/lm.py settings")
    a = parser.parse_args()
    worker_main(a.worker, a.text_path, a.data_dir, a.warm_steps,
                dict(setting.split("=", 1) for setting in a.model), json.loads(a.settings))

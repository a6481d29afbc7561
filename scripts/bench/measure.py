"""The benchmark's measurements: matmul peak, the charlm race against PyTorch, the midsize
throughput (MFU), compile-time scaling with depth, and S seeds in one program.

How timing stays honest on a shared machine: contenders run in the same process, in
alternating chunks of steps (ours, reference, ours, ...), so a load burst hits both; ratios are
reported alongside the wall times, and so are the process's CPU seconds. Our side is the
project's own code path (`setups.Ours`), looped exactly as `train.train_and_evaluate` does:
one call per step, then `jax.device_get(metrics)`.
"""
from __future__ import annotations

import dataclasses
import math
import os
import resource
import threading
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from transformer_jax.train import steps
from bench import multistep, setups

Log = Callable[[str], None]


# --- memory and time helpers --------------------------------------------------------------------

class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled every 20 ms) — the
    kernel's high-water mark (ru_maxrss) covers the whole process life, so it is reported too."""

    def __init__(self, interval: float = 0.02):
        import psutil
        self._proc, self._interval = psutil.Process(), interval
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def _sample(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._proc.memory_info().rss / 2 ** 20)
            self._stop.wait(self._interval)

    def __enter__(self) -> "PeakRSS":
        self.peak_mb = self._proc.memory_info().rss / 2 ** 20
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._proc.memory_info().rss / 2 ** 20)
        self.process_max_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Clock:
    """Accumulates wall, CPU (user + system) and system seconds, and the process's minor page
    faults, over several timed blocks. System time and faults show what the kernel does for a
    step: mapping fresh pages for buffers a call allocates anew (see `midsize`)."""

    def __init__(self):
        self.wall = self.cpu = self.system = 0.0
        self.page_faults = 0
        self.chunks: list[float] = []

    def __enter__(self):
        self._t, self._c = time.perf_counter(), os.times()
        self._faults = _minor_faults()
        return self

    def __exit__(self, *exc):
        wall, c = time.perf_counter() - self._t, os.times()
        self.wall += wall
        self.system += c.system - self._c.system
        self.cpu += (c.user - self._c.user) + (c.system - self._c.system)
        self.page_faults += _minor_faults() - self._faults
        self.chunks.append(wall)


def _minor_faults() -> int:
    """Minor page faults of this process so far, all its threads (a page mapped in on first
    touch, no disk read)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def best_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up (and compile)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


# --- matmul peak -------------------------------------------------------------------------------

def matmul_peak(n: int = 2048, repeats: int = 5, torch_threads: int = 2) -> dict[str, float]:
    """GFLOP/s of an f32 n³ matmul, best of `repeats`, in JAX (jitted jnp.dot) and PyTorch."""
    import torch

    torch.set_num_threads(torch_threads)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), np.float32) for _ in range(2))
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    dot = jax.jit(jnp.dot)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    flops = 2.0 * n ** 3
    jax_s = best_time(lambda: dot(ja, jb).block_until_ready(), repeats)
    torch_s = best_time(lambda: torch.mm(ta, tb), repeats)
    out = {"jax_gflops": flops / jax_s / 1e9, "torch_gflops": flops / torch_s / 1e9}
    out["peak_gflops"] = max(out.values())
    return out


# --- FLOPs ---------------------------------------------------------------------------------------

def matmul_params(params: Any) -> int:
    """Weight-matrix parameters (every 'kernel'): attention q/k/v/out, FFN, output head.

    Embedding and position tables (lookups, no matmul), biases and norm scales are left out."""
    total = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        if getattr(path[-1], "key", None) == "kernel":
            total += int(np.size(leaf))
    return total


def train_flops_per_token(n_matmul: int, num_layers: int, seq_len: int, d_model: int) -> float:
    """6·N (forward 2N + backward 4N) + 12·L·T·d (QKᵀ and A·V over the full T×T, forward and
    backward; not halved for causality, which our explicit attention does not exploit)."""
    return 6.0 * n_matmul + 12.0 * num_layers * seq_len * d_model


# --- charlm: ours against PyTorch -------------------------------------------------------------

class OursRunner:
    """Our trainer's loop, one chunk at a time."""

    def __init__(self, ours: setups.Ours, ds, batch_size: int, rng, steps_per_call: int = 1):
        self.ours, self.ds, self.batch_size, self.rng = ours, ds, batch_size, rng
        self.k = steps_per_call
        self.multi = ours.multi_step() if steps_per_call > 1 else None
        self.losses: list[float] = []

    def first_call(self, step: int) -> float:
        """Trace + compile + the first step(s); returns seconds."""
        t = time.perf_counter()
        self.run(step, self.k)
        return time.perf_counter() - t

    def run(self, start: int, n: int) -> None:
        ours = self.ours
        if self.multi is None:  # exactly train.train_and_evaluate's loop body
            for step in range(start, start + n):
                batch = self.ds.train_batch(step, self.batch_size, "decoder")
                ours.state, metrics = ours.train_step(ours.state, batch, self.rng)
                metrics = jax.device_get(metrics)  # also waits for the step
                if not metrics["finite"]:
                    raise FloatingPointError(f"ours diverged at step {step + 1}")
                self.losses.append(float(metrics["loss"]))
            return
        if n % self.k:
            raise ValueError(f"chunk {n} is not a multiple of steps_per_call={self.k}")
        for s in range(start, start + n, self.k):
            batches = steps.stack_batches(
                [self.ds.train_batch(i, self.batch_size, "decoder") for i in range(s, s + self.k)])
            ours.state, metrics = self.multi(ours.state, batches, self.rng)
            metrics = jax.device_get(metrics)
            if not np.all(metrics["finite"]):
                raise FloatingPointError(f"ours diverged within steps {s + 1}..{s + self.k}")
            self.losses.extend(np.asarray(metrics["loss"]).tolist())

    def evaluate(self, batches) -> float:
        return self.ours.evaluate(batches)


class TorchRunner:
    def __init__(self, params: Any, model, tcfg, ds, batch_size: int, threads: int = 2):
        from bench import torch_reference as ref
        self.ref, self.ds, self.batch_size, self.threads = ref, ds, batch_size, threads
        self.trainer = ref.TorchTrainer(
            ref.TorchGPT.from_params(params, model.num_heads), learning_rate=tcfg.learning_rate,
            warmup_steps=tcfg.warmup_steps, num_steps=tcfg.num_steps,
            end_learning_rate=tcfg.learning_rate * tcfg.end_learning_rate_factor,
            weight_decay=tcfg.weight_decay, b1=tcfg.b1, b2=tcfg.b2, grad_clip_norm=tcfg.grad_clip_norm)
        self.losses: list[float] = []

    def run(self, start: int, n: int) -> None:
        import torch
        torch.set_num_threads(self.threads)
        for step in range(start, start + n):
            loss = self.trainer.step(self.ds.train_batch(step, self.batch_size, "decoder"))
            if not math.isfinite(loss):
                raise FloatingPointError(f"torch diverged at step {step + 1}")
            self.losses.append(loss)

    def evaluate(self, batches) -> float:
        return self.ref.evaluate(self.trainer.model, batches)


def charlm(text_path: str, run: setups.CharLM = setups.CharLM(), *, chunk: int = 100,
           steps_per_call: int = 10, torch_threads: int = 2, torch_1_thread: bool = False,
           data_dir: str = "", log: Log = print) -> dict[str, Any]:
    """Trains our model (trainer loop; and k steps per call) and the PyTorch reference on the
    same batches from the same initial weights, in alternating chunks; evaluates them all.

    torch_1_thread adds the reference on one thread: on a loaded machine two OpenMP threads
    can be much slower than one (a descheduled thread stalls the other at every barrier)."""
    built = run.build(text_path, data_dir)
    contenders = _charlm_contenders(built, steps_per_call, torch_threads, torch_1_thread)
    # Compiling happens in the first call, outside the timed loop: every contender runs steps
    # [0, first) untimed (first = k, the steps of one multi-step call), then the same timed steps.
    first = max(steps_per_call, 1)
    compile_s = {}
    for name, c in contenders.items():
        t = time.perf_counter()
        c.run(0, first)
        compile_s[name] = time.perf_counter() - t
    clocks, step = _alternate(contenders, first, chunk, built.train.num_steps, log)
    eval_batches = list(built.dataset.eval_batches(built.train.batch_size, "decoder"))
    out: dict[str, Any] = {"timed_steps": step - first, "steps": step,
                           "eval_windows": built.dataset.num_eval_windows,
                           "contenders": _charlm_rows(contenders, clocks, compile_s,
                                                      step - first, eval_batches)}
    ours_losses, torch_losses = (np.asarray(contenders[n].losses[:100]) for n in ("ours", "torch"))
    out["max_train_loss_gap_first_100"] = float(np.max(np.abs(ours_losses - torch_losses)))
    return out


def _charlm_contenders(built, steps_per_call: int, torch_threads: int, torch_1_thread: bool
                       ) -> dict[str, Any]:
    """Our trainer's loop (and k steps per call) and PyTorch, from the same initial weights."""
    ds, model, tcfg, batch_size = built.dataset, built.model, built.train, built.train.batch_size
    rng = jax.random.key(built.seed + 1)
    ours = setups.Ours.build(model, tcfg, seed=built.seed)
    params0 = jax.device_get(ours.state["params"])  # before the first (donating) step
    contenders: dict[str, Any] = {"ours": OursRunner(ours, ds, batch_size, rng)}
    if steps_per_call > 1:
        twin = setups.Ours.build(model, tcfg, seed=built.seed)
        contenders[f"ours_{steps_per_call}_per_call"] = OursRunner(twin, ds, batch_size, rng,
                                                                   steps_per_call)
    contenders["torch"] = TorchRunner(params0, model, tcfg, ds, batch_size, torch_threads)
    if torch_1_thread:
        contenders["torch_1_thread"] = TorchRunner(params0, model, tcfg, ds, batch_size, 1)
    return contenders


def _alternate(contenders: dict[str, Any], first: int, chunk: int, num_steps: int, log: Log
               ) -> tuple[dict[str, Clock], int]:
    """Runs every contender over the same steps from `first`, in turns of `chunk` steps (a
    multiple of `first`), who goes first rotating; returns each one's clock and the last step."""
    clocks = {name: Clock() for name in contenders}
    chunk = max(chunk - chunk % first, first)
    step, names = first, list(contenders)
    while step < num_steps:
        n = min(chunk, num_steps - step)
        n -= n % first
        if n == 0:
            break
        names = names[1:] + names[:1]  # rotate who goes first
        for name in names:
            with clocks[name]:
                contenders[name].run(step, n)
        step += n
        if (step // chunk) % 5 == 0 or step >= num_steps:
            log(f"  charlm step {step}/{num_steps}: " + ", ".join(
                f"{k} {1e3 * clocks[k].wall / (step - first):.1f} ms/step" for k in names)
                + f", load {os.getloadavg()[0]:.1f}")
    return clocks, step


def _charlm_rows(contenders: dict[str, Any], clocks: dict[str, Clock], compile_s: dict[str, float],
                 timed_steps: int, eval_batches: list) -> dict[str, dict[str, float]]:
    """Each contender's times, losses and ratios to PyTorch's wall time."""
    rows = {}
    for name, c in contenders.items():
        clock = clocks[name]
        # per alternating chunk: this contender's wall time / PyTorch's on the same steps
        chunk_ratios = np.divide(clock.chunks, clocks["torch"].chunks)
        rows[name] = {
            "wall_s": clock.wall, "cpu_s": clock.cpu, "ms_per_step": 1e3 * clock.wall / timed_steps,
            "steps_per_s": timed_steps / clock.wall, "first_call_s": compile_s[name],
            "val_loss": c.evaluate(eval_batches),
            "final_train_loss": float(np.mean(c.losses[-50:])),
            "chunk_ratio_vs_torch_median": float(np.median(chunk_ratios)),
            "chunk_ratio_vs_torch_worst": float(np.max(chunk_ratios)),
            "wall_ratio_vs_torch": clock.wall / clocks["torch"].wall,
        }
    return rows


def compile_time(num_layers: int, run: setups.CharLM, vocab_size: int, batch, repeats: int = 2
                 ) -> dict[str, float]:
    """Seconds to trace+lower and to compile our train step at this depth (charlm width);
    best of `repeats`, with JAX's in-memory caches cleared before each."""
    model, tcfg = run.override({"model.num_layers": num_layers}).configs(vocab_size)
    train_step, state = setups.Ours.abstract(model, tcfg)  # lowering needs shapes, no weights
    rng = jax.random.key(0)
    lower_s, compile_s = math.inf, math.inf
    for _ in range(repeats):
        jax.clear_caches()
        t = time.perf_counter()
        lowered = train_step.lower(state, batch, rng)
        t2 = time.perf_counter()
        lowered.compile()
        t3 = time.perf_counter()
        lower_s, compile_s = min(lower_s, t2 - t), min(compile_s, t3 - t2)
    return {"lower_s": lower_s, "compile_s": compile_s, "total_s": lower_s + compile_s}


# --- midsize throughput -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Midsize:
    num_layers: int = 6
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048  # 4·d_model
    seq_len: int = 256
    batch_size: int = 16
    steps: int = 4  # timed steps, after one untimed (compiling) step


def midsize_setup(text_path: str, cfg: Midsize, data_dir: str = "") -> tuple[Any, setups.Ours]:
    """The mid-size model's dataset and train state (what `midsize` times)."""
    from transformer_jax.config import TrainConfig

    ds = setups.text_dataset(text_path, cfg.seq_len, 16, data_dir=data_dir)
    model = setups.model_config(ds.vocab_size, d_model=cfg.d_model, num_heads=cfg.num_heads,
                                num_layers=cfg.num_layers, d_ff=cfg.d_ff, seq_len=cfg.seq_len)
    return ds, setups.Ours.build(model, TrainConfig(num_steps=1000, batch_size=cfg.batch_size,
                                                    warmup_steps=10))


def midsize(text_path: str, cfg: Midsize, peak_gflops: float, data_dir: str = "",
            log: Log = print) -> dict[str, Any]:
    ds, ours = midsize_setup(text_path, cfg, data_dir)
    n_matmul = matmul_params(ours.state["params"])
    runner = OursRunner(ours, ds, cfg.batch_size, jax.random.key(1))
    first_call_s = runner.first_call(0)
    per_step = []
    clock = Clock()
    for i in range(cfg.steps):
        with clock:
            runner.run(1 + i, 1)
        per_step.append(clock.chunks[-1])
        log(f"  midsize step {i + 1}/{cfg.steps}: {per_step[-1]:.2f} s, load {os.getloadavg()[0]:.1f}")
    tokens = cfg.batch_size * cfg.seq_len
    flops_token = train_flops_per_token(n_matmul, cfg.num_layers, cfg.seq_len, cfg.d_model)
    best, median = min(per_step), float(np.median(per_step))
    return {
        "params_matmul": n_matmul, "flops_per_step": flops_token * tokens,
        "first_call_s": first_call_s, "s_per_step_median": median, "s_per_step_best": best,
        "steps_per_s": 1.0 / median, "tokens_per_s": tokens / median,
        "model_gflops": flops_token * tokens / median / 1e9,
        "mfu": flops_token * tokens / median / 1e9 / peak_gflops,
        "mfu_best_step": flops_token * tokens / best / 1e9 / peak_gflops,
        "cpu_s_per_step": clock.cpu / cfg.steps,
        # The kernel's share: each call maps its temporary buffers (~1.9 GB here) afresh and
        # faults them in, 4 KiB at a time (transformer_jax/train/hugepages.py says why)
        "sys_s_per_step": clock.system / cfg.steps,
        "page_faults_per_step": clock.page_faults / cfg.steps,
    }


# --- several seeds in one program ------------------------------------------------------------

def seeds_vmap(text_path: str, num_seeds: int = 8, steps: int = 100, d_model: int = 64,
               num_layers: int = 2, batch_size: int = 32, seq_len: int = 16, data_dir: str = "",
               log: Log = print) -> dict[str, Any]:
    """S seeds trained sequentially (the trainer's loop, one run after another) against the same
    S seeds as one vmapped program; also checks that both give the same losses."""
    from transformer_jax.config import TrainConfig

    base = setups.text_dataset(text_path, seq_len, 16, data_dir=data_dir)
    datasets = [dataclasses.replace(base, seed=s) for s in range(num_seeds)]
    model = setups.model_config(base.vocab_size, d_model=d_model, num_heads=4,
                                num_layers=num_layers, d_ff=4 * d_model, seq_len=seq_len)
    tcfg = TrainConfig(num_steps=steps + 100, batch_size=batch_size, warmup_steps=10)
    # One initialization program and one compiled step for every seed (same shapes and program)
    runs, states = setups.Ours.seeds(model, tcfg, list(range(num_seeds)))
    rngs = [jax.random.key(1000 + s) for s in range(num_seeds)]
    stack = lambda trees: jax.tree.map(lambda *x: jnp.stack(x), *trees)  # noqa: E731
    seeds_step = multistep.make_seeds_step(runs[0].train_step)
    batch_of = lambda s, step: datasets[s].train_batch(step, batch_size, "decoder")  # noqa: E731

    sequential = [OursRunner(r, datasets[s], batch_size, rngs[s]) for s, r in enumerate(runs)]
    for r in sequential:
        r.run(0, 1)  # compiles once (same shapes), then step 0 of each seed
    states, m = seeds_step(states, stack([batch_of(s, 0) for s in range(num_seeds)]), jnp.stack(rngs))
    jax.device_get(m)
    vm_losses = []
    seq_clock, vm_clock = Clock(), Clock()
    chunk = max(steps // 4, 1)
    for start in range(1, steps, chunk):
        n = min(chunk, steps - start)
        with seq_clock:
            for r in sequential:
                r.run(start, n)
        with vm_clock:
            for step in range(start, start + n):
                batches = stack([batch_of(s, step) for s in range(num_seeds)])
                states, m = seeds_step(states, batches, jnp.stack(rngs))
                vm_losses.append(np.asarray(jax.device_get(m)["loss"]))
    seq_losses = np.array([r.losses[1:] for r in sequential]).T  # [steps - 1, S]
    gap = float(np.max(np.abs(seq_losses - np.array(vm_losses)) / np.abs(seq_losses)))
    return {"num_seeds": num_seeds, "steps": steps - 1, "sequential_s": seq_clock.wall,
            "vmapped_s": vm_clock.wall, "ratio_vmapped_vs_sequential": vm_clock.wall / seq_clock.wall,
            "speedup": seq_clock.wall / vm_clock.wall, "max_rel_loss_gap": gap}

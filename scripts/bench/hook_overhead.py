"""What the hook points cost a train step that asks for none: its compiled program and its
speed, against the same step of another source tree (e.g. `git archive main`), in one run.

    git archive main | tar -x -C /tmp/main_tree
    .venv/bin/python scripts/bench/hook_overhead.py --other /tmp/main_tree [--rounds 3]

Each round times the step in a fresh process per tree (this checkout, then the other), so the
two alternate on the same machine; the report is each tree's median step time, their ratio,
and whether the lowered programs' text is the same (sha256 and line count). The model is the
char LM's shape: 4 layers, d_model 128, 4 heads, d_ff 512, batch 12 x 64 tokens.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
BATCH, LENGTH, VOCAB = 12, 64, 96


def measure(steps: int) -> dict:
    """Builds the trainer's step, lowers it and times `steps` calls after a warm-up: one process."""
    import jax
    import numpy as np

    from transformer_jax.config import ModelConfig, Norm, TrainConfig
    from transformer_jax.train import init, steps as step_lib

    model = ModelConfig(vocab_size=VOCAB, num_outputs=VOCAB, d_model=128, num_heads=4,
                        num_layers=4, d_ff=512, max_len=LENGTH, norm=Norm.PRE)
    tx, schedule = step_lib.make_optimizer(TrainConfig(num_steps=1000, batch_size=BATCH))
    graphdef, params = init.init_model(model, 0)
    step = step_lib.make_train_step(graphdef, model, tx, schedule)
    rng = np.random.default_rng(0)
    batch = dict(inputs=rng.integers(0, VOCAB, (BATCH, LENGTH)).astype(np.int32),
                 targets=rng.integers(0, VOCAB, (BATCH, LENGTH)).astype(np.int32),
                 weights=np.ones((BATCH, LENGTH), np.float32),
                 padding_mask=np.ones((BATCH, LENGTH), bool))
    state = {"params": params, "opt_state": tx.init(params), "step": np.zeros((), np.int32)}
    text = step.lower(state, batch, jax.random.key(0)).as_text(debug_info=False)
    state, _ = step(state, batch, jax.random.key(0))  # compile and warm up
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        state, metrics = step(state, batch, jax.random.key(0))
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - start)
    return {"median_ms": 1e3 * statistics.median(times),
            "program_sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
            "program_lines": text.count("\n")}


def run_in(tree: Path, steps: int) -> dict:
    """`measure` in a fresh process importing the package from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--measure", str(steps)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def cpu_name() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if "Model name" in line)
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, help="the source tree to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    trees = {"this": HERE, "other": args.other}
    runs = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(run_in(tree, args.steps))
    medians = {name: statistics.median(r["median_ms"] for r in rs) for name, rs in runs.items()}
    print(json.dumps({"cpu": cpu_name(), "median_ms": medians,
                      "ratio_this_over_other": medians["this"] / medians["other"],
                      "same_program": runs["this"][0]["program_sha256"]
                      == runs["other"][0]["program_sha256"],
                      "programs": {n: rs[0] for n, rs in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()

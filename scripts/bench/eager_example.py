"""Where the README's "use the modules" example spends its time, in a fresh process per round:
the imports, building the 2-layer, width-64 model, its first call (probe=True) and a second.

    .venv/bin/python scripts/bench/eager_example.py [--rounds 3] [--cache DIR]

Prints one JSON record: the CPU, each phase's median over the rounds in seconds, and
`example_s`, building plus the first call (what the issue's 8-15 s counts). A fresh process each
round, because what the example costs a user is the cold start. Nearly all of it is XLA
compiling: eagerly, every new operation and shape is a program of its own (~50 ms each to
compile on this project's CPU); a second build in the same process takes 0.07 s. --cache DIR
gives each process JAX's persistent compilation cache in DIR (emptied first; the entry points'
`transformer_jax.enable_compilation_cache` setting): round 1 is then cold and later rounds warm,
reported apart.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def phases(cache: str) -> dict:
    """The example's steps, timed: one process."""
    start = time.perf_counter()
    import jax
    from flax import nnx

    from transformer_jax import ModelConfig, Norm, Position, Transformer, enable_compilation_cache
    os.environ["TJ_JAX_CACHE_DIR"] = cache  # '': none, a cold start every round
    enable_compilation_cache()
    imported = time.perf_counter()
    cfg = ModelConfig(vocab_size=100, num_outputs=100, d_model=64, num_heads=4, num_layers=2,
                      d_ff=256, position=Position.ROTARY, norm=Norm.PRE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    jax.block_until_ready(nnx.state(model))
    built = time.perf_counter()
    tokens = jax.random.randint(jax.random.key(1), (2, 10), 0, cfg.vocab_size)
    jax.block_until_ready(model(tokens, probe=True))
    first = time.perf_counter()
    jax.block_until_ready(model(tokens, probe=True))
    second = time.perf_counter()
    return {"import_s": imported - start, "build_s": built - imported,
            "first_call_s": first - built, "second_call_s": second - first}


def medians(runs: list[dict]) -> dict:
    """Each phase's median, and the example's time: building plus the first call."""
    found = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
    return {**found, "example_s": round(found["build_s"] + found["first_call_s"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", default="", help="a persistent compilation cache (emptied)")
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args()
    if args.phases:
        print(json.dumps(phases(args.cache)))
        return
    if args.cache:
        shutil.rmtree(args.cache, ignore_errors=True)
    command = [sys.executable, __file__, "--phases", f"--cache={args.cache}"]
    runs = [json.loads(subprocess.run(command, check=True, capture_output=True,
                                      text=True).stdout.splitlines()[-1])
            for _ in range(args.rounds)]
    from hook_overhead import cpu_name  # scripts/bench/ is this file's folder
    record = {"cpu": cpu_name(), "rounds": args.rounds}
    if args.cache:
        record.update(cold=medians(runs[:1]), warm=medians(runs[1:] or runs[:1]))
    else:
        record.update(medians(runs))
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()

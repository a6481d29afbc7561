"""Where the char-LM run's peak memory goes: `python scripts/memory.py [--text_path=FILE]`.

The run is nanoGPT's README CPU configuration, which `configs/lm.py` reproduces (tiny
Shakespeare, 4 layers × 128, 4 heads, context 64, batch 12, 2,000 steps, no dropout), trained
through `python -m transformer_jax.main` in a fresh process with a fresh compilation cache. The
peak is the process's own high-water mark (`ru_maxrss` of the finished child), the number
`/usr/bin/time -v` reports as "Maximum resident set size".

Where it goes is measured by stages, each a fresh interpreter that does everything the stage
before did and one thing more, so that the differences between their peaks are what each thing
costs: the interpreter, the imports main makes (JAX, Flax and optax, Orbax, TFDS and grain,
TensorBoard), XLA's CPU client, the prepared text, the compiled train step. Then whole runs,
each compiling anew: 10 steps (start-up, data, compiling) and 2,000 steps, with and without
glibc's huge pages (`transformer_jax/train/hugepages.py`, opt-in). The last line is one JSON
object with every number (MiB) and the machine (bench/machine.py); `--out FILE` writes it there
too, for docs/performance.md's table (scripts/bench/page.py).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"

# Each stage's code runs after every earlier stage's, in one fresh interpreter.
STAGES = (
    ("python interpreter", ""),
    ("numpy, absl, ml_collections", "import numpy, absl.flags, ml_collections"),
    ("jax imported", "import jax, jax.numpy as jnp"),
    ("XLA CPU client started", "jax.devices(); jnp.zeros(1).block_until_ready()"),
    ("flax, optax", "import flax.nnx, optax"),
    ("orbax.checkpoint", "import orbax.checkpoint"),
    ("tensorflow_datasets", "import tensorflow_datasets"),
    ("tensorboard (event files, hparams)", "import transformer_jax.train.summaries"),
    ("the rest of transformer_jax.main", "import transformer_jax.main"),
    ("text prepared (TFDS array_record)", textwrap.dedent("""\
        from transformer_jax import data as data_lib
        from transformer_jax.studies.study import load_config
        cfg = load_config(REPO / 'configs/lm.py')
        cfg.unlock(); cfg.data.text_path = TEXT; cfg.data.data_dir = DATA_DIR
        ds = data_lib.make_dataset(cfg.data, seed=0, fmt='decoder')""")),
)


def _peak_of(code: str, env: dict) -> dict:
    """Runs `code` in a fresh interpreter; its peak and final RSS in MiB."""
    probe = code + textwrap.dedent("""
        import json, resource
        rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]
        print(json.dumps({'peak_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          'rss_mib': int(rss) / 1024}))""")
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run_peak(args: list[str], env: dict) -> dict:
    """Peak RSS (MiB) and wall time of one `python -m transformer_jax.main` run to its end,
    read by a fresh wrapper process (its children's ru_maxrss is this run's alone; main's
    re-execution for huge pages keeps the process, so it counts too)."""
    wrapper = textwrap.dedent("""
        import json, resource, subprocess, sys, time
        t0 = time.perf_counter()
        subprocess.run(sys.argv[1:], check=True, capture_output=True)
        print(json.dumps({'peak_mib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                          'wall_s': time.perf_counter() - t0}))""")
    out = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m",
                          "transformer_jax.main", *args], env=env, cwd=REPO, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text_path", default=os.environ.get("TJ_SHAKESPEARE", str(SHARED_TEXT)))
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--out", default="", help="also write the JSON line to this file")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="tj_memory_"))
    env = {**os.environ, "TJ_JAX_CACHE_DIR": str(scratch / "jax_cache")}
    env.pop("XLA_FLAGS", None)
    header = (f"from pathlib import Path\nREPO = Path({str(REPO)!r})\n"
              f"TEXT = {args.text_path!r}\nDATA_DIR = {str(scratch / 'tfds')!r}\n")
    results: dict = {"stages": [], "runs": {}}
    print(f"{'stage (each adds to the ones above)':44s} {'peak MiB':>9s} {'+ MiB':>7s}")
    code, previous = header, 0.0
    for name, line in STAGES:
        code += line + "\n"
        stage = _peak_of(code, {**env, "TJ_HUGEPAGES": "0"})
        print(f"{name:44s} {stage['peak_mib']:9.0f} {stage['peak_mib'] - previous:+7.0f}")
        results["stages"].append({"stage": name, **stage})
        previous = stage["peak_mib"]
    common = ["--config=configs/lm.py", f"--config.data.text_path={args.text_path}",
              f"--config.data.data_dir={scratch / 'tfds'}"]
    for label, steps, hugepages in (("10 steps, no huge pages", 10, "0"),
                                    (f"{args.steps} steps, no huge pages", args.steps, "0"),
                                    (f"{args.steps} steps, huge pages", args.steps, "1")):
        workdir = scratch / f"run_{steps}_{hugepages}"
        # each run compiles (its own new cache), as a first run does: a run that loaded the
        # programs an earlier one compiled would peak lower, and the comparison would be off
        run = _run_peak([*common, f"--workdir={workdir}", f"--config.train.num_steps={steps}",
                         f"--config.train.warmup_steps={min(100, steps // 2)}"],
                        {**env, "TJ_HUGEPAGES": hugepages,
                         "TJ_JAX_CACHE_DIR": str(workdir) + "_jax_cache"})
        results["runs"][label] = run
        print(f"whole run, {label:33s} {run['peak_mib']:9.0f}  ({run['wall_s']:.0f} s)")
    sys.path.insert(0, str(REPO / "scripts"))
    from bench import machine
    machine.emit({**results, "steps": args.steps}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

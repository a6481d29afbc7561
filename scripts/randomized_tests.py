"""Shows that the suite's randomized tests fail only when the code is wrong (docs/testing.md).

The suite draws Hypothesis examples derandomized (the same ones every run). This script draws
afresh, outside the suite, so a property that holds only for lucky draws shows up here:

    .venv/bin/python scripts/randomized_tests.py rotary      # every seed of the rotary test
    .venv/bin/python scripts/randomized_tests.py rounds --runs 200 --workers 2

`rotary` runs the rotary property test on each of its 65,537 possible seeds, then again with
rotary positions broken (angles of zero: nothing rotates), where it must fail on every seed.
`rounds` runs every Hypothesis test of the suite RUNS times, each run with its own
--hypothesis-seed (FIRST_SEED, FIRST_SEED + 1, ...), and counts the failing runs. Exit 1 on
any unexpected result.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# The suite's files that use Hypothesis (tests/scripts/test_randomized_inventory.py keeps this in step).
HYPOTHESIS_FILES = ("model/test_attention.py", "config/test_config.py", "model/test_fuzz.py",
                    "model/test_positions.py")
SEEDS = 2 ** 16 + 1  # st.integers(0, 2 ** 16)


def _failures_over_seeds(check, seeds: range) -> list[int]:
    failed = []
    for seed in seeds:
        try:
            check(seed=seed)
        except AssertionError:
            failed.append(seed)
    return failed


def rotary(_args) -> int:
    os.environ.setdefault("TJ_HYPOTHESIS_PROFILE", "explore")
    sys.path[:0] = [str(TESTS), str(TESTS / "model")]
    import jax.numpy as jnp
    import test_positions  # noqa: E402  (tests/model, on the path above)

    from transformer_jax.model import positions

    check = test_positions.test_rotary_dot_product_depends_only_on_the_offset.hypothesis.inner_test
    failed = _failures_over_seeds(check, range(SEEDS))
    print(f"rotary test, {SEEDS} seeds: {len(failed)} failed {failed[:10]}")
    working = positions.rotary_angles
    positions.rotary_angles = lambda length, dim: jnp.zeros((length, dim // 2), jnp.float32)
    try:
        broken = _failures_over_seeds(check, range(SEEDS))
    finally:
        positions.rotary_angles = working
    print(f"with rotary broken (no rotation): {len(broken)} of {SEEDS} seeds failed")
    return 0 if not failed and len(broken) == SEEDS else 1


class _OnlyHypothesisTests:
    """A pytest plugin: keep the tests that Hypothesis drives, deselect the rest."""

    def pytest_collection_modifyitems(self, config, items):
        keep = [i for i in items if getattr(getattr(i, "obj", None), "is_hypothesis_test", False)]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def _rounds_here(first_seed: int, runs: int) -> int:
    """RUNS pytest sessions in this process (JAX's compiled programs are kept between them);
    returns how many failed."""
    import pytest

    failed = 0
    for seed in range(first_seed, first_seed + runs):
        code = pytest.main(["-q", "-p", "no:cacheprovider",
                            f"--hypothesis-seed={seed}", *(str(TESTS / f) for f in HYPOTHESIS_FILES)],
                           plugins=[_OnlyHypothesisTests()])
        print(f"[rounds] hypothesis seed {seed}: {'ok' if code == 0 else f'FAILED ({code})'}",
              flush=True)
        failed += code != 0
    return failed


def rounds(args) -> int:
    os.environ["TJ_HYPOTHESIS_PROFILE"] = "explore"
    if args.in_process:
        return 1 if _rounds_here(args.first_seed, args.runs) else 0
    # A fresh process for every BATCH runs: one process once crashed inside XLA:CPU's compiler
    # after 47 sessions (SIGSEGV), where the same draws pass in a new process.
    seeds = range(args.first_seed, args.first_seed + args.runs)
    batches = [seeds[i:i + args.batch] for i in range(0, len(seeds), args.batch)]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.workers)) as pool:
        failed = sum(pool.map(_run_batch, batches))
    print(f"rounds: {failed} of {args.runs} runs failed (hypothesis seeds {seeds[0]}.."
          f"{seeds[-1]}, files {', '.join(HYPOTHESIS_FILES)})")
    return 0 if failed == 0 else 1


def _run_batch(seeds: range) -> int:
    """Runs of `seeds` in one new process; the failed ones (a crash fails those not reported)."""
    done = subprocess.run(
        [sys.executable, __file__, "rounds", "--in_process", f"--first_seed={seeds[0]}",
         f"--runs={len(seeds)}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[rounds]")]
    for line in lines:
        print(line, flush=True)
    if done.returncode not in (0, 1):
        print(f"[rounds] seeds {seeds[len(lines)]}..{seeds[-1]}: the process ended with "
              f"{done.returncode}: {done.stdout.strip().splitlines()[-1:]}", flush=True)
    return sum("FAILED" in line for line in lines) + len(seeds) - len(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("rotary", help="the rotary test over all of its seeds, working and broken")
    many = sub.add_parser("rounds", help="every Hypothesis test, once per hypothesis seed")
    many.add_argument("--runs", type=int, default=200)
    many.add_argument("--first_seed", type=int, default=0)
    many.add_argument("--workers", type=int, default=1, help="processes at a time")
    many.add_argument("--batch", type=int, default=10, help="runs per process")
    many.add_argument("--in_process", action="store_true", help="all runs in this process")
    args = parser.parse_args(argv)
    return {"rotary": rotary, "rounds": rounds}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Checks and times the accelerator paths on the device JAX sees (GPU, TPU, or the CPU).

    python scripts/accelerator_check.py            # the issue's mid-size model
    python scripts/accelerator_check.py --large    # also 12 layers, width 1024, T=1024
    python scripts/accelerator_check.py --smoke    # tiny shapes, seconds, any machine (tests)

Prints: fused attention (cuDNN on NVIDIA GPUs in half precision, else XLA) and explicit
attention against float32 explicit attention, forward and gradient; the device's float32 and
bfloat16 matmul peak; and the train step in {float32, bfloat16} x {explicit, fused}: ms/step,
model TFLOP/s, MFU against the same dtype's peak. The LAST line is one JSON object.
(`scripts/bench/accelerator.py` says what each number is.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="tiny shapes (seconds, any machine)")
    size.add_argument("--large", action="store_true", help="also a 12-layer, width-1024 model")
    args = parser.parse_args(argv)

    from bench import accelerator

    sizes = ({"smoke": accelerator.SMOKE} if args.smoke else
             {"midsize": accelerator.MIDSIZE, **({"large": accelerator.LARGE} if args.large else {})})
    result = accelerator.run(sizes, log=lambda line: print(line, flush=True))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Claim: at the article's depth (96 layers, width 16 at the default size), each architecture at
its own best learning rate, Pre-LN with residuals trains as its 2-layer anchor at that width
does, and beats every other architecture.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_deepest.py --workdir=runs/depth_deepest --jobs=2
(or its suite: scripts/run.sh --suite=depth_deepest)

A part of experiments/depth.py (its registration, last moved at 6db7b89 and 06bcce4, split for
its suite's time, as experiments/_depth.py tells, which holds that registration, the task, the
grid, the budget and the thresholds): Pre-LN with residuals, Pre-LN without, Post-LN with
warm-up and residuals without a norm given warm-up and clipping, at the article's depth and
width, each tuned over the grid, with Pre-LN's 2-layer anchor at that width. The sweep's depths
went to depth_sweep. Its confounds (today's initialization, a two-point grid, a cap reached
before the plateau) are those issue 64 names; depth_article_* re-ask the question without them.

Sized (default): 10 variants, 30 runs; depth took 38 min 26 s alone on the AVX2 EPYC, of which
its runs at the article's depth were about 1,870 of 4,130 worker-seconds: ≈ 16 minutes on 2 cores,
longer where one 96-layer candidate is left to run alone.
"""
from pathlib import Path

from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth.py")
SIZES, LEARNING_RATES = SHARED.SIZES, SHARED.LEARNING_RATES


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_deepest",
        "At the article's depth, each architecture at its own best learning rate, Pre-LN with "
        "residuals trains as its 2-layer anchor does and beats every other architecture.",
        size, "deepest")

"""Claim: the residual and the normalization are why a deep Transformer trains at all: at the
sweep's depths (2 to 24 layers at the default size), remove either and the deep stack collapses,
while Pre-LN with residuals trains at every depth.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_sweep.py --workdir=runs/depth_sweep --jobs=2
(or its suite: scripts/run.sh --suite=depth_sweep)

A part of experiments/depth.py (its registration, last moved at 6db7b89 and 06bcce4, split for
its suite's time, as experiments/_depth.py tells, which holds that registration, the task, the
grid, the budget and the thresholds): the four architectures and the two careful arms at every
depth of the sweep, at the study's width (32 at the default size), their tuned arms at the
shallowest and the deepest depth, and the step-0 probes (token similarity by layer at
initialization). The arms at the article's depth went to depth_deepest. Its confounds
(today's initialization, a two-point grid, a cap reached before the plateau) are those issue 64
names; depth_remedies_* re-ask the question without them.

Sized (default): 31 variants, 93 runs; depth took 38 min 26 s alone on the AVX2 EPYC, of which
its runs at width 32 were about 2,260 of 4,130 worker-seconds: ≈ 20 minutes on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth.py")
SIZES, LEARNING_RATES = SHARED.SIZES, SHARED.LEARNING_RATES


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_sweep",
        "The residual and the normalization are why a deep Transformer trains at all: at the "
        "sweep's depths, remove them and the deep stack collapses; Pre-LN with residuals trains "
        "at every depth.",
        size, "sweep")

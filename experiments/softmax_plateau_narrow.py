"""Claim: at d_k = 64, ÷√d_k matters where training has stopped: each arm at its own best
learning rate and trained until it stops learning, the model without ÷√d_k ends below the scaled
one, its attention still saturated and its gradient to W_q and W_k smaller than the scaled
model's through training; W_q, W_k started d_k^(-1/4) smaller tell whether the initialization
alone is the harm.

Run:  python -m transformer_jax.sweep --experiment=experiments/softmax_plateau_narrow.py --workdir=runs/softmax_plateau_narrow --jobs=2
(or its suite: scripts/run.sh --suite=softmax_plateau_narrow)

A part of experiments/softmax_plateau.py (registered at ede4c31 before any run; split for its
suite's time, as experiments/_softmax_plateau.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the three arms at the narrow d_k (64 at the default
size; the arms at d_k 256 went to softmax_plateau_wide). Arms: scaled, unscaled, and unscaled with W_q, W_k initialized
d_k^(-1/4) smaller, each tuned over the grid. Kinds, as registered: the scaled arm's learning the
task and each arm's having flattened are checks; everything else is a finding.
"""
from pathlib import Path

from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_softmax_plateau.py")
SIZES, LEARNING_RATES = SHARED.SIZES, SHARED.LEARNING_RATES


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "softmax_plateau_narrow",
        "At d_k 64 (d_model fixed), ÷√d_k matters where training has stopped: each arm at "
        "its own best learning rate, trained to the plateau, the unscaled model ends below the "
        "scaled one, its attention still saturated and its Q/K gradient smaller through "
        "training; W_q, W_k started d_k^(-1/4) smaller tell whether the initialization alone is "
        "the harm.",
        size, "narrow")

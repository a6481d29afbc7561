"""Claim: at 24 layers, each arm at its own best learning rate and trained until it stops
learning, Pre-LN without residuals stays at chance, under today's initialization and under the
depth-scaled one: a smaller branch cannot give back a missing skip.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_remedies_noresidual.py --workdir=runs/depth_remedies_noresidual --jobs=2
(or its suite: scripts/run.sh --suite=depth_remedies_noresidual)

A part of experiments/depth_remedies.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_remedies.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the Pre-LN arms without residuals, with their 2-layer
reference. They were depth_remedies_bare's, with the no-norm arms (now
experiments/depth_remedies_nonorm.py); depth_remedies_bare's suite took 31 min 12 s from a fresh
clone with a cold cache on the AVX2 EPYC (47c7bdb), over its 30 minutes, so it is split again, by
architecture. Nothing of the design moved: each arm, its registered outcome and its
expectations' kinds are cbd11a8's. What changes with the split: this part decides its plateau
alone, and Holm's family is this part's. depth_remedies_bare's results had been seen when the
split was written; nothing here was chosen from them.

Arms, with the outcome registered for each at cbd11a8:
  pre_nores  standard       collapses  (Dong et al. 2021: rank collapse without skips)
  pre_nores  depth_scaled   collapses  (a smaller branch cannot give back a missing skip)
No expectation of this part is a check beyond the reference and the flattened checks: the pilot
ran none of these arms at 24 layers.

Sized (default): 3 tuned arms (2 at 24 layers, 1 reference at 2), 9 candidates, 27 runs before
the grid grows: about half of depth_remedies_bare's 31 min 12 s on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import COLLAPSES, Arm
from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_remedies.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arms at `depth`, each with its registered outcome (the docstring's table)."""
    return [
        Arm("pre_nores", "standard", depth, COLLAPSES),
        Arm("pre_nores", "depth_scaled", depth, COLLAPSES),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_remedies_noresidual",
        "At 24 layers, each arm at its own best learning rate and trained to the plateau, "
        "Pre-LN without residuals stays at chance under today's initialization and the "
        "depth-scaled one: a smaller branch cannot give back a missing skip.",
        size, arms)

"""Claim (the rival to the article's "without a norm the deep stack collapses"): at 24 layers,
each arm at its own best learning rate and trained until it stops learning, residuals without
a norm leave chance once their branches start small (the depth-scaled or the ReZero
initialization) and collapse under today's initialization.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_remedies_nonorm.py --workdir=runs/depth_remedies_nonorm --jobs=2
(or its suite: scripts/run.sh --suite=depth_remedies_nonorm)

A part of experiments/depth_remedies.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_remedies.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the arms with residuals and no norm, with their 2-layer
reference. They were depth_remedies_bare's, with the stacks without residuals (now
experiments/depth_remedies_noresidual.py); depth_remedies_bare's suite took 31 min 12 s from a
fresh clone with a cold cache on the AVX2 EPYC (47c7bdb), over its 30 minutes, so it is split
again, by architecture. Nothing of the design moved: each arm, its registered outcome and its
expectations' kinds are cbd11a8's. What changes with the split: this part decides its plateau
alone, and Holm's family is this part's. depth_remedies_bare's results had been seen when the
split was written; nothing here was chosen from them.

Arms, with the outcome registered for each at cbd11a8:
  none_res   standard       collapses  (the article: no norm, the deep stack collapses)
  none_res   depth_scaled   trains     (the rival prediction: "initialization, not the norm,
                                        explains the no-norm collapse")
  none_res   rezero         trains     (the rival prediction; Bachlechner et al. 2020 train
                                        deep Transformers with no norm)
No expectation of this part is a check beyond the reference and the flattened checks: the pilot
ran none of these arms at 24 layers.

Sized (default): 4 tuned arms (3 at 24 layers, 1 reference at 2), 12 candidates, 36 runs before
the grid grows; 2 of its 3 deep arms train to the cap (none_res under today's initialization
stops at its first steps): about half of depth_remedies_bare's 31 min 12 s on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import COLLAPSES, TRAINS, Arm
from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_remedies.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arms at `depth`, each with its registered outcome (the docstring's table)."""
    return [
        Arm("none_res", "standard", depth, COLLAPSES),
        Arm("none_res", "depth_scaled", depth, TRAINS),
        Arm("none_res", "rezero", depth, TRAINS),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_remedies_nonorm",
        "At 24 layers, each arm at its own best learning rate and trained to the plateau, "
        "residuals without a norm leave chance once their branches start small (depth-scaled "
        "or ReZero) and collapse under today's initialization (the rival to the article).",
        size, arms)

"""Claim (the rival to the article's "without a norm the deep stack collapses"): at 24 layers,
each architecture at its own best learning rate and trained until it stops learning, a residual
is needed to train at all and a norm is not once the branches start small: residuals without a
norm leave chance under the depth-scaled or ReZero initialization and collapse under today's,
and Pre-LN without residuals stays at chance under either initialization.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_remedies_bare.py --workdir=runs/depth_remedies_bare --jobs=2
(or its suite: scripts/run.sh --suite=depth_remedies_bare)

A part of experiments/depth_remedies.py, registered at cbd11a8 before any run, split because
that study's suite took 37 min 05 s from a fresh clone with a cold cache (5d00224), over its 30
minutes: this part holds the arms that lack a norm or a residual, with their 2-layer
references; experiments/depth_remedies_pre.py and depth_remedies_post.py hold those with a
LayerNorm and residuals, and experiments/_depth_remedies.py the registration as written (the
rival prediction, the mechanism, the kinds, the pilot), the task, width, depth, grid, plateau
budget, seeds and thresholds: nothing of the design moved in the split. What changes with the
split: each part decides its plateau alone, and Holm's family is the part's. depth_remedies's
results (12609c6, 5d00224) had been seen when the split was written; nothing here was chosen
from them.

Arms, with the outcome registered for each at cbd11a8:
  none_res   standard       collapses  (the article: no norm, the deep stack collapses)
  none_res   depth_scaled   trains     (the rival prediction: "initialization, not the norm,
                                        explains the no-norm collapse")
  none_res   rezero         trains     (the rival prediction; Bachlechner et al. 2020 train
                                        deep Transformers with no norm)
  pre_nores  standard       collapses  (Dong et al. 2021: rank collapse without skips)
  pre_nores  depth_scaled   collapses  (a smaller branch cannot give back a missing skip)
No expectation of this half is a check beyond the references and the flattened checks: the
pilot ran none of these arms at 24 layers.

Sized (default): 7 tuned arms (5 at 24 layers, 2 references at 2), 21 candidates, 63 runs before
the grid grows; 4 of its 5 deep arms train to the cap (none_res under today's initialization
stops at its first steps): ≈ 17 minutes on 2 cores, from depth_remedies's 37 min 05 s.
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
        Arm("pre_nores", "standard", depth, COLLAPSES),
        Arm("pre_nores", "depth_scaled", depth, COLLAPSES),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_remedies_bare",
        "At 24 layers, each architecture at its own best learning rate and trained to the "
        "plateau, a residual is needed to train at all and a norm is not once the branches "
        "start small: without a norm, depth-scaled or ReZero branches leave chance and "
        "today's initialization collapses; without residuals, Pre-LN stays at chance (the "
        "rival to the article).",
        size, arms)

"""Claim: at 24 layers, each at its own best learning rate and trained until it stops learning,
Post-LN with residuals trains once its branches start small (DeepNet's or the depth-scaled
initialization) but stays at chance under today's.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_remedies_post.py --workdir=runs/depth_remedies_post --jobs=2
(or its suite: scripts/run.sh --suite=depth_remedies_post)

A part of experiments/depth_remedies.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_remedies.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the Post-LN arms, with Post-LN's 2-layer reference.
Arms, with the outcome registered for each at cbd11a8:
  post_res   standard       collapses  (Liu et al. 2020: deep Post-LN fails without warm-up)
  post_res   deepnet        trains     (Wang et al. 2022: DeepNet trains 1,000 Post-LN layers)
  post_res   depth_scaled   trains     (Liu et al. 2020's Admin: Post-LN fails through its
                                        dependence on the branches, which a smaller branch
                                        output at the start removes)
No expectation of this part is a check beyond the reference and the flattened checks: the pilot
ran none of these arms at 24 layers.

Sized (default): 4 tuned arms (3 at 24 layers, 1 reference at 2), 12 candidates, 36 runs before
the grid grows; from depth_remedies_ln's 32 min 31 s for 5 arms at 24 layers and 2 references:
≈ 20 minutes on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import COLLAPSES, TRAINS, Arm
from transformer_jax.studies.study import Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_remedies.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arms at `depth`, each with its registered outcome (the docstring's table)."""
    return [
        Arm("post_res", "standard", depth, COLLAPSES),
        Arm("post_res", "deepnet", depth, TRAINS),
        Arm("post_res", "depth_scaled", depth, TRAINS),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_remedies_post",
        "At 24 layers, each at its own best learning rate and trained to the plateau, Post-LN "
        "with residuals trains once its branches start small (DeepNet's or the depth-scaled "
        "initialization) but stays at chance under today's.",
        size, arms)

"""Claim: at 24 layers, at its own best learning rate and trained until it stops learning,
Pre-LN with residuals trains, under today's initialization and under the depth-scaled one.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_remedies_pre.py --workdir=runs/depth_remedies_pre --jobs=2
(or its suite: scripts/run.sh --suite=depth_remedies_pre)

A part of experiments/depth_remedies.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_remedies.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the Pre-LN arms, with Pre-LN's 2-layer reference.
Arms, with the outcome registered for each at cbd11a8:
  pre_res    standard       trains     (Xiong et al. 2020: Pre-LN needs no warm-up at depth)
  pre_res    depth_scaled   trains     (GPT-2's recipe)
Kinds, as registered: Pre-LN under today's initialization leaving chance, ending near its
reference and starting finite are checks (the pilot saw them), and so are its first/last
gradient ratios (residual_flow measured them); everything else is a finding.

Sized (default): 3 tuned arms (2 at 24 layers, 1 reference at 2), 9 candidates, 27 runs before
the grid grows; from depth_remedies_ln's 32 min 31 s for 5 arms at 24 layers and 2 references:
≈ 14 minutes on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import TRAINS, Arm
from transformer_jax.studies.study import Kind, Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_remedies.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arms at `depth`, each with its registered outcome (the docstring's table)."""
    pre_standard = {"leaves_chance": (Kind.CHECK, SHARED.PILOT_SAW),
                    "near_reference": (Kind.CHECK, SHARED.PILOT_SAW),
                    "finite": (Kind.CHECK, SHARED.PILOT_SAW + ", every run finite"),
                    "ratio_start": (Kind.CHECK, SHARED.RESIDUAL_FLOW_SAW),
                    "ratio_end": (Kind.CHECK, SHARED.RESIDUAL_FLOW_SAW)}
    return [
        Arm("pre_res", "standard", depth, TRAINS, kinds=pre_standard),
        Arm("pre_res", "depth_scaled", depth, TRAINS),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_remedies_pre",
        "At 24 layers, at its own best learning rate and trained to the plateau, Pre-LN with "
        "residuals trains under today's and the depth-scaled initialization.",
        size, arms)

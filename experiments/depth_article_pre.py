"""Claim: at the article's depth, 96 layers, at its own best learning rate and trained until it
stops learning, Pre-LN with residuals under today's initialization leaves chance and ends near
its 2-layer reference.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_article_pre.py --workdir=runs/depth_article_pre --jobs=2
(or its suite: scripts/run.sh --suite=depth_article_pre)

A part of experiments/depth_article.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_article.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the Pre-LN arm, with Pre-LN's 2-layer reference.
Arm, with the outcome registered for it at cbd11a8:
  pre_res    standard       trains     (the article; Xiong et al. 2020)
Kinds, as registered: its leaving chance and starting finite are checks (the pilot saw them);
everything else is a finding.

Sized (default): 2 tuned arms (1 at 96 layers, 1 reference at 2), 6 candidates, 18 runs before
the grid grows; from the AVX2 EPYC's 5 min 26 s – 5 min 43 s for a 96-layer candidate's 1,000
steps (3 seeds, one worker): ≈ 20 minutes on 2 cores.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import TRAINS, Arm
from transformer_jax.studies.study import Kind, Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_article.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arm at `depth`, with its registered outcome (the docstring's table)."""
    return [
        Arm("pre_res", "standard", depth, TRAINS,
            kinds={"leaves_chance": (Kind.CHECK, SHARED.PILOT_PRE),
                   "finite": (Kind.CHECK, SHARED.PILOT_PRE)}),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_article_pre",
        "At 96 layers, at its own best learning rate and trained to the plateau, Pre-LN with "
        "residuals under today's initialization leaves chance and ends near its 2-layer "
        "reference.",
        size, arms)

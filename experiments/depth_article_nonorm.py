"""Claim (the rival to the article's "without a norm the deep stack collapses"): at the article's
depth, 96 layers, each arm at its own best learning rate and trained until it stops learning,
residuals without a norm leave chance once their branches start depth-scaled, and collapse only
under today's initialization. Initialization, not the norm, explains the collapse.

Run:  python -m transformer_jax.sweep --experiment=experiments/depth_article_nonorm.py --workdir=runs/depth_article_nonorm --jobs=2
(or its suite: scripts/run.sh --suite=depth_article_nonorm)

A part of experiments/depth_article.py (registered at cbd11a8 before any run; split for its
suite's time, as experiments/_depth_article.py tells, which holds that registration, the task,
the grid, the budget and the thresholds): the arms with residuals and no norm, with their 2-layer
reference. The rival prediction, written before the run, is registered as the expectation:
residuals without a norm under the depth-scaled initialization leave chance and end within 0.05
of their 2-layer reference. The article predicts they stay at chance. Whatever the runs show is
the finding.

Arms, with the outcome registered for each at cbd11a8:
  none_res   standard       collapses  (the article: without a norm the deep stack collapses)
  none_res   depth_scaled   trains     (the rival prediction: "initialization, not the norm,
                                        explains the no-norm collapse")
Kinds, as registered: checks are what the depth study saw (every no-norm run at 96 layers under
today's initialization non-finite at step 1), what the issue measured (the depth-scaled no-norm
stream's RMS at initialization) and what the pilot saw (the depth-scaled no-norm arm finite at
its first logged steps); post hoc: the depth-scaled no-norm arm leaving chance, whose threshold
was written after the pilot had seen it at 0.31–0.35. Everything else is a finding.

Sized (default): 3 tuned arms (2 at 96 layers, 1 reference at 2), 9 candidates, 27 runs before
the grid grows; the no-norm arm under today's initialization stops at its first step, so one
arm trains at 96 layers: ≈ 20 minutes on 2 cores, as depth_article_pre.
"""
from pathlib import Path

from transformer_jax.studies.deep_arms import COLLAPSES, TRAINS, Arm
from transformer_jax.studies.study import Kind, Study, load_module

SHARED = load_module(Path(__file__).resolve().parent / "_depth_article.py")
SIZES, LEARNING_RATES, GRID_CAP = SHARED.SIZES, SHARED.LEARNING_RATES, SHARED.GRID_CAP


def arms(depth: int) -> list[Arm]:
    """This part's arms at `depth`, each with its registered outcome (the docstring's table)."""
    return [
        Arm("none_res", "standard", depth, COLLAPSES,
            kinds={"finite": (Kind.CHECK, SHARED.DEPTH_SAW)}),
        Arm("none_res", "depth_scaled", depth, TRAINS,
            kinds={"leaves_chance": (Kind.POST_HOC, SHARED.POST_HOC_WHY),
                   "finite": (Kind.CHECK, SHARED.PILOT_NONE),
                   "rms_start": (Kind.CHECK, SHARED.ISSUE_MEASURED)}),
    ]


def get_study(size: str) -> Study:
    return SHARED.build_part(
        "depth_article_nonorm",
        "At 96 layers, each arm at its own best learning rate and trained to the plateau, "
        "residuals without a norm leave chance once their branches start depth-scaled and "
        "collapse only under today's initialization: initialization, not the norm, explains "
        "the collapse (the rival to the article).",
        size, arms)

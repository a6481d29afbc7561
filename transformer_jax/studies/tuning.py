"""An arm at its own best setting: tuned over a small grid, selected per seed by training loss.

A skeptic of "architecture A fails" asks whether A fails at its own best learning rate, not at
the one chosen to break it. A study declares such an arm as candidates, one variant per grid
point (`tuned_arm`: each is trained like any variant, and shows in the summary), and names the
arm, not a candidate, in its expectations. The judge then picks, for each seed, the candidate
with the lowest training loss over its last 20 % of steps, never the metric an expectation
judges (studies/judge/tuned_choice.py: `choose`, `with_arms`, named here too).

    variants = {**tuned_arm("post_L24", {"model.norm": "post"}, {"train.learning_rate":
                                                                 (1e-3, 3e-3)}), ...}
    Study(..., variants=variants, tuned={"post_L24": tuple(names)}, expectations=(
        Expectation(..., "pre_L24", Comparison.BETTER, 0.2, b="post_L24"), ...))
"""
from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from transformer_jax.studies.judge.tuned_choice import (  # noqa: F401 (named here too)
    SELECTED_BY, Choices, Values, choose, record, selection_loss, with_arms)


def candidate_name(arm: str, point: Mapping[str, Any]) -> str:
    """'post_L24~learning_rate=0.001': the arm, then each grid field's last part and value."""
    return arm + "".join(f"~{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float)
                         else f"~{k.rsplit('.', 1)[-1]}={v}" for k, v in point.items())


def tuned_arm(arm: str, overrides: Mapping[str, Any],
              grid: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """The candidate variants of `arm`: its overrides with each point of `grid` (every
    combination of the listed values of each dotted field), by candidate_name."""
    fields = list(grid)
    points = [dict(zip(fields, values)) for values in itertools.product(*grid.values())]
    return {candidate_name(arm, p): {**overrides, **p} for p in points}

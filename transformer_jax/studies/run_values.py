"""How a finished run's curves become the values a study judges: the last value, the value at
a step, the gain over the last stretch. Below the report, which writes them into the record, and
the analyses, which read them from the runs they are given.

A run here is what report.collect gives for one (variant, seed): {'status': the run's status,
'curves': {tag: [(step, value)]}}.
"""
from __future__ import annotations

import math
from typing import Any

from transformer_jax.studies import convergence


def final_value(run: dict[str, Any], metric: str) -> float:
    """The metric's last value; nan for a diverged run (its last numbers are not a result)."""
    if run["status"].get("state") == "diverged":
        return math.nan
    curve = run["curves"].get(metric)
    return curve[-1][1] if curve else math.nan


def value_at(run: dict[str, Any], metric: str, step: int) -> float:
    """The metric at the first logged step at or after `step` (nan: none). A run that diverged
    later still measured it then, so it counts."""
    return next((value for at, value in run["curves"].get(metric, ()) if at >= step), math.nan)


def late_gain(run: dict[str, Any], metric: str, higher_is_better: bool) -> float:
    """How much the metric improved over the run's last convergence.FLAT_WINDOW of steps
    (> 0: still improving, in the metric's better direction); nan for a diverged run or a curve
    with no evaluation that early."""
    if run["status"].get("state") == "diverged":
        return math.nan
    change = convergence.window_change(run["curves"].get(metric, []))
    if change is None:
        return math.nan
    return change.change if higher_is_better else -change.change

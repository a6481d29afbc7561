"""Speed and capability, told apart on a study's curves (pure functions).

A short run's final value mixes how fast a variant learns with how far it gets. Two numbers
separate them on a results page: the final value, and the first step at which a variant's
mean curve over seeds reached a stated fraction of the best variant's final value
(`steps_to_reach`). A claim that a variant "trains at all" (or does not) only says so at a
budget where the baseline has stopped moving; `window_change` measures how much a curve still moved over its
last fifth of steps. Where the baseline is still moving, a verdict measures speed as well as
capability.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Optional, Sequence

import numpy as np

Curve = list[tuple[int, float]]  # [(step, value)] in step order
SPEED_FRACTION = 0.9  # "reached 90 % of the best final value"
FLAT_WINDOW = 0.2  # the last fifth of a run's steps


@dataclasses.dataclass(frozen=True)
class Change:
    """How much a curve moved over its last steps: value at `end` − value at `start`."""

    start: int  # step
    end: int  # step (the curve's last)
    change: float


def seed_mean_curve(curves: Sequence[Curve]) -> Curve:
    """The mean of several seeds' curves at every step any of them has, over the seeds with
    a finite value there (a step logged twice, as after a resume, keeps its last value)."""
    points = [dict(c) for c in curves]
    mean = []
    for step in sorted(set().union(*points)):
        values = [p[step] for p in points if step in p and math.isfinite(p[step])]
        if values:
            mean.append((step, float(np.mean(values))))
    return mean


def best_final(finals: Iterable[float], higher_is_better: bool) -> float:
    """The best of the variants' final values (nan ones left out); nan if none is finite."""
    finite = [x for x in finals if math.isfinite(x)]
    if not finite:
        return math.nan
    return max(finite) if higher_is_better else min(finite)


def target_value(best: float, fraction: float, higher_is_better: bool) -> float:
    """The value that counts as `fraction` of `best`: fraction · best when higher is better,
    best / fraction when lower is (written with |best|, so a negative best stays sane)."""
    if higher_is_better:
        return best - (1 - fraction) * abs(best)
    return best + (1 / fraction - 1) * abs(best)


def steps_to_reach(curve: Curve, target: float, higher_is_better: bool) -> Optional[int]:
    """The first step at which `curve` is at `target` or better; None if it never is."""
    for step, value in curve:
        if value >= target if higher_is_better else value <= target:
            return step
    return None


def window_change(curve: Curve, window: float = FLAT_WINDOW) -> Optional[Change]:
    """How much `curve` moved over its last `window` of steps (from step 0 to its last step):
    from its last point at or before (1 − window) · last step to its last point. None when no
    point is that early (too few evaluations to measure it)."""
    if not curve:
        return None
    end, last = curve[-1]
    earlier = [(s, v) for s, v in curve if s <= end * (1 - window) + 1e-9 and s < end]
    if not earlier:
        return None
    start, first = earlier[-1]
    return Change(start=start, end=end, change=last - first)


def higher_is_better(metric: str, expectations: Iterable) -> bool:
    """The direction the study judges `metric` in (its expectations'); a metric no expectation
    judges: lower is better for a loss or perplexity, higher for anything else."""
    for e in expectations:
        if e.metric == metric:
            return e.higher_is_better
    return not any(word in metric for word in ("loss", "perplexity", "bits"))


def steps_to_fraction_of_best(curves: dict[str, Curve], higher: bool,
                              fraction: float = SPEED_FRACTION) -> dict[str, Optional[int]]:
    """variant -> the first step its (seed-mean) curve reached `fraction` of the best variant's
    final value; None where it never did (or has no curve)."""
    best = best_final((c[-1][1] for c in curves.values() if c), higher)
    if not math.isfinite(best):
        return {v: None for v in curves}
    target = target_value(best, fraction, higher)
    return {v: steps_to_reach(c, target, higher) for v, c in curves.items()}

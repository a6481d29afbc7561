"""The range a metric's values can take, and its intervals shown within it.

A Student-t interval is symmetric about the mean, so for seeds near a bound (accuracies near 1,
losses near 0) it reaches past what the metric can be: [0.9982, 1.001] for an accuracy. The
figures and the final-metrics tables show such an interval clipped to the metric's range, and say
so; the verdicts are decided on the interval as computed (stats.py), which this module never
changes.
"""
from __future__ import annotations

import math

import numpy as np

# The range of a metric, by the last part of its tag: fractions lie in [0, 1]; cross-entropies,
# bits and norms are never below 0.
FRACTIONS = ("accuracy", "seq_accuracy")
NON_NEGATIVE = ("loss", "bits_per_char", "bits_per_token", "grad_norm", "param_norm",
                "update_norm", "max_weight", "max_abs_logit", "learning_rate")

CLIPPED_NOTE = ("Intervals of a bounded metric (an accuracy lies in [0, 1], a loss is ≥ 0) are "
                "shown clipped to that range: the 95 % t-interval is symmetric about the mean "
                "and reaches past the bound when the seeds sit near it. Verdicts use the "
                "interval as computed.")


def metric_bounds(metric: str) -> tuple[float, float]:
    """(lowest, highest) value `metric` can take; (-inf, inf) for a metric of unknown kind."""
    kind = metric.split("/")[-1]
    if kind in FRACTIONS:
        return 0.0, 1.0
    if kind in NON_NEGATIVE:
        return 0.0, math.inf
    return -math.inf, math.inf


def clip_to_bounds(metric: str, low, high):
    """(low, high) of an interval of `metric` (numbers or arrays), clipped to its range."""
    lowest, highest = metric_bounds(metric)
    return np.clip(low, lowest, highest), np.clip(high, lowest, highest)


def reaches_past_bounds(metric: str, low: float, high: float) -> bool:
    """Whether the interval [low, high] of `metric` reaches past the metric's range."""
    lowest, highest = metric_bounds(metric)
    return low < lowest or high > highest

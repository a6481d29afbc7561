"""Holm's (1979) correction over a study's expectations: which of its settled verdicts survive
the number of expectations it judges at once.

Each expectation's p-value is that of its settled verdict, consistent with its intervals: the
smallest α at which its interval at confidence 1 − α is settled (wholly on one side of the
threshold), found by bisection over the confidence. Intervals narrow as the confidence falls,
so a verdict settled at one α stays settled at every larger α, and p <= 0.05 exactly when the
95 % verdict is settled. Holm's step-down then keeps a settled verdict only if its p survives;
one that does not becomes inconclusive. docs/verdicts.md states the rule.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from transformer_jax.studies.judge import expectation as judging
from transformer_jax.studies.judge.stats import Failure, Verdict
from transformer_jax.studies.judge.terms import Stated

FAMILY_LEVEL = 0.05  # Holm's family-wise error rate over one study's expectations
TOLERANCE = 1e-12  # of the bisected p-value; far below any printed digit


def settled_p(settled: Callable[[float], bool], tolerance: float = TOLERANCE) -> float:
    """The smallest α in (0, 1] with settled(1 − α) (settled: confidence -> bool, monotone:
    settled at a confidence, settled at every lower one); 1.0 if not settled even at confidence
    0 (an interval that cannot be settled: one seed, or a point on the threshold); 0.0 if
    settled at every α down to `tolerance` (a zero spread: the interval is the point at every
    confidence). Confidence 1 itself is never asked: its intervals are infinite."""
    if not settled(0.0):
        return 1.0
    low, high = 0.0, 1.0  # not known settled at α = low; settled at α = high
    while high - low > tolerance:
        mid = (low + high) / 2
        low, high = (low, mid) if settled(1.0 - mid) else (mid, high)
    return high if low > 0.0 else 0.0


def p_value(e: Stated, final: Mapping[str, Mapping[int, float]],
            stopped: Optional[Mapping[str, Mapping[int, int]]] = None) -> float:
    """The p-value of the expectation's settled verdict on `final` (expectation.judge's
    inputs)."""
    return settled_p(lambda confidence: judging.judge(e, final, confidence, stopped).verdict
                     is not Verdict.INCONCLUSIVE)


def holm_survives(p: Sequence[float], level: float = FAMILY_LEVEL) -> list[bool]:
    """Holm's step-down: in ascending order of p, the i-th smallest (i from 0) survives while
    p <= level / (m − i); the first that does not stops it, and every larger p fails too."""
    m = len(p)
    survives = [False] * m
    for i, at in enumerate(sorted(range(m), key=lambda k: p[k])):
        if p[at] > level / (m - i):
            break
        survives[at] = True
    return survives


def holm_verdicts(verdicts: Sequence[Verdict], p: Sequence[float],
                  level: float = FAMILY_LEVEL) -> list[Verdict]:
    """Each verdict under Holm: a settled one whose p does not survive becomes inconclusive."""
    return [v if keep else Verdict.INCONCLUSIVE
            for v, keep in zip(verdicts, holm_survives(p, level))]


def holm_failures(failures: Sequence[Optional[Failure]],
                  verdicts: Sequence[Verdict]) -> list[Optional[Failure]]:
    """How each failure under Holm failed: as before if it still does not hold, else none."""
    return [f if v is Verdict.FAILS else None for f, v in zip(failures, verdicts)]

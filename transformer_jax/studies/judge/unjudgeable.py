"""What would hold or fail by construction, refused before a study runs (`refusal`; Study.
refuse_unjudgeable raises it): a failure rate the seed count cannot show, and a diverged run
counted below chance accuracy.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from transformer_jax.studies.judge.stats import MAX_SEEDS, rate_interval
from transformer_jax.studies.judge.terms import RATES, Comparison, Stated

Chance = Callable[[Any], Optional[float]]  # a run's config -> its task's chance accuracy


def refusal(study: Any, chance: Chance) -> Optional[str]:
    """Why the first of `study`'s expectations that holds or fails by construction does (None:
    none does); `chance`: what a uniform guess scores on a config's task (None: not known)."""
    for e in study.expectations:
        problem = rate_beyond_seeds(e, len(study.seeds)) or worst_below_chance(study, e, chance)
        if problem:
            return f"expectation {e.text!r}: {problem}"
    return None


def worst_below_chance(study: Any, e: Stated, chance: Chance) -> Optional[str]:
    """Why `e` counts a diverged run below chance accuracy (None: it does not). A failed run
    counted below chance would let an arm at chance "beat" it."""
    if e.worst is None or not e.metric.startswith("eval/accuracy") or not e.higher_is_better:
        return None
    # a tuned arm is no variant: its candidates are what trained
    trained = [c for v in e.variants() for c in study.tuned.get(v, (v,))]
    chances = [chance(study.config(v, study.seeds[0])) for v in trained]
    lowest = min((c for c in chances if c is not None), default=None)
    if lowest is None or e.worst >= lowest - 1e-12:
        return None
    return (f"worst={e.worst:g} counts a diverged run below chance accuracy ({lowest:.4g}, a "
            f"uniform guess on its task): count it as chance at most")


def rate_beyond_seeds(e: Stated, n: int) -> Optional[str]:
    """Why a failure-rate expectation cannot hold at `n` seeds (None: it can). With k of n runs
    failing the Clopper–Pearson interval never reaches 0 or 1 unless k does, so "at most 0 %"
    cannot hold at any n, "at most 10 %" not below 36 seeds, "at least 50 %" not below 6."""
    if e.comparison not in RATES:
        return None
    at_most = e.comparison is Comparison.FAIL_RATE_AT_MOST

    def can_hold(m: int) -> bool:  # with every run alike, the best case for the expectation
        return rate_interval(0, m)[1] <= e.margin if at_most else rate_interval(m, m)[0] >= e.margin

    if can_hold(n):
        return None
    best = rate_interval(0, n)[1] if at_most else rate_interval(n, n)[0]
    needed = next((m for m in range(n + 1, MAX_SEEDS + 1) if can_hold(m)), None)
    return (f"a failure rate {'≤' if at_most else '≥'} {e.margin:.0%} cannot hold at {n} seeds "
            f"(with {'no' if at_most else 'every'} run failing, its 95 % interval still "
            f"{'reaches' if at_most else 'starts at'} {best:.0%}): " +
            (f"it needs {needed} seeds" if needed else
             f"no number of seeds up to {MAX_SEEDS} can show it"))

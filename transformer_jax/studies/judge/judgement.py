"""One judgement: an expectation's effect on a set of per-seed values, its 95 % interval and the
verdict they give (`Judgement`, the numbers behind a verdict). `judge_filled` judges values in
which every run has one (expectation.py decides what a run without one counts as);
`judge_rate` judges a failure rate, where a run without a value is a failed run.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional

import numpy as np

from transformer_jax.studies.judge.stats import (Failure, Verdict, decide, difference_interval,
                                                 mean_interval, mean_over_seeds, rate_interval,
                                                 relative_gap, relative_gap_interval,
                                                 seeds_to_bound, seeds_to_settle,
                                                 seeds_to_settle_rate, settle_note,
                                                 unbounded_note)
from transformer_jax.studies.judge.terms import Comparison, Stated, accepted


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What one expectation measured: the numbers behind its verdict."""

    verdict: Verdict
    values: Mapping[str, Mapping[int, float]]  # variant -> seed -> final value as counted
    diverged: Mapping[str, tuple[int, ...]]  # variant -> seeds that diverged
    fill: Mapping[str, float]  # variant -> what its diverged runs counted as (rates: none)
    effect: float  # a − b (gain, sign so that > 0 is better), relative gap, mean(a), fail rate
    low: float  # 95 % interval of `effect`; ±inf when it cannot be measured (one seed)
    high: float
    paired: bool
    note: str = ""  # why inconclusive, and how many seeds would settle it; how it failed
    failure: Optional[Failure] = None  # a verdict that does not hold: contradicted or smaller

    @property
    def holds(self) -> bool:
        return self.verdict is Verdict.HOLDS


def judge_filled(e: Stated, final, diverged, fill: Mapping[str, float],
                 confidence: float) -> Judgement:
    """`e` judged on `final` (variant -> seed -> value) with each diverged run counted as its
    variant's `fill`."""
    names = e.variants()
    values = {v: {s: fill[v] if s in diverged[v] else final[v][s] for s in sorted(final[v])}
              for v in names}
    paired = len(names) >= 2 and all(list(values[v]) == list(values[names[0]])
                                     for v in names[1:])
    samples = [np.array(list(values[v].values())) for v in names]  # each (seeds,), by seed
    base = dict(values=values, diverged=diverged, fill=fill, paired=paired)
    if any(np.isnan(x).any() for x in samples):
        return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                         note="every run diverged: set Expectation.worst", **base)
    if len(names) == 4 and not paired:
        return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                         note="a difference of differences pairs its four variants by seed: "
                              "they must have the same seeds", **base)
    if e.comparison is Comparison.RATIO and any((x <= 0).any() for x in samples):
        return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                         note="a ratio needs positive values: a value is ≤ 0", **base)
    effect, low, high = (float(x) for x in _interval(e, samples, paired, confidence))
    verdict = decide(low, high, accepted(e))
    note = (_why_inconclusive(e, samples, effect, low, high)
            if verdict is Verdict.INCONCLUSIVE else "")
    return Judgement(verdict, effect=effect, low=low, high=high, note=note, **base)


def _why_inconclusive(e: Stated, samples: list[np.ndarray], effect: float, low: float,
                      high: float) -> str:
    """How many seeds would settle it; for an unbounded relative gap (the mean it is
    relative to not yet told apart from 0), how many would bound it."""
    n = min(map(len, samples))
    if n >= 2 and not math.isfinite(high - low):
        return unbounded_note(n, seeds_to_bound(samples[-1]), e.variants()[-1])
    region = accepted(e)
    if e.comparison is Comparison.RATIO:  # the interval is symmetric on the log scale
        effect, low, high = (math.log(x) for x in (effect, low, high))
        region = (math.log(region[0]), region[1])
    return settle_note(n, seeds_to_settle(n, effect, low, high, region))


def _interval(e: Stated, samples: list[np.ndarray], paired: bool, confidence: float):
    """(effect, low, high) of the comparison's statistic."""
    if e.comparison in (Comparison.AT_MOST, Comparison.AT_LEAST):
        return (mean_over_seeds(samples[0]), *mean_interval(samples[0], confidence))
    sign = 1.0 if e.higher_is_better else -1.0  # gain: > 0 means `a` is better
    if e.comparison is Comparison.DIFFERENCE_OF_DIFFERENCES:
        a, b, c, d = samples
        per_seed = sign * ((a - b) - (c - d))  # (seeds,), paired (judge_filled)
        return (mean_over_seeds(per_seed), *mean_interval(per_seed, confidence))
    a, b = samples
    if e.comparison is Comparison.RATIO:
        log_a, log_b = (np.log(x) if e.higher_is_better else -np.log(x) for x in (a, b))
        # of mean log a − mean log b
        low, high = difference_interval(log_a, log_b, paired, confidence)
        return tuple(np.exp(x) for x in (np.mean(log_a) - np.mean(log_b), low, high))
    if e.comparison is Comparison.WITHIN:
        return (relative_gap(a, b), *relative_gap_interval(a, b, paired, confidence))
    low, high = difference_interval(a, b, paired, confidence)  # of mean a − mean b
    gain = sign * (mean_over_seeds(a) - mean_over_seeds(b))
    return (gain, low, high) if sign > 0 else (gain, -high, -low)


def judge_rate(e: Stated, runs: Mapping[int, float], diverged, confidence: float) -> Judgement:
    """The fraction of `a`'s runs that fail, with its Clopper–Pearson interval."""
    values = {s: runs[s] for s in sorted(runs)}
    passes = (lambda x: x >= e.threshold) if e.higher_is_better else \
        (lambda x: x <= e.threshold)
    k, n = sum(not (math.isfinite(x) and passes(x)) for x in values.values()), len(values)
    low, high = rate_interval(k, n, confidence)
    verdict = decide(low, high, accepted(e))
    note = settle_note(n, seeds_to_settle_rate(k, n, accepted(e)), "this rate") \
        if verdict is Verdict.INCONCLUSIVE else ""
    return Judgement(verdict, values={e.a: values}, diverged=diverged, fill={},
                     effect=k / n, low=low, high=high, paired=False, note=note)

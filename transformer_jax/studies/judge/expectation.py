"""Judging one expectation on its runs (`judge`): what is refused whatever the numbers, what a
run without a value counts as, and how a verdict that does not hold failed.

A diverged run (final value nan) has no value. Unless the expectation's `worst` says what it
counts as, each such run is filled with the study's lowest and with its highest finished value
(`fills`); the verdict stands only where every fill gives the same one, and the judgement shows
the case least favourable to the expectation. docs/verdicts.md states the rules.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Mapping, Optional

from transformer_jax.studies.judge.judgement import Judgement, judge_filled, judge_rate
from transformer_jax.studies.judge.stats import (CONFIDENCE, Failure, Verdict, how_it_failed,
                                                 smaller_note)
from transformer_jax.studies.judge.terms import (NO_EFFECT, RATES, REFUSED_ON_LOST, Kind,
                                                 Measure, Stated, accepted)

# A variant with runs that diverged (or gave no value) is judged, with those runs filled, only
# where at least this many of its runs have a value (judging rules 6).
MIN_MEASURED = 2


def judge(e: Stated, final: Mapping[str, Mapping[int, float]],
          confidence: float = CONFIDENCE,
          stopped: Optional[Mapping[str, Mapping[int, int]]] = None) -> Judgement:
    """final: variant -> seed -> the metric's final value (nan for a diverged run). Give
    every variant of the study: diverged runs count as the study's finished values.
    `confidence`: of the intervals (another than CONFIDENCE: multiplicity.p_value).
    `stopped`: variant -> seed -> the step at which each diverged run stopped (None: not
    known), which tells a variant that was never finite (`refused`)."""
    found = refused(e, final, stopped)
    return found if found is not None else classified(e, judged(e, final, confidence))


def refused(e: Stated, final: Mapping[str, Mapping[int, float]],
            stopped: Optional[Mapping[str, Mapping[int, int]]]) -> Optional[Judgement]:
    """What cannot be judged, whatever `worst` says (None: it can be), inconclusive with why:
    a late gain ("flattened"), a gain or a gap on a variant whose every run diverged (its
    runs measured no such thing: a `worst` would decide it alone); and a comparison of two
    variants one of which was never finite (every run stopped at step 1 or before), unless
    the expectation is declared a check of exactly that."""
    if e.comparison in RATES:
        return None
    lost = [v for v in e.variants() if final.get(v)
            and not any(math.isfinite(x) for x in final[v].values())]
    what = ("a late gain" if e.measure is Measure.LATE_GAIN else
            REFUSED_ON_LOST.get(e.comparison))
    if lost and what:
        note = f"refused: every run of {' and '.join(lost)} diverged, so {what} on it " \
               "measures nothing"
    else:
        never = [v for v in lost if stopped is not None and e.b is not None
                 and all(stopped.get(v, {}).get(s, math.inf) <= 1 for s in final[v])]
        if not never or e.kind is Kind.CHECK:
            return None
        note = (f"refused: every run of {' and '.join(never)} was non-finite from step 1, so "
                "nothing was measured on that side (a check of that is declared one)")
    diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                for v in e.variants()}
    return Judgement(Verdict.INCONCLUSIVE, values={v: dict(final[v]) for v in e.variants()},
                     diverged=diverged, fill={}, effect=math.nan, low=-math.inf,
                     high=math.inf, paired=False, note=note)


def classified(e: Stated, j: Judgement) -> Judgement:
    """A verdict that does not hold, with how it failed (the note says which kind of
    smaller than stated)."""
    no_effect = NO_EFFECT[e.comparison]
    failure = how_it_failed(j.low, j.high, accepted(e), no_effect)
    if j.verdict is not Verdict.FAILS or failure is None:
        return j
    note = smaller_note(j.low, no_effect) if failure is Failure.SMALLER else j.note
    return dataclasses.replace(j, failure=failure, note=note)


def judged(e: Stated, final: Mapping[str, Mapping[int, float]], confidence: float) -> Judgement:
    """The verdict on `final` with each diverged run filled (`fills`): the case least favourable
    to `e`, inconclusive where too few runs have a value or the fills disagree."""
    diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                for v in e.variants()}
    empty = [v for v in e.variants() if not final[v]]
    if empty:
        values = {v: dict(final[v]) for v in e.variants()}
        return Judgement(Verdict.INCONCLUSIVE, values=values, diverged=diverged, fill={},
                         effect=math.nan, low=-math.inf, high=math.inf, paired=False,
                         note=f"no runs of {' and '.join(empty)}")
    if e.comparison in RATES:
        return judge_rate(e, final[e.a], diverged, confidence)
    cases = [judge_filled(e, final, diverged, fill, confidence)
             for fill in fills(e, final, diverged)]
    shown = min(cases, key=lambda j: support(e, j))  # the case least favourable to `e`
    # The fill stands for the runs without a value only beside two or more with one: with
    # none there is nothing to fill from, and beside a single one the fill copies it and the
    # interval has no spread to show (rules 6; since 7 one rule for both)
    few = [v for v in e.variants()
           if diverged[v] and len(final[v]) - len(diverged[v]) < MIN_MEASURED]
    if few and e.worst is None:
        counts = ", ".join(f"{len(final[v]) - len(diverged[v])} of {len(final[v])} runs of {v}"
                           for v in few)
        return dataclasses.replace(shown, verdict=Verdict.INCONCLUSIVE, note=(
            f"fewer than {MIN_MEASURED} runs with a value ({counts}; the others diverged or "
            "gave none), so what the others count as would decide it: set "
            "Expectation.worst, the value a run without one counts as"))
    if len({j.verdict for j in cases}) > 1:
        ends = sorted({x for j in cases for x in j.fill.values()})
        return dataclasses.replace(shown, verdict=Verdict.INCONCLUSIVE, note=(
            f"the diverged runs decide it (counted as {' or '.join(f'{x:.4g}' for x in ends)}: "
            f"{' or '.join(sorted({j.verdict.value for j in cases}))}): set Expectation.worst"))
    return shown


def fills(e: Stated, final, diverged) -> list[dict[str, float]]:
    """What diverged runs may count as: `worst` if set; else the study's lowest or highest
    finished value, each combination over the variants with diverged runs."""
    hit = [v for v in e.variants() if diverged[v]]
    if e.worst is not None:
        return [{v: e.worst for v in hit}]
    finite = [x for per_seed in final.values() for x in per_seed.values() if math.isfinite(x)]
    ends = (min(finite), max(finite)) if finite else (math.nan,)
    return [dict(zip(hit, ends_)) for ends_ in itertools.product(ends, repeat=len(hit))]


def support(e: Stated, j: Judgement) -> float:
    """How far the interval sits inside the accepted region (< 0: it pokes out)."""
    lo, hi = accepted(e)
    return min(j.low - lo, hi - j.high) if math.isfinite(j.high - j.low) else -math.inf

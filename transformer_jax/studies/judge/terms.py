"""The terms an expectation is stated in, as the judge reads them: how its variants are compared
(`Comparison`), what of each run's curve it judges (`Measure`), what it is evidence of (`Kind`),
and what each comparison means to the judge: the region of its effect that supports it
(`accepted`), its "no effect", what it refuses on a variant that measured nothing.

An expectation itself is `transformer_jax.studies.study.Expectation`, part of the design that
experiment files write; the judge room sits below it and reads it as `Stated` says.
"""
from __future__ import annotations

import enum
import math
from typing import Optional, Protocol


class Comparison(enum.Enum):
    BETTER = "better"  # mean of `a` beats mean of `b` by at least `margin`
    WITHIN = "within"  # |mean a − mean b| <= margin · |mean b|  (relative)
    AT_MOST = "at_most"  # mean of `a` <= margin (absolute), e.g. accuracy stuck at chance
    AT_LEAST = "at_least"  # mean of `a` >= margin (absolute), e.g. a gradient ratio kept up
    # `a` beats `b` by at least a factor `margin` (> 1): judged on the log scale, where a
    # heavy-tailed positive quantity (a max logit, a gradient norm) is near normal: the mean
    # over seeds of log(a/b) (per seed if paired), its t interval, back-transformed for the page
    # (the geometric mean ratio). Lower is better: the factor is b/a.
    RATIO = "ratio"
    # All-or-nothing outcomes, judged as a rate, not a mean: a run of `a` fails when it diverged
    # or its final value is on the wrong side of `threshold` (below it if higher_is_better, above
    # it if not); `margin` bounds the fraction of `a`'s runs that fail.
    FAIL_RATE_AT_LEAST = "fail_rate_at_least"  # e.g. Post-LN without warm-up fails on some seeds
    FAIL_RATE_AT_MOST = "fail_rate_at_most"  # e.g. Pre-LN fails on at most a few
    # `a`'s gain over `b` beats `c`'s gain over `d` by at least `margin`: per seed (the four
    # variants paired by seed), (a − b) − (c − d), signed so that > 0 is better; e.g. the price
    # of leaving ÷√d_k out grows with d_k (a, b: unscaled, scaled at the wide head; c, d: at the
    # narrow one, lower is better). An interaction, which two differences judged apart cannot
    # state.
    DIFFERENCE_OF_DIFFERENCES = "difference_of_differences"


RATES = (Comparison.FAIL_RATE_AT_LEAST, Comparison.FAIL_RATE_AT_MOST)
# What an expectation measures on a variant, where one whose every run diverged measured none
# of it (expectation.refused): a final value that `worst` stands in for is no gain or gap.
REFUSED_ON_LOST = {Comparison.BETTER: "a gain", Comparison.WITHIN: "a gap",
                   Comparison.DIFFERENCE_OF_DIFFERENCES: "a gain"}
# Each comparison's effect when nothing differs ("no effect"; None: it has no such value), from
# which a verdict that does not hold is told contradicted or smaller than stated
# (stats.how_it_failed). A new comparison declares its own here (tests/studies/test_failure.py).
NO_EFFECT: dict[Comparison, Optional[float]] = {
    Comparison.BETTER: 0.0,  # no gain
    Comparison.WITHIN: 0.0,  # no gap
    Comparison.AT_MOST: None,  # one variant's mean against a bound: no "no effect" to compare
    Comparison.AT_LEAST: None,
    Comparison.RATIO: 1.0,  # a factor of 1 (the judgement's interval is back-transformed)
    Comparison.FAIL_RATE_AT_LEAST: 0.0,  # no run fails
    Comparison.FAIL_RATE_AT_MOST: 0.0,
    Comparison.DIFFERENCE_OF_DIFFERENCES: 0.0,  # the two gains are equal
}
PAIRS = (Comparison.BETTER, Comparison.WITHIN, Comparison.RATIO)  # of two variants, a and b


class Measure(enum.Enum):
    """What of each run's curve an expectation judges."""

    FINAL = "final"  # the metric's final value (or its value at `at_step`)
    # How much the metric still improved over the run's last fifth of steps (convergence.
    # window_change, signed so that > 0 is better): a "trains at all" verdict asks that its
    # baseline has flattened, e.g. AT_MOST 0.02 on the baseline's late gain.
    LATE_GAIN = "late_gain"


class Kind(enum.Enum):
    """What an expectation is evidence of (docs/verdicts.md, "Kinds of expectation"). Declaring
    a kind is disclosure, not a design move: it is outside the fingerprint. A finding may be
    declared a check or post hoc after its results (an amendment names the commit, `why` says
    why); nothing becomes a finding after its results (preregistration.kind_problems)."""

    FINDING = "finding"  # could have come out either way, given what was known when written
    # holds by construction or arithmetic, or was known before the run: it shows that the
    # instrument works; counted apart, and one that does not hold is an alarm
    CHECK = "check"
    POST_HOC = "post_hoc"  # its threshold or comparison was set after its values were seen


class Stated(Protocol):
    """What the judge reads of an expectation (study.Expectation's fields)."""

    text: str
    a: str
    b: Optional[str]
    comparison: Comparison
    margin: float
    higher_is_better: bool
    worst: Optional[float]
    threshold: Optional[float]
    metric: str
    measure: Measure
    kind: Kind

    def variants(self) -> list[str]: ...


def accepted(e: Stated) -> tuple[float, float]:
    """The region of `e`'s effect that supports it."""
    if e.comparison in (Comparison.BETTER, Comparison.FAIL_RATE_AT_LEAST,
                        Comparison.AT_LEAST, Comparison.RATIO,
                        Comparison.DIFFERENCE_OF_DIFFERENCES):
        return e.margin, math.inf
    if e.comparison is Comparison.WITHIN:
        return -e.margin, e.margin
    return -math.inf, e.margin

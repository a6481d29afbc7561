"""Verdicts on the boundary. The accepted region of an expectation is closed: an interval that
starts exactly on a lower threshold, or ends exactly on an upper one, lies inside it and
**holds**; an interval that only touches a threshold from outside shares that one point with
the region, so it is **inconclusive**, not "does not hold". A strict comparison where an
inclusive one belongs would turn the first into "inconclusive", and the second into "does not
hold", unnoticed: every interval kind (paired t, Welch, Fieller, Clopper-Pearson, the t interval
of a mean for "at most") is checked at both ends of its interval, on the threshold and one float
step past it, through `Expectation.judge` on constructed per-seed values and through `decide`.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import pytest

from transformer_jax.studies.study import Comparison, Expectation, Verdict, decide

HOLDS, FAILS, UNSURE = Verdict.HOLDS, Verdict.FAILS, Verdict.INCONCLUSIVE
INF = math.inf


def by_seed(*values: float, first: int = 0) -> dict[int, float]:
    return {first + i: v for i, v in enumerate(values)}


def up(x: float) -> float:
    return math.nextafter(x, INF)


def down(x: float) -> float:
    return math.nextafter(x, -INF)


# --- decide, directly ---------------------------------------------------------------------------

@pytest.mark.parametrize("low, high, accepted, verdict", [
    # at least (BETTER, FAIL_RATE_AT_LEAST): [margin, inf)
    (0.2, 0.5, (0.2, INF), HOLDS),  # starts on the threshold
    (up(0.2), 0.5, (0.2, INF), HOLDS),
    (down(0.2), 0.5, (0.2, INF), UNSURE),  # starts one step below it
    (0.1, 0.2, (0.2, INF), UNSURE),  # ends on it: touches from below
    (0.1, down(0.2), (0.2, INF), FAILS),
    (0.2, 0.2, (0.2, INF), HOLDS),  # zero width on the threshold
    (0.0, 0.0, (0.0, INF), HOLDS),  # margin 0, no effect: "at least as good"
    (-0.0, -0.0, (0.0, INF), HOLDS),  # the same, signed (a lower-is-better gain of −0.0)
    (0.0, INF, (0.0, INF), HOLDS),
    # at most (AT_MOST, FAIL_RATE_AT_MOST): (−inf, margin]
    (0.3, 0.6, (-INF, 0.6), HOLDS),  # ends on the threshold
    (0.3, up(0.6), (-INF, 0.6), UNSURE),
    (0.6, 0.9, (-INF, 0.6), UNSURE),  # starts on it: touches from above
    (up(0.6), 0.9, (-INF, 0.6), FAILS),
    (0.6, 0.6, (-INF, 0.6), HOLDS),
    (up(0.6), up(0.6), (-INF, 0.6), FAILS),  # zero width one step past it
    # within (WITHIN): [−margin, margin]
    (-0.5, 0.5, (-0.5, 0.5), HOLDS),  # on both thresholds at once
    (-0.5, -0.5, (-0.5, 0.5), HOLDS),
    (0.0, 0.0, (-0.0, 0.0), HOLDS),  # margin 0, no gap
    (down(-0.5), 0.0, (-0.5, 0.5), UNSURE),
    (0.5, 0.7, (-0.5, 0.5), UNSURE),
    (-0.7, -0.5, (-0.5, 0.5), UNSURE),
    (up(0.5), 0.7, (-0.5, 0.5), FAILS),
    (-0.7, down(-0.5), (-0.5, 0.5), FAILS),
    # what cannot be measured is never settled
    (-INF, INF, (0.0, INF), UNSURE),
    (-INF, INF, (-INF, 0.6), UNSURE),
    (math.nan, math.nan, (0.0, INF), UNSURE),
])
def test_decide_closed_region(low, high, accepted, verdict):
    assert decide(low, high, accepted) is verdict


# --- every interval kind, through Expectation.judge ---------------------------------------------

A = by_seed(0.91, 0.86, 0.88, 0.93)
B = by_seed(0.52, 0.55, 0.50, 0.58)
B_OTHER_SEEDS = by_seed(0.52, 0.55, 0.50, 0.58, first=10)
RUNS = by_seed(0.9, 0.2, 0.95, 0.3, 0.9)  # two of five below 0.5: a fail rate of 2/5


def better(margin, **kw):
    return Expectation("", "m", "a", Comparison.BETTER, margin, b="b", **kw)


def within(margin):
    return Expectation("", "m", "a", Comparison.WITHIN, margin, b="b")


def at_most(margin):
    return Expectation("", "m", "a", Comparison.AT_MOST, margin)


def fail_rate(comparison):
    return lambda margin: Expectation("", "m", "a", comparison, margin, threshold=0.5)


# kind -> (expectation(margin), final values, the threshold its interval is checked against:
# 'lower' (margin) for an accepted region [margin, ...), 'upper' (margin) for (..., margin],
# 'lower = −margin' for WITHIN's [−margin, margin] seen from below)
KINDS: dict[str, tuple[Callable[[float], Expectation], dict, str]] = {
    "paired t": (better, {"a": A, "b": B}, "lower"),
    "paired t, lower is better": (lambda m: better(m, higher_is_better=False),
                                  {"a": B, "b": A}, "lower"),
    "Welch": (better, {"a": A, "b": B_OTHER_SEEDS}, "lower"),
    "Welch, lower is better": (lambda m: better(m, higher_is_better=False),
                               {"a": B_OTHER_SEEDS, "b": A}, "lower"),
    "Fieller paired, a above b": (within, {"a": A, "b": B}, "upper"),
    "Fieller paired, a below b": (within, {"a": B, "b": A}, "lower = −margin"),
    "Fieller unpaired, a above b": (within, {"a": A, "b": B_OTHER_SEEDS}, "upper"),
    "Fieller unpaired, a below b": (within, {"a": B_OTHER_SEEDS, "b": A}, "lower = −margin"),
    "t of the mean (at most)": (at_most, {"a": A}, "upper"),
    "Clopper-Pearson at least": (fail_rate(Comparison.FAIL_RATE_AT_LEAST), {"a": RUNS}, "lower"),
    "Clopper-Pearson at most": (fail_rate(Comparison.FAIL_RATE_AT_MOST), {"a": RUNS}, "upper"),
}


def interval(kind: str) -> tuple[float, float]:
    """The kind's (low, high): no kind's interval depends on its margin."""
    make, final, _ = KINDS[kind]
    j = make(0.5).judge(final)
    assert math.isfinite(j.low) and math.isfinite(j.high) and j.low < j.high, j
    return j.low, j.high


# Where the threshold goes, from the interval (low, high), and the verdict there: on the end
# inside the accepted region, one step past it, on the far end, one step past that.
PLACES = ("on_inner_end", "past_inner_end", "on_outer_end", "past_outer_end")
VERDICTS = (HOLDS, UNSURE, UNSURE, FAILS)
THRESHOLDS = {  # side -> the four thresholds
    "lower": lambda low, high: (low, up(low), high, up(high)),
    "upper": lambda low, high: (high, down(high), low, down(low)),
}
THRESHOLDS["lower = −margin"] = THRESHOLDS["lower"]


@pytest.mark.parametrize("place", range(4), ids=PLACES)
@pytest.mark.parametrize("kind", KINDS)
def test_interval_touching_the_threshold(kind, place):
    make, final, side = KINDS[kind]
    low, high = interval(kind)
    threshold = THRESHOLDS[side](low, high)[place]
    j = make(-threshold if side == "lower = −margin" else threshold).judge(final)
    assert (j.low, j.high) == (low, high)
    assert j.verdict is VERDICTS[place], j


def test_the_kinds_are_the_intervals_they_are_named_after():
    """The table above reaches each interval: paired where the seeds match, a rate's interval
    from 2 failures of 5 (Clopper-Pearson), the two sides of WITHIN."""
    assert better(0.1).judge(KINDS["paired t"][1]).paired
    assert not better(0.1).judge(KINDS["Welch"][1]).paired
    assert not within(0.1).judge(KINDS["Fieller unpaired, a above b"][1]).paired
    assert interval("Fieller paired, a above b")[0] > 0 > interval("Fieller paired, a below b")[1]
    rate = fail_rate(Comparison.FAIL_RATE_AT_MOST)(0.5).judge({"a": RUNS})
    assert rate.effect == 2 / 5
    assert sum(interval("t of the mean (at most)")) / 2 == pytest.approx(np.mean(list(A.values())))


# --- margin 0 and zero width -------------------------------------------------------------------

SPREAD = by_seed(0.5, 0.6, 0.7)


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_identical_variants_are_at_least_as_good_at_margin_0(higher_is_better):
    """The same per-seed values: every paired difference is 0, the interval is the point 0."""
    j = better(0.0, higher_is_better=higher_is_better).judge({"a": SPREAD, "b": SPREAD})
    assert j.paired and j.low == j.high == 0.0 and j.verdict is HOLDS and j.note == ""


def test_identical_constant_variants_on_other_seeds_are_at_least_as_good_at_margin_0():
    """Welch with no spread on either side: the interval is the point 0."""
    j = better(0.0).judge({"a": by_seed(0.5, 0.5, 0.5), "b": by_seed(0.5, 0.5, 0.5, first=3)})
    assert not j.paired and j.low == j.high == 0.0 and j.verdict is HOLDS


def test_equal_spread_on_other_seeds_is_not_settled_at_margin_0():
    """Unpaired, the same values' Welch interval has width around 0: it straddles the threshold."""
    j = better(0.0).judge({"a": SPREAD, "b": by_seed(0.5, 0.6, 0.7, first=3)})
    assert j.low < 0.0 < j.high and j.verdict is UNSURE


def test_constant_values_on_the_at_most_margin_hold_and_one_step_above_fail():
    assert at_most(0.5).judge({"a": by_seed(0.5, 0.5, 0.5)}).verdict is HOLDS
    assert at_most(down(0.5)).judge({"a": by_seed(0.5, 0.5, 0.5)}).verdict is FAILS


def test_identical_constant_variants_are_within_0():
    """No spread: Fieller's interval is the point gap 0."""
    j = within(0.0).judge({"a": by_seed(0.5, 0.5, 0.5), "b": by_seed(0.5, 0.5, 0.5)})
    assert j.low == j.high == 0.0 and j.verdict is HOLDS




@pytest.mark.parametrize("values", [(0.5, 0.6, 0.7),
                                    (0.68, 0.98, 0.77)])
def test_identical_variants_are_within_0(values):
    """Paired identical values: a_i − ρ·b_i has zero spread only at ρ = 1, and at every other ρ
    its t statistic is mean b / se b (beyond the quantile here), so Fieller's set is {1}: the
    gap is the point 0."""
    j = within(0.0).judge({"a": by_seed(*values), "b": by_seed(*values)})
    assert j.low == j.high == 0.0 and j.verdict is HOLDS


def test_no_failure_is_at_least_a_fail_rate_of_0_and_every_failure_at_most_1():
    """Clopper-Pearson's interval of 0 of n starts exactly on 0, that of n of n ends exactly on 1:
    both lie in the closed region."""
    none_fail, all_fail = by_seed(0.9, 0.8, 0.7), by_seed(0.1, math.nan, 0.2)
    j = fail_rate(Comparison.FAIL_RATE_AT_LEAST)(0.0).judge({"a": none_fail})
    assert (j.effect, j.low) == (0.0, 0.0) and j.verdict is HOLDS
    j = fail_rate(Comparison.FAIL_RATE_AT_MOST)(1.0).judge({"a": all_fail})
    assert (j.effect, j.high) == (1.0, 1.0) and j.verdict is HOLDS and j.diverged == {"a": (1,)}


@pytest.mark.parametrize("runs", [3, 10, 100])
def test_no_failure_does_not_show_a_fail_rate_of_at_most_0(runs):
    """0 of n runs failing bounds the rate by 1 − 0.025^(1/n) > 0 only: no finite number of runs
    shows a rate of exactly 0 (nor, by symmetry, of exactly 1), and the note says so rather than
    asking for more seeds."""
    none_fail = {s: 0.9 for s in range(runs)}
    j = fail_rate(Comparison.FAIL_RATE_AT_MOST)(0.0).judge({"a": none_fail})
    assert j.low == 0.0 and j.high == pytest.approx(1 - 0.025 ** (1 / runs))
    assert j.verdict is UNSURE and "no number of seeds would settle it" in j.note
    every_fail = {s: 0.1 for s in range(runs)}
    assert fail_rate(Comparison.FAIL_RATE_AT_LEAST)(1.0).judge({"a": every_fail}).verdict is UNSURE


@pytest.mark.parametrize("margin", [0.0, 1.0])
@pytest.mark.parametrize("comparison", [Comparison.FAIL_RATE_AT_LEAST,
                                        Comparison.FAIL_RATE_AT_MOST])
def test_a_rate_margin_of_0_or_1_is_accepted_and_one_step_outside_refused(comparison, margin):
    from transformer_jax.config import ConfigError

    Expectation("", "m", "a", comparison, margin, threshold=0.5)
    outside = down(margin) if margin == 0.0 else up(margin)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        Expectation("", "m", "a", comparison, outside, threshold=0.5)




@pytest.mark.parametrize("comparison, margin, fields", [
    (Comparison.WITHIN, -0.1, dict(b="b")),  # empty region
    (Comparison.BETTER, math.nan, dict(b="b")),
    (Comparison.BETTER, INF, dict(b="b")),
    (Comparison.AT_MOST, math.nan, {}),
    (Comparison.FAIL_RATE_AT_MOST, math.nan, dict(threshold=0.5)),
], ids=["within negative", "better nan", "better inf", "at most nan", "rate nan"])
def test_a_margin_no_interval_could_satisfy_is_refused_naming_it(comparison, margin, fields):
    """A margin whose accepted region no interval can lie in is a mistake in the experiment
    file: a one-line error naming it, not a verdict that can never hold."""
    from transformer_jax.config import ConfigError

    with pytest.raises(ConfigError, match=f"margin={margin}") as error:
        Expectation("e", "m", "a", comparison, margin, **fields)
    assert "\n" not in str(error.value)


def test_a_run_exactly_on_the_threshold_passes_on_either_direction():
    on = by_seed(0.5, 0.5, 0.5)
    for higher_is_better in (True, False):
        j = Expectation("", "m", "a", Comparison.FAIL_RATE_AT_MOST, 0.5, threshold=0.5,
                        higher_is_better=higher_is_better).judge({"a": on})
        assert j.effect == 0.0, higher_is_better
    below = Expectation("", "m", "a", Comparison.FAIL_RATE_AT_MOST, 0.5, threshold=up(0.5))
    assert below.judge({"a": on}).effect == 1.0


# --- one seed, every run diverged, a variant with no runs ----------------------------------------



@pytest.mark.parametrize("expectation, final", [
    (better(0.0), {"a": by_seed(0.9), "b": by_seed(0.1)}),  # paired t, 1 seed
    (better(0.0), {"a": by_seed(0.9), "b": by_seed(0.1, 0.2, 0.15, first=3)}),  # Welch, 1 vs 3
    (within(10.0), {"a": by_seed(0.9), "b": by_seed(0.8)}),
    (within(10.0), {"a": by_seed(0.9, 0.91, 0.92), "b": by_seed(0.8, first=3)}),
    (at_most(10.0), {"a": by_seed(0.9)}),
], ids=["paired", "welch", "fieller paired", "fieller unpaired", "at most"])
def test_one_seed_has_no_spread_and_never_settles(expectation, final):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j = expectation.judge(final)
    assert (j.low, j.high) == (-INF, INF) and j.verdict is UNSURE
    assert j.note == "1 seed: no spread to measure, run at least 3"


def test_one_run_bounds_a_rate_exactly():
    """A rate needs no spread: one passing run's Clopper-Pearson interval is [0, 0.975]."""
    j = fail_rate(Comparison.FAIL_RATE_AT_MOST)(0.975).judge({"a": by_seed(0.9)})
    assert (j.low, j.high) == (0.0, pytest.approx(0.975)) and j.verdict is HOLDS


def test_every_run_of_the_study_diverged_is_inconclusive_and_says_set_worst():
    nan = math.nan
    j = at_most(0.5).judge({"a": by_seed(nan, nan, nan), "b": by_seed(nan, nan, nan)})
    assert j.verdict is UNSURE and "Expectation.worst" in j.note


@pytest.mark.parametrize("expectation", [better(0.0), within(0.1)], ids=["better", "within"])
def test_a_gain_or_gap_on_variants_whose_every_run_diverged_is_refused(expectation):
    nan = math.nan
    j = expectation.judge({"a": by_seed(nan, nan, nan), "b": by_seed(nan, nan, nan)})
    assert j.verdict is UNSURE and j.note.startswith("refused: every run of a and b diverged")


def test_one_run_with_a_value_beside_runs_without_is_inconclusive_and_two_are_judged():
    """Judging rules 6: filled at the one measured run's value, the other runs would copy it
    and the interval would have no spread (4 of 5 refused controls made a 'holds' of one run);
    with two measured runs the fill is judged at both ends as before, and worst= still counts.
    Since rules 7 it is one rule with "every run diverged", and one note names how many."""
    nan = math.nan
    j = at_most(0.5).judge({"a": by_seed(nan, nan, nan, nan, 0.016)})
    assert j.verdict is UNSURE and j.note.startswith(
        "fewer than 2 runs with a value (1 of 5 runs of a; the others diverged or gave none)")
    none = at_most(0.5).judge({"a": by_seed(nan, nan, nan), "b": by_seed(0.1, 0.2, 0.3)})
    assert none.verdict is UNSURE and "(0 of 3 runs of a;" in none.note
    assert at_most(0.5).judge({"a": by_seed(nan, nan, 0.011, nan, 0.018)}).verdict is HOLDS
    counted = Expectation("t", "m", "a", Comparison.AT_MOST, 0.5, worst=1.0)
    judged = counted.judge({"a": by_seed(nan, nan, nan, nan, 0.016)})
    assert judged.values["a"] == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 0.016}
    assert not judged.note.startswith("fewer than")  # judged on the filled values


def test_every_run_diverged_is_every_run_failed_for_a_rate():
    nan = math.nan
    j = fail_rate(Comparison.FAIL_RATE_AT_LEAST)(0.25).judge({"a": by_seed(*[nan] * 5)})
    assert j.effect == 1.0 and j.high == 1.0 and j.verdict is HOLDS
    assert j.diverged == {"a": (0, 1, 2, 3, 4)}




@pytest.mark.parametrize("expectation", [
    better(0.0), within(0.1), at_most(0.5), fail_rate(Comparison.FAIL_RATE_AT_MOST)(0.5)],
    ids=["better", "within", "at most", "fail rate"])
def test_a_variant_with_no_runs_is_inconclusive_and_says_so(expectation):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j = expectation.judge({"a": {}, "b": by_seed(0.5, 0.6, 0.7)})
    assert j.verdict is UNSURE and "no runs of a" in j.note

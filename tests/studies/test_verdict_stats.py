"""The statistics behind a study's verdict, on constructed per-seed values (no training): the
three-way verdict for each comparison, paired vs unpaired intervals, zero spread, diverged runs,
the seeds-needed estimate, and what summary.md / verdict.md / report.md show."""
from __future__ import annotations

import json
import math
from pathlib import Path
import warnings

import ml_collections
import numpy as np
import pytest
import scipy.stats

from transformer_jax.studies import report
from transformer_jax.studies.checks import CheckResult, Section
from transformer_jax.studies.records import record
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.judge.stats import Failure
from transformer_jax.config import ConfigError
from transformer_jax.studies.study import (Comparison, Expectation, Study, Verdict,
                                           interval_of_mean, seeds_to_bound, seeds_to_settle,
                                           seeds_to_settle_rate, settle_note, unbounded_note)

HOLDS, FAILS, UNSURE = Verdict.HOLDS, Verdict.FAILS, Verdict.INCONCLUSIVE
T2 = scipy.stats.t.ppf(0.975, 2)  # 4.303: the t quantile at 3 seeds


def by_seed(*values: float, first: int = 0) -> dict[int, float]:
    return {first + i: v for i, v in enumerate(values)}


# per-seed differences a − b: 0.4, 0.25, 0.25: mean 0.3, sd √0.0075, t interval 0.3 ± T2·0.05
FINAL = {"a": by_seed(0.9, 0.8, 0.85), "b": by_seed(0.5, 0.55, 0.6)}


@pytest.mark.parametrize("expectation, verdict", [
    (Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b"), HOLDS),  # [0.085, 0.515]
    (Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b"), UNSURE),
    (Expectation("", "m", "a", Comparison.BETTER, 0.6, b="b"), FAILS),
    (Expectation("", "m", "b", Comparison.BETTER, 0.0, b="a"), FAILS),
    # lower is better: b's lower values beat a's by 0.3 ± 0.215
    (Expectation("", "m", "b", Comparison.BETTER, 0.05, b="a", higher_is_better=False), HOLDS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", higher_is_better=False), FAILS),
    (Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b"), FAILS),  # gap +55 % [13 %, 118 %]
    (Expectation("", "m", "a", Comparison.WITHIN, 1.2, b="b"), HOLDS),
    (Expectation("", "m", "a", Comparison.WITHIN, 0.6, b="b"), UNSURE),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.99), HOLDS),  # 0.85 ± T2·0.05/√3
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.85), UNSURE),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.7), FAILS),
])
def test_three_way_verdict(expectation, verdict):
    j = expectation.judge(FINAL)
    assert j.verdict is verdict, j
    assert j.low <= j.effect <= j.high
    # a note says why it is inconclusive, or that a failure is smaller than stated (and which)
    assert (j.note != "") == (verdict is UNSURE or j.failure is Failure.SMALLER)


def test_effect_and_interval_are_scipys_t_intervals():
    a, b = (list(FINAL[v].values()) for v in "ab")
    better = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(FINAL)
    assert better.effect == pytest.approx(0.3) and better.paired
    assert (better.low, better.high) == pytest.approx((0.3 - T2 * 0.05, 0.3 + T2 * 0.05))
    assert (better.low, better.high) == pytest.approx(tuple(
        scipy.stats.ttest_rel(a, b).confidence_interval(0.95)))
    loss = Expectation("", "m", "b", Comparison.BETTER, 0.2, b="a", higher_is_better=False)
    assert (loss.judge(FINAL).effect, loss.judge(FINAL).low) == pytest.approx((0.3, better.low))
    at_most = Expectation("", "m", "a", Comparison.AT_MOST, 0.9).judge(FINAL)
    assert (at_most.low, at_most.high) == pytest.approx(tuple(
        scipy.stats.ttest_1samp(a, 0.0).confidence_interval(0.95)))
    assert at_most.high == pytest.approx(0.85 + T2 * 0.05 / math.sqrt(3))
    assert interval_of_mean(a) == pytest.approx((at_most.low, at_most.high))


def test_relative_gap_is_fiellers_interval():
    """At each end ρ of the interval of mean a / mean b, the paired t-test of a_i − ρ·b_i is
    exactly at p = 0.05; the relative gap is ρ − 1."""
    within = Expectation("", "m", "a", Comparison.WITHIN, 0.6, b="b")
    j = within.judge(FINAL)
    assert j.effect == pytest.approx(0.3 / 0.55)
    a, b = (np.array(list(FINAL[v].values())) for v in "ab")
    for gap in (j.low, j.high):
        assert scipy.stats.ttest_1samp(a - (1 + gap) * b, 0.0).pvalue == pytest.approx(0.05)
    assert (j.low, j.high) == pytest.approx((0.12885, 1.18191), abs=1e-5)
    scaled = {v: {s: 100 * x for s, x in xs.items()} for v, xs in FINAL.items()}
    assert (within.judge(scaled).low, within.judge(scaled).high) == pytest.approx((j.low, j.high))
    # a negative b: the gap is (a − b)/|b|, still > 0 when a is above b
    negative = {v: {s: x - 1.0 for s, x in xs.items()} for v, xs in FINAL.items()}  # a ≈ −0.15
    k = within.judge(negative)
    assert k.effect == pytest.approx(0.3 / 0.45) and k.low <= k.effect <= k.high
    # b's mean not clearly away from 0: a ratio has no bounded interval
    near_zero = Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b").judge(
        {"a": by_seed(1.0, 1.1, 0.9), "b": by_seed(-0.5, 0.1, 0.6)})
    assert math.isinf(near_zero.low) and math.isinf(near_zero.high) and near_zero.verdict is UNSURE


def test_within_fails_on_either_side():
    e = Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b")
    assert e.judge({"a": by_seed(0.5, 0.5, 0.52), "b": by_seed(1.0, 0.98, 1.02)}).verdict is FAILS
    assert e.judge({"a": by_seed(2.0, 2.1, 1.9), "b": by_seed(1.0, 0.98, 1.02)}).verdict is FAILS


def test_paired_by_seed_is_tighter_than_unpaired():
    """b varies a lot from seed to seed, a tracks it +0.1: only pairing sees the gain."""
    b = [0.3, 0.6, 0.9, 0.45]
    a = [x + 0.1 + d for x, d in zip(b, (0.0, 0.01, -0.01, 0.005))]
    e = Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b")
    paired = e.judge({"a": by_seed(*a), "b": by_seed(*b)})
    unpaired = e.judge({"a": by_seed(*a), "b": by_seed(*b, first=10)})  # different seeds
    assert paired.paired and not unpaired.paired
    assert paired.effect == pytest.approx(unpaired.effect)
    assert paired.verdict is HOLDS and unpaired.verdict is UNSURE
    assert unpaired.high - unpaired.low > 5 * (paired.high - paired.low)
    welch = scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (unpaired.low, unpaired.high) == pytest.approx((welch.low, welch.high))


def test_unpaired_samples_of_different_sizes():
    e = Expectation("", "m", "a", Comparison.BETTER, 0.1, b="b")
    a, b = by_seed(0.9, 0.92, 0.91), by_seed(0.5, 0.52, 0.51, 0.49, first=5)
    j = e.judge({"a": a, "b": b})
    assert not j.paired and j.verdict is HOLDS
    welch = scipy.stats.ttest_ind(list(a.values()), list(b.values()), equal_var=False)
    assert (j.low, j.high) == pytest.approx(tuple(welch.confidence_interval(0.95)))
    # the relative gap of unpaired samples: Fieller with min(n_a, n_b) − 1 = 2 dof
    gap = Expectation("", "m", "a", Comparison.WITHIN, 1.0, b="b").judge({"a": a, "b": b})
    for rho in (1 + gap.low, 1 + gap.high):
        se = math.sqrt(np.var(list(a.values()), ddof=1) / 3 + rho ** 2 * np.var(list(b.values()), ddof=1) / 4)
        assert abs(np.mean(list(a.values())) - rho * np.mean(list(b.values()))) / se == pytest.approx(T2)


def test_zero_spread_interval_is_the_point_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = Expectation("", "m", "a", Comparison.AT_MOST, 0.5).judge({"a": by_seed(0.5, 0.5, 0.5)})
        assert same.low == same.high == same.effect == 0.5 and same.verdict is HOLDS
        # constant per-seed difference, though each variant varies: paired spread is zero
        shift = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(
            {"a": by_seed(0.9, 0.7, 0.8), "b": by_seed(0.6, 0.4, 0.5)})
        assert shift.low == shift.high == pytest.approx(0.3) and shift.verdict is HOLDS
        unpaired = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(
            {"a": by_seed(0.9, 0.9), "b": by_seed(0.6, 0.6, first=2)})
        assert unpaired.low == unpaired.high == pytest.approx(0.3)
        within = Expectation("", "m", "a", Comparison.WITHIN, 0.05, b="b")
        assert within.judge({"a": by_seed(1.04, 1.04, 1.04), "b": by_seed(1.0, 1.0, 1.0)}).verdict is HOLDS
        assert within.judge({"a": by_seed(1.06, 1.06, 1.06), "b": by_seed(1.0, 1.0, 1.0)}).verdict is FAILS


def test_one_seed_is_never_settled():
    j = Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b").judge(
        {"a": by_seed(0.9), "b": by_seed(0.1)})
    assert j.verdict is UNSURE and math.isinf(j.high - j.low) and "no spread" in j.note


# a: [0.9, 0.91, 0.9, 0.92]; b's seed 1 diverged; the study's finished values span 0.2..0.92
DIVERGED = {"a": by_seed(0.9, 0.91, 0.9, 0.92), "b": by_seed(0.5, math.nan, 0.52, 0.51),
            "other": by_seed(0.2, 0.3, 0.25, 0.3)}


def test_a_diverged_run_counts_as_the_least_favourable_finished_value():
    """b's diverged run counts as the study's best value (0.92): a beats b is not helped by
    it. Counted as the study's worst (0.2) the claim would hold: the run decides it."""
    j = Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b").judge(DIVERGED)
    assert j.values["b"] == {0: 0.5, 1: 0.92, 2: 0.52, 3: 0.51} and j.fill == {"b": 0.92}
    assert j.diverged == {"a": (), "b": (1,)}
    assert j.verdict is UNSURE and "the diverged runs decide it" in j.note and "0.2 or 0.92" in j.note
    # where the divergence is the claimed failure, the expectation says what it counts as
    chance = Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b", worst=0.0).judge(DIVERGED)
    assert chance.values["b"][1] == 0.0 and chance.fill == {"b": 0.0} and chance.verdict is HOLDS
    # a diverged run of `a` (the claimed winner) counts as the study's worst; lower is better:
    # as the highest loss
    flipped = {"a": DIVERGED["b"], "b": DIVERGED["a"], "other": DIVERGED["other"]}
    loss = Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b", higher_is_better=False)
    assert loss.judge(flipped).fill == {"a": 0.92}
    accuracy = Expectation("", "m", "a", Comparison.BETTER, 0.3, b="b").judge(flipped)
    assert accuracy.fill == {"a": 0.2}
    # the verdict stands when both ends give it: a ≈ 0.4 below b fails "a beats b by 0.3"
    # whether a's diverged run counts as 0.2 or as 0.92
    assert accuracy.verdict is FAILS and accuracy.note == ""


def test_at_most_cannot_hold_because_runs_diverged():
    """Issue 23: filled with the study's lowest value, these held before; they are not settled."""
    nan = math.nan
    low = Expectation("accuracy stuck at chance", "m", "a", Comparison.AT_MOST, 0.6)
    every = low.judge({"a": by_seed(nan, nan, nan), "b": by_seed(0.1, 0.95, 0.12)})
    assert every.verdict is UNSURE and "(0 of 3 runs of a;" in every.note
    assert every.values["a"] == {0: 0.95, 1: 0.95, 2: 0.95}  # shown as the least favourable
    some = low.judge({"a": by_seed(0.30, 0.31, nan, 0.30), "b": by_seed(0.1, 0.95, 0.12, 0.1)})
    assert some.fill == {"a": 0.95} and some.verdict is UNSURE
    # even when every finished run in the study is below the margin
    assert low.judge({"a": by_seed(nan, nan, nan), "b": by_seed(0.1, 0.1, 0.12)}).verdict is UNSURE
    # unless the expectation says what a diverged run counts as
    assert low.judge({"a": by_seed(nan, nan, nan), "b": by_seed(0.1, 0.9, 0.12)}).verdict is UNSURE
    assert Expectation("", "m", "a", Comparison.AT_MOST, 0.6, worst=0.1).judge(
        {"a": by_seed(nan, nan, nan), "b": by_seed(0.1, 0.9, 0.12)}).verdict is HOLDS


def test_every_run_diverged_is_inconclusive_not_a_crash():
    nan = math.nan
    j = Expectation("", "m", "a", Comparison.AT_MOST, 0.0).judge(
        {"a": by_seed(nan, nan, nan), "b": by_seed(nan, nan, nan)})
    assert j.verdict is UNSURE and "worst" in j.note
    lost_b = Expectation("", "m", "a", Comparison.RATIO, 1.0, b="b").judge(
        {"a": by_seed(0.9, 0.9, 0.91), "b": by_seed(nan, nan, nan)})
    assert lost_b.verdict is UNSURE and lost_b.note.startswith(
        "fewer than 2 runs with a value (0 of 3 runs of b;")
    # a gain on a variant that never finished is refused, whatever `worst` says (rules v4) ...
    refused = Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", worst=0.0).judge(
        {"a": by_seed(0.5, 0.6, 0.55), "b": by_seed(nan, nan, nan)})
    assert refused.verdict is UNSURE and refused.note.startswith("refused: every run of b")
    # ... a ratio to it, with `worst` set, is judged (unless b was never finite: test_kinds.py)
    assert Expectation("", "m", "a", Comparison.RATIO, 2.0, b="b", worst=0.1).judge(
        {"a": by_seed(0.5, 0.6, 0.55), "b": by_seed(nan, nan, nan)}).verdict is HOLDS


# Post-LN without warm-up on the committed run: two of three seeds stuck near chance
POST_LN = {"post": by_seed(0.1073, 0.8014, 0.1539), "pre": by_seed(0.9851, 0.9784, 0.9721),
           "blown": by_seed(math.nan, 0.9, 0.95)}


def rate(a: str, comparison: Comparison, margin: float, threshold: float = 0.5, **kw) -> Expectation:
    return Expectation("", "eval/accuracy", a, comparison, margin, threshold=threshold, **kw)


def test_fail_rate_is_judged_with_an_exact_binomial_interval():
    j = rate("post", Comparison.FAIL_RATE_AT_LEAST, 0.05).judge(POST_LN)
    exact = scipy.stats.binomtest(2, 3).proportion_ci(0.95, method="exact")
    assert j.effect == pytest.approx(2 / 3) and (j.low, j.high) == pytest.approx((exact.low, exact.high))
    assert (j.low, j.high) == pytest.approx((0.0943, 0.9916), abs=1e-4) and j.verdict is HOLDS
    assert j.values == {"post": POST_LN["post"]} and j.fill == {}
    # 0.0943 < 0.1: 2 of 3 is not enough; 3 of 4 (CP low 0.194) would be
    unsure = rate("post", Comparison.FAIL_RATE_AT_LEAST, 0.1).judge(POST_LN)
    assert unsure.verdict is UNSURE and unsure.note == "≈ 4 seeds would settle it at this rate (now 3)"
    # none of 3 failing bounds the rate by 1 − 0.025^(1/3) = 0.708 only; ≤ 0.5 needs 6 runs
    pre = rate("pre", Comparison.FAIL_RATE_AT_MOST, 0.5).judge(POST_LN)
    assert (pre.effect, pre.low) == (0.0, 0.0) and pre.high == pytest.approx(1 - 0.025 ** (1 / 3))
    assert pre.verdict is UNSURE and "≈ 6 seeds" in pre.note
    assert rate("pre", Comparison.FAIL_RATE_AT_MOST, 0.75).judge(POST_LN).verdict is HOLDS
    assert rate("pre", Comparison.FAIL_RATE_AT_LEAST, 0.75).judge(POST_LN).verdict is FAILS


def test_rate_and_t_quantiles_are_scipy_stats_own():
    """study computes them with scipy.special (scipy.stats costs a second to import in every
    process that writes a report): the same numbers, for every rate of up to 30 runs."""
    from transformer_jax.studies.judge.stats import _t_quantiles, rate_interval

    for n in range(1, 31):
        for k in range(n + 1):
            exact = scipy.stats.binomtest(k, n).proportion_ci(0.95, method="exact")
            assert rate_interval(k, n) == pytest.approx((exact.low, exact.high), abs=1e-9), (k, n)
    dofs = np.arange(1, 60)
    assert np.array_equal(_t_quantiles(dofs), scipy.stats.t.ppf(0.975, dofs))


def test_fail_rate_counts_diverged_runs_and_reads_the_direction():
    j = rate("blown", Comparison.FAIL_RATE_AT_MOST, 0.5).judge(POST_LN)
    assert j.effect == pytest.approx(1 / 3) and j.diverged == {"blown": (0,)}
    # a loss fails above its threshold: post's losses (accuracies here) above 0.5: one of three
    loss = rate("post", Comparison.FAIL_RATE_AT_MOST, 0.5, higher_is_better=False).judge(POST_LN)
    assert loss.effect == pytest.approx(1 / 3)
    # exactly at the threshold passes
    assert rate("post", Comparison.FAIL_RATE_AT_MOST, 0.5, threshold=0.1073).judge(
        POST_LN).effect == 0.0
    assert seeds_to_settle_rate(1, 2, (0.5, math.inf)) is None  # on the threshold


@pytest.mark.parametrize("fields, fragment", [
    (dict(comparison=Comparison.FAIL_RATE_AT_LEAST, margin=0.1), "needs threshold="),
    (dict(comparison=Comparison.AT_MOST, margin=0.1, threshold=0.5), "threshold= goes with"),
    (dict(comparison=Comparison.FAIL_RATE_AT_MOST, margin=1.5, threshold=0.5), "between 0 and 1"),
    (dict(comparison=Comparison.FAIL_RATE_AT_LEAST, margin=0.1, threshold=0.5, worst=0.0),
     "a diverged run fails"),
    (dict(comparison=Comparison.BETTER, margin=0.1), "needs b="),
    (dict(comparison=Comparison.AT_MOST, margin=0.1, b="b"), "takes no b="),
])
def test_expectation_fields_are_checked(fields, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Expectation("e", "m", "a", **fields)


def test_seeds_to_settle():
    # half-width 0.1 at 3 seeds (sd 0.1·√3/T2), effect 0.05 from the threshold: at 4 seeds the
    # half-width is t_3·sd/2 = 0.064, at 5 seeds t_4·sd/√5 = 0.04997 <= 0.05
    sd = 0.1 * math.sqrt(3) / T2
    assert scipy.stats.t.ppf(0.975, 3) * sd / 2 > 0.05 >= scipy.stats.t.ppf(0.975, 4) * sd / math.sqrt(5)
    assert seeds_to_settle(3, 0.30, 0.20, 0.40, (0.25, math.inf)) == 5
    assert seeds_to_settle(3, 0.30, 0.20, 0.40, (0.30, math.inf)) is None  # on the threshold
    assert seeds_to_settle(1, 0.30, -math.inf, math.inf, (0.25, math.inf)) is None
    assert seeds_to_settle(3, 0.30, 0.24, 0.36, (0.255, math.inf)) == 4  # at least one more
    # WITHIN: the nearest of ±margin decides; half-width 2× the distance at 4 seeds
    assert seeds_to_settle(4, 0.0, -0.2, 0.2, (-0.1, 0.1)) == 9
    assert "≈ 5 seeds" in settle_note(3, seeds_to_settle(3, 0.30, 0.20, 0.40, (0.25, math.inf)))
    assert "> 100 seeds" in settle_note(3, seeds_to_settle(3, 0.30, 0.20, 0.40, (0.299, math.inf)))
    # FINAL: effect 0.3, half-width T2·0.05 = 0.215, 0.1 from 0.2: sd 0.0866, t_{m−1}·sd/√m <= 0.1
    j = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(FINAL)
    needed = next(m for m in range(4, 100)
                  if scipy.stats.t.ppf(0.975, m - 1) * math.sqrt(0.0075) / math.sqrt(m) <= 0.1)
    assert j.verdict is UNSURE and j.note == f"≈ {needed} seeds would settle it at this spread (now 3)"
    assert needed == 6
    on_it = Expectation("", "m", "a", Comparison.BETTER, 0.3, b="b").judge(FINAL)
    assert on_it.verdict is UNSURE and "sits on the threshold" in on_it.note


def _study(**fields) -> Study:
    expectations = (Expectation("x beats y", "eval/accuracy", "x", Comparison.BETTER, 0.2, b="y",
                                worst=0.45),
                    Expectation("y near x", "eval/accuracy", "y", Comparison.WITHIN, 0.1, b="x",
                                worst=0.45))
    return Study(**{**dict(name="s", claim="x helps", published="p",
                           base=ml_collections.ConfigDict({"seed": 0}),
                           variants={"x": {}, "y": {"model.attn_scale": False}}, seeds=(0, 1, 2),
                           metrics=("eval/accuracy",), expectations=expectations), **fields})


def _runs(values: dict[str, list[float]]):
    return {(v, s): {"status": {"state": "diverged" if math.isnan(x) else "finished"},
                     "curves": {"eval/accuracy": [(5, 0.1), (10, x)]}}
            for v, xs in values.items() for s, x in enumerate(xs)}


RUNS = _runs({"x": [0.9, 0.88, 0.89], "y": [0.5, math.nan, 0.52]})


def test_summary_shows_mean_std_and_t_interval():
    text = report._summary_markdown(_study(), RUNS)
    assert "95 % interval" in text and "Student-t" in text and "bootstrap" not in text
    x = scipy.stats.ttest_1samp([0.9, 0.88, 0.89], 0.0).confidence_interval(0.95)
    assert f"| x | (base) | 0/3 | 0.89 ± 0.0082 [{x.low:.4g}, {x.high:.4g}] |" in text
    assert "[0.8652, 0.9148]" in text  # 0.89 ± T2·0.01/√3
    y = scipy.stats.ttest_1samp([0.5, 0.52], 0.0).confidence_interval(0.95)  # 1 dof: 12.7
    assert f"| 1/3 | 0.51 ± 0.01 [{y.low:.4g}, {y.high:.4g}] |" in text  # diverged left out


def test_a_run_that_finished_without_a_value_is_shown_as_no_value_and_counted_as_diverged():
    """A refused control (rules 7): its run finished and its analysis gave no value. It counts
    as a diverged run does, and the record and the table say which of the two it was."""
    import types

    from transformer_jax.studies import rejudge

    e = Expectation("x at most 0.5", "m", "x", Comparison.AT_MOST, 0.5, worst=1.0)
    study = types.SimpleNamespace(expectations=(e,))
    values = {"x": by_seed(0.1, math.nan, math.nan, 0.2)}
    rows, _ = report.judge_expectations(study, lambda _: values, {"x": {2: 40}})  # seed 2 diverged
    seeds = rows[0]["values"]["x"]
    assert [s["diverged"] for s in seeds] == [False, True, True, False]  # both filled
    assert [s.get("no_value", False) for s in seeds] == [False, True, False, False]
    assert verdict_text.per_seed_cell(rows[0]) == "x: 0.1, no value→1, diverged→1, 0.2"
    read = rejudge.from_record({"expectations": rows})[rejudge.key(rows[0])]["x"]
    assert read[0] == 0.1 and math.isnan(read[1]) and math.isnan(read[2])  # not the fill
    unknown, _ = report.judge_expectations(study, lambda _: values)  # where runs stopped: unknown
    assert "no value" not in verdict_text.per_seed_cell(unknown[0])


def test_verdict_table_and_overall_line_and_index(tmp_path):
    text = report.verdict_markdown(_study(), RUNS, analysis="accuracy by length: flat")
    assert ("| expected | kind | per-seed values | effect | 95 % interval | threshold | "
            "verdict |") in text
    # x − y per seed: 0.4, 0.43, 0.37 (y's diverged run counts as worst=0.45): 0.4 ± T2·0.03/√3
    assert ("| x beats y | finding | x: 0.9, 0.88, 0.89 · y: 0.5, diverged→0.45, 0.52 | 0.4 (x − y) "
            "| [0.3255, 0.4745] | ≥ 0.2 | holds |") in text
    assert "| y near x |" in text and "within ±10.0%" in text
    assert "| does not hold (contradicted) | does not hold (contradicted), p = 0.0032 |" in text
    assert "the claim partly holds" in text
    assert "(1 hold, 1 do not hold (1 contradicted), 0 inconclusive of 2 findings" in text
    assert "Student-t" in text and "Fieller" in text and "Clopper" in text
    assert "least favourable" in text and "bootstrap" not in text
    assert "## Analysis\n\naccuracy by length: flat" in text
    (tmp_path / "s").mkdir()
    record.write(tmp_path / "s" / record.FILE, report.study_record(
        _study(), RUNS, sections=[Section("accuracy by length: flat")]))
    index = report.write_index(tmp_path, ["s"]).read_text()
    assert "| expected | kind | effect | 95 % interval | threshold | verdict |" in index
    assert "| x beats y | finding | 0.4 (x − y) | [0.3255, 0.4745] | ≥ 0.2 | holds |" in index
    assert "per-seed" not in index and "**Verdict: the claim partly holds" in index


def test_the_record_holds_the_numbers_at_full_precision_and_renders_verdict_md(tmp_path):
    """verdict.json: numbers as numbers (not as printed), diverged runs marked, nan as null."""
    found = report.study_record(_study(), RUNS)
    path = record.write(tmp_path / record.FILE, found)
    assert record.read(path) == json.loads(json.dumps(found, allow_nan=False))  # no NaN
    x_beats_y = record.read(path)["expectations"][0]
    assert x_beats_y["comparison"] == "better" and x_beats_y["verdict"] == "holds"
    assert x_beats_y["values"]["y"][1] == {"seed": 1, "value": 0.45, "diverged": True}
    assert x_beats_y["effect"] == pytest.approx(0.4)
    low, high = x_beats_y["interval"]["low"], x_beats_y["interval"]["high"]
    assert (low, high) == pytest.approx((0.4 - T2 * 0.03 / 3 ** 0.5, 0.4 + T2 * 0.03 / 3 ** 0.5))
    assert f"{low:.4g}" == "0.3255" and low != 0.3255  # printed at 4 digits, kept in full
    counts = {"held": 1, "failed": 1, "inconclusive": 0, "total": 2, "overall": "partly holds",
              "contradicted": 1, "smaller_than_stated": 0}  # y near x: far outside ±10 %
    none = {"held": 0, "failed": 0, "inconclusive": 0, "total": 0, "overall": "is not judged",
            "contradicted": 0, "smaller_than_stated": 0}
    assert found["counts"] == {**counts, "holm": {"family_level": 0.05, **counts},
                               "checks": none, "post_hoc": none, "alarms": []}
    y = found["summary"]["variants"][1]
    assert y["diverged"] == 1 and y["metrics"]["eval/accuracy"]["n"] == 2
    assert y["overrides"] == {"model.attn_scale": False}
    assert found["precision"] == record.FULL_PRECISION and found["budget"] == {"steps": [0]}
    assert verdict_text.verdict_markdown(record.read(path)) == report.verdict_markdown(
        _study(), RUNS)


def test_a_study_without_expectations_is_not_judged_rather_than_holding():
    found = (CheckResult("a", (True,)), CheckResult("b", (False,)),
             CheckResult("c", (True, False)), CheckResult("d", ()))
    analysis = Section("| check | seeds passing | verdict |", found)  # the data counts
    study = _study(expectations=())
    text = report.verdict_markdown(study, RUNS, analysis=analysis)
    assert "**Verdict: the claim is not judged on this run** (0 hold" in text
    assert "holds on this run" not in text
    written = json.loads(json.dumps(report.study_record(study, RUNS, sections=[analysis])))
    assert [c["verdict"] for c in written["analyses"][0]["checks"]] == [
        "PASS", "FAIL", "MIXED", "no finished run"]
    assert verdict_text.verdict_cell(written) == (
        "not judged (no expectations); its analyses' checks: 1 of 4 pass")


def test_verdict_row_of_a_fail_rate():
    study = _study(expectations=(Expectation(
        "y fails on some seeds", "eval/accuracy", "y", Comparison.FAIL_RATE_AT_LEAST, 0.05,
        threshold=0.51),))
    text = report.verdict_markdown(study, RUNS)
    assert ("| y fails on some seeds | finding | y: 0.5, diverged, 0.52 | 66.7% (2/3 runs of y fail: "
            "diverged or < 0.51) | [9.4%, 99.2%] | ≥ 5.0% | holds |") in text


def test_inconclusive_verdict_says_how_many_seeds():
    study = _study()
    runs = _runs({"x": [0.9, 0.7, 0.85], "y": [0.5, 0.55, 0.6]})  # x − y: 0.4, 0.15, 0.25
    text = report.verdict_markdown(study, runs)
    assert "| inconclusive: ≈ " in text and "seeds would settle it at this spread (now 3)" in text


def test_study_suite_and_analyses_fields():
    assert _study().suite == "main" and _study().analyses == ()
    assert _study(suite="lm").suite == "lm"
    with pytest.raises(ConfigError, match="suite"):
        _study(suite="")
    with pytest.raises(ConfigError, match="analyses"):
        _study(analyses=("not a function",))


def test_an_unbounded_gap_at_two_seeds_asks_for_the_seeds_that_would_bound_it():
    """The tutorial's case (issue 52): a ±5 % WITHIN expectation at two seeds whose baseline
    varies too much to tell its mean from 0 at t_1 = 12.7: the interval is unbounded. That is
    too few seeds, not an effect on the threshold, and the note says how many would bound it:
    the first m with t_{m−1}·sd(b)/√m < |mean b|."""
    b = np.array([1.0, 1.3])
    j = Expectation("", "m", "a", Comparison.WITHIN, 0.05, b="b").judge(
        {"a": by_seed(1.05, 1.15), "b": by_seed(*b)})
    assert j.verdict is UNSURE and not math.isfinite(j.high - j.low)
    needed = next(m for m in range(3, 100) if scipy.stats.t.ppf(0.975, m - 1)
                  * np.std(b, ddof=1) / math.sqrt(m) < np.mean(b))
    assert needed == 3
    assert j.note == ("the interval is unbounded at 2 seeds (the mean of b is not yet told apart "
                      f"from 0): ≈ {needed} seeds would bound it at this spread")
    assert "threshold" not in j.note
    assert seeds_to_bound(np.array([1.0, -1.2])) == 101  # a mean near 0: > MAX_SEEDS
    assert "run at least 3 seeds" in unbounded_note(2, None, "b")

"""Holm's correction over a study's expectations (studies/judge/multiplicity.py): the p-value
of a settled verdict, bisected over the intervals' confidence, agrees with the closed form of the
t-test; the step-down keeps exactly what Holm (1979) keeps (a Bonferroni, step-up, reversed or
non-stopping version fails a test here); the record and the study page say what each verdict
becomes."""
from __future__ import annotations

import ml_collections
import numpy as np
import pytest
import scipy.stats

from transformer_jax.studies import report
from transformer_jax.studies.judge import multiplicity
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import Comparison, Expectation, Study, Verdict

HOLDS, FAILS, UNSURE = Verdict.HOLDS, Verdict.FAILS, Verdict.INCONCLUSIVE


def _by_seed(values) -> dict[int, float]:
    return {s: float(x) for s, x in enumerate(values)}


@pytest.mark.parametrize("d, margin, alternative", [
    ([0.065, 0.1, 0.135], 0.0, "greater"),  # holds
    ([0.3, 0.31, 0.32, 0.28], 0.05, "greater"),  # holds, far
    ([0.01, 0.02, 0.015], 0.1, "less"),  # does not hold: the interval wholly below 0.1
    ([0.0, 0.1, 0.2], 0.0, "greater"),  # inconclusive at 95 %: p > 0.05
])
def test_bisected_p_is_the_t_tests_for_a_paired_difference(d, margin, alternative):
    """Paired BETTER: the two-sided interval settles at confidence 1 − α exactly when the
    one-sided t-test of the differences against the margin rejects at α/2."""
    e = Expectation("", "m", "a", Comparison.BETTER, margin, b="b")
    b = np.array([0.5, 0.4, 0.6, 0.55][:len(d)])
    final = {"a": _by_seed(b + np.array(d)), "b": _by_seed(b)}
    expected = 2 * scipy.stats.ttest_1samp(d, margin, alternative=alternative).pvalue
    assert multiplicity.p_value(e, final) == pytest.approx(expected, abs=1e-6)
    settled = e.judge(final).verdict is not UNSURE
    assert settled == (expected <= 0.05)


@pytest.mark.parametrize("e, final", [
    (Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b"),
     {"a": _by_seed([1.0, 1.05, 0.98]), "b": _by_seed([1.01, 1.0, 0.99])}),
    (Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b"),  # unpaired: Welch
     {"a": _by_seed([0.8, 0.85, 0.9]), "b": {10: 0.5, 11: 0.6, 12: 0.55}}),
    (Expectation("", "m", "a", Comparison.FAIL_RATE_AT_MOST, 0.5, threshold=0.5),
     {"a": _by_seed([0.9] * 12)}),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.3), {"a": _by_seed([0.25])}),  # 1 seed
])
def test_the_p_value_is_consistent_with_the_95_percent_verdict(e, final):
    """Settled at 95 % exactly when p <= 0.05; just below p the interval is not settled."""
    p = multiplicity.p_value(e, final)
    assert (e.judge(final).verdict is not UNSURE) == (p <= 0.05)
    if p < 1:
        assert e.judge(final, 1 - p).verdict is not UNSURE
        assert e.judge(final, 1 - p * (1 - 1e-6)).verdict is UNSURE
    else:  # one seed: unbounded at every confidence
        assert len(final["a"]) == 1


def test_a_zero_spread_settles_at_every_confidence():
    """A constant per-seed difference: its interval is the point, settled at any confidence."""
    e = Expectation("", "m", "a", Comparison.BETTER, 0.1, b="b")
    final = {"a": _by_seed([0.9, 0.8, 0.7]), "b": _by_seed([0.6, 0.5, 0.4])}
    assert e.judge(final, 1 - 1e-15).verdict is HOLDS and multiplicity.p_value(e, final) == 0.0


def test_holm_steps_down_and_stops_at_the_first_that_does_not_survive():
    """Sorted: 0.01 <= 0.05/4 survives; 0.03 > 0.05/3 stops it, so 0.035 and 0.04 fail too,
    though 0.04 <= 0.05/1 (a version that does not stop would keep it)."""
    assert multiplicity.holm_survives([0.04, 0.01, 0.035, 0.03]) == [False, True, False, False]


def test_holm_is_not_bonferroni():
    """0.03 <= 0.05/1 at the second step survives Holm, not Bonferroni (0.03 > 0.05/2)."""
    assert multiplicity.holm_survives([0.03, 0.01]) == [True, True]


def test_holm_steps_down_from_the_smallest_not_up_from_the_largest():
    """Step-up (Hochberg) keeps all three (0.045 <= 0.05); reversed order keeps none."""
    assert multiplicity.holm_survives([0.045, 0.01, 0.04]) == [False, True, False]


def test_holm_verdicts_only_settled_ones_that_survive_stay():
    verdicts = [HOLDS, FAILS, HOLDS, UNSURE]
    assert multiplicity.holm_verdicts(verdicts, [0.001, 0.002, 0.04, 0.3]) == [
        HOLDS, FAILS, UNSURE, UNSURE]


def _family_study() -> tuple[Study, dict]:
    """Three expectations on paired differences from base: a by 0.3 (p ≈ 0.001), b by
    0.1 ± 0.035 (p ≈ 0.04: holds at 95 %, not under Holm), c by 0.1 ± 0.1 (inconclusive)."""
    base, gains = [0.5, 0.5, 0.5], {"a": [0.3, 0.31, 0.32], "b": [0.065, 0.1, 0.135],
                                    "c": [0.0, 0.1, 0.2]}
    values = {"base": base, **{v: [x + g for x, g in zip(base, d)] for v, d in gains.items()}}
    runs = {(v, s): {"status": {"state": "finished", "step": 10},
                     "curves": {"eval/accuracy": [(10, x)]}}
            for v, xs in values.items() for s, x in enumerate(xs)}
    expectations = tuple(Expectation(f"{v} beats base", "eval/accuracy", v, Comparison.BETTER,
                                     0.0, b="base") for v in gains)
    study = Study(name="family", claim="c", published="p",
                  base=ml_collections.ConfigDict({"seed": 0}),
                  variants={v: {} for v in values}, seeds=(0, 1, 2),
                  metrics=("eval/accuracy",), expectations=expectations)
    return study, runs


def test_a_planted_family_one_survives_holm_one_does_not():
    study, runs = _family_study()
    record = report.study_record(study, runs)
    rows = record["expectations"]
    assert [r["verdict"] for r in rows] == ["holds", "holds", "inconclusive"]
    p = [r["holm"]["p"] for r in rows]
    assert p[0] < 0.05 / 3 < 0.05 / 2 < p[1] < 0.05 < p[2]
    assert [r["holm"]["verdict"] for r in rows] == ["holds", "inconclusive", "inconclusive"]
    assert record["counts"]["held"] == 2 and record["counts"]["holm"]["held"] == 1
    assert record["counts"]["holm"]["inconclusive"] == 2
    table = verdict_text.expectations_table(record)
    assert table[0].endswith("| verdict | under Holm |")
    assert table[3].endswith(f"| holds | **inconclusive**, p = {p[1]:.2g} |")
    line = verdict_text.overall_line(record)
    assert line.endswith("Under Holm's correction over its 3 findings (family level "
                         "0.05): the claim partly holds (1 hold, 0 do not hold, 2 inconclusive).")
    assert "Under Holm: the verdict under Holm's step-down correction over the study's 3 " \
        "findings at family level 0.05" in verdict_text.notes(record)


def test_a_record_judged_before_holm_shows_no_holm():
    study, runs = _family_study()
    record = report.study_record(study, runs)
    for row in record["expectations"]:
        del row["holm"]
    del record["counts"]["holm"]
    assert "Holm" not in "\n".join(verdict_text.expectations_table(record))
    assert "Holm" not in verdict_text.overall_line(record) + verdict_text.notes(record)


def test_the_headline_is_silent_when_holm_changes_nothing():
    study, runs = _family_study()
    study = Study(**{**study.__dict__, "expectations": study.expectations[:1]})
    record = report.study_record(study, runs)
    assert record["expectations"][0]["holm"]["verdict"] == "holds"
    assert "Holm" not in verdict_text.overall_line(record)
    assert "| holds | holds, p = " in verdict_text.expectations_table(record)[2]

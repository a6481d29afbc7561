"""Kinds of expectation (docs/verdicts.md): only findings count as evidence and are corrected by
Holm, checks and post hoc are counted apart, a check that does not hold is an alarm; what
cannot be judged is refused; the kind is disclosure, outside the fingerprint."""
import dataclasses
import math

import ml_collections
import pytest

from transformer_jax.config import ConfigError
from transformer_jax.studies import report
from transformer_jax.studies.records import record
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.run import terminal
from transformer_jax.studies.study import (Comparison, Expectation, Kind, Measure, Study,
                                           Verdict)

SEEDS = (0, 1, 2)


def _study(*expectations: Expectation) -> Study:
    base = ml_collections.ConfigDict({"seed": 0, "data": {}})
    return Study(name="k", claim="c", published="p", base=base,
                 variants={"a": {}, "b": {}}, seeds=SEEDS, metrics=("m",),
                 expectations=expectations)


def _runs(a, b):
    return {(v, s): {"status": {"state": "finished", "step": 10}, "curves": {"m": [(10, x)]}}
            for v, xs in (("a", a), ("b", b)) for s, x in zip(SEEDS, xs)}


GAIN = dict(metric="m", a="a", comparison=Comparison.BETTER, b="b")
RUNS = _runs([0.9, 0.85, 0.88], [0.55, 0.52, 0.5])  # a − b: 0.35, 0.33, 0.38


def test_a_check_or_post_hoc_needs_its_reason_and_a_kind_is_one_of_three():
    with pytest.raises(ConfigError, match="kind=Kind.CHECK needs why="):
        Expectation("t", margin=0.1, kind=Kind.CHECK, **GAIN)
    with pytest.raises(ConfigError, match="kind='check'; valid: Kind.FINDING, Kind.CHECK"):
        Expectation("t", margin=0.1, kind="check", **GAIN)


def test_declaring_a_kind_moves_no_fingerprint():
    finding = _study(Expectation("t", margin=0.1, **GAIN))
    check = _study(Expectation("t", margin=0.1, kind=Kind.CHECK, why="w", **GAIN))
    moved = _study(Expectation("t", margin=0.2, kind=Kind.CHECK, why="w", **GAIN))
    assert finding.fingerprint() == check.fingerprint() != moved.fingerprint()


def test_only_findings_count_and_holm_runs_over_them_alone():
    """Three settled verdicts: a finding, a check and a post hoc. Holm over the one finding
    keeps it (over all three, its p of about 0.02 would not survive 0.05/3)."""
    finding = Expectation("f", margin=0.27, **GAIN)  # p ≈ 0.029
    check = Expectation("c", margin=0.0, kind=Kind.CHECK, why="by construction", **GAIN)
    post = Expectation("p", margin=0.2, kind=Kind.POST_HOC, why="set after", **GAIN)
    found = report.study_record(_study(finding, check, post), RUNS)
    rows, counts = found["expectations"], found["counts"]
    assert [r["kind"] for r in rows] == ["finding", "check", "post_hoc"]
    assert [r["verdict"] for r in rows] == ["holds"] * 3
    assert 0.05 / 3 < rows[0]["holm"]["p"] < 0.05 and rows[0]["holm"]["verdict"] == "holds"
    assert "holm" not in rows[1] and "holm" not in rows[2]
    assert (counts["held"], counts["total"], counts["holm"]["total"]) == (1, 1, 1)
    assert counts["checks"]["held"] == counts["post_hoc"]["held"] == 1
    assert counts["alarms"] == []
    line = verdict_text.overall_line(found)
    assert line.startswith("**Verdict: the claim holds on this run** (1 hold, 0 do not hold, 0 "
                           "inconclusive of 1 findings")
    assert "Counted apart, not as evidence: checks of the instrument 1 of 1 hold; post hoc" in line
    assert verdict_text.verdict_cell(found) == \
        "holds: 1 of 1 findings hold · checks 1 of 1, post hoc 1 of 1 hold"
    table = "\n".join(verdict_text.expectations_table(found))
    assert "| c | check: by construction |" in table and "— (not a finding)" in table


def test_a_check_that_does_not_hold_is_an_alarm_shown_first(tmp_path):
    broken = Expectation("the instrument reads 1", "m", "a", Comparison.AT_MOST, 0.1,
                         kind=Kind.CHECK, why="by construction")
    found = report.study_record(_study(Expectation("f", margin=0.1, **GAIN), broken), RUNS)
    assert found["counts"]["alarms"] == ["the instrument reads 1"]
    assert verdict_text.overall_line(found).startswith(
        "**Alarm: 1 of 1 checks of the instrument do not hold (“the instrument reads 1”)")
    assert verdict_text.verdict_cell(found).startswith("**alarm: 1 of 1 checks do not hold** · ")
    path = record.write(tmp_path / "verdict.json", found)
    seen = terminal.read_verdict(path)
    assert (seen.cell("holds"), seen.apart(Kind.CHECK)) == ("1", "0/1 hold ALARM")


def test_a_late_gain_on_a_variant_whose_every_run_diverged_is_refused_whatever_worst_says():
    flat = Expectation("b has flattened", "m", "b", Comparison.AT_MOST, 0.02, worst=0.0,
                       measure=Measure.LATE_GAIN, kind=Kind.CHECK, why="budget")
    j = flat.judge({"a": {0: 0.1, 1: 0.1, 2: 0.1}, "b": {0: math.nan, 1: math.nan, 2: math.nan}})
    assert j.verdict is Verdict.INCONCLUSIVE
    assert j.note == "refused: every run of b diverged, so a late gain on it measures nothing"


def test_a_comparison_with_a_variant_never_finite_is_refused_unless_declared_a_check():
    never = {"a": {0: 5.0, 1: 6.0, 2: 5.5}, "b": {0: math.nan, 1: math.nan, 2: math.nan}}
    ratio = Expectation("a ≥ 2× b", "m", "a", Comparison.RATIO, 2.0, b="b", worst=1.0)
    at_start = ratio.judge(never, stopped={"b": {0: 1, 1: 1, 2: 0}})
    assert at_start.verdict is Verdict.INCONCLUSIVE
    assert at_start.note.startswith("refused: every run of b was non-finite from step 1")
    # a run that was finite for a while measured something: judged, with its `worst`
    assert ratio.judge(never, stopped={"b": {0: 1, 1: 40, 2: 1}}).verdict is Verdict.HOLDS
    declared = dataclasses.replace(ratio, kind=Kind.CHECK, why="that b blows up at once")
    assert declared.judge(never, stopped={"b": {0: 1, 1: 1, 2: 1}}).verdict is Verdict.HOLDS


def test_a_tuned_arm_is_never_finite_only_when_every_candidate_stopped_at_step_1():
    study = dataclasses.replace(_study(), variants={"a": {}, "b1": {}, "b2": {}},
                                tuned={"b": ("b1", "b2")})
    stops = {("b1", 0): 1, ("b2", 0): 1, ("b1", 1): 1}
    assert report.stopped_steps(study, stops) == {"b1": {0: 1, 1: 1}, "b2": {0: 1},
                                                  "b": {0: 1}}

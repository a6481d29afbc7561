"""Expectations on how much a run still improved over its last fifth of steps
(`Measure.LATE_GAIN`): the "flattened" check a "trains at all" verdict rests on."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from transformer_jax.config import ConfigError
from transformer_jax.studies import report
from transformer_jax.studies.design.loading import load_study
from transformer_jax.studies.study import Comparison, Expectation, Measure, flattened

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _run(points, state="finished"):
    return {"status": {"state": state}, "curves": {"m": points}}


def test_late_gain_is_signed_so_that_improving_is_positive():
    rising = _run([(0, 0.1), (70, 0.5), (80, 0.6), (90, 0.65), (100, 0.7)])
    # last fifth of 100 steps: from step 80 (0.6) to step 100 (0.7)
    assert report.late_gain(rising, "m", higher_is_better=True) == pytest.approx(0.1)
    assert report.late_gain(rising, "m", higher_is_better=False) == pytest.approx(-0.1)
    falling_loss = _run([(0, 3.0), (80, 1.0), (100, 0.9)])
    assert report.late_gain(falling_loss, "m", higher_is_better=False) == pytest.approx(0.1)
    assert math.isnan(report.late_gain(_run([(100, 0.7)]), "m", True))  # nothing that early
    assert math.isnan(report.late_gain(_run([(0, 0.1), (100, 0.7)], "diverged"), "m", True))
    assert math.isnan(report.late_gain(_run([]), "m", True))


def _study(e: Expectation):
    return dataclasses.replace(load_study(EXPERIMENTS / "residuals.py", "tiny"),
                               variants={"a": {}, "b": {}}, expectations=(e,), seeds=(0, 1, 2))


def test_a_flattened_check_is_judged_on_each_seeds_late_gain_not_its_final_value():
    e = Expectation("a has flattened", "m", "a", Comparison.AT_MOST, 0.02,
                    measure=Measure.LATE_GAIN)
    flat = {("a", s): _run([(0, 0.1), (80, 0.9 + 0.001 * s), (100, 0.905 + 0.001 * s)])
            for s in range(3)}
    flat.update({("b", s): _run([(0, 0.1), (100, 0.2)]) for s in range(3)})
    study = _study(e)
    judged = e.judge(report.judged_values(study, flat, e))
    assert judged.verdict.value == "holds" and judged.effect == pytest.approx(0.005)
    assert ", gain over the last 20 % of steps" in report.verdict_cells(e, judged)[3]  # effect
    # the same final values reached by a curve that still climbs: the check fails
    climbing = dict(flat)
    climbing.update({("a", s): _run([(0, 0.1), (80, 0.6 + 0.01 * s), (100, 0.905 + 0.001 * s)])
                     for s in range(3)})
    assert e.judge(report.judged_values(study, climbing, e)).verdict.value == "does not hold"
    # and a final-value expectation on the same runs cannot tell the two apart
    final = dataclasses.replace(e, measure=Measure.FINAL, margin=1.0)
    assert (report.judged_values(study, flat, final)["a"]
            == report.judged_values(study, climbing, final)["a"])


def test_late_gain_with_a_step_or_a_bad_measure_is_one_clear_error():
    with pytest.raises(ConfigError, match="at_step=1 goes with Measure.FINAL"):
        Expectation("t", "m", "a", Comparison.AT_MOST, 0.02, at_step=1,
                    measure=Measure.LATE_GAIN)
    with pytest.raises(ConfigError, match="measure='late'.*Measure.LATE_GAIN"):
        Expectation("t", "m", "a", Comparison.AT_MOST, 0.02, measure="late")


def test_designs_without_a_measure_keep_their_fingerprint():
    study = load_study(EXPERIMENTS / "scaling.py", "default")  # a study without the check
    assert all("measure" not in e for e in study.design()["expectations"])
    late = dataclasses.replace(study, expectations=tuple(
        dataclasses.replace(e, measure=Measure.LATE_GAIN) for e in study.expectations))
    assert late.fingerprint() != study.fingerprint()
    assert all(e["measure"] == "late_gain" for e in late.design()["expectations"])


def test_flattened_is_an_at_most_on_the_baselines_late_gain():
    e = flattened("pre", "eval/loss", 0.03, higher_is_better=False)
    assert (e.a, e.metric, e.comparison, e.margin, e.measure, e.higher_is_better) == (
        "pre", "eval/loss", Comparison.AT_MOST, 0.03, Measure.LATE_GAIN, False)
    assert "pre has flattened" in e.text and "0.03" in e.text

"""Expectations judged at a step (`Expectation.at_step`: gradients at initialization, say)
rather than on the final value; and the first/last layer gradient ratio the trainer logs."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.config import ConfigError
from transformer_jax.studies import report
from transformer_jax.studies.design.loading import load_study
from transformer_jax.studies.study import Comparison, Expectation, Measure
from transformer_jax.train.loop import _train_scalars

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _run(points, state="finished"):
    return {"status": {"state": state}, "curves": {"m": points}}


def test_value_at_is_the_first_logged_step_at_or_after():
    run = _run([(1, 0.5), (10, 0.7), (20, 0.9)])
    assert report.value_at(run, "m", 1) == 0.5
    assert report.value_at(run, "m", 2) == 0.7  # the first logged step at or after 2
    assert math.isnan(report.value_at(run, "m", 21)) and math.isnan(report.value_at(run, "x", 1))
    # measured before the run diverged: it counts, where the final value does not
    diverged = _run([(1, 0.5), (10, math.inf)], state="diverged")
    assert report.value_at(diverged, "m", 1) == 0.5 and math.isnan(report.final_value(diverged, "m"))


def test_an_expectation_at_a_step_is_judged_there():
    e = Expectation("a's start beats b's", "m", "a", Comparison.BETTER, 0.1, b="b", at_step=1)
    runs = {("a", s): _run([(1, 1.0 + 0.01 * s), (9, 0.0)]) for s in range(3)}
    runs.update({("b", s): _run([(1, 0.5 + 0.01 * s), (9, 1.0)]) for s in range(3)})
    study = dataclasses.replace(load_study(EXPERIMENTS / "residuals.py", "tiny"),
                                variants={"a": {}, "b": {}}, expectations=(e,), seeds=(0, 1, 2))
    at_start = e.judge(report.final_values(study, runs, "m", e.at_step))
    assert at_start.verdict.value == "holds" and at_start.effect == pytest.approx(0.5)
    at_end = e.judge(report.final_values(study, runs, "m"))  # final values: b ahead
    assert at_end.verdict.value == "does not hold"
    assert ", at step 1" in report.verdict_cells(e, at_start)[3]  # expected, kind, values, effect


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_a_bad_step_is_one_clear_error(bad):
    with pytest.raises(ConfigError, match=f"at_step={bad!r} must be a non-negative integer"):
        Expectation("t", "m", "a", Comparison.AT_MOST, 1.0, at_step=bad)


def test_designs_without_at_step_keep_their_fingerprint():
    study = load_study(EXPERIMENTS / "residuals.py", "default")
    assert all("at_step" not in e for e in study.design()["expectations"])
    moved = dataclasses.replace(study, expectations=tuple(  # (at_step goes with final values)
        dataclasses.replace(e, at_step=1) if e.measure is Measure.FINAL else e
        for e in study.expectations))
    assert moved.fingerprint() != study.fingerprint()
    assert sum(e.get("at_step") == 1 for e in moved.design()["expectations"]) == 2


def test_the_trainer_logs_the_first_over_last_layer_gradient_ratio():
    metrics = {"loss": np.float32(1.0), "layer_grad_norm": np.array([0.02, 0.5, 0.1]),
               "qk_grad_norm": np.array([0.01, 0.2, 0.03]),
               "residual_rms": np.array([1.5, 2.0, 2.5])}
    scalars = _train_scalars(metrics)
    assert scalars["layers/grad_norm_ratio"] == pytest.approx(0.2)  # layer 0 / layer 2
    assert scalars["layers/residual_rms_last_layer"] == 2.5  # layer 2's, under one name
    assert "layers/grad_norm_ratio" not in _train_scalars(
        {"loss": np.float32(1.0), "layer_grad_norm": np.array([0.3]),
         "qk_grad_norm": np.array([0.1]), "residual_rms": np.array([1.2])})  # one layer: no ratio

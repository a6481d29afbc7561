"""Speed beside capability on a study's summary: convergence.py's pure functions, and the
"step at 90 % of best" columns the report writes from the runs' curves."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from transformer_jax.studies import convergence, report
from transformer_jax.studies.design.loading import load_config
from transformer_jax.studies.study import Comparison, Expectation, Study

REPO = Path(__file__).resolve().parents[2]


def test_seed_mean_curve_averages_each_step_over_the_seeds_that_have_it():
    mean = convergence.seed_mean_curve([[(0, 1.0), (10, 3.0)], [(0, 3.0), (10, math.nan)],
                                        [(0, 2.0), (20, 5.0)]])
    assert mean == [(0, 2.0), (10, 3.0), (20, 5.0)]


def test_target_and_first_step_to_reach_it_in_both_directions():
    assert convergence.target_value(0.8, 0.9, True) == pytest.approx(0.72)
    assert convergence.target_value(2.0, 0.9, False) == pytest.approx(2.0 / 0.9)
    curve = [(0, 0.1), (10, 0.71), (20, 0.72), (30, 0.8)]
    assert convergence.steps_to_reach(curve, 0.72, True) == 20  # reached at, not after
    assert convergence.steps_to_reach(curve, 0.9, True) is None
    loss = [(0, 4.0), (10, 2.3), (20, 2.2), (30, 2.0)]
    assert convergence.steps_to_reach(loss, 2.0 / 0.9, False) == 20


def test_window_change_is_over_the_last_fifth_of_the_steps():
    curve = [(s, float(s)) for s in range(0, 101, 10)]
    change = convergence.window_change(curve)
    assert (change.start, change.end, change.change) == (80, 100, 20.0)
    assert convergence.window_change([(100, 1.0)]) is None


def test_steps_to_fraction_of_best_judges_every_variant_against_the_best_final():
    curves = {"fast": [(0, 0.0), (10, 0.95), (20, 1.0)], "slow": [(0, 0.0), (10, 0.5), (20, 0.9)],
              "broken": [(0, 0.0), (20, 0.1)], "empty": []}
    assert convergence.steps_to_fraction_of_best(curves, True) == {
        "fast": 10, "slow": 20, "broken": None, "empty": None}
    losses = {"a": [(0, 4.0), (10, 1.1), (20, 1.0)], "b": [(0, 4.0), (10, 2.0), (20, 1.2)]}
    assert convergence.steps_to_fraction_of_best(losses, False) == {"a": 10, "b": None}


def test_direction_comes_from_the_expectations_then_the_metric_name():
    e = Expectation("x", "eval/accuracy", "a", Comparison.AT_MOST, 0.5, higher_is_better=False)
    assert convergence.higher_is_better("eval/accuracy", (e,)) is False
    assert convergence.higher_is_better("eval/accuracy", ()) is True
    assert convergence.higher_is_better("eval/loss", ()) is False


def _run(curve, state="finished"):
    return {"status": {"state": state, "step": curve[-1][0]}, "curves": {"eval/accuracy": curve}}


def test_summary_has_speed_and_late_change_columns_per_judged_metric_from_seed_mean_curves():
    e = Expectation("fast beats slow", "eval/accuracy", "fast", Comparison.BETTER, 0.0, b="slow")
    study = Study(name="toy", claim="c", published="p", base=load_config(REPO / "configs/synthetic.py", "tiny"),
                  variants={"fast": {}, "slow": {}}, seeds=(0, 1),
                  metrics=("eval/accuracy", "eval/loss"), expectations=(e,))
    runs = {("fast", 0): _run([(0, 0.0), (10, 0.9), (20, 1.0)]),
            ("fast", 1): _run([(0, 0.0), (10, 0.9), (20, 1.0)]),
            ("slow", 0): _run([(0, 0.0), (10, 0.4), (20, 0.9)]),
            # a diverged seed's curve is not averaged in: with it, slow never gets there
            ("slow", 1): _run([(0, 0.0), (10, 0.0), (20, 0.0)], state="diverged")}
    text = report._summary_markdown(study, runs)
    header = next(l for l in text.splitlines() if l.startswith("| variant"))
    assert "eval/loss: step" not in header  # no expectation judges it
    assert header.endswith("| eval/accuracy: step at 90 % of best "
                           "| eval/accuracy: change over the last 20 % of steps |")
    assert "eval/loss: change" not in header
    rows = {l.split(" | ")[0][2:]: l for l in text.splitlines() if l.startswith("| fast")
            or l.startswith("| slow")}
    # last fifth of 20 steps: from the last evaluation at or before step 16 (step 10) to step 20
    assert rows["fast"].endswith("| 10 | +0.1 (10→20) |"), rows["fast"]
    assert rows["slow"].endswith("| 20 | +0.5 (10→20) |"), rows["slow"]  # diverged seed left out


def test_late_change_is_a_dash_where_no_evaluation_is_early_enough():
    e = Expectation("a at chance", "eval/accuracy", "a", Comparison.AT_MOST, 0.5)
    study = Study(name="toy", claim="c", published="p", base=load_config(REPO / "configs/synthetic.py", "tiny"),
                  variants={"a": {}}, seeds=(0,), metrics=("eval/accuracy",), expectations=(e,))
    text = report._summary_markdown(study, {("a", 0): _run([(20, 0.7)])})
    assert next(l for l in text.splitlines() if l.startswith("| a |")).endswith("| 20 | — |")

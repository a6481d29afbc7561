"""A study's comparison for TensorBoard (studies/render/board.py): the swept fields, each judged
metric's card (a variant's mean over its finished seeds; log10 where the figure's axis is
log), the Custom Scalars layout, and comparison runs rewritten only when the runs changed."""
from __future__ import annotations

import types

import ml_collections
import numpy as np
import pytest

from transformer_jax.studies.render import board
from transformer_jax.train import summaries


def _study():
    return types.SimpleNamespace(
        name="norms", seeds=(0, 1), metrics=("eval/loss", "eval/accuracy"),
        variants={"pre": {}, "none": {}},
        expectations=[types.SimpleNamespace(metric="eval/loss")])


def _runs(scale=1.0):
    loss = {"pre": (2.0, 2.2), "none": (200.0, np.nan)}  # none's seed 1 diverged
    return {(v, s): {"curves": {"eval/loss": [(10, scale * loss[v][s]), (20, scale * loss[v][s] / 2)],
                                "eval/accuracy": [(20, 0.5)]}}
            for v in ("pre", "none") for s in (0, 1)}


def test_swept_fields_are_those_that_differ_between_runs():
    a = ml_collections.ConfigDict({"seed": 0, "model": {"norm": "pre", "d_model": 8}})
    b = ml_collections.ConfigDict({"seed": 1, "model": {"norm": "none", "d_model": 8}})
    assert board.swept_fields([a, b]) == ["model.norm"]


def test_a_card_per_judged_metric_holding_each_variants_mean():
    cards = board.comparison_curves(_study(), _runs())
    # eval/loss spans 1.0 to 200: the figure's axis is log, so the card is log10
    assert list(cards) == ["Compare/norms/eval/loss/log10"]
    steps, pre = cards["Compare/norms/eval/loss/log10"]["pre"]
    assert steps == [10, 20] and pre == pytest.approx(np.log10([2.1, 1.05]))
    _, none = cards["Compare/norms/eval/loss/log10"]["none"]
    assert none == pytest.approx(np.log10([200.0, 100.0]))  # the finished seed alone
    (category,) = board.layout("norms", list(cards)).category
    assert category.title == "norms"
    assert [c.title for c in category.chart] == [
        "eval/loss (log10): mean over seeds, a line per variant"]
    assert list(category.chart[0].multiline.tag) == ["^Compare/norms/eval/loss/log10$"]


def test_comparison_runs_are_rewritten_only_when_the_runs_change(tmp_path):
    study = _study()
    board.write_view(study, tmp_path, [])
    board.write_comparison(study, tmp_path, _runs())
    files = sorted(tmp_path.glob("compare/*/events.out.tfevents*"))
    assert [f.parent.name for f in files] == ["none", "pre"]
    scalars = summaries.read_scalars(str(tmp_path / "compare" / "pre"))
    assert [s for s, _ in scalars["Compare/norms/eval/loss/log10"]] == [10, 20]
    assert board.read_view(tmp_path)["cards"] == ["Compare/norms/eval/loss/log10"]
    board.write_comparison(study, tmp_path, _runs())  # a rerun reporting the same runs
    assert sorted(tmp_path.glob("compare/*/events.out.tfevents*")) == files
    board.write_comparison(study, tmp_path, _runs(scale=3.0))
    again = sorted(tmp_path.glob("compare/*/events.out.tfevents*"))
    assert len(again) == 2 and again != files


def test_a_probe_at_initialization_is_drawn_at_step_0():
    """The report files an analysis's value at its run's last step; a probe/ metric was measured
    on the model at initialization, so its card holds the mean over seeds at step 0."""
    study = _study()
    study.expectations = [types.SimpleNamespace(metric="probe/permutation_gap")]
    runs = _runs()
    for (variant, seed), run in runs.items():  # as report.add_measured files it (seed 1: step 30)
        run["curves"]["probe/permutation_gap"] = [(20 + 10 * seed, 1.0 + seed)]
    runs[("none", 1)]["curves"]["probe/permutation_gap"] = [(30, np.nan)]  # diverged
    cards = board.comparison_curves(study, runs)
    (tag,) = cards
    assert tag == "Compare/norms/probe/permutation_gap"
    assert cards[tag]["pre"][0] == [0] and cards[tag]["pre"][1] == pytest.approx([1.5])
    assert cards[tag]["none"][0] == [0] and cards[tag]["none"][1] == pytest.approx([1.0])

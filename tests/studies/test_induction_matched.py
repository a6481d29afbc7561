"""experiments/induction_matched.py (issue 65, items 5 and 6): induction's 2-layer model with
more heads per layer, its groups knocked out against matched random sets."""
from __future__ import annotations

from pathlib import Path

import pytest
from tiny_study import tiny_experiment

from transformer_jax.studies.analysis import matched_knockout
from transformer_jax.studies.design.loading import load_module
from transformer_jax.studies.run import sweep
from transformer_jax.studies.study import Comparison, Kind, load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments" / "induction_matched.py"
INDUCTION = REPO / "experiments" / "induction.py"


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_it_is_inductions_two_layer_model_with_more_heads_and_its_thresholds(size):
    study, induction = load_study(EXPERIMENT, size), load_study(INDUCTION, size)
    heads = load_module(EXPERIMENT).HEADS[size]
    assert heads > induction.base.model.num_heads  # room for a matched set in each layer
    mine, theirs = study.config("L2", 0).to_dict(), induction.config("L2", 0).to_dict()
    assert mine["model"].pop("num_heads") == heads
    theirs["model"].pop("num_heads")
    assert mine == theirs and study.seeds == induction.seeds  # nothing else moved
    ind = load_module(INDUCTION)
    by_comparison = {}
    for e in study.expectations:
        by_comparison.setdefault((e.comparison, e.kind), []).append(e)
    (check,) = by_comparison[(Comparison.AT_LEAST, Kind.CHECK)]
    assert (check.metric, check.margin) == ("eval/accuracy", ind.FORMED_AT)
    findings = by_comparison[(Comparison.AT_MOST, Kind.FINDING)]
    assert len(findings) == 6 and len(study.expectations) == 7
    margins = {e.metric: e.margin for e in findings}
    for name in ("prefix_matchers", "previous_token"):  # the whole group: induction's two
        names = matched_knockout.metric_names(name)
        assert margins[names["without"]] == ind.GROUP_AT_MOST
        assert margins[names["random_share"]] == ind.RANDOM_SHARE_AT_MOST
        top = matched_knockout.metric_names(f"top_{name}")  # its best heads: the share alone
        assert margins[top["random_share"]] == ind.RANDOM_SHARE_AT_MOST
        assert top["without"] not in margins


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_the_analyses_on_a_tiny_finished_study(tmp_path):
    study = tiny_experiment(EXPERIMENT, tmp_path / "data")
    root = tmp_path / "induction_matched"
    assert sweep.run_study(study, str(root))
    verdict = (root / "verdict.md").read_text()
    assert "### What the heads learned" in verdict
    assert "### Groups of heads against matched random sets" in verdict
    header = (root / "summary.csv").read_text().splitlines()[0]
    for name in ("previous_token", "top_previous_token"):  # groups a tiny model's layer 0 has
        assert matched_knockout.metric_names(name)["random_share"] in header

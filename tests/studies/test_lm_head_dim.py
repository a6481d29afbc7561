"""experiments/lm_head_dim.py (issue 65, item 4): d_k moved alone at one head on real text, each
arm tuned, and the growth of the penalty judged as one expectation."""
from __future__ import annotations

from pathlib import Path

import pytest

from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design.loading import load_module
from transformer_jax.studies.study import Comparison, Kind
from transformer_jax.train import check_config

REPO = Path(__file__).resolve().parents[2]
PATH = REPO / "experiments" / "lm_head_dim.py"
ARM_FIELDS = {"model.head_dim", "model.attn_scale", "train.learning_rate"}


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_arms_differ_in_d_k_scale_and_rate_alone_at_one_head(size):
    experiment = load_module(PATH)
    study = study_lib.load_study(PATH, size)
    lm_scaling = study_lib.load_study(REPO / "experiments" / "lm_scaling.py", size)
    assert study.suite == "lm_head_dim" and study.seeds == (0, 1, 2)
    assert study.base.model.num_heads == 1
    # lm_scaling's model, text and budget: only the head count is held, and the rate tuned
    for section in ("data", "train"):
        mine, theirs = study.base[section].to_dict(), lm_scaling.base[section].to_dict()
        mine.pop("learning_rate", None), theirs.pop("learning_rate", None)
        assert mine == theirs, section
    assert set().union(*study.variants.values()) <= ARM_FIELDS
    assert len(study.tuned) == 2 * len(experiment.HEAD_DIMS[size])
    for arm, candidates in study.tuned.items():
        rates = [study.variants[c]["train.learning_rate"] for c in candidates]
        assert rates == list(experiment.LEARNING_RATES[size])
        d_k = study.variants[candidates[0]]["model.head_dim"]
        assert arm == experiment.name(d_k, study.variants[candidates[0]]["model.attn_scale"])
        for c in candidates:  # a valid config whose one head is d_k wide, d_model unchanged
            _, model = check_config(study.config(c, 0))
            assert (model.d_model, model.d_k, model.num_heads) == (
                lm_scaling.base.model.d_model, d_k, 1)
    assert study.extend_grid.field == "train.learning_rate" and study.extend_grid.cap == 1


def test_the_growth_is_judged_wide_penalty_minus_narrow_penalty():
    experiment = load_module(PATH)
    study = study_lib.load_study(PATH, "default")
    narrow, wide = experiment.HEAD_DIMS["default"]
    assert (narrow, wide) == (16, 128)
    by = {e.comparison: e for e in study.expectations}
    assert all(e.kind is Kind.FINDING and not e.higher_is_better for e in study.expectations)
    grows = by[Comparison.DIFFERENCE_OF_DIFFERENCES]
    # lower is better: (b − a) − (d − c) = (unscaled − scaled at 128) − (unscaled − scaled at 16)
    assert (grows.a, grows.b, grows.c, grows.d) == ("dk128_scaled", "dk128_unscaled",
                                                    "dk16_scaled", "dk16_unscaled")
    assert grows.metric == "eval/bits_per_char" and grows.margin == 0.02
    within = by[Comparison.WITHIN]
    assert (within.a, within.b, within.margin) == ("dk16_unscaled", "dk16_scaled", 0.02)
    ahead = by[Comparison.BETTER]
    assert (ahead.a, ahead.b, ahead.margin) == ("dk128_scaled", "dk128_unscaled", 0.02)

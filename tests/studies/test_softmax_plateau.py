"""experiments/softmax_plateau_narrow.py and softmax_plateau_wide.py (issue 64, item 5): ÷√d_k
judged at the plateau, each arm at its own best learning rate, with d_k moved alone (d_model
fixed); softmax_plateau.py as registered at ede4c31, split by d_k for its suite's time
(experiments/_softmax_plateau.py holds what the parts share)."""
from __future__ import annotations

from pathlib import Path

import pytest
from registered_experiments import experiments_at

from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design.loading import load_module
from transformer_jax.studies.study import Comparison, Kind, Measure
from transformer_jax.train import check_config

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "experiments" / "_softmax_plateau.py"
PARTS = ("softmax_plateau_narrow", "softmax_plateau_wide")  # the narrow d_k, the wide
ARM_FIELDS = {"model.head_dim", "model.attn_scale", "model.qk_init_scale",
              "train.learning_rate"}


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_arms_differ_in_d_k_scale_init_and_rate_alone(size, part):
    experiment = load_module(SHARED)
    study = study_lib.load_study(REPO / "experiments" / f"{part}.py", size)
    s = experiment.SIZES[size]
    part_d_k = s["d_ks"][PARTS.index(part)]
    assert study.suite == part and study.seeds == (0, 1, 2)
    assert study.base.model.d_model == s["d_model"] and study.base.model.num_heads == 1
    assert set().union(*study.variants.values()) <= ARM_FIELDS  # no width, depth or norm moves
    assert len(study.tuned) == 3
    for arm, candidates in study.tuned.items():
        rates = [study.variants[c]["train.learning_rate"] for c in candidates]
        assert rates == list(experiment.LEARNING_RATES)
        rest = [{k: v for k, v in study.variants[c].items() if k != "train.learning_rate"}
                for c in candidates]
        assert all(r == rest[0] for r in rest)
        d_k = rest[0]["model.head_dim"]
        assert arm.endswith(f"_d{d_k}") and d_k == part_d_k
        assert rest[0]["model.attn_scale"] == arm.startswith("scaled")
        assert rest[0].get("model.qk_init_scale", 1.0) == (
            d_k ** -0.25 if "small_init" in arm else 1.0)
        for c in candidates:  # each candidate is a valid config, d_k moved alone
            _, model = check_config(study.config(c, 0))
            assert (model.d_model, model.d_k, model.num_heads) == (s["d_model"], d_k, 1)
    train = study.base.train
    assert (train.schedule, train.warmup_steps, train.grad_clip_norm) == ("constant", 0, 0.0)
    assert (study.plateau.first, study.plateau.step, study.plateau.cap) == (
        s["first"], s["step"], s["cap"]) and train.num_steps == s["first"]
    assert study.extend_grid.field == "train.learning_rate"


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("size", ["tiny", "default"])
def test_the_registered_expectations_judge_each_d_k(size, part):
    experiment = load_module(SHARED)
    study = study_lib.load_study(REPO / "experiments" / f"{part}.py", size)
    s = experiment.SIZES[size]
    # The gradient "while every arm still trains" is read inside the first stage.
    assert 0 < s["mid"] < s["first"] and s["log_every"] <= s["mid"]
    for d_k in [s["d_ks"][PARTS.index(part)]]:
        mine = [e for e in study.expectations if f"_d{d_k}" in e.a
                and e.measure is Measure.FINAL]
        by = {(e.metric, e.comparison, e.at_step): e for e in mine}
        harm = by[("eval/accuracy", Comparison.BETTER, None)]
        assert (harm.a, harm.b, harm.margin) == (f"scaled_d{d_k}", f"unscaled_d{d_k}", 0.05)
        grads = [e for e in mine if e.metric == experiment.QK_GRAD]
        assert sorted((e.at_step or 0) for e in grads) == [0, s["mid"]]
        assert all((e.a, e.b, e.comparison, e.margin, e.higher_is_better) == (
            f"unscaled_d{d_k}", f"scaled_d{d_k}", Comparison.RATIO, 2.0, False) for e in grads)
        entropy = by[(experiment.ENTROPY, Comparison.BETTER, None)]
        assert (entropy.a, entropy.b, entropy.margin) == (f"scaled_d{d_k}", f"unscaled_d{d_k}", 0.3)
        kinds = {e.text: e.kind for e in mine}
        assert list(kinds.values()).count(Kind.CHECK) == 1  # the scaled arm learns the task
    late = [e for e in study.expectations if e.measure is Measure.LATE_GAIN]
    assert sorted(e.a for e in late) == sorted(study.tuned)


# ---- the split (issue 64): softmax_plateau as registered, in two suites that fit their time ----

REGISTERED = "ede4c31"  # the commit that registered softmax_plateau, before any run


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> Path:
    """experiments/softmax_plateau.py as ede4c31 registered it, beside today's configs."""
    return experiments_at(REGISTERED, ["softmax_plateau"],
                          tmp_path_factory.mktemp("registered"))["softmax_plateau"]


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_parts_are_the_registered_study_split_by_d_k_with_nothing_moved(registered, size):
    """Every variant, tuned arm and expectation of softmax_plateau as registered in exactly one
    part, the part of its d_k; the same base config, budget, grid, seeds and metrics."""
    was = study_lib.load_study(registered, size)
    parts = [study_lib.load_study(REPO / "experiments" / f"{n}.py", size) for n in PARTS]
    d_ks = load_module(registered).SIZES[size]["d_ks"]
    for part, d_k in zip(parts, d_ks):
        assert part.name == part.suite and part.suite in PARTS
        assert all(arm.endswith(f"_d{d_k}") for arm in part.tuned)  # one d_k per part
        assert (part.base.to_dict(), part.seeds, part.metrics, part.plateau, part.extend_grid,
                part.published) == (was.base.to_dict(), was.seeds, was.metrics, was.plateau,
                                    was.extend_grid, was.published)
    assert [v for p in parts for v in p.variants] == list(was.variants)  # each in one part
    assert {k: v for p in parts for k, v in p.variants.items()} == was.variants
    assert {k: v for p in parts for k, v in p.tuned.items()} == was.tuned
    registered_expectations = {e.text: e for e in was.expectations}
    split = [e for p in parts for e in p.expectations]
    assert len(split) == len(registered_expectations)  # none in two parts, none lost
    assert all(registered_expectations[e.text] == e for e in split)


@pytest.mark.slow  # its fixture runs git
def test_a_planted_move_in_a_part_is_seen(registered):
    """The comparison above notices a threshold moved in a part (a planted HARM of 0.04)."""
    shared = load_module(REPO / "experiments" / "_softmax_plateau.py")
    was = {e.text: e for e in study_lib.load_study(registered, "default").expectations}
    shared.HARM = 0.04
    moved = shared.build_part("softmax_plateau_narrow", "c", "default", "narrow").expectations
    assert any(e.text not in was or was[e.text] != e for e in moved)

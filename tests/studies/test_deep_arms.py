"""The deep-stack studies with initialization, learning rate and budget taken out (issue 64):
studies/deep_arms.py's arms, and the experiments built on it: depth_remedies_pre.py,
depth_remedies_post.py, depth_remedies_nonorm.py and depth_remedies_noresidual.py (24 layers:
depth_remedies.py as registered at cbd11a8, split in suites that fit their time;
experiments/_depth_remedies.py holds what they share) and depth_article_pre.py,
depth_article_post.py and depth_article_nonorm.py (96: depth_article.py as registered at cbd11a8,
split alike; experiments/_depth_article.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from registered_experiments import experiments_at

from transformer_jax.config import BranchInit, Norm
from transformer_jax.studies import deep_arms, study as study_lib
from transformer_jax.studies.deep_arms import COLLAPSES, TRAINS, Arm, Thresholds
from transformer_jax.studies.design.loading import load_module
from transformer_jax.studies.study import Comparison, Kind, Measure
from transformer_jax.train import check_config

REPO = Path(__file__).resolve().parents[2]
PARTS = ("depth_remedies_pre", "depth_remedies_post", "depth_remedies_nonorm",
         "depth_remedies_noresidual")  # depth_remedies, split
ARTICLE_PARTS = ("depth_article_pre", "depth_article_post", "depth_article_nonorm")
STUDIES = (*PARTS, *ARTICLE_PARTS)
REGISTERED = "cbd11a8"  # the commit that registered depth_remedies, before any run
T = Thresholds(leaves_chance=0.25, near_reference=0.05, blown_loss=10.0, vanished_ratio=0.1,
               exploded_rms=100.0)


def _by_text(expectations, arm: str) -> dict[str, study_lib.Expectation]:
    return {e.text: e for e in expectations if e.a == arm}


def test_an_arm_that_trains_registers_outcome_and_mechanism_at_start_and_end():
    arm = Arm("none_res", "depth_scaled", 24, TRAINS)
    found = deep_arms.keyed(arm, T, chance=1 / 16)
    assert [e.a for e in found] == ["none_res_depth_scaled_L24"] * 7
    leaves, near, finite, ratio0, ratio1, rms0, rms1 = found
    assert (leaves.comparison, leaves.margin, leaves.worst) == (Comparison.AT_LEAST, 0.25, 1 / 16)
    assert (near.comparison, near.margin, near.b) == (Comparison.BETTER, -0.05,
                                                      "none_res_standard_L2")
    assert (finite.metric, finite.comparison, finite.at_step, finite.worst) == (
        "train/loss", Comparison.AT_MOST, 1, 1e6)
    assert not finite.higher_is_better
    assert (ratio0.metric, ratio0.at_step, ratio1.at_step) == ("layers/grad_norm_ratio", 1, None)
    assert ratio0.comparison is ratio1.comparison is Comparison.AT_LEAST
    assert (rms0.metric, rms0.comparison, rms0.at_step, rms1.at_step) == (
        "layers/residual_rms_last_layer", Comparison.AT_MOST, 1, None)
    assert all(e.kind is Kind.FINDING and e.measure is Measure.FINAL for e in found)


@pytest.mark.parametrize("architecture, expected", [
    ("pre_nores", [("layers/grad_norm_ratio", Comparison.AT_MOST)]),  # vanishes
    ("none_res", [("train/loss", Comparison.AT_LEAST)]),  # blows up
    ("post_res", []),
])
def test_an_arm_that_collapses_stays_at_chance_with_its_architectures_failure(architecture,
                                                                              expected):
    found = deep_arms.keyed(Arm(architecture, "standard", 96, COLLAPSES), T, chance=1 / 16)
    stays, *mechanism = found
    assert (stays.metric, stays.comparison, stays.margin, stays.worst) == (
        "eval/accuracy", Comparison.AT_MOST, 0.25, 1 / 16)
    assert [(e.metric, e.comparison) for e in mechanism] == expected
    assert all(e.at_step == 1 for e in mechanism)


def test_kinds_apply_to_the_keyed_expectation_only():
    arm = Arm("pre_res", "standard", 24, TRAINS, kinds={"ratio_end": (Kind.CHECK, "measured"),
                                                      "leaves_chance": (Kind.POST_HOC, "seen")})
    kinds = [(e.kind, e.why) for e in deep_arms.keyed(arm, T, chance=1 / 16)]
    assert kinds[0] == (Kind.POST_HOC, "seen") and kinds[4] == (Kind.CHECK, "measured")
    assert all(k == (Kind.FINDING, "") for i, k in enumerate(kinds) if i not in (0, 4))


def test_every_arm_and_reference_is_tuned_over_the_rates_alone():
    arms = [Arm("pre_res", "standard", 24, TRAINS), Arm("none_res", "rezero", 24, TRAINS),
            Arm("none_res", "standard", 24, COLLAPSES)]
    variants, tuned = deep_arms.variants_and_arms(arms, (1e-3, 3e-3), width=16)
    assert list(tuned) == ["pre_res_standard_L24", "none_res_rezero_L24",
                           "none_res_standard_L24", "pre_res_standard_L2", "none_res_standard_L2"]
    for arm, candidates in tuned.items():
        assert [variants[c]["train.learning_rate"] for c in candidates] == [1e-3, 3e-3]
        rest = [{k: v for k, v in variants[c].items() if k != "train.learning_rate"}
                for c in candidates]
        assert rest[0] == rest[1]
        assert rest[0]["model.d_model"] == 16 and rest[0]["model.d_ff"] == 64
    assert variants["none_res_rezero_L24~learning_rate=0.001"]["model.branch_init"] == "rezero"
    assert variants["none_res_standard_L2~learning_rate=0.003"]["model.num_layers"] == 2


@pytest.mark.parametrize("name", STUDIES)
@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_each_study_builds_its_arms_as_registered(name, size):
    path = REPO / "experiments" / f"{name}.py"
    experiment = load_module(path)
    study = study_lib.load_study(path, size)
    s = experiment.SIZES[size]
    assert study.suite == name and study.seeds == (0, 1, 2)
    assert study.extend_grid.cap == experiment.GRID_CAP >= 1
    assert (study.plateau.first, study.plateau.step, study.plateau.cap) == (
        s["first"], s["step"], s["cap"])
    arms = experiment.arms(s["depth"])
    assert set(study.tuned) == {a.name for a in arms} | set(deep_arms.references(arms))
    for arm, candidates in study.tuned.items():
        assert len(candidates) == len(experiment.LEARNING_RATES) >= 3  # an interior is possible
        for candidate in candidates:
            config = study.config(candidate, 0)
            _, model = check_config(config)
            spec = next((a for a in arms if a.name == arm), None)
            depth = deep_arms.REFERENCE_DEPTH if spec is None else spec.depth
            architecture = arm.split("_standard_L")[0] if spec is None else spec.architecture
            overrides = deep_arms.ARCHITECTURES[architecture]
            assert model.num_layers == depth and model.d_model == s["width"]
            assert (model.norm, model.residual) == (Norm(overrides["model.norm"]),
                                                   overrides["model.residual"])
            assert model.branch_init is BranchInit("standard" if spec is None else spec.init)
            # the remedy is the initialization alone: no warm-up, no clipping, a constant rate
            assert (config.train.warmup_steps, config.train.grad_clip_norm,
                    config.train.schedule) == (0, 0.0, "constant")
            assert config.data.task == "sort" and config.data.seq_len == 8
    # every tuned arm has its flattened check, every reference is judged as one
    flat = {e.a for e in study.expectations if e.measure is Measure.LATE_GAIN}
    assert flat == set(study.tuned)
    assert all(e.kind is not Kind.FINDING for e in study.expectations
               if e.measure is Measure.LATE_GAIN or e.a.endswith("_L2"))


def _arms(name: str) -> list[Arm]:
    experiment = load_module(REPO / "experiments" / f"{name}.py")
    return experiment.arms(experiment.SIZES["default"]["depth"])


def test_the_rival_prediction_is_registered_for_the_remedied_no_norm_arms():
    for names in (PARTS, ARTICLE_PARTS):
        arms = [a for name in names for a in _arms(name)]
        outcome = {(a.architecture, a.init): a.outcome for a in arms}
        assert outcome[("none_res", "depth_scaled")] == TRAINS
        assert outcome[("none_res", "standard")] == COLLAPSES
        assert outcome[("pre_res", "standard")] == TRAINS
        assert any("rival" in load_module(REPO / "experiments" / f"{n}.py").__doc__
                   for n in names)  # where the no-norm arms are


SPLIT = {"depth_remedies": PARTS, "depth_article": ARTICLE_PARTS}  # as registered -> its parts


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> dict[str, Path]:
    """experiments/depth_remedies.py and depth_article.py as cbd11a8 registered them, beside
    today's configs."""
    return experiments_at(REGISTERED, list(SPLIT), tmp_path_factory.mktemp("registered"))


@pytest.mark.parametrize("name", list(SPLIT))
def test_the_parts_are_the_registered_study_split_with_nothing_moved(registered, name):
    """Every arm of the study as registered in exactly one part, each with its outcome and its
    kinds; the same budget, grid, thresholds, variants and expectations."""
    old, parts_names = load_module(registered[name]), SPLIT[name]
    whole = {a.name: a for a in old.arms(old.SIZES["default"]["depth"])}
    parts = [a for part in parts_names for a in _arms(part)]
    assert sorted(a.name for a in parts) == sorted(whole)
    assert all(a == whole[a.name] for a in parts)
    shared = load_module(REPO / "experiments" / f"_{name}.py")
    assert (shared.SIZES, shared.LEARNING_RATES, shared.GRID_FACTOR, shared.GRID_CAP,
            shared.THRESHOLDS) == (old.SIZES, old.LEARNING_RATES, old.GRID_FACTOR,
                                   old.GRID_CAP, old.THRESHOLDS)
    for part_name in parts_names:
        part = load_module(REPO / "experiments" / f"{part_name}.py")
        assert (part.SIZES, part.LEARNING_RATES, part.GRID_CAP) == (
            old.SIZES, old.LEARNING_RATES, old.GRID_CAP)
    for size in ("tiny", "default"):
        was = study_lib.load_study(registered[name], size)
        studies = [study_lib.load_study(REPO / "experiments" / f"{n}.py", size)
                   for n in parts_names]
        texts = [{e.text: e for e in s.expectations} for s in studies]
        assert sum(len(t) for t in texts) == len(was.expectations)  # none in two parts
        assert all(e == {e.text: e for e in was.expectations}[t]
                   for part in texts for t, e in part.items())
        assert {k: v for s in studies for k, v in s.variants.items()} == was.variants
        assert {s.published for s in studies} == {was.published}

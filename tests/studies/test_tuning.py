"""An arm at its own best setting (issue 50, item 2): candidates chosen per seed by training
loss, never by the metric an expectation judges; the arm's verdict reads the chosen runs."""
import math

import ml_collections
import pytest

from transformer_jax.config import ConfigError
from transformer_jax.studies import report, tuning
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import Comparison, Expectation, Study, Verdict

GRID = {"train.learning_rate": (1e-3, 3e-3)}
SLOW, FAST = "post~learning_rate=0.001", "post~learning_rate=0.003"


def _run(train_loss: float, accuracy: float, diverged: bool = False):
    curve = [(s, train_loss + (10 - s) * 0.1) for s in range(0, 11, 2)]  # falls to train_loss
    return {"status": {"state": "diverged" if diverged else "finished"},
            "curves": {"train/loss": curve, "eval/accuracy": [(5, 0.1), (10, accuracy)]}}


def _study(**fields) -> Study:
    variants = {"pre": {"model.norm": "pre"},
                **tuning.tuned_arm("post", {"model.norm": "post"}, GRID)}
    e = Expectation("pre beats post at its best", "eval/accuracy", "pre", Comparison.BETTER,
                    0.1, b="post")
    return Study(**{**dict(name="s", claim="c", published="p",
                           base=ml_collections.ConfigDict({"seed": 0, "data": {}}), variants=variants,
                           seeds=(0, 1, 2), metrics=("eval/accuracy",), expectations=(e,),
                           tuned={"post": (SLOW, FAST)}), **fields})


def test_the_candidates_are_the_grid():
    assert tuning.tuned_arm("post", {"model.norm": "post"}, GRID) == {
        SLOW: {"model.norm": "post", "train.learning_rate": 1e-3},
        FAST: {"model.norm": "post", "train.learning_rate": 3e-3}}


def test_the_choice_reads_the_training_loss_only():
    """FAST has the lower training loss on every seed and SLOW the higher eval accuracy: the
    choice is FAST. A selection by the judged metric (eval/accuracy) would pick SLOW."""
    runs = {("pre", s): _run(1.0, 0.9) for s in range(3)}
    runs.update({(SLOW, s): _run(2.0, 0.8) for s in range(3)})
    runs.update({(FAST, s): _run(1.5, 0.3) for s in range(3)})
    choices = tuning.choose({"post": (SLOW, FAST)}, (0, 1, 2), runs)
    assert choices == {"post": {0: FAST, 1: FAST, 2: FAST}}
    record = report.study_record(_study(), runs)
    row = record["expectations"][0]
    assert [v["value"] for v in row["values"]["post"]] == [0.3, 0.3, 0.3]
    assert row["verdict"] == Verdict.HOLDS.value  # 0.9 − 0.3 ≥ 0.1


def test_a_diverged_candidate_is_never_chosen_and_none_left_is_a_diverged_arm():
    runs = {("pre", s): _run(1.0, 0.9) for s in range(3)}
    runs.update({(SLOW, s): _run(2.0, 0.5) for s in range(3)})
    runs.update({(FAST, s): _run(0.1, 0.95, diverged=s == 0) for s in range(3)})
    runs[(SLOW, 1)] = _run(2.0, 0.5, diverged=True)
    runs[(FAST, 1)] = _run(0.1, 0.95, diverged=True)
    choices = tuning.choose({"post": (SLOW, FAST)}, (0, 1, 2), runs)
    assert choices["post"] == {0: SLOW, 1: None, 2: FAST}
    values = tuning.with_arms({SLOW: {0: 0.5, 1: math.nan, 2: 0.5},
                               FAST: {0: math.nan, 1: math.nan, 2: 0.95}}, choices)
    assert values["post"][0] == 0.5 and math.isnan(values["post"][1]) and values["post"][2] == 0.95


def test_the_page_shows_the_grid_each_choice_and_the_share():
    runs = {("pre", s): _run(1.0, 0.9) for s in range(3)}
    runs.update({(SLOW, s): _run(2.0 if s else 0.5, 0.8) for s in range(3)})
    runs.update({(FAST, s): _run(1.5, 0.3) for s in range(3)})
    record = report.study_record(_study(), runs)
    assert [c["variant"] for c in record["tuning"]["post"]["choices"]] == [SLOW, FAST, FAST]
    text = verdict_text.verdict_markdown(record)
    assert "## Tuned arms" in text and "train.learning_rate=0.001" in text
    assert f"{SLOW} 1/3, {FAST} 2/3" in text
    assert "## Tuned arms" not in verdict_text.verdict_markdown({**record, "tuning": None})


def test_a_tuned_arm_moves_the_fingerprint_and_is_checked():
    study = _study()
    assert _study(tuned={"post": (FAST, SLOW, "pre")}).fingerprint() != study.fingerprint()
    with pytest.raises(ConfigError, match="tuned arm 'post' needs two or more candidates"):
        _study(tuned={"post": (SLOW, "nope")})
    with pytest.raises(ConfigError, match="tuned arm 'pre' is also a variant"):
        _study(tuned={"pre": (SLOW, FAST)})


@pytest.mark.usefixtures("compilation_cache")
@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_a_sweep_trains_every_candidate_and_judges_the_arm(tmp_path):
    import dataclasses
    import json

    from tiny_study import tiny_study
    from transformer_jax.studies.run import sweep

    study = tiny_study(tmp_path / "data")
    candidates = tuning.tuned_arm("unscaled", {"model.attn_scale": False},
                                  {"train.learning_rate": (1e-3, 1e-2)})
    study = dataclasses.replace(
        study, variants={"scaled": study.variants["scaled"], **candidates},
        tuned={"unscaled": tuple(candidates)},
        expectations=(Expectation("scaled is not worse than unscaled at its best", "eval/loss",
                                  "scaled", Comparison.BETTER, -10.0, b="unscaled",
                                  higher_is_better=False),))
    root = tmp_path / "study"
    assert sweep.run_study(study, str(root))
    record = json.loads((root / "verdict.json").read_text())
    (choice,) = record["tuning"]["unscaled"]["choices"]
    assert choice["variant"] in candidates and math.isfinite(choice["loss"])
    assert record["expectations"][0]["values"]["unscaled"][0]["value"] is not None
    assert all((root / c / "seed_0").is_dir() for c in candidates)
    assert "## Tuned arms" in (root / "verdict.md").read_text()


def test_a_diverged_run_of_an_arm_is_counted_no_lower_than_its_candidates_chance():
    """worst= on an expectation naming a tuned arm is checked against chance accuracy on the
    arm's candidates (an arm is no variant: it has no config of its own)."""
    from pathlib import Path

    from transformer_jax.studies.study import chance_accuracy, load_config

    base = load_config(Path(__file__).resolve().parents[2] / "configs/synthetic.py",
                       "tiny,task=sort")
    chance = chance_accuracy(base)
    judged = lambda worst: _study(base=base, expectations=(Expectation(
        "pre beats post", "eval/accuracy", "pre", Comparison.BETTER, 0.1, b="post",
        worst=worst),)).refuse_unjudgeable()
    assert judged(chance).tuned == {"post": (SLOW, FAST)}
    with pytest.raises(ConfigError, match="counts a diverged run below chance accuracy"):
        judged(0.0)

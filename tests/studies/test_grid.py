"""A grid whose best lies inside it (issue 64, item 2): a tuned arm's grid grows by the next
point out while a seed's choice sits at an edge, up to a cap; the record says which grid was
reached and flags a choice the cap left at an edge; the declared design keeps its fingerprint."""
import json
import math
from pathlib import Path

import ml_collections
import pytest

import fake_trainer

from transformer_jax.config import ConfigError
from transformer_jax.studies import grid, tuning
from transformer_jax.studies.study import Comparison, Expectation, Study

GRID = {"train.learning_rate": (1e-3, 3e-3)}
SLOW, FAST = "post~learning_rate=0.001", "post~learning_rate=0.003"
FASTER, SLOWER = "post~learning_rate=0.009", "post~learning_rate=0.000333333"


def _run(train_loss: float, diverged: bool = False):
    curve = [(s, train_loss + (10 - s) * 0.1) for s in range(0, 11, 2)]  # falls to train_loss
    return {"status": {"state": "diverged" if diverged else "finished"},
            "curves": {"train/loss": curve, "eval/accuracy": [(10, 0.5)]}}


def _study(extend=grid.GridExtension(cap=1), **fields) -> Study:
    variants = {"pre": {"model.norm": "pre"},
                **tuning.tuned_arm("post", {"model.norm": "post"}, GRID)}
    e = Expectation("pre beats post at its best", "eval/accuracy", "pre", Comparison.BETTER,
                    0.1, b="post")
    return Study(**{**dict(name="s", claim="c", published="p",
                           base=ml_collections.ConfigDict({"seed": 0, "data": {},
                                                           "train": {"learning_rate": 1e-3}}),
                           variants=variants, seeds=(0, 1), metrics=("eval/accuracy",),
                           expectations=(e,), tuned={"post": (SLOW, FAST)},
                           extend_grid=extend), **fields})


def _runs(study: Study, losses: dict[str, tuple[float, float]]):
    """Every run of `study`; candidate -> its training loss on seeds 0 and 1 (others: 9)."""
    return {(v, s): _run(losses.get(v, (9.0, 9.0))[s]) for v, s in study.runs()}


def test_a_choice_at_the_top_adds_the_next_point_up_and_at_the_bottom_the_next_down():
    study = _study()
    decided = grid.stage(study, _runs(study, {FAST: (1.0, 9.5), SLOW: (2.0, 1.0)}))["post"]
    assert decided["grid"] == [1e-3, 3e-3] and decided["chosen"] == {"0": 3e-3, "1": 1e-3}
    assert decided["at_edge"] == {"low": [1], "high": [0]}
    assert decided["next"] == [SLOWER, FASTER]  # 1e-3 ÷ 3 and 3e-3 × 3, as their names say


def test_the_grown_study_trains_the_new_points_with_the_arms_overrides_and_keeps_its_design():
    study = _study()
    grown = grid.including(study, [FASTER, SLOWER])
    assert grown.tuned["post"] == (SLOWER, SLOW, FAST, FASTER)  # in the field's order
    assert grown.variants[FASTER] == {"model.norm": "post", "train.learning_rate": 9e-3}
    assert grown.variants[SLOWER]["train.learning_rate"] == 0.000333333
    assert grown.fingerprint() == study.fingerprint()
    assert grown.training_fingerprint() == study.training_fingerprint()
    assert grid.including(grown, [FAST, None]) is grown  # nothing new: the same study
    with pytest.raises(ConfigError, match=r"^'post~lr=0\.01' is neither a variant of study 's'"):
        grid.including(study, ["post~lr=0.01"])


def test_an_interior_choice_adds_nothing():
    grown = grid.including(_study(), [FASTER])
    decided = grid.stage(grown, _runs(grown, {FAST: (1.0, 1.0)}))["post"]
    assert decided["next"] == [] and decided["at_edge"] == {} and decided["capped"] == []
    assert grid.record(grown, _runs(grown, {FAST: (1.0, 1.0)}))["post"]["interior"] is True


def test_the_cap_stops_the_growth_and_the_record_flags_the_edge_it_left():
    grown = grid.including(_study(), [FASTER])  # cap=1: one point above the declared grid
    runs = _runs(grown, {FASTER: (1.0, 1.0)})
    decided = grid.stage(grown, runs)["post"]
    assert decided["next"] == [] and decided["capped"] == ["high"]
    found = grid.record(grown, runs)["post"]
    assert found["declared"] == [1e-3, 3e-3] and found["reached"] == [1e-3, 3e-3, 9e-3]
    assert found["interior"] is False and found["cap"] == 1
    assert found["left_at_edge"] == [{"seed": 0, "edge": "high", "value": 9e-3},
                                     {"seed": 1, "edge": "high", "value": 9e-3}]
    wider = grid.including(_study(extend=grid.GridExtension(cap=2)), [FASTER])
    assert grid.stage(wider, _runs(wider, {FASTER: (1.0, 1.0)}))["post"]["next"] == [
        "post~learning_rate=0.027"]


def test_a_seed_whose_every_candidate_diverged_is_at_no_edge():
    study = _study()
    runs = _runs(study, {FAST: (9.0, 1.0), SLOW: (9.5, 2.0)})
    for v in (SLOW, FAST):
        runs[(v, 0)] = _run(1.0, diverged=True)
    decided = grid.stage(study, runs)["post"]
    assert decided["chosen"]["0"] is None and decided["at_edge"] == {"high": [1]}


def test_the_grid_reached_is_read_back_from_the_run_directories(tmp_path):
    study = _study()
    for name in (FASTER, "post~learning_rate=bad", "elsewhere"):
        (tmp_path / name / "seed_0").mkdir(parents=True)
    assert grid.reached(study, tmp_path).tuned["post"] == (SLOW, FAST, FASTER)
    assert grid.reached(study, tmp_path / "absent") is study


def test_the_extension_is_in_the_design_only_when_declared():
    """Existing studies declare none: their designs (and the committed fingerprints, checked
    by test_preregistration.py) have no extend_grid key."""
    without = _study(extend=None)
    assert "extend_grid" not in without.design()
    assert _study().design()["extend_grid"] == {"field": "train.learning_rate", "factor": 3.0,
                                                "cap": 1}
    assert _study().fingerprint() != without.fingerprint()
    assert _study(extend=grid.GridExtension(cap=2)).fingerprint() != _study().fingerprint()


@pytest.mark.parametrize("fields, fragment", [
    (dict(field="learning_rate"), "must be a dotted config field"),
    (dict(factor=1.0), "factor=1.0 must be a number above 1"),
    (dict(factor=math.inf), "factor=inf must be a number above 1"),
    (dict(cap=0), "cap=0 must be a positive integer"),
])
def test_a_bad_extension_is_refused_in_one_line(fields, fragment):
    with pytest.raises(ConfigError, match=rf"^extend_grid [^\n]*{fragment}[^\n]*$"):
        grid.GridExtension(**fields)


def test_an_arm_that_does_not_vary_the_field_alone_is_refused():
    variants = {"pre": {"model.norm": "pre"},
                "post~a": {"model.norm": "post", "train.learning_rate": 1e-3},
                "post~b": {"model.norm": "rms", "train.learning_rate": 3e-3}}
    with pytest.raises(ConfigError, match=r"tuned arm 'post'.s candidates are not one distinct"):
        grid.check(_study(variants=variants, tuned={"post": ("post~a", "post~b")}))
    with pytest.raises(ConfigError, match="extend_grid needs a tuned arm"):
        pre_only = Expectation("pre learns", "eval/accuracy", "pre", Comparison.AT_LEAST, 0.1)
        grid.check(_study(tuned={}, expectations=(pre_only,)))
    grid.check(_study())  # the declared grid: fine


@pytest.mark.slow  # a real sweep: it asks git for its provenance
@pytest.mark.usefixtures("compilation_cache")
def test_a_sweep_grows_the_grid_until_the_cap_and_records_the_grid_reached(tmp_path):
    """A two-point grid has no interior: the first stage's choice is at an edge for certain, so
    the sweep trains the next point out; with cap=1 it stops by the second stage at the latest.
    A second sweep over the ended runs reads the same grid back and trains nothing."""
    from tiny_study import tiny_study_tuned
    from transformer_jax.studies.run import sweep

    study, root = tiny_study_tuned(tmp_path / "data"), tmp_path / "study"
    assert sweep.run_study(study, str(root))
    record = json.loads((root / "verdict.json").read_text())
    reached = record["tuning"]["unscaled"]["grid"]
    assert reached["declared"] == [1e-3, 1e-2] and 3 <= len(reached["reached"]) <= 4
    assert "Grid of train.learning_rate: declared 0.001, 0.01, reached" in \
        (root / "verdict.md").read_text()  # rendered from the record, not added after it
    grown = grid.reached(study, root)
    assert len(grown.tuned["unscaled"]) == len(reached["reached"])
    assert set(record["tuning"]["unscaled"]["candidates"]) == set(grown.tuned["unscaled"])
    assert all((root / c / "seed_0" / "config.json").is_file() for c in grown.tuned["unscaled"])
    (choice,) = record["tuning"]["unscaled"]["choices"]
    value = grown.variants[choice["variant"]]["train.learning_rate"]
    at_edge = value in (min(reached["reached"]), max(reached["reached"]))
    assert reached["interior"] is not at_edge
    assert bool(reached["left_at_edge"]) is at_edge
    assert json.loads((root / "preregistration.json").read_text())["fingerprint"] == \
        study.fingerprint()
    before = sorted(p.name for p in root.iterdir())
    assert sweep.run_study(study, str(root))
    assert sorted(p.name for p in root.iterdir()) == before
    assert json.loads((root / "verdict.json").read_text())["tuning"]["unscaled"]["grid"] == reached


EXPERIMENT_FILE = """import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from tiny_study import tiny_study_tuned

def get_study(size):
    return tiny_study_tuned(Path({data!r}))
"""


@pytest.mark.usefixtures("compilation_cache")
def test_a_worker_trains_a_candidate_its_experiment_file_does_not_declare(tmp_path):
    """--jobs=N: a worker loads the declared study from the experiment file; a task for a point
    the grid extension added names a candidate that study lacks, which the worker adds."""
    from transformer_jax.studies.run import jobs

    tests = Path(__file__).resolve().parents[1]
    experiment = tmp_path / "tuned.py"
    experiment.write_text(EXPERIMENT_FILE.format(tests=str(tests), data=str(tmp_path / "data")))
    added = "unscaled~learning_rate=0.03"
    task = jobs.Task("tiny", str(tmp_path / "study"), str(experiment), "tiny", added, (0,))
    (status,) = jobs._execute_in_worker(task)
    assert status["state"] == "finished"
    saved = json.loads((tmp_path / "study" / added / "seed_0" / "config.json").read_text())
    assert saved["train"]["learning_rate"] == 0.03 and saved["model"]["attn_scale"] is False


BEST = 9e-3  # the learning rate at which the fake runs' training loss is lowest


def _fake_run(study: Study, variant: str, step: int) -> dict:
    """A fake run's curves at `step`: training loss lowest at BEST; 'pre''s accuracy climbs
    until step 15, every other run's is flat."""
    loss = 1 + abs(math.log(study.variants[variant].get("train.learning_rate", 1e-3) / BEST))
    climb = (lambda t: min(t, 15) / 15) if variant == "pre" else (lambda t: 0.5)
    points = range(2, step + 1, 2)
    return {"status": {"state": "finished", "step": step},
            "curves": {"eval/accuracy": [(t, climb(t)) for t in points],
                       "train/loss": [(t, loss) for t in points]}}


def test_with_a_plateau_the_grid_settles_at_each_budget_and_every_run_trains_on(tmp_path,
                                                                                monkeypatch):
    """Stage by stage: at 10 steps 3e-3 is the top and chosen, so 9e-3 trains; it is chosen
    and the top, so 2.7e-2 trains; 9e-3 is then interior. 'pre' still climbs, so every run,
    the added ones too, trains on to 20, where the grid is settled and the arms flat."""
    from transformer_jax.studies.plateau import Plateau
    from transformer_jax.studies.run import sweep
    from transformer_jax.studies.study import load_config

    fake = fake_trainer.FakeTrainer(monkeypatch, _fake_run)
    base = load_config(Path(__file__).resolve().parents[2] / "configs/synthetic.py", "tiny")
    base.unlock()
    base.train.update(num_steps=10, schedule="constant")
    study = _study(extend=grid.GridExtension(cap=2), base=base,
                   plateau=Plateau("eval/accuracy", amount=0.02, first=10, step=10, cap=40))
    root = tmp_path / "s"
    assert sweep.run_study(study, str(root))
    grown = grid.reached(study, root)
    assert [grown.variants[c]["train.learning_rate"] for c in grown.tuned["post"]] == [
        1e-3, 3e-3, 9e-3, 2.7e-2]
    assert [(v, a, b) for v, a, b in fake.trained if v in (FASTER, "post~learning_rate=0.027")
            ] == [(FASTER, 0, 10)] * 2 + [("post~learning_rate=0.027", 0, 10)] * 2 + [
        (FASTER, 10, 20)] * 2 + [("post~learning_rate=0.027", 10, 20)] * 2
    assert {b for _, _, b in fake.trained} == {10, 20}
    assert {(v, b) for v, _, b in fake.trained if b == 20} == {(v, 20) for v in grown.variants}
    found = grid.record(grown, fake.collect(grown, root))["post"]
    assert found["interior"] and found["left_at_edge"] == []


def test_an_integer_field_grows_by_whole_numbers_and_stops_below_one():
    variants = {"pre": {"model.norm": "pre"},
                **tuning.tuned_arm("post", {"model.norm": "post"}, {"train.batch_size": (2, 8)})}
    study = _study(variants=variants, tuned={"post": tuple(variants)[1:]},
                   extend=grid.GridExtension("train.batch_size", cap=3))
    small, large = "post~batch_size=2", "post~batch_size=8"
    decided = grid.stage(study, _runs(study, {small: (1.0, 2.0), large: (2.0, 1.0)}))["post"]
    assert decided["next"] == ["post~batch_size=1", "post~batch_size=24"]  # round(2/3), 8·3
    grown = grid.including(study, decided["next"])
    assert grown.variants["post~batch_size=24"]["train.batch_size"] == 24
    assert isinstance(grown.variants["post~batch_size=1"]["train.batch_size"], int)
    at_one = grid.stage(grown, _runs(grown, {"post~batch_size=1": (1.0, 1.0)}))["post"]
    assert at_one["next"] == [] and at_one["capped"] == ["low"]  # nothing whole below 1


def test_the_page_shows_the_grid_reached_and_flags_an_optimum_the_cap_left_at_an_edge():
    from transformer_jax.studies.render import verdict_text
    grown = {"field": "train.learning_rate", "factor": 3.0, "cap": 1, "declared": [1e-3, 3e-3],
             "reached": [3e-4, 1e-3, 3e-3, 9e-3], "interior": False,
             "left_at_edge": [{"seed": 2, "edge": "high", "value": 9e-3}]}
    lines = "\n".join(verdict_text.grid_lines(grown))
    assert "declared 0.001, 0.003, reached 0.0003, 0.001, 0.003, 0.009" in lines
    assert "**Flag: the cap left seed 2's optimum at the high edge (0.009)" in lines
    assert "inside" not in lines
    inside = verdict_text.grid_lines({**grown, "interior": True, "left_at_edge": []})
    assert "Every seed's choice lies inside the grid reached." in inside and "Flag" not in \
        "\n".join(inside)
    record = {"tuning": {"arm": {"selected_by": "train/loss", "candidates": {"a": {}},
                                 "choices": [{"seed": 0, "variant": "a", "loss": 1.0}],
                                 "grid": grown}}}
    assert "**Flag:" in "\n".join(verdict_text.tuning_lines(record))

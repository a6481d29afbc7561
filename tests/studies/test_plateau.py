"""A budget that runs to the plateau (studies/plateau.py): the rule on constructed curves, and
the sweep's stages with a fake trainer (no JAX): an arm still climbing extends every run, the
cap is respected, a resumed sweep trains no finished stage again, and only the judged arms
count. (That an extended run is the run trained straight: tests/train/test_extend.py.)"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
from pathlib import Path

import pytest

import fake_trainer
from transformer_jax.config import ConfigError
from transformer_jax.studies import report, tuning
from transformer_jax.studies.plateau import Plateau, stage
from transformer_jax.studies.run import jobs as jobs_lib
from transformer_jax.studies.run import sweep
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import Comparison, Expectation, Study, load_config
from transformer_jax.train import workdir as workdir_lib

REPO = Path(__file__).resolve().parents[2]
ACC = "eval/accuracy"
# each variant's accuracy at a step: 'slow' climbs until step 30, then is flat; 'fast' is flat
# from the start; 'unjudged' climbs for ever (no expectation names it)
CURVES = {"slow": lambda s: min(s, 30) / 30, "fast": lambda s: 0.5,
          "unjudged": lambda s: s / 1000}


def _study(cap: int = 50, **changes) -> Study:
    base = load_config(REPO / "configs/synthetic.py", "tiny,task=sort")
    base.unlock()
    base.train.update(num_steps=10, schedule="constant", eval_every=2)
    return dataclasses.replace(Study(
        name="plateau", claim="slow catches up", published="none", base=base,
        variants={v: {"train.learning_rate": 1e-3 * (i + 1)} for i, v in enumerate(CURVES)},
        seeds=(0, 1), metrics=(ACC,),
        expectations=(Expectation("slow within 10 % of fast", ACC, "slow", Comparison.WITHIN,
                                  0.1, b="fast"),),
        plateau=Plateau(ACC, amount=0.02, first=10, step=10, cap=cap)), **changes)


def _run(variant: str, step: int, loss: float = 1.0) -> dict:
    curve = [(s, CURVES[variant](s)) for s in range(2, step + 1, 2)]
    return {"status": {"state": "finished", "step": step},
            "curves": {ACC: curve, "train/loss": [(s, loss) for s, _ in curve]}}


def _runs(study: Study, step: int) -> dict:
    return {(v, s): _run(v, step) for v, s in study.runs()}


def test_an_arm_still_climbing_extends_and_the_cap_stops_it():
    p = Plateau(ACC, amount=0.02, first=10, step=10, cap=25)
    assert p.budgets() == [10, 20, 25]
    climbing = stage(p, 10, {"slow": {0: 0.07, 1: 0.05}, "fast": {0: 0.0, 1: 0.0}})
    assert (climbing["decision"], climbing["next"]) == ("extend", 20)
    assert not climbing["arms"]["slow"]["flattened"] and climbing["arms"]["fast"]["flattened"]
    assert stage(p, 20, {"slow": {0: 0.03, 1: 0.03}})["next"] == 25  # the cap, not 30
    capped = stage(p, 25, {"slow": {0: 0.03, 1: 0.03}})
    assert (capped["decision"], capped["next"]) == ("cap", None)
    flat = stage(p, 20, {"slow": {0: 0.03, 1: 0.0}, "gone": {0: float("nan")}})
    assert flat["decision"] == "flattened"  # mean 0.015; every run of 'gone' diverged


def test_the_rule_reads_only_the_judged_arms_and_a_tuned_arms_chosen_runs():
    study = _study()
    gains = report.arm_late_gains(study, _runs(study, 10))
    assert sorted(gains) == ["fast", "slow"]  # 'unjudged' climbs, and is not read
    assert gains["slow"][0] == pytest.approx(2 / 30)
    # a tuned arm: the rule reads each seed's chosen candidate (lowest training loss), not both
    arm = tuning.tuned_arm("arm", {}, {"train.learning_rate": (1e-3, 3e-3)})
    low, high = arm
    tuned = _study(variants={**arm, "fast": {}}, tuned={"arm": tuple(arm)}, expectations=(
        Expectation("arm within 10 % of fast", ACC, "arm", Comparison.WITHIN, 0.1, b="fast"),))
    runs = {(low, s): {**_run("fast", 10, loss=0.5)} for s in (0, 1)}
    runs |= {(high, s): _run("slow", 10, loss=2.0) for s in (0, 1)}
    runs |= {("fast", s): _run("fast", 10) for s in (0, 1)}
    assert report.arm_late_gains(tuned, runs)["arm"] == {0: 0.0, 1: 0.0}


def test_a_plateau_study_is_refused_unless_it_starts_at_first_at_a_constant_rate():
    study = _study()
    base = study.base.copy_and_resolve_references()
    base.train.schedule = "cosine"
    with pytest.raises(ConfigError, match="train.schedule='constant'; the base has 10 and 'cosine'"):
        _study(base=base)
    with pytest.raises(ConfigError, match="variants override them: slow: train.num_steps"):
        _study(variants={**study.variants, "slow": {"train.num_steps": 5}})
    with pytest.raises(ConfigError, match="plateau metric 'eval/loss' is judged by no expectation"):
        _study(plateau=dataclasses.replace(study.plateau, metric="eval/loss"))
    with pytest.raises(ConfigError, match="cap=5 must be at least first=10"):
        Plateau(ACC, 0.02, first=10, step=5, cap=5)
    assert study.fingerprint() != _study(cap=60).fingerprint()  # the budget is the design's
    assert study.config("slow", 0, 30).train.num_steps == 30


def FakeTrainer(monkeypatch) -> fake_trainer.FakeTrainer:
    """jobs.execute without JAX: each run 'trains' to its task's steps; CURVES are its curves."""
    return fake_trainer.FakeTrainer(monkeypatch, lambda study, v, step: _run(v, step))


def test_the_sweep_extends_every_run_until_the_judged_arms_flatten(tmp_path, monkeypatch):
    fake = FakeTrainer(monkeypatch)
    study = _study()
    assert sweep.run_study(study, str(tmp_path / "s"))
    # 'slow' gains 2/30 over 8..10, 4/30 over 16..20, 6/30 over 24..30, 0 over 32..40
    assert sorted({(a, b) for _, a, b in fake.trained}) == [(0, 10), (10, 20), (20, 30), (30, 40)]
    assert {v for v, a, b in fake.trained if b == 40} == set(CURVES)  # every run ends at 40
    assert fake.published == ["plateau"]
    stages = report.plateau_stages(study, fake.collect(study, tmp_path / "s"))
    assert [(s["budget"], s["decision"]) for s in stages] == [
        (10, "extend"), (20, "extend"), (30, "extend"), (40, "flattened")]


def test_the_cap_is_respected(tmp_path, monkeypatch):
    fake = FakeTrainer(monkeypatch)
    assert sweep.run_study(_study(cap=25), str(tmp_path / "s"))
    assert max(b for _, _, b in fake.trained) == 25 and fake.published == ["plateau"]


def test_a_resumed_sweep_trains_no_finished_stage_again(tmp_path, monkeypatch):
    fake = FakeTrainer(monkeypatch)
    study, root = _study(), tmp_path / "s"
    workdir_lib.prepare(str(root), {"study": study.name, "runs": [list(r) for r in study.runs()]})
    for v, s in study.runs():  # stopped after the first stage: every run at 10; 'slow' gained
        fake.execute(jobs_lib.Task("plateau", str(root), None, "tiny", v, (s,), 0, 10), study)
    workdir_lib.write_json_atomic(root / "fast" / "seed_0" / workdir_lib.CONFIG_FILE,
                                  {"train": {"num_steps": 20}})  # the next stage had begun
    fake.trained.clear()
    assert sweep.run_study(study, str(root))
    # each run once per later stage, each from where it stood: nothing from step 0 again
    assert sorted({(a, b) for _, a, b in fake.trained}) == [(10, 20), (20, 30), (30, 40)]
    assert len(fake.trained) == 3 * len(study.runs())
    fake.trained.clear()
    assert sweep.run_study(study, str(root))  # all ended: decided again, nothing trained
    assert fake.trained == [] and fake.published == ["plateau", "plateau"]


def test_the_page_shows_the_budget_reached_each_arms_late_gain_and_what_stopped_it():
    study = _study(cap=25)
    record = report.study_record(study, _runs(study, 25))
    assert {k: record["plateau"][k] for k in ("budget", "stopped_by", "cap")} == {
        "budget": 25, "stopped_by": "cap", "cap": 25}
    assert list(record["plateau"]["arms"]) == ["slow", "fast"]
    page = verdict_text.verdict_markdown(record)
    assert "**Budget reached: 25 steps; the cap stopped it: an arm was still gaining.**" in page
    assert "| slow | +0.06667 (still gaining) | +0.1333 (still gaining) | +0.2 (still gaining) |" in page
    from transformer_jax.studies.render import pages  # the study's page: the same section
    entry = pages.Entry.of(study, pages.StudyFiles("plateau", Path("."), pages.Layout.RUN))
    shown = pages.render_page(entry, record, "", None)
    assert shown.index("## Budget: to the plateau") < shown.index("## Final metrics")
    assert "**Budget reached: 25 steps; the cap stopped it" in shown


def test_a_plateau_study_shares_no_run_with_another_study(tmp_path):
    """Two studies with identical runs: a plateau study's are its own (it extends them, which
    must not move the other's); within the study identical variants still train once."""
    twin = {"slow": {"train.learning_rate": 1e-3}, "same": {"train.learning_rate": 1e-3},
            "fast": {"train.learning_rate": 2e-3}}
    first, second = (_study(name=n, variants=twin) for n in ("one", "two"))
    found, _ = sweep.survey([(first, str(tmp_path / "one"), None),
                             (second, str(tmp_path / "two"), None)])
    assert [sorted(f.shared) for f in found] == [[("same", 0), ("same", 1)]] * 2


def test_a_run_that_diverged_at_an_earlier_stage_stays_where_it_stopped(tmp_path):
    """An extension trains a variant's live seeds on; one that diverged is not extended (the
    trainer refuses to extend a diverged run) and keeps its status."""
    for seed, state in ((0, "finished"), (1, "diverged")):
        (tmp_path / "v" / f"seed_{seed}").mkdir(parents=True)
        workdir_lib.write_status(tmp_path / "v" / f"seed_{seed}", state, 10 if seed == 0 else 4)
    task = jobs_lib.Task("s", str(tmp_path), None, "tiny", "v", (0, 1), 0, 20)
    assert {s: st["step"] for s, st in jobs_lib.diverged_runs(task).items()} == {1: 4}
    assert jobs_lib.diverged_runs(dataclasses.replace(task, steps=None)) == {}


def _fixed_record(steps, late):
    """A record of a study without a plateau budget: one judged metric, two variants."""
    variants = [{"variant": name, "late_change": {"eval/accuracy": change, "eval/loss": None}}
                for name, change in late.items()]
    return {"budget": {"steps": steps},
            "summary": {"judged_metrics": ["eval/accuracy"], "variants": variants}}


def test_a_fixed_budget_says_so_and_shows_each_variants_late_change():
    record = _fixed_record([9, 250], {
        "a": {"change": 0.0421, "start": 200, "end": 250}, "b": None})
    lines = verdict_text.plateau_lines(record)
    assert lines[0] == verdict_text.FIXED_BUDGET_TITLE
    assert "up to 250 steps" in lines[2] and "not run to the plateau" in lines[2]
    assert "| a | +0.0421 (200→250) |" in lines and "| b | — |" in lines
    assert "| variant | eval/accuracy: late change |" in lines  # the judged metric only


def test_nothing_trained_or_measured_has_no_budget_section():
    assert verdict_text.plateau_lines(_fixed_record([0], {"a": None})) == []  # evaluation-only
    assert verdict_text.plateau_lines(_fixed_record([300], {"a": None, "b": None})) == []


class _InlinePool:
    """jobs._Pool without processes: a task runs as it is submitted, so the order of
    FakeTrainer.trained is the order in which the sweep started its tasks."""

    def __init__(self, jobs, terminal_level):
        self.stopping = False

    def __enter__(self):
        return self

    def __exit__(self, *error):
        return None

    def submit(self, fn, task):
        future = cf.Future()
        future.set_result(fn(task))
        return future

    def stop(self, signal_workers):
        self.stopping = True


def test_a_next_stage_joins_the_running_pool_before_other_studies_finish(tmp_path, monkeypatch):
    """With workers, a plateau study's next stage starts as soon as it is decided, ahead of
    another study's runs still waiting: no worker idles at a stage's end (issue 69)."""
    fake = FakeTrainer(monkeypatch)
    staged = _study()
    plain = _study(name="plain", plateau=None, expectations=(),
                   variants={f"plain_{i}": {"train.learning_rate": 1e-3 * i} for i in (1, 2, 3)})
    studies = {s.name: s for s in (staged, plain)}
    monkeypatch.setattr(jobs_lib, "_Pool", _InlinePool)
    monkeypatch.setattr(jobs_lib, "_execute_in_worker",
                        lambda task: fake.execute(task, studies[task.study]))
    entries = [(s, str(tmp_path / s.name), f"{s.name}.py") for s in (plain, staged)]
    assert sweep.run_studies(entries, (0, 1), jobs=2, size="tiny") == {"plain": True,
                                                                      "plateau": True}
    order = [(v, b) for v, _, b in fake.trained]
    last_plain = max(i for i, (v, _) in enumerate(order) if v in plain.variants)
    assert order.index(("slow", 20)) < last_plain  # the next stage began before plain ended
    assert sorted({(a, b) for _, a, b in fake.trained if b > 10}) == [(10, 20), (20, 30),
                                                                       (30, 40)]

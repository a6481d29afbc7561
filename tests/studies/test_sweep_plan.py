"""The sweep's plan (`studies/run/plan.py`) and its bookkeeping of which report is ready
(`studies/run/schedule.py: Readiness`), checked without training anything: which tasks run, which
runs are shared, which tasks each study's report waits for, and which studies are trained."""
from __future__ import annotations

import dataclasses
import io

from transformer_jax.studies.run import plan as plan_lib
from transformer_jax.studies.run import sweep
from transformer_jax.studies.run import schedule, terminal
from transformer_jax.studies.run.schedule import Readiness
from transformer_jax.train import workdir as workdir_lib
from tiny_study import tiny_study, tiny_study_sharing


def _two_studies(tmp_path):
    """tiny (scaled, unscaled; with probes) and tiny_too, whose 'same_as_scaled' is tiny's
    'scaled'."""
    return (tiny_study(tmp_path / "data", probes=lambda root: "probe table"),
            tiny_study_sharing(tmp_path / "data"))


def _survey(tmp_path, studies):
    return sweep.survey([(s, str(tmp_path / "w" / s.name), f"{s.name}.py") for s in studies])


def _finish(found: plan_lib.Found, variant: str, seed: int = 0) -> None:
    run = found.root / variant / f"seed_{seed}"
    run.mkdir(parents=True, exist_ok=True)
    workdir_lib.write_status(run, workdir_lib.FINISHED, 6)


def _labels(plan: plan_lib.Plan) -> list[str]:
    return [t.label for t in plan.tasks]


def test_a_fresh_sweep_trains_every_run_once_and_a_linked_study_waits_for_the_owner(tmp_path):
    found, linked = _survey(tmp_path, _two_studies(tmp_path))
    plan = plan_lib.plan(found, linked, (0, 1), jobs=1, size="tiny")
    assert _labels(plan) == ["tiny/scaled", "tiny/unscaled", "tiny_too/longer"]  # no probes task
    assert plan.shared == {"tiny": frozenset(), "tiny_too": {("same_as_scaled", 0)}}
    assert (found[1].root / "same_as_scaled" / "seed_0").is_symlink()
    assert plan.waits == {"tiny": {("tiny", "scaled"), ("tiny", "unscaled")},
                          "tiny_too": {("tiny_too", "longer"), ("tiny", "scaled")}}
    assert plan.trains == {"tiny", "tiny_too"}
    assert [(v.variant, v.what) for v in plan.variants["tiny_too"]] == [
        ("same_as_scaled", plan_lib.SHARED), ("longer", plan_lib.TRAIN)]
    assert all(t.experiment == f"{t.study}.py" and t.size == "tiny" for t in plan.tasks)


def test_finished_runs_are_not_planned_and_a_rerun_over_them_trains_no_study(tmp_path):
    studies = _two_studies(tmp_path)
    found, _ = _survey(tmp_path, studies)
    _finish(found[0], "scaled")  # which tiny_too/same_as_scaled links to
    found, linked = _survey(tmp_path, studies)  # read again, as a rerun does
    plan = plan_lib.plan(found, linked, (0, 1), jobs=1, size="tiny")
    assert _labels(plan) == ["tiny/unscaled", "tiny_too/longer"]
    assert plan.waits["tiny_too"] == {("tiny_too", "longer")}  # no longer waits for tiny
    assert plan.trains == {"tiny", "tiny_too"}
    _finish(found[0], "unscaled")
    _finish(found[1], "longer")
    found, linked = _survey(tmp_path, studies)
    # with workers the probes are a task of their own: the report waits for it, yet it trains
    # nothing, so neither study's provenance may be rewritten
    plan = plan_lib.plan(found, linked, (0, 1), jobs=2, size="tiny")
    assert _labels(plan) == ["tiny/probes"]
    assert plan.waits == {"tiny": {("tiny", None)}, "tiny_too": frozenset()}
    assert plan.trains == frozenset()
    assert {v.what for vs in plan.variants.values() for v in vs} == {plan_lib.ENDED,
                                                                     plan_lib.SHARED}


def test_a_shard_plans_only_its_runs_and_only_shard_zero_probes(tmp_path):
    first, _ = _two_studies(tmp_path)
    found, linked = _survey(tmp_path, [dataclasses.replace(first, seeds=(0, 1))])
    zero = plan_lib.plan(found, linked, (0, 2), jobs=2, size="tiny")
    one = plan_lib.plan(found, linked, (1, 2), jobs=2, size="tiny")
    # runs in order: scaled/0, scaled/1, unscaled/0, unscaled/1; every 2nd from i
    assert [(t.label, t.seeds) for t in zero.tasks] == [
        ("tiny/scaled", (0,)), ("tiny/unscaled", (0,)), ("tiny/probes", ())]
    assert [(t.label, t.seeds) for t in one.tasks] == [
        ("tiny/scaled", (1,)), ("tiny/unscaled", (1,))]


def test_two_identical_variants_of_one_study_wait_for_one_task(tmp_path):
    study = tiny_study(tmp_path / "data")
    twins = dataclasses.replace(study, variants={**study.variants,
                                                 "scaled_again": {"model.attn_scale": True}})
    found, linked = _survey(tmp_path, [twins])
    plan = plan_lib.plan(found, linked, (0, 1), jobs=1, size="tiny")
    assert _labels(plan) == ["tiny/scaled", "tiny/unscaled"]
    assert plan.waits == {"tiny": {("tiny", "scaled"), ("tiny", "unscaled")}}


def test_readiness_reports_a_study_once_when_the_last_task_it_waits_for_ends():
    readiness = Readiness({"a": {("a", "v"), ("a", "w")}, "b": {("a", "v")}, "c": set()})
    assert readiness.ready_now() == ["c"]
    assert readiness.task_ended(("a", "w")) == []
    assert readiness.task_ended(("a", "v")) == ["a", "b"]
    assert readiness.task_ended(("a", "v")) == []  # ended twice: reported once


def test_a_preempted_task_stops_the_pool_and_its_studies_stay_unreported(tmp_path):
    """The job pool's callback: a preempted run returns False (start no further task), and the
    studies waiting for that task neither report nor count it as ended."""
    found, linked = _survey(tmp_path, _two_studies(tmp_path))
    plan = plan_lib.plan(found, linked, (0, 1), jobs=1, size="tiny")
    out = io.StringIO()
    run = schedule.Sweep(plan, found, "tiny", (0, 1), terminal.JobProgress(out=out, bar=False))
    run.announce()
    scaled = plan.tasks[0]
    assert not run.done(scaled, [{"state": workdir_lib.PREEMPTED, "step": 3}])
    # its progress line all the same (tiny_too/same_as_scaled, shared, counts as done)
    assert "[2/4] tiny/scaled" in out.getvalue() and "preempted at step 3" in out.getvalue()
    assert ("tiny", "scaled") in run.readiness.waiting["tiny_too"]
    assert run.reported == {"tiny": False, "tiny_too": False}
    # ended in a worker that said 'finished', but no status file says so: no report yet
    assert run.done(scaled, [{"state": workdir_lib.FINISHED, "step": 6}])
    assert run.readiness.waiting["tiny_too"] == {("tiny_too", "longer")}
    assert run.reported == {"tiny": False, "tiny_too": False}

"""Carries out a sweep's plan (`plan.Plan`): its tasks through the job pool (`jobs.run_tasks`),
and each study's report (`publish.publish`) as soon as the last task it waits for has ended.

A preempted task ends nothing: the studies waiting for it are not reported in this sweep, and
the pool starts no further task (its `done` returns False); rerunning the command resumes.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional

from absl import logging

from transformer_jax.studies import grid as grid_lib
from transformer_jax.studies import plateau as plateau_lib
from transformer_jax.studies import report
from transformer_jax.studies.publish import publish
from transformer_jax.studies.run import jobs as jobs_lib
from transformer_jax.studies.run import plan as plan_lib
from transformer_jax.studies.run import terminal
from transformer_jax.studies import rundir


# (study name, its next plateau budget or None, its grown study or None) -> what the sweep
# finds for that study's next stage (sweep.survey of that study alone)
Restage = Callable[[str, Optional[int], Optional[grid_lib.Study]],
                   tuple[list[plan_lib.Found], plan_lib.Linked]]


class Readiness:
    """Which studies' reports may be written: each study waits for a set of tasks
    (`Plan.waits`) and is ready once all of them have ended, once."""

    def __init__(self, waits: Mapping[str, Iterable[plan_lib.TaskKey]]):
        self.waiting = {name: set(keys) for name, keys in waits.items()}

    def ready_now(self) -> list[str]:
        """The studies that wait for nothing (every run ended before the sweep, or another
        shard's), in plan order."""
        return [name for name, keys in self.waiting.items() if not keys]

    def task_ended(self, key: plan_lib.TaskKey) -> list[str]:
        """The studies that became ready as task `key` ended, by name."""
        ready = []
        for name, keys in self.waiting.items():
            if key in keys:
                keys.discard(key)
                ready += [] if keys else [name]
        return sorted(ready)


class Sweep:
    """One sweep's run of its plan: `done` is the job pool's callback for each task. A study
    whose plateau budget extends or whose grid grows gets its next stage's tasks at once
    (`restage`), which join the running pool (`added`)."""

    def __init__(self, plan: plan_lib.Plan, found: Iterable[plan_lib.Found], size: str,
                 shard: tuple[int, int], progress: terminal.JobProgress,
                 restage: Optional[Restage] = None):
        self.plan, self.size, self.shard, self.progress = plan, size, shard, progress
        self.restage, self.jobs = restage, 1  # `run` sets the pool's size
        self.found = {f.study.name: f for f in found}
        self.studies = {name: f.study for name, f in self.found.items()}  # read as tasks start
        self.readiness = Readiness(plan.waits)
        self.trains = set(plan.trains)
        self.reported = {name: False for name in self.found}
        self.queued: list[jobs_lib.Task] = []  # a next stage's tasks, for the pool

    def run(self, jobs: int) -> dict[str, bool]:
        """Runs every task, a next stage's too; returns study name -> whether its report was
        written."""
        self.jobs = jobs
        self.announce()
        self.progress.start(jobs)
        for name in self.readiness.ready_now():  # nothing left to run
            self.report_if_ended(name)
        try:
            jobs_lib.run_tasks([*self.plan.tasks, *self.take_queued()], self.studies, jobs,
                               self.done, tick=self.progress.tick, added=self.take_queued)
        finally:
            self.progress.close()
        return self.reported

    def take_queued(self) -> list[jobs_lib.Task]:
        queued, self.queued = self.queued, []
        return queued

    def announce(self, plan: Optional[plan_lib.Plan] = None,
                 found: Optional[Iterable[plan_lib.Found]] = None) -> None:
        """Tells the progress lines each study and what becomes of each of its variants (of
        the sweep's plan, or of a next stage's)."""
        plan = plan or self.plan
        for f in found if found is not None else list(self.found.values()):
            name = f.study.name
            self.progress.add_study(f.study, f.root)
            for v in plan.variants[name]:
                if v.what == plan_lib.ENDED:
                    states = {rundir.RunRecord.of(f.root, v.variant, s).state() for s in v.seeds}
                    logging.info("[%s] %s, seeds %s: already %s; nothing to do", name,
                                 v.variant, list(v.seeds), "/".join(sorted(states)))
                self.progress.add_variant(v.cost, shared=v.what == plan_lib.SHARED)

    def done(self, task: jobs_lib.Task, statuses: list[dict]) -> bool:
        """Task ended with its runs' `statuses`; False (start no further task) if one was
        preempted."""
        if task.variant is not None:
            self.progress.variant_done(task.study, task.variant, task.cost, statuses)
        if any(s.get("state") == rundir.PREEMPTED for s in statuses):
            return False
        for name in self.readiness.task_ended(plan_lib.key(task)):
            self.report_if_ended(name)
        return True

    def report_if_ended(self, name: str) -> None:
        """Publishes the study once every run of it has ended (with --shard, other shards may
        still be training some): the last shard to end writes the report."""
        found = self.found[name]
        runs = found.study.runs()
        missing = sum(not rundir.RunRecord.of(found.root, variant, seed).ended(found.budget)
                      for variant, seed in runs)
        if missing:
            logging.info("[%s] %d of %d runs not ended yet; the report follows when they are",
                         name, missing, len(runs))
            return
        # the grid first, at this budget: the plateau then judges the arms' best
        grown = self.grows(found) if found.study.extend_grid is not None else None
        budget = self.extends(found) if grown is None and found.study.plateau is not None \
            else None
        if grown is not None or budget is not None:
            self.next_stage(name, budget, grown)
            return
        publish(found.study, found.root, experiment=found.experiment, size=self.size,
                shard=self.shard, trained=name in self.trains)
        self.reported[name] = True
        self.progress.study_reported(name)

    def next_stage(self, name: str, budget: Optional[int],
                   grown: Optional[grid_lib.Study]) -> None:
        """The study's next stage (`grown`: its grid with the new candidates, or `budget`: the
        steps its runs train on to): surveyed and planned now, its tasks queued for the running
        pool; with no `restage` it only stays unreported."""
        if self.restage is None:
            return
        found, linked = self.restage(name, budget, grown)
        planned = plan_lib.plan(found, linked, self.shard, self.jobs, self.size)
        self.announce(planned, found)
        for f in found:
            self.found[f.study.name] = f
            self.studies[f.study.name] = f.study
        self.readiness.waiting.update({n: set(keys) for n, keys in planned.waits.items()})
        self.trains |= planned.trains
        self.queued += planned.tasks
        if not planned.waits[name]:  # a resumed sweep: that stage had ended before
            self.report_if_ended(name)

    def grows(self, found: plan_lib.Found) -> Optional[grid_lib.Study]:
        """The study with its grid's next points (None: none) where a seed of a tuned arm chose
        an edge of its grid under the cap: they train (the sweep's next stage), and the report
        waits for them."""
        study = found.study
        decided = grid_lib.stage(study, report.collect(study, found.root))
        new = grid_lib.added(decided)
        for arm, d in decided.items():
            capped = f"; the cap holds the {'/'.join(d['capped'])} edge" if d["capped"] else ""
            logging.info("[%s] %s: grid %s, chosen %s%s", study.name, arm, d["grid"],
                         d["chosen"], capped)
        if not new:
            return None
        edges = "; ".join(f"{arm} chose the {'/'.join(d['at_edge'])} edge of {d['grid']}"
                          for arm, d in decided.items() if d["next"])
        self.progress.print(f"  {study.name}: {edges}; trains {', '.join(new)}")
        return grid_lib.including(study, new)

    def extends(self, found: plan_lib.Found) -> Optional[int]:
        """The next budget (None: none) where a plateau study's judged arms still gain more than
        its amount at this budget, under its cap: each of its runs trains on to it (the sweep's
        next stage), and its report waits for it."""
        study = found.study
        decided = plateau_lib.stage(study.plateau, found.budget, report.arm_late_gains(
            study, report.collect(study, found.root)))
        climbing = [a for a, g in decided["arms"].items() if not g["flattened"]]
        logging.info("[%s] plateau budget at %d steps: %s", study.name, found.budget,
                     f"{', '.join(climbing)} still gaining; every run trains on to "
                     f"{decided['next']}" if decided["next"] else decided["decision"])
        if decided["next"] is None:
            return None
        self.progress.print(f"  {study.name}: {', '.join(climbing)} still gaining at "
                            f"{found.budget} steps; every run trains on to {decided['next']}")
        return decided["next"]

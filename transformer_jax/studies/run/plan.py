"""What a sweep will do, decided before anything runs: a plain value a test can check.

`plan` turns what the sweep found on disk for each study (`Found`: its runs that had already
ended, its runs linked to an identical run of another variant or study) into the tasks this
shard runs, which tasks each study's report waits for, and which studies this sweep trains
runs of. It reads and writes nothing, so a reader (or a test) learns when a report fires and
whether a provenance record is rewritten from the plan alone, without simulating a scheduler.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Mapping, Optional, Sequence

from transformer_jax.studies.run import jobs as jobs_lib
from transformer_jax.studies.study import Study

Run = tuple[str, int]  # (variant, seed)
TaskKey = tuple[str, Optional[str]]  # (study, variant); variant None: the study's probes
# (owner study, owner variant) -> the studies with runs linked to that variant's runs
Linked = Mapping[tuple[str, str], set[str]]

TRAIN, ENDED, SHARED = "train", "ended", "shared"  # what becomes of a variant in this shard


@dataclasses.dataclass(frozen=True)
class Found:
    """One study as the sweep found it before planning (`sweep.survey` reads it off disk)."""
    study: Study
    root: Path
    experiment: Optional[str]  # its experiment file (worker processes load the study from it)
    ended: frozenset[Run] = frozenset()  # runs whose status says finished or diverged
    shared: frozenset[Run] = frozenset()  # runs linked to an identical run trained elsewhere
    budget: Optional[int] = None  # a plateau study's stage: the steps its runs train to


@dataclasses.dataclass(frozen=True)
class VariantPlan:
    """A variant of this shard: trained (TRAIN), already ended (ENDED), or made of runs that
    another variant trains (SHARED). `cost` is set for TRAIN only (the progress line's ETA)."""
    variant: str
    what: str
    seeds: tuple[int, ...]
    cost: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Plan:
    tasks: tuple[jobs_lib.Task, ...]
    variants: dict[str, tuple[VariantPlan, ...]]  # study -> this shard's variants, in order
    shared: dict[str, frozenset[Run]]  # study -> its runs linked to an identical run
    waits: dict[str, frozenset[TaskKey]]  # study -> the tasks its report waits for
    trains: frozenset[str]  # studies with runs this sweep trains: their provenance is rewritten


def key(task: jobs_lib.Task) -> TaskKey:
    return task.study, task.variant


def plan(found: Sequence[Found], linked: Linked, shard: tuple[int, int], jobs: int,
         size: str) -> Plan:
    """The sweep's plan for this shard (`shard` = (i, n): every n-th run from i). A study's
    probes are a task of their own only with worker processes (`jobs` > 1), on shard 0;
    otherwise the report runs them."""
    tasks, variants = [], {}
    for f in found:
        variants[f.study.name] = plan_variants(f, shard)
        task = functools.partial(jobs_lib.Task, f.study.name, str(f.root), f.experiment, size)
        tasks += [task(v.variant, v.seeds, v.cost, f.budget) for v in variants[f.study.name]
                  if v.what == TRAIN]
        if f.study.probes and shard[0] == 0 and jobs > 1:
            tasks.append(task())
    names = [f.study.name for f in found]
    return Plan(tasks=tuple(tasks), variants=variants,
                shared={f.study.name: f.shared for f in found},
                waits=study_waits(tasks, linked, names),
                trains=frozenset(n for n, t in studies_trained(tasks, linked, names).items() if t))


def plan_variants(found: Found, shard: tuple[int, int]) -> tuple[VariantPlan, ...]:
    """What becomes of each of the study's variants that has runs in this shard."""
    index, count = shard
    study = found.study
    mine = [run for i, run in enumerate(study.runs()) if i % count == index]
    planned = []
    for variant in study.variants:
        seeds = tuple(s for v, s in mine if v == variant and (v, s) not in found.shared)
        if not seeds:
            if any(v == variant for v, _ in mine):  # all its runs here are another's
                planned.append(VariantPlan(variant, SHARED, ()))
        elif all((variant, s) in found.ended for s in seeds):
            planned.append(VariantPlan(variant, ENDED, seeds))
        else:
            planned.append(VariantPlan(variant, TRAIN, seeds,
                                       jobs_lib.cost(study, variant, seeds, found.budget)))
    return tuple(planned)


def study_waits(tasks: Sequence[jobs_lib.Task], linked: Linked,
                names: Sequence[str]) -> dict[str, frozenset[TaskKey]]:
    """Study name -> the tasks its report waits for: its own, and every task that trains runs
    it links to (another study's, or another variant's of its own)."""
    waits: dict[str, set[TaskKey]] = {name: set() for name in names}
    for t in tasks:
        for name in (t.study, *linked.get((t.study, t.variant), ())):
            waits[name].add(key(t))
    return {name: frozenset(w) for name, w in waits.items()}


def studies_trained(tasks: Sequence[jobs_lib.Task], linked: Linked,
                    names: Sequence[str]) -> dict[str, bool]:
    """Study name -> whether this sweep trains any of its runs (its own tasks, or another
    study's task whose runs it links to). A probes task (variant None) trains nothing: a rerun
    that only probes and reports must keep the provenance of the runs it did not train."""
    trained = {name: False for name in names}
    for t in tasks:
        if t.variant is None:
            continue
        for name in (t.study, *linked.get((t.study, t.variant), ())):
            trained[name] = True
    return trained

"""A study's verdicts: each of its expectations judged on the values a function gives it
(from its runs, report.py; or from the values its record holds, rejudge.py), with the p-value of
its settled verdict for Holm's correction, and where each diverged run stopped.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from transformer_jax.studies.judge import expectation, multiplicity
from transformer_jax.studies.judge.judgement import Judgement
from transformer_jax.studies.judge.terms import Stated

Stopped = Mapping[str, Mapping[int, int]]  # variant -> seed -> the step a diverged run stopped


def judge_all(study: Any, values_of: Callable[[Stated], dict], stopped: Optional[Stopped] = None
              ) -> tuple[list[Judgement], list[float]]:
    """(each expectation's judgement, the p-value of each settled verdict): `values_of(e)`
    gives variant -> seed -> what `e` judges of each run; `stopped`: stopped_steps. The one
    place verdicts are reached."""
    judgements, p = [], []
    for e in study.expectations:
        values = values_of(e)
        judgements.append(expectation.judge(e, values, stopped=stopped))
        p.append(multiplicity.p_value(e, values, stopped))  # for Holm's correction over the study
    return judgements, p


def stopped_steps(study: Any, stops: Mapping[tuple[str, int], int]) -> dict[str, dict[int, int]]:
    """variant -> seed -> the step at which each diverged run stopped (`stops`: (variant,
    seed) -> step, diverged runs only); a tuned arm's seed, where every candidate diverged (it
    has no value), the latest of its candidates' steps."""
    found: dict[str, dict[int, int]] = {}
    for (variant, seed), step in stops.items():
        found.setdefault(variant, {})[seed] = step
    for arm, candidates in study.tuned.items():
        for seed in study.seeds:
            if all(seed in found.get(c, {}) for c in candidates):
                found.setdefault(arm, {})[seed] = max(found[c][seed] for c in candidates)
    return found

"""Which candidate stands for a tuned arm on each seed (studies/tuning.py declares the arm): the
one with the lowest training loss over its last 20 % of steps (`SELECTED_BY`), the data the
model was fitted on, never the metric an expectation judges, so the choice cannot favour the
claim (selecting by the judged metric would let noise in the eval set pick the winner). The
arm's value for that seed is the chosen candidate's. A candidate that diverged is never chosen;
a seed whose every candidate diverged counts as a diverged run of the arm.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from transformer_jax.studies.convergence import FLAT_WINDOW

SELECTED_BY = "train/loss"  # the mean over the run's last FLAT_WINDOW of its logged steps
Values = dict[str, dict[int, float]]  # variant -> seed -> value
Choices = dict[str, dict[int, Optional[str]]]  # arm -> seed -> its chosen candidate (None: none)


def selection_loss(run: Mapping[str, Any]) -> float:
    """The mean training loss over the run's last FLAT_WINDOW of logged steps; nan for a run
    that diverged or logged none."""
    if run["status"].get("state") == "diverged":
        return math.nan
    curve = run["curves"].get(SELECTED_BY, [])
    if not curve:
        return math.nan
    last = curve[-1][0]
    late = [v for s, v in curve if s >= last * (1 - FLAT_WINDOW)]
    return float(np.mean(late)) if np.isfinite(late).all() else math.nan


def choose(tuned: Mapping[str, Sequence[str]], seeds: Sequence[int],
           runs: Mapping[tuple[str, int], Mapping[str, Any]]) -> Choices:
    """arm -> seed -> the candidate with the lowest selection_loss (None: every one diverged)."""
    choices: Choices = {}
    for arm, candidates in tuned.items():
        for seed in seeds:
            losses = {c: selection_loss(runs[(c, seed)]) for c in candidates}
            finite = {c: x for c, x in losses.items() if math.isfinite(x)}
            choices.setdefault(arm, {})[seed] = min(finite, key=finite.get) if finite else None
    return choices


def with_arms(values: Values, choices: Choices) -> Values:
    """`values` with each tuned arm's: per seed, its chosen candidate's (nan: none chosen)."""
    arms = {arm: {seed: values[c][seed] if c is not None else math.nan
                  for seed, c in by_seed.items()} for arm, by_seed in choices.items()}
    return {**values, **arms}


def record(tuned: Mapping[str, Sequence[str]], variants: Mapping[str, Mapping[str, Any]],
           choices: Choices, runs) -> dict[str, Any]:
    """The tuned arms as data for verdict.json: each candidate's overrides that differ
    between candidates (the grid), and each seed's choice with its selection loss."""
    found = {}
    for arm, candidates in tuned.items():
        grid_keys = sorted({k for c in candidates for k in variants[c]
                            if len({str(variants[o].get(k)) for o in candidates}) > 1})
        found[arm] = {
            "selected_by": f"{SELECTED_BY}, mean over the last {FLAT_WINDOW:.0%} of steps",
            "candidates": {c: {k: variants[c].get(k) for k in grid_keys} for c in candidates},
            "choices": [{"seed": s, "variant": c,
                         "loss": None if c is None else _number(selection_loss(runs[(c, s)]))}
                        for s, c in choices[arm].items()]}
    return found


def _number(x: float) -> Optional[float]:
    return x if math.isfinite(x) else None

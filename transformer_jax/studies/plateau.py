"""A budget that runs to the plateau: how long a study trains, decided from its own curves.

A "trains at all" verdict means little while its baseline is still learning: at a fixed budget
the comparison measures speed as well as capability. A study that declares `Study.plateau`
trains every variant to `first` steps; then, while any arm that an expectation on `metric`
judges still gains more than `amount` over its last 20 % of steps (the mean over its seeds of
`report.late_gain`; a tuned arm: each seed's chosen candidate), every run of the study is
extended by `step` steps (the trainer's resume-and-extend), up to `cap`. All runs end at the
same step, so the comparison stays fair; the page shows the budget reached, each judged arm's
late gain at each stage, and whether the cap stopped it (`record`).

The rule decides how long to train, not a verdict: the study's own `flattened` expectations
judge, with their interval, whether an arm had flattened there. Its runs use
train.schedule="constant" (Study refuses another): a cosine schedule recomputed at each
extension would jump back up, and a run annealed to a small LR "flattens" because of the
schedule, not a plateau; at a constant LR an extended run is exactly the run trained straight
to the final step, and what flattens is the model. No state is kept beside the runs: the budget
is the largest train.num_steps among the runs' saved configs, and each decision is a function
of the curves, so a resumed sweep decides again what it decided before.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from transformer_jax.config import ConfigError
from transformer_jax.train import workdir as workdir_lib

SCHEDULE = "constant"  # the train.schedule a plateau study's runs use (see the docstring)
FLATTENED, CAP = "flattened", "cap"  # why the budget stopped where it did
Gains = Mapping[str, Mapping[int, float]]  # judged arm -> seed -> late gain (nan: none)


@dataclasses.dataclass(frozen=True)
class Plateau:
    """Train to `first` steps, then on by `step` until every judged arm's mean late gain in
    `metric` is at most `amount`, or `cap` steps."""

    metric: str  # the metric the verdicts judge, e.g. 'eval/accuracy'
    amount: float  # an arm has flattened when its mean late gain is at most this
    first: int  # steps of the first stage (the study's base train.num_steps)
    step: int  # steps added at each extension
    cap: int  # no run trains beyond this
    higher_is_better: bool = True

    def __post_init__(self):
        for name in ("first", "step", "cap"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"plateau {name}={value!r} must be a positive integer (steps)")
        if self.cap < self.first:
            raise ConfigError(f"plateau cap={self.cap} must be at least first={self.first}")
        if not (math.isfinite(self.amount) and self.amount >= 0):
            raise ConfigError(f"plateau amount={self.amount!r} must be a number >= 0 (a late "
                              f"gain in {self.metric})")

    def budgets(self) -> list[int]:
        """Every stage's budget: first, first + step, ..., cap."""
        return sorted({*range(self.first, self.cap, self.step), self.cap})

    def next_budget(self, budget: int) -> Optional[int]:
        """The budget after `budget` (None: `budget` is the cap)."""
        return min(budget + self.step, self.cap) if budget < self.cap else None

    def design(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def judged_arms(expectations: Sequence[Any], metric: str) -> list[str]:
    """The variants and tuned arms an expectation on `metric` names, in order."""
    arms = [v for e in expectations if e.metric == metric for v in e.variants()]
    return list(dict.fromkeys(arms))


def mean_gain(per_seed: Mapping[int, float]) -> Optional[float]:
    """The mean over the seeds with a late gain (None: every run diverged, nothing to learn)."""
    finite = [x for x in per_seed.values() if math.isfinite(x)]
    return float(np.mean(finite)) if finite else None


def stage(plateau: Plateau, budget: int, gains: Gains) -> dict[str, Any]:
    """One stage's decision as data: each judged arm's mean late gain and whether it has
    flattened, and what follows: 'extend' to `next`, or stop ('flattened' or 'cap')."""
    arms = {arm: {"late_gain": mean_gain(g), "seeds": {str(s): _number(x) for s, x in g.items()}}
            for arm, g in gains.items()}
    for a in arms.values():
        a["flattened"] = a["late_gain"] is None or a["late_gain"] <= plateau.amount
    done = all(a["flattened"] for a in arms.values())
    following = None if done else plateau.next_budget(budget)
    decision = FLATTENED if done else CAP if following is None else "extend"
    return {"budget": budget, "arms": arms, "decision": decision, "next": following}


def budget_of(runs: Sequence[Path], first: int) -> int:
    """The budget a study's runs were last sent to: the largest train.num_steps among their
    saved configs (`first` when none has started)."""
    steps = [first]
    for run in runs:
        saved = Path(run) / workdir_lib.CONFIG_FILE
        if saved.is_file():
            steps.append(json.loads(saved.read_text())["train"]["num_steps"])
    return max(steps)


def needs_extending(run: Path, steps: int) -> bool:
    """Whether the run in `run` was started with fewer than `steps` steps (then its
    train.num_steps is raised: train_replicas(extend=True))."""
    saved = Path(run) / workdir_lib.CONFIG_FILE
    return saved.is_file() and json.loads(saved.read_text())["train"]["num_steps"] < steps


def record(plateau: Plateau, stages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The plateau budget for verdict.json: the rule, the budget reached, why it stopped there,
    each judged arm's late gain there, and every stage's decision."""
    last = stages[-1]
    return {**plateau.design(), "budget": last["budget"], "stopped_by": last["decision"],
            "arms": last["arms"], "stages": list(stages)}


def _number(x: float) -> Optional[float]:
    return float(x) if math.isfinite(x) else None

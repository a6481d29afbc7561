"""A head set's knock-out against random head sets matched to it: the control a referee accepts
(issue 65, item 1).

"The role's heads matter" means: knocking them out costs more than knocking out as many other
heads would. The random sets that stand for "as many other heads" are:

- matched by layer: as many heads from each layer as the group takes there (so the same size);
  a head's cost depends on its layer, so a set drawn anywhere in the model is another quantity;
- free of role heads: never the group's own heads, nor any head whose role score is at or above
  the role threshold (the role check's ≥), so the control is not another copy of the role;
- drawn afresh for every unit (a sentence, a sequence, a seed), from a generator seeded by the
  unit's id (and the group), so every unit's draws are independent and reproducible.

Where a layer the group uses has fewer eligible heads than the group takes there (the group fills
its layer), no matched set exists and the control refuses in one line (`ControlError`).

The interval carries both sources of variance: units, and sets within a unit
(`nested_intervals.summarize`, which says why it is a t interval over the units' means).

    sets = plan_control((L, H), group, role_scores, threshold, units)   # unit -> [group, set...]
    result = run_control((L, H), group, role_scores, threshold, units, cost)
    result.difference, result.ratio                    # Estimate(mean, low, high) each
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from transformer_jax.studies.analysis.nested_intervals import (AgainstRandom, Estimate,
                                                                keyed_rng, summarize)
from transformer_jax.studies.judge.stats import CONFIDENCE

Head = tuple[int, int]  # (layer, head)
DRAWS = 8  # random sets per unit
DRAW_SEED = 6_500_001  # every unit's generator starts from [DRAW_SEED, its id and the group's]


class ControlError(ValueError):
    """No matched control exists (or the group is malformed); one line says why."""


def eligible_heads(shape: tuple[int, int], group: Sequence[Head], role_scores: np.ndarray,
                   threshold: float | Sequence[float]) -> np.ndarray:
    """bool [L, H]: the heads a random set may take: not in the group, and every role score
    below its threshold. role_scores [L, H], or [L, H, roles] with one threshold for all roles
    or one per role (a head at or above any role's threshold is out)."""
    given = np.asarray(role_scores, float)
    if given.shape[:2] != tuple(shape) or given.ndim not in (2, 3):
        raise ControlError(f"role_scores has shape {given.shape}; it must be [layers, heads"
                           f"(, roles)] = {tuple(shape)}")
    scores = given[..., None] if given.ndim == 2 else given  # [L, H, roles]
    eligible = ~np.any(scores >= np.asarray(threshold, float), axis=-1)  # NaN: no role
    for layer, head in _checked(shape, group):
        eligible[layer, head] = False
    return eligible


def check_room(group: Sequence[Head], eligible: np.ndarray,
               threshold: float | Sequence[float]) -> None:
    """A ControlError unless every layer the group uses has as many eligible heads as it takes."""
    below = " / ".join(f"{t:g}" for t in np.atleast_1d(np.asarray(threshold, float)))
    for layer, need in sorted(collections.Counter(h[0] for h in group).items()):
        have = int(eligible[layer].sum())
        if have < need:
            raise ControlError(
                f"layer {layer} has {have} head(s) outside the group with every role score "
                f"below {below}, and a random set matched by layer needs {need} there (the "
                f"group takes {need} of its {eligible.shape[1]} heads): a matched control needs "
                "more heads per layer than the group holds")


def unit_rng(unit: Hashable, group: Sequence[Head], seed: int = DRAW_SEED) -> np.random.Generator:
    """The generator of one unit's draws for one group (`nested_intervals.keyed_rng`)."""
    return keyed_rng((unit, sorted(group)), seed)


def matched_sets(group: Sequence[Head], eligible: np.ndarray, draws: int,
                 rng: np.random.Generator) -> list[tuple[Head, ...]]:
    """`draws` independent random sets, each with as many eligible heads from each layer as the
    group takes there (without repeats inside a set; two sets may coincide)."""
    per_layer = sorted(collections.Counter(h[0] for h in group).items())
    sets = []
    for _ in range(draws):
        chosen: list[Head] = []
        for layer, need in per_layer:
            pool = np.flatnonzero(eligible[layer])
            chosen += [(layer, int(h)) for h in rng.choice(pool, need, replace=False)]
        sets.append(tuple(chosen))
    return sets


def plan_control(shape: tuple[int, int], group: Sequence[Head], role_scores: np.ndarray,
                 threshold: float | Sequence[float], units: Sequence[Hashable], draws: int = DRAWS,
                 seed: int = DRAW_SEED) -> dict[Hashable, list[tuple[Head, ...]]]:
    """unit -> [the group, then `draws` matched random sets], every set to knock out on that
    unit (a caller that evaluates many masks at once builds them from this)."""
    if draws < 2:  # one set per unit leaves the spread across sets unmeasured
        raise ControlError(f"draws={draws} must be at least 2")
    if not units:
        raise ControlError("no units to measure the control on")
    group = tuple(sorted(_checked(shape, group)))
    eligible = eligible_heads(shape, group, role_scores, threshold)
    check_room(group, eligible, threshold)
    return {unit: [group, *matched_sets(group, eligible, draws, unit_rng(unit, group, seed))]
            for unit in units}


@dataclasses.dataclass(frozen=True)
class ControlResult(AgainstRandom):
    """The group's knock-out against its matched random sets, over units.

    group_costs [N] and random_costs [N, draws] are per unit; `sets` each unit's random sets.
    difference = group − random sets; ratio = group / random sets (how many times as costly).
    between_units_sd and within_unit_sd: the random sets' two variance components."""
    group: tuple[Head, ...]
    units: tuple
    sets: tuple
    group_costs: np.ndarray
    random_costs: np.ndarray
    group_effect: Estimate
    random_effect: Estimate

    @property
    def costlier(self) -> bool:
        """The group costs more than matched random sets: the difference's interval above 0."""
        return self.above_random

    def to_dict(self) -> dict[str, Any]:
        """Plain values for a results file (JSON): data, rendered to text elsewhere."""
        return {"group": [list(h) for h in self.group], "units": list(self.units),
                "sets": [[[list(h) for h in s] for s in unit] for unit in self.sets],
                "group_costs": self.group_costs.tolist(),
                "random_costs": self.random_costs.tolist(),
                "group_effect": self.group_effect.to_dict(),
                "random_effect": self.random_effect.to_dict(), **self.statistics()}


def run_control(shape: tuple[int, int], group: Sequence[Head], role_scores: np.ndarray,
                threshold: float | Sequence[float], units: Sequence[Hashable],
                cost: Callable[[tuple[Head, ...], Hashable], float], draws: int = DRAWS,
                seed: int = DRAW_SEED, confidence: float = CONFIDENCE) -> ControlResult:
    """`plan_control`, then `cost(heads, unit)` (what knocking those heads out costs on that
    unit: larger is worse) for the group and each random set on every unit, then
    `nested_intervals.summarize`."""
    plan = plan_control(shape, group, role_scores, threshold, units, draws, seed)
    costs = np.array([[cost(heads, unit) for heads in plan[unit]] for unit in units], float)
    found = summarize(costs[:, 0], costs[:, 1:], confidence)
    return ControlResult(group=plan[units[0]][0], units=tuple(units),
                         sets=tuple(tuple(plan[u][1:]) for u in units), group_costs=costs[:, 0],
                         random_costs=costs[:, 1:], group_effect=found.pop("effect"),
                         random_effect=found.pop("random"), **found)


def _checked(shape: tuple[int, int], group: Sequence[Head]) -> list[Head]:
    """The group as (layer, head) ints; a ControlError names a head outside [L, H], a repeated
    head or an empty group."""
    heads = [(int(layer), int(head)) for layer, head in group]
    if not heads:
        raise ControlError("the group is empty: there is nothing to knock out")
    bad = [h for h in heads if not (0 <= h[0] < shape[0] and 0 <= h[1] < shape[1])]
    if bad:
        raise ControlError(f"head {bad[0]} is outside the model's {shape[0]} layers x "
                           f"{shape[1]} heads")
    if len(set(heads)) < len(heads):
        raise ControlError(f"the group {heads} names a head twice")
    return heads


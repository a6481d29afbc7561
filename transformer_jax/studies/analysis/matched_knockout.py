"""Groups of heads knocked out together against random sets matched to them: group_knockout with
the control a referee accepts (issue 65, items 1 and 5; head_controls).

group_knockout's random sets come from the group's own layer where it holds another set, else
from anywhere in the model, and may take heads of the very role the group stands for. Here every
random set is head_controls': as many heads from each layer as the group takes there, none of
the group's and none at or above any role's threshold (`MatchedGroup.thresholds`), drawn afresh
for each seed (the unit: each seed is its own trained model, with its own group). Where a layer
the group uses has too few such heads, no matched set exists: that seed's control is refused
(the page gives head_controls' one line) and its random values are nan, which an expectation
counts as it counts a diverged run's: the verdict must stand with that seed at the study's least
and at its most favourable finished value, so a refused control never helps a claim.

Per seed of the group's variant this measures, on the eval split (`head_importance`'s
examples), as values an expectation can judge (`Section.values`, named by `metric_names`): the
metric without the group, its mean over DRAWS matched sets, and their share of the group's drop
(as group_knockout's: their mean drop over the group's, the group's floored at
head_importance.SMALL). A t interval over seeds of these per-seed means carries both sources of
variance, seeds and sets within a seed (nested_intervals.summarize says why).
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from transformer_jax.studies.analysis import group_knockout, head_controls, head_importance
# in_layer: a group's select (a role's heads of one layer), as experiment files read it here
from transformer_jax.studies.analysis.group_knockout import (Measured, heads_text, in_layer,
                                                            mean_and_interval)
from transformer_jax.studies.checks import Section
from transformer_jax.studies.render.markdown import markdown_table

CSV_FILE = "matched_knockout.csv"
DRAWS = 16  # matched random sets per group and seed
DRAW_SEED = 6_500_017  # head_controls.unit_rng(seed, group, DRAW_SEED)


@dataclasses.dataclass(frozen=True)
class MatchedGroup:
    """The heads of `variant` knocked out together: where `select` (one seed's role scores,
    {'previous_token', 'prefix_matching'}: [L, H] each) is true. `thresholds`: role -> the score
    at or above which a head has that role; no random set takes such a head."""
    name: str
    text: str
    variant: str
    select: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    thresholds: Mapping[str, float]


def top_in_layer(scores: np.ndarray, threshold: float, layer: int, most: int) -> np.ndarray:
    """scores [L, H] -> bool [L, H]: `layer`'s `most` highest-scoring heads among those at or
    above `threshold` (fewer where fewer pass; ties broken by the lower head index)."""
    chosen = np.zeros(scores.shape, bool)
    passing = np.flatnonzero(scores[layer] >= threshold)
    best = passing[np.argsort(-scores[layer][passing], kind="stable")][:most]
    chosen[layer, best] = True
    return chosen


def metric_names(group: str, metric: str = "accuracy") -> dict[str, str]:
    """The per-seed values: 'without' (the metric with the group out), 'random' (mean over the
    matched sets), 'random_share' (their drop over the group's)."""
    return {"without": f"matched/{group}/{metric}",
            "random": f"matched/{group}/random_{metric}",
            "random_share": f"matched/{group}/random_share"}


def plan(group: MatchedGroup, scores: Mapping[str, np.ndarray], seed: int, index: int = 0
         ) -> tuple[list[tuple[head_controls.Head, ...]], str]:
    """([the group, then DRAWS matched sets], '') for one seed, or ([the group], why) where no
    matched set exists ([], why for an empty group): group_knockout's `Plan` (`index` unused:
    head_controls draws from the seed and the group's heads)."""
    picked = np.asarray(group.select(scores), bool)
    heads = tuple((int(layer), int(head)) for layer, head in np.argwhere(picked))
    roles = np.stack([scores[role] for role in group.thresholds], axis=-1)  # [L, H, roles]
    try:
        sets = head_controls.plan_control(picked.shape, heads, roles,
                                          list(group.thresholds.values()), [seed], DRAWS,
                                          DRAW_SEED)[seed]
    except head_controls.ControlError as refusal:
        return ([heads] if heads else []), str(refusal)
    return sets, ""


def measure(restored, rows: Mapping, groups: tuple[MatchedGroup, ...], metric: str,
            max_examples: int) -> dict[tuple[str, int], Measured]:
    """(group name, seed) -> Measured: group_knockout's knock-outs, against matched sets."""
    return group_knockout.measure(restored, rows, groups, metric, max_examples, plan)


def make_analysis(groups: tuple[MatchedGroup, ...], metric: str = "accuracy",
                  max_examples: int = head_importance.MAX_EXAMPLES
                  ) -> Callable[[Path, dict], Section]:
    """The analysis for `Study.analyses`, after head_roles' (it reads head_roles.csv)."""
    if metric not in head_importance.METRICS:
        raise ValueError(f"metric={metric!r} is not one of: {', '.join(head_importance.METRICS)}")

    def matched_knockout(root: Path, runs: dict) -> Section:
        return analyse(Path(root), runs, groups, metric, max_examples)
    return matched_knockout


def analyse(root: Path, runs: Mapping, groups: tuple[MatchedGroup, ...],
            metric: str = "accuracy", max_examples: int = head_importance.MAX_EXAMPLES
            ) -> Section:
    found = group_knockout.measure_variants(root, runs, groups, metric, max_examples, plan)
    if not found:
        return Section("No finished run with head roles to knock groups of heads out of.\n")
    _write_csv(found, groups, metric, root / CSV_FILE)
    return Section(_markdown(found, groups, metric),
                   values=group_knockout.judged_values(found, groups, metric, metric_names))


def _write_csv(found: Mapping[tuple[str, int], Measured], groups, metric: str,
               path: Path) -> None:
    variant_of = {g.name: g.variant for g in groups}
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "group", "set", "heads", "with_all_heads",
                         f"without_set_{metric}", "drop", "control_refused"])
        for (name, seed), m in found.items():
            for k, (heads, without, drop) in enumerate(zip(m.sets, m.without, m.drops(metric))):
                writer.writerow([variant_of[name], seed, name, "group" if k == 0 else
                                 f"matched_{k}", heads_text(heads), f"{m.with_all:.4f}",
                                 f"{without:.4f}", f"{drop:.4f}", m.refused])


def _markdown(found: Mapping[tuple[str, int], Measured], groups, metric: str) -> str:
    rows, refusals = [], []
    for group in groups:
        mine = {seed: m for (name, seed), m in found.items() if name == group.name}
        if not mine:
            continue
        per_seed = [m.values(metric) for m in mine.values()]
        sizes = sorted({len(m.sets[0]) for m in mine.values()})
        size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        rows.append((group.variant, group.text, size,
                     f"{sum(not m.refused for m in mine.values())} of {len(mine)}",
                     f"{np.mean([m.with_all for m in mine.values()]):.3f}",
                     *(mean_and_interval([v[what] for v in per_seed])
                       for what in ("without", "random", "random_share"))))
        refusals += [f"- {group.name}, seed {seed}: {m.refused}"
                     for seed, m in sorted(mine.items()) if m.refused]
    table = markdown_table(
        ["variant", "group", "heads in it (over seeds)", "seeds with a matched control",
         f"{metric}, all heads", f"{metric} without the group",
         f"without a matched random set ({DRAWS} per seed)", "matched sets' drop / the group's"],
        rows)
    return "\n".join([
        "### Groups of heads against matched random sets", "",
        "Every head that passes a role's check knocked out at once (each seed picks its own, "
        "from head_roles.csv), against random sets matched to it: as many heads from each layer "
        "as the group takes there, none of the group's and none at or above any role's "
        "threshold, drawn afresh for each seed. Mean over seeds [95 % interval]. Every set and "
        f"its heads: {CSV_FILE}.", "", table, "",
        *(["Where no matched set exists:", "", *refusals, ""] if refusals else [])])

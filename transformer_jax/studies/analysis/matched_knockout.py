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

from transformer_jax.studies.analysis import head_controls, head_importance, head_roles
from transformer_jax.studies.analysis.restore import finished_run_dirs, restore_variant
from transformer_jax.studies.checks import Section
from transformer_jax.studies.markdown import markdown_table
from transformer_jax.studies.stats import interval_of_mean

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


def in_layer(passed: np.ndarray, layer: int) -> np.ndarray:
    """passed [L, H] bool -> the same, true only in `layer` (a group's select: a role's heads of
    one layer)."""
    chosen = np.zeros_like(passed, dtype=bool)
    chosen[layer] = passed[layer]
    return chosen


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


@dataclasses.dataclass(frozen=True)
class Measured:
    """One seed's knock-outs of one group: the sets (the group first, then the matched ones;
    only the group where the control was refused, and `refused` says why) and the metric with
    every head and without each set."""
    sets: tuple[tuple[head_controls.Head, ...], ...]
    with_all: float
    without: np.ndarray  # [len(sets)]
    refused: str = ""

    def drops(self, metric: str) -> np.ndarray:
        worse = self.with_all - self.without
        return worse if metric == "accuracy" else -worse

    def values(self, metric: str) -> dict[str, float]:
        drop = self.drops(metric)
        random = float(drop[1:].mean()) if len(drop) > 1 else np.nan
        return {"without": float(self.without[0]),
                "random": float(self.without[1:].mean()) if len(drop) > 1 else np.nan,
                "random_share": random / max(float(drop[0]), head_importance.SMALL)}


def plan(group: MatchedGroup, scores: Mapping[str, np.ndarray], seed: int
         ) -> tuple[list[tuple[head_controls.Head, ...]], str]:
    """([the group, then DRAWS matched sets], '') for one seed, or ([the group], why) where no
    matched set exists ([], why for an empty group)."""
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


def _mask(sets, shape: tuple[int, int]) -> np.ndarray:
    """[len(sets), L, H]: 0 where a set knocks a head out, else 1."""
    masks = np.ones((len(sets),) + shape, np.float32)
    for k, heads in enumerate(sets):
        for layer, head in heads:
            masks[k, layer, head] = 0.0
    return masks


def measure(restored, rows: Mapping, groups: tuple[MatchedGroup, ...], metric: str,
            max_examples: int) -> dict[tuple[str, int], Measured]:
    """(group name, seed) -> Measured, for the seeds with role scores; every set of every seed
    and group in one evaluation (mask 0 of each seed: every head)."""
    cfg = restored.run.model
    shape = (cfg.num_layers, cfg.num_heads)
    planned = {}  # (group name, seed index) -> (sets, why)
    for i, seed in enumerate(restored.seeds):
        scores = head_importance.role_scores(rows, groups[0].variant, seed, shape)
        for group in groups if scores else ():
            sets, why = plan(group, scores, seed)
            if sets:
                planned[(group.name, i)] = (sets, why)
    per_seed = [[(name, sets) for (name, j), (sets, _) in planned.items() if j == i]
                for i in range(len(restored.seeds))]
    width = max((sum(len(s) for _, s in chosen) for chosen in per_seed), default=0)
    if width == 0:
        return {}
    masks = np.ones((len(restored.seeds), 1 + width) + shape, np.float32)
    for i, chosen in enumerate(per_seed):
        flat = [heads for _, sets in chosen for heads in sets]
        masks[i, 1:1 + len(flat)] = _mask(flat, shape)
    values = head_importance.masked_values(restored, masks, metric, max_examples)  # [S, 1 + W]
    found = {}
    for i, chosen in enumerate(per_seed):
        start = 1
        for name, sets in chosen:
            found[(name, restored.seeds[i])] = Measured(
                tuple(sets), float(values[i, 0]), values[i, start:start + len(sets)],
                planned[(name, i)][1])
            start += len(sets)
    return found


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
    found = _measure_variants(root, runs, groups, metric, max_examples)
    if not found:
        return Section("No finished run with head roles to knock groups of heads out of.\n")
    _write_csv(found, groups, metric, root / CSV_FILE)
    variant_of = {g.name: g.variant for g in groups}
    values: dict[str, dict] = {}  # metric name -> (variant, seed) -> value
    for (name, seed), m in found.items():
        names = metric_names(name, metric)
        for what, value in m.values(metric).items():
            values.setdefault(names[what], {})[(variant_of[name], seed)] = value
    return Section(_markdown(found, groups, metric), values=values)


def _measure_variants(root: Path, runs: Mapping, groups: tuple[MatchedGroup, ...], metric: str,
                      max_examples: int) -> dict[tuple[str, int], Measured]:
    """`measure` on each variant the groups name that has finished runs."""
    rows = head_importance.read_head_roles(root / head_roles.CSV_FILE)
    dirs = finished_run_dirs(root, runs)
    found: dict[tuple[str, int], Measured] = {}
    for variant in dict.fromkeys(g.variant for g in groups):
        if variant in dirs:
            found.update(measure(restore_variant(dirs[variant]), rows,
                                 tuple(g for g in groups if g.variant == variant), metric,
                                 max_examples))
    return found


def heads_text(heads) -> str:
    """((1, 0), (1, 2)) -> 'L1H0 L1H2'."""
    return " ".join(f"L{layer}H{head}" for layer, head in heads)


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


def _mean_and_interval(values: list[float]) -> str:
    finite = np.asarray([v for v in values if np.isfinite(v)])
    if len(finite) < 2:
        return "–" if not len(finite) else f"{finite[0]:.3f} (one seed)"
    low, high = interval_of_mean(finite)
    return f"{finite.mean():.3f} [{low:.3f}, {high:.3f}]"


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
                     *(_mean_and_interval([v[what] for v in per_seed])
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

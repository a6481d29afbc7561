"""Which groups of heads the model needs: a study analysis (`Study.analyses`) that knocks out
every head passing a role's check at once, against random sets of heads of the same size.

Why: one head's knock-out (`head_importance`) says little when heads are redundant: four
induction heads in one layer each cost a few points alone, and the circuit they form is never
shown to be the cause. Knocking the whole group out together is the test (Olsson et al. 2022;
Wang et al. 2022 ablate name-mover heads as a group), and a random set of as many heads is its
control: if any heads cost as much, the role is not what the model needs.

A `Group` names the heads from one seed's role scores (head_roles.csv, written by head_roles'
analysis, which must run before this one). Its random sets (`random_sets`): in each layer as
many heads as the group has there, drawn from that layer; where the group fills every layer it
touches (so the same layer holds no other set), as many heads drawn from the whole model. Never
the group itself. A head is knocked out as in `head_importance` (its output × 0 before W_o).

Per seed of the group's variant this measures, on the eval split (`head_importance`'s
examples), and returns as values an expectation can judge (`Section.values`, the metric names
from `metric_names`): the metric without the group, its mean over DRAWS random sets, and the
random sets' share of the group's drop (their mean drop over the group's, the group's floored
at head_importance.SMALL so that a group that costs nothing leaves no ratio to divide by 0).
Writes every set's value into `group_knockout.csv`; the markdown reports each with its mean and
95 % interval over seeds.
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from transformer_jax.studies.analysis import head_importance, head_roles
from transformer_jax.studies.analysis.restore import finished_run_dirs, restore_variant
from transformer_jax.studies.checks import Section
from transformer_jax.studies.render.markdown import markdown_table
from transformer_jax.studies.judge.stats import interval_of_mean

CSV_FILE = "group_knockout.csv"
DRAWS = 16  # random sets per group and seed
DRAW_SEED = 8_000_011  # np.random.default_rng([DRAW_SEED, seed, group index])


@dataclasses.dataclass(frozen=True)
class Group:
    """The heads of `variant` knocked out together: where `select` is true. `select` takes one
    seed's role scores ({'previous_token', 'prefix_matching'}: [L, H] each, head_importance.
    role_scores) and returns bool [L, H]. `name` makes the metrics' names (metric_names)."""
    name: str
    text: str
    variant: str
    select: Callable[[Mapping[str, np.ndarray]], np.ndarray]


def metric_names(group: str, metric: str = "accuracy") -> dict[str, str]:
    """The per-seed values a group's knock-out gives, by what they are: 'without' (the metric
    with the group out), 'random' (mean over the random sets), 'random_share' (their drop over
    the group's)."""
    return {"without": f"knockout/{group}/{metric}",
            "random": f"knockout/{group}/random_{metric}",
            "random_share": f"knockout/{group}/random_share"}


def random_sets(group: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """bool [draws, L, H]: sets of the group's size other than the group (module docstring);
    none ([0, L, H]) when there is no other set (the group is empty or every head)."""
    num_layers, num_heads = group.shape
    size, per_layer = int(group.sum()), group.sum(1)
    if size == 0 or size == group.size:
        return np.zeros((0,) + group.shape, bool)
    same_layer = bool(np.any((per_layer > 0) & (per_layer < num_heads)))
    found = []
    while len(found) < draws:
        chosen = np.zeros(group.shape, bool)
        if same_layer:
            for layer, count in enumerate(per_layer):
                chosen[layer, rng.choice(num_heads, int(count), replace=False)] = True
        else:
            chosen.flat[rng.choice(group.size, size, replace=False)] = True
        if not np.array_equal(chosen, group):
            found.append(chosen)
    return np.stack(found)


def make_analysis(groups: tuple[Group, ...], metric: str = "accuracy",
                  max_examples: int = head_importance.MAX_EXAMPLES
                  ) -> Callable[[Path, dict], Section]:
    """The analysis for `Study.analyses`, after head_roles' (it reads head_roles.csv)."""
    if metric not in head_importance.METRICS:
        raise ValueError(f"metric={metric!r} is not one of: {', '.join(head_importance.METRICS)}")

    def group_knockout(root: Path, runs: dict) -> Section:
        return analyse(Path(root), runs, groups, metric, max_examples)
    return group_knockout


Head = tuple[int, int]  # (layer, head)
# (group, one seed's role scores, the seed, the group's index among its variant's groups) ->
# ([the group's heads, then each random set's], '') or ([the group's], why no set exists);
# [] leaves the group out of that seed
Plan = Callable[[Any, Mapping[str, np.ndarray], int, int], tuple[list[tuple[Head, ...]], str]]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One seed's knock-outs of one group: the sets (the group first, then the random ones;
    only the group where its control was refused, and `refused` says why) and the metric with
    every head and without each set."""
    sets: tuple[tuple[Head, ...], ...]
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


def heads_of(chosen: np.ndarray) -> tuple[Head, ...]:
    """bool [L, H] -> its (layer, head)s, layer-major."""
    return tuple((int(layer), int(head)) for layer, head in np.argwhere(chosen))


def in_layer(passed: np.ndarray, layer: int) -> np.ndarray:
    """passed [L, H] bool -> the same, true only in `layer` (a group's select: a role's heads of
    one layer)."""
    chosen = np.zeros_like(passed, dtype=bool)
    chosen[layer] = passed[layer]
    return chosen


def plan(group: Group, scores: Mapping[str, np.ndarray], seed: int, index: int
         ) -> tuple[list[tuple[Head, ...]], str]:
    """The group's heads and DRAWS random sets (`random_sets`) for one seed (`Plan`)."""
    picked = np.asarray(group.select(scores), bool)
    rng = np.random.default_rng([DRAW_SEED, seed, index])
    return [heads_of(picked), *(heads_of(s) for s in random_sets(picked, DRAWS, rng))], ""


def measure(restored, rows: Mapping, groups: tuple, metric: str, max_examples: int,
            planner: Plan = plan) -> dict[tuple[str, int], Measured]:
    """(group name, seed) -> Measured, for the groups of the restored variant whose seeds have
    role scores, their sets from `planner`; every set of every seed and group in one
    evaluation (mask 0 of each seed: every head)."""
    cfg = restored.run.model
    shape = (cfg.num_layers, cfg.num_heads)
    planned = {}  # (group name, seed index) -> (sets, why)
    for i, seed in enumerate(restored.seeds):
        scores = head_importance.role_scores(rows, groups[0].variant, seed, shape)
        for g, group in enumerate(groups if scores else ()):
            sets, why = planner(group, scores, seed, g)
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
        masks[i, 1:1 + len(flat)] = _masks(flat, shape)
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


def _masks(sets, shape: tuple[int, int]) -> np.ndarray:
    """[len(sets), L, H]: 0 where a set knocks a head out, else 1."""
    masks = np.ones((len(sets),) + shape, np.float32)
    for k, heads in enumerate(sets):
        for layer, head in heads:
            masks[k, layer, head] = 0.0
    return masks


def measure_variants(root: Path, runs: Mapping, groups: tuple, metric: str, max_examples: int,
                     planner: Plan = plan) -> dict[tuple[str, int], Measured]:
    """`measure` on each variant the groups name that has finished runs."""
    rows = head_importance.read_head_roles(root / head_roles.CSV_FILE)
    dirs = finished_run_dirs(root, runs)
    found: dict[tuple[str, int], Measured] = {}
    for variant in dict.fromkeys(g.variant for g in groups):
        if variant in dirs:
            found.update(measure(restore_variant(dirs[variant]), rows,
                                 tuple(g for g in groups if g.variant == variant), metric,
                                 max_examples, planner))
    return found


def judged_values(found: Mapping[tuple[str, int], Measured], groups: tuple, metric: str,
                  names: Callable[[str, str], dict[str, str]]) -> dict[str, dict]:
    """metric name (`names(group, metric)`) -> (variant, seed) -> value: what an expectation
    judges (`Section.values`)."""
    variant_of = {g.name: g.variant for g in groups}
    values: dict[str, dict] = {}
    for (name, seed), m in found.items():
        for what, value in m.values(metric).items():
            values.setdefault(names(name, metric)[what], {})[(variant_of[name], seed)] = value
    return values


def analyse(root: Path, runs: Mapping, groups: tuple[Group, ...], metric: str = "accuracy",
            max_examples: int = head_importance.MAX_EXAMPLES) -> Section:
    found = measure_variants(root, runs, groups, metric, max_examples)
    if not found:
        return Section("No finished run with head roles to knock groups of heads out of.\n")
    _write_csv(found, groups, metric, root / CSV_FILE)
    return Section(_markdown(found, groups, metric),
                   values=judged_values(found, groups, metric, metric_names))


def heads_text(heads) -> str:
    """((1, 0), (1, 2)) -> 'L1H0 L1H2'."""
    return " ".join(f"L{layer}H{head}" for layer, head in heads)


def _write_csv(found: Mapping[tuple[str, int], Measured], groups, metric: str,
               path: Path) -> None:
    variant_of = {g.name: g.variant for g in groups}
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "group", "set", "heads", "size", "with_all_heads",
                         f"without_set_{metric}", "drop"])
        for (name, seed), m in found.items():
            for k, (chosen, without, drop) in enumerate(zip(m.sets, m.without, m.drops(metric))):
                writer.writerow([variant_of[name], seed, name, "group" if k == 0 else f"random_{k}",
                                 heads_text(chosen), len(chosen), f"{m.with_all:.4f}",
                                 f"{without:.4f}", f"{drop:.4f}"])


def mean_and_interval(values: list[float]) -> str:
    """'0.412 [0.380, 0.444]': the mean of the finite values and its t interval over seeds."""
    finite = np.asarray([v for v in values if np.isfinite(v)])
    if len(finite) < 2:
        return "–" if not len(finite) else f"{finite[0]:.3f} (one seed)"
    low, high = interval_of_mean(finite)
    return f"{finite.mean():.3f} [{low:.3f}, {high:.3f}]"


def _markdown(found: Mapping[tuple[str, int], Measured], groups, metric: str) -> str:
    rows = []
    for group in groups:
        mine = [m for (name, _), m in found.items() if name == group.name]
        if not mine:
            continue
        sizes = sorted({len(m.sets[0]) for m in mine})
        per_seed = [m.values(metric) for m in mine]
        size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        rows.append((group.variant, group.text, size,
                     f"{np.mean([m.with_all for m in mine]):.3f}",
                     *(mean_and_interval([v[what] for v in per_seed])
                       for what in ("without", "random", "random_share"))))
    table = markdown_table(
        ["variant", "group", "heads in it (over seeds)", f"{metric}, all heads",
         f"{metric} without the group", f"without a random set of as many heads ({DRAWS} per "
         "seed)", "random sets' drop / the group's"], rows)
    return "\n".join([
        "### Groups of heads knocked out together", "",
        "Every head that passes a role's check knocked out at once (each seed picks its own, "
        "from head_roles.csv), against random sets of as many heads: in the same layer where it "
        "holds another set, else anywhere in the model. Mean over seeds [95 % interval]. Every "
        f"set and its heads: {CSV_FILE}.", "", table, ""])

"""Final accuracy against depth: a study analysis (`Study.analyses`) and the step-0 probe of the
depth study (`experiments/_depth.py`, in two parts: depth_sweep and depth_deepest).

Variants there are named `<line>_L<depth>`, a line being an architecture, or one of its arms at
another width or learning rate (`<architecture>_w16_lr0.001`). Each point is the mean over seeds
of the final `eval/accuracy`, with its 95 % Student-t interval (`study.interval_of_mean`); a
diverged run counts as DIVERGED_ACCURACY (0) here and is reported (the study's expectations
count it as chance since 06bcce4). Writes `accuracy_by_depth.csv` (architecture: the line's
name, depth, seed, accuracy, diverged) and `accuracy_by_depth.png` (plots.by_depth_figure: one
panel per architecture, a line per arm, the chance level when the study passes it) into the
study dir and returns a markdown table, one row per line.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from transformer_jax.studies.analysis import probes
from transformer_jax.studies import run_values
from transformer_jax.studies import study
from transformer_jax.studies.render.markdown import markdown_table
from transformer_jax.studies.render import bounds, plots
from transformer_jax.studies.render.plots import plot_lines
from transformer_jax.config import Norm

METRIC = "eval/accuracy"
DIVERGED_ACCURACY = 0.0  # what a diverged run counts as here (the expectations: chance)
CSV_FILE, PLOT_FILE = "accuracy_by_depth.csv", "accuracy_by_depth.png"
PROBE_FILE = "probe_token_similarity_by_depth.png"
NAME = re.compile(r"^(?P<architecture>.+)_L(?P<depth>\d+)$")
# A line's name: its architecture, then the width and the learning rate it was trained at where
# they are not the study's (experiments/_depth.py: narrow, at_rate).
ARM = re.compile(r"^(?P<architecture>.+?)(?:_w(?P<width>\d+))?(?:_lr(?P<rate>[\d.e+-]+))?$")
# Architectures of the probe: (norm placement, residual); names as experiments/_depth.py's.
PROBED = {"pre_res": (Norm.PRE, True), "post_res": (Norm.POST, True),
          "res_no_norm": (Norm.NONE, True), "pre_no_res": (Norm.PRE, False)}


def by_depth(runs: Mapping[tuple[str, int], dict]) -> dict[str, dict[int, dict[int, float]]]:
    """architecture -> depth -> seed -> final accuracy (nan: diverged or missing)."""
    out: dict[str, dict[int, dict[int, float]]] = {}
    for (variant, seed), run in runs.items():
        found = NAME.match(variant)
        if found is None:
            raise ValueError(f"variant {variant!r} is not named <architecture>_L<depth>")
        out.setdefault(found["architecture"], {}).setdefault(int(found["depth"]), {})[seed] = \
            run_values.final_value(run, METRIC)
    return out


def accuracy_by_depth(root: Path, runs: Mapping[tuple[str, int], dict],
                      chance: Optional[float] = None, width: Optional[int] = None,
                      rate: Optional[float] = None) -> str:
    """The analysis: writes the csv and the plot into root, returns the markdown table.
    `chance`: the task's chance accuracy, drawn in every panel; `width`, `rate`: the study's
    model width and learning rate, the legend's words for a line that names neither."""
    root = Path(root)
    table = by_depth(runs)
    points = points_of(table)
    _write_csv(table, root / CSV_FILE)
    _plot(points, root / PLOT_FILE, chance, width, rate)
    depths = sorted({d for per_depth in table.values() for d in per_depth})
    header = ["architecture"] + [f"{d} layers" for d in depths]
    rows = []
    for architecture, per_depth in points.items():
        cells = [architecture]
        for d in depths:
            p = per_depth.get(d)
            low, high = bounds.clip_to_bounds(METRIC, p["low"], p["high"]) if p else (0, 0)
            cells.append("–" if p is None else
                         f"{p['mean']:.3f} [{low:.2f}, {high:.2f}]"
                         + (f" ({p['diverged']} diverged)" if p["diverged"] else ""))
        rows.append(cells)
    clipped = any(bounds.reaches_past_bounds(METRIC, p["low"], p["high"])
                  for per_depth in points.values() for p in per_depth.values())
    lines = ["### Accuracy by depth", "",
             f"Final {METRIC}, mean over seeds [95 % Student-t interval]; a diverged run counts "
             f"as {DIVERGED_ACCURACY}. Per seed: {CSV_FILE}."
             + (f" {bounds.CLIPPED_NOTE}" if clipped else ""), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", f"![accuracy by depth]({PLOT_FILE})", ""]
    return "\n".join(lines)


def _point(per_seed: Mapping[int, float]) -> dict[str, float]:
    values = np.array([v if math.isfinite(v) else DIVERGED_ACCURACY for v in per_seed.values()])
    low, high = study.interval_of_mean(values)
    return {"mean": float(values.mean()), "low": low, "high": high,
            "diverged": sum(not math.isfinite(v) for v in per_seed.values()),
            "runs": len(values)}


def _write_csv(table, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["architecture", "depth", "seed", "accuracy", "diverged"])
        for architecture, per_depth in table.items():
            for depth, per_seed in sorted(per_depth.items()):
                for seed, value in sorted(per_seed.items()):
                    writer.writerow([architecture, depth, seed,
                                     f"{value:.4f}" if math.isfinite(value) else "",
                                     int(not math.isfinite(value))])


def arms_of(points, width: Optional[int] = None, rate: Optional[float] = None
            ) -> dict[str, dict[tuple[str, str], dict[int, dict[str, float]]]]:
    """`points_of`'s lines split by ARM: architecture -> (width words, rate words) -> depth ->
    point; 'pre_res_w16_lr0.001' is pre_res's arm ('width 16', 'lr 0.001'), 'pre_res' its arm
    at the study's `width` and `rate` (named so where they are not given). A point whose every
    seed diverged is "failed": the figure draws no value for it (the table's mean counts each
    as DIVERGED_ACCURACY)."""
    words = (f"width {width}" if width else "the study's width",
             f"lr {rate:g}" if rate else "the study's lr")
    out: dict[str, dict[tuple[str, str], dict[int, dict[str, float]]]] = {}
    for line, per_depth in points.items():
        found = ARM.match(line)
        arm = (f"width {found['width']}" if found["width"] else words[0],
               f"lr {found['rate']}" if found["rate"] else words[1])
        out.setdefault(found["architecture"], {})[arm] = {  # every seed diverged: no value
            d: {**p, "failed": p["diverged"] == p["runs"]} for d, p in per_depth.items()}
    return out


def _plot(points, path: Path, chance: Optional[float] = None, width: Optional[int] = None,
          rate: Optional[float] = None) -> list[str]:
    """Writes the figure (plots.by_depth_figure: one panel per architecture, its arms' lines
    broken where a depth was not run); returns the architectures drawn, in order."""
    panels = arms_of(points, width, rate)
    plots.plot_by_depth(path, panels, metric=METRIC, chance=chance,
                        interval_words="bar: 95 % t-interval over seeds (the verdicts'), clipped "
                                       "to [0, 1]")
    return list(panels)


def read_csv(path: Path) -> dict[str, dict[int, dict[int, float]]]:
    """`by_depth`'s table back from the csv `_write_csv` wrote (nan: diverged), so that the
    figure can be drawn again from committed results."""
    out: dict[str, dict[int, dict[int, float]]] = {}
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            out.setdefault(row["architecture"], {}).setdefault(int(row["depth"]), {})[
                int(row["seed"])] = float(row["accuracy"]) if row["accuracy"] else math.nan
    return out


def points_of(table) -> dict[str, dict[int, dict[str, float]]]:
    return {a: {d: _point(per_seed) for d, per_seed in sorted(depths.items())}
            for a, depths in table.items()}


def write_probes(root: Path, depth: int = 24) -> str:
    """Token similarity after each layer at initialization, every architecture of the study
    (probes.token_similarity_by_depth: 64-wide encoder on random tokens)."""
    curves = {name: probes.token_similarity_by_depth(residual, depth, norm=norm)
              for name, (norm, residual) in PROBED.items()}
    layers = list(range(depth + 1))
    plot_lines(Path(root) / PROBE_FILE, {k: (layers, v) for k, v in curves.items()},
                      title="token similarity at init", xlabel="layer",
                      ylabel="mean pairwise cosine")
    shown = sorted({l for l in (0, 1, 2, 6, 12, 24, 48) if l < depth} | {depth})
    rows = [(name, *(float(curves[name][l]) for l in shown)) for name in curves]
    table = markdown_table(["architecture"] + [f"after layer {l}" for l in shown], rows)
    return (f"Mean pairwise cosine similarity of token vectors, {depth}-layer encoder at "
            "initialization (1 = every token the same vector: rank collapse).\n\n"
            f"{table}\n\n![similarity]({PROBE_FILE})")

"""Final accuracy against depth: a study analysis (`Study.analyses`) and the step-0 probe of the
depth study (`experiments/depth.py`).

Variants there are named `<architecture>_L<depth>`; the analysis groups them back into one line
per architecture. Each point is the mean over seeds of the final `eval/accuracy`, with its 95 %
Student-t interval (`study.interval_of_mean`); a diverged run counts as accuracy 0, as the
study's expectations count it, and is reported. Writes `accuracy_by_depth.csv` (architecture,
depth, seed, accuracy, diverged) and `accuracy_by_depth.png` into the study dir and returns a
markdown table.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Mapping

import numpy as np

from transformer_jax.studies.analysis import probes
from transformer_jax.studies.markdown import markdown_table
from transformer_jax.studies import bounds, plots
from transformer_jax.studies.plots import plot_lines
from transformer_jax.studies import report
from transformer_jax.studies import study
from transformer_jax.config import Norm
from transformer_jax.train.figures import file_pyplot

METRIC = "eval/accuracy"
DODGE = 0.06  # how far apart (in log2 layers) the architectures' points sit at one depth
DODGE_SPAN = 0.36  # at most this far from the first to the last (many lines: closer together)
DIVERGED_ACCURACY = 0.0  # what a diverged run counts as (experiments/depth.py: FAILED)
CSV_FILE, PLOT_FILE = "accuracy_by_depth.csv", "accuracy_by_depth.png"
PROBE_FILE = "probe_token_similarity_by_depth.png"
NAME = re.compile(r"^(?P<architecture>.+)_L(?P<depth>\d+)$")
# Architectures of the probe: (norm placement, residual); names as experiments/depth.py's.
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
            report.final_value(run, METRIC)
    return out


def accuracy_by_depth(root: Path, runs: Mapping[tuple[str, int], dict]) -> str:
    """The analysis: writes the csv and the plot into root, returns the markdown table."""
    root = Path(root)
    table = by_depth(runs)
    points = points_of(table)
    _write_csv(table, root / CSV_FILE)
    _plot(points, root / PLOT_FILE)
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
            "diverged": sum(not math.isfinite(v) for v in per_seed.values())}


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


def _plot(points, path: Path) -> list[str]:
    """Writes the figure; returns the architectures drawn, in order (one line each). Each
    point's 95 % interval is an error bar, clipped to [0, 1] (bounds.CLIPPED_NOTE); the
    architectures sit side by side at each depth (bands of six lines would overlap)."""
    plt = file_pyplot()

    fig, ax = plt.subplots()
    styles = plots.variant_styles({a: {} for a in points})
    for k, (architecture, per_depth) in enumerate(points.items()):
        depths = np.array(sorted(per_depth))
        mean = np.array([per_depth[d]["mean"] for d in depths])
        low, high = bounds.clip_to_bounds(METRIC, np.array([per_depth[d]["low"] for d in depths]),
                                          np.array([per_depth[d]["high"] for d in depths]))
        step = min(DODGE, DODGE_SPAN / max(len(points) - 1, 1))
        dodge = 2.0 ** (step * (k - (len(points) - 1) / 2))  # x is log 2: a constant shift
        ax.errorbar(depths * dodge, mean, yerr=[mean - low, high - mean], capsize=3,
                    label=architecture, **styles[architecture])
    ax.set_xscale("log", base=2)
    all_depths = sorted({d for per_depth in points.values() for d in per_depth})
    ax.set_xticks(all_depths, [str(d) for d in all_depths])
    ax.set_title("final accuracy by depth", fontsize=12)
    ax.set(xlabel="layers (log scale)", ylabel=f"final {METRIC} [fraction]", ylim=(-0.02, 1.02))
    ax.grid(alpha=0.3)
    # Below the axes, three to a row: a legend beside them squeezed the axes once the study had
    # twenty lines. The figure grows by the legend's rows, so the axes keep their height.
    rows = -(-len(points) // 3)
    axes_in, label_in, top_in, legend_in = 2.65, 0.55, 0.4, 0.5 + 0.22 * rows  # inches
    height = top_in + axes_in + label_in + legend_in
    fig.set_size_inches(8.5, height)
    fig.subplots_adjust(left=0.09, right=0.98, top=1 - top_in / height,
                        bottom=(label_in + legend_in) / height)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -label_in / axes_in),
              title_fontsize=9, ncol=min(3, len(points)),
              title="architecture (bar: 95 % t-interval over seeds, the verdicts', clipped to "
                    "[0, 1])")
    fig.savefig(path, dpi=plots.DPI, bbox_inches="tight")  # the legend's longest names too
    plt.close(fig)
    return [text.get_text() for text in ax.get_legend().get_texts()]


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

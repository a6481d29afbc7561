"""A study's curves as a figure a reader could put in a paper: one panel per metric, each
variant's mean over seeds with its seeds' min–max shaded, labelled axes, a log scale where a
panel spans decades, one legend outside the data, and colour *and* line style per variant (a
study of 7 variants stays readable in grey print).
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

LOG_SCALE_RATIO = 50.0  # a panel whose positive values span more than this goes log-scale
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
COLUMNS = 3  # panels per row

# The y-axis label of a metric, by the last part of its tag (units in brackets).
Y_LABELS = {
    "loss": "cross-entropy [nats/token]",
    "accuracy": "accuracy [fraction]",
    "seq_accuracy": "sequence accuracy [fraction]",
    "bits_per_char": "bits per character",
    "bits_per_token": "bits per token",
    "grad_norm": "gradient norm [global L2]",
    "param_norm": "parameter norm [global L2]",
    "update_norm": "update norm [global L2]",
    "entropy": "attention entropy [nats]",
    "max_weight": "max attention weight",
    "max_abs_logit": "max |attention logit|",
    "learning_rate": "learning rate",
    "steps_per_sec": "steps/s",
}


def y_label(metric: str) -> str:
    """'eval/loss' -> 'cross-entropy [nats/token]'; the tag itself if its kind is unknown."""
    parts = metric.split("/")
    for part in reversed(parts):
        if part in Y_LABELS:
            return Y_LABELS[part]
    return parts[-1]


def wants_log_scale(metric: str, values: Sequence[np.ndarray]) -> bool:
    """Log scale when the panel's positive values span more than LOG_SCALE_RATIO and none is
    ≤ 0 (a fraction such as accuracy stays linear: its decades mean little)."""
    if "accuracy" in metric:
        return False
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    if not finite.size or np.any(finite <= 0):
        return False
    return float(finite.max() / finite.min()) > LOG_SCALE_RATIO


def seed_curves(runs: Mapping[tuple[str, int], dict[str, Any]], variant: str,
                seeds: Sequence[int], metric: str) -> tuple[list[int], np.ndarray]:
    """(steps, values [seeds, steps]) of one variant's metric, nan where a seed has no point."""
    curves = [dict(runs[(variant, s)]["curves"].get(metric, [])) for s in seeds]
    steps = sorted(set().union(*curves))
    return steps, np.array([[c.get(t, np.nan) for t in steps] for c in curves], float)


def plot_curves(study, runs: Mapping[tuple[str, int], dict[str, Any]], path: Path) -> None:
    """`curves_figure`, written to `path` (PNG)."""
    import matplotlib.pyplot as plt

    fig = curves_figure(study, runs)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def curves_figure(study, runs: Mapping[tuple[str, int], dict[str, Any]]):
    """One panel per metric of `study`: each variant's mean over seeds, shaded between its
    seeds' min and max (`runs`: report.collect's (variant, seed) -> {'curves': ...})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.lines
    import matplotlib.pyplot as plt

    metrics = list(study.metrics)
    variants = list(study.variants)
    cols = min(COLUMNS, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    colours = plt.get_cmap("tab10").colors
    styles = {v: dict(color=colours[i % len(colours)], linestyle=LINE_STYLES[i % len(LINE_STYLES)],
                      marker=MARKERS[i % len(MARKERS)])
              for i, v in enumerate(variants)}
    for ax, metric in zip(axes.flat, metrics):
        plotted = []
        for variant in variants:
            steps, values = seed_curves(runs, variant, study.seeds, metric)
            if not steps:
                continue
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-nan: a diverged seed
                mean, low, high = (np.nanmean(values, 0), np.nanmin(values, 0),
                                   np.nanmax(values, 0))
            every = max(1, len(steps) // 8)  # a few markers per curve, not one per point
            ax.plot(steps, mean, label=variant, linewidth=1.6, markersize=4, markevery=every,
                    **styles[variant])
            if len(study.seeds) > 1:
                ax.fill_between(steps, low, high, color=styles[variant]["color"], alpha=0.15,
                                linewidth=0)
            plotted += [mean, low, high]
        if wants_log_scale(metric, plotted):
            ax.set_yscale("log")
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel(y_label(metric))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles = [matplotlib.lines.Line2D([], [], linewidth=1.6, markersize=5, **styles[v])
               for v in variants]
    band = (f"line: mean over seeds {list(study.seeds)}; shaded: the seeds' min–max"
            if len(study.seeds) > 1 else f"seed {study.seeds[0]}")
    fig.suptitle(f"{study.name} — {band}", fontsize=11)
    fig.legend(handles, variants, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(variants), 4), frameon=False, title="variant")
    fig.tight_layout()
    return fig

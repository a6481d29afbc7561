"""A study's curves as a figure a reader could put in a paper: one panel per metric, each
variant's mean over seeds with the verdicts' interval shaded (the 95 % Student-t interval of the
mean over seeds, `stats.mean_interval`, clipped to the metric's range), labelled axes, a log scale where a
panel spans decades, one legend outside the data, and colour *and* line style per variant (a
study of 7 variants stays readable in grey print).

Colours follow the design (`variant_styles`): variants that share the value of one override
(qk_norm's learning rate, positions' scheme) share a hue, in shades, and the line style tells
the arm (what else differs); each variant has its own marker. A curve drawn earlier is drawn
wider, with bigger markers, so that one hidden under an identical later curve still shows.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from transformer_jax.train.figures import file_pyplot
from transformer_jax.studies import bounds, stats

LOG_SCALE_RATIO = 50.0  # a panel whose positive values span more than this goes log-scale
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
COLUMNS = 3  # panels per row
BAND_WORDS = "band: 95 % t-interval of the mean over seeds (the verdicts'), clipped to the metric's range"
DPI = 150  # a 4.6-inch panel is ~700 pixels: sharp in a page, legible printed at column width
# Font sizes (points) of a panel 4.6 inches wide: a figure of three scaled to a page's 6.5
# inches keeps its tick labels at ~6 points and its labels at ~7, matplotlib's defaults at 4.5.
FONT = dict(title=12, label=12, ticks=11, legend=11)

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
    "entropy": "entropy / ln(keys) [1 = uniform]",  # normalized (train/steps.py), not nats
    "max_weight": "max attention weight",
    "max_abs_logit": "max |attention logit|",
    "learning_rate": "learning rate",
    "steps_per_sec": "steps/s",
}


# Hues of the variant groups (tab10's, grey and olive left out: grey is the shade of "no
# colour", olive sits next to green); a group's members get shades of its hue.
HUES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SHADES = (-0.3, 0.45)  # a group's shades: this far towards black, to this far towards white
WIDTHS = (2.4, 1.2)  # line width of the first and of the last variant drawn
MARKER_SIZES = (6.5, 3.5)
_BASE = "(base)"  # the value of an override a variant does not set
MAX_GROUP_COLUMNS = 6  # legend: one column per hue group up to this many groups


def _shade(colour: str, t: float) -> tuple[float, float, float]:
    """`colour` mixed towards black (t < 0) or white (t > 0) by |t|."""
    import matplotlib.colors
    rgb = np.array(matplotlib.colors.to_rgb(colour))
    return tuple(rgb + (1 - rgb) * t if t > 0 else rgb * (1 + t))


def hue_key(variants: Mapping[str, Mapping[str, Any]]) -> Optional[str]:
    """The override whose value groups the variants: one that varies and that some variants
    share (fewer distinct values than variants); of those the one with the most values, a
    number first on a tie (a learning rate or batch size, not a switch). None: no such key."""
    keys = list(dict.fromkeys(k for o in variants.values() for k in o))
    values = {k: [repr(o.get(k, _BASE)) for o in variants.values()] for k in keys}
    shared = [k for k in keys if 1 < len(set(values[k])) < len(variants)]
    numeric = lambda k: all(isinstance(o.get(k), numbers.Number) and not  # noqa: E731
                            isinstance(o.get(k), bool) for o in variants.values())
    return max(shared, key=lambda k: (len(set(values[k])), numeric(k)), default=None)


def variant_styles(variants: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """variant -> matplotlib line keywords (color, linestyle, marker, linewidth, markersize).
    `variants`: name -> overrides, in drawing order. Grouped by `hue_key`: a group's hue, one
    shade per member; line style by the arm (the other overrides' values). Without a key each
    variant has its own hue and the line styles cycle."""
    names = list(variants)
    key = hue_key(variants)
    if key is None:
        group = {v: i for i, v in enumerate(names)}
        arm = dict(group)
    else:
        value = lambda v: repr(variants[v].get(key, _BASE))  # noqa: E731
        rest = lambda v: repr(sorted((k, repr(x)) for k, x in variants[v].items()  # noqa: E731
                                     if k != key))
        group_ids = list(dict.fromkeys(map(value, names)))
        arm_ids = list(dict.fromkeys(map(rest, names)))
        group = {v: group_ids.index(value(v)) for v in names}
        arm = {v: arm_ids.index(rest(v)) for v in names}
    members = {g: [v for v in names if group[v] == g] for g in set(group.values())}
    last = max(len(names) - 1, 1)
    between = lambda ends, i: ends[0] + (ends[1] - ends[0]) * i / last  # noqa: E731
    styles = {}
    for i, v in enumerate(names):
        same = members[group[v]]
        t = (0.0 if len(same) == 1 else
             SHADES[0] + (SHADES[1] - SHADES[0]) * same.index(v) / (len(same) - 1))
        styles[v] = dict(color=_shade(HUES[group[v] % len(HUES)], t),
                         linestyle=LINE_STYLES[arm[v] % len(LINE_STYLES)],
                         marker=MARKERS[i % len(MARKERS)],
                         linewidth=between(WIDTHS, i), markersize=between(MARKER_SIZES, i))
    return styles


def legend_entries(variants: Mapping[str, Mapping[str, Any]], styles: Mapping[str, dict]):
    """(handles, labels, columns, title) of the figure's legend: one column per hue group when
    there are few (blank entries pad the shorter ones), else 4 columns in drawing order."""
    import matplotlib.lines

    key = hue_key(variants)
    groups = {}
    for v in variants:
        groups.setdefault(repr(variants[v].get(key, _BASE)) if key else v, []).append(v)
    line = lambda v: matplotlib.lines.Line2D([], [], **styles[v])  # noqa: E731
    if key is None or len(groups) > MAX_GROUP_COLUMNS:
        return ([line(v) for v in variants], list(variants), min(len(variants), 4),
                "variant" + (f" (colour: {key}; line style: the other overrides)" if key else ""))
    rows = max(map(len, groups.values()))
    handles, labels = [], []
    for members in groups.values():  # the legend fills column by column
        handles += [line(v) for v in members] + [matplotlib.lines.Line2D([], [], alpha=0)] * (
            rows - len(members))
        labels += members + [""] * (rows - len(members))
    return handles, labels, len(groups), (f"variant (colour: {key}; line style: the other "
                                          f"overrides)")


def eval_lengths_note(study) -> str:
    """'\\nlengths 9–32, unseen (trained on 1–8)', a second title line for the eval panels of a
    synthetic study whose eval lengths are not its training lengths (from the base config's
    data, when no variant changes them); '' otherwise."""
    base = getattr(study, "base", None)
    data = base.get("data") if base is not None else None
    if data is None or data.get("kind", "synthetic") != "synthetic" or any(
            "len" in k for o in study.variants.values() for k in o if k.startswith("data.")):
        return ""
    from transformer_jax.data import DataConfig
    d = DataConfig.from_config(data)
    if (d.eval_min_len, d.eval_seq_len) == (d.min_len, d.seq_len):
        return ""
    unseen = ", unseen" if d.eval_min_len > d.seq_len else ""
    return (f"\nlengths {d.eval_min_len}–{d.eval_seq_len}{unseen} "
            f"(trained on {d.min_len}–{d.seq_len})")


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


def seed_band(values: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) per step of `values` [seeds, steps]: the mean over the seeds with a
    finite value there, and the 95 % t-interval of that mean (stats.mean_interval, the interval
    the verdicts use) clipped to the metric's range; nan where fewer than 2 seeds are finite
    (no interval: one seed has no spread to measure)."""
    values = np.asarray(values, float)
    mean, low, high = (np.full(values.shape[1], np.nan) for _ in range(3))
    for t in range(values.shape[1]):
        finite = values[np.isfinite(values[:, t]), t]
        if finite.size:
            mean[t] = finite.mean()
        if finite.size > 1:
            low[t], high[t] = stats.mean_interval(finite)
    low, high = bounds.clip_to_bounds(metric, low, high)
    return mean, low, high


def plot_curves(study, runs: Mapping[tuple[str, int], dict[str, Any]], path: Path) -> None:
    """`curves_figure`, written to `path` (PNG)."""
    import matplotlib.pyplot as plt

    fig = curves_figure(study, runs)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def curves_figure(study, runs: Mapping[tuple[str, int], dict[str, Any]]):
    """One panel per metric of `study`: each variant's mean over seeds, shaded over its 95 %
    t-interval (`seed_band`; `runs`: report.collect's (variant, seed) -> {'curves': ...})."""
    import matplotlib.lines
    plt = file_pyplot()

    metrics = list(study.metrics)
    variants = list(study.variants)
    cols = min(COLUMNS, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    styles = variant_styles(study.variants)
    eval_note = eval_lengths_note(study)
    for ax, metric in zip(axes.flat, metrics):
        plotted = []
        for variant in variants:
            steps, values = seed_curves(runs, variant, study.seeds, metric)
            if not steps:
                continue
            mean, low, high = seed_band(values, metric)
            every = max(1, len(steps) // 8)  # a few markers per curve, not one per point
            ax.plot(steps, mean, label=variant, markevery=every, **styles[variant])
            if len(study.seeds) > 1:
                ax.fill_between(steps, low, high, color=styles[variant]["color"], alpha=0.15,
                                linewidth=0)
            plotted += [mean, high]  # (a band clipped to 0 would keep a loss panel linear)
        if wants_log_scale(metric, plotted):
            ax.set_yscale("log")
        ax.set_title(metric + (eval_note if metric.startswith("eval/") else ""),
                     fontsize=FONT["title"])
        ax.set_xlabel("training step", fontsize=FONT["label"])
        ax.set_ylabel(y_label(metric), fontsize=FONT["label"])
        ax.tick_params(labelsize=FONT["ticks"])
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles, labels, columns, title = legend_entries(study.variants, styles)
    band = (f"line: mean over seeds {list(study.seeds)}; {BAND_WORDS}"
            if len(study.seeds) > 1 else f"seed {study.seeds[0]}")
    fig.suptitle(study.name, fontsize=FONT["title"] + 1)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns,
               frameon=False, title=f"{title}\n{band}", fontsize=FONT["legend"],
               title_fontsize=FONT["legend"])
    fig.tight_layout()
    return fig


def plot_lines(path: Path, series: dict[str, tuple[Sequence[float], Sequence[float]]], *,
               title: str, xlabel: str, ylabel: str, logy: bool = False) -> None:
    """One line per series {label: (x, y)}, dots on the points (a probe's or an analysis's)."""
    plt = file_pyplot()

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for label, (x, y) in series.items():
        ax.plot(x, y, marker="o", label=label)
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)

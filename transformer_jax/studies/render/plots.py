"""A study's curves as a figure a reader could put in a paper: one panel per metric (per metric
and task where the variants learn several, each accuracy panel with its chance level), each
variant's mean over seeds with the verdicts' interval shaded (the 95 % Student-t interval of the
mean over seeds, `stats.mean_interval`, clipped to the metric's range and to the values drawn),
labelled axes, a log scale where a panel spans decades (its line the geometric mean and its band
the interval of the log values: the scale it is drawn on), one legend outside the data, and
colour *and* line style per variant (a study of 7 variants stays readable in grey print).

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
from transformer_jax.studies.judge import stats
from transformer_jax.studies.render import bounds, verdict_text

LOG_SCALE_RATIO = 50.0  # a panel whose positive values span more than this goes log-scale
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
COLUMNS = 3  # panels per row
BAND_WORDS = ("band: 95 % t-interval of the mean over seeds (the verdicts'; on a log axis, of the "
              "log values), clipped to the metric's range and to the values drawn")
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


def seed_band(values: np.ndarray, metric: str, log: bool = False
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) per step of `values` [seeds, steps]: the mean over the seeds with a
    finite value there, and the 95 % t-interval of that mean (stats.mean_interval, the interval
    the verdicts use) clipped to the metric's range; nan where fewer than 2 seeds are finite
    (no interval: one seed has no spread to measure). `log`: on the log values, the scale a log
    axis draws (the geometric mean and its interval, back-transformed), so a band of a positive
    quantity stays positive and symmetric on the axis; a value ≤ 0 counts as missing there."""
    values = np.asarray(values, float)
    if log:
        values = np.log(np.where(values > 0, values, np.nan))
    mean, low, high = (np.full(values.shape[1], np.nan) for _ in range(3))
    for t in range(values.shape[1]):
        finite = values[np.isfinite(values[:, t]), t]
        if finite.size:
            mean[t] = finite.mean()
        if finite.size > 1:
            low[t], high[t] = stats.mean_interval(finite)
    if log:
        mean, low, high = np.exp(mean), np.exp(low), np.exp(high)
    low, high = bounds.clip_to_bounds(metric, low, high)
    return mean, low, high


Band = tuple[list[int], np.ndarray, np.ndarray, np.ndarray]  # steps, mean, low, high


def panel_bands(study, runs, metric: str, variants: Sequence[str]
                ) -> tuple[dict[str, Band], bool]:
    """Each variant's curve and band in one panel, and whether the panel is on a log axis:
    decided on every seed's values (wants_log_scale), the bands then computed on that scale
    (seed_band) and kept within the range of the values drawn, so that no band reaches below
    the lowest value in the panel (nor above the highest)."""
    curves = {v: seed_curves(runs, v, study.seeds, metric) for v in variants}
    curves = {v: c for v, c in curves.items() if c[0]}
    log = wants_log_scale(metric, [values.ravel() for _, values in curves.values()])
    finite = np.concatenate([values[np.isfinite(values)] for _, values in curves.values()]
                            or [np.array([])])
    bands = {}
    for variant, (steps, values) in curves.items():
        mean, low, high = seed_band(values, metric, log)
        if finite.size:
            low, high = (np.clip(x, finite.min(), finite.max()) for x in (low, high))
        bands[variant] = (steps, mean, low, high)
    return bands, log


def variant_tasks(study) -> dict[str, Optional[str]]:
    """variant -> the generated task it learns ('order', 'sort'); None on text, or for a study
    without configs."""
    from transformer_jax.data import DataConfig
    if not hasattr(study, "config"):
        return {v: None for v in study.variants}
    found = {}
    for variant in study.variants:
        data = study.config(variant, study.seeds[0]).get("data", {})
        synthetic = data.get("kind", DataConfig.kind) == "synthetic"
        found[variant] = data.get("task", DataConfig.task) if synthetic else None
    return found


def panels(study) -> list[tuple[str, Optional[str], list[str]]]:
    """(metric, task, its variants) per panel: one per metric; where the variants learn more
    than one task (positions: encoders `order`, decoders `sort`), one per metric and task, as
    their chance levels and losses differ."""
    tasks = variant_tasks(study)
    names = list(dict.fromkeys(tasks.values()))
    if len(names) < 2:
        return [(metric, None, list(study.variants)) for metric in study.metrics]
    return [(metric, task, [v for v in study.variants if tasks[v] == task])
            for metric in study.metrics for task in names]


def chance_level(study, variants: Sequence[str], metric: str) -> Optional[float]:
    """A uniform guess's accuracy on the variants' task, for an accuracy panel (None: another
    metric, a task whose chance is not known without its data, or variants that differ)."""
    if metric.split("/")[-1] != "accuracy" or not hasattr(study, "config"):
        return None
    from transformer_jax import data
    found = {data.chance_accuracy(study.config(v, study.seeds[0]).data) for v in variants}
    return found.pop() if len(found) == 1 else None


def plot_curves(study, runs: Mapping[tuple[str, int], dict[str, Any]], path: Path,
                machine: str = "", size: Optional[str] = None) -> None:
    """`curves_figure`, written to `path` (PNG); `machine`: the CPU that trained the runs;
    `size`: the --size they were trained at."""
    import matplotlib.pyplot as plt

    fig = curves_figure(study, runs, machine, size)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def size_line(size: Optional[str]) -> str:
    """'\\n(trained at --size=tiny: a smoke run, not evidence)'; '' at the default size."""
    words = verdict_text.at_size(size, "trained")
    return f"\n({words})" if words else ""


def curves_figure(study, runs: Mapping[tuple[str, int], dict[str, Any]], machine: str = "",
                  size: Optional[str] = None):
    """One panel per metric of `study` (per metric and task, `panels`): each variant's mean
    over seeds, shaded over its 95 % t-interval (`panel_bands`; `runs`: report.collect's
    (variant, seed) -> {'curves': ...}), an accuracy's chance level drawn. Curves trained at a
    --size other than the default say so in the title, as the verdict does: twenty steps of a
    tiny run look like a result."""
    plt = file_pyplot()

    found = panels(study)
    split = found[0][1] is not None
    cols = len({task for _, task, _ in found}) if split else min(COLUMNS, len(found))
    rows = math.ceil(len(found) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    styles = variant_styles(study.variants)
    eval_note = eval_lengths_note(study)
    for ax, (metric, task, variants) in zip(axes.flat, found):
        _draw_panel(ax, study, runs, metric, variants, styles)
        ax.set_title(metric + (f" · task {task}" if task else "")
                     + (eval_note if metric.startswith("eval/") else ""), fontsize=FONT["title"])
    for ax in list(axes.flat)[len(found):]:
        ax.set_visible(False)
    handles, labels, columns, title = legend_entries(study.variants, styles)
    seeds = verdict_text.seed_list(list(study.seeds))
    band = (f"line: mean over seeds {seeds} (geometric on a log axis)\n{BAND_WORDS}"
            if len(study.seeds) > 1 else f"seed {study.seeds[0]}")
    fig.suptitle(study.name + (f"\ntrained on {machine}" if machine else "") + size_line(size),
                 fontsize=FONT["title"] + 1)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns,
               frameon=False, title=f"{title}\n{band}", fontsize=FONT["legend"],
               title_fontsize=FONT["legend"])
    fig.tight_layout()
    return fig


def _draw_panel(ax, study, runs, metric: str, variants: Sequence[str], styles) -> None:
    """One panel: the variants' curves and bands (`panel_bands`), the chance level."""
    bands, log = panel_bands(study, runs, metric, variants)
    for variant, (steps, mean, low, high) in bands.items():
        every = max(1, len(steps) // 8)  # a few markers per curve, not one per point
        ax.plot(steps, mean, label=variant, markevery=every, **styles[variant])
        if len(study.seeds) > 1:
            ax.fill_between(steps, low, high, color=styles[variant]["color"], alpha=0.15,
                            linewidth=0)
    if log:
        ax.set_yscale("log")
    chance = chance_level(study, variants, metric)
    if chance is not None:
        ax.axhline(chance, color="black", lw=1.0, ls=":", gid="chance")
        ax.annotate(f"chance {chance:.3g}", (1.0, chance), xycoords=("axes fraction", "data"),
                    xytext=(-3, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=FONT["ticks"] - 2)
    ax.set_xlabel("training step", fontsize=FONT["label"])
    ax.set_ylabel(y_label(metric), fontsize=FONT["label"])
    ax.tick_params(labelsize=FONT["ticks"])
    ax.grid(alpha=0.3)


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


# The by-depth figure: an arm is (colour words, line-style words), e.g. ("width 16", "lr 0.001")
Point = Mapping[str, Any]  # {"mean", "low", "high"}: a mean over seeds, its interval; "failed"
Arm = tuple[str, str]
DEPTH_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
DEPTH_MARKERS = ("o", "s", "^", "D")
DEPTH_DODGE = 0.06  # how far apart (in log2 layers) the arms' points sit at one depth
FAILED_WORDS = "no value: every seed diverged"


def depth_styles(arms: Sequence[Arm]) -> dict[Arm, dict[str, Any]]:
    """arm -> line keywords, in the legend's order (by colour, then line style): colour and
    marker by its first words, line style by its second; a point alone shows no line style, so
    the marker is hollow for every second one."""
    colours = list(dict.fromkeys(a[0] for a in arms))
    kinds = list(dict.fromkeys(a[1] for a in arms))
    styles = {}
    for a in sorted(arms, key=lambda a: (colours.index(a[0]), kinds.index(a[1]))):
        c, k = colours.index(a[0]), kinds.index(a[1])
        styles[a] = dict(color=DEPTH_COLOURS[c % len(DEPTH_COLOURS)],
                         marker=DEPTH_MARKERS[c % len(DEPTH_MARKERS)],
                         linestyle=LINE_STYLES[k % len(LINE_STYLES)], linewidth=1.8,
                         markersize=6, **({"markerfacecolor": "white"} if k % 2 else {}))
    return styles


def by_depth_figure(panels: Mapping[str, Mapping[Arm, Mapping[int, Point]]], *, metric: str,
                    chance: Optional[float] = None, interval_words: str = ""):
    """Small multiples of `metric` against depth: one panel per architecture (`panels`' keys),
    one line per arm in it (`depth_styles`), each point a mean with its interval as an error
    bar, clipped to the metric's range; a point marked "failed" (every seed diverged) has no
    value and is a cross on the axis' floor. A line joins two depths only where both have a
    value and they are next to each other among all the figure's depths: a depth an arm did not
    run breaks its line (a nan in its data), so no line claims a value between runs 2 and 96
    layers apart. The chance level is dotted in every panel; x is log 2, shared by all."""
    plt = file_pyplot()

    depths = sorted({d for arms in panels.values() for arm in arms.values() for d in arm})
    styles = depth_styles(list(dict.fromkeys(a for per_arm in panels.values() for a in per_arm)))
    arms = list(styles)
    lowest = bounds.metric_bounds(metric)[0]
    floor = lowest if math.isfinite(lowest) else 0.0  # where a point without a value is marked
    cols = min(COLUMNS, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False,
                             sharex=True, sharey=True)
    for ax, (architecture, per_arm) in zip(axes.flat, panels.items()):
        for arm, points in per_arm.items():
            dodge = 2.0 ** (DEPTH_DODGE * (arms.index(arm) - (len(arms) - 1) / 2))
            x = np.array(depths, float) * dodge  # x is log 2: a constant shift
            failed = np.array([bool(points.get(d, {}).get("failed")) for d in depths])
            valued = {d: p for d, p in points.items() if not p.get("failed")}
            mean, low, high = (np.array([valued[d][k] if d in valued else np.nan for d in depths])
                               for k in ("mean", "low", "high"))
            low, high = bounds.clip_to_bounds(metric, low, high)
            ax.plot(x, mean, label=", ".join(arm), **styles[arm])
            ran = np.isfinite(mean)
            ax.errorbar(x[ran], mean[ran], yerr=[mean[ran] - low[ran], high[ran] - mean[ran]],
                        fmt="none", ecolor=styles[arm]["color"], capsize=3, linewidth=1.0)
            if failed.any():
                ax.plot(x[failed], np.full(failed.sum(), floor), ls="none", marker="x",
                        markersize=7, mew=2, color=styles[arm]["color"], gid="failed",
                        label="_failed")
        if chance is not None:
            ax.axhline(chance, color="black", lw=1.0, ls=":", gid="chance")
            ax.annotate(f"chance {chance:.3g}", (1.0, chance), xycoords=("axes fraction", "data"),
                        xytext=(-3, 2), textcoords="offset points", ha="right", va="bottom",
                        fontsize=FONT["ticks"] - 2)
        ax.set_title(architecture, fontsize=FONT["title"])
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=FONT["ticks"] - 1)
    axes[0, 0].set_xscale("log", base=2)  # shared: every panel
    axes[0, 0].set_xticks(depths, [str(d) for d in depths])
    if bounds.metric_bounds(metric) == (0.0, 1.0):
        axes[0, 0].set_ylim(-0.02, 1.02)
    for ax in axes[-1]:
        ax.set_xlabel("layers (log scale)", fontsize=FONT["label"])
    for ax in axes[:, 0]:
        ax.set_ylabel(f"final {y_label(metric)}", fontsize=FONT["label"])
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    _depth_legend(fig, arms, styles, chance, any(
        p.get("failed") for per_arm in panels.values() for ps in per_arm.values()
        for p in ps.values()), f"{metric}: line and point, the mean over seeds; "
                                 f"{interval_words}\na depth an arm did not run breaks its line")
    fig.tight_layout()
    return fig


def _depth_legend(fig, arms, styles, chance: Optional[float], failed: bool, title: str) -> None:
    """Below the panels: a column per colour (width), then the chance level and the cross."""
    import matplotlib.lines

    handles = [matplotlib.lines.Line2D([], [], **styles[a]) for a in arms]
    labels = [", ".join(a) for a in arms]
    if chance is not None:
        handles.append(matplotlib.lines.Line2D([], [], color="black", lw=1.0, ls=":"))
        labels.append("chance (a uniform guess)")
    if failed:
        handles.append(matplotlib.lines.Line2D([], [], color="black", ls="none", marker="x",
                                               markersize=7, mew=2))
        labels.append(FAILED_WORDS)
    columns = len({a[0] for a in arms}) + (len(labels) > len(arms))
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns,
               frameon=False, fontsize=FONT["legend"] - 1, title=title,
               title_fontsize=FONT["legend"] - 1)


def plot_by_depth(path: Path, panels: Mapping[str, Mapping[Arm, Mapping[int, Point]]],
                  **figure) -> None:
    """`by_depth_figure`, written to `path` (PNG)."""
    import matplotlib.pyplot as plt

    fig = by_depth_figure(panels, **figure)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)

"""A study's forest plot, drawn from its verdict record (record.py) alone: one row per
expectation, its effect and 95 % interval against its threshold, coloured by its verdict, with
its kind (finding, check, post hoc). A reader of a paper looks at this before any table.

Each row has its own axis, on the scale the expectation was judged on (docs/verdicts.md): a
ratio on a log axis (it is judged on log values), a failure rate on [0, 1], a gain, gap or mean
on its metric's own units. The accepted region is shaded, the threshold a solid line, "no effect"
(a gain of 0, a ratio of 1) a dotted one. An interval that does not end (one seed, or a ratio of
a value ≤ 0) runs to the axis' edge with an arrow.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Optional

from transformer_jax.train.figures import file_pyplot
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import plots, verdict_text
from transformer_jax.studies.study import KIND_WORDS, NO_EFFECT, RATES, Comparison, Kind

FILE = "forest.png"
# A verdict's colour (tab10's): what a reader looks for first.
COLOURS = {"holds": "#2ca02c", "contradicted": "#d62728", "smaller than stated": "#ff7f0e",
           "inconclusive": "#7f7f7f"}
MARKERS = {Kind.FINDING: "o", Kind.CHECK: "s", Kind.POST_HOC: "^"}
ACCEPTED = "#2ca02c"  # the accepted region's shade (light)
ROW_INCHES, WIDTH_INCHES, LABEL_FRACTION = 0.62, 12.0, 0.5  # the labels' share of the width
WRAP = 78  # characters per line of an expectation's text (two lines at most)
NOTE_WRAP = 72  # characters per line of an unmeasured row's note, inside its axis (two lines)


def verdict_class(row: dict[str, Any]) -> str:
    """'holds', 'contradicted', 'smaller than stated' or 'inconclusive': a COLOURS key. A
    verdict that does not hold without a recorded failure (judged before failures were told
    apart) counts as contradicted."""
    if row["verdict"] == "holds":
        return "holds"
    if row["verdict"] == "inconclusive":
        return "inconclusive"
    return row.get("failure") or "contradicted"


def accepted_region(row: dict[str, Any]) -> tuple[float, float]:
    """(low, high) of the effects that hold (docs/verdicts.md's table; ±inf: unbounded)."""
    comparison, margin = Comparison(row["comparison"]), row["margin"]
    return {Comparison.WITHIN: (-margin, margin), Comparison.AT_MOST: (-math.inf, margin),
            Comparison.FAIL_RATE_AT_MOST: (0.0, margin),
            Comparison.FAIL_RATE_AT_LEAST: (margin, 1.0)}.get(comparison, (margin, math.inf))


def scale_words(row: dict[str, Any]) -> str:
    """What a row's axis measures: 'eval/loss: unscaled − scaled (lower is better)'."""
    comparison, a, b = Comparison(row["comparison"]), row["a"], row["b"]
    at = "" if row["at_step"] is None else f" at step {row['at_step']}"
    gain = " (late gain)" if row["measure"] == "late_gain" else ""
    what = {Comparison.BETTER: verdict_text.gain_words(row),
            Comparison.DIFFERENCE_OF_DIFFERENCES: verdict_text.gain_words(row),
            Comparison.WITHIN: f"({a} − {b}) / |{b}|",
            Comparison.RATIO: f"{a} / {b}" if row["higher_is_better"] else
            f"{b} / {a}, lower is better; log axis",
            Comparison.AT_MOST: f"mean of {a}", Comparison.AT_LEAST: f"mean of {a}"}.get(
        comparison, f"fraction of {a}'s runs that fail")
    return f"{row['metric']}{at}{gain}: {what}"


def _finite(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x)


def x_limits(row: dict[str, Any], log: bool) -> tuple[float, float]:
    """The row's axis: its effect, interval, threshold(s) and no effect, padded by a tenth
    (on log values for a log axis); a failure rate's is [0, 1]."""
    if Comparison(row["comparison"]) in RATES:
        return -0.05, 1.05
    low, high = row["interval"]["low"], row["interval"]["high"]
    points = [x for x in (row["effect"], low, high, *accepted_region(row),
                          NO_EFFECT[Comparison(row["comparison"])]) if _finite(x)]
    if log:
        points = [math.log10(x) for x in points if x > 0] or [0.0]
    lo, hi = min(points), max(points)
    pad = 0.1 * (hi - lo) or 0.5 * (abs(lo) or 1.0)
    lo, hi = lo - pad, hi + pad
    return (10 ** lo, 10 ** hi) if log else (lo, hi)


def _draw_row(ax, row: dict[str, Any]) -> None:
    """One expectation on its own axis (module docstring)."""
    import matplotlib.ticker

    log = Comparison(row["comparison"]) is Comparison.RATIO
    if log:  # ticks at 1, 2, 5 × 10^k, written as factors
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    unit = "×" if log else ""  # each tick its own number: no offset text over the next row
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}{unit}"))
    left, right = x_limits(row, log)
    ax.set_xlim(left, right)
    ax.set_ylim(-1, 1)
    _draw_reference(ax, row, left, right)
    _draw_estimate(ax, row, left, right)
    ax.set_yticks([])
    ax.tick_params(axis="x", labelsize=8, pad=1)
    ax.grid(axis="x", alpha=0.25)


def _draw_reference(ax, row: dict[str, Any], left: float, right: float) -> None:
    """The accepted region (shaded), its threshold(s) and no effect."""
    comparison = Comparison(row["comparison"])
    low, high = accepted_region(row)
    ax.axvspan(max(low, left), min(high, right), color=ACCEPTED, alpha=0.12, lw=0,
               gid="accepted")
    edges = [row["margin"]] if comparison in RATES else [e for e in (low, high)
                                                          if math.isfinite(e)]
    for edge in edges:
        ax.axvline(edge, color="black", lw=1.2, gid="threshold")
    if NO_EFFECT[comparison] is not None:
        ax.axvline(NO_EFFECT[comparison], color="grey", lw=0.9, ls=":", gid="no effect")


def _draw_estimate(ax, row: dict[str, Any], left: float, right: float) -> None:
    """The effect (marker: the kind) and its interval, in the verdict's colour; an unbounded
    end as an arrow at the axis' edge; an effect not measured as the verdict's note."""
    colour = COLOURS[verdict_class(row)]
    low, high = row["interval"]["low"], row["interval"]["high"]
    if not _finite(row["effect"]) and not _finite(low) and not _finite(high):
        # two short lines inside the axis: a longer line ran over the labels and the margin
        note = textwrap.wrap(textwrap.shorten(f"not measured: {row['note']}", 2 * NOTE_WRAP,
                                              placeholder="…"), NOTE_WRAP)
        ax.text(0.5, 0.5, "\n".join(note), transform=ax.transAxes, ha="center", va="center",
                fontsize=7, color=colour, linespacing=1.1, gid="unmeasured")
        return
    ax.plot([low if _finite(low) else left, high if _finite(high) else right], [0, 0],
            color=colour, lw=2.2, solid_capstyle="butt", gid="interval")
    for end, x, marker in ((low, left, "<"), (high, right, ">")):
        if not _finite(end):
            ax.plot([x], [0], marker=marker, color=colour, ms=7, gid="unbounded")
    if _finite(row["effect"]):
        ax.plot([row["effect"]], [0], marker=MARKERS[record_lib.kind_of(row)], color=colour,
                ms=8, mec="black", mew=0.6, gid="effect")


def row_label(row: dict[str, Any]) -> str:
    """'[check] the expectation's text (two lines at most)\\n<what its axis measures>'."""
    kind = KIND_WORDS[record_lib.kind_of(row)]
    lines = textwrap.wrap(f"[{kind}] {row['text']}", WRAP, break_on_hyphens=False)
    text = "\n".join(lines[:2]) + ("…" if len(lines) > 2 else "")
    return f"{text}\n{textwrap.shorten(scale_words(row), WRAP, placeholder='…')}"


def forest_figure(record: dict[str, Any], machine: str = ""):
    """The figure (module docstring) of a record with at least one expectation: one axis per
    row, in the record's order, each with gid 'row <i>'; `machine`: the CPU of its values."""
    import matplotlib.lines
    import matplotlib.patches
    plt = file_pyplot()

    rows = record["expectations"]
    title = 0.75 + (0.2 if machine else 0.0)  # inches above the first row: the title's lines
    height = ROW_INCHES * len(rows) + 0.85 + title
    fig, axes = plt.subplots(len(rows), 1, figsize=(WIDTH_INCHES, height), squeeze=False)
    fig.subplots_adjust(left=LABEL_FRACTION + 0.01, right=0.98, top=1 - title / height,
                        bottom=0.85 / height, hspace=0.9)
    for i, (ax, row) in enumerate(zip(axes[:, 0], rows)):
        ax.set_gid(f"row {i}")
        _draw_row(ax, row)
        ax.text(-0.01, 0.5, row_label(row), transform=ax.transAxes, ha="right", va="center",
                fontsize=8, linespacing=1.15)
    size = verdict_text.size_words(record)
    fig.suptitle(f"{record['study']}: each expectation's effect and 95 % interval against its "
                 f"threshold" + (f"\n({size})" if size else "")
                 + (f"\nvalues from {machine}" if machine else ""), fontsize=11)
    handles = [matplotlib.lines.Line2D([], [], color=c, lw=2.2, label=v)
               for v, c in COLOURS.items()]
    handles += [matplotlib.lines.Line2D([], [], ls="", marker=m, color="white", mec="black",
                                        label=KIND_WORDS[k]) for k, m in MARKERS.items()]
    handles += [matplotlib.patches.Patch(color=ACCEPTED, alpha=0.12, label="accepted region"),
                matplotlib.lines.Line2D([], [], color="black", lw=1.2, label="threshold"),
                matplotlib.lines.Line2D([], [], color="grey", ls=":", label="no effect")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               fontsize=8, handlelength=1.6, columnspacing=1.0)
    return fig


def write_forest(record: dict[str, Any], path: Path, machine: str = "") -> Optional[Path]:
    """`forest_figure` written to `path` (PNG); None where the record has no expectations
    (then any old figure at `path` is removed)."""
    path = Path(path)
    if not record["expectations"]:
        path.unlink(missing_ok=True)
        return None
    plt = file_pyplot()
    fig = forest_figure(record, machine)
    fig.savefig(path, dpi=plots.DPI)
    plt.close(fig)
    return path

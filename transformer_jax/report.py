"""A study's written results, read back from the runs' own TensorBoard files and status files:
curves.png, summary.csv, summary.md, verdict.md (and the step-0 probes, if the study has some).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from transformer_jax import jobs, workdir as workdir_lib
from transformer_jax.study import Study
from transformer_jax.summaries import read_scalars

Curve = list[tuple[int, float]]


def collect(study: Study, root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(variant, seed) -> {'status': ..., 'curves': {tag: [(step, value)]}}."""
    runs = {}
    for variant, seed in study.runs():
        run_dir = root / variant / f"seed_{seed}"
        runs[(variant, seed)] = {"status": workdir_lib.read_status(run_dir) or {},
                                 "curves": read_scalars(str(run_dir))}
    return runs


def final_value(run: dict[str, Any], metric: str) -> float:
    """The metric's last value; nan for a diverged run (its last numbers are not a result)."""
    if run["status"].get("state") == "diverged":
        return math.nan
    curve = run["curves"].get(metric)
    return curve[-1][1] if curve else math.nan


def write_report(study: Study, root: Path) -> None:
    runs = collect(study, root)
    plot_curves(study, runs, root / "curves.png")
    rows = _rows(study, runs)
    _write_csv(rows, root / "summary.csv")
    (root / "summary.md").write_text(_summary_markdown(study, runs))
    probes = jobs.run_probes(study, root)
    (root / "verdict.md").write_text(verdict_markdown(study, runs, probes))


def _rows(study: Study, runs) -> list[dict[str, Any]]:
    rows = []
    for (variant, seed), run in runs.items():
        row = {"variant": variant, "seed": seed, "state": run["status"].get("state", "missing"),
               "steps": run["status"].get("step", 0)}
        row.update({m: final_value(run, m) for m in study.metrics})
        rows.append(row)
    return rows


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _mean_std(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "—"
    return f"{np.mean(finite):.4g} ± {np.std(finite):.2g}" if len(finite) > 1 else f"{finite[0]:.4g}"


def _summary_markdown(study: Study, runs) -> str:
    header = ["variant", "overrides", "diverged"] + list(study.metrics)
    lines = [f"# {study.name}: final metrics (mean ± std over seeds {list(study.seeds)})", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant, overrides in study.variants.items():
        seeds = [runs[(variant, s)] for s in study.seeds]
        diverged = sum(r["status"].get("state") == "diverged" for r in seeds)
        cells = [variant, ", ".join(f"{k}={v}" for k, v in overrides.items()) or "(base)",
                 f"{diverged}/{len(seeds)}"]
        cells += [_mean_std([final_value(r, m) for r in seeds]) for m in study.metrics]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Per seed: summary.csv. Curves: curves.png and `tensorboard --logdir` on this directory."]
    return "\n".join(lines) + "\n"


def verdict_markdown(study: Study, runs, probes: str = "") -> str:
    lines = [f"# {study.name}", "", f"**Claim.** {study.claim}", "",
             f"**Published.** {study.published}", "",
             "| expected | measured | verdict |", "|---|---|---|"]
    held = []
    for e in study.expectations:
        final = {v: [final_value(runs[(v, s)], e.metric) for s in study.seeds]
                 for v in filter(None, (e.a, e.b))}
        ok, measured = e.judge(final)
        held.append(ok)
        lines.append(f"| {e.text} | {measured} | {'holds' if ok else 'does not hold'} |")
    overall = "holds" if all(held) else ("partly holds" if any(held) else "does not hold")
    lines += ["", f"**Verdict: the claim {overall} on this run** "
              f"({sum(held)}/{len(held)} expectations; seeds {list(study.seeds)}).", ""]
    lines += ["![curves](curves.png)", ""]
    if probes:
        lines += ["## Step-0 probes (no training)", "", probes, ""]
    return "\n".join(lines)


def plot_curves(study: Study, runs, path: Path) -> None:
    """One panel per metric: each variant's mean over seeds, shaded between min and max."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(study.metrics), figsize=(4.2 * len(study.metrics), 3.2),
                             squeeze=False)
    for ax, metric in zip(axes[0], study.metrics):
        for variant in study.variants:
            curves = [dict(runs[(variant, s)]["curves"].get(metric, [])) for s in study.seeds]
            steps = sorted(set().union(*curves))
            if not steps:
                continue
            values = np.array([[c.get(t, np.nan) for t in steps] for c in curves])
            with np.errstate(all="ignore"):
                mean = np.nanmean(values, 0)
            line, = ax.plot(steps, mean, label=variant)
            ax.fill_between(steps, np.nanmin(values, 0), np.nanmax(values, 0),
                            color=line.get_color(), alpha=0.2)
        ax.set_title(metric)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(study.name)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_index(root: Path, names: list[str]) -> Path:
    """root/report.md: each study's verdict line, table and plots, linked."""
    lines = ["# Ablation studies", "",
             f"Curves of every run: `tensorboard --logdir {root}`", ""]
    for name in names:
        verdict = (root / name / "verdict.md").read_text().splitlines()
        summary = next((l for l in verdict if l.startswith("**Verdict")), "")
        claim = next((l for l in verdict if l.startswith("**Claim")), "")
        start = next((i for i, l in enumerate(verdict) if l.startswith("|")), len(verdict))
        end = next((i for i in range(start, len(verdict)) if not verdict[i].startswith("|")),
                   len(verdict))
        table = verdict[start:end]  # the first table: expected / measured / verdict
        lines += [f"## [{name}]({name}/verdict.md)", "", claim, "", *table, "", summary, "",
                  f"![{name}]({name}/curves.png)", ""]
    path = root / "report.md"
    path.write_text("\n".join(lines))
    return path

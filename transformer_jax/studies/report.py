"""A study's written results, read back from the runs' own TensorBoard files and status files:
curves.png, summary.csv, summary.md, verdict.md (and the step-0 probes and the study's analyses,
if it has some). Every mean over seeds comes with its 95 % Student-t interval, and every
verdict with the interval of its effect (`study.INTERVAL_METHOD`): with 3 seeds a "holds" must
survive the seed-to-seed spread, which the t quantile (4.30 at 2 dof) makes wide.
"""
from __future__ import annotations

import csv
import functools
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np

from transformer_jax.train import workdir as workdir_lib
from transformer_jax.studies import convergence
from transformer_jax.studies.checks import as_section
from transformer_jax.studies.plots import plot_curves
from transformer_jax.studies.study import (Comparison, Expectation, INTERVAL_METHOD, Judgement,
                                           Measure, RATES, Study, Verdict, interval_of_mean)
from transformer_jax.train.summaries import read_scalars

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
    probes = study.probe_markdown(root)
    analysis = "\n\n".join(as_section(f(root, runs)).markdown for f in study.analyses)
    (root / "verdict.md").write_text(verdict_markdown(study, runs, probes, analysis))


def value_at(run: dict[str, Any], metric: str, step: int) -> float:
    """The metric at the first logged step at or after `step` (nan: none). A run that diverged
    later still measured it then, so it counts."""
    return next((value for at, value in run["curves"].get(metric, ()) if at >= step), math.nan)


def late_gain(run: dict[str, Any], metric: str, higher_is_better: bool) -> float:
    """How much the metric improved over the run's last convergence.FLAT_WINDOW of steps
    (> 0: still improving, in the metric's better direction); nan for a diverged run or a curve
    with no evaluation that early."""
    if run["status"].get("state") == "diverged":
        return math.nan
    change = convergence.window_change(run["curves"].get(metric, []))
    if change is None:
        return math.nan
    return change.change if higher_is_better else -change.change


def final_values(study: Study, runs, metric: str,
                 at_step: Optional[int] = None) -> dict[str, dict[int, float]]:
    """variant -> seed -> the metric's final value (nan: diverged or missing), or with `at_step`
    its value then (`value_at`)."""
    value = (functools.partial(value_at, step=at_step) if at_step is not None else final_value)
    return {v: {s: value(runs[(v, s)], metric) for s in study.seeds} for v in study.variants}


def judged_values(study: Study, runs, e: Expectation) -> dict[str, dict[int, float]]:
    """variant -> seed -> what expectation `e` judges of each run (its `measure`)."""
    if e.measure is Measure.LATE_GAIN:
        return {v: {s: late_gain(runs[(v, s)], e.metric, e.higher_is_better)
                    for s in study.seeds} for v in study.variants}
    return final_values(study, runs, e.metric, e.at_step)


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


def _mean_std_interval(values: list[float]) -> str:
    """'mean ± std [95 % interval of the mean]' over the finite values (diverged runs are
    counted in their own column)."""
    finite = np.array([v for v in values if math.isfinite(v)])  # (seeds,)
    if not len(finite):
        return "—"
    if len(finite) == 1:
        return f"{finite[0]:.4g}"
    low, high = interval_of_mean(finite)
    return f"{np.mean(finite):.4g} ± {np.std(finite):.2g} [{low:.4g}, {high:.4g}]"


def _judged_mean_curves(study: Study, runs) -> dict[str, dict[str, convergence.Curve]]:
    """metric -> variant -> its mean curve over its finished seeds, for the metrics an
    expectation judges."""
    judged = [m for m in study.metrics if any(e.metric == m for e in study.expectations)]
    return {metric: {v: convergence.seed_mean_curve(
        [runs[(v, s)]["curves"].get(metric, []) for s in study.seeds
         if runs[(v, s)]["status"].get("state") != "diverged"]) for v in study.variants}
        for metric in judged}


def _speed_columns(curves: dict[str, dict[str, convergence.Curve]], study: Study
                   ) -> dict[str, dict[str, str]]:
    """metric -> variant -> the first step at which the variant's mean curve reached
    convergence.SPEED_FRACTION of the best variant's final value: how fast, beside the final
    value's how far."""
    columns = {}
    for metric, by_variant in curves.items():
        steps = convergence.steps_to_fraction_of_best(
            by_variant, convergence.higher_is_better(metric, study.expectations))
        columns[metric] = {v: "never" if s is None else str(s) for v, s in steps.items()}
    return columns


def _late_change_columns(curves: dict[str, dict[str, convergence.Curve]]
                         ) -> dict[str, dict[str, str]]:
    """metric -> variant -> how much its mean curve still moved over the last
    convergence.FLAT_WINDOW of the steps: near 0, the budget let it flatten (a 'trains at all'
    reading); large, the final value still measures speed."""
    columns = {}
    for metric, by_variant in curves.items():
        changes = {v: convergence.window_change(c) for v, c in by_variant.items()}
        columns[metric] = {v: "—" if c is None else f"{c.change:+.3g} ({c.start}→{c.end})"
                           for v, c in changes.items()}
    return columns


def _summary_markdown(study: Study, runs) -> str:
    curves = _judged_mean_curves(study, runs)
    speed, late = _speed_columns(curves, study), _late_change_columns(curves)
    percent = round(100 * convergence.SPEED_FRACTION)
    window = round(100 * convergence.FLAT_WINDOW)
    header = (["variant", "overrides", "diverged"] + list(study.metrics)
              + [f"{m}: step at {percent} % of best" for m in speed]
              + [f"{m}: change over the last {window} % of steps" for m in late])
    lines = [f"# {study.name}: final metrics (mean ± std [95 % interval] over seeds "
             f"{list(study.seeds)}, diverged runs left out)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant, overrides in study.variants.items():
        seeds = [runs[(variant, s)] for s in study.seeds]
        diverged = sum(r["status"].get("state") == "diverged" for r in seeds)
        cells = [variant, ", ".join(f"{k}={v}" for k, v in overrides.items()) or "(base)",
                 f"{diverged}/{len(seeds)}"]
        cells += [_mean_std_interval([final_value(r, m) for r in seeds]) for m in study.metrics]
        cells += [speed[m][variant] for m in speed] + [late[m][variant] for m in late]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Intervals: {INTERVAL_METHOD}. Steps at {percent} % of best: the first "
              f"evaluation at which the variant's mean curve over its finished seeds reached "
              f"{percent} % of the best variant's final mean (for a lower-is-better metric, the "
              f"best divided by {convergence.SPEED_FRACTION}); 'never': not within the run. "
              f"Change over the last {window} % of steps: the mean curve's last value minus its "
              f"value at the last evaluation at or before {100 - window} % of the run (steps in "
              f"brackets): near 0, the variant had flattened at this budget; far from 0, its "
              f"final value still measures how fast it learns as well as how far.",
              "Per seed: summary.csv. Curves: curves.png and `tensorboard --logdir` on this directory."]
    return "\n".join(lines) + "\n"


VERDICT_HEADER = ["expected", "per-seed values", "effect", "95 % interval", "threshold", "verdict"]


def verdict_markdown(study: Study, runs, probes: str = "", analysis: str = "") -> str:
    lines = [f"# {study.name}", "", f"**Claim.** {study.claim}", "",
             f"**Published.** {study.published}", "",
             "| " + " | ".join(VERDICT_HEADER) + " |", "|" + "---|" * len(VERDICT_HEADER)]
    verdicts = []
    for e in study.expectations:
        # every variant: diverged runs count as the study's finished values (default `worst`)
        judgement = e.judge(judged_values(study, runs, e))
        verdicts.append(judgement.verdict)
        lines.append("| " + " | ".join(verdict_cells(e, judgement)) + " |")
    lines += ["", overall_line(verdicts, study.seeds), "",
              f"Effect: a − b (sign so that > 0 is better), the relative gap (a − b)/|b|, the "
              f"mean of a, or the fraction of a's runs that fail. Intervals: {INTERVAL_METHOD}; "
              f"with 3 seeds a t interval reaches 2.5 per-seed standard deviations either side "
              f"of the mean. A diverged run counts as the expectation's `worst` if it sets one; "
              f"else as the study's finished value least favourable to the expectation, and a "
              f"verdict that its value would change is inconclusive. A failure rate counts a "
              f"diverged run as failed.", ""]
    lines += ["![curves](curves.png)", ""]
    if probes:
        lines += ["## Step-0 probes (no training)", "", probes, ""]
    if analysis:
        lines += ["## Analysis", "", analysis, ""]
    return "\n".join(lines)


def overall_line(verdicts: list[Verdict], seeds) -> str:
    counts = {v: verdicts.count(v) for v in Verdict}
    held, failed = counts[Verdict.HOLDS], counts[Verdict.FAILS]
    overall = ("is not judged" if not verdicts  # no expectations: nothing holds by default
               else "holds" if held == len(verdicts) else "partly holds" if held
               else "does not hold" if failed else "is inconclusive")
    return (f"**Verdict: the claim {overall} on this run** ({held} hold, {failed} do not hold, "
            f"{counts[Verdict.INCONCLUSIVE]} inconclusive of {len(verdicts)} expectations; "
            f"seeds {list(seeds)}).")


def verdict_cells(e: Expectation, j: Judgement) -> list[str]:
    """One row of verdict.md: expected, per-seed values, effect, interval, threshold, verdict."""
    percent = e.comparison is Comparison.WITHIN
    number = (lambda x: f"{x:+.1%}") if percent else (lambda x: f"{x:.4g}")
    if e.comparison in RATES:
        number = lambda x: f"{x:.1%}"
        failed = round(j.effect * len(j.values[e.a]))
        side = "<" if e.higher_is_better else ">"
        effect = (f"{number(j.effect)} ({failed}/{len(j.values[e.a])} runs of {e.a} fail: "
                  f"diverged or {side} {e.threshold:.4g})")
        threshold = ("≥ " if e.comparison is Comparison.FAIL_RATE_AT_LEAST else "≤ ") + number(e.margin)
    elif e.comparison is Comparison.AT_MOST:
        effect, threshold = f"{number(j.effect)} (mean of {e.a})", f"≤ {number(e.margin)}"
    elif percent:
        effect, threshold = f"{number(j.effect)} ({e.a} vs {e.b})", f"within ±{e.margin:.1%}"
    else:
        order = f"{e.a} − {e.b}" if e.higher_is_better else f"{e.b} − {e.a}, lower is better"
        effect, threshold = f"{number(j.effect)} ({order})", f"≥ {number(e.margin)}"
    if e.at_step is not None:
        effect += f", at step {e.at_step}"
    if e.measure is Measure.LATE_GAIN:
        effect += f", gain over the last {round(100 * convergence.FLAT_WINDOW)} % of steps"
    interval = "unmeasured" if not math.isfinite(j.high - j.low) else \
        f"[{number(j.low)}, {number(j.high)}]" + ("" if j.paired or e.b is None else " unpaired")
    verdict = j.verdict.value + (f": {j.note}" if j.note else "")
    return [e.text, _per_seed(j), effect, interval, threshold, verdict]


def _per_seed(j: Judgement) -> str:
    """'a: 0.91, 0.9, diverged→0.2 · b: ...' in seed order (a failure rate: 'diverged')."""
    def cell(x: float) -> str:
        return "diverged" if not math.isfinite(x) else f"diverged→{x:.4g}"
    return " · ".join(f"{v}: " + ", ".join(cell(x) if s in j.diverged[v] else f"{x:.4g}"
                                           for s, x in xs.items())
                      for v, xs in j.values.items())


def write_index(root: Path, names: list[str]) -> Path:
    """root/report.md: per study its claim, one line per expectation (effect, interval,
    threshold, verdict: verdict.md's table without the per-seed values), the overall verdict
    and the curves, linked."""
    lines = ["# Ablation studies", "",
             f"Curves of every run: `tensorboard --logdir {root}`", ""]
    for name in names:
        verdict = (root / name / "verdict.md").read_text().splitlines()
        summary = next((l for l in verdict if l.startswith("**Verdict")), "")
        claim = next((l for l in verdict if l.startswith("**Claim")), "")
        start = next((i for i, l in enumerate(verdict) if l.startswith("|")), len(verdict))
        end = next((i for i in range(start, len(verdict)) if not verdict[i].startswith("|")),
                   len(verdict))
        table = [_drop_column(row, VERDICT_HEADER.index("per-seed values"))
                 for row in verdict[start:end]]  # the first table: the expectations
        lines += [f"## [{name}]({name}/verdict.md)", "", claim, "", *table, "", summary, "",
                  f"![{name}]({name}/curves.png)", ""]
    path = root / "report.md"
    path.write_text("\n".join(lines))
    return path


def _drop_column(row: str, index: int) -> str:
    cells = row.strip().strip("|").split("|")
    return "|" + "|".join(c for i, c in enumerate(cells) if i != index) + "|"

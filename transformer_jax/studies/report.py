"""A study's written results, read back from the runs' own TensorBoard files and status files:
curves.png, summary.csv, and the record of what was measured and judged, verdict.json (record.py),
from which summary.md and verdict.md are rendered (verdict_text.py), with the step-0 probes and
the study's analyses, if it has some. Every mean over seeds comes with its 95 % Student-t
interval, and every verdict with the interval of its effect (`study.INTERVAL_METHOD`): with 3
seeds a "holds" must survive the seed-to-seed spread, which the t quantile (4.30 at 2 dof) makes
wide.
"""
from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence


from transformer_jax.train import workdir as workdir_lib
from transformer_jax.studies import convergence
from transformer_jax.studies import grid as grid_lib
from transformer_jax.studies import plateau as plateau_lib
from transformer_jax.studies.checks import Section, as_section
from transformer_jax.studies.judge import tuned_choice, verdicts
from transformer_jax.studies.judge.judgement import Judgement
from transformer_jax.studies.judge.terms import Measure
from transformer_jax.studies.judge.verdicts import stopped_steps
from transformer_jax.studies.records import provenance
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import board
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.render.plots import plot_curves
# Named here too (report.final_value, ...), as before they moved below the analyses.
from transformer_jax.studies.run_values import final_value, late_gain, value_at  # noqa: F401
from transformer_jax.studies.study import Expectation, Study
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


def write_report(study: Study, root: Path, runs: Optional[dict] = None,
                 size: Optional[str] = None) -> None:
    """The report of `runs` (default: the runs trained into root, `collect`); `size`: the
    --size it was judged at, which the record and every view of it name. An evaluation-only
    study (`study.evaluate`) trained nothing: it gets no curves figure."""
    runs = collect(study, root) if runs is None else runs
    sections = [as_section(f(root, runs)) for f in study.analyses]
    measured = add_measured(runs, sections)
    if study.evaluate is None:
        plot_curves(study, runs, root / "curves.png",
                    provenance.machine_words(provenance.this_machine()), size)
    board.write_comparison(study, root, runs)
    _write_csv(_rows(study, runs, measured), root / "summary.csv")
    record = study_record(study, runs, study.probe_markdown(root), sections, size)
    record_lib.write(root / record_lib.FILE, record)
    (root / "summary.md").write_text(verdict_text.summary_markdown(record))
    (root / "verdict.md").write_text(verdict_text.verdict_markdown(record))


def add_measured(runs, sections: Sequence[Section]) -> list[str]:
    """Each analysis's per-run values (`Section.values`) added to `runs` as that run's curve of
    the metric: one point, at the run's last step, so its final value is the value (and a
    diverged run's is nan, as for any metric). Returns the metrics added."""
    added = []
    for section in sections:
        for metric, per_run in section.values.items():
            if metric in added:
                raise ValueError(f"two analyses measured {metric!r}: name each metric once")
            added.append(metric)
            for key, value in per_run.items():
                run = runs[key]
                run["curves"][metric] = [(run["status"].get("step", 0), float(value))]
    return added


def study_record(study: Study, runs, probes: str = "", sections: Sequence[Section] = (),
                 size: Optional[str] = None) -> dict[str, Any]:
    """What the report measured and judged, as data (record.py), judged at `size`."""
    # every variant: diverged runs count as the study's finished values (default `worst`);
    # a tuned arm: each seed's chosen candidate (by training loss, never the judged metric)
    choices = tuned_choice.choose(study.tuned, study.seeds, runs)
    stops = {key: run["status"].get("step", 0) for key, run in runs.items()
             if run["status"].get("state") == "diverged"}
    rows, counted = judge_expectations(
        study, lambda e: tuned_choice.with_arms(judged_values(study, runs, e), choices),
        stopped_steps(study, stops))
    steps = [run["status"].get("step", 0) for run in runs.values()]
    record = record_lib.study_record(study, rows, counted, _summary(study, runs), steps,
                                     probes, sections, size)
    if study.tuned:
        record["tuning"] = tuned_choice.record(study.tuned, study.variants, choices, runs)
    if study.extend_grid is not None:  # the grid each tuned arm reached, its edges flagged
        for arm, grown in grid_lib.record(study, runs).items():
            record["tuning"].setdefault(arm, {})["grid"] = grown
    if study.plateau is not None:
        record["plateau"] = plateau_lib.record(study.plateau, plateau_stages(study, runs))
    return record


def arm_late_gains(study: Study, runs) -> dict[str, dict[int, float]]:
    """judged arm -> seed -> its late gain in the plateau's metric (`late_gain`), for each
    variant or tuned arm an expectation on that metric names (a tuned arm: each seed's chosen
    candidate's); what the plateau rule reads, and nothing else."""
    p = study.plateau
    gains = {v: {s: late_gain(runs[(v, s)], p.metric, p.higher_is_better) for s in study.seeds}
             for v in study.variants}
    gains = tuned_choice.with_arms(gains, tuned_choice.choose(study.tuned, study.seeds, runs))
    return {arm: gains[arm] for arm in plateau_lib.judged_arms(study.expectations, p.metric)}


def at_budget(runs, budget: int):
    """The runs as they were at step `budget`: curves cut there, and a run that diverged later
    still finished then."""
    cut = {}
    for key, run in runs.items():
        status = run["status"]
        if status.get("state") == "diverged" and status.get("step", 0) > budget:
            status = {"state": "finished", "step": budget}
        cut[key] = {"status": status, "curves": {tag: [(s, v) for s, v in curve if s <= budget]
                                                 for tag, curve in run["curves"].items()}}
    return cut


def plateau_stages(study: Study, runs) -> list[dict[str, Any]]:
    """Each stage of the plateau budget the runs reached, decided again from their curves cut
    at its budget (what the sweep saw then): plateau.stage's records, in order."""
    reached = max(run["status"].get("step", 0) for run in runs.values())
    budgets = [b for b in study.plateau.budgets() if b <= reached] or [reached]
    return [plateau_lib.stage(study.plateau, b, arm_late_gains(study, at_budget(runs, b)))
            for b in budgets]


def judge_expectations(study: Study, values_of: Callable[[Expectation], dict],
                       stopped: Optional[Mapping[str, Mapping[int, int]]] = None
                       ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(each expectation's record row, the counts: record.judged): `values_of(e)` gives
    variant -> seed -> what `e` judges of each run; `stopped` where each diverged run stopped
    (stopped_steps). Verdicts are reached in the judge room (judge/verdicts.py), from runs or
    from the values a record holds (rejudge.py)."""
    judgements, p = verdicts.judge_all(study, values_of, stopped)
    return record_lib.judged(study.expectations, judgements, p, stopped)


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


def _rows(study: Study, runs, measured: Sequence[str] = ()) -> list[dict[str, Any]]:
    """summary.csv's rows: each run's final value of the study's metrics and of what the
    analyses measured of it (`measured`), which rejudge.py reads back."""
    rows = []
    for (variant, seed), run in runs.items():
        row = {"variant": variant, "seed": seed, "state": run["status"].get("state", "missing"),
               "steps": run["status"].get("step", 0)}
        row.update({m: final_value(run, m) for m in dict.fromkeys([*study.metrics, *measured])})
        rows.append(row)
    return rows


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _judged_mean_curves(study: Study, runs) -> dict[str, dict[str, convergence.Curve]]:
    """metric -> variant -> its mean curve over its finished seeds, for the metrics an
    expectation judges."""
    judged = [m for m in study.metrics if any(e.metric == m for e in study.expectations)]
    return {metric: {v: convergence.seed_mean_curve(
        [runs[(v, s)]["curves"].get(metric, []) for s in study.seeds
         if runs[(v, s)]["status"].get("state") != "diverged"]) for v in study.variants}
        for metric in judged}


def _summary(study: Study, runs) -> dict[str, Any]:
    """The final-metrics table as data: per variant, each metric's mean, std and interval over
    its finished seeds; per judged metric, the step at which its mean curve reached
    convergence.SPEED_FRACTION of the best variant's final value (how fast, beside how far) and
    how much it still moved over the last convergence.FLAT_WINDOW of the steps (near 0: the
    budget let it flatten)."""
    curves = _judged_mean_curves(study, runs)
    speed = {metric: convergence.steps_to_fraction_of_best(
        by_variant, convergence.higher_is_better(metric, study.expectations))
        for metric, by_variant in curves.items()}
    rows = []
    for variant, overrides in study.variants.items():
        seeds = [runs[(variant, s)] for s in study.seeds]
        diverged = sum(r["status"].get("state") == "diverged" for r in seeds)
        metrics = {m: record_lib.metric_record([final_value(r, m) for r in seeds])
                   for m in study.metrics}
        late = {m: record_lib.change_record(convergence.window_change(curves[m][variant]))
                for m in curves}
        rows.append(record_lib.variant_row(variant, overrides, diverged, len(seeds), metrics,
                                           {m: speed[m][variant] for m in curves}, late))
    return record_lib.summary_record(study, rows, list(curves))


def _summary_markdown(study: Study, runs) -> str:
    return verdict_text.summary_markdown(study_record(study, runs))


def verdict_markdown(study: Study, runs, probes: str = "", analysis: str = "") -> str:
    """verdict.md of `study`'s runs, with `analysis` as one analysis's markdown."""
    sections = [as_section(analysis)] if analysis else []
    return verdict_text.verdict_markdown(study_record(study, runs, probes, sections))


def verdict_cells(e: Expectation, j: Judgement) -> list[str]:
    """One row of verdict.md: expected, kind, per-seed values, effect, interval, threshold,
    verdict."""
    return verdict_text.expectation_cells(record_lib.expectation_record(e, j))


def write_index(root: Path, names: list[str]) -> Path:
    """root/report.md: per study its claim, one line per expectation (effect, interval,
    threshold, verdict: verdict.md's table without the per-seed values), the overall verdict
    and the curves, linked; from each study's verdict.json."""
    lines = ["# Ablation studies", "",
             f"Curves of every run: `tensorboard --logdir {root}`", ""]
    for name in names:
        record = record_lib.read(root / name / record_lib.FILE)
        lines += [f"## [{name}]({name}/verdict.md)", "", f"**Claim.** {record['claim']}", "",
                  *verdict_text.expectations_table(record, drop_per_seed=True), "",
                  verdict_text.overall_line(record), "", f"![{name}]({name}/curves.png)", ""]
    path = root / "report.md"
    path.write_text("\n".join(lines))
    return path

r"""Judge committed results again, under today's design and judging rules, from the per-seed
values their files hold (no re-training):

    python -m transformer_jax.studies.rejudge [--results=experiments/results] [STUDY ...]

A verdict is a function of each run's values: when only the judgement changes (an amended
expectation, a new comparison, a new rule in the statistics), the runs need not be trained again,
and a re-run on another machine would change their numbers too, so the change in the verdicts
would no longer be the judgement's alone. What it may not do is judge runs that today's design
would train differently: the study's training fingerprint (variants, seeds, base config) at
the code its results came from must be today's (preregistration.check_results checks it).

Where the values come from: a metric's final value, from summary.csv (every variant, every
seed, full precision); anything else an expectation judges (a value at a step, a late gain),
from the record's rows that judged the same thing (at the precision the record holds: a record
converted "as printed" keeps 4 significant digits). The record then says so (`judged`), beside
the commit and the rules it was judged under. Probes, analyses and the final-metrics summary are
kept as they were: no rule of theirs changed.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from transformer_jax.config import ConfigError
from transformer_jax.studies import report
from transformer_jax.studies.checks import Section
from transformer_jax.studies.design import loading
from transformer_jax.studies.records import preregistration, provenance
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import pages
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import Expectation, Measure, Study

Values = dict[str, dict[int, float]]  # variant -> seed -> value (nan: diverged or missing)


class RejudgeError(ValueError):
    """Results that cannot be judged again without re-running."""


def key(e: Mapping[str, Any] | Expectation) -> tuple[str, str, Optional[int]]:
    """What an expectation reads of each run: (metric, measure, at_step)."""
    if isinstance(e, Expectation):
        return e.metric, e.measure.value, e.at_step
    return e["metric"], e["measure"], e["at_step"]


def stops_from_summary_csv(path: Path) -> dict[tuple[str, int], int]:
    """(variant, seed) -> the step at which the run stopped, for each run that diverged."""
    return {(row["variant"], int(row["seed"])): int(row["steps"])
            for row in _csv_rows(path) if row["state"] == "diverged"}


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def from_summary_csv(path: Path) -> dict[str, Values]:
    """metric -> variant -> seed -> final value (nan for a run that diverged or is missing)."""
    rows = _csv_rows(path)
    fixed = {"variant", "seed", "state", "steps"}
    found: dict[str, Values] = {}
    for row in rows:
        for metric in set(row) - fixed:
            value = float(row[metric]) if row[metric] not in ("", "nan") else math.nan
            value = math.nan if row["state"] == "diverged" else value
            found.setdefault(metric, {}).setdefault(row["variant"], {})[int(row["seed"])] = value
    return found


def from_record(record: Mapping[str, Any]) -> dict[tuple, Values]:
    """key -> variant -> seed -> the value the record's rows hold (a diverged run: nan, as a
    report reads it before counting it as anything)."""
    found: dict[tuple, Values] = {}
    for row in record["expectations"]:
        for variant, values in row["values"].items():
            per_seed = found.setdefault(key(row), {}).setdefault(variant, {})
            for v in values:
                value = math.nan if v["diverged"] or v["value"] is None else v["value"]
                per_seed[v["seed"]] = value
    return found


def values_for(e: Expectation, study: Study, recorded: dict[tuple, Values],
               summary: dict[str, Values]) -> tuple[Values, str]:
    """What `e` judges of each run, and where it came from ('summary.csv' or 'the record')."""
    values, source = dict(recorded.get(key(e), {})), "the record"
    if e.measure is Measure.FINAL and e.at_step is None and e.metric in summary:
        # a tuned arm is in no summary.csv row: its values stay the record's (its choices)
        values, source = {**values, **summary[e.metric]}, "summary.csv"
    missing = [v for v in e.variants() if set(values.get(v, {})) != set(study.seeds)]
    if missing:
        raise RejudgeError(
            f"{study.name}: expectation {e.text!r} reads {e.metric} ({e.measure.value}"
            f"{'' if e.at_step is None else f' at step {e.at_step}'}) of {', '.join(missing)}, "
            f"which no results file holds for seeds {list(study.seeds)}: re-run the study")
    return {v: dict(sorted(values[v].items())) for v in values}, source


def rejudged_record(study: Study, record: dict[str, Any], summary: dict[str, Values],
                    commit: str, stops: Mapping[tuple[str, int], int],
                    size: Optional[str] = None) -> dict[str, Any]:
    """`record` with its expectations judged again by today's `study` and rules (`stops`:
    where each diverged run stopped, stops_from_summary_csv), at `size` (the --size its
    pre-registration record names)."""
    recorded = from_record(record)
    judged = {e: values_for(e, study, recorded, summary) for e in study.expectations}
    rows, verdicts = report.judge_expectations(study, lambda e: judged[e][0],
                                               report.stopped_steps(study, stops))
    sources = sorted({source for _, source in judged.values()})
    new = record_lib.study_record(
        study, rows, verdicts, record["summary"], record["budget"]["steps"], record["probes"],
        [Section.from_json(s) for s in record["analyses"]], size or record.get("size"))
    for kept in ("precision", "converted", "tuning", "plateau"):
        if kept in record:
            new[kept] = record[kept]
    new["judged"] = {"commit": commit, "from": sources,
                     "how": "judged again from the committed per-seed values, no re-training"}
    return new


def rejudge(name: str, results: Path, experiments: Path, repo: Path) -> list[str]:
    """Re-judges one study in a results directory; returns the verdicts that changed, as
    lines 'expectation: before -> after'."""
    prereg = preregistration.read(results / f"{name}_{preregistration.FILE}")
    if prereg is None:
        raise RejudgeError(f"{name}: no {name}_{preregistration.FILE}: re-run the study")
    study = loading.load_study(experiments / f"{name}.py", prereg["size"])
    old = record_lib.read(results / f"{name}_{record_lib.FILE}")
    summary = from_summary_csv(results / f"{name}_summary.csv")
    commit, _ = provenance.git_commit(repo)
    new = rejudged_record(study, old, summary, commit,
                          stops_from_summary_csv(results / f"{name}_summary.csv"), prereg["size"])
    record_lib.write(results / f"{name}_{record_lib.FILE}", new)
    (results / f"{name}_verdict.md").write_text(
        verdict_text.verdict_markdown(new, curves=f"{name}_curves.png"))
    (results / f"{name}_summary.md").write_text(verdict_text.summary_markdown(new))
    produced = provenance.read(results / f"{name}_{provenance.FILE}") or {}
    code = produced.get("code", {}).get("commit", provenance.UNKNOWN)
    preregistration.write(results / f"{name}_{preregistration.FILE}", preregistration.record(
        study, prereg["size"], experiments / f"{name}.py", code))
    return changes(old, new)


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """'text: before -> after' for every expectation whose verdict words changed (a new
    expectation: 'text: (new) -> after')."""
    before = {row["text"]: verdict_text.verdict_words(row) for row in old["expectations"]}
    return [f"{row['text']}: {before.get(row['text'], '(new)')} -> "
            f"{verdict_text.verdict_words(row)}" for row in new["expectations"]
            if before.get(row["text"]) != verdict_text.verdict_words(row)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_jax.studies.rejudge",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="*", help="study names (default: every verdict)")
    parser.add_argument("--results", default="experiments/results")
    parser.add_argument("--readme", default="README.md", help="'' for none")
    args = parser.parse_args(argv)
    results = Path(args.results)
    experiments, repo = results.parent, results.parent.parent
    names = args.studies or sorted(p.name[:-len("_" + record_lib.FILE)]
                                   for p in results.glob(f"*_{record_lib.FILE}"))
    try:
        for name in names:
            changed = rejudge(name, results, experiments, repo)
            print(f"{name}: {len(changed)} verdicts changed")
            for line in changed:
                print(f"  {line}")
        # the pages of the studies named (each page reads only its own study's files), else all
        pages.write_results(results, studies=args.studies or None)
        if args.readme:
            pages.update_readme(Path(args.readme), results)
    except (RejudgeError, record_lib.RecordError, pages.PageError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

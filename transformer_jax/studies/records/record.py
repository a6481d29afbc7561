"""A study's results as one record, verdict.json: what the report measured and judged, as
data (numbers as numbers, at full precision), from which verdict.md, summary.md, the study's
page, the results index, the README's headline and the terminal's summary are all rendered
(`verdict_text`). Nothing reads the markdown back.

Free-form markdown that probes and analyses write (their tables, figure links) is kept as a
string and inserted verbatim; the checks an analysis judged are data beside it. A record
converted from results that predate it holds its numbers as they were printed: its "precision"
says so.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from transformer_jax.studies import convergence, judging_rules
from transformer_jax.studies.checks import Section
from transformer_jax.studies.judge import counts as judge_counts
from transformer_jax.studies.judge.counts import counts  # noqa: F401 (named here too)
from transformer_jax.studies.judge.judgement import Judgement
from transformer_jax.studies.judge.stats import (INTERVAL_METHOD, Failure, Verdict,
                                                 interval_of_mean)
from transformer_jax.studies.judge.terms import Kind
from transformer_jax.studies.study import Expectation, Study

FILE = "verdict.json"
REPORT_LOG = "report.log"  # beside it: the log of the study's probes, report and analyses
FORMAT = 1
FULL_PRECISION = "full"
AS_PRINTED = "as printed"  # converted from a verdict.md: each number at its printed digits


class RecordError(ValueError):
    """A verdict.json that is missing or not as the report writes it."""


def number(x: float) -> Optional[float]:
    """x for JSON: None where it is nan or infinite (JSON has neither)."""
    return float(x) if math.isfinite(x) else None


def expectation_record(e: Expectation, j: Judgement,
                       stopped: Optional[Mapping[str, Mapping[int, int]]] = None
                       ) -> dict[str, Any]:
    """One expectation as stated and as judged. Each seed's value: "diverged" where the run had
    none of its own and counts as the fill (`Judgement.fill`), and, where `stopped` (variant ->
    seed -> step, the runs that diverged) says the run did not diverge, "no_value": it finished
    without one (a refused control)."""
    return {
        "text": e.text, "kind": e.kind.value, "why": e.why, "metric": e.metric,
        "comparison": e.comparison.value, "a": e.a,
        "b": e.b, "higher_is_better": e.higher_is_better, "threshold": e.threshold,
        "margin": e.margin, "at_step": e.at_step, "measure": e.measure.value,
        "values": {v: [seed_value(s, x, s in j.diverged[v], stopped, v)
                       for s, x in xs.items()] for v, xs in j.values.items()},
        "effect": number(j.effect),
        "interval": {"low": number(j.low), "high": number(j.high), "paired": j.paired},
        "verdict": j.verdict.value, "note": j.note, "failure": failure_value(j.failure),
        **({"c": e.c, "d": e.d} if e.c is not None else {})}  # the second pair, where there is one


def seed_value(seed: int, value: float, missing: bool,
               stopped: Optional[Mapping[str, Mapping[int, int]]], variant: str
               ) -> dict[str, Any]:
    """A seed's entry in an expectation's values (`expectation_record`)."""
    entry = {"seed": seed, "value": number(value), "diverged": missing}
    if missing and stopped is not None and seed not in stopped.get(variant, {}):
        entry["no_value"] = True
    return entry


def kind_of(row: Mapping[str, Any]) -> Kind:
    """An expectation row's kind (a record judged before kinds existed: every row a finding)."""
    return Kind(row.get("kind", Kind.FINDING.value))


def failure_value(failure: Optional[Failure]) -> Optional[str]:
    """How a verdict that does not hold failed, for JSON (None: it did not fail)."""
    return None if failure is None else failure.value


def holm_record(p: float, verdict: Verdict, failure: Optional[Failure]) -> dict[str, Any]:
    """An expectation under Holm's correction over its study (multiplicity.py): the p-value
    of its settled verdict and what the verdict becomes."""
    return {"p": p, "verdict": verdict.value, "failure": failure_value(failure)}


def judged(expectations: Sequence[Expectation], judgements: Sequence[Judgement],
           p: Sequence[float], stopped: Optional[Mapping[str, Mapping[int, int]]] = None
           ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The expectations' records and their counts (judge/counts.py: the findings' counts, each
    finding with what it becomes under Holm's correction, `p` the p-values of the settled
    verdicts; the checks and post hoc counted apart); `stopped`: where each diverged run
    stopped, which tells a run without a value that did not diverge."""
    rows = [expectation_record(e, j, stopped) for e, j in zip(expectations, judgements)]
    holm, found = judge_counts.counted(expectations, judgements, p)
    for i, (p_i, verdict, failure) in holm.items():
        rows[i]["holm"] = holm_record(p_i, verdict, failure)
    return rows, found


def metric_record(values: Sequence[float]) -> Optional[dict[str, Any]]:
    """Mean, std and 95 % interval of the mean over the finite values (None: none)."""
    finite = np.array([v for v in values if math.isfinite(v)])  # (seeds,)
    if not len(finite):
        return None
    if len(finite) == 1:
        return {"n": 1, "mean": float(finite[0]), "std": None, "low": None, "high": None}
    low, high = interval_of_mean(finite)
    return {"n": len(finite), "mean": float(np.mean(finite)), "std": float(np.std(finite)),
            "low": float(low), "high": float(high)}


def change_record(change: Optional[convergence.Change]) -> Optional[dict[str, Any]]:
    if change is None:
        return None
    return {"change": float(change.change), "start": change.start, "end": change.end}


def summary_record(study: Study, variants: Sequence[dict[str, Any]],
                   judged_metrics: Sequence[str]) -> dict[str, Any]:
    """The final-metrics table as data: `variants` one row each (variant_row)."""
    return {"metrics": list(study.metrics), "judged_metrics": list(judged_metrics),
            "speed_fraction": convergence.SPEED_FRACTION,
            "flat_window": convergence.FLAT_WINDOW, "variants": list(variants)}


def variant_row(name: str, overrides: Mapping[str, Any], diverged: int, runs: int,
                metrics: Mapping[str, Optional[dict]], speed: Mapping[str, Optional[int]],
                late: Mapping[str, Optional[dict]]) -> dict[str, Any]:
    return {"variant": name, "overrides": {k: _json_value(v) for k, v in overrides.items()},
            "diverged": diverged, "runs": runs, "metrics": dict(metrics), "speed": dict(speed),
            "late_change": dict(late)}


def _json_value(value: Any) -> Any:
    """A config override as JSON holds it: itself if JSON has the type, else its text."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def study_record(study: Study, expectations: Sequence[dict[str, Any]],
                 counted: dict[str, Any], summary: dict[str, Any], steps: Sequence[int],
                 probes: str, sections: Sequence[Section],
                 size: Optional[str] = None) -> dict[str, Any]:
    """The whole record of one study's report (`expectations`, `counted`: judged()), judged
    at `size` (the --size; None: not known, left out). `evaluation_only`: the study trained
    nothing (`Study.evaluate`), so its "seeds" are units of evaluation and it has no curves."""
    found = {"format": FORMAT, "study": study.name, "claim": study.claim,
             "published": study.published, "seeds": list(study.seeds),
             "budget": {"steps": sorted(set(steps))}, "interval_method": INTERVAL_METHOD,
             "judging_rules": judging_rules.VERSION,
             "precision": FULL_PRECISION, "expectations": list(expectations),
             "counts": counted, "summary": summary, "probes": probes,
             "analyses": [s.to_json() for s in sections],
             "evaluation_only": study.evaluate is not None}
    return found if size is None else {**found, "size": size}


def write(path: Path, record: dict[str, Any]) -> Path:
    # ensure_ascii=False: the claim's symbols (√, ·, ±) stay readable in the file;
    # allow_nan=False: plain JSON, which has no nan (number() makes it null)
    Path(path).write_text(json.dumps(record, indent=1, ensure_ascii=False, allow_nan=False)
                          + "\n")
    return Path(path)


REQUIRED = ("study", "claim", "published", "seeds", "expectations", "counts", "summary",
            "probes", "analyses", "interval_method")


def read(path: Path) -> dict[str, Any]:
    """The record at `path`; RecordError naming the file if it is missing or not a record."""
    try:
        record = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise RecordError(f"{path}: missing; the sweep writes it with the study's report") from None
    except ValueError as e:
        raise RecordError(f"{path}: not JSON ({e})") from None
    missing = [k for k in REQUIRED if not isinstance(record, dict) or k not in record]
    if missing or record.get("format") != FORMAT:
        raise RecordError(f"{path}: not a verdict record that the report wrote (format "
                          f"{FORMAT}; missing {', '.join(missing) or 'nothing'})")
    return record

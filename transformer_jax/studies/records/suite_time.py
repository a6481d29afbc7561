"""How long a suite took, read off the directory of the sweep that ran it, so that the time a
suite takes is stated from a results file (experiments/results/suite-<suite>.json, written by
`python -m transformer_jax.studies.render.pages --export=DIR`) and never typed by hand.

The span runs from the sweep's start, when it writes every study's config.json before training
anything (`sweep.run_studies`), to its last study's report, the `date` of that study's
provenance.json. A sweep that was interrupted and resumed counts the gap between the two; one
whose runs had finished before it started (linked, or trained by an earlier sweep) counts less
than training them took.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from transformer_jax.studies.records import provenance
from transformer_jax.studies import rundir

PREFIX = "suite-"  # suite-<suite>.json: no study's name starts so (a study's files are <study>_*)


def file_name(suite: str) -> str:
    return f"{PREFIX}{suite}.json"


def record(study_dirs: Sequence[Path]) -> Optional[dict[str, Any]]:
    """The suite's record from its study directories (each with config.json and, once reported,
    provenance.json); None when a study has no provenance (not reported, or from before
    provenance files)."""
    starts, records = [], []
    for directory in study_dirs:
        found = provenance.read(Path(directory) / provenance.FILE)
        config = Path(directory) / rundir.CONFIG_FILE
        if found is None or not config.is_file():
            return None
        starts.append(config.stat().st_mtime)
        records.append(found)
    if not records:
        return None
    return describe(starts, records)


def describe(starts: Sequence[float], records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """starts: each study's start (seconds since the epoch); records: their provenance (pure)."""
    ends = [datetime.datetime.fromisoformat(r["date"]).timestamp() for r in records]
    start, end = min(starts), max(ends)
    last = records[ends.index(end)]
    suites = {r["suite"] for r in records}
    utc = datetime.timezone.utc
    return {"suite": suites.pop() if len(suites) == 1 else "all",
            "size": last["sweep"]["size"],
            "studies": [r["study"] for r in records],
            "runs": sum(r["sweep"]["runs"] for r in records),
            "wall_s": round(end - start, 1),
            "start": datetime.datetime.fromtimestamp(start, utc).isoformat(timespec="seconds"),
            "end": last["date"],
            "machine": last["machine"], "stack": last["stack"], "code": last["code"]}


def write(results_dir: Path, found: dict[str, Any]) -> Path:
    return provenance.write(Path(results_dir) / file_name(found["suite"]), found)


def read(path: Path) -> Optional[dict[str, Any]]:
    """One suite's record (None: no such file)."""
    return json.loads(path.read_text()) if Path(path).is_file() else None


def read_all(results_dir: Path) -> list[dict[str, Any]]:
    """Every suite-*.json of a results directory, by suite name."""
    return [read(p) for p in sorted(Path(results_dir).glob(f"{PREFIX}*.json"))]


def minutes(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 60} min {whole % 60:02d} s"

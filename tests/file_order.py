"""The order in which scripts/test.sh's two workers take the test files: longest first.

Each worker runs whole files (`--dist loadfile`) and takes the next one when it is done, so the
run ends when the last file handed out ends. pytest-xdist hands files out by their number of
tests, most first, which puts the one-test files that start sweeps and benchmarks (15-25 s each)
last, where one worker runs them while the other has nothing left. Longest first, the last files
are the short ones, and both workers end within seconds of each other.

The lengths are data: `tests/durations.json`, {file: seconds of setup, call and teardown of its
tests in one run of the suite}, written by `scripts/test.sh --store-durations` (conftest.py). A
file it does not list yet (a new one) goes first, as if it were the longest.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

DURATIONS = Path(__file__).resolve().parent / "durations.json"


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def longest_first(files: Iterable[str], durations: Mapping[str, float]) -> list[str]:
    """`files` (each once), unknown ones first, then by recorded duration, longest first; ties
    keep their given order."""
    files = list(dict.fromkeys(files))
    return sorted(files, key=lambda f: -durations.get(f, float("inf")))


def merged(recorded: Mapping[str, float], measured: Mapping[str, float],
           existing: Iterable[str]) -> dict[str, float]:
    """The durations to store: this run's measurements over the recorded ones (a run of part of
    the suite updates that part), without files that no longer exist; sorted by file."""
    existing = set(existing)
    both = {**recorded, **{f: round(s, 1) for f, s in measured.items()}}
    return {f: both[f] for f in sorted(both) if f in existing}


def write_durations(durations: Mapping[str, float], path: Path = DURATIONS) -> None:
    path.write_text(json.dumps(dict(durations), indent=1) + "\n")

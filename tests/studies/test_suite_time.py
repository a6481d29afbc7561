"""How long a suite took, from the files its sweep wrote: the first study's start (config.json)
to the last study's report (provenance date), exported beside the pages and shown in the index."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from transformer_jax.studies.records import export, provenance, suite_time
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import pages

START = datetime(2026, 12, 3, 10, 0, 0, tzinfo=timezone.utc).timestamp()


def _study(root: Path, name: str, started: float, reported_after_s: int, runs: int) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"study": name}))
    os.utime(directory / "config.json", (started, started))
    (directory / record_lib.FILE).write_text("{}\n")  # reported: export copies it as it is
    date = datetime.fromtimestamp(started + reported_after_s, timezone.utc).isoformat(timespec="seconds")
    record = provenance.describe(study=name, suite="main", size="default", seeds=(0, 1, 2),
                                 runs=runs, shard=(0, 1), cpuinfo="model name\t: Some CPU\n",
                                 cpus=2, system="Linux x86_64", stack={"jax": "0"},
                                 commit="c" * 40, dirty=False, date=date)
    provenance.write(directory / provenance.FILE, record)
    return directory


def test_the_span_is_first_start_to_last_report(tmp_path):
    # b starts 1 s after a (both prepared at the sweep's start); a reports last, at 11:30
    dirs = [_study(tmp_path, "a", START, 690, 6), _study(tmp_path, "b", START + 1, 300, 9)]
    found = suite_time.record(dirs)
    assert found["wall_s"] == 690.0 and found["runs"] == 15 and found["suite"] == "main"
    assert found["start"] == "2026-12-03T10:00:00+00:00" and found["end"] == "2026-12-03T10:11:30+00:00"
    assert found["studies"] == ["a", "b"] and found["machine"]["cpu"] == "Some CPU"
    assert suite_time.minutes(found["wall_s"]) == "11 min 30 s"


def test_a_study_not_yet_reported_gives_no_record(tmp_path):
    dirs = [_study(tmp_path, "a", START, 60, 3), tmp_path / "b"]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text("{}")
    assert suite_time.record(dirs) is None


def test_export_of_a_directory_sweep_writes_the_record_and_the_index_shows_it(tmp_path):
    run = tmp_path / "run"
    _study(run, "a", START, 125, 3), _study(run, "b", START, 65, 3)
    results = tmp_path / "results"
    results.mkdir()
    copied = export.export_run(run, results)
    assert results / "suite-main.json" in copied
    lines = pages.index_page(results, []).splitlines()  # no study: the suites' section alone
    assert "## How long each suite takes" in lines
    assert lines[-1] == "| main | a, b | 6 | default | 2 min 05 s | Some CPU, 2 CPUs | 2026-12-03 |"


def test_export_of_one_study_writes_no_suite_record(tmp_path):
    one = _study(tmp_path / "run", "a", START, 60, 3)
    results = tmp_path / "results"
    results.mkdir()
    export.export_run(one, results)
    assert not list(results.glob("suite-*")) and pages.suite_times(results) == []

"""The suite's workers take the test files longest first (tests/file_order.py, conftest.py)."""
from __future__ import annotations

import json
import types
from pathlib import Path

import conftest
import file_order

ROOT = Path(__file__).resolve().parents[2]


def test_longest_first_puts_unknown_files_first_then_by_duration():
    durations = {"a.py": 1.0, "b.py": 30.0, "c.py": 5.0, "d.py": 5.0}
    order = file_order.longest_first(["a.py", "new.py", "c.py", "b.py", "d.py", "a.py"], durations)
    assert order == ["new.py", "b.py", "c.py", "d.py", "a.py"]  # ties (c, d) as given


def test_a_run_updates_what_it_measured_and_drops_files_that_are_gone():
    recorded = {"a.py": 1.0, "gone.py": 9.0, "kept.py": 4.0}
    measured = {"a.py": 2.26, "new.py": 0.04}
    assert file_order.merged(recorded, measured, ["a.py", "kept.py", "new.py"]) == {
        "a.py": 2.3, "kept.py": 4.0, "new.py": 0.0}


def test_the_workers_collect_the_files_longest_first(monkeypatch):
    monkeypatch.setattr(file_order, "read_durations", lambda: {"t/a.py": 1.0, "t/b.py": 9.0})
    items = [types.SimpleNamespace(nodeid=n) for n in
             ("t/a.py::x", "t/a.py::y", "t/b.py::z", "t/new.py::w")]
    conftest._longest_files_first(items)
    assert [i.nodeid for i in items] == ["t/new.py::w", "t/b.py::z", "t/a.py::x", "t/a.py::y"]


def test_xdist_keeps_that_order(pytestconfig):
    assert pytestconfig.option.loadscopereorder is False  # not its own: most tests first


def test_the_recorded_durations_name_only_test_files_that_exist():
    durations = json.loads(file_order.DURATIONS.read_text())
    assert durations and all(isinstance(s, (int, float)) and s >= 0 for s in durations.values())
    missing = [f for f in durations if not (ROOT / f).is_file()]
    assert not missing, f"tests/durations.json names files that do not exist: {missing}"

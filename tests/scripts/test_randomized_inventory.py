"""The randomized tests are known: scripts/randomized_tests.py draws afresh in every file of the
suite that uses Hypothesis (a new one left off its list would never be explored), and the suite
itself draws derandomized (the same examples each run: a failure is the code's)."""
from __future__ import annotations

import re
from pathlib import Path

import hypothesis

import randomized_tests

TESTS = Path(__file__).resolve().parents[1]


def test_the_script_explores_every_file_that_uses_hypothesis():
    using = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                   if re.search(r"^@given\(", p.read_text(), flags=re.M))
    assert using == sorted(randomized_tests.HYPOTHESIS_FILES)


def test_the_suite_draws_derandomized_without_a_database():
    current = hypothesis.settings()
    assert current.derandomize and current.database is None

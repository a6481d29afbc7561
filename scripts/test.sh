#!/usr/bin/env bash
# Run the test suite. Creates .venv (repo root) with the pinned test extras when missing.
# Extra arguments go to pytest, e.g. scripts/test.sh -k attention
# --fast: the fast lane, the tests that start no process, train for long or build a venv: pytest's
# -m "not slow" (tests/fast_lane.py marks them; docs/testing.md says when to run which).
source "$(dirname "$0")/_venv.sh" test
args=()
for arg in "$@"; do
    if [[ $arg == --fast ]]; then args+=(-m "not slow"); else args+=("$arg"); fi
done
# Two worker processes (pytest-xdist; each test file runs whole in one of them), one per core of
# the 2-core CI machine; TJ_TEST_WORKERS=0 runs everything in this process.
exec python -m pytest -n "${TJ_TEST_WORKERS:-2}" --dist loadfile ${args[@]+"${args[@]}"}

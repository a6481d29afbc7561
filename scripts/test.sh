#!/usr/bin/env bash
# Run the test suite. Creates .venv (repo root) with the pinned test extras when missing.
# Extra arguments go to pytest, e.g. scripts/test.sh -k attention
source "$(dirname "$0")/_venv.sh" test
exec python -m pytest "$@"

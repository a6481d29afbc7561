#!/usr/bin/env bash
# Run the test suite. Creates .venv (repo root) with the pinned test extras when missing.
# Extra arguments go to pytest, e.g. scripts/test.sh -k attention
source "$(dirname "$0")/_venv.sh" test
# Huge pages for XLA's buffers, as the entry points give themselves (transformer_jax/train/hugepages.py),
# set here once so that the many commands the tests start need not restart themselves.
[[ "${GLIBC_TUNABLES:-}" == *glibc.malloc.hugetlb* ]] ||
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
# Two worker processes (pytest-xdist; each test file runs whole in one of them), one per core of
# the 2-core CI machine; TJ_TEST_WORKERS=0 runs everything in this process.
exec python -m pytest -n "${TJ_TEST_WORKERS:-2}" --dist loadfile "$@"

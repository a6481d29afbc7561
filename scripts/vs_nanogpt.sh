#!/usr/bin/env bash
# nanoGPT's README CPU run and ours side by side, whole processes in alternating pairs: wall,
# CPU, peak memory and validation loss of each (scripts/bench/vs_nanogpt.py says how).
#   scripts/vs_nanogpt.sh NANOGPT_DIR [--text PATH] [--pairs 2] [--max-iters 2000] [--out FILE]
#       [--ours-config FIELD=VALUE ...]   (our runs get --config.FIELD=VALUE, e.g.
#       model.dense_matmul=bfloat16)
# NANOGPT_DIR: a local checkout of github.com/karpathy/nanoGPT (its data is written from --text,
# default ../shared/data/tinyshakespeare.txt). nanoGPT runs on this venv's Python unless
# --nanogpt-python names another; either needs torch (the venv's test extra has it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
export PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m bench.vs_nanogpt "$@"

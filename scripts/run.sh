#!/usr/bin/env bash
# The main job: all five ablation studies at their default size (2-core CPU sized), on
# synthetic data the project generates itself. Creates .venv (repo root) when missing.
#   scripts/run.sh [WORKDIR] [extra sweep flags, e.g. --size=large]
# Re-running skips finished runs and resumes interrupted ones.
source "$(dirname "$0")/_venv.sh" ""
WORKDIR="${1:-runs/studies}"
python -m transformer_jax.sweep --experiment=experiments/ --workdir="$WORKDIR" "${@:2}"

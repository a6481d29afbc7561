#!/usr/bin/env bash
# The main job: all five ablation studies at their default size (2-core CPU sized), on
# synthetic data the project generates itself. Creates .venv (repo root) when missing.
#   scripts/run.sh [WORKDIR] [extra sweep flags, e.g. --size=large --jobs=1]
# Re-running skips finished runs and resumes interrupted ones. Two worker processes train two
# variants at once (one per core of a 2-core CPU); later flags override --jobs.
source "$(dirname "$0")/_venv.sh" ""
WORKDIR="${1:-runs/studies}"
python -m transformer_jax.sweep --experiment=experiments/ --workdir="$WORKDIR" --jobs=2 "${@:2}"

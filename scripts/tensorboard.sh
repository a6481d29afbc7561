#!/usr/bin/env bash
# TensorBoard on a sweep's results, with the venv's tensorboard (not on PATH in a fresh shell).
#   scripts/tensorboard.sh [LOGDIR] [tensorboard flags, e.g. --port=6007]
# LOGDIR defaults to runs/studies (scripts/run.sh's). The sweep ends by printing one URL per
# study that shows only that study's runs, the seeds of a variant in one colour.
LOGDIR=runs/studies
if (($#)) && [[ "$1" != -* ]]; then
    LOGDIR="$1"
    shift
fi
[[ "$LOGDIR" == /* ]] || [[ ! -e "$LOGDIR" ]] || LOGDIR="$(cd "$LOGDIR" && pwd)"
source "$(dirname "$0")/_venv.sh" ""  # (goes to the repo root: a relative LOGDIR is from there)
exec tensorboard --logdir "$LOGDIR" "$@"

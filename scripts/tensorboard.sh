#!/usr/bin/env bash
# TensorBoard on a sweep's results, with the venv's tensorboard (not on PATH in a fresh shell).
#   scripts/tensorboard.sh [LOGDIR] [tensorboard flags, e.g. --port=6007]
# LOGDIR defaults to runs/studies (scripts/run.sh's); a study's directory or any parent of the
# sweep's works too. TensorBoard names each run by its path below LOGDIR; before it starts, one
# URL per study found below LOGDIR is printed (scripts/tensorboard_links.py) that shows only that
# study's runs, the seeds of a variant and its mean in one colour, the study's comparison cards
# pinned first, unsmoothed: the same cards as the sweep's own URLs, which match the same runs
# under any parent too.
LOGDIR=runs/studies
if (($#)) && [[ "$1" != -* ]]; then
    LOGDIR="$1"
    shift
fi
[[ "$LOGDIR" == /* ]] || [[ ! -e "$LOGDIR" ]] || LOGDIR="$(cd "$LOGDIR" && pwd)"
source "$(dirname "$0")/_venv.sh" ""  # (goes to the repo root: a relative LOGDIR is from there)
if [[ -d "$LOGDIR" ]]; then
    python scripts/tensorboard_links.py "$LOGDIR" "$@" || true  # the links are a help, not a must
fi
exec tensorboard --logdir "$LOGDIR" "$@"

#!/usr/bin/env bash
# Every study in experiments/ at --size=large on one GPU, within a time limit, resumable.
#
#   scripts/large_studies.sh [--limit=SECONDS] [--grace=SECONDS] [--suite=main|lm|depth_sweep|depth_deepest|depth_remedies_pre|depth_remedies_post|depth_remedies_nonorm|depth_remedies_noresidual|depth_article_pre|depth_article_post|depth_article_nonorm|softmax_plateau_narrow|softmax_plateau_wide|lm_head_dim|components|induction|induction_matched|mechanisms|precision|circuits|all] [WORKDIR]
#                                                     # default runs/large, the main suite
#   (what each suite holds: scripts/run.sh; the names: transformer_jax/studies/design/catalog.py)
#   scripts/large_studies.sh --smoke [--limit=SECONDS] [WORKDIR]   # the same at --size=tiny, CPU
#   scripts/large_studies.sh --dry_run ...        # print the sweep command, run nothing
#
# At the limit the sweep gets SIGTERM: the run that is training saves a checkpoint and stops,
# and this script exits 124 ("stopped at the limit"); running the same command again skips the
# finished runs and resumes the stopped one from its checkpoint, until it exits 0 with every
# study's verdict and WORKDIR/report.md written. A sweep that has not stopped `grace` seconds
# after SIGTERM (one compiling, outside the training loop) is killed; its run resumes from its
# last checkpoint. The defaults (480 + 60 s) fit one 10-minute call on a lent GPU machine.
# --smoke trains the tiny studies (each variant a few seconds on an idle CPU; all of them take
# minutes, so give it a short --limit to see the stop, or none to see the reports).
#
# It runs the Python it finds (PYTHON, else `python`), not scripts/_venv.sh's .venv: on a GPU
# machine that is the image's jax with CUDA; the .venv's pinned jax is CPU-only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python}"
SIZE=large LIMIT=480 GRACE=60 WORKDIR="" DRY=0 SUITE=main
for arg in "$@"; do
  case "$arg" in
    --smoke) SIZE=tiny ;;
    --dry_run) DRY=1 ;;
    --limit=*) LIMIT="${arg#--limit=}" ;;
    --grace=*) GRACE="${arg#--grace=}" ;;
    --suite=*) SUITE="${arg#--suite=}" ;;  # the sweep checks the name
    -*) echo "error: unknown option $arg (valid: --smoke --limit=SECONDS --grace=SECONDS" \
             "--suite=main|lm|depth_sweep|depth_deepest|depth_remedies_pre|depth_remedies_post|depth_remedies_nonorm|depth_remedies_noresidual|depth_article_pre|depth_article_post|depth_article_nonorm|softmax_plateau_narrow|softmax_plateau_wide|lm_head_dim|components|induction|induction_matched|mechanisms|precision|circuits|all --dry_run)" >&2
        exit 2 ;;
    *) WORKDIR="$arg" ;;
  esac
done
[[ "$LIMIT" =~ ^[0-9]+$ && "$GRACE" =~ ^[0-9]+$ && "$LIMIT" -gt 0 ]] || {
  echo "error: --limit=$LIMIT and --grace=$GRACE must be whole seconds, the limit > 0" >&2
  exit 2
}
if [ "$SIZE" = tiny ]; then
  WORKDIR="${WORKDIR:-runs/large_smoke}"
  export JAX_PLATFORMS=cpu
else
  WORKDIR="${WORKDIR:-runs/large}"
fi
cd "$ROOT"
SWEEP=("$PY" -m transformer_jax.sweep --experiment=experiments/ --size="$SIZE" --jobs=1
       --suite="$SUITE" --workdir="$WORKDIR")
echo "[large_studies] ${SWEEP[*]} (stopped after ${LIMIT} s)" >&2
[ "$DRY" = 0 ] || exit 0
status=0
timeout --signal=TERM --kill-after="$GRACE" "$LIMIT" "${SWEEP[@]}" || status=$?
case "$status" in
  0) echo "[large_studies] done: $WORKDIR/report.md" >&2 ;;
  124|137) echo "[large_studies] stopped at the ${LIMIT} s limit; rerun the same command to" \
                "resume" >&2
           exit 124 ;;
  *) echo "[large_studies] the sweep failed (exit $status)" >&2 ;;
esac
exit "$status"

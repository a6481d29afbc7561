#!/usr/bin/env bash
#SBATCH --job-name=tj-sweep
#SBATCH --array=0-3
#SBATCH --cpus-per-task=2
#SBATCH --time=04:00:00
#SBATCH --output=slurm-%A_%a.out
#SBATCH --signal=B:TERM@120
#SBATCH --requeue
#
# A sweep spread over a SLURM array job: task i of n runs every n-th run of the study,
#   python -m transformer_jax.sweep --shard=i/n [your sweep flags]
# with i = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN and n = SLURM_ARRAY_TASK_COUNT (else
# MAX - MIN + 1; the array must be contiguous, e.g. --array=0-3). Submit from the repository:
#
#   sbatch --array=0-3 scripts/slurm/sweep_array.sh --experiment=experiments/positions.py \
#          --workdir=runs/positions
#   sbatch --dependency=afterany:JOBID scripts/slurm/sweep_array.sh --report \
#          --experiment=experiments/positions.py --workdir=runs/positions
#
# Each run lives in its own directory, so the shards never share one. The shard that ends last
# usually writes the report already; the --report job (the same sweep as one shard, 0/1) trains
# nothing that has ended and writes it in any case. Two minutes before the time limit SLURM
# sends SIGTERM to this script (--signal=B:TERM@120), which is the sweep after `exec`: the run
# in training saves a checkpoint and the task exits 0 as preempted; resubmitting the same
# command (or --requeue) resumes it from there.
#   --dry_run   print the sweep command and run nothing
#   --report    one shard of one (no array needed): train what is left, then write the report
# PYTHON picks the interpreter (default: python on PATH).
set -euo pipefail
ROOT="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
PY="${PYTHON:-python}"
DRY=0 REPORT=0 ARGS=()
for arg in "$@"; do
  case "$arg" in
    --dry_run) DRY=1 ;;
    --report) REPORT=1 ;;
    --shard=*) echo "error: $arg: the shard comes from the array task (SLURM_ARRAY_TASK_ID)" >&2
               exit 2 ;;
    *) ARGS+=("$arg") ;;
  esac
done
if [ "$REPORT" = 1 ]; then
  SHARD=0/1
elif [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  MIN="${SLURM_ARRAY_TASK_MIN:-0}"
  COUNT="${SLURM_ARRAY_TASK_COUNT:-$(( ${SLURM_ARRAY_TASK_MAX:-$MIN} - MIN + 1 ))}"
  if [ -n "${SLURM_ARRAY_TASK_MAX:-}" ] && [ $(( SLURM_ARRAY_TASK_MAX - MIN + 1 )) != "$COUNT" ]; then
    echo "error: the array ${MIN}-${SLURM_ARRAY_TASK_MAX} has $COUNT tasks: use a contiguous" \
         "--array (e.g. --array=0-$(( COUNT - 1 )))" >&2
    exit 2
  fi
  SHARD="$(( SLURM_ARRAY_TASK_ID - MIN ))/$COUNT"
else
  echo "error: SLURM_ARRAY_TASK_ID is not set: submit with sbatch --array=0-N, or pass --report" >&2
  exit 2
fi
cd "$ROOT"
SWEEP=("$PY" -m transformer_jax.sweep "--shard=$SHARD" "${ARGS[@]}")
echo "[sweep_array] ${SWEEP[*]}" >&2
[ "$DRY" = 0 ] || exit 0
exec "${SWEEP[@]}"  # the sweep itself gets SLURM's SIGTERM

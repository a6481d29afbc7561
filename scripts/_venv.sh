# Sourced by scripts/run.sh and scripts/test.sh: create .venv in the repo root when missing and
# install the package (with the given extras) against the pinned constraints. Re-installs only
# when setup.py or constraints.txt changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.installed${EXTRAS:+-$EXTRAS}"
WANT="$(cat "$ROOT/setup.py" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[setup] installing transformer_jax${EXTRAS:+[$EXTRAS]} into $VENV (pinned)" >&2
  # (some machines' pip config names local package folders that may not exist: drop that noise)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      -c "$ROOT/constraints.txt" -e "$ROOT${EXTRAS:+[$EXTRAS]}" 2>&1 \
      | { grep -v "is neither a file nor a directory" || true; } >&2
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export MPLBACKEND=Agg
export MPLCONFIGDIR="${MPLCONFIGDIR:-$(mktemp -d)}"
cd "$ROOT"

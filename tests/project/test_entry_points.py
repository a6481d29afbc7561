"""`python -m transformer_jax.main|sweep|trace --help` lists each command's own flags (they are
defined in the layers below the thin entry points) and exits 0 (absl's own help exits 1)."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command, flags", [
    ("main", ["--config", "--workdir", "--extend_to", "--[no]show_config"]),
    ("sweep", ["--experiment", "--workdir", "--suite", "--jobs", "--size", "--text_path"]),
    ("trace", ["--d_model", "--heads", "--position", "--norm", "--plot"]),
])
def test_help_lists_the_commands_flags(command, flags):
    proc = subprocess.run([sys.executable, "-m", f"transformer_jax.{command}", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"TJ_HUGEPAGES": "0", "PATH": ""})
    listed = {line.split(":")[0].strip() for line in proc.stdout.splitlines()
              if line.startswith("  --")}
    assert set(flags) <= listed, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_commands_set_up_is_one_call(monkeypatch):
    """main and the sweep call `cli.set_up_command()` once their flags are parsed: the terminal's
    level from --verbosity (warnings when it is not given), then the compilation's set-up, then
    TFDS's progress bars off."""
    import logging

    from transformer_jax.train import cli
    done = []
    monkeypatch.setattr(cli, "set_up_compilation", lambda: done.append(("compilation",
                                                                         cli.terminal_level())))
    monkeypatch.setattr(cli, "quiet_progress_bars", lambda: done.append(("quiet", None)))
    level = cli.terminal_level()
    try:
        cli.set_up_command()
    finally:
        cli.set_terminal_level(level)
    assert done == [("compilation", logging.WARNING), ("quiet", None)]

"""Experiment files as an old commit held them, for the tests that check a split study's parts
against its registration (test_deep_arms, test_softmax_plateau, test_depth_split)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]


def experiments_at(commit: str, names: Sequence[str], root: Path) -> dict[str, Path]:
    """name -> experiments/<name>.py as `commit` held it, written under `root` beside today's
    configs (which the old files load their base configs from). Runs git."""
    (root / "experiments").mkdir()
    (root / "configs").symlink_to(REPO / "configs")
    paths = {}
    for name in names:
        text = subprocess.run(["git", "show", f"{commit}:experiments/{name}.py"], cwd=REPO,
                              check=True, capture_output=True, text=True).stdout
        paths[name] = root / "experiments" / f"{name}.py"
        paths[name].write_text(text)
    return paths

"""The links scripts/tensorboard.sh prints before it starts TensorBoard on LOGDIR: one per study
found below LOGDIR (a directory whose config.json names a study, as the sweep writes it), its
runs named as TensorBoard names them for that LOGDIR, the seeds of a variant in one colour, the
cards the sweep's own links pin (its view file: studies/render/board.py) pinned on top.

    python scripts/tensorboard_links.py LOGDIR [tensorboard flags: --port=N is read]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from transformer_jax.studies.render import board
from transformer_jax.studies.run import terminal


def find_studies(logdir: Path) -> list[tuple[Path, str, int]]:
    """(directory, study name, number of runs) of each study at or below `logdir`, by path."""
    found = []
    for config in sorted(logdir.rglob("config.json")):
        try:
            saved = json.loads(config.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and isinstance(saved.get("study"), str) and "runs" in saved:
            found.append((config.parent, saved["study"], len(saved["runs"])))
    return found


def port_of(flags: Sequence[str]) -> int:
    """--port=N or --port N among TensorBoard's flags; its default otherwise."""
    for i, flag in enumerate(flags):
        if flag.startswith("--port="):
            return int(flag.split("=", 1)[1])
        if flag == "--port" and i + 1 < len(flags):
            return int(flags[i + 1])
    return terminal.TENSORBOARD_PORT


def link_lines(logdir: Path, port: int = terminal.TENSORBOARD_PORT) -> list[str]:
    studies = find_studies(logdir)
    if not studies:
        return []
    runs = sum(n for _, _, n in studies)
    lines = [f"TensorBoard on {logdir}: {runs} runs of {len(studies)} "
             f"{'study' if len(studies) == 1 else 'studies'}; open one study at a time (its "
             f"variants compared first, the seeds of a variant in one colour):"]
    width = max(max(len(name) for _, name, _ in studies), 5)
    for directory, name, _ in studies:
        url = terminal.study_url(name, terminal.pinned_cards(directory),
                                 directory.resolve() != logdir.resolve(), port,
                                 directory=directory.name)
        lines.append(f"  {name:<{width}}  {url}")
    if len(studies) > 1:
        cards = [t for directory, _, _ in studies
                 for t in board.read_view(directory).get("cards", [])]
        lines.append(f"  {'(all)':<{width}}  {terminal.all_studies_url(cards, port)}")
    return lines + terminal.legacy_tabs_note(runs)


if __name__ == "__main__":
    print("\n".join(link_lines(Path(sys.argv[1]), port_of(sys.argv[2:]))), flush=True)

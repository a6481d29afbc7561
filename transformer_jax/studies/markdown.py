"""Markdown for the pages a study writes (verdicts, analyses, probes)."""
from __future__ import annotations

from typing import Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A GitHub table: floats to 4 significant digits, anything else as str()."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows])


def checks_table(first_column: str, checks: Iterable[tuple[str, Sequence[bool]]]) -> list[str]:
    """An analysis's checks as table lines: each check's text, the seeds where it held, and
    PASS (all), FAIL (none), MIXED, or 'no finished run'. pages.py counts the PASS rows."""
    lines = [f"| {first_column} | seeds passing | verdict |", "|---|---|---|"]
    for text, passed in checks:
        verdict = ("no finished run" if not passed else
                   "PASS" if all(passed) else "FAIL" if not any(passed) else "MIXED")
        lines.append(f"| {text} | {sum(passed)}/{len(passed)} | {verdict} |")
    return lines

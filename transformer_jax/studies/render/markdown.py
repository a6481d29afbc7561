"""Markdown for the pages a study writes (verdicts, analyses, probes)."""
from __future__ import annotations

from typing import Iterable, Sequence

from transformer_jax.studies.checks import CheckResult


def cell(text: str) -> str:
    """`text` as one table cell: a '|' in it (|f(x)|, a norm) escaped, else it splits the cell."""
    return str(text).replace("|", "\\|")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A GitHub table: floats to 4 significant digits, anything else as str()."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else cell(v)  # noqa: E731
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows])


def checks_table(first_column: str, results: Iterable[CheckResult]) -> list[str]:
    """An analysis's checks as table lines: each check's text, the seeds where it held, and
    its verdict (PASS, FAIL, MIXED or 'no finished run')."""
    lines = [f"| {first_column} | seeds passing | verdict |", "|---|---|---|"]
    for result in results:
        lines.append(f"| {cell(result.text)} | {sum(result.passed)}/{len(result.passed)} | "
                     f"{result.verdict} |")
    return lines

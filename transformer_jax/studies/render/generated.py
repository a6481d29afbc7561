"""A generated file, or the marked region of one, written from its data or checked against it:
the last step every page generator shares (the results pages, README's headline table, and
scripts/*_page.py, scripts/bench/page.py), so that a region is found, replaced and checked one
way, and `--check` says the same thing for every page.

A region is the lines between `<!-- NAME:start -->` and `<!-- NAME:end -->`, each marker on a
line of its own and each in the file once; what is outside the markers is written by hand and
kept as it is.
"""
from __future__ import annotations

import sys
from pathlib import Path


class RegionError(ValueError):
    """A file without its region's markers, or with more than one of either, or out of order."""


def markers(name: str) -> tuple[str, str]:
    """The start and end markers of the region `name` (an HTML comment: markdown hides them)."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def split(text: str, name: str, where: object = "the page") -> tuple[str, str, str]:
    """(up to and with the start marker, what is between the markers, from the end marker on)."""
    start, end = markers(name)
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise RegionError(f"{where}: needs one {start} line and, after it, one {end} line")
    head, rest = text.split(start)
    body, tail = rest.split(end)
    return head + start, body, end + tail


def replace(text: str, name: str, body: str, where: object = "the page") -> str:
    """`text` with its region `name` holding `body`, on lines of their own between the markers
    (a body without a final newline gets one: the end marker starts its line)."""
    head, _, tail = split(text, name, where)
    newline = "" if body.endswith("\n") else "\n"
    return f"{head}\n{body}{newline}{tail}"


def stale(path: Path, text: str) -> bool:
    """Whether the file at `path` is missing or holds something other than `text`."""
    return not path.is_file() or path.read_text() != text


def write_or_check(path: Path, text: str, check: bool, command: str) -> int:
    """A generated file's last step. `check`: nothing is written; 1, said on stderr with the
    command that writes it, when the file is not `text`, else 0. Otherwise the file is written
    (only where it differs: an unchanged page keeps its time stamp); 0."""
    if not stale(path, text):
        return 0
    if check:
        print(f"error: {path} is out of date: run {command}", file=sys.stderr)
        return 1
    path.write_text(text)
    return 0


def write_or_check_region(path: Path, name: str, body: str, check: bool, command: str) -> int:
    """`write_or_check` of the file at `path` with its region `name` holding `body`."""
    return write_or_check(path, replace(path.read_text(), name, body, path), check, command)

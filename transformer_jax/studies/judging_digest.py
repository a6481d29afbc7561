"""The digest of the judging code that judging_rules.VERSIONS names: every module of the judge
room (studies/judge/: the statistics, the comparisons, the decision, the words, the choice of a
tuned arm's candidate, the counts and the correction for multiplicity), read whole as syntax
trees.

The modules are found by walking the room's folder, so a module added to it is judging code
without being listed. It reads each module's syntax tree without docstrings, so rewording a
docstring or a comment leaves the digest, and a changed number, operator or branch moves it. It
sits above the room it reads and the table that names it (judging_rules.py, which the record
imports), outside the room: the table holds the digest, and would move it.
"""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from transformer_jax.studies.design import syntax

JUDGE = Path(__file__).resolve().parent / "judge"  # the judge room


def modules(room: Path = JUDGE) -> list[Path]:
    """Every module of the room (subpackages' too), in the order of their paths."""
    return sorted(room.rglob("*.py"), key=lambda path: path.relative_to(room).as_posix())


def code_digest(room: Path = JUDGE) -> str:
    """sha256 (16 hex digits) of the room's modules' syntax trees, docstrings left out, each
    named by its path in the room."""
    trees = [[path.relative_to(room).as_posix(), _tree(path.read_text())]
             for path in modules(room)]
    return hashlib.sha256(json.dumps(trees).encode()).hexdigest()[:16]


def _tree(source: str) -> str:
    return ast.dump(syntax.without_docstrings(ast.parse(source)))

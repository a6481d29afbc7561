"""The digest of the judging code that judging_rules.VERSIONS names: the statistics, the
comparisons, the decision, the words and the correction for multiplicity, read as syntax trees.

It reads the code's syntax tree without docstrings, so rewording a docstring or a comment leaves
it, and a changed number, operator or branch moves it. It sits above the code it reads (record.py
takes judging_rules.VERSION, and this module reads record.py), so the two import one way.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import textwrap
from typing import Any

from transformer_jax.studies import multiplicity, report, stats, study, tuning
from transformer_jax.studies.design import syntax
from transformer_jax.studies.records import record


def judging_code() -> list[Any]:
    """The modules and classes whose code decides a verdict, and what it counts."""
    return [stats, multiplicity, tuning, study.NO_EFFECT, study.Comparison, study.Measure,
            study.Judgement, study.Expectation, study._rate_beyond_seeds,
            study.Study.refuse_unjudgeable, study.Study._worst_below_chance, study.Kind,
            study.REFUSED_ON_LOST, record.counts, record.judged, record._kind_counts,
            report.judge_expectations, report.stopped_steps]


def code_digest() -> str:
    """sha256 (16 hex digits) of the judging code's syntax trees, docstrings left out."""
    trees = [_tree(o) for o in judging_code()]
    return hashlib.sha256(json.dumps(trees).encode()).hexdigest()[:16]


def _tree(code: Any) -> str:
    """A module, class or function as its syntax tree; a table (a dict) as its items."""
    if isinstance(code, dict):
        return json.dumps({str(k): v for k, v in code.items()}, sort_keys=True)
    tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    return ast.dump(syntax.without_docstrings(tree))

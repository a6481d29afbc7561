"""The version of the rules that turn per-seed values into verdicts, tied to their code.

Every verdict record says which version judged it (`judging_rules`). The version is tied to a
digest of the judging code (the statistics, the comparisons, the decision, the words, the
correction for multiplicity): tests/studies/test_judging_rules.py fails when the code's digest
is not the one listed for VERSION, so changing how verdicts are computed means adding a
version; and `stale_records` (in the same test, over the committed results) fails while any
committed verdict was judged under another version, so the committed studies must be judged
again (`python -m transformer_jax.studies.rejudge`) in the change that alters the rules.

The digest reads the code's syntax tree without docstrings, so rewording a docstring or a
comment leaves it, and a changed number, operator or branch moves it.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

from transformer_jax.studies import syntax

# version -> the digest of the judging code it names. Append only: a new rule is a new version.
VERSIONS = {
    2: "0ce04babc7ae8f10",
    # 3: an expectation with worst= that names a tuned arm is checked against chance on the
    # arm's candidates (it raised: an arm is no variant); no verdict moves
    3: "49605d05d6851885",
    # 4 (issue 63): kinds of expectation; only findings are counted as the claim's evidence and
    # corrected by Holm, checks and post hoc counted apart, a check that does not hold an alarm;
    # a gain, gap or late gain on a variant whose every run diverged is refused, and so is a
    # comparison with a variant never finite from step 1 (unless it is declared a check)
    4: "e479823555f09cea",
    # 5 (issue 65): a difference of differences, (a − b) − (c − d) paired by seed, judged as one
    # expectation (Comparison.DIFFERENCE_OF_DIFFERENCES); no verdict of 4 moves
    5: "c634d7dba28914ba",
}
VERSION = max(VERSIONS)


def judging_code() -> list[Any]:
    """The modules and classes whose code decides a verdict, and what it counts."""
    from transformer_jax.studies import multiplicity, record, report, stats, study, tuning
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


def stale_records(results_dir: Path) -> list[str]:
    """One line per committed verdict record judged under another version of the rules."""
    problems = []
    for path in sorted(Path(results_dir).glob("*_verdict.json")):
        found = json.loads(path.read_text()).get("judging_rules")
        if found != VERSION:
            problems.append(f"{path.name}: judged under rules {found}, today's are {VERSION}: "
                            "python -m transformer_jax.studies.rejudge")
    return problems

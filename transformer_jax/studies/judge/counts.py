"""How a study's verdicts are counted: its findings (the claim's evidence), as judged and under
Holm's correction over them (multiplicity.py); its checks and post hoc expectations apart,
without Holm, a check that does not hold an alarm: the instrument may be broken. The overall
words ("holds", "partly holds", ...) are read from the counts.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from transformer_jax.studies.judge import multiplicity
from transformer_jax.studies.judge.judgement import Judgement
from transformer_jax.studies.judge.stats import Failure, Verdict
from transformer_jax.studies.judge.terms import Kind, Stated

Holm = tuple[float, Verdict, Optional[Failure]]  # p, the verdict under Holm, how it failed


def counts(verdicts: Sequence[Verdict],
           failures: Optional[Sequence[Optional[Failure]]] = None) -> dict[str, Any]:
    """How many expectations held, failed, were inconclusive, and the overall words; given
    how each failed (`failures`), how many of the failures were contradicted and how many
    smaller than stated."""
    held, failed = verdicts.count(Verdict.HOLDS), verdicts.count(Verdict.FAILS)
    overall = ("is not judged" if not verdicts  # no expectations: nothing holds by default
               else "holds" if held == len(verdicts) else "partly holds" if held
               else "does not hold" if failed else "is inconclusive")
    found = {"held": held, "failed": failed,
             "inconclusive": verdicts.count(Verdict.INCONCLUSIVE), "total": len(verdicts),
             "overall": overall}
    if failures is not None:
        found.update(contradicted=list(failures).count(Failure.CONTRADICTED),
                     smaller_than_stated=list(failures).count(Failure.SMALLER))
    return found


def counted(expectations: Sequence[Stated], judgements: Sequence[Judgement],
            p: Sequence[float]) -> tuple[dict[int, Holm], dict[str, Any]]:
    """(each finding's index -> what it becomes under Holm's correction over the study's
    findings, the counts): `p`, the p-values of the settled verdicts (multiplicity.p_value).
    The counts are the findings'; the checks' and the post hoc's are apart ("checks",
    "post_hoc"), and "alarms" names each check that does not hold."""
    kinds = [e.kind for e in expectations]
    found = kind_counts(Kind.FINDING, kinds, judgements)
    at = [i for i, k in enumerate(kinds) if k is Kind.FINDING]
    under_holm = multiplicity.holm_verdicts([judgements[i].verdict for i in at],
                                            [p[i] for i in at])
    holm_failures = multiplicity.holm_failures([judgements[i].failure for i in at], under_holm)
    holm = {i: (p[i], v, f) for i, v, f in zip(at, under_holm, holm_failures)}
    found["holm"] = {"family_level": multiplicity.FAMILY_LEVEL,
                     **counts(under_holm, holm_failures)}
    found["checks"] = kind_counts(Kind.CHECK, kinds, judgements)
    found["post_hoc"] = kind_counts(Kind.POST_HOC, kinds, judgements)
    found["alarms"] = [e.text for e, j in zip(expectations, judgements)
                       if e.kind is Kind.CHECK and not j.holds]
    return holm, found


def kind_counts(kind: Kind, kinds: Sequence[Kind],
                judgements: Sequence[Judgement]) -> dict[str, Any]:
    """`counts` of the expectations of one kind."""
    mine = [j for k, j in zip(kinds, judgements) if k is kind]
    return counts([j.verdict for j in mine], [j.failure for j in mine])

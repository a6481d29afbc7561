"""The version of the rules that turn per-seed values into verdicts, tied to their code.

Every verdict record says which version judged it (`judging_rules`). The version is tied to a
digest of the judging code, the judge room studies/judge/ read whole (the statistics, the
comparisons, the decision, the words, the correction for multiplicity, the counts):
tests/studies/test_judging_rules.py fails when the code's digest
(`judging_digest.code_digest`) is not the one listed for VERSION, so changing how verdicts are
computed means adding a version; and `stale_records` (in the same test, over the committed
results) fails while any committed verdict was judged under another version, so the committed
studies must be judged again (`python -m transformer_jax.studies.rejudge`) in the change that
alters the rules.

This module is only the table and the check of the records, with no import from the rest of
studies/: the record (records/record.py) says which version judged it, and the digest of the
judging code lives above both in judging_digest.py. Neither is in the judge room: the table
holds the digest of the room, which would move with it.
"""
from __future__ import annotations

import json
from pathlib import Path

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
    # 6 (issue 65): a variant with only one run that has a value (the others diverged, or gave
    # none: a refused control) is inconclusive unless worst= says what the others count as;
    # filling them at that one run's value judged one run with no spread
    6: "7aa2d1753586627e",
    # 7 (issue 65): rule 6 and "every run diverged" are one rule, fewer than 2 runs with a value,
    # with one note; the record tells a run that finished without a value (a refused control)
    # from one that diverged ("no_value"), which counted and still count alike
    7: "c3362da6ab75e4d6",
    # 8 (issue 67, item 1): the judging code moved into one room, studies/judge/, and the digest
    # reads the room whole (every module found by walking it, no hand-made list): now with the
    # constants the listed code read but the list did not hold (RATES, PAIRS, MIN_MEASURED), and
    # without what is not judging (tuning.py's tuned_arm and candidate_name name variants, which
    # the fingerprint holds; record.judged only writes the rows of what judge/counts.py counts).
    # No rule changed: no verdict moved when every committed study was judged again
    8: "f33aa5092421cd4e",
}
VERSION = max(VERSIONS)


def stale_records(results_dir: Path) -> list[str]:
    """One line per committed verdict record judged under another version of the rules."""
    problems = []
    for path in sorted(Path(results_dir).glob("*_verdict.json")):
        found = json.loads(path.read_text()).get("judging_rules")
        if found != VERSION:
            problems.append(f"{path.name}: judged under rules {found}, today's are {VERSION}: "
                            "python -m transformer_jax.studies.rejudge")
    return problems

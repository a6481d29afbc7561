"""The judge room: what turns a study's per-seed values into verdicts and counts them. The terms
an expectation is stated in (terms), one judgement's effect, interval and verdict (judgement),
an expectation judged on its runs, with what a run without a value counts as (expectation),
what is refused before a run as holding or failing by construction (unjudgeable), the choice of
a tuned arm's candidate per seed (tuned_choice), a study's verdicts (verdicts), Holm's
correction (multiplicity), the counts (counts), and the statistics under all of them (stats).

Every module here is judging code, read whole: studies/judging_digest.py digests the room's
syntax trees, and studies/judging_rules.py ties each version of the rules to that digest, so a
change here that is not a docstring's or a comment's asks for a new version and the committed
studies judged again. What an expectation is (study.Expectation) is the design's, above it.
"""

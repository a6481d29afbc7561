"""The pre-registration rule on constructed histories, in this process (no git: the fast lane's
test of studies/records/preregistration.py and studies/records/history.py; the histories read from
real commits are test_preregistration_history.py's)."""
from __future__ import annotations

from transformer_jax.studies.records import history, preregistration

DESIGN, RESULTS = "d" * 40, "e" * 40
MOVED = history.Change("c0ffee1" + "0" * 33, "f1", "f2")


def _past(**changed) -> history.History:
    return history.History(**{**dict(name="s", design_commit=DESIGN, results_commit=RESULTS,
                                     changes=(), late=()), **changed})


def test_a_design_committed_before_its_results_has_no_problem():
    assert preregistration.history_problems(_past(changes=(MOVED,)), ()) == []


def test_no_results_commit_or_no_design_commit_is_named():
    [results] = preregistration.history_problems(_past(results_commit=None), ())
    assert "commit the results" in results
    [design] = preregistration.history_problems(_past(design_commit=None), ())
    assert "commit it" in design


def test_a_late_move_needs_an_amendment_naming_its_commit():
    [problem] = preregistration.history_problems(_past(late=(MOVED,)), ())
    assert "no amendment names c0ffee1" in problem and "(f1 -> f2)" in problem
    assert preregistration.history_problems(_past(late=(MOVED,)), ("c0ffee1: why",)) == []
    assert preregistration.history_problems(_past(late=(MOVED,)), ("c0ffee: too short",))
    assert preregistration.history_problems(_past(late=(MOVED,)), ("deadbee: another",))


def test_an_amendment_names_a_commit_by_a_hex_prefix_of_seven_or_more():
    assert history.names_commit(("moved in c0ffee10 (see issue)",), MOVED.commit)
    assert not history.names_commit(("c0ffee",), MOVED.commit)
    assert not history.names_commit(("xc0ffee1",), MOVED.commit)  # a word, not part of one

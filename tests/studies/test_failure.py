"""How a verdict that does not hold failed: contradicted (the effect went the other way, past
its comparison's "no effect") or smaller than stated (the stated way, or not told apart from
none, but short of the threshold). The record, verdict.md's table, the headline, the results
index and the terminal's summary say which; a record judged before they were told apart shows
nothing extra."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from transformer_jax.studies.run import terminal
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.judge.stats import Failure, how_it_failed
from transformer_jax.studies.study import NO_EFFECT, Comparison, Expectation, Verdict

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"
CONTRADICTED, SMALLER = Failure.CONTRADICTED, Failure.SMALLER
INF = math.inf


def test_every_comparison_declares_its_no_effect_value():
    """A comparison added without saying what "no effect" is would be told contradicted or
    smaller than stated by accident: declare it in study.NO_EFFECT (None: it has none)."""
    assert set(NO_EFFECT) == set(Comparison)
    assert NO_EFFECT[Comparison.BETTER] == 0.0 and NO_EFFECT[Comparison.AT_MOST] is None


@pytest.mark.parametrize("low, high, accepted, no_effect, failure", [
    (0.005, 0.118, (0.2, INF), 0.0, SMALLER),  # residual_flow, 6 layers: too small
    (-0.035, -0.007, (0.02, INF), 0.0, CONTRADICTED),  # batchnorm: BatchNorm better
    (-0.012, 0.012, (0.05, INF), 0.0, SMALLER),  # not told apart from none
    (-0.1, 0.0, (0.05, INF), 0.0, SMALLER),  # reaches "no effect": not wholly the other way
    (-0.1, -1e-9, (0.05, INF), 0.0, CONTRADICTED),
    (-0.3, -0.1, (0.0, INF), 0.0, CONTRADICTED),  # "no worse than": cannot be smaller
    (-0.3, -0.1, (-0.05, INF), 0.0, CONTRADICTED),
    (0.13, 1.18, (-0.1, 0.1), 0.0, CONTRADICTED),  # WITHIN: a region bounded above
    (0.8, 0.9, (-INF, 0.7), None, CONTRADICTED),  # AT_MOST
    (0.0, 0.71, (0.8, INF), 0.0, SMALLER),  # FAIL_RATE_AT_LEAST: fewer runs failed
    (0.2, 0.9, (0.0, 0.1), 0.0, CONTRADICTED),  # FAIL_RATE_AT_MOST
    (0.1, 0.3, (0.05, INF), 0.0, None),  # holds
    (0.01, 0.3, (0.05, INF), 0.0, None),  # inconclusive
])
def test_how_a_verdict_failed(low, high, accepted, no_effect, failure):
    assert how_it_failed(low, high, accepted, no_effect) is failure


def _committed(study: str, index: int) -> tuple[Expectation, dict]:
    """A committed expectation, as its record states it, and its per-seed values."""
    row = json.loads((RESULTS / f"{study}_verdict.json").read_text())["expectations"][index]
    assert not any(v["diverged"] for values in row["values"].values() for v in values)
    e = Expectation(row["text"], row["metric"], row["a"], Comparison(row["comparison"]),
                    row["margin"], b=row["b"], higher_is_better=row["higher_is_better"])
    return e, {v: {x["seed"]: x["value"] for x in xs} for v, xs in row["values"].items()}


def test_the_committed_examples_fail_as_the_issue_says():
    """residual_flow: at 6 layers residuals are better by 0.062 [0.005, 0.118] accuracy against a
    stated 0.2; batchnorm: BatchNorm is better by 0.021 accuracy, the whole interval below 0.
    (batchnorm_text's 0.05 bits, the first example, became inconclusive when the mechanisms
    suite was re-run on the AVX-512 EPYC, 6b5e6ed.)"""
    e, final = _committed("residual_flow", 0)
    smaller = e.judge(final)
    assert (smaller.verdict, smaller.failure) == (Verdict.FAILS, SMALLER)
    assert 0 < smaller.low < smaller.high < e.margin
    assert "in the stated direction" in smaller.note
    e, final = _committed("batchnorm", 0)
    contradicted = e.judge(final)
    assert (contradicted.verdict, contradicted.failure) == (Verdict.FAILS, CONTRADICTED)
    assert contradicted.high < 0 and contradicted.note == ""
    e, final = _committed("batchnorm", 1)  # identical variants at batch 8: effect 0 ± 0.012
    assert e.judge(final).failure is SMALLER and "not told apart" in e.judge(final).note


def test_lower_is_better_is_told_by_the_gain_not_the_raw_difference():
    e = Expectation("", "loss", "a", Comparison.BETTER, 0.1, b="b", higher_is_better=False)
    worse = e.judge({"a": {0: 2.5, 1: 2.6, 2: 2.55}, "b": {0: 2.0, 1: 2.1, 2: 2.05}})
    assert worse.effect == pytest.approx(-0.5) and worse.failure is CONTRADICTED
    short = e.judge({"a": {0: 2.0, 1: 2.1, 2: 2.05}, "b": {0: 2.05, 1: 2.15, 2: 2.1}})
    assert short.effect == pytest.approx(0.05) and short.failure is SMALLER


def test_views_say_how_it_failed_and_old_records_show_nothing_extra():
    row = {"verdict": "does not hold", "note": "", "failure": "contradicted"}
    assert verdict_text.verdict_words(row) == "does not hold (contradicted)"
    old = {"verdict": "does not hold", "note": ""}  # judged before failures were told apart
    assert verdict_text.verdict_words(old) == "does not hold"
    counts = {"held": 1, "failed": 2, "inconclusive": 0, "total": 3, "overall": "partly holds",
              "contradicted": 1, "smaller_than_stated": 1}
    record = {"counts": counts, "seeds": [0, 1, 2]}
    assert verdict_text.verdict_cell(record) == (
        "partly holds: 1 of 3 hold, 2 do not (1 contradicted, 1 smaller than stated)")
    assert "(1 hold, 2 do not hold (1 contradicted, 1 smaller than stated), 0 inconclusive" in \
        verdict_text.overall_line(record)
    old_counts = {k: v for k, v in counts.items() if k not in ("contradicted",
                                                               "smaller_than_stated")}
    assert verdict_text.verdict_cell({"counts": old_counts}) == (
        "partly holds: 1 of 3 hold, 2 do not")


def test_the_terminal_summary_counts_each_kind(tmp_path):
    record = json.loads((RESULTS / "batchnorm_verdict.json").read_text())
    for row in record["expectations"]:  # as judged before failures were told apart
        row.pop("failure", None)
    for kind in ("contradicted", "smaller_than_stated"):
        record["counts"].pop(kind, None)
    (tmp_path / "old.json").write_text(json.dumps(record))
    assert terminal.read_verdict(tmp_path / "old.json").cell("does not hold") == "2"
    record["counts"].update(contradicted=1, smaller_than_stated=1)
    for row, kind in zip(record["expectations"], ("contradicted", "smaller than stated")):
        row["failure"] = kind
    (tmp_path / "verdict.json").write_text(json.dumps(record))
    found = terminal.read_verdict(tmp_path / "verdict.json")
    assert found.cell("does not hold") == "2 (1 contradicted, 1 smaller than stated)"
    assert found.cell("holds") == "0"
    assert found.expectations[0][0] == "does not hold (contradicted)"

"""Expectations that cannot hold or fail by construction are refused when a study loads (issue
49, item 4), and the two comparisons added for them: AT_LEAST, and RATIO on the log scale."""
from __future__ import annotations

import math
from pathlib import Path

import ml_collections
import numpy as np
import pytest
import scipy.stats

from transformer_jax.config import ConfigError
from transformer_jax.data import synthetic
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import (Comparison, Expectation, Study, Verdict,
                                           chance_accuracy, load_config, load_study)

REPO = Path(__file__).resolve().parents[2]
T2 = scipy.stats.t.ppf(0.975, 2)


def _study(*expectations: Expectation, seeds=(0, 1, 2), task="sort") -> Study:
    base = load_config(REPO / "configs/synthetic.py", f"task={task},tiny")
    return Study(name="s", claim="c", published="p", base=base, variants={"x": {}, "y": {}},
                 seeds=seeds, metrics=("eval/accuracy",), expectations=expectations)


def _rate(comparison: Comparison, margin: float) -> Expectation:
    return Expectation("no run fails", "eval/accuracy", "x", comparison, margin, threshold=0.5)


@pytest.mark.parametrize("comparison,margin,seeds,why", [
    (Comparison.FAIL_RATE_AT_MOST, 0.0, 3, "cannot hold at 3 seeds"),
    (Comparison.FAIL_RATE_AT_MOST, 0.1, 3, "it needs 36 seeds"),  # 1 − 0.025^(1/36) = 0.097
    (Comparison.FAIL_RATE_AT_LEAST, 0.5, 3, "it needs 6 seeds"),  # 0.025^(1/n) >= 0.5 at 6
])
def test_a_rate_the_seed_count_cannot_show_is_refused(comparison, margin, seeds, why):
    with pytest.raises(ConfigError, match="expectation 'no run fails'") as e:
        _study(_rate(comparison, margin), seeds=tuple(range(seeds))).refuse_unjudgeable()
    assert why in str(e.value) and "\n" not in str(e.value)


def test_a_rate_the_seed_count_can_show_loads():
    _study(_rate(Comparison.FAIL_RATE_AT_MOST, 0.75)).refuse_unjudgeable()
    _study(_rate(Comparison.FAIL_RATE_AT_MOST, 0.1), seeds=tuple(range(36))).refuse_unjudgeable()
    _study(_rate(Comparison.FAIL_RATE_AT_LEAST, 0.25)).refuse_unjudgeable()  # 0.29 >= 0.25


def test_a_diverged_run_counted_below_chance_is_refused():
    below = Expectation("x beats y", "eval/accuracy", "x", Comparison.BETTER, 0.1, b="y",
                        worst=0.0)
    with pytest.raises(ConfigError, match=r"worst=0 counts a diverged run below chance "
                                          r"accuracy \(0\.0625"):
        _study(below).refuse_unjudgeable()
    at_chance = Expectation("x beats y", "eval/accuracy", "x", Comparison.BETTER, 0.1, b="y",
                            worst=1 / 16)
    assert _study(at_chance).refuse_unjudgeable().expectations == (at_chance,)
    loss = Expectation("x beats y", "eval/loss", "x", Comparison.BETTER, 0.1, b="y",
                       higher_is_better=False, worst=99.0)
    _study(loss).refuse_unjudgeable()  # no chance level known for a loss: not refused


def test_chance_accuracy_knows_each_task():
    assert synthetic.chance_accuracy("sort", 16) == 1 / 16
    assert synthetic.chance_accuracy("order", 16) == 1 / 2
    assert synthetic.chance_accuracy("lag_bits", 2) == 1 / 16
    text = load_config(REPO / "configs/lm.py", "tiny")
    assert chance_accuracy(text) is None
    assert chance_accuracy(load_config(REPO / "configs/synthetic.py", "task=order")) == 0.5


def test_every_committed_study_loads_judgeable_at_every_size():
    for experiment in sorted((REPO / "experiments").glob("[!_]*.py")):  # _*.py: no study
        for size in ("tiny", "default", "large"):
            try:
                study = load_study(experiment, size, judgeable=False)
            except ConfigError as e:  # a study without this size, said in one line
                assert f"has no {size!r} size" in str(e)
                continue
            study.refuse_unjudgeable()


def test_at_least_is_the_mean_against_a_floor():
    e = Expectation("ratio kept", "m", "x", Comparison.AT_LEAST, 0.5)
    held = e.judge({"x": {0: 2.8, 1: 3.2, 2: 2.9}})
    assert held.verdict is Verdict.HOLDS and held.effect == pytest.approx(2.9666666)
    assert e.judge({"x": {0: 0.1, 1: 0.2, 2: 0.15}}).verdict is Verdict.FAILS


LOGITS = {"q": {0: 2.84, 1: 3.03, 2: 2.207}, "s": {0: 165.6, 1: 106.3, 2: 73.59}}


def test_ratio_is_the_t_interval_of_the_log_ratio_back_transformed():
    e = Expectation("s's max logit ≥ 10× q's", "m", "q", Comparison.RATIO, 10.0, b="s",
                    higher_is_better=False)
    j = e.judge(LOGITS)
    logs = np.log(list(LOGITS["s"].values())) - np.log(list(LOGITS["q"].values()))
    low, high = scipy.stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    assert j.effect == pytest.approx(math.exp(logs.mean()), rel=1e-12)
    assert (j.low, j.high) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
    assert j.verdict is Verdict.HOLDS and j.paired
    flipped = Expectation("q's ≥ 10× s's", "m", "q", Comparison.RATIO, 10.0, b="s").judge(LOGITS)
    assert flipped.effect == pytest.approx(1 / j.effect) and flipped.verdict is Verdict.FAILS


def test_ratio_of_a_non_positive_value_is_inconclusive_and_says_why():
    e = Expectation("r", "m", "q", Comparison.RATIO, 2.0, b="s")
    j = e.judge({"q": {0: 1.0, 1: 0.0, 2: 2.0}, "s": {0: 1.0, 1: 1.0, 2: 1.0}})
    assert j.verdict is Verdict.INCONCLUSIVE and "positive" in j.note
    with pytest.raises(ConfigError, match="margin=0"):
        Expectation("r", "m", "q", Comparison.RATIO, 0.0, b="s")


def test_an_inconclusive_ratio_counts_seeds_on_the_log_scale():
    e = Expectation("r", "m", "q", Comparison.RATIO, 2.0, b="s", higher_is_better=False)
    j = e.judge({"q": {0: 1.0, 1: 1.0, 2: 1.0}, "s": {0: 3.0, 1: 1.5, 2: 4.0}})
    assert j.verdict is Verdict.INCONCLUSIVE and "seeds would settle it" in j.note


def test_the_page_shows_a_ratio_as_a_factor():
    e = Expectation("s's max logit ≥ 10× q's", "m", "q", Comparison.RATIO, 10.0, b="s",
                    higher_is_better=False)
    cells = verdict_text.expectation_cells(record_lib.expectation_record(e, e.judge(LOGITS)))
    cell = dict(zip(verdict_text.VERDICT_HEADER, cells))
    assert cell["effect"].startswith("40.86× (s / q, lower is better")
    assert cell["threshold"] == "≥ 10×" and cell["verdict"] == "holds"

"""The statistics behind a study's verdict, on constructed per-seed values (no training): the
three-way verdict for each comparison, paired vs unpaired intervals, zero spread, diverged runs,
the seeds-needed estimate, and what summary.md / verdict.md / report.md show."""
from __future__ import annotations

import math
import warnings

import ml_collections
import pytest

from transformer_jax import report
from transformer_jax.config import ConfigError
from transformer_jax.study import (Comparison, Expectation, Study, Verdict, seeds_to_settle,
                                   settle_note)

HOLDS, FAILS, UNSURE = Verdict.HOLDS, Verdict.FAILS, Verdict.INCONCLUSIVE


def by_seed(*values: float, first: int = 0) -> dict[int, float]:
    return {first + i: v for i, v in enumerate(values)}


# per-seed differences a − b: 0.4, 0.25, 0.25 (percentile interval of the mean: [0.25, 0.4])
FINAL = {"a": by_seed(0.9, 0.8, 0.85), "b": by_seed(0.5, 0.55, 0.6)}


@pytest.mark.parametrize("expectation, verdict", [
    (Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b"), HOLDS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.35, b="b"), UNSURE),
    (Expectation("", "m", "a", Comparison.BETTER, 0.5, b="b"), FAILS),
    (Expectation("", "m", "b", Comparison.BETTER, 0.0, b="a"), FAILS),
    # lower is better: b's lower values beat a's by 0.25..0.4
    (Expectation("", "m", "b", Comparison.BETTER, 0.2, b="a", higher_is_better=False), HOLDS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", higher_is_better=False), FAILS),
    (Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b"), FAILS),  # gap ≈ +55 %
    (Expectation("", "m", "a", Comparison.WITHIN, 0.9, b="b"), HOLDS),
    (Expectation("", "m", "a", Comparison.WITHIN, 0.6, b="b"), UNSURE),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.95), HOLDS),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.85), UNSURE),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.75), FAILS),
])
def test_three_way_verdict(expectation, verdict):
    j = expectation.judge(FINAL)
    assert j.verdict is verdict, j
    assert j.low <= j.effect <= j.high
    assert (j.note != "") == (verdict is UNSURE)


def test_effect_is_the_gain_and_the_relative_gap():
    better = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(FINAL)
    assert better.effect == pytest.approx(0.3) and better.paired
    assert (better.low, better.high) == pytest.approx((0.25, 0.4))
    loss = Expectation("", "m", "b", Comparison.BETTER, 0.2, b="a", higher_is_better=False)
    assert loss.judge(FINAL).effect == pytest.approx(0.3)  # > 0: the lower loss wins
    within = Expectation("", "m", "a", Comparison.WITHIN, 0.6, b="b")
    assert within.judge(FINAL).effect == pytest.approx(0.3 / 0.55)
    scaled = {v: {s: 100 * x for s, x in xs.items()} for v, xs in FINAL.items()}
    assert within.judge(scaled).verdict is within.judge(FINAL).verdict  # relative: unit-free


def test_within_fails_on_either_side():
    e = Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b")
    assert e.judge({"a": by_seed(0.5, 0.5, 0.52), "b": by_seed(1.0, 0.98, 1.02)}).verdict is FAILS
    assert e.judge({"a": by_seed(2.0, 2.1, 1.9), "b": by_seed(1.0, 0.98, 1.02)}).verdict is FAILS


def test_paired_by_seed_is_tighter_than_unpaired():
    """b varies a lot from seed to seed, a tracks it +0.1: only pairing sees the gain."""
    b = [0.3, 0.6, 0.9, 0.45]
    a = [x + 0.1 + d for x, d in zip(b, (0.0, 0.01, -0.01, 0.005))]
    e = Expectation("", "m", "a", Comparison.BETTER, 0.05, b="b")
    paired = e.judge({"a": by_seed(*a), "b": by_seed(*b)})
    unpaired = e.judge({"a": by_seed(*a), "b": by_seed(*b, first=10)})  # different seeds
    assert paired.paired and not unpaired.paired
    assert paired.effect == pytest.approx(unpaired.effect)
    assert paired.verdict is HOLDS and unpaired.verdict is UNSURE
    assert unpaired.high - unpaired.low > 5 * (paired.high - paired.low)


def test_unpaired_samples_of_different_sizes():
    e = Expectation("", "m", "a", Comparison.BETTER, 0.1, b="b")
    j = e.judge({"a": by_seed(0.9, 0.92, 0.91), "b": by_seed(0.5, 0.52, 0.51, 0.49, first=5)})
    assert not j.paired and j.verdict is HOLDS


def test_intervals_are_reproducible():
    e = Expectation("", "m", "a", Comparison.BETTER, 0.3, b="b")
    final = {"a": by_seed(0.9, 0.7, 0.85, 0.8), "b": by_seed(0.5, 0.55, 0.6, 0.4, first=4)}
    first, second = e.judge(final), e.judge(final)
    assert (first.low, first.high) == (second.low, second.high)


def test_zero_spread_interval_is_the_point_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = Expectation("", "m", "a", Comparison.AT_MOST, 0.5).judge({"a": by_seed(0.5, 0.5, 0.5)})
        assert same.low == same.high == same.effect == 0.5 and same.verdict is HOLDS
        # constant per-seed difference, though each variant varies: paired spread is zero
        shift = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(
            {"a": by_seed(0.9, 0.7, 0.8), "b": by_seed(0.6, 0.4, 0.5)})
        assert shift.low == shift.high == pytest.approx(0.3) and shift.verdict is HOLDS
    within = Expectation("", "m", "a", Comparison.WITHIN, 0.05, b="b")
    assert within.judge({"a": by_seed(1.04, 1.04, 1.04), "b": by_seed(1.0, 1.0, 1.0)}).verdict is HOLDS
    assert within.judge({"a": by_seed(1.06, 1.06, 1.06), "b": by_seed(1.0, 1.0, 1.0)}).verdict is FAILS


def test_one_seed_is_never_settled():
    j = Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b").judge(
        {"a": by_seed(0.9), "b": by_seed(0.1)})
    assert j.verdict is UNSURE and math.isinf(j.high - j.low) and "no spread" in j.note


def test_diverged_run_counts_as_the_worst_finished_run():
    final = {"a": by_seed(0.9, 0.8, 0.85), "b": by_seed(0.5, math.nan, 0.6),
             "other": by_seed(0.2, 0.3, 0.25)}  # the worst accuracy in the study: 0.2
    j = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b").judge(final)
    assert j.values["b"] == {0: 0.5, 1: 0.2, 2: 0.6} and j.diverged == {"a": (), "b": (1,)}
    assert j.worst == 0.2 and j.verdict is HOLDS
    # lower is better (a loss): a diverged run counts as the highest loss
    loss = Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", higher_is_better=False)
    assert loss.judge(final).values["b"][1] == 0.9
    # an explicit `worst`, e.g. chance accuracy
    chance = Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b", worst=0.0).judge(final)
    assert chance.values["b"][1] == 0.0 and chance.worst == 0.0


def test_every_run_diverged_is_inconclusive_not_a_crash():
    nan = math.nan
    j = Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b").judge(
        {"a": by_seed(nan, nan, nan), "b": by_seed(nan, nan, nan)})
    assert j.verdict is UNSURE and "worst" in j.note
    assert Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", worst=0.0).judge(
        {"a": by_seed(nan, nan, nan), "b": by_seed(nan, nan, nan)}).verdict is HOLDS


def test_seeds_to_settle():
    # half-width 0.1, effect 0.05 from the threshold: the interval must halve, 4× the seeds
    assert seeds_to_settle(3, 0.30, 0.20, 0.40, (0.25, math.inf)) == 12
    assert seeds_to_settle(3, 0.30, 0.20, 0.40, (0.30, math.inf)) is None  # on the threshold
    assert seeds_to_settle(1, 0.30, -math.inf, math.inf, (0.25, math.inf)) is None
    assert seeds_to_settle(3, 0.30, 0.24, 0.36, (0.235, math.inf)) == 4  # at least one more
    # WITHIN: the nearest of ±margin decides
    assert seeds_to_settle(4, 0.0, -0.2, 0.2, (-0.1, 0.1)) == 16
    assert "≈ 12 seeds" in settle_note(3, 0.30, 0.20, 0.40, (0.25, math.inf))
    assert "> 100 seeds" in settle_note(3, 0.30, 0.20, 0.40, (0.299, math.inf))
    # FINAL: effect 0.3, interval [0.25, 0.4]: half-width 0.075, 0.05 from 0.35 → 3·1.5² = 6.75
    j = Expectation("", "m", "a", Comparison.BETTER, 0.35, b="b").judge(FINAL)
    assert j.verdict is UNSURE and j.note == "≈ 7 seeds would settle it at this spread (now 3)"
    on_it = Expectation("", "m", "a", Comparison.BETTER, 0.3, b="b").judge(FINAL)
    assert on_it.verdict is UNSURE and "sits on the threshold" in on_it.note


def _study(**fields) -> Study:
    return Study(name="s", claim="x helps", published="p", base=ml_collections.ConfigDict({"seed": 0}),
                 variants={"x": {}, "y": {"model.attn_scale": False}}, seeds=(0, 1, 2),
                 metrics=("eval/accuracy",),
                 expectations=(Expectation("x beats y", "eval/accuracy", "x", Comparison.BETTER,
                                           0.2, b="y"),
                               Expectation("y near x", "eval/accuracy", "y", Comparison.WITHIN,
                                           0.1, b="x")), **fields)


def _runs(values: dict[str, list[float]]):
    return {(v, s): {"status": {"state": "diverged" if math.isnan(x) else "finished"},
                     "curves": {"eval/accuracy": [(5, 0.1), (10, x)]}}
            for v, xs in values.items() for s, x in enumerate(xs)}


RUNS = _runs({"x": [0.9, 0.8, 0.85], "y": [0.5, math.nan, 0.6]})


def test_summary_shows_mean_std_and_interval():
    text = report._summary_markdown(_study(), RUNS)
    assert "95 % interval" in text and "percentile bootstrap" in text
    assert "| x | (base) | 0/3 | 0.85 ± 0.041 [0.8, 0.9] |" in text
    assert "| 1/3 | 0.55 ± 0.05 [0.5, 0.6] |" in text  # diverged runs left out, counted


def test_verdict_table_and_overall_line_and_index(tmp_path):
    text = report.verdict_markdown(_study(), RUNS, analysis="accuracy by length: flat")
    assert "| expected | per-seed values | effect | 95 % interval | threshold | verdict |" in text
    assert ("| x beats y | x: 0.9, 0.8, 0.85 · y: 0.5, diverged→0.5, 0.6 | 0.3167 (x − y) "
            "| [0.25, 0.4] | ≥ 0.2 | holds |") in text
    assert "| y near x |" in text and "within ±10.0%" in text and "| does not hold |" in text
    assert "the claim partly holds" in text and "(1 hold, 1 do not hold, 0 inconclusive of 2" in text
    assert "percentile bootstrap" in text and "## Analysis\n\naccuracy by length: flat" in text
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "verdict.md").write_text(text)
    index = report.write_index(tmp_path, ["s"]).read_text()
    assert "| expected | effect | 95 % interval | threshold | verdict |" in index
    assert "| x beats y | 0.3167 (x − y) | [0.25, 0.4] | ≥ 0.2 | holds |" in index
    assert "per-seed" not in index and "**Verdict: the claim partly holds" in index


def test_inconclusive_verdict_says_how_many_seeds():
    study = _study()
    runs = _runs({"x": [0.9, 0.7, 0.85], "y": [0.5, 0.55, 0.6]})  # x − y: 0.4, 0.15, 0.25
    text = report.verdict_markdown(study, runs)
    assert "| inconclusive: ≈ " in text and "seeds would settle it at this spread (now 3)" in text


def test_study_suite_and_analyses_fields():
    assert _study().suite == "main" and _study().analyses == ()
    assert _study(suite="lm").suite == "lm"
    with pytest.raises(ConfigError, match="suite"):
        _study(suite="")
    with pytest.raises(ConfigError, match="analyses"):
        _study(analyses=("not a function",))

"""Comparison.DIFFERENCE_OF_DIFFERENCES (issue 65, item 4): one gain against another, paired by
seed: "the price of leaving ÷√d_k out grows with d_k" as one judged expectation."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from transformer_jax.config import ConfigError
from transformer_jax.studies.judge import multiplicity
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import forest, verdict_text
from transformer_jax.studies.study import (NO_EFFECT, Comparison, Expectation, Study, Verdict,
                                           expectation_key, load_config)

REPO = Path(__file__).resolve().parents[2]
# bits/char, lower is better: the penalty (unscaled − scaled) is 0.1 at d_k 16 and ~0.5 at 128
BITS = {"u128": {0: 2.60, 1: 2.55, 2: 2.70}, "s128": {0: 2.10, 1: 2.08, 2: 2.15},
        "u16": {0: 2.20, 1: 2.21, 2: 2.19}, "s16": {0: 2.10, 1: 2.10, 2: 2.10}}


def _grows(margin: float, **fields) -> Expectation:
    """Scaled beats unscaled by more at d_k 128 than at 16 (bits/char: lower is better)."""
    return Expectation("the penalty grows with d_k", "bits", "s128",
                       Comparison.DIFFERENCE_OF_DIFFERENCES, margin, b="u128", c="s16", d="u16",
                       higher_is_better=False, **fields)


def test_the_effect_is_the_t_interval_of_the_per_seed_difference_of_differences():
    j = _grows(0.2).judge(BITS)
    # lower is better: a's gain over b is b − a (the penalty), minus d − c, per seed
    per_seed = np.array([(BITS["u128"][s] - BITS["s128"][s]) - (BITS["u16"][s] - BITS["s16"][s])
                         for s in (0, 1, 2)])
    low, high = scipy.stats.ttest_1samp(per_seed, 0.0).confidence_interval(0.95)
    assert j.effect == pytest.approx(per_seed.mean(), rel=1e-12)
    assert (j.low, j.high) == pytest.approx((low, high), rel=1e-9)
    assert j.paired and j.verdict is Verdict.HOLDS
    assert set(j.values) == {"u128", "s128", "u16", "s16"}


def test_a_planted_swap_of_the_pairs_contradicts_it():
    swapped = Expectation("t", "bits", "s16", Comparison.DIFFERENCE_OF_DIFFERENCES, 0.2, b="u16",
                          c="s128", d="u128", higher_is_better=False).judge(BITS)
    assert swapped.effect == pytest.approx(-_grows(0.2).judge(BITS).effect)
    assert swapped.verdict is Verdict.FAILS and swapped.failure is not None
    assert NO_EFFECT[Comparison.DIFFERENCE_OF_DIFFERENCES] == 0.0


def test_higher_is_better_flips_the_sign():
    up = Expectation("t", "acc", "s128", Comparison.DIFFERENCE_OF_DIFFERENCES, 0.0, b="u128",
                     c="s16", d="u16").judge(BITS)
    assert up.effect == pytest.approx(-_grows(0.0).judge(BITS).effect)


def test_gains_told_apart_but_equal_growth_is_inconclusive_or_fails_not_holds():
    same = {"u128": {0: 2.2, 1: 2.3, 2: 2.25}, "s128": {0: 2.1, 1: 2.2, 2: 2.15},
            "u16": {0: 2.2, 1: 2.3, 2: 2.25}, "s16": {0: 2.1, 1: 2.2, 2: 2.15}}
    assert _grows(0.05).judge(same).verdict is not Verdict.HOLDS


def test_its_four_variants_must_share_their_seeds():
    unpaired = {**BITS, "u16": {0: 2.2, 1: 2.2, 3: 2.2}}
    j = _grows(0.2).judge(unpaired)
    assert j.verdict is Verdict.INCONCLUSIVE and "same seeds" in j.note


@pytest.mark.parametrize("fields,message", [
    (dict(c=None, d=None), "needs c= and d="),
    (dict(c="u16", d=None), "needs c= and d="),
])
def test_it_needs_the_second_pair(fields, message):
    with pytest.raises(ConfigError, match=message):
        Expectation("t", "bits", "u128", Comparison.DIFFERENCE_OF_DIFFERENCES, 0.2, b="s128",
                    **fields)


def test_another_comparison_takes_no_second_pair():
    with pytest.raises(ConfigError, match="takes no c= and d="):
        Expectation("t", "bits", "u128", Comparison.BETTER, 0.2, b="s128", c="u16", d="s16")


def test_a_study_refuses_a_second_pair_naming_no_variant():
    base = load_config(REPO / "configs/synthetic.py", "task=sort,tiny")
    variants = {v: {} for v in ("u128", "s128", "s16")}
    with pytest.raises(ConfigError, match="'u16'"):
        Study(name="s", claim="c", published="p", base=base, variants=variants, seeds=(0, 1),
              metrics=("bits",), expectations=(_grows(0.2),))


def test_a_design_without_the_second_pair_keeps_its_fingerprint_key():
    plain = Expectation("t", "bits", "u128", Comparison.BETTER, 0.2, b="s128")
    assert '"c"' not in expectation_key(plain) and '"d"' not in expectation_key(plain)
    assert '"c": "s16"' in expectation_key(_grows(0.2))


def test_the_record_page_and_forest_name_both_pairs():
    e = _grows(0.2)
    row = record_lib.expectation_record(e, e.judge(BITS))
    assert (row["c"], row["d"]) == ("s16", "u16")
    plain = Expectation("t", "bits", "s128", Comparison.BETTER, 0.2, b="u128")
    assert "c" not in record_lib.expectation_record(plain, plain.judge(BITS))
    cell = dict(zip(verdict_text.VERDICT_HEADER, verdict_text.expectation_cells(row)))
    words = "(u128 − s128) − (u16 − s16), paired by seed, lower is better"
    assert cell["effect"] == f"{row['effect']:.4g} ({words})" and cell["threshold"] == "≥ 0.2"
    assert words in forest.scale_words(row)
    assert forest.accepted_region(row) == (0.2, math.inf)


def test_holm_reads_its_p_value():
    p = multiplicity.p_value(_grows(0.2), BITS)
    assert 0.0 < p < 0.05

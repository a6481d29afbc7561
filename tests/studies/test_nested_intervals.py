"""The intervals of an effect against random draws nested in units (studies/analysis/
nested_intervals.py) cover the truth on simulated data with both sources of variance: units,
and draws within a unit; an interval that leaves the draws' spread out does not."""
from __future__ import annotations

import numpy as np
import pytest

from transformer_jax.studies.analysis.nested_intervals import keyed_rng, summarize
from transformer_jax.studies.judge.stats import mean_interval


def simulate(rng, sims, units, draws, mean_group=6.0, mean_random=2.0):
    """Per unit a group cost and `draws` random-set costs with a unit effect shared by both
    (sd 0.3, 0.2) and a set effect within the unit (sd 1.0) that dominates: [S, N], [S, N, M]."""
    unit = rng.normal(0, 1, (sims, units))
    group = mean_group + 0.3 * unit + 0.2 * rng.normal(0, 1, (sims, units))
    random = (mean_random + 0.2 * unit[..., None] + 0.1 * rng.normal(0, 1, (sims, units, 1))
              + 1.0 * rng.normal(0, 1, (sims, units, draws)))
    return group, random


@pytest.mark.parametrize("units, draws", [(8, 3), (5, 2)])
def test_the_intervals_cover_the_truth_95_times_in_100(units, draws):
    """Coverage of the difference (truth 4) and the ratio (truth 3) over 2,000 simulated
    studies, within 3 binomial sd of 95 %; an interval that left the sets' spread out (the
    group's own t interval, shifted by the random sets' grand mean) covers far less here."""
    rng = np.random.default_rng([65, units, draws])
    group, random = simulate(rng, 2000, units, draws)
    found = [summarize(g, r) for g, r in zip(group, random)]
    covered = {"difference": np.mean([f["difference"].low <= 4 <= f["difference"].high
                                      for f in found]),
               "ratio": np.mean([f["ratio"].low <= 3 <= f["ratio"].high for f in found])}
    band = 3 * np.sqrt(0.95 * 0.05 / 2000)
    assert all(abs(c - 0.95) < band for c in covered.values()), covered
    low, high = mean_interval(group)
    shift = random.mean((1, 2))
    naive = np.mean((low - shift <= 4) & (4 <= high - shift))
    assert naive < 0.8, naive
    within = np.mean([f["within_unit_sd"] ** 2 for f in found])
    assert within == pytest.approx(1.0, rel=0.05)  # the set effect's variance, recovered


def test_the_ratio_is_unbounded_when_the_random_sets_cost_nothing_clear_of_zero():
    rng = np.random.default_rng(0)
    found = summarize(3 + rng.normal(0, 0.1, 6), rng.normal(0, 1, (6, 4)))
    assert (found["ratio"].low, found["ratio"].high) == (-np.inf, np.inf)
    assert found["difference"].low > 1  # the difference still says the group costs more


def test_a_keyed_generator_depends_on_the_key_alone():
    draw = lambda key: keyed_rng(key, 7).integers(0, 2 ** 30, 4).tolist()  # noqa: E731
    assert draw(("a", 1)) == draw(("a", 1)) != draw(("a", 2))
    assert draw(("a", 1)) != keyed_rng(("a", 1), 8).integers(0, 2 ** 30, 4).tolist()


def test_random_draws_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"random has shape \(3, 1\); it must be \[units, draws >= 2\]"):
        summarize(np.zeros(3), np.zeros((3, 1)))

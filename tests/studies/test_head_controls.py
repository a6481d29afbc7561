"""The matched, resampled head-set control (studies/analysis/head_controls.py): random sets
matched by layer, role heads kept out, a fresh reproducible draw per unit, and a refusal where
no matched set exists (the intervals' coverage: test_nested_intervals.py). On a model whose heads are planted (tests/planted_heads.py), the planted head's group
comes out costlier than matched random sets and a group of noise heads does not."""
from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import planted_heads as planted
from transformer_jax.studies.analysis import head_controls as hc

UNITS = list(range(24))  # seeds of the planted model


@pytest.fixture(scope="module")
def planted_result():
    return hc.run_control(planted.SHAPE, [planted.PLANTED], planted.role_scores(),
                          planted.THRESHOLD, UNITS, planted.knockout_cost)


def test_the_planted_heads_group_costs_more_than_matched_random_sets(planted_result):
    result = planted_result
    assert result.costlier and result.difference.low > 0
    assert result.ratio.low > 10  # the planted head carries the output (×4 against ×0.25)
    assert all(s == ((1, s[0][1]),) and s[0][1] != 2 for unit in result.sets for s in unit)
    assert result.group_costs.shape == (len(UNITS),)
    assert result.random_costs.shape == (len(UNITS), hc.DRAWS)


def test_groups_of_noise_heads_are_no_costlier_than_matched_random_sets():
    """Noise heads are exchangeable over seeds, so for a group of them the truth is a ratio of
    1, and a 95 % interval misses it 1 time in 20. Over 6 disjoint sets of 16 seeds and 3 noise
    groups (18 tries, 0.9 misses expected) the control misses at most twice, while it finds the
    planted head costlier in every set. Were the planted head not kept out of the random sets,
    they would cost several times a noise group's and every interval would fall below 1."""
    misses, groups = [], ([(0, 1), (1, 0)], [(1, 0)], [(0, 2), (0, 3)])
    for window in range(6):
        units = list(range(100 + 16 * window, 116 + 16 * window))
        run = lambda group: hc.run_control(  # noqa: E731
            planted.SHAPE, group, planted.role_scores(), planted.THRESHOLD, units,
            planted.knockout_cost)
        assert run([planted.PLANTED]).costlier, window
        for group in groups:
            result = run(group)
            assert not any(planted.PLANTED in s for unit in result.sets for s in unit)
            if not result.ratio.low < 1 < result.ratio.high:
                misses.append((window, group, result.ratio))
    assert len(misses) <= 2, misses


def test_random_sets_are_matched_by_layer_and_keep_role_heads_out():
    shape, group = (3, 6), [(0, 1), (0, 4), (2, 5)]
    scores = np.zeros(shape + (2,))  # two roles
    scores[0, 2, 0] = scores[2, 0, 1] = 0.7  # role heads, one per role
    scores[0, 3, 1] = 0.5  # at the threshold: a role head too (the role check's ≥)
    plan = hc.plan_control(shape, group, scores, 0.5, units=range(60))
    eligible = {(0, 0), (0, 5), (2, 1), (2, 2), (2, 3), (2, 4)}
    seen = collections.Counter()
    for unit, sets in plan.items():
        assert sets[0] == tuple(sorted(group)) and len(sets) == 1 + hc.DRAWS
        for s in sets[1:]:
            assert collections.Counter(h[0] for h in s) == {0: 2, 2: 1}
            assert len(set(s)) == len(s) and set(s) <= eligible
            seen.update(s)
    assert set(seen) == eligible  # every eligible head is drawn, none other


def test_each_role_may_have_its_own_threshold():
    scores = np.zeros((1, 5, 2))
    scores[0, 1] = (0.6, 0.0)  # a role-0 head at threshold 0.5
    scores[0, 2] = (0.0, 0.25)  # a role-1 head at threshold 0.2
    scores[0, 3] = (0.45, 0.15)  # neither
    eligible = hc.eligible_heads((1, 5), [(0, 0)], scores, (0.5, 0.2))
    assert eligible.tolist() == [[False, False, False, True, True]]
    with pytest.raises(hc.ControlError, match=r"below 0.5 / 0.2, and a random set matched by "
                                              r"layer needs 3 there"):
        hc.plan_control((1, 5), [(0, 0), (0, 3), (0, 4)], scores, (0.5, 0.2), units=[0])
    with pytest.raises(hc.ControlError, match=r"role_scores has shape \(2, 5\)"):
        hc.eligible_heads((1, 5), [(0, 0)], np.zeros((2, 5)), 0.5)


def test_every_unit_draws_afresh_and_reproducibly():
    scores = np.zeros((2, 8))
    first = hc.plan_control((2, 8), [(1, 3)], scores, 0.5, units=["a", "b", 3])
    again = hc.plan_control((2, 8), [(1, 3)], scores, 0.5, units=[3, "b", "a"])
    assert first == again  # a unit's draw depends on its id, not its place in the list
    assert len({tuple(sets[1:]) for sets in first.values()}) == 3  # not shared across units
    other_group = hc.plan_control((2, 8), [(1, 4)], scores, 0.5, units=["a"])
    assert [s[0][1] for s in other_group["a"][1:]] != [s[0][1] for s in first["a"][1:]]


@pytest.mark.parametrize("shape, group, scores_at, message", [
    ((2, 2), [(0, 0), (0, 1)], [], "layer 0 has 0 head(s) outside the group with every role "
     "score below 0.5, and a random set matched by layer needs 2 there (the group takes 2 of "
     "its 2 heads): a matched control needs more heads per layer than the group holds"),
    ((2, 3), [(1, 0)], [(1, 1), (1, 2)], "layer 1 has 0 head(s)"),  # the rest are role heads
    ((2, 4), [(0, 0), (0, 1), (1, 0)], [(0, 2)], "layer 0 has 1 head(s)"),
])
def test_no_room_for_a_matched_set_is_refused_in_one_line(shape, group, scores_at, message):
    scores = np.zeros(shape)
    for head in scores_at:
        scores[head] = 0.9
    with pytest.raises(hc.ControlError) as error:
        hc.plan_control(shape, group, scores, 0.5, units=[0])
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("group, draws, message", [
    ([], 4, "the group is empty"), ([(2, 0)], 4, "head (2, 0) is outside the model's 2 layers"),
    ([(0, 1), (0, 1)], 4, "names a head twice"), ([(0, 1)], 1, "draws=1 must be at least 2")])
def test_a_malformed_request_is_refused_in_one_line(group, draws, message):
    with pytest.raises(hc.ControlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hc.plan_control((2, 4), group, np.zeros((2, 4)), 0.5, units=[0], draws=draws)


def test_the_result_is_stored_as_plain_data(planted_result):
    record = json.loads(json.dumps(planted_result.to_dict()))
    assert record["group"] == [list(planted.PLANTED)]
    assert len(record["sets"]) == len(UNITS) and len(record["random_costs"][0]) == hc.DRAWS
    assert record["ratio"]["low"] == planted_result.ratio.low
    assert record["difference"]["mean"] == pytest.approx(
        np.mean(planted_result.group_costs - planted_result.random_costs.mean(1)))

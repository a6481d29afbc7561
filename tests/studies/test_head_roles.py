"""Head roles (transformer_jax/studies/analysis/head_roles.py): the scores on hand-built attention patterns, the
same numbers from plain loops on random weights, and the roles they name."""
from __future__ import annotations

import numpy as np

from transformer_jax.studies.analysis import head_roles as hr


def _random_weights(rng, shape):  # rows that sum to one: [..., T, T]
    w = rng.random(shape)
    return w / w.sum(-1, keepdims=True)


def test_an_exact_previous_token_pattern_scores_one():
    t = 10
    w = np.zeros((2, 3, t, t))  # [B, H, T, T]
    w[..., 0, 0] = 1.0
    w[..., np.arange(1, t), np.arange(t - 1)] = 1.0
    np.testing.assert_allclose(hr.previous_token_score(w), 1.0)
    np.testing.assert_allclose(hr.mean_offset(w), (t - 1) / t)  # i = 0 looks at itself
    np.testing.assert_allclose(hr.prefix_matching_score(w, t // 2), 0.0)


def test_an_exact_induction_pattern_scores_one_on_prefix_matching():
    p = 6
    w = np.zeros((1, 2, 2 * p, 2 * p))
    w[..., np.arange(p), 0] = 1.0  # the first half: on the first token
    i = np.arange(p, 2 * p)
    w[..., i, i - p + 1] = 1.0  # the token after the earlier occurrence
    np.testing.assert_allclose(hr.prefix_matching_score(w, p), 1.0)
    assert hr.previous_token_score(w).max() < 0.2
    role, value = hr.roles(hr.previous_token_score(w), hr.prefix_matching_score(w, p))
    assert [hr.ROLES[r] for r in role] == ["induction", "induction"] and np.all(value == 1.0)


def test_scores_agree_with_plain_loops_on_random_weights():
    rng = np.random.default_rng(0)
    layers, b, h, t = 2, 3, 4, 8
    w = _random_weights(rng, (layers, b, h, t, t))
    mask = rng.random((b, t)) < 0.8
    offset, previous = hr.mean_offset(w, mask), hr.previous_token_score(w, mask)
    prefix = hr.prefix_matching_score(w, t // 2)
    for l in range(layers):
        for k in range(h):
            off, prev, n_off, n_prev, pre = 0.0, 0.0, 0, 0, []
            for x in range(b):
                for i in range(t):
                    if mask[x, i]:
                        off += sum(w[l, x, k, i, j] * (i - j) for j in range(t))
                        n_off += 1
                        if i >= 1:
                            prev += w[l, x, k, i, i - 1]
                            n_prev += 1
                    if i >= t // 2:
                        pre.append(w[l, x, k, i, i - t // 2 + 1])
            assert np.isclose(offset[l, k], off / n_off)
            assert np.isclose(previous[l, k], prev / n_prev)
            assert np.isclose(prefix[l, k], np.mean(pre))


def test_roles_follow_the_thresholds():
    prev = np.array([0.9, 0.2, 0.6, 0.1])
    ind = np.array([0.1, 0.8, 0.7, 0.1])
    role, value = hr.roles(prev, ind)
    assert [hr.ROLES[r] for r in role] == ["previous-token", "induction", "induction", "other"]
    np.testing.assert_allclose(value, [0.9, 0.8, 0.7, 0.1])


def test_repeated_tokens_repeat_once_without_a_repeat_inside_a_period():
    x = hr.repeated_tokens(1, 20, 8, num=5)
    assert x.shape == (5, 16) and x.min() >= 1 and x.max() < 20
    np.testing.assert_array_equal(x[:, :8], x[:, 8:])
    assert all(len(set(row[:8])) == 8 for row in x)
    np.testing.assert_array_equal(x, hr.repeated_tokens(1, 20, 8, num=5))  # fixed


def test_voitas_question_per_seed_reads_the_right_heads():
    from transformer_jax.studies.analysis import head_importance as hi
    # 2 layers x 3 heads: L0 H1 previous-token, L1 H2 induction, the rest no role
    prev = np.array([[0.1, 0.9, 0.2], [0.1, 0.1, 0.1]])
    prefix = np.array([[0.0, 0.0, 0.0], [0.0, 0.1, 0.6]])
    scores = {"previous_token": prev, "prefix_matching": prefix}
    assert hi.has_role(scores).tolist() == [[False, True, False], [False, False, True]]
    assert hi.has_role({}) is None
    roles_matter = np.array([[0.01, 0.5, 0.02], [0.03, 0.0, 0.3]])
    assert hi.top_head_has_role(roles_matter, scores) and hi.roles_cost_more(roles_matter, scores)
    assert hi.roles_in_top(roles_matter, scores, 2) == 2
    assert hi.roles_in_top(roles_matter, scores, 3) == 2 and hi.roles_in_top(roles_matter, {}, 3) == 0
    others_matter = np.array([[0.6, 0.01, 0.5], [0.4, 0.0, 0.02]])  # L0 H0 most, no role
    assert not hi.top_head_has_role(others_matter, scores)
    assert not hi.roles_cost_more(others_matter, scores)
    assert hi.roles_in_top(others_matter, scores, 2) == 0
    no_roles = {"previous_token": prev * 0, "prefix_matching": prefix * 0}
    assert not hi.roles_cost_more(roles_matter, no_roles)  # nothing to compare
    assert not hi.top_head_has_role(roles_matter, {})

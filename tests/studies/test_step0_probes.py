"""The step-0 probes of `transformer_jax.studies.analysis.probes`, each run on a tiny model and held to the
mechanism it measures (or to an independent computation of its number)."""
from __future__ import annotations

import math

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from transformer_jax import Norm, Position, Transformer
from transformer_jax.studies.analysis import probes

pytestmark = pytest.mark.usefixtures("compilation_cache")


@pytest.fixture(autouse=True)
def tiny_probe_models(monkeypatch):
    """The probes' models at the test suite's tiny size (their own is d_model 64); everything
    else about them (vocabulary, arch, position, lengths of the random batches) as they are."""
    real = probes._tiny
    monkeypatch.setattr(probes, "_tiny", lambda **overrides: real(
        **{"d_model": 16, "num_heads": 2, "d_ff": 32, **overrides}))


def test_markdown_table():
    assert probes.markdown_table(["a", "b"], [(1, 0.123456), ("x", 2.0)]).splitlines() == [
        "| a | b |", "|---|---|", "| 1 | 0.1235 |", "| x | 2 |"]


def test_score_scale_variance_grows_with_d_k_and_scaling_restores_it():
    rows = probes.score_scale(head_dims=(16, 64), length=32, samples=4096)
    for d, var, scaled_var, max_w, max_w_scaled, entropy, entropy_scaled in rows:
        assert var / d == pytest.approx(1.0, abs=0.2), (d, var)  # var(q·k) ≈ d_k
        assert scaled_var == pytest.approx(1.0, abs=0.2), (d, scaled_var)
        assert max_w > max_w_scaled and entropy < entropy_scaled  # unscaled: saturated
        assert 0 < entropy < entropy_scaled < 1  # normalized by log(length)
    assert rows[1][3] > rows[0][3]  # the larger d_k, the more saturated without the scale


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_grad_norm_by_depth_equals_the_gradient_by_hand():
    by_depth = probes.grad_norm_by_depth(depths=(2,))
    assert set(by_depth) == {"post", "pre"} and set(by_depth["pre"]) == {2}
    norms = by_depth["post"][2]
    assert norms.shape == (2,)
    assert np.all(by_depth["pre"][2] > 0) and not np.allclose(by_depth["pre"][2], norms)
    cfg = probes._tiny(norm=Norm.POST, num_layers=2)
    inputs, targets = probes._batch(cfg, seed=0)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=jax.random.key(0))),
                                 nnx.Param)
    loss = lambda p: optax.softmax_cross_entropy_with_integer_labels(  # noqa: E731
        nnx.merge(graphdef, p)(inputs)[0], targets).mean()
    layers = nnx.to_pure_dict(jax.jit(jax.grad(loss))(params))["layers"]
    by_hand = [math.sqrt(sum(float(np.sum(np.asarray(g, np.float64)[layer] ** 2))
                             for g in jax.tree.leaves(layers))) for layer in range(2)]
    np.testing.assert_allclose(norms, by_hand, rtol=1e-4)


def test_token_similarity_collapses_without_residuals():
    """Rank collapse (Dong et al. 2021): without residuals the tokens' vectors become alike
    within two layers; with them they stay apart. Both start from the same embeddings."""
    with_residual = probes.token_similarity_by_depth(True, depth=2)
    without = probes.token_similarity_by_depth(False, depth=2)
    assert with_residual.shape == without.shape == (3,)
    assert with_residual[0] == without[0] < 0.5
    assert without[-1] > 0.95 and with_residual[-1] < 0.8, (with_residual, without)


def test_permutation_gap_is_zero_only_without_positions():
    assert probes.permutation_gap(Position.NONE) < 1e-5
    assert probes.permutation_gap(Position.SINUSOIDAL) > 0.1

"""Perturbation yardsticks (studies/analysis/yardsticks.py): a removal's effect against random
perturbations of the same norm at the same place, on a tiny Post-LN encoder with planted heads
in its last layer:

- IGNORED writes only along the all-ones direction, which the LayerNorm after the attention
  sub-layer subtracts: knocking it out changes the attention output, and nothing the embedding
  depends on, so it comes out smaller than its yardstick;
- CARRIER writes one constant vector at every token (its W_v is 0, its value bias fixed), which
  survives the mean over tokens: knocking it out moves the embedding more than a change of the
  same norm in random directions at each token, which the mean over tokens averages away.
"""
from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax.model.pretrained import Batch
from transformer_jax.model.transformer import Transformer
from transformer_jax.studies.analysis import yardsticks as ys
from transformer_jax.studies.analysis.checkpoint_probe import (Ablation, CheckpointProbe,
                                                               cosine_distance)

LAYERS, HEADS, D_MODEL = 2, 4, 16
IGNORED, CARRIER = (1, 0), (1, 1)
ROWS, LENGTH = 12, 9


def planted_probe() -> CheckpointProbe:
    cfg = tiny_config(arch="encoder", num_heads=HEADS, num_layers=LAYERS, token_types=2,
                      position="learned")
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    rng, d_k = np.random.default_rng(0), cfg.d_k
    attention = model.layers.blocks.attention
    out, value, value_bias = (np.array(a[...]) for a in (attention.out.kernel,
                                                          attention.value.kernel,
                                                          attention.value.bias))
    ignored = slice(IGNORED[1] * d_k, (IGNORED[1] + 1) * d_k)
    out[IGNORED[0], ignored] = np.outer(rng.normal(0, 1, d_k), np.ones(D_MODEL))  # along 1
    carrier = slice(CARRIER[1] * d_k, (CARRIER[1] + 1) * d_k)
    value[CARRIER[0], :, carrier] = 0.0  # the head's value: its bias, whatever the token
    value_bias[CARRIER[0], carrier] = rng.normal(0, 1, d_k)
    written = rng.normal(0, 1, (d_k, D_MODEL))
    out[CARRIER[0], carrier] = written - written.mean(-1, keepdims=True)  # not along 1
    attention.out.kernel[...], attention.value.kernel[...] = out, value
    attention.value.bias[...] = value_bias
    return CheckpointProbe(model)


@pytest.fixture(scope="module")
def probe():
    return planted_probe()


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, LENGTH + 1, ROWS)
    real = np.arange(LENGTH)[None] < lengths[:, None]
    tokens = np.where(real, rng.integers(0, 13, (ROWS, LENGTH)), 0)
    return Batch(tokens.astype(np.int32), real, np.zeros((ROWS, LENGTH), np.int32))


def knock_out(*heads) -> Ablation:
    mask = np.ones((LAYERS, HEADS), int)
    for layer, head in heads:
        mask[layer, head] = 0
    return Ablation(head_mask=tuple(map(tuple, mask)))


def test_a_head_the_output_ignores_comes_out_smaller_than_its_yardstick(probe, batch):
    result = ys.measure(probe, batch, knock_out(IGNORED), units=range(ROWS))
    assert result.place == "attention" and result.layer == 1
    assert result.change_norms.min() > 0.1  # the removal did change the attention output
    assert result.removal_effects.max() < 1e-5  # and nothing the embedding depends on
    assert result.yardstick.low > 1e-3 and result.difference.high < 0
    assert not result.larger


def test_a_head_the_output_depends_on_comes_out_larger_than_its_yardstick(probe, batch):
    result = ys.measure(probe, batch, knock_out(CARRIER), units=range(ROWS))
    assert result.larger and result.difference.low > 0 and result.ratio.low > 1


@pytest.mark.parametrize("ablation", [knock_out(CARRIER), knock_out((0, 2), (0, 3)),
                                      Ablation(no_residual=0), Ablation(no_norm=1)],
                         ids=["carrier", "layer-0 heads", "no residual 0", "no norm 1"])
def test_the_removals_effect_is_what_the_probe_measures(probe, batch, ablation):
    """The removal's own effect through the yardstick's path equals checkpoint_probe's
    embedding distance for the same ablation (its outputs are untouched)."""
    result = ys.measure(probe, batch, ablation, units=range(ROWS))
    expected = cosine_distance(probe.run(batch, ablation).embeddings, probe.run(batch).embeddings)
    np.testing.assert_allclose(result.removal_effects, expected, atol=2e-6)
    assert result.yardstick_effects.shape == (ROWS, ys.DRAWS)


def test_adding_the_removals_own_change_at_the_place_is_the_removal(probe, batch):
    """The stand-in adds at the attention output exactly where a knock-out acts."""
    graphdef, states = probe.blocks["intact"]
    x = jnp.asarray(np.random.default_rng(2).normal(0, 1, (ROWS, LENGTH, D_MODEL)), jnp.float32)
    mask, ones = jnp.asarray(batch.padding_mask), jnp.ones(HEADS)
    head_mask = jnp.asarray([1.0, 0.0, 1.0, 1.0])
    intact, attention = ys.run_block(graphdef, states[1], x, mask, ones, jnp.zeros_like(x))
    removed, removed_attention = ys.run_block(graphdef, states[1], x, mask, head_mask,
                                              jnp.zeros_like(x))
    again, _ = ys.run_block(graphdef, states[1], x, mask, ones, removed_attention - attention)
    np.testing.assert_allclose(again, removed, atol=1e-5)
    assert float(jnp.max(jnp.abs(removed - intact))) > 0.1


def test_perturbations_match_the_changes_norm_token_by_token_and_differ_by_unit():
    rng = np.random.default_rng(3)
    change = rng.normal(0, 1, (3, 5, 8)) * rng.uniform(0.1, 3, (3, 5, 1))
    mask = np.arange(5)[None] < np.array([[5], [3], [4]])
    eps = ys.perturbations(change, mask, ["a", "b", "c"], (1, "block"), draws=4)
    np.testing.assert_allclose(np.linalg.norm(eps, axis=-1),
                               np.broadcast_to(np.linalg.norm(change, axis=-1) * mask, (4, 3, 5)),
                               rtol=1e-5)
    again = ys.perturbations(change, mask, ["a", "b", "c"], (1, "block"), draws=4)
    np.testing.assert_array_equal(eps, again)
    swapped = ys.perturbations(change[[1, 0, 2]], mask[[1, 0, 2]], ["b", "a", "c"], (1, "block"),
                               draws=4)
    np.testing.assert_array_equal(swapped[:, 0], eps[:, 1])  # a unit's draw follows its id
    cosines = np.sum(eps[0, 0] * eps[1, 0], -1) / np.prod(np.linalg.norm(eps[:2, 0], axis=-1), 0)
    assert np.all(np.abs(cosines) < 0.999)  # draws differ in direction


@pytest.mark.parametrize("ablation, place, message", [
    (Ablation(attn_scale=False), None, "positions and attn_scale act everywhere"),
    (Ablation(positions=False), None, "positions and attn_scale act everywhere"),
    (knock_out((0, 1), (1, 1)), None, "acts in layers [0, 1] of 2"),
    (Ablation(), None, "acts in layers [] of 2"),
    (Ablation(no_residual=1), "attention", "place='attention' is not one of the places this "
     "removal acts at: block"),
    (knock_out(CARRIER), "output", "place='output' is not one of the places"),
])
def test_a_removal_without_one_place_is_refused_in_one_line(probe, batch, ablation, place,
                                                             message):
    with pytest.raises(ys.YardstickError) as error:
        ys.measure(probe, batch, ablation, units=range(ROWS), place=place)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_rows_past_the_units_are_filler_and_dropped(probe, batch):
    """pad_batch repeats a sentence to fill the batch; only the first len(units) rows count."""
    full = ys.measure(probe, batch, knock_out(CARRIER), units=range(ROWS))
    part = ys.measure(probe, batch, knock_out(CARRIER), units=range(ROWS - 3))
    np.testing.assert_allclose(part.removal_effects, full.removal_effects[:-3], atol=1e-7)
    np.testing.assert_allclose(part.yardstick_effects, full.yardstick_effects[:-3], atol=1e-7)
    assert part.change_norms.shape == (ROWS - 3,)


def test_the_result_is_stored_as_plain_data(probe, batch):
    result = ys.measure(probe, batch, Ablation(no_norm=0), units=[f"s{i}" for i in range(ROWS)],
                        draws=3)
    record = json.loads(json.dumps(result.to_dict()))
    assert (record["layer"], record["place"], record["units"][0]) == (0, "block", "s0")
    assert np.shape(record["yardstick_effects"]) == (ROWS, 3)
    assert record["removal"]["mean"] == pytest.approx(np.mean(record["removal_effects"]))

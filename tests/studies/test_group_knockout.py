"""Knock-outs are exact: a head (or a group of heads) knocked out is the model with the rows of
W_o that read it set to 0, and every reported (layer, head) is that head's own knock-out, on a
model whose number of layers (3) differs from its number of heads (2), so a layer and a head
index swapped, or a wrong stride, reads another head."""
from __future__ import annotations

import csv
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from transformer_jax.config import Arch, Head, ModelConfig
from transformer_jax.model.transformer import Transformer
from transformer_jax.studies import report
from transformer_jax.studies.analysis import group_knockout, head_importance
from transformer_jax.studies.analysis.restore import Restored
from transformer_jax.studies.checks import Section

LAYERS, HEADS, D_MODEL, VOCAB = 3, 2, 16, 11
SEEDS = (0, 1)


class _Data:
    """Eight random sequences of six tokens, every position scored."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.batch = {"inputs": rng.integers(1, VOCAB, (8, 6)).astype(np.int32),
                      "padding_mask": np.ones((8, 6), bool),
                      "targets": rng.integers(1, VOCAB, (8, 6)).astype(np.int32),
                      "weights": np.ones((8, 6), np.float32)}

    def eval_batches(self, batch_size, fmt):
        yield self.batch


@pytest.fixture(scope="module")
def restored() -> Restored:
    cfg = ModelConfig(vocab_size=VOCAB, num_outputs=VOCAB, d_model=D_MODEL, num_heads=HEADS,
                      num_layers=LAYERS, d_ff=32, arch=Arch.DECODER, head=Head.TOKEN)
    splits = [nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=s)), nnx.Param) for s in SEEDS]
    params = jax.tree.map(lambda *xs: jnp.stack(xs), *[p for _, p in splits])
    return Restored(run=types.SimpleNamespace(model=cfg, dataset=_Data()), data=None,
                    seeds=SEEDS, graphdef=splits[0][0], params=params)


def _seed(restored: Restored, i: int):
    return jax.tree.map(lambda x: x[i], restored.params)


def _without_rows(params, knocked: np.ndarray):
    """params with the rows of each layer's W_o that read the knocked-out heads set to 0."""
    pure = nnx.to_pure_dict(params)
    kernel = np.array(pure["layers"]["blocks"]["attention"]["out"]["kernel"])  # [L, H·d_k, D]
    d_k = D_MODEL // HEADS
    for layer, head in zip(*np.nonzero(knocked)):
        kernel[layer, head * d_k:(head + 1) * d_k] = 0.0
    pure["layers"]["blocks"]["attention"]["out"]["kernel"] = jnp.asarray(kernel)
    nnx.replace_by_pure_dict(params, pure)
    return params


def _logits(restored: Restored, params, head_mask=None) -> np.ndarray:
    """The model's logits on the eval batch (one compiled program for every call)."""
    if "fn" not in _COMPILED:
        _COMPILED["fn"] = jax.jit(lambda p, b, m: nnx.merge(restored.graphdef, p)(
            b["inputs"], b["padding_mask"], head_mask=m)[0])
    mask = np.ones((LAYERS, HEADS), np.float32) if head_mask is None else head_mask
    return np.asarray(_COMPILED["fn"](params, restored.run.dataset.batch, jnp.asarray(mask)))


_COMPILED: dict = {}


def _loss(restored: Restored, i: int, knocked: np.ndarray) -> float:
    """The eval loss of seed i with W_o's rows zeroed: the knock-out computed apart."""
    logits = _logits(restored, _without_rows(_seed(restored, i), knocked))
    targets = restored.run.dataset.batch["targets"]
    return float(optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean())


def test_a_group_knocked_out_is_the_model_with_its_rows_of_w_o_zeroed(restored):
    knocked = np.zeros((LAYERS, HEADS), bool)
    knocked[0, 1] = knocked[2, 0] = True
    masked = _logits(restored, _seed(restored, 0), np.where(knocked, 0.0, 1.0))
    zeroed = _logits(restored, _without_rows(_seed(restored, 0), knocked))
    np.testing.assert_allclose(masked, zeroed, atol=1e-6)
    # the layers read backwards: another group, which the comparison tells apart
    wrong = _logits(restored, _without_rows(_seed(restored, 0), knocked[::-1]))
    assert np.abs(masked - wrong).max() > 1e-3


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_every_reported_importance_is_the_drop_of_exactly_that_head(restored, tmp_path):
    values = head_importance.knockout_values(restored, "loss")
    importance = head_importance.drops(values, LAYERS, HEADS, "loss")
    results = {"v": (restored.seeds, values, importance)}
    head_importance._write_csv(results, {}, tmp_path / "importance.csv")
    with (tmp_path / "importance.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(SEEDS) * LAYERS * HEADS
    for i, seed in enumerate(SEEDS):
        base = _loss(restored, i, np.zeros((LAYERS, HEADS), bool))
        direct = {}
        for layer, head in np.ndindex(LAYERS, HEADS):
            knocked = np.zeros((LAYERS, HEADS), bool)
            knocked[layer, head] = True
            direct[(layer, head)] = _loss(restored, i, knocked) - base
        # distinct drops: reading any other head (a swapped index, a wrong stride) fails
        assert len({round(d, 5) for d in direct.values()}) == LAYERS * HEADS
        for r in (r for r in rows if int(r["seed"]) == seed):
            key = (int(r["layer"]), int(r["head"]))
            assert float(r["drop"]) == pytest.approx(direct[key], abs=2e-4), key
            assert importance[i][key] == pytest.approx(direct[key], abs=1e-5), key


def test_a_groups_values_are_its_own_knock_out_and_its_random_sets(restored):
    group = group_knockout.Group("g", "layer 2's first head and layer 0's second", "v",
                                 lambda scores: scores["previous_token"] > 0.5)
    chosen = np.zeros((LAYERS, HEADS))
    chosen[2, 0] = chosen[0, 1] = 1.0
    rows = {("v", s, layer, head): {"previous_token": str(chosen[layer, head]),
                                    "prefix_matching": "0"}
            for s in SEEDS for layer, head in np.ndindex(LAYERS, HEADS)}
    found = group_knockout.measure(restored, rows, (group,), "loss", 64)
    for i, seed in enumerate(SEEDS):
        m = found[("g", seed)]
        assert np.array_equal(m.sets[0], chosen.astype(bool))
        assert len(m.sets) == 1 + group_knockout.DRAWS
        assert m.with_all == pytest.approx(_loss(restored, i, np.zeros((LAYERS, HEADS), bool)),
                                           abs=1e-5)
        for k in (0, 1, group_knockout.DRAWS):
            assert m.without[k] == pytest.approx(_loss(restored, i, m.sets[k]), abs=1e-5)
        values = m.values("loss")
        drops = m.without - m.with_all  # a loss: its rise
        assert values["without"] == m.without[0]
        assert values["random_share"] == pytest.approx(  # the group's drop floored at SMALL
            drops[1:].mean() / max(drops[0], head_importance.SMALL))


def test_random_sets_match_the_groups_size_layer_by_layer_and_never_are_the_group():
    rng = np.random.default_rng(0)
    group = np.zeros((3, 4), bool)
    group[1, [0, 2]] = True
    sets = group_knockout.random_sets(group, 50, rng)
    assert sets.shape == (50, 3, 4)
    assert (sets.sum(2) == group.sum(1)).all()  # as many per layer: here all in layer 1
    assert not any(np.array_equal(s, group) for s in sets)
    assert len({s.tobytes() for s in sets}) == 5  # the other 5 pairs of layer 1, all drawn
    full = np.zeros((2, 4), bool)
    full[1] = True  # the group fills its layer: as many heads anywhere else
    sets = group_knockout.random_sets(full, 30, rng)
    assert (sets.sum((1, 2)) == 4).all() and not any(np.array_equal(s, full) for s in sets)
    assert (sets[:, 0].sum(1) > 0).all()  # never the group, so always some of layer 0
    assert group_knockout.random_sets(np.zeros((2, 4), bool), 5, rng).shape == (0, 2, 4)
    assert group_knockout.random_sets(np.ones((2, 4), bool), 5, rng).shape == (0, 2, 4)


def test_an_analysis_value_is_its_runs_final_value_in_summary_csv():
    runs = {("a", 0): {"status": {"state": "finished", "step": 40}, "curves": {"m": [(40, 1.0)]}},
            ("a", 1): {"status": {"state": "diverged", "step": 7}, "curves": {}}}
    sections = [Section("", values={"knockout/g/accuracy": {("a", 0): 0.25, ("a", 1): 0.5}})]
    assert report.add_measured(runs, sections) == ["knockout/g/accuracy"]
    assert runs[("a", 0)]["curves"]["knockout/g/accuracy"] == [(40, 0.25)]
    study = types.SimpleNamespace(metrics=("m",))
    rows = report._rows(study, runs, ["knockout/g/accuracy"])
    assert [r["knockout/g/accuracy"] for r in rows][0] == 0.25
    assert np.isnan(rows[1]["knockout/g/accuracy"])  # a diverged run's value counts as none
    with pytest.raises(ValueError, match="knockout/g/accuracy"):
        report.add_measured(runs, sections * 2)

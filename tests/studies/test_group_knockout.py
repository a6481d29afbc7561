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
from transformer_jax.studies.analysis import group_knockout, head_importance, matched_knockout
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
        assert m.sets[0] == ((0, 1), (2, 0)) and not m.refused
        assert len(m.sets) == 1 + group_knockout.DRAWS
        assert m.with_all == pytest.approx(_loss(restored, i, np.zeros((LAYERS, HEADS), bool)),
                                           abs=1e-5)
        for k in (0, 1, group_knockout.DRAWS):
            knocked = np.zeros((LAYERS, HEADS), bool)
            knocked[tuple(zip(*m.sets[k]))] = True
            assert m.without[k] == pytest.approx(_loss(restored, i, knocked), abs=1e-5)
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


# ---- matched_knockout: the same knock-outs against head_controls' matched sets (issue 65) ----

def _scores(shape, prefix=(), previous=()):
    """Role scores [L, H] with the given (layer, head)s at 0.9, every other head at 0.05."""
    found = {"prefix_matching": np.full(shape, 0.05), "previous_token": np.full(shape, 0.05)}
    for role, heads in (("prefix_matching", prefix), ("previous_token", previous)):
        for layer, head in heads:
            found[role][layer, head] = 0.9
    return found


def _prefix_group(variant="v") -> matched_knockout.MatchedGroup:
    return matched_knockout.MatchedGroup(
        "prefix", "layer 1's prefix matchers", variant,
        lambda sc: np.where(np.arange(len(sc["prefix_matching"]))[:, None] == 1,
                            sc["prefix_matching"] >= 0.3, False),
        {"prefix_matching": 0.3, "previous_token": 0.2})


def test_matched_sets_take_the_groups_layer_and_no_head_of_any_role():
    scores = _scores((2, 8), prefix=[(1, 1), (1, 3)], previous=[(1, 5), (0, 2)])
    sets, why = matched_knockout.plan(_prefix_group(), scores, seed=0)
    assert why == "" and sets[0] == ((1, 1), (1, 3)) and len(sets) == 1 + matched_knockout.DRAWS
    for heads in sets[1:]:
        assert len(heads) == 2 and {layer for layer, _ in heads} == {1}
        assert not {h for _, h in heads} & {1, 3, 5}  # the group and the other role's head
    again, _ = matched_knockout.plan(_prefix_group(), scores, seed=0)
    other, _ = matched_knockout.plan(_prefix_group(), scores, seed=1)
    assert again == sets and other[1:] != sets[1:]  # reproducible, and drawn afresh per seed


def test_a_group_that_leaves_no_matched_set_is_refused_with_the_reason():
    every = [(1, h) for h in range(4)]
    sets, why = matched_knockout.plan(_prefix_group(), _scores((2, 4), prefix=every), seed=0)
    assert sets == [tuple(every)] and "a matched control needs more heads per layer" in why
    sets, why = matched_knockout.plan(_prefix_group(), _scores((2, 4)), seed=0)
    assert sets == [] and "empty" in why


def test_matched_values_are_the_knock_outs_of_the_group_and_its_matched_sets(restored):
    # 3 layers x 2 heads: in layer 2, head 0 is the group and head 1 the only eligible head
    group = matched_knockout.MatchedGroup("g", "layer 2's first head", "v",
                                          lambda sc: sc["prefix_matching"] >= 0.3,
                                          {"prefix_matching": 0.3, "previous_token": 0.2})
    full = matched_knockout.MatchedGroup("full", "layer 0's heads", "v",
                                         lambda sc: sc["previous_token"] >= 0.2,
                                         {"prefix_matching": 0.3, "previous_token": 0.2})
    roles = {(2, 0): ("0.9", "0"), (0, 0): ("0", "0.9"), (0, 1): ("0", "0.9")}
    rows = {("v", s, layer, head): dict(zip(("prefix_matching", "previous_token"),
                                            roles.get((layer, head), ("0", "0"))))
            for s in SEEDS for layer, head in np.ndindex(LAYERS, HEADS)}
    found = matched_knockout.measure(restored, rows, (group, full), "loss", 64)
    for i, seed in enumerate(SEEDS):
        m = found[("g", seed)]
        assert m.sets[0] == ((2, 0),) and set(m.sets[1:]) == {((2, 1),)} and not m.refused
        knocked = lambda heads: np.array([[(l, h) in heads for h in range(HEADS)]  # noqa
                                          for l in range(LAYERS)])
        for k in (0, 1):
            assert m.without[k] == pytest.approx(_loss(restored, i, knocked(m.sets[k])),
                                                 abs=1e-5)
        drops = m.without - m.with_all
        assert m.values("loss")["random_share"] == pytest.approx(
            drops[1:].mean() / max(drops[0], head_importance.SMALL))
        refused = found[("full", seed)]  # the group fills layer 0: no matched set
        assert refused.refused and len(refused.sets) == 1
        assert np.isnan(refused.values("loss")["random_share"])


def test_top_in_layer_takes_the_best_passing_heads_of_that_layer_only():
    scores = np.array([[0.9, 0.8, 0.1, 0.7], [0.35, 0.1, 0.6, 0.3]])
    top = matched_knockout.top_in_layer(scores, 0.3, 1, 2)
    assert top.tolist() == [[False] * 4, [True, False, True, False]]  # 0.6 and 0.35, not 0.3
    assert matched_knockout.top_in_layer(scores, 0.3, 1, 9).sum() == 3  # every passing head
    assert not matched_knockout.top_in_layer(scores, 0.95, 0, 2).any()

"""Padding through the whole model: what sits at a batch's padded positions, and how many of them
there are, reaches no real token's logits, for every norm placement (post, pre, none) and type
(LayerNorm, RMSNorm, DyT, BatchNorm), encoder and decoder, in evaluation and in training mode.
With BatchNorm in training mode the running statistics must not move with it either: every norm
that normalizes over the batch (each block's and the final one) is handed the token mask.

The same real tokens go through the model three ways: as the data pipeline pads them (id 0),
with other ids at every padded position (same width: bitwise the same logits and statistics),
and padded to a wider batch (the same up to float32 rounding: at another width XLA groups the
attention's sums over keys, and BatchNorm's over tokens, differently: up to 3e-6 here). The
batch holds an all-padding row, which must stay finite and move nothing either.
One compiled program per model runs every variant (in training mode too where that computes
something else: BatchNorm's), 18 small programs in all.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import max_abs_diff, randomize_biases_and_scales, tiny_config
from transformer_jax import Arch, Norm, NormType, Transformer
from transformer_jax.data.batching import PAD_ID
from transformer_jax.model.norms import TRAINING, BatchNorm

LENGTHS = np.array([4, 6, 2, 0])  # real tokens per row, first; row 1 fills WIDTH, row 3 has none
WIDTH, WIDER = 6, 9
ROUNDING = 1e-5  # what another width may move a logit or a running statistic by
MODES = ("evaluation", "training")  # training: nnx.view(model, **TRAINING), as the train step

# Without a placement there is no norm, so its type changes nothing (checked below): one case each.
CASES = [(arch, norm, norm_type) for arch in Arch for norm in (Norm.POST, Norm.PRE)
         for norm_type in NormType] + [(arch, Norm.NONE, NormType.LAYERNORM) for arch in Arch]
CASE_IDS = ["-".join(axis.value for axis in case) for case in CASES]


def batches(vocab_size: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """variant -> (tokens [B, T], padding_mask [B, T]): the same real tokens, right-padded."""
    rng = np.random.default_rng(0)
    real = np.arange(WIDER)[None, :] < LENGTHS[:, None]  # [B, WIDER]
    tokens = np.where(real, rng.integers(1, vocab_size, real.shape), PAD_ID)
    other = np.where(real, tokens, rng.integers(1, vocab_size, real.shape))  # never PAD_ID
    return {"given": (tokens[:, :WIDTH], real[:, :WIDTH]),
            "other_ids": (other[:, :WIDTH], real[:, :WIDTH]),
            "wider": (tokens, real)}


def model_variables(cfg) -> tuple[nnx.GraphDef, dict]:
    """The model with random biases and scales, and BatchNorm's running statistics moved away
    from their initial 0 and 1 (so evaluation mode normalizes with something a leak would
    show against); returned as the trainer keeps it, a graphdef and one pure dict."""
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(model)
    rng = np.random.default_rng(1)
    draw = lambda path, x: (rng.normal(0.0, 0.5, x.shape) if path[-1].key == "mean"  # noqa: E731
                            else rng.uniform(0.5, 2.0, x.shape)).astype(np.float32)
    stats = nnx.to_pure_dict(nnx.state(model, nnx.BatchStat))
    nnx.update(model, jax.tree_util.tree_map_with_path(draw, stats))
    graphdef, state = nnx.split(model)
    return graphdef, nnx.to_pure_dict(state)


def running_statistics(variables: dict) -> dict:
    """path -> array of every BatchNorm running mean and variance (none for the other norms)."""
    return {jax.tree_util.keystr(path): np.asarray(x)
            for path, x in jax.tree_util.tree_leaves_with_path(variables)
            if path[-1].key in ("mean", "var")}


def has_modes(cfg) -> bool:
    """Whether training mode computes anything else: only BatchNorm reads it (the train step's
    view changes no other module, so its graph is evaluation mode's; checked below)."""
    return cfg.norm is not Norm.NONE and cfg.norm_type is NormType.BATCHNORM


@functools.cache
def outcomes(case) -> dict:
    """(mode, variant) -> (logits at the first WIDTH positions, running statistics after the
    forward pass), from one compiled program; "initial": the statistics before any pass."""
    arch, norm, norm_type = case
    cfg = tiny_config(arch=arch, norm=norm, norm_type=norm_type)
    graphdef, variables = model_variables(cfg)
    inputs = batches(cfg.vocab_size)
    modes = MODES if has_modes(cfg) else MODES[:1]

    def forward(variables, tokens, padding_mask, mode):
        model = nnx.merge(graphdef, jax.tree.map(jnp.asarray, variables))  # a fresh copy each
        if mode == "training":
            model = nnx.view(model, **TRAINING)
        logits, _ = model(tokens, padding_mask)
        return logits[:, :WIDTH], nnx.to_pure_dict(nnx.state(model, nnx.BatchStat))

    @jax.jit
    def every_variant(variables):
        found = {}
        for mode in modes:  # given and other ids have one width: one vmapped pass for both
            both = jnp.stack([inputs["given"][0], inputs["other_ids"][0]])  # [2, B, WIDTH]
            pair = jax.vmap(forward, (None, 0, None, None))(variables, both, inputs["given"][1],
                                                            mode)
            for i, variant in enumerate(("given", "other_ids")):
                found[mode, variant] = jax.tree.map(lambda x: x[i], pair)
            found[mode, "wider"] = forward(variables, *map(jnp.asarray, inputs["wider"]), mode)
        return found

    found = jax.device_get(every_variant(variables))
    if not has_modes(cfg):
        model = nnx.merge(graphdef, variables)
        assert nnx.graphdef(nnx.view(model, **TRAINING)) == nnx.graphdef(model)
        found |= {("training", variant): found["evaluation", variant] for variant in inputs}
    return {key: (logits, running_statistics(stats)) for key, (logits, stats) in found.items()
            } | {"initial": running_statistics(variables)}


REAL = np.arange(WIDTH)[None, :] < LENGTHS[:, None]  # [B, WIDTH] True on real tokens


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_other_ids_at_padded_positions_change_no_real_logit_nor_statistic(case, mode):
    found = outcomes(case)
    (given, stats), (other, other_stats) = found[mode, "given"], found[mode, "other_ids"]
    assert np.array_equal(given[REAL], other[REAL])  # bitwise
    assert not np.array_equal(given[~REAL], other[~REAL])  # the padded positions did change
    assert np.isfinite(given).all() and np.isfinite(other).all()  # the all-padding row too
    assert stats.keys() == other_stats.keys()
    for path in stats:
        assert np.array_equal(stats[path], other_stats[path]), path


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_wider_padding_changes_no_real_logit_nor_statistic_beyond_rounding(case, mode):
    found = outcomes(case)
    (given, stats), (wider, wider_stats) = found[mode, "given"], found[mode, "wider"]
    assert max_abs_diff(given[REAL], wider[REAL]) <= ROUNDING
    assert np.isfinite(wider).all()
    for path in stats:
        assert max_abs_diff(stats[path], wider_stats[path]) <= ROUNDING, path


@pytest.mark.parametrize("case", [c for c in CASES if c[2] is NormType.BATCHNORM],
                         ids=[i for c, i in zip(CASES, CASE_IDS) if c[2] is NormType.BATCHNORM])
def test_batchnorm_statistics_are_the_ones_checked_and_move_only_in_training(case):
    """The statistics compared above exist for every BatchNorm (two stacked block norms, Pre-LN's
    final norm), a training pass moves every one of them and an evaluation pass none."""
    found = outcomes(case)
    initial = found["initial"]
    assert len(initial) == 2 * (3 if case[1] is Norm.PRE else 2), list(initial)
    for path, before in initial.items():
        assert np.array_equal(found["evaluation", "given"][1][path], before), path
        assert np.all(found["training", "given"][1][path] != before), path


def test_a_batchnorm_that_counted_padding_would_move_real_logits():
    """The checks above can fail: in a causal decoder no real token attends to a later padded
    one, so only BatchNorm's training statistics could carry padding to it. Without the padding
    mask (every norm counts every position) other padded ids move the real logits."""
    cfg = tiny_config(arch=Arch.DECODER, norm=Norm.PRE, norm_type=NormType.BATCHNORM)
    graphdef, variables = model_variables(cfg)
    inputs = batches(cfg.vocab_size)

    @jax.jit
    def unmasked(variables, tokens):
        model = nnx.view(nnx.merge(graphdef, variables), **TRAINING)
        return model(tokens)[0]

    given, other = (np.asarray(unmasked(variables, jnp.asarray(inputs[v][0])))
                    for v in ("given", "other_ids"))
    assert max_abs_diff(given[REAL], other[REAL]) > 1e-3


@pytest.mark.parametrize("norm_type", NormType)
def test_no_placement_builds_no_norm_of_any_type(norm_type):
    """Why one `none` case stands for all four types: with norm=none no norm module exists."""
    model = Transformer(tiny_config(norm=Norm.NONE, norm_type=norm_type), rngs=nnx.Rngs(0))
    names = ("norm_before_attention", "norm_after_attention", "norm_before_feed_forward",
             "norm_after_feed_forward")
    assert model.final_norm is None
    assert all(getattr(model.layers.blocks, name) is None for name in names)
    assert not jax.tree.leaves(nnx.state(model, nnx.BatchStat))




def test_a_training_batch_of_padding_only_moves_no_running_statistic():
    """Not a batch the data pipeline makes (every row has a real token: `fill_rows`), but a nan
    in a running statistic would stay there for every later evaluation."""
    norm = BatchNorm(4, rngs=nnx.Rngs(0))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3, 4)), jnp.float32)
    out = nnx.view(norm, **TRAINING)(x, jnp.zeros((2, 3), bool))
    assert np.isfinite(np.asarray(out)).all()
    assert np.array_equal(norm.mean[...], np.zeros(4)) and np.array_equal(norm.var[...], np.ones(4))

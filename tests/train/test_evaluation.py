"""What the reported evaluation numbers are computed on (issue: evaluation that measures what it
says): the final evaluation reads the whole eval split, the logit-scale probe reads only real
queries, and no two seeds or random streams share a key."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers_train import tiny_config
from transformer_jax import data
from transformer_jax.model import attention
from transformer_jax.train import steps
from transformer_jax.train import summaries
from transformer_jax import train
from transformer_jax.model.transformer import attention_mask


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_final_evaluation_reads_the_whole_eval_split(tmp_path, tj_data_dir):
    """One batch per periodic evaluation, then the final one on all of the split: its numbers
    equal a run's that evaluates everything every time, and an independent evaluation of the
    final parameters over every eval batch."""
    overrides = {"data.data_dir": tj_data_dir, "train.eval_every": 10, "train.num_steps": 20}
    finals, curves = {}, {}
    for eval_batches in (1, 0):
        config = tiny_config(overrides={**overrides, "train.eval_batches": eval_batches})
        workdir = tmp_path / f"eval_batches_{eval_batches}"
        finals[eval_batches] = train.train_and_evaluate(config, str(workdir))["eval"]
        curves[eval_batches] = summaries.read_scalars(str(workdir))["eval/loss"]
    assert finals[1] == pytest.approx(finals[0], rel=1e-6)
    assert curves[1][-1][1] == pytest.approx(curves[0][-1][1], rel=1e-6)  # step 20: whole split
    assert curves[1][0][1] != pytest.approx(curves[0][0][1], rel=1e-4)  # step 10: one batch only

    from helpers_train import restore_newest
    config = tiny_config(overrides={**overrides, "train.eval_batches": 1})
    _, state = restore_newest(tmp_path / "eval_batches_1", config)
    run = train.build_run(config)
    graphdef, _ = train.init_model(run.model, run.seed)
    eval_step = steps.make_eval_step(graphdef, run.model)
    batches = list(run.dataset.eval_batches(run.train.batch_size, "encoder"))
    assert len(batches) > 1
    sums = {}
    for batch in batches:
        for k, v in jax.device_get(eval_step(state["params"], batch)).items():
            sums[k] = sums.get(k, 0.0) + float(v)
    expected = steps.finish_eval(sums)
    assert sums["weight"] == sum(float(b["weights"].sum()) for b in batches)
    assert finals[1]["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert finals[1]["accuracy"] == pytest.approx(expected["accuracy"], rel=1e-6)


def test_max_abs_logit_ignores_padded_queries_and_blocked_keys():
    lengths = np.array([3, 5])
    padding = np.arange(5)[None, :] < lengths[:, None]  # [B, T]
    logits = np.random.default_rng(0).normal(size=(2, 2, 5, 5)).astype(np.float32)  # [B, H, T, T]
    logits[0, 1, 4, 0] = 100.0  # padded query (row 4 of a 3-token example), real key
    logits[1, 0, 2, 3] = -90.0  # real query, but a future key under the causal mask
    for causal in (False, True):
        mask = attention_mask(jnp.asarray(padding), 5, causal)
        allowed = np.broadcast_to(np.asarray(mask), logits.shape)
        real_rows = padding[:, None, :, None]
        expected = np.abs(np.where(allowed & real_rows, logits, 0.0)).max()
        got = float(attention.max_abs_allowed_logit(jnp.asarray(logits), mask))
        assert got == pytest.approx(expected, rel=1e-6)
        assert got == 90.0 if not causal else got < 90.0  # never the padded row's 100
    assert float(attention.max_abs_allowed_logit(jnp.asarray(logits), None)) == 100.0


def test_probe_max_abs_logit_skips_padded_rows_in_a_padded_encoder():
    """Through the model: giving padded tokens huge embeddings changes nothing the probe reports
    about real queries' logits (an encoder's padded query rows are not read by any loss)."""
    from conftest import tiny_config as model_config
    from flax import nnx
    from transformer_jax import Arch, Norm, Position, Transformer
    cfg = model_config(arch=Arch.ENCODER, position=Position.NONE, norm=Norm.NONE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    model.embed.embedding[...] = model.embed.embedding[...].at[9].multiply(1e3)  # huge token 9
    tokens = jnp.array([[3, 4, 5, 0, 0], [6, 7, 8, 5, 0]])  # no real token 9
    padding = tokens > 0
    _, found = model(tokens, padding, probe=True)
    other = tokens.at[:, 3:].set(jnp.where(padding[:, 3:], tokens[:, 3:], 9))  # other pad ids
    _, found_other = model(other, padding, probe=True)
    np.testing.assert_allclose(found.max_abs_logit, found_other.max_abs_logit, rtol=1e-6)
    _, found_real = model(other, jnp.ones_like(padding), probe=True)  # token 9 real: it counts
    assert float(found_real.max_abs_logit.max()) > 10 * float(found.max_abs_logit.max())


def test_random_streams_of_seeds_never_share_a_key():
    keys = {(seed, stream): train.seed_stream(seed, stream)
            for seed, stream in itertools.product(range(8), train.Stream)}
    raw = {k: tuple(np.asarray(jax.random.key_data(v)).ravel()) for k, v in keys.items()}
    assert len(set(raw.values())) == len(raw)
    # and none equals a bare key(seed), which other code may draw from
    bare = {tuple(np.asarray(jax.random.key_data(jax.random.key(s))).ravel()) for s in range(9)}
    assert not bare & set(raw.values())


def test_first_optimizer_step_learns():
    """Warm-up starts above 0 (nanoGPT's lr·(t+1)/(warmup+1)): step 0 already moves the weights."""
    config = tiny_config()
    run = train.build_run(config)
    _, schedule = steps.make_optimizer(run.train)
    peak, warmup = run.train.learning_rate, run.train.warmup_steps
    assert warmup > 0
    for t in range(warmup + 1):
        assert float(schedule(t)) == pytest.approx(peak * (t + 1) / (warmup + 1), rel=1e-6)


def test_text_eval_defaults_to_the_whole_held_out_split(shakespeare_file, tj_data_dir):
    from transformer_jax.studies.study import load_config
    from helpers_train import REPO
    config = load_config(REPO / "configs/lm.py")
    cfg = config.data.copy_and_resolve_references()
    cfg.unlock()
    cfg.update(text_path=shakespeare_file, data_dir=tj_data_dir)
    ds = data.make_dataset(cfg, seed=0, fmt="decoder")
    assert config.data.num_eval == 0
    assert ds.num_eval_windows * ds.eval_len > 0.99 * len(ds.eval_ids)


def test_evaluate_averages_each_replicas_sums_over_the_batches_it_reads():
    """evaluation.evaluate with a stand-in eval step and probe (no model, no compile): each
    replica's loss is its summed loss over the total weight, of every batch or of the first
    `max_batches`; its probed statistics land per layer; the first and last layers get a map."""
    import math
    import types

    from transformer_jax.train import evaluation

    rng = np.random.default_rng(0)
    weights = [4.0, 2.0, 6.0]  # each batch's real targets
    losses = rng.uniform(1, 3, size=(3, 2))  # [batch, replica] mean loss
    batches = [{"padding_mask": np.array([[True, True, True, False]]), "k": i} for i in range(3)]
    run = types.SimpleNamespace(dataset=types.SimpleNamespace(
        eval_batches=lambda size, fmt: iter(batches)), train=types.SimpleNamespace(batch_size=1),
        bits_name="bits_per_token")

    def eval_step(params, batch):
        i = batch["k"]
        return {"loss": losses[i] * weights[i], "weight": np.full(2, weights[i])}

    def probe(params, batch):
        assert batch["k"] == 0  # the first batch
        return {"entropy": np.array([[0.1, 0.2], [0.3, 0.4]]), "max_weight": np.zeros((2, 2)),
                "max_abs_logit": np.ones((2, 2)), "example_weights": np.ones((2, 2, 1, 4, 4))}

    for max_batches, read in ((0, 3), (1, 1)):
        found = evaluation.evaluate(run, [0, 1], "decoder", eval_step, probe, None, 7,
                                    max_batches=max_batches)
        for j, e in enumerate(found):
            expected = sum(losses[i, j] * weights[i] for i in range(read)) / sum(weights[:read])
            assert e.metrics["loss"] == pytest.approx(expected, rel=1e-12)
            assert e.metrics["bits_per_token"] == pytest.approx(expected / math.log(2))
            assert e.scalars["attention/entropy/layer_01"] == pytest.approx([0.2, 0.4][j])
    assert set(found[1].images) == {"attention_map/layer_00", "attention_map/layer_01"}

"""transformer_jax/studies/analysis/rounding.py: the gradient with and without bfloat16 Dense
products, against the gradient of another batch, and its checks."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from helpers_train import tiny_config
from transformer_jax import DenseMatmul
from transformer_jax.studies.analysis import rounding
from transformer_jax.studies.analysis.restore import Restored
from transformer_jax.train import build_run, steps
from transformer_jax.train.init import init_model


def _restored(seeds=(0, 1)) -> Restored:
    run = build_run(tiny_config())
    inits = [init_model(run.model, seed) for seed in seeds]
    return Restored(run=run, data=None, seeds=tuple(seeds), graphdef=inits[0][0],
                    params=jax.tree.map(lambda *xs: jnp.stack(xs), *[p for _, p in inits]))


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_the_exact_gradient_is_the_training_losss_and_the_rounded_one_is_near_it():
    restored = _restored((0,))
    run, params = restored.run, jax.tree.map(lambda x: x[0], restored.params)
    batch = run.dataset.train_batch(0, run.train.batch_size, run.model.arch.value)

    def loss(p):  # the trainer's loss, written out
        logits, _ = nnx.merge(restored.graphdef, p)(batch["inputs"], batch["padding_mask"])
        return steps.loss_and_metrics(logits, batch, run.model.head)[0]

    grads = jax.jit(jax.grad(loss))(params)  # one program, not an eager op-by-op trace
    want = jnp.concatenate([g.ravel() for g in jax.tree.leaves(grads)])
    exact = rounding.gradient_function(run.model, DenseMatmul.COMPUTE)(params, batch)
    rounded = rounding.gradient_function(run.model, DenseMatmul.BFLOAT16)(params, batch)
    np.testing.assert_allclose(exact, want, rtol=1e-5, atol=1e-7)
    moved = float(jnp.linalg.norm(rounded - exact) / jnp.linalg.norm(exact))
    assert 1e-4 < moved < 5e-2  # rounded, and only by rounding


def test_measure_gives_each_seed_and_pair_its_rounding_and_batch_distance():
    values = rounding.measure(_restored((0, 1)), pairs=2)
    assert values.shape == (2, 2, 2)
    assert np.all(values[..., 0] > 1e-4) and np.all(values[..., 0] < 5e-2)
    assert np.all(values[..., 1] > values[..., 0])  # another batch moves it further
    assert not np.allclose(values[0], values[1])  # each seed's own parameters


def test_checks_pass_fail_or_mix_over_seeds_on_the_median_ratio():
    per_pair = lambda ratio: np.array([[ratio * 0.5, 0.5], [ratio, 1.0], [ratio * 9, 9.0]])
    results = {"a": ((0, 1), np.stack([per_pair(0.05), per_pair(0.08)])),
               "b": ((0, 1), np.stack([per_pair(0.05), per_pair(0.2)]))}
    checks = tuple(rounding.Check(f"{v} small", v, lambda r: r <= 0.1) for v in ("a", "b", "c"))
    text = rounding.markdown(results, checks, pairs=3)
    assert "| a small | 2/2 | PASS |" in text and "| b small | 1/2 | MIXED |" in text
    assert "| c small | 0/0 | no finished run |" in text
    assert "| b | 1 | 2.00e-01 | 1.000 | 2.00e-01 |" in text  # medians over the pairs
    failing = rounding.markdown(results, (rounding.Check("tiny", "a", lambda r: r < 0.01),), 3)
    assert "| tiny | 0/2 | FAIL |" in failing

"""Why bfloat16 Dense products (`model.dense_matmul=bfloat16`) can train as float32 does: the
rounding moves the gradient far less than the choice of batch does, and SGD is built to
tolerate the batch's noise.

At a run's final parameters, for `pairs` pairs of training batches (A, B) of the run's size:

    rounding = ‖∇L_bf16(A) − ∇L_f32(A)‖ / ‖∇L_f32(A)‖   one batch, Dense products rounded or not
    batch    = ‖∇L_f32(B) − ∇L_f32(A)‖ / ‖∇L_f32(A)‖   two batches, both float32

and their ratio rounding / batch. Each seed's value is the median over its pairs. The gradient
is of the training loss over all parameters (one flat vector), without dropout.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import DenseMatmul, ModelConfig
from transformer_jax.studies.analysis.restore import Restored, finished_run_dirs, restore_variant
from transformer_jax.studies.checks import Check, CheckResult, Section, judged
from transformer_jax.studies.render.markdown import checks_table, markdown_table
from transformer_jax.train import steps
from transformer_jax.train.init import init_model

PAIRS = 8


def gradient_function(cfg: ModelConfig, dense_matmul: DenseMatmul) -> Callable:
    """(params, batch) -> the training loss's gradient as one flat float32 vector, for the model
    `cfg` describes with its Dense products as `dense_matmul` says (same parameters)."""
    cfg = dataclasses.replace(cfg, dense_matmul=dense_matmul)
    graphdef, _ = jax.eval_shape(lambda: init_model(cfg, 0))

    def loss(params, batch):
        logits, _ = nnx.merge(graphdef, params)(batch["inputs"], batch["padding_mask"],
                                                training=True)
        return steps.loss_and_metrics(logits, batch, cfg.head)[0]

    def flat_gradient(params, batch):
        grads = jax.grad(loss)(params, batch)
        return jnp.concatenate([g.ravel().astype(jnp.float32) for g in jax.tree.leaves(grads)])
    return jax.jit(flat_gradient)


def measure(restored: Restored, pairs: int = PAIRS) -> np.ndarray:
    """[seeds, pairs, 2]: (rounding, batch) for each seed of `restored` and pair of batches."""
    run = restored.run
    exact = gradient_function(run.model, DenseMatmul.COMPUTE)
    rounded = gradient_function(run.model, DenseMatmul.BFLOAT16)
    fmt, size = run.model.arch.value, run.train.batch_size
    batches = [run.dataset.train_batch(step, size, fmt) for step in range(2 * pairs)]
    out = np.zeros((len(restored.seeds), pairs, 2))
    stacked = jax.device_get(restored.params)  # a seed's slice is numpy's, not a program per leaf
    for s in range(len(restored.seeds)):
        params = jax.tree.map(lambda x: x[s], stacked)
        for p in range(pairs):
            a, b = batches[2 * p], batches[2 * p + 1]
            g_a = exact(params, a)
            scale = jnp.linalg.norm(g_a)
            out[s, p] = jax.device_get([jnp.linalg.norm(rounded(params, a) - g_a) / scale,
                                        jnp.linalg.norm(exact(params, b) - g_a) / scale])
    return out


def make_analysis(checks: tuple[Check, ...] = (), pairs: int = PAIRS
                  ) -> Callable[[Path, dict], Section]:
    """The analysis for `Study.analyses`: every variant's finished runs measured."""
    def rounding_against_batch_noise(root: Path, runs: dict) -> Section:
        results = {variant: (restored.seeds, measure(restored, pairs))
                   for variant, dirs in finished_run_dirs(Path(root), runs).items()
                   for restored in [restore_variant(dirs)]}
        return Section(markdown(results, checks, pairs), judge(results, checks))
    return rounding_against_batch_noise


def markdown(results: Mapping[str, tuple[tuple[int, ...], np.ndarray]],
             checks: tuple[Check, ...], pairs: int) -> str:
    rows = []
    for variant, (seeds, values) in results.items():
        for seed, per_pair in zip(seeds, values):
            rounding, batch = np.median(per_pair, axis=0)
            ratio = np.median(per_pair[:, 0] / per_pair[:, 1])
            rows.append((variant, seed, f"{rounding:.2e}", f"{batch:.3f}", f"{ratio:.2e}"))
    lines = ["### How far the rounding moves the gradient, against the batch", "",
             f"At each finished run's final parameters, over {pairs} pairs of training batches "
             f"(A, B): rounding = ‖∇L_bf16(A) − ∇L_f32(A)‖ / ‖∇L_f32(A)‖ (the Dense products "
             f"rounded to bfloat16 or not, same batch), batch = ‖∇L_f32(B) − ∇L_f32(A)‖ / "
             f"‖∇L_f32(A)‖; medians over the pairs.", "",
             markdown_table(["variant", "seed", "rounding", "batch", "rounding / batch"], rows),
             ""]
    if checks:
        lines += checks_table("check (thresholds from the study)", judge(results, checks))
        lines.append("")
    return "\n".join(lines)


def judge(results: Mapping[str, tuple[tuple[int, ...], np.ndarray]],
          checks: tuple[Check, ...]) -> tuple[CheckResult, ...]:
    """Each check on each finished seed's median ratio rounding / batch."""
    ratios = {v: [float(np.median(p[:, 0] / p[:, 1])) for p in values]
              for v, (_, values) in results.items()}  # per seed
    return tuple(judged(c, [(r,) for r in ratios.get(c.variant, [])]) for c in checks)

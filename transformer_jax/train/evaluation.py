"""A training's evaluations: eval metrics over the eval split and attention statistics of its
first batch, for each replica, in the form TensorBoard shows them.

The eval split does not depend on the seed, so one pass of the compiled eval step over it
evaluates every replica at once. The trainer's periodic evaluations take `train.eval_batches`
batches; its final one always takes the whole split.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np
from absl import logging

from transformer_jax.train import parallel
from transformer_jax.train import steps
from transformer_jax.train.summaries import attention_map_image

PROBED = ("entropy", "max_weight", "max_abs_logit")  # attention statistics, one per layer


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One replica's evaluation at one step."""

    metrics: dict[str, float]  # steps.finish_eval's: loss, accuracy, bits, ...
    scalars: dict[str, float]  # eval/* and attention/<statistic>/layer_NN
    images: dict[str, np.ndarray]  # attention_map/layer_NN of the first and last layers


def evaluate(run, live: Sequence[int], fmt: str, eval_step: Callable, probe: Callable, params,
             step: int, mesh: Optional[Any] = None, max_batches: int = 0) -> list[Evaluation]:
    """The evaluation of each replica in `live` (indices into the stacked `params`) at `step`,
    over the first `max_batches` eval batches (0: all of them). `run`: any replica's Run."""
    sums, first, counted = _eval_sums(run, fmt, eval_step, params, mesh, max_batches)
    found = jax.device_get(probe(params, first))
    length = int(np.asarray(first["padding_mask"][0]).sum())
    evaluations = [_replica_evaluation(sums, found, j, length, run.bits_name) for j in live]
    logging.info("eval at step %d (%s): %s", step,
                 f"{counted} batches" if max_batches else "the whole eval split",
                 "; ".join(format_metrics(e.metrics) for e in evaluations))
    return evaluations


def format_metrics(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def _eval_sums(run, fmt: str, eval_step: Callable, params, mesh, max_batches: int
               ) -> tuple[dict[str, np.ndarray], dict, int]:
    """(the eval step's weighted sums over the batches, [R] each; the first batch; how many)."""
    sums: dict[str, np.ndarray] = {}
    first, counted = None, 0
    for batch in run.dataset.eval_batches(run.train.batch_size, fmt):
        if max_batches and counted == max_batches:
            break
        first, counted = first or batch, counted + 1
        placed = batch if mesh is None else parallel.shard_batch(batch, mesh)
        for k, v in jax.device_get(eval_step(params, placed)).items():
            sums[k] = sums.get(k, 0.0) + np.asarray(v, np.float64)
    return sums, first, counted


def _replica_evaluation(sums: dict[str, np.ndarray], found: dict, j: int, length: int,
                        bits_name: str) -> Evaluation:
    """Replica j's share of the summed metrics and probed statistics; the attention maps cut
    to the first example's `length` real tokens."""
    metrics = steps.finish_eval({k: float(v[j]) for k, v in sums.items()}, bits_name=bits_name)
    scalars = {f"eval/{k}": v for k, v in metrics.items()}
    for name in PROBED:
        for layer, value in enumerate(np.asarray(found[name][j]).reshape(-1)):
            scalars[f"attention/{name}/layer_{layer:02d}"] = float(value)
    weights = np.asarray(found["example_weights"][j])[:, :, :length, :length]  # [L, H, t, t]
    images = {f"attention_map/layer_{l:02d}": attention_map_image(weights[l])
              for l in sorted({0, weights.shape[0] - 1})}
    return Evaluation(metrics, scalars, images)

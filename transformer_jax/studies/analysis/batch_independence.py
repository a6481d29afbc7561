"""Does a trained model's output depend on the rest of its evaluation batch, or on how much
padding its rows carry? LayerNorm normalizes each token by its own statistics, so it must not,
at all; BatchNorm normalizes by the batch's statistics while training, and by running averages
(kept while training) at evaluation.

For each finished variant, its first seed: the eval split's first `EXAMPLES` examples scored in
one batch, in batches of 8 and one at a time, and in one batch with `EXTRA_PADDING` more padded
positions per row; in evaluation mode, and for BatchNorm also in training mode (batch
statistics, `norms.TRAINING`). Each way is compared with the one batch: the largest logit
difference, the predictions that changed, and the accuracy. `make_analysis(checks)` adds the
study's statements (written before the analysis first ran), each judged pass/fail per variant.
"""
from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import NormType
from transformer_jax.model import norms
from transformer_jax.studies.analysis.restore import Restored, finished_run_dirs, restore_variant
from transformer_jax.studies.render.markdown import markdown_table
from transformer_jax.train import steps

EXAMPLES = 64
SPLITS = (8, 1)  # batch sizes compared with the one batch of EXAMPLES
EXTRA_PADDING = 8  # padded positions added to every row


class Mode(enum.Enum):
    EVAL = "evaluation"  # as evaluation runs: running statistics for BatchNorm
    TRAINING = "training"  # batch statistics (BatchNorm only; LayerNorm has no such mode)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One way of scoring the examples against the one batch."""
    way: str  # 'batch 8', 'batch 1', '+8 padding'
    max_logit_diff: float
    changed: float  # fraction of scored predictions that differ
    accuracy: float


@dataclasses.dataclass(frozen=True)
class Check:
    """A statement judged per variant: test(mode -> comparisons) -> holds?"""
    text: str
    variants: tuple[str, ...]
    test: Callable[[Mapping[Mode, list[Comparison]]], bool]


def identical(comparisons: list[Comparison]) -> bool:
    """Every way gives the one batch's logits exactly."""
    return all(c.max_logit_diff == 0.0 for c in comparisons)


def _logits_fn(restored: Restored, mode: Mode) -> Callable:
    def logits(params, inputs, padding_mask):
        model = nnx.merge(restored.graphdef, params)
        if mode is Mode.TRAINING:
            model = nnx.view(model, **norms.TRAINING)
        out, _ = model(inputs, padding_mask)
        return out
    return jax.jit(logits)


def _pad(batch: Mapping[str, np.ndarray], extra: int) -> dict[str, np.ndarray]:
    """The batch with `extra` padded positions after every row (not real tokens, no targets)."""
    out = {}
    for key, value in batch.items():
        value = np.asarray(value)
        if value.ndim == 2:
            out[key] = np.pad(value, ((0, 0), (0, extra)))  # pad token 0, False, weight 0
        else:
            out[key] = value
    return out


def score(restored: Restored, mode: Mode, examples: int = EXAMPLES) -> list[Comparison]:
    """The first `examples` eval examples in the ways of the module docstring (first seed)."""
    cfg = restored.run.model
    params = jax.tree.map(lambda x: x[0], restored.params)
    batch = next(iter(restored.run.dataset.eval_batches(examples, cfg.arch.value)))
    logits = _logits_fn(restored, mode)
    head = cfg.head
    reference = np.asarray(logits(params, batch["inputs"], batch["padding_mask"]))

    def compare(way: str, got: np.ndarray) -> Comparison:
        _, metrics = steps.loss_and_metrics(jnp.asarray(got), batch, head)
        weights = np.asarray(batch["weights"]) > 0
        changed = np.argmax(got, -1) != np.argmax(reference, -1)
        return Comparison(way, float(np.max(np.abs(got - reference))),
                          float(changed[weights].mean()), float(metrics["accuracy"]))

    found = [compare(f"one batch of {examples}", reference)]
    for size in SPLITS:
        parts = [np.asarray(logits(params, batch["inputs"][i:i + size],
                                   batch["padding_mask"][i:i + size]))
                 for i in range(0, examples, size)]
        found.append(compare(f"batches of {size}", np.concatenate(parts)))
    padded = _pad(batch, EXTRA_PADDING)
    got = np.asarray(logits(params, padded["inputs"], padded["padding_mask"]))
    if got.ndim == 3:  # a token head: the real positions' logits
        got = got[:, :reference.shape[1]]
    found.append(compare(f"+{EXTRA_PADDING} padding", got))
    return found


def modes(restored: Restored) -> tuple[Mode, ...]:
    uses_batchnorm = restored.run.model.norm_type is NormType.BATCHNORM
    return (Mode.EVAL, Mode.TRAINING) if uses_batchnorm else (Mode.EVAL,)


def make_analysis(checks: tuple[Check, ...] = ()) -> Callable[[Path, dict], str]:
    """The analysis for `Study.analyses`."""
    def batch_independence(root: Path, runs: dict) -> str:
        return analyse(Path(root), runs, checks)
    return batch_independence


def analyse(root: Path, runs: Mapping, checks: tuple[Check, ...] = ()) -> str:
    return markdown(measure(root, runs), checks)


def measure(root: Path, runs: Mapping, examples: int = EXAMPLES
            ) -> dict[str, dict[Mode, list[Comparison]]]:
    """variant -> mode -> its comparisons, for every variant with a finished run."""
    results = {}
    for variant, dirs in finished_run_dirs(root, runs).items():
        restored = restore_variant(dirs)
        results[variant] = {mode: score(restored, mode, examples) for mode in modes(restored)}
    return results


def markdown(results: Mapping[str, Mapping[Mode, list[Comparison]]],
             checks: tuple[Check, ...] = ()) -> str:
    if not results:
        return "No finished runs to score.\n"
    rows = [(variant, mode.value, c.way, f"{c.max_logit_diff:.3g}", f"{c.changed:.1%}",
             f"{c.accuracy:.4f}")
            for variant, by_mode in results.items() for mode, found in by_mode.items()
            for c in found]
    table = markdown_table(["variant", "mode", "scored as", "max |Δ logit| vs one batch",
                            "predictions changed", "accuracy"], rows)
    text = ("### Does the output depend on the batch or the padding?\n\n"
            f"The eval split's first {EXAMPLES} examples, first seed of each variant, scored in "
            f"one batch, in batches of {' and of '.join(map(str, SPLITS))}, and with "
            f"{EXTRA_PADDING} more padded positions per row; BatchNorm also in training mode "
            "(batch statistics).\n\n" + table + "\n")
    if checks:
        check_rows = []
        for check in checks:
            for variant in check.variants:
                found = results.get(variant)
                verdict = "not run" if found is None else ("holds" if check.test(found) else
                                                           "does not hold")
                check_rows.append((check.text, variant, verdict))
        text += "\n" + markdown_table(["check", "variant",
                                       "verdict"], check_rows) + "\n"
    return text

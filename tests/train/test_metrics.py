"""Loss, metrics and attention statistics against numbers computed by hand in numpy: the
weighted cross-entropy, accuracy and seq_accuracy of `steps.loss_and_metrics`, bits per
character of `steps.finish_eval` over batches of different fill, and the attention entropy and
max weight of `steps.make_probe` (normalized by the keys a query may see)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax import Arch, Head, Transformer
from transformer_jax.train import steps

V = 5  # vocabulary


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def token_batch(rng, wrong: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, dict]:
    """Random logits [B, T, V] and targets [B, T]: the target is the argmax except where
    `wrong` (then the class with the lowest logit)."""
    logits = rng.normal(0, 2, wrong.shape + (V,)).astype(np.float32)
    targets = np.where(wrong, logits.argmin(-1), logits.argmax(-1)).astype(np.int32)
    return logits, {"targets": targets, "weights": weights.astype(np.float32)}


# A batch of four sequences of length 4:
WRONG = np.array([[0, 0, 0, 0],   # every position right
                  [0, 0, 1, 1],   # wrong only where the weight is 0: the sequence counts as right
                  [0, 1, 0, 0],   # one weighted position wrong
                  [1, 1, 1, 1]], bool)  # no weight at all: not a sequence of the batch
WEIGHTS = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0.5], [0, 0, 0, 0]])


def by_hand(logits: np.ndarray, batch: dict) -> dict[str, float]:
    w, targets = np.asarray(batch["weights"], np.float64), batch["targets"]
    nll = -np.take_along_axis(log_softmax(logits), targets[..., None], -1)[..., 0]
    correct = logits.argmax(-1) == targets
    out = {"loss": float((nll * w).sum() / w.sum()),
           "accuracy": float((correct * w).sum() / w.sum()), "weight": float(w.sum())}
    if w.ndim == 2:
        real = [b for b in range(len(w)) if w[b].sum() > 0]
        out["seq_accuracy"] = float(np.mean([all(correct[b][w[b] > 0]) for b in real]))
    return out


def test_token_loss_accuracy_and_seq_accuracy_by_hand():
    logits, batch = token_batch(np.random.default_rng(0), WRONG, WEIGHTS)
    loss, metrics = steps.loss_and_metrics(jnp.asarray(logits), batch, Head.TOKEN)
    expected = by_hand(logits, batch)
    assert expected["seq_accuracy"] == pytest.approx(2 / 3)  # rows 0 and 1 of 3 real rows
    assert expected["accuracy"] == pytest.approx(8.5 / 9.5)  # row 2 wrong where its weight is 1
    assert float(loss) == pytest.approx(expected["loss"], rel=1e-5)
    for name, value in expected.items():
        assert float(metrics[name]) == pytest.approx(value, rel=1e-5), name
    assert float(metrics["max_abs_logit"]) == pytest.approx(np.abs(logits).max())


def test_pooled_loss_and_accuracy_by_hand():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (6, V)).astype(np.float32)
    targets = logits.argmax(-1)
    targets[[1, 4]] = logits[[1, 4]].argmin(-1)  # two wrong; the one at 4 has weight 0
    batch = {"targets": targets.astype(np.int32),
             "weights": np.array([1, 1, 1, 1, 0, 2], np.float32)}
    loss, metrics = steps.loss_and_metrics(jnp.asarray(logits), batch, Head.POOLED)
    expected = by_hand(logits, batch)
    assert expected["accuracy"] == pytest.approx(5 / 6)
    assert "seq_accuracy" not in metrics
    assert float(loss) == pytest.approx(expected["loss"], rel=1e-5)
    assert float(metrics["accuracy"]) == pytest.approx(expected["accuracy"], rel=1e-6)


def test_finish_eval_over_batches_of_different_fill_by_hand():
    """Two batches, the second mostly padding: the eval metrics are those of their union
    (not the mean of the two batches' means), and bits = loss / ln 2."""
    rng = np.random.default_rng(2)
    first = token_batch(rng, WRONG, WEIGHTS)
    second = token_batch(rng, np.array([[1, 0, 0, 0], [0, 0, 0, 0]], bool),
                         np.array([[1, 0, 0, 0], [0, 0, 0, 0]]))
    sums: dict[str, float] = {}
    for logits, batch in (first, second):
        _, metrics = steps.loss_and_metrics(jnp.asarray(logits), batch, Head.TOKEN)
        for k, v in steps.weighted_sums(metrics, batch).items():
            sums[k] = sums.get(k, 0.0) + float(v)
    result = steps.finish_eval(sums, bits_name="bits_per_char")
    union = by_hand(np.concatenate([first[0], second[0]]),
                    {k: np.concatenate([first[1][k], second[1][k]]) for k in ("targets", "weights")})
    assert union["seq_accuracy"] == pytest.approx(2 / 4)  # the second batch's one real row fails
    for name in ("loss", "accuracy", "seq_accuracy"):
        assert result[name] == pytest.approx(union[name], rel=1e-5), name
    assert result["bits_per_char"] == pytest.approx(union["loss"] / math.log(2), rel=1e-5)
    assert "bits_per_token" not in result


# --- attention statistics ------------------------------------------------------------------------


@pytest.mark.parametrize("arch", [Arch.DECODER, Arch.ENCODER])
def test_probe_entropy_is_normalized_by_the_keys_a_query_may_see(arch):
    """One padded sequence: the entropy of each real query's weights over its allowed keys
    (causal: keys 0..i; both: real keys only), divided by log(number of those keys), averaged
    over heads and the queries that have a choice; the max weight likewise."""
    cfg = tiny_config(arch=arch, num_heads=4)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    length, real = 7, 5
    tokens = np.random.default_rng(3).integers(1, cfg.vocab_size, (1, length))
    batch = {"inputs": jnp.asarray(tokens),
             "padding_mask": jnp.asarray(np.arange(length)[None] < real)}
    found = jax.device_get(steps.make_probe(graphdef)(params, batch))
    weights = np.asarray(found["example_weights"], np.float64)  # [L, H, T, T] of the one example
    assert weights.shape == (cfg.num_layers, cfg.num_heads, length, length)

    for layer in range(cfg.num_layers):
        entropies, maxima = [], []
        for i in range(real):  # queries on real tokens
            keys = list(range(i + 1 if cfg.causal else real))
            if len(keys) < 2:
                continue  # one key: no choice to measure
            for head in range(cfg.num_heads):
                w = weights[layer, head, i, keys]
                assert w.sum() == pytest.approx(1.0, abs=1e-5)  # no weight on a forbidden key
                entropies.append(-(w * np.log(w)).sum() / math.log(len(keys)))
                maxima.append(w.max())
        assert 0 < np.mean(entropies) < 1
        assert float(found["entropy"][layer]) == pytest.approx(np.mean(entropies), rel=1e-4)
        assert float(found["max_weight"][layer]) == pytest.approx(np.mean(maxima), rel=1e-5)

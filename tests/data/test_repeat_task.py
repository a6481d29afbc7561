"""The `repeat` task (experiments/induction.py): random symbols, then the same again, next-token
prediction scored on the repeat, where every target is the token after the current token's
earlier occurrence."""
import numpy as np
import pytest

from transformer_jax import data
from transformer_jax.data import DataError, synthetic


def _dataset(tmp_path, **fields):
    cfg = data.default_config()
    cfg.update(task="repeat", vocab_size=32, min_len=4, seq_len=9, num_train=64, num_eval=16,
               data_dir=str(tmp_path), **fields)
    return data.make_dataset(cfg, seed=0, fmt="decoder")


def test_the_scored_targets_follow_an_earlier_occurrence(tmp_path):
    ds = _dataset(tmp_path)
    batch = ds.train_batch(0, 32, "decoder")
    inputs, targets, weights, real = (batch[k] for k in ("inputs", "targets", "weights",
                                                         "padding_mask"))
    assert inputs.shape == (32, 18) and ds.formats == ("decoder",)
    for x, y, w, m in zip(inputs, targets, weights, real):
        length = int(m.sum()) + 1  # 2n tokens, the last one only a target
        n = length // 2
        seq = np.append(x[:length - 1], y[length - 2])
        np.testing.assert_array_equal(seq[:n], seq[n:])  # the second half repeats the first
        np.testing.assert_array_equal(y[:length - 1], seq[1:])  # next-token targets
        assert np.all(x[length - 1:] == 0) and not w[length - 1:].any()
        scored = np.flatnonzero(w)
        np.testing.assert_array_equal(scored, np.arange(n, 2 * n - 1))
        for p in scored:  # the target is the token after the earlier occurrence at p - n
            assert x[p] == x[p - n] and y[p] == x[p - n + 1]


def test_repeat_is_decoder_only(tmp_path):
    cfg = data.default_config()
    cfg.update(task="repeat", data_dir=str(tmp_path))
    with pytest.raises(DataError, match="'repeat' is next-token prediction.*decoder"):
        data.make_dataset(cfg, seed=0, fmt="encoder")


def test_eval_batches_score_the_same_positions(tmp_path):
    ds = _dataset(tmp_path)
    batch = next(iter(ds.eval_batches(16, "decoder")))
    lengths = (batch["padding_mask"].sum(1) + 1) // 2
    assert np.array_equal(batch["weights"].sum(1), lengths - 1)
    ex = synthetic.sample_examples("repeat", 32, 5, 4, 9, np.random.default_rng(0))
    np.testing.assert_array_equal(ex.y, ex.x)  # the answer is the sequence itself

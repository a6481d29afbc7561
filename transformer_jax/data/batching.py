"""The shared shape of every dataset: its error type, its interface and its batch formats.

Why one module: the trainer sees only `Dataset` and the batch dicts built here, so the synthetic and
text pipelines differ in where examples come from, never in what a batch looks like. Every batch
has a static width (the dataset's `train_len` or `eval_len`) so a compiled step never recompiles.

Batch keys (B = batch size, L = width):
  inputs        int32   [B, L]   token ids, pad id 0
  targets       int32   [B, L]   per-position targets (token head)  or [B] labels (pooled head)
  weights       float32 [B, L]   1 where the loss counts            or [B] (pooled head)
  padding_mask  bool    [B, L]   True on real tokens
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Callable, Iterator

import numpy as np

PAD_ID = 0
FORMATS = ("encoder", "decoder")
HEADS = ("token", "pooled")

Batch = dict[str, np.ndarray]


class DataError(ValueError):
    """A bad data setting; the message is one line naming the value and the valid choices."""


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The generator behind train batch `step`: a pure function of (seed, step), so resuming at a
    step reproduces exactly the batches an uninterrupted run would have seen."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise DataError(f"step={step!r} must be a non-negative integer")
    return np.random.default_rng([seed, int(step)])


def check_batch_size(batch_size: int) -> int:
    if (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
            or batch_size < 1):
        raise DataError(f"batch_size={batch_size!r} must be a positive integer")
    return int(batch_size)


def prepared(make_builder: Callable, download_config):
    """`make_builder()` with its dataset prepared. Runs started together on a fresh cache race to
    prepare the same dataset; TFDS's final rename fails for all but the first, which is fine.
    A builder made before another process finished has read no dataset info (TFDS reads it when
    the builder is made), and its download_and_prepare then skips ("Reusing dataset") with no
    splits known: such a builder is made again, now reading the finished dataset's info."""
    builder = make_builder()
    try:
        builder.download_and_prepare(download_config=download_config)
    except OSError:
        builder = make_builder()
        if not builder.is_prepared():
            raise
    if not builder.info.splits:
        builder = make_builder()
    return builder


def encoder_batch(x: np.ndarray, y: np.ndarray, lengths: np.ndarray, width: int,
                  head: str) -> Batch:
    """x, y: [B, Lx] right-padded with 0 (y: [B, 1] labels for the pooled head); lengths: [B]."""
    batch_size = len(lengths)
    pos = np.arange(width)[None, :]                         # [1, L]
    real = pos < lengths[:, None]                           # [B, L]
    inputs = np.zeros((batch_size, width), np.int32)
    inputs[:, :x.shape[1]] = x[:, :width]
    if head == "pooled":
        targets = y[:, 0].astype(np.int32)                    # [B]
        weights = np.ones((batch_size,), np.float32)          # [B]
    else:
        targets = np.zeros((batch_size, width), np.int32)
        targets[:, :y.shape[1]] = y[:, :width]
        weights = real.astype(np.float32)                     # [B, L]
    return dict(inputs=inputs, targets=targets, weights=weights, padding_mask=real)


def decoder_batch(x: np.ndarray, y: np.ndarray, lengths: np.ndarray, width: int,
                  sep_id: int) -> Batch:
    """Causal seq2seq: s = [x_0..x_{n-1}, SEP, y_0..y_{n-1}] (2n+1 tokens), inputs = s[:-1],
    targets = s[1:]; the loss counts only where the target is a y token (input positions
    n..2n-1), so the model is scored on the answer, never on predicting the random x."""
    batch_size = len(lengths)
    n = lengths[:, None]                                    # [B, 1]
    pos = np.broadcast_to(np.arange(width + 1)[None, :], (batch_size, width + 1))  # [B, L+1]
    x_part = np.take_along_axis(x, np.minimum(pos, x.shape[1] - 1), axis=1)
    y_part = np.take_along_axis(y, np.clip(pos - n - 1, 0, y.shape[1] - 1), axis=1)
    seq = np.where(pos < n, x_part,
                   np.where(pos == n, sep_id, np.where(pos <= 2 * n, y_part, PAD_ID)))  # [B, L+1]
    in_pos = pos[:, :-1]                                    # [B, L]
    real = in_pos < 2 * n                                   # the last y token is a target only
    return dict(
        inputs=np.where(real, seq[:, :-1], PAD_ID).astype(np.int32),
        targets=seq[:, 1:].astype(np.int32),
        weights=((in_pos >= n) & real).astype(np.float32),
        padding_mask=real,
    )


def repeat_batch(x: np.ndarray, lengths: np.ndarray, width: int) -> Batch:
    """Next-token prediction on a sequence repeated once: s = [a_0..a_{n-1}, a_0..a_{n-1}] (2n
    tokens), inputs = s[:-1], targets = s[1:]. The loss counts where the repeat makes the target
    knowable: input positions n..2n-2, whose targets a_1..a_{n-1} each follow an earlier
    occurrence of the current token (the first half is random, and a_0 at position n-1 could only
    be guessed)."""
    batch_size = len(lengths)
    n = lengths[:, None]                                    # [B, 1]
    pos = np.broadcast_to(np.arange(width + 1)[None, :], (batch_size, width + 1))  # [B, L+1]
    a = np.take_along_axis(x, np.clip(np.where(pos < n, pos, pos - n), 0, x.shape[1] - 1), axis=1)
    seq = np.where(pos < 2 * n, a, PAD_ID)                  # [B, L+1]
    in_pos = pos[:, :-1]                                    # [B, L]
    real = in_pos < 2 * n - 1
    return dict(
        inputs=np.where(real, seq[:, :-1], PAD_ID).astype(np.int32),
        targets=seq[:, 1:].astype(np.int32),
        weights=((in_pos >= n) & real).astype(np.float32),
        padding_mask=real,
    )


def lm_batch(windows: np.ndarray) -> Batch:
    """windows: [B, L+1] consecutive tokens -> next-token prediction at every position."""
    inputs = windows[:, :-1].astype(np.int32)               # [B, L]
    return dict(inputs=inputs, targets=windows[:, 1:].astype(np.int32),
                weights=np.ones(inputs.shape, np.float32),
                padding_mask=np.ones(inputs.shape, bool))


def fill_rows(indices: np.ndarray, batch_size: int) -> tuple[np.ndarray, int]:
    """Pads a short final eval batch to `batch_size` rows by repeating the first example (a real,
    fully valid row, so no model ever sees an all-padding row); returns (indices, num_real)."""
    num_real = len(indices)
    filler = np.full((batch_size - num_real,), indices[0], indices.dtype)
    return np.concatenate([indices, filler]), num_real


def zero_filler_weights(batch: Batch, num_real: int) -> Batch:
    """Rows past `num_real` are filler: weight 0 so they count in no loss or metric."""
    batch["weights"][num_real:] = 0.0
    return batch


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset(abc.ABC):
    """What the trainer relies on. Arrays are loaded once; batches are pure functions of the
    dataset, the seed and the step.

    `fmt` is the architecture the widths were sized for (None: sized for every format in
    `formats`, so a format with shorter sequences is right-padded to the common width)."""
    vocab_size: int          # token ids, including pad 0 and special tokens
    num_classes: int         # pooled head: number of labels; else 0
    head: str                # 'token' | 'pooled'
    train_len: int           # width of train batches
    eval_len: int            # width of eval batches
    formats: tuple[str, ...]  # the `fmt` values this dataset can produce
    fmt: str | None
    seed: int

    def check_format(self, fmt: str) -> str:
        if fmt not in FORMATS:
            raise DataError(f"fmt={fmt!r} is not one of: {', '.join(FORMATS)}")
        if fmt not in self.formats:
            raise DataError(f"fmt={fmt!r} is not available for {self.name}; available: "
                            f"{', '.join(self.formats)}")
        if self.fmt is not None and fmt != self.fmt:
            raise DataError(f"fmt={fmt!r}: this dataset was made with fmt={self.fmt!r} "
                            "(its widths are sized for that format)")
        return fmt

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """Short name for messages, e.g. "data.task='reverse'"."""

    @abc.abstractmethod
    def train_batch(self, step: int, batch_size: int, fmt: str) -> Batch:
        """Batch number `step` of training: a pure function of (seed, step, batch_size)."""

    @abc.abstractmethod
    def eval_batches(self, batch_size: int, fmt: str) -> Iterator[Batch]:
        """The whole fixed eval set in order; the last batch is filled with weight-0 rows."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for logs."""

    @abc.abstractmethod
    def decode(self, ids) -> str:
        """Token ids -> readable text (pad dropped), for samples in logs."""

"""Synthetic sequence tasks that separate what attention can do from what needs positions.

  copy     y = x            solvable without positions: output i is a function of token i
  reverse  y = x reversed   needs positions: without them, output i depends only on token i and
  sort     y = sorted x     the multiset of tokens, but the answer at i depends on i itself
  sort_distinct              as sort, but no symbol occurs twice in a sequence (needs
                             data.vocab_size >= the longest length). Sorting a set is one rule
                             at every length (the next output is the smallest input symbol above
                             the last one: no counting, no positions), a length-generalization
                             test (experiments/length_generalization.py).
  lag_bits                   y_i = the bits at four lags as one symbol: inputs are two symbols
                             (1, 2 = bits 0, 1), y_i = 1 + Σ_m b(x_{i-LAGS[m]})·2^m, one of 16
                             (positions cyclic mod the length; V >= 16). Four relations at every
                             position: one head mixes the four tokens through one softmax and one
                             W_v, and two symbols' values lie on a line, so the mix is one number
                             Σ α_m b_m; four heads each deliver one bit in its own direction
                             (experiments/heads.py).
  repeat                     decoder only: random symbols a, then a again, next-token prediction;
                             the loss counts on the repeat, where each token follows an earlier
                             occurrence of the one before it: an induction head's job (Olsson
                             et al. 2022), a copy a model with one attention layer cannot make
                             (experiments/induction.py).
  order    one label        1 if symbol A (id 1) occurs before symbol B (id 2); each occurs once,
                            the rest are random other symbols. Without positions a pooled encoder
                            sees a multiset and is at chance (50%).

Why TFDS: each parameter set is generated once into a versioned, inspectable array_record dataset
whose BuilderConfig name encodes every generation parameter, so different lengths or sizes never
collide and a second run re-uses the files. The generation seed is fixed (GEN_SEED): the data is the
same for every training seed; the training seed only changes which examples each step draws.

Token ids: 0 = pad, 1..V = symbols, V+1 = SEP (separates x from y in the decoder format).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Iterator, NamedTuple

import numpy as np
import tensorflow_datasets as tfds

from transformer_jax.data import batching
from transformer_jax.data.batching import DataError

TASKS = ("copy", "reverse", "sort", "order", "sort_distinct", "lag_bits", "repeat")
DISTINCT = {"sort_distinct": "sort"}  # task -> its rule, applied to sets of distinct symbols
POOLED_TASKS = ("order",)
DECODER_TASKS = ("repeat",)  # next-token prediction on one sequence: no encoder format
GEN_SEED = 20261129  # changing it changes the data: bump SyntheticTasks.VERSION with it
ORDER_A, ORDER_B = 1, 2
LAGS = (1, 2, 3, 4)  # lag_bits: y_i spells the bits at these lags back from i


def chance_accuracy(task: str, num_symbols: int) -> float:
    """The accuracy of a uniform guess over the answers `task` can have: the level below which
    no model falls by failing to learn (a study counts a diverged run at most as this)."""
    if task in POOLED_TASKS:
        return 1 / 2  # order: a yes/no label
    if task == "lag_bits":
        return 1 / 2 ** len(LAGS)  # one of the 2^len(LAGS) bit patterns
    return 1 / num_symbols  # an output is one of the symbols


class Examples(NamedTuple):
    x: np.ndarray        # int32 [N, max_len], right-padded with 0
    y: np.ndarray        # int32 [N, max_len] targets, or [N, 1] labels for a pooled task
    lengths: np.ndarray  # int32 [N], length of each x


def task_targets(task: str, x: np.ndarray, lengths: np.ndarray, num_symbols: int = 0
                 ) -> np.ndarray:
    """The answer for copy/reverse/sort/lag_bits.
    x: [N, L] padded with 0 -> y: [N, L] padded with 0."""
    task = DISTINCT.get(task, task)
    pos = np.arange(x.shape[1])[None, :]                     # [1, L]
    real = pos < lengths[:, None]                            # [N, L]
    if task == "lag_bits":  # inputs 1, 2 = bits 0, 1; answers 1..2^len(LAGS)
        back = lambda lag: np.take_along_axis(x, (pos - lag) % lengths[:, None], axis=1)  # noqa: E731
        y = 1 + sum((back(lag) - 1) << m for m, lag in enumerate(LAGS))
    elif task in ("copy", "repeat"):
        y = x
    elif task == "reverse":
        y = np.take_along_axis(x, np.clip(lengths[:, None] - 1 - pos, 0, None), axis=1)
    elif task == "sort":
        y = np.sort(np.where(real, x, np.iinfo(x.dtype).max), axis=1)  # padding sorts last
    else:
        raise DataError(f"data.task={task!r} has no per-position targets")
    return np.where(real, y, 0).astype(np.int32)


def sample_examples(task: str, num_symbols: int, num: int, min_len: int, max_len: int,
                    rng: np.random.Generator) -> Examples:
    """`num` examples, lengths uniform in [min_len, max_len]; vectorized (20k in milliseconds)."""
    lengths = rng.integers(min_len, max_len + 1, size=num).astype(np.int32)  # [N]
    real = np.arange(max_len)[None, :] < lengths[:, None]                     # [N, L]
    if task == "order":
        x = rng.integers(3, num_symbols + 1, size=(num, max_len))  # the other symbols: not A, not B
        rows = np.arange(num)
        pos_a = rng.integers(0, lengths)                            # distinct positions for A and B
        pos_b = (pos_a + 1 + rng.integers(0, lengths - 1)) % lengths
        x[rows, pos_a], x[rows, pos_b] = ORDER_A, ORDER_B
        x = np.where(real, x, 0).astype(np.int32)
        return Examples(x, (pos_a < pos_b).astype(np.int32)[:, None], lengths)
    if task in DISTINCT:  # the first max_len symbols of a random permutation per example
        symbols = np.argsort(rng.random((num, num_symbols)), axis=1)[:, :max_len] + 1
    else:
        drawn = 2 if task == "lag_bits" else num_symbols
        symbols = rng.integers(1, drawn + 1, size=(num, max_len))
    x = np.where(real, symbols, 0).astype(np.int32)
    return Examples(x, task_targets(task, x, lengths, num_symbols), lengths)


@dataclasses.dataclass
class SyntheticConfig(tfds.core.BuilderConfig):
    """Every generation parameter; the config name encodes them all (it names the cache dir)."""
    task: str = "copy"
    num_symbols: int = 16
    min_len: int = 1
    max_len: int = 32
    eval_min_len: int = 1
    eval_max_len: int = 32
    num_train: int = 20000
    num_eval: int = 1000

    @classmethod
    def create(cls, **p) -> "SyntheticConfig":
        name = (f"{p['task']}-v{p['num_symbols']}"
                f"-train{p['num_train']}x{p['min_len']}to{p['max_len']}"
                f"-eval{p['num_eval']}x{p['eval_min_len']}to{p['eval_max_len']}")
        return cls(name=name, **p)


class SyntheticTasks(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """TFDS builder for the tasks above; splits 'train' and 'test' (the eval set)."""
    name = "tj_synthetic"
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "copy, reverse, sort, order."}

    def _info(self) -> tfds.core.DatasetInfo:
        # Built here: dataset_info_from_configs expects package metadata files beside the module.
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "x": tfds.features.Tensor(shape=(None,), dtype=np.int32),
                "y": tfds.features.Tensor(shape=(None,), dtype=np.int32),
            }),
            disable_shuffling=True,  # keep generation order: the eval set is a fixed sequence
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download
        c = self.builder_config
        return {
            "train": self._generate_examples(c.num_train, c.min_len, c.max_len, split_id=0),
            "test": self._generate_examples(c.num_eval, c.eval_min_len, c.eval_max_len, split_id=1),
        }

    def _generate_examples(self, num, min_len, max_len, split_id) -> Iterator:
        c = self.builder_config
        rng = np.random.default_rng([GEN_SEED, split_id])
        ex = sample_examples(c.task, c.num_symbols, num, min_len, max_len, rng)
        for i, n in enumerate(ex.lengths):
            y = ex.y[i] if c.task in POOLED_TASKS else ex.y[i, :n]
            yield i, {"x": ex.x[i, :n], "y": y}


def _to_arrays(source, max_len: int, pooled: bool) -> Examples:
    """Reads a whole split (random-access data source) into padded numpy arrays, once."""
    records = source.__getitems__(list(range(len(source))))
    lengths = np.array([len(r["x"]) for r in records], np.int32)
    x = np.zeros((len(records), max_len), np.int32)
    y = np.zeros((len(records), 1 if pooled else max_len), np.int32)
    for i, r in enumerate(records):
        x[i, :len(r["x"])] = r["x"]
        y[i, :len(r["y"])] = r["y"]
    return Examples(x, y, lengths)


def prepare(config: SyntheticConfig, data_dir: str) -> tuple[Examples, Examples, str]:
    """Generates the dataset unless already prepared; returns (train, eval, dataset directory).

    Decoded once per process: the config name encodes every generation parameter, so the same
    (name, data_dir) is the same data. TFDS decodes ≈ 16 000 examples/s, so each of a
    sweep's runs reading its 21 000 examples again cost ≈ 1.5 s, ≈ 100 s over scripts/run.sh.
    """
    return _prepare_once(_Named(config.name, data_dir, config))


@dataclasses.dataclass(frozen=True)
class _Named:
    """A cache key: equal when name and data_dir are (the config itself is unhashable)."""
    name: str
    data_dir: str
    config: SyntheticConfig = dataclasses.field(compare=False, hash=False)


@functools.lru_cache(maxsize=8)
def _prepare_once(key: _Named) -> tuple[Examples, Examples, str]:
    config, data_dir = key.config, key.data_dir
    builder = batching.prepared(
        lambda: SyntheticTasks(config=config, data_dir=data_dir, file_format="array_record"),
        tfds.download.DownloadConfig(try_download_gcs=False))
    source = builder.as_data_source()
    pooled = config.task in POOLED_TASKS
    splits = (_to_arrays(source["train"], config.max_len, pooled),
              _to_arrays(source["test"], config.eval_max_len, pooled))
    for array in (a for split in splits for a in split):
        array.setflags(write=False)  # shared by every run of the process
    return (*splits, str(builder.data_dir))


def check_task(task: str, num_symbols: int, min_len: int, eval_min_len: int,
               fmt: str | None, max_len: int = 0) -> None:
    """Task-specific checks, before anything is generated. max_len: the longest sequence of
    either split (only the distinct-symbol tasks need it)."""
    if task not in TASKS:
        raise DataError(f"data.task={task!r} is not one of: {', '.join(TASKS)}")
    if task in DISTINCT and num_symbols < max_len:
        raise DataError(f"data.vocab_size={num_symbols} is too small for data.task={task!r}: "
                        f"sequences of length {max_len} need >= {max_len} distinct symbols")
    if task == "lag_bits":
        if num_symbols < 2 ** len(LAGS):
            raise DataError(f"data.vocab_size={num_symbols} is too small for data.task='lag_bits' "
                            f"(needs >= {2 ** len(LAGS)}: one answer symbol per {len(LAGS)} bits)")
        if min(min_len, eval_min_len) <= max(LAGS):
            raise DataError(f"data.min_len={min_len} (eval min {eval_min_len}) is too small for "
                            f"data.task='lag_bits' (needs > {max(LAGS)}: the lags {LAGS} must "
                            "name two positions other than i)")
    if task == "order":
        if num_symbols < 3:
            raise DataError(f"data.vocab_size={num_symbols} is too small for data.task='order' "
                            "(needs >= 3: A, B and at least one other symbol)")
        if min(min_len, eval_min_len) < 2:
            raise DataError(f"data.min_len={min_len} (eval min {eval_min_len}) is too small for "
                            "data.task='order' (needs >= 2: A and B each occur once)")
    if fmt == "encoder" and task in DECODER_TASKS:
        available = ", ".join(t for t in TASKS if t not in DECODER_TASKS)
        raise DataError(f"data.task={task!r} is next-token prediction, available in "
                        f"fmt='decoder' only (model.arch='decoder'); encoder tasks: {available}")
    if fmt == "decoder" and task in POOLED_TASKS:
        available = ", ".join(t for t in TASKS if t not in POOLED_TASKS)
        raise DataError(f"data.task={task!r} is a pooled task, not available in fmt='decoder'; "
                        f"decoder tasks: {available}")


@dataclasses.dataclass(frozen=True, eq=False)
class SyntheticDataset(batching.Dataset):
    """Holds both splits as numpy arrays; a train batch is `B` examples drawn with replacement
    by np.random.default_rng([seed, step])."""
    task: str
    num_symbols: int
    train: Examples
    eval: Examples
    cache_dir: str

    @property
    def sep_id(self) -> int:
        return self.num_symbols + 1

    @property
    def name(self) -> str:
        return f"data.task={self.task!r}"

    def _format(self, ex: Examples, idx: np.ndarray, width: int, fmt: str) -> batching.Batch:
        x, y, lengths = ex.x[idx], ex.y[idx], ex.lengths[idx]
        if self.task in DECODER_TASKS:
            return batching.repeat_batch(x, lengths, width)
        if fmt == "decoder":
            return batching.decoder_batch(x, y, lengths, width, self.sep_id)
        return batching.encoder_batch(x, y, lengths, width, self.head)

    def train_batch(self, step: int, batch_size: int, fmt: str) -> batching.Batch:
        fmt, batch_size = self.check_format(fmt), batching.check_batch_size(batch_size)
        rng = batching.batch_rng(self.seed, step)
        idx = rng.integers(0, len(self.train.lengths), size=batch_size)              # [B]
        return self._format(self.train, idx, self.train_len, fmt)

    def eval_batches(self, batch_size: int, fmt: str) -> Iterator[batching.Batch]:
        fmt, batch_size = self.check_format(fmt), batching.check_batch_size(batch_size)
        num = len(self.eval.lengths)
        for start in range(0, num, batch_size):
            idx = np.arange(start, min(start + batch_size, num))
            idx, num_real = batching.fill_rows(idx, batch_size)
            batch = self._format(self.eval, idx, self.eval_len, fmt)
            yield batching.zero_filler_weights(batch, num_real)

    def describe(self) -> str:
        tr, ev = self.train.lengths, self.eval.lengths
        return (f"synthetic {self.task!r}: {self.num_symbols} symbols (vocab {self.vocab_size} "
                f"with pad, SEP), train {len(tr)} ex len {tr.min()}-{tr.max()}, eval {len(ev)} "
                f"ex len {ev.min()}-{ev.max()}, head {self.head}, widths "
                f"{self.train_len}/{self.eval_len}, formats {'/'.join(self.formats)}, "
                f"cached at {self.cache_dir}")

    def decode(self, ids) -> str:
        names = {self.sep_id: "|"}
        ids = [int(i) for i in np.asarray(ids).ravel() if int(i) != 0]
        return " ".join(names.get(i, str(i)) for i in ids)


def make(task: str, num_symbols: int, min_len: int, max_len: int, eval_min_len: int,
         eval_max_len: int, num_train: int, num_eval: int, data_dir: str, seed: int,
         fmt: str | None) -> SyntheticDataset:
    """Validated parameters in, dataset out (generating it on first use)."""
    check_task(task, num_symbols, min_len, eval_min_len, fmt, max(max_len, eval_max_len))
    config = SyntheticConfig.create(
        task=task, num_symbols=num_symbols, min_len=min_len, max_len=max_len,
        eval_min_len=eval_min_len, eval_max_len=eval_max_len, num_train=num_train,
        num_eval=num_eval)
    train, eval_, cache_dir = prepare(config, data_dir)
    pooled = task in POOLED_TASKS
    formats = ("encoder",) if pooled else ("decoder",) if task in DECODER_TASKS else batching.FORMATS
    # decoder sequences are [x, SEP, y] or [x, x] minus one: 2n wide; encoder sequences n wide
    scale = 2 if (fmt or formats[-1]) == "decoder" else 1
    return SyntheticDataset(
        vocab_size=num_symbols + 2, num_classes=2 if pooled else 0,
        head="pooled" if pooled else "token", train_len=scale * max_len,
        eval_len=scale * eval_max_len, formats=formats, fmt=fmt, seed=seed, task=task,
        num_symbols=num_symbols, train=train, eval=eval_, cache_dir=cache_dir)

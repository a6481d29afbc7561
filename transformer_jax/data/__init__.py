"""Data for transformer_jax: `make_dataset(config.data, seed)` -> a `Dataset` of numpy batches.

Why this shape: every setting is validated here, before anything is generated or downloaded, so a
typo costs a one-line `DataError` instead of a minute of work. The datasets themselves are
prepared by TFDS (array_record, read without TensorFlow) and cached under `data.data_dir`.

    ds = make_dataset(cfg.data, seed=0)
    batch = ds.train_batch(step, batch_size=64, fmt="encoder")  # same (seed, step) -> same batch
    for batch in ds.eval_batches(256, fmt="encoder"): ...
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections

from transformer_jax.data import synthetic, text
from transformer_jax.data.batching import FORMATS, PAD_ID, Batch, DataError, Dataset

__all__ = ["DataConfig", "DataError", "Dataset", "Batch", "FORMATS", "KINDS", "PAD_ID", "TASKS",
           "chance_accuracy", "default_config", "default_data_dir", "make_dataset"]

KINDS = ("synthetic", "text")
TASKS = synthetic.TASKS


def default_config() -> ml_collections.ConfigDict:
    """The `data` sub-config with every field this package reads (its public contract), at the
    defaults `DataConfig` declares: the `data` section of every config file starts from these."""
    return ml_collections.ConfigDict({f.name: f.default for f in dataclasses.fields(DataConfig)})


def chance_accuracy(cfg) -> float | None:
    """eval/accuracy of a uniform guess on the `data` config's task; None where it is not known
    without reading the data (text: its alphabet is the file's)."""
    if cfg.get("kind", DataConfig.kind) != "synthetic":
        return None
    return synthetic.chance_accuracy(cfg.get("task", DataConfig.task),
                                     cfg.get("vocab_size", DataConfig.vocab_size))


def default_data_dir() -> str:
    """Outside the repository, so prepared datasets survive checkouts and are shared by runs."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "transformer_jax", "tensorflow_datasets")


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(f"data.{name}={value!r} must be an integer")
    if value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise DataError(f"data.{name}={value!r} must be {what}")
    return value


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise DataError(f"data.{name}={value!r} must be a string")
    return value


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The `data` config, validated; `eval_*` zeros already resolved to their defaults. The field
    defaults are the command line's (`default_config()` and every config file start from them)."""
    kind: str = "synthetic"  # 'synthetic' | 'text'
    task: str = "reverse"  # synthetic: copy | reverse | sort | order | sort_distinct | lag_bits |
    #                       repeat (decoder only: model.arch=decoder)
    vocab_size: int = 16  # synthetic: distinct symbols; pad and SEP are added on top
    seq_len: int = 32  # max train length (synthetic x length; text window length)
    min_len: int = 1  # synthetic: min train length, lengths uniform in [min_len, seq_len]
    eval_seq_len: int = 0  # max eval length; 0 -> seq_len
    eval_min_len: int = 0  # synthetic: min eval length; 0 -> min_len (N+1 tests unseen lengths)
    num_train: int = 20000  # synthetic train examples
    num_eval: int = 1000  # synthetic eval examples; text: eval windows spread evenly over the
    #                       held-out split, 0 = every non-overlapping window
    text_path: str = ""  # text: '' -> TFDS tiny_shakespeare; else a local UTF-8 file
    data_dir: str = ""  # where TFDS prepares datasets; '' -> default_data_dir(),
    #                     ~/.cache/transformer_jax/tensorflow_datasets

    @classmethod
    def from_config(cls, cfg) -> "DataConfig":
        """Fields missing from `cfg` take the defaults above; types are checked here."""
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        get = lambda name: cfg.get(name, defaults[name])  # noqa: E731
        kind = _str("kind", get("kind"))
        if kind not in KINDS:
            raise DataError(f"data.kind={kind!r} is not one of: {', '.join(KINDS)}")
        seq_len = _int("seq_len", get("seq_len"), 1)
        min_len = _int("min_len", get("min_len"), 1) if kind == "synthetic" else 1
        eval_seq_len = _int("eval_seq_len", get("eval_seq_len"), 0) or seq_len
        eval_min_len = _int("eval_min_len", get("eval_min_len"), 0) or min_len
        data_dir = _str("data_dir", get("data_dir")) or default_data_dir()
        return cls(kind=kind, task=_str("task", get("task")),
                   vocab_size=_int("vocab_size", get("vocab_size"), 1), seq_len=seq_len,
                   min_len=min_len, eval_seq_len=eval_seq_len, eval_min_len=eval_min_len,
                   num_train=_int("num_train", get("num_train"), 1),
                   num_eval=_int("num_eval", get("num_eval"), 0 if kind == "text" else 1),
                   text_path=_str("text_path", get("text_path")),
                   data_dir=os.path.abspath(os.path.expanduser(data_dir)))

    def __post_init__(self):
        if self.kind != "synthetic":
            return
        if self.task not in synthetic.TASKS:
            raise DataError(f"data.task={self.task!r} is not one of: {', '.join(synthetic.TASKS)}")
        if self.min_len > self.seq_len:
            raise DataError(f"data.min_len={self.min_len} exceeds data.seq_len={self.seq_len}")
        if self.eval_min_len > self.eval_seq_len:
            raise DataError(
                f"eval lengths are empty: min {self.eval_min_len} (data.eval_min_len, or "
                f"data.min_len when 0) exceeds max {self.eval_seq_len} (data.eval_seq_len, "
                "or data.seq_len when 0)")


def make_dataset(cfg, seed: int, fmt: str | None = None) -> Dataset:
    """Validates `cfg` (the `data` sub-config), then prepares or re-uses the dataset.

    `fmt` ('encoder' | 'decoder') is optional: given, the batch widths fit that format exactly
    (synthetic seq2seq tasks are twice as wide in the decoder format, [x, SEP, y]) and an
    unavailable format fails here, early. Omitted, widths fit every format the dataset offers.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DataError(f"seed={seed!r} must be a non-negative integer")
    if fmt is not None and fmt not in FORMATS:
        raise DataError(f"fmt={fmt!r} is not one of: {', '.join(FORMATS)}")
    c = DataConfig.from_config(cfg)
    if c.kind == "text":
        return text.make(c.text_path, c.seq_len, c.eval_seq_len, c.num_eval, c.data_dir, seed, fmt)
    return synthetic.make(c.task, c.vocab_size, c.min_len, c.seq_len, c.eval_min_len,
                          c.eval_seq_len, c.num_train, c.num_eval, c.data_dir, seed, fmt)

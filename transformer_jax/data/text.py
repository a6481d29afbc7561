"""Character-level language modelling: Tiny Shakespeare from its TFDS source, or a local file.

Why our own TFDS builders: TFDS's built-in `tiny_shakespeare` builder cannot be prepared without
TensorFlow (its `_split_generators` calls `tf.io.gfile`), and TensorFlow is deliberately not
installed. `TinyShakespeare` mirrors it (same URL, checksum and 90/5/5 train/validation/test split)
and writes array_record, which `as_data_source` reads without TensorFlow. `TextFile` does the same
for a local file read through `manual_dir`, split 90/10 train/test like nanoGPT, and cached under a
name derived from the file's content hash, so an edited file is never served stale.

Why probe the network first: offline, TFDS's downloader retries for about 200 s before failing.
We check in a few seconds whether the host is reachable and fail with a message naming
what works offline instead: a local file (main's --config.data.text_path, the sweep's
--text_path) or the file put where TFDS looks for a manual download.

Vocabulary: the sorted distinct characters of the whole text get ids 1..C; id 0 is pad.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import threading
import urllib.parse
import urllib.request
from typing import Iterator

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from transformer_jax.data import batching
from transformer_jax.data.batching import DataError

HUB_NAME = "tiny_shakespeare"
HUB_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
           "tinyshakespeare/input.txt")
HUB_FILE = tfds.download.checksums.UrlInfo(
    size=1115394, checksum="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    filename="input.txt")
TRAIN_FRACTION = 0.9
PROBE_TIMEOUT_S = 5.0


class _CharText(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """One example per split: the split's whole text (1 MB is read at once anyway)."""
    VERSION = tfds.core.Version("1.0.0")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self, description=__doc__,
            features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))

    def _generate_examples(self, text: str) -> Iterator:
        yield 0, {"text": text}


@dataclasses.dataclass
class TextFileConfig(tfds.core.BuilderConfig):
    filename: str = ""  # inside manual_dir


class TextFile(_CharText, skip_registration=True):
    """A local UTF-8 file; split 90/10 into 'train' and 'test'."""
    name = "tj_text_file"
    MANUAL_DOWNLOAD_INSTRUCTIONS = "Pass the file's directory as manual_dir."

    def _split_generators(self, dl_manager):
        text = (dl_manager.manual_dir / self.builder_config.filename).read_text(encoding="utf-8")
        cut = int(len(text) * TRAIN_FRACTION)
        return {"train": self._generate_examples(text[:cut]),
                "test": self._generate_examples(text[cut:])}


class TinyShakespeare(_CharText, skip_registration=True):
    """TFDS `tiny_shakespeare` without TensorFlow: same source, checksum and splits."""
    name = "tj_tiny_shakespeare"
    url_infos = {HUB_URL: HUB_FILE}  # checksum-validated; '<download_dir>/manual/input.txt' is used

    def _split_generators(self, dl_manager):
        text = epath.Path(dl_manager.download(HUB_URL)).read_text(encoding="utf-8")
        cut = int(len(text) * TRAIN_FRACTION)
        train, rest = text[:cut], text[cut:]
        half = int(len(rest) * 0.5)
        return {"train": self._generate_examples(train),
                "validation": self._generate_examples(rest[:half]),
                "test": self._generate_examples(rest[half:])}


def _reachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the URL's host (or the configured HTTPS proxy) opens within
    `timeout` seconds. Runs in a thread because name resolution ignores socket timeouts."""
    proxy = urllib.request.getproxies().get("https")
    target = urllib.parse.urlparse(proxy if proxy else url)
    address = (target.hostname, target.port or (443 if target.scheme == "https" else 80))
    opened = []

    def probe():
        try:
            socket.create_connection(address, timeout=timeout).close()
            opened.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return bool(opened)


def _read_splits(builder, splits: tuple[str, ...]) -> dict[str, str]:
    source = builder.as_data_source()
    return {s: source[s][0]["text"].decode("utf-8") for s in splits}


def hub_splits(data_dir: str) -> tuple[dict[str, str], str]:
    """{'train', 'validation', 'test'} texts of TFDS tiny_shakespeare, prepared under data_dir;
    and the prepared dataset's directory."""
    builder = TinyShakespeare(data_dir=data_dir, file_format="array_record")
    if not builder.is_prepared():
        manual = os.path.join(builder.data_dir_root, "downloads", "manual", HUB_FILE.filename)
        offline_msg = (f"data.text_path='' but could not download TFDS {HUB_NAME!r} (offline?); "
                       "give a local copy of the text: --config.data.text_path=FILE (the "
                       "sweep: --text_path=FILE), or put input.txt in "
                       f"{os.path.dirname(manual)}")
        if not os.path.isfile(manual) and not _reachable(HUB_URL):
            raise DataError(offline_msg)
        try:
            builder = batching.prepared(
                lambda: TinyShakespeare(data_dir=data_dir, file_format="array_record"),
                tfds.download.DownloadConfig(try_download_gcs=False))
        except (tfds.download.DownloadError, OSError) as e:
            raise DataError(f"{offline_msg}: {type(e).__name__}") from e
    return _read_splits(builder, ("train", "validation", "test")), str(builder.data_dir)


def read_text_file(path: str) -> tuple[str, str]:
    """(text, sha256 hex) of a local file; every problem is a one-line DataError."""
    p = epath.Path(os.path.expanduser(path))
    where = f"data.text_path={path!r}"
    if not p.exists():
        raise DataError(f"{where} does not exist")
    if p.is_dir():
        raise DataError(f"{where} is a directory, not a text file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise DataError(f"{where} cannot be read: {e.strerror or e}") from e
    if not raw:
        raise DataError(f"{where} is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{where} is not UTF-8 text (bad byte at offset {e.start})") from e
    return text, hashlib.sha256(raw).hexdigest()


def file_splits(path: str, text: str, digest: str, data_dir: str) -> tuple[dict[str, str], str]:
    """{'train', 'test'} texts of a local file through the TextFile builder; and its directory."""
    p = epath.Path(os.path.expanduser(path)).resolve()
    config = TextFileConfig(name=f"sha256-{digest[:16]}", filename=p.name,
                            description=f"first prepared from {p}")
    builder = batching.prepared(
        lambda: TextFile(config=config, data_dir=data_dir, file_format="array_record"),
        tfds.download.DownloadConfig(manual_dir=str(p.parent), try_download_gcs=False))
    splits = _read_splits(builder, ("train", "test"))
    if len(splits["train"]) + len(splits["test"]) != len(text):
        raise DataError(f"data.text_path={path!r}: cached dataset {builder.data_dir} does not "
                        "match the file; delete that directory")
    return splits, str(builder.data_dir)


def check_lengths(where: str, num_train: int, num_eval: int, seq_len: int, eval_len: int) -> None:
    """A split must hold at least one window of length+1 characters (inputs plus next target)."""
    if num_train < seq_len + 1 or num_eval < eval_len + 1:
        raise DataError(f"{where} is too short: {num_train} train / {num_eval} eval characters, "
                        f"need at least data.seq_len+1={seq_len + 1} / eval length+1="
                        f"{eval_len + 1}")


def encode(text: str, chars: np.ndarray) -> np.ndarray:
    """text -> int32 ids [len(text)]; chars: sorted uint32 code points, id = index + 1."""
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    return (np.searchsorted(chars, points) + 1).astype(np.int32)


@dataclasses.dataclass(frozen=True, eq=False)
class TextDataset(batching.Dataset):
    """Both splits as one id array each; train windows start at offsets drawn by
    np.random.default_rng([seed, step]). Eval: `num_eval_windows` non-overlapping windows spread
    evenly over the whole held-out split (`eval_window_starts`), in an interleaved order, so that
    the first batches of a periodic evaluation span the whole split too, not its beginning."""
    source: str
    chars: str             # the vocabulary: id i is chars[i - 1]
    train_ids: np.ndarray  # int32 [N_train]
    eval_ids: np.ndarray   # int32 [N_eval]
    num_eval: int          # eval windows, evenly spaced over the held-out split; 0 = all of them
    cache_dir: str

    @property
    def name(self) -> str:
        return "data.kind='text'"

    @property
    def num_eval_windows(self) -> int:
        available = (len(self.eval_ids) - 1) // self.eval_len  # non-overlapping windows
        return min(self.num_eval, available) if self.num_eval else available

    def eval_window_starts(self) -> np.ndarray:
        """Offsets into eval_ids of the eval windows, [num_eval_windows]: evenly spaced over the
        split's non-overlapping windows, in bit-reversed (van der Corput) order, so that any
        prefix of them is spread over the whole split."""
        available = (len(self.eval_ids) - 1) // self.eval_len
        chosen = np.linspace(0, available - 1, self.num_eval_windows).round().astype(np.int64)
        return chosen[interleaved_order(len(chosen))] * self.eval_len

    def train_batch(self, step: int, batch_size: int, fmt: str) -> batching.Batch:
        self.check_format(fmt)
        batch_size = batching.check_batch_size(batch_size)
        width = self.train_len
        starts = batching.batch_rng(self.seed, step).integers(
            0, len(self.train_ids) - width, size=batch_size)                  # [B]
        windows = np.lib.stride_tricks.sliding_window_view(self.train_ids, width + 1)[starts]
        return batching.lm_batch(windows)                                     # [B, L+1] -> [B, L]

    def eval_batches(self, batch_size: int, fmt: str) -> Iterator[batching.Batch]:
        self.check_format(fmt)
        batch_size = batching.check_batch_size(batch_size)
        starts = self.eval_window_starts()
        views = np.lib.stride_tricks.sliding_window_view(self.eval_ids, self.eval_len + 1)
        for first in range(0, len(starts), batch_size):
            idx, num_real = batching.fill_rows(starts[first:first + batch_size], batch_size)
            yield batching.zero_filler_weights(batching.lm_batch(views[idx]), num_real)

    def describe(self) -> str:
        return (f"text {self.source}: {len(self.chars)} chars (vocab {self.vocab_size} with pad), "
                f"train {len(self.train_ids)} / eval {len(self.eval_ids)} chars, window "
                f"{self.train_len} (eval {self.eval_len}, {self.num_eval_windows} windows), "
                f"cached at {self.cache_dir}")

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i) - 1] for i in np.asarray(ids).ravel() if int(i) > 0)


def interleaved_order(n: int) -> np.ndarray:
    """A permutation of range(n) whose every prefix is spread evenly over it: the indices sorted
    by their bit-reversed binary digits (0, n/2, n/4, 3n/4, ...)."""
    bits = max(int(n - 1).bit_length(), 1)
    reversed_bits = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)]
    return np.argsort(reversed_bits, kind="stable")


def make(text_path: str, seq_len: int, eval_len: int, num_eval: int, data_dir: str, seed: int,
         fmt: str | None) -> TextDataset:
    """Validated parameters in, dataset out. text_path '' means TFDS tiny_shakespeare."""
    if fmt == "encoder":
        raise DataError("fmt='encoder' is not available for data.kind='text' (a bidirectional "
                        "encoder would see its next-token targets); available: decoder")
    if text_path:
        text, digest = read_text_file(text_path)       # cheap checks before any preparation
        cut = int(len(text) * TRAIN_FRACTION)
        where = f"data.text_path={text_path!r}"
        check_lengths(where, cut, len(text) - cut, seq_len, eval_len)
        splits, cache_dir = file_splits(text_path, text, digest, data_dir)
        source = repr(text_path)
    else:
        splits, cache_dir = hub_splits(data_dir)
        text = "".join(splits.values())
        where = f"data.text_path='' (TFDS {HUB_NAME!r})"
        check_lengths(where, len(splits["train"]), len(splits["test"]), seq_len, eval_len)
        source = f"TFDS {HUB_NAME!r} (train/test)"
    chars = sorted(set(text))
    points = np.array([ord(c) for c in chars], np.uint32)
    return TextDataset(
        vocab_size=len(chars) + 1, num_classes=0, head="token", train_len=seq_len,
        eval_len=eval_len, formats=("decoder",), fmt=fmt, seed=seed, source=source,
        chars="".join(chars), train_ids=encode(splits["train"], points),
        eval_ids=encode(splits["test"], points), num_eval=num_eval, cache_dir=cache_dir)

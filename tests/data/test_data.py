"""Tests for transformer_jax.data: task correctness, batch formats, determinism, caching, errors.

Every test prepares its datasets under a pytest tmp directory, never under ~/.cache.
"""
import hashlib
import os
import pathlib
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from transformer_jax import data

REPO = pathlib.Path(__file__).resolve().parents[2]
SHAKESPEARE = os.environ.get("TJ_SHAKESPEARE",
                             str(REPO.parent / "shared" / "data" / "tinyshakespeare.txt"))
UNREACHABLE_PROXY = "http://127.0.0.1:9"  # refuses at once: makes the machine look offline
KEYS = ("inputs", "targets", "weights", "padding_mask")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.fixture(scope="module")
def shakespeare():
    assert os.path.isfile(SHAKESPEARE), f"no Tiny Shakespeare at {SHAKESPEARE}; set TJ_SHAKESPEARE"
    return SHAKESPEARE


def config(data_dir, **overrides):
    fields = dict(data.default_config().to_dict(), data_dir=data_dir, num_train=2000, num_eval=300,
                  seq_len=12, min_len=1)
    return ml_collections.ConfigDict(dict(fields, **overrides))


def lengths_of(batch):
    return batch["padding_mask"].sum(axis=1)


def check_types(batch, width, pooled=False):
    assert set(batch) == set(KEYS)
    b = len(batch["inputs"])
    assert batch["inputs"].shape == batch["padding_mask"].shape == (b, width)
    assert batch["targets"].shape == batch["weights"].shape == ((b,) if pooled else (b, width))
    assert batch["inputs"].dtype == batch["targets"].dtype == np.int32
    assert batch["weights"].dtype == np.float32 and batch["padding_mask"].dtype == bool
    # right padding, real tokens first: the fused attention path masks by these lengths alone
    real = batch["padding_mask"]
    assert np.array_equal(real, np.arange(width)[None, :] < lengths_of(batch)[:, None])


def digest(batch):
    raw = b"".join(np.ascontiguousarray(batch[k]).tobytes() for k in KEYS)
    return hashlib.sha256(raw).hexdigest()


# --- synthetic tasks -------------------------------------------------------------------------

ANSWERS = {"copy": lambda x: x, "reverse": lambda x: x[::-1], "sort": np.sort}


@pytest.mark.parametrize("task", ["copy", "reverse", "sort"])
def test_seq2seq_targets_encoder(data_dir, task):
    ds = data.make_dataset(config(data_dir, task=task), seed=0, fmt="encoder")
    assert (ds.vocab_size, ds.num_classes, ds.head, ds.train_len) == (16 + 2, 0, "token", 12)
    batch = ds.train_batch(0, 64, "encoder")
    check_types(batch, ds.train_len)
    for x, y, w, m in zip(*(batch[k] for k in KEYS)):
        n = m.sum()
        assert 1 <= n <= 12 and m[:n].all() and not m[n:].any()
        assert ((x[:n] >= 1) & (x[:n] <= 16)).all() and not x[n:].any() and not y[n:].any()
        np.testing.assert_array_equal(y[:n], ANSWERS[task](x[:n]))
        np.testing.assert_array_equal(w, m.astype(np.float32))


@pytest.mark.parametrize("task", ["copy", "reverse", "sort"])
def test_decoder_format_weights_only_on_answer(data_dir, task):
    ds = data.make_dataset(config(data_dir, task=task), seed=0, fmt="decoder")
    assert ds.train_len == 2 * 12
    sep = ds.vocab_size - 1
    batch = ds.train_batch(1, 64, "decoder")
    check_types(batch, ds.train_len)
    for x, y, w, m in zip(*(batch[k] for k in KEYS)):
        n = m.sum() // 2
        assert m.sum() == 2 * n and m[:2 * n].all()
        seq = np.concatenate([x[:2 * n], y[2 * n - 1:2 * n]])      # the full [x, SEP, y]
        assert seq[n] == sep and (seq != sep).sum() == 2 * n
        np.testing.assert_array_equal(seq[n + 1:], ANSWERS[task](seq[:n]))
        np.testing.assert_array_equal(y[:2 * n - 1], x[1:2 * n])        # next token
        assert not x[2 * n:].any() and not y[2 * n:].any()
        np.testing.assert_array_equal(np.flatnonzero(w), np.arange(n, 2 * n))  # only y targets
        np.testing.assert_array_equal(y[w > 0], ANSWERS[task](x[:n]))


def test_order_labels(data_dir):
    ds = data.make_dataset(config(data_dir, task="order", min_len=2), seed=0)
    assert (ds.head, ds.num_classes, ds.formats, ds.train_len) == ("pooled", 2, ("encoder",), 12)
    batch = ds.train_batch(0, 256, "encoder")
    check_types(batch, ds.train_len, pooled=True)
    for x, label, w, m in zip(*(batch[k] for k in KEYS)):
        real = x[:m.sum()]
        assert (real == 1).sum() == 1 and (real == 2).sum() == 1 and (real >= 1).all()
        assert label == int(np.argmax(real == 1) < np.argmax(real == 2)) and w == 1.0
    labels = np.concatenate([b["targets"][b["weights"] > 0]
                             for b in ds.eval_batches(128, "encoder")])
    assert len(labels) == 300 and 0.4 < labels.mean() < 0.6


def test_order_not_available_in_decoder_format(data_dir):
    with pytest.raises(data.DataError, match=r"data.task='order'.*copy, reverse, sort"):
        data.make_dataset(config(data_dir, task="order", min_len=2), seed=0, fmt="decoder")
    ds = data.make_dataset(config(data_dir, task="order", min_len=2), seed=0)
    with pytest.raises(data.DataError,
                       match="fmt='decoder' is not available for data.task='order'"):
        ds.train_batch(0, 4, "decoder")


def test_widths_follow_format(data_dir):
    both = data.make_dataset(config(data_dir, task="reverse", eval_seq_len=20), seed=0)
    assert (both.train_len, both.eval_len, both.formats) == (24, 40, ("encoder", "decoder"))
    check_types(both.train_batch(0, 8, "encoder"), 24)       # right-padded to the common width
    enc = data.make_dataset(config(data_dir, task="reverse", eval_seq_len=20), seed=0,
                            fmt="encoder")
    assert (enc.train_len, enc.eval_len) == (12, 20)
    with pytest.raises(data.DataError, match="fmt='decoder'"):
        enc.train_batch(0, 8, "decoder")


def test_train_batches_are_a_pure_function_of_seed_and_step(data_dir):
    cfg = config(data_dir, task="sort")
    a, b = data.make_dataset(cfg, seed=3), data.make_dataset(cfg, seed=3)
    later_first = [digest(b.train_batch(s, 32, "decoder")) for s in (9, 5, 0)][::-1]
    assert [digest(a.train_batch(s, 32, "decoder")) for s in (0, 5, 9)] == later_first
    assert digest(a.train_batch(1, 32, "decoder")) != digest(a.train_batch(2, 32, "decoder"))
    other_seed = data.make_dataset(cfg, seed=4)
    assert (digest(a.train_batch(1, 32, "decoder"))
            != digest(other_seed.train_batch(1, 32, "decoder")))
    # A fresh process (a resumed run) re-creates the same batch.
    code = ("import hashlib, sys, ml_collections; from transformer_jax import data;"
            "cfg = ml_collections.ConfigDict(eval(sys.argv[1]));"
            "b = data.make_dataset(cfg, seed=3).train_batch(5, 32, 'decoder');"
            f"print(hashlib.sha256(b''.join(b[k].tobytes() for k in {KEYS!r})).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code, repr(cfg.to_dict())], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()[-1]
    assert out == digest(a.train_batch(5, 32, "decoder"))


def test_eval_set_fixed_padded_and_longer(data_dir):
    cfg = config(data_dir, task="copy", seq_len=8, min_len=2, eval_seq_len=16, num_eval=250)
    ds = data.make_dataset(cfg, seed=0, fmt="encoder")
    assert (ds.train_len, ds.eval_len) == (8, 16)
    batches = list(ds.eval_batches(100, "encoder"))
    assert [digest(b) for b in batches] == [digest(b) for b in ds.eval_batches(100, "encoder")]
    assert len(batches) == 3
    for b in batches:
        check_types(b, 16)
    last = batches[-1]
    assert (last["weights"][:50].sum(1) == lengths_of(last)[:50]).all()
    assert not last["weights"][50:].any() and last["padding_mask"][50:].any(axis=1).all()
    eval_lengths = np.concatenate([lengths_of(b)[b["weights"].sum(1) > 0] for b in batches])
    assert len(eval_lengths) == 250 and eval_lengths.min() == 2 and eval_lengths.max() == 16
    train_lengths = np.concatenate([lengths_of(ds.train_batch(s, 256, "encoder"))
                                    for s in range(4)])
    assert train_lengths.min() == 2 and train_lengths.max() == 8
    unseen = data.make_dataset(dict(cfg.to_dict(), eval_min_len=9), seed=0, fmt="encoder")
    lengths = np.concatenate([lengths_of(b) for b in unseen.eval_batches(250, "encoder")])
    assert lengths.min() == 9 and lengths.max() == 16


def test_synthetic_prepared_once_and_keyed_by_parameters(tmp_path):
    cfg = config(str(tmp_path), task="reverse", num_train=20000, num_eval=1000, seq_len=32)
    ds = data.make_dataset(cfg, seed=0)
    files = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert any(p.name.endswith("array_record-00000-of-00001") for p in files)
    again = data.make_dataset(cfg, seed=0)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == files
    assert digest(again.train_batch(0, 8, "encoder")) == digest(ds.train_batch(0, 8, "encoder"))
    # Decoded once per process and shared, read-only, by every run (any seed) that uses it.
    other_seed = data.make_dataset(cfg, seed=1)
    assert other_seed.train.x is ds.train.x and other_seed.eval.y is ds.eval.y
    assert not ds.train.x.flags.writeable
    with pytest.raises(ValueError):
        ds.train.x[0, 0] = 1
    data.make_dataset(config(str(tmp_path), task="reverse", seq_len=16), seed=0)
    dirs = sorted(p.name for p in (tmp_path / "tj_synthetic").iterdir())
    assert len(dirs) == 2 and all(d.startswith("reverse-v16-") for d in dirs)


def test_a_builder_made_before_another_process_prepared_is_made_again(tmp_path):
    """Two runs started together on a fresh cache: the second made its builder before the first
    finished preparing (so it read no dataset info), then found the dataset there and skipped.
    `prepared` must hand back a builder that knows the splits (seen as KeyError: 'train')."""
    import tensorflow_datasets as tfds

    from transformer_jax.data import batching, synthetic

    cfg = synthetic.SyntheticConfig.create(task="copy", num_symbols=8, min_len=1, max_len=4,
                                           eval_min_len=1, eval_max_len=4, num_train=10,
                                           num_eval=5)
    make = lambda: synthetic.SyntheticTasks(config=cfg, data_dir=str(tmp_path),  # noqa: E731
                                            file_format="array_record")
    download = tfds.download.DownloadConfig(try_download_gcs=False)
    stale = make()  # made before the other process finished
    make().download_and_prepare(download_config=download)  # the other process
    assert not stale.info.splits  # what the late builder knows
    builders = iter([stale])
    builder = batching.prepared(lambda: next(builders, None) or make(), download)
    source = builder.as_data_source()
    assert len(source["train"]) == 10 and len(source["test"]) == 5


# --- text --------------------------------------------------------------------------------------

def text_config(data_dir, path, **overrides):
    return config(data_dir, kind="text", text_path=path, **overrides)


def test_shakespeare_file(data_dir, shakespeare):
    ds = data.make_dataset(text_config(data_dir, shakespeare, seq_len=64, num_eval=5000), seed=0)
    text = pathlib.Path(shakespeare).read_text()
    assert (ds.vocab_size, ds.head, ds.formats, ds.train_len) == (65 + 1, "token", ("decoder",), 64)
    assert (len(ds.train_ids), len(ds.eval_ids)) == (1_003_854, 111_540)
    assert ds.decode(ds.eval_ids[:40]) == text[1_003_854:1_003_894]
    batch = ds.train_batch(0, 16, "decoder")
    check_types(batch, 64)
    np.testing.assert_array_equal(batch["inputs"][:, 1:], batch["targets"][:, :-1])
    assert batch["weights"].all() and batch["padding_mask"].all()
    for row_in, row_out in zip(batch["inputs"], batch["targets"]):
        assert ds.decode(row_in) + ds.decode(row_out)[-1] in text[:1_003_854]
    eval_batches = list(ds.eval_batches(512, "decoder"))
    windows = np.concatenate([b["inputs"][b["weights"][:, 0] > 0] for b in eval_batches])
    every = (111_540 - 1) // 64  # every non-overlapping window of the held-out split
    assert len(windows) == every
    held_out = text[1_003_854:]
    decoded = [ds.decode(w) for w in windows]
    assert sorted(decoded) == sorted(held_out[i * 64:(i + 1) * 64] for i in range(every))
    second = 1024  # interleaved: bit-reversed order of 1,741 windows (11 bits): 0, 1024, 512, ...
    assert decoded[1] == held_out[second * 64:(second + 1) * 64]
    again = data.make_dataset(text_config(data_dir, shakespeare, seq_len=64), seed=0)
    assert again.num_eval_windows == 300  # data.num_eval windows, evenly spaced over the split
    starts = np.sort(again.eval_window_starts())
    assert starts[0] == 0 and starts[-1] == (every - 1) * 64 and len(set(starts)) == 300
    assert np.ptp(np.diff(starts)) <= 64  # even spacing, up to rounding to a window
    first_batch = again.eval_window_starts()[:16]  # what a 1-batch periodic evaluation reads
    assert first_batch.min() < 0.1 * every * 64 and first_batch.max() > 0.85 * every * 64
    whole = data.make_dataset(text_config(data_dir, shakespeare, seq_len=64, num_eval=0), seed=0)
    assert whole.num_eval_windows == every  # 0: the whole held-out split
    assert digest(ds.train_batch(7, 16, "decoder")) == digest(again.train_batch(7, 16, "decoder"))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 300, 1742])
def test_interleaved_order_is_a_permutation_whose_prefixes_spread(n):
    from transformer_jax.data.text import interleaved_order
    order = interleaved_order(n)
    assert sorted(order) == list(range(n))
    for k in (2, 4, 16):
        if k <= n // 4:  # every prefix of k covers the range: no gap over ~2/k of it
            gaps = np.diff(np.sort(np.concatenate([order[:k], [0, n - 1]])))
            assert gaps.max() <= 2 * n / k + 1, (n, k, gaps.max())


def test_small_and_unicode_text(tmp_path):
    path = tmp_path / "tiny.txt"
    body = "héllo wörld ☃ naïve\n" * 20
    path.write_text(body, encoding="utf-8")
    ds = data.make_dataset(text_config(str(tmp_path / "tfds"), str(path), seq_len=8,
                                       eval_seq_len=16, num_eval=2), seed=0)
    assert ds.chars == "".join(sorted(set(body))) and ds.vocab_size == len(set(body)) + 1
    assert ds.decode(ds.train_ids) == body[:int(len(body) * 0.9)]
    check_types(ds.train_batch(3, 4, "decoder"), 8)
    batches = list(ds.eval_batches(4, "decoder"))
    assert len(batches) == 1 and batches[0]["inputs"].shape == (4, 16)
    np.testing.assert_array_equal(batches[0]["weights"].sum(1), [16, 16, 0, 0])
    path.write_text(body.upper(), encoding="utf-8")  # edited file: never served from a stale cache
    edited = data.make_dataset(text_config(str(tmp_path / "tfds"), str(path), seq_len=8), seed=0)
    assert edited.decode(edited.train_ids).startswith("HÉLLO")


@pytest.fixture
def probe_only(monkeypatch):
    """Offline, the hub dataset must fail after one reachability probe (which gives up after
    text.PROBE_TIMEOUT_S), never reaching TFDS's downloader, which retries for minutes: what
    "fails fast" means, checked without a wall clock. Yields the probe's results."""
    import tensorflow_datasets as tfds

    from transformer_jax.data import text

    def download(*args, **kwargs):
        raise AssertionError("TFDS's downloader was asked to download while offline")

    for name in ("download", "download_and_extract"):
        monkeypatch.setattr(tfds.download.DownloadManager, name, download)
    results, probe = [], text._reachable

    def recorded(*args, **kwargs):
        results.append(probe(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(text, "_reachable", recorded)
    yield results
    assert results == [False]  # probed once, found unreachable


def test_hub_offline_fails_fast_naming_text_path(tmp_path, monkeypatch, probe_only):
    monkeypatch.setenv("https_proxy", UNREACHABLE_PROXY)
    monkeypatch.setenv("HTTPS_PROXY", UNREACHABLE_PROXY)
    with pytest.raises(data.DataError) as err:
        data.make_dataset(text_config(str(tmp_path), ""), seed=0)
    message = str(err.value)
    assert "\n" not in message and "tiny_shakespeare" in message and "data.text_path" in message
    # what works offline, for each command: main's override and the sweep's own flag
    assert "--config.data.text_path=FILE" in message and "the sweep: --text_path=FILE" in message


def test_hub_offline_fails_fast_without_proxy(tmp_path, probe_only):
    """This machine has no route to the hub: the direct probe must also fail, and decide."""
    with pytest.raises(data.DataError, match="data.text_path"):
        data.make_dataset(text_config(str(tmp_path), ""), seed=0)


def test_hub_from_manually_downloaded_file(tmp_path, monkeypatch, shakespeare):
    """The TFDS tiny_shakespeare path itself (checksum-validated, train/test as TFDS splits)."""
    monkeypatch.setenv("https_proxy", UNREACHABLE_PROXY)
    manual = tmp_path / "downloads" / "manual"
    manual.mkdir(parents=True)
    (manual / "input.txt").write_bytes(pathlib.Path(shakespeare).read_bytes())
    ds = data.make_dataset(text_config(str(tmp_path), "", seq_len=32), seed=0)
    assert ds.vocab_size == 66 and (len(ds.train_ids), len(ds.eval_ids)) == (1_003_854, 55_770)
    assert "tiny_shakespeare" in ds.describe()


# --- errors ------------------------------------------------------------------------------------

def _bad_files(tmp_path):
    tmp_path.mkdir()
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 100)
    (tmp_path / "short.txt").write_text("abc" * 10)
    return tmp_path


ERRORS = [
    (dict(kind="foo"), "data.kind='foo' is not one of: synthetic, text"),
    (dict(task="foo"), "data.task='foo' is not one of: copy, reverse, sort, order"),
    (dict(seq_len=0), "data.seq_len=0 must be a positive integer"),
    (dict(seq_len="32"), "data.seq_len='32' must be an integer"),
    (dict(num_train=0), "data.num_train=0"),
    (dict(num_eval=-1), "data.num_eval=-1"),
    (dict(vocab_size=0), "data.vocab_size=0"),
    (dict(min_len=0), "data.min_len=0"),
    (dict(min_len=13), "data.min_len=13 exceeds data.seq_len=12"),
    (dict(eval_seq_len=-1), "data.eval_seq_len=-1"),
    (dict(eval_min_len=20, eval_seq_len=16), "min 20 (data.eval_min_len"),
    (dict(task="order", vocab_size=2), "data.vocab_size=2 is too small for data.task='order'"),
    (dict(task="order", min_len=1), "data.min_len=1"),
    (dict(kind="text", text_path="{d}/missing.txt"),
     "data.text_path='{d}/missing.txt' does not exist"),
    (dict(kind="text", text_path="{d}"), "data.text_path='{d}' is a directory"),
    (dict(kind="text", text_path="{d}/empty.txt"), "data.text_path='{d}/empty.txt' is empty"),
    (dict(kind="text", text_path="{d}/latin1.txt"),
     "data.text_path='{d}/latin1.txt' is not UTF-8 text"),
    (dict(kind="text", text_path="{d}/short.txt"),
     "data.text_path='{d}/short.txt' is too short: 27 train / 3 eval characters, "
     "need at least data.seq_len+1=13"),
]


@pytest.mark.parametrize("overrides, expected", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_config_errors_are_one_line_and_early(tmp_path, overrides, expected):
    files = _bad_files(tmp_path / "files")
    overrides = {k: v.format(d=files) if isinstance(v, str) else v for k, v in overrides.items()}
    tfds_dir = tmp_path / "tfds"
    with pytest.raises(data.DataError) as err:
        data.make_dataset(config(str(tfds_dir), **overrides), seed=0)
    message = str(err.value)
    assert expected.format(d=files) in message and "\n" not in message
    assert not tfds_dir.exists()  # failed before preparing anything


def test_call_errors(data_dir, shakespeare):
    with pytest.raises(data.DataError, match="seed=-1"):
        data.make_dataset(config(data_dir), seed=-1)
    with pytest.raises(data.DataError, match="fmt='rnn' is not one of: encoder, decoder"):
        data.make_dataset(config(data_dir), seed=0, fmt="rnn")
    with pytest.raises(data.DataError, match="fmt='encoder' is not available for data.kind='text'"):
        data.make_dataset(text_config(data_dir, shakespeare), seed=0, fmt="encoder")
    ds = data.make_dataset(config(data_dir), seed=0)
    with pytest.raises(data.DataError, match="step=-1"):
        ds.train_batch(-1, 8, "encoder")
    with pytest.raises(data.DataError, match="batch_size=0"):
        ds.train_batch(0, 0, "encoder")

"""restore_variant keeps the variants it restored last: the analyses of one report read each
checkpoint once, a new checkpoint (or config) is read afresh, and the cache stays bounded."""
from __future__ import annotations

import os

import numpy as np
import pytest

from transformer_jax.studies.analysis import restore


@pytest.fixture
def restores(monkeypatch):
    """Each real restore recorded (its run dirs), returning a Restored of 1 KiB of parameters."""
    calls = []

    def fake(run_dirs):
        calls.append(dict(run_dirs))
        return restore.Restored(run=None, data=None, seeds=tuple(run_dirs), graphdef=None,
                                params={"w": np.zeros(256, np.float32)})

    monkeypatch.setattr(restore, "_RESTORED", type(restore._RESTORED)())
    monkeypatch.setattr(restore, "_restore", fake)
    return calls


def run_dir(tmp_path, name, steps=(10,)):
    path = tmp_path / name / "seed_0"
    for step in steps:
        (path / "checkpoints" / str(step)).mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def test_the_same_checkpoints_are_restored_once(tmp_path, restores):
    dirs = {0: run_dir(tmp_path, "a")}
    first = restore.restore_variant(dirs)
    assert restore.restore_variant(dict(dirs)) is first and len(restores) == 1
    restore.restore_variant({0: run_dir(tmp_path, "b")})
    assert len(restores) == 2


def test_a_new_checkpoint_or_config_is_read_afresh(tmp_path, restores):
    path = run_dir(tmp_path, "a")
    restore.restore_variant({0: path})
    (path / "checkpoints" / "20").mkdir()  # trained on
    restore.restore_variant({0: path})
    assert len(restores) == 2
    stat = (path / "config.json").stat()
    os.utime(path / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    restore.restore_variant({0: path})
    assert len(restores) == 3


def test_the_cache_is_bounded_by_count_and_bytes(tmp_path, restores, monkeypatch):
    paths = [run_dir(tmp_path, f"v{i}") for i in range(restore.KEEP_RESTORED + 1)]
    for path in paths:
        restore.restore_variant({0: path})
    assert len(restore._RESTORED) == restore.KEEP_RESTORED
    restore.restore_variant({0: paths[0]})  # the oldest was dropped: restored again
    assert len(restores) == len(paths) + 1
    monkeypatch.setattr(restore, "KEEP_BYTES", 2 * 1024)  # two variants' parameters
    restore.restore_variant({0: run_dir(tmp_path, "big")})
    assert len(restore._RESTORED) == 2

"""What a sweep writes beside a study's runs (studies/publish.py), in this process: git is left
out (provenance.git answers as outside a checkout), so no process starts and the fast lane
reaches it; the sweep tests publish with git."""
from __future__ import annotations

import json

import pytest

from tiny_study import tiny_study
from transformer_jax.studies import provenance, publish

WRITTEN = {"README.md", "curves.png", "preregistration.json", "provenance.json", "summary.csv",
           "summary.md", "verdict.json", "verdict.md"}


def _runs(study) -> dict:
    """One finished seed per variant, as an evaluation-only study passes its measurements."""
    return {(variant, 0): {"status": {"state": "finished", "step": 6}, "curves": {
        "eval/loss": [(3, 2.0), (6, 1.0 if variant == "scaled" else 2.0)],
        "eval/accuracy": [(3, 0.2), (6, 0.5)]}} for variant in study.variants}


@pytest.fixture
def outside_a_checkout(monkeypatch):
    monkeypatch.setattr(provenance, "git", lambda directory, *args: None)


def test_publish_writes_the_report_the_records_and_the_page(tmp_path, outside_a_checkout):
    study = tiny_study(tmp_path / "data")
    root = tmp_path / "study"
    root.mkdir()
    publish.publish(study, root, experiment=None, size="tiny", shard=(0, 1), trained=True,
                    runs=_runs(study))
    assert WRITTEN <= {p.name for p in root.iterdir()}
    assert "scaled is not worse" in (root / "verdict.md").read_text()


def test_a_sweep_that_trained_nothing_keeps_the_provenance_byte_for_byte(tmp_path,
                                                                         outside_a_checkout):
    study = tiny_study(tmp_path / "data")
    root = tmp_path / "study"
    root.mkdir()
    publish.publish(study, root, experiment=None, size="tiny", shard=(0, 1), trained=True,
                    runs=_runs(study))
    record = json.loads((root / provenance.FILE).read_text())
    record["code"]["commit"] = "c0ffee1" * 5 + "c0ff1"  # as if an earlier commit trained them
    (root / provenance.FILE).write_text(json.dumps(record))
    before = (root / provenance.FILE).read_bytes()
    publish.publish(study, root, experiment=None, size="tiny", shard=(0, 1), trained=False,
                    runs=_runs(study))
    assert (root / provenance.FILE).read_bytes() == before
    assert json.loads((root / "preregistration.json").read_text())["fingerprint"] == \
        study.fingerprint()  # every report writes the record its verdict was judged with
    publish.publish(study, root, experiment=None, size="tiny", shard=(0, 1), trained=True,
                    runs=_runs(study))
    assert "c0ffee1" not in (root / provenance.FILE).read_text()  # this sweep trained them

"""What a sweep writes beside a study's runs (studies/publish.py), in this process: git is left
out (provenance.git answers as outside a checkout), so no process starts and the fast lane
reaches it; the sweep tests publish with git."""
from __future__ import annotations

import json

import pytest

from tiny_study import tiny_study
from transformer_jax.studies import publish
from transformer_jax.studies.records import provenance

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


def _published(tmp_path, size: str, study=None, runs=None):
    """The study directory of tiny_study (or `study`) published at `size`."""
    study = study or tiny_study(tmp_path / "data")
    root = tmp_path / "study"
    root.mkdir()
    publish.publish(study, root, experiment=None, size=size, shard=(0, 1), trained=True,
                    runs=runs or _runs(study))
    return root


def test_a_verdict_judged_at_tiny_says_so_everywhere_it_appears(tmp_path, outside_a_checkout):
    """The record, verdict.md, the page, the index cell and the terminal all name the size."""
    from transformer_jax.studies.records import record
    from transformer_jax.studies.render import verdict_text
    from transformer_jax.studies.run import terminal

    root = _published(tmp_path, "tiny")
    found = record.read(root / record.FILE)
    assert found["size"] == "tiny"
    words = "tiny: a smoke run, not evidence"
    assert words in (root / "verdict.md").read_text()
    assert words in (root / "README.md").read_text()
    assert words in verdict_text.verdict_cell(found)
    read = terminal.read_verdict(root / record.FILE)
    assert words in read.overall and words in read.short


def test_a_verdict_at_the_default_size_names_no_size(tmp_path, outside_a_checkout):
    from transformer_jax.studies.records import record
    from transformer_jax.studies.render import verdict_text

    root = _published(tmp_path, "default")
    found = record.read(root / record.FILE)
    assert found["size"] == "default" and verdict_text.size_words(found) == ""
    assert "--size=" not in (root / "verdict.md").read_text()


def test_an_evaluation_only_study_gets_no_curves_and_names_its_units_compactly(
        tmp_path, outside_a_checkout):
    import dataclasses

    from transformer_jax.studies.records import record

    study = dataclasses.replace(tiny_study(tmp_path / "data", seeds=tuple(range(12))),
                                evaluate=lambda s, r: {})
    runs = {(v, s): {"status": {"state": "finished", "step": 0}, "curves": {
        "eval/loss": [(0, 1.0 + 0.01 * s if v == "scaled" else 2.0 + 0.01 * s)],
        "eval/accuracy": [(0, 0.5)]}} for v in study.variants for s in study.seeds}
    root = _published(tmp_path, "default", study, runs)
    assert record.read(root / record.FILE)["evaluation_only"] is True
    assert not (root / "curves.png").exists()
    page, verdict = (root / "README.md").read_text(), (root / "verdict.md").read_text()
    assert "## Curves" not in page and "curves.png" not in page + verdict
    assert "12 units of evaluation (0–11)" in verdict and "[0, 1, 2" not in page + verdict
    assert "![forest plot" in page and (root / "forest.png").is_file()

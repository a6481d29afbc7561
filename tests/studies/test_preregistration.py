"""Pre-registration the tool enforces: every committed verdict carries the fingerprint of the
design it was judged with, which must still be its experiment file's; that design was committed
before the study's first results, or every later move of it is named by an amendment."""
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from transformer_jax.studies.records import history, preregistration
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
RESULTS, EXPERIMENTS = REPO / "experiments" / "results", REPO / "experiments"


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_every_committed_verdict_was_judged_with_todays_design():
    assert preregistration.check_results(RESULTS, EXPERIMENTS, REPO) == []


def _changed(study, **what):
    return dataclasses.replace(study, **what).fingerprint()


def test_the_fingerprint_moves_with_every_part_of_the_design():
    study = load_study(EXPERIMENTS / "scaling.py", "tiny")
    first = study.expectations[0]
    base = study.base.copy_and_resolve_references()
    base.train.num_steps += 1
    moved = [
        _changed(study, expectations=(dataclasses.replace(first, margin=first.margin + 0.01),
                                      *study.expectations[1:])),
        _changed(study, expectations=(dataclasses.replace(first, metric="eval/loss"),
                                      *study.expectations[1:])),
        _changed(study, claim=study.claim + "."),
        _changed(study, seeds=study.seeds[:-1]),
        _changed(study, metrics=study.metrics[:-1]),
        _changed(study, variants={**study.variants, "extra": {"model.num_layers": 1}}),
        _changed(study, base=base),
    ]
    assert study.fingerprint() not in moved and len(set(moved)) == len(moved)


def test_the_fingerprint_ignores_the_machines_paths_and_the_amendments():
    study = load_study(EXPERIMENTS / "lm_positions.py", "tiny")
    base = study.base.copy_and_resolve_references()
    base.data.data_dir, base.data.text_path = "/elsewhere/data", "/elsewhere/text.txt"
    assert _changed(study, base=base) == study.fingerprint()
    assert _changed(study, amendments=("a note",)) == study.fingerprint()


@pytest.fixture
def results_copy(tmp_path):
    """experiments/ and its results copied, to plant errors in."""
    return _copy_experiments(tmp_path)


def _copy_experiments(tmp_path: Path) -> Path:
    for folder in ("experiments", "configs"):  # experiment files load configs/ beside them
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "experiments"


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_threshold_moved_after_the_run_is_found(results_copy):
    experiment = results_copy / "positions.py"
    text = experiment.read_text()
    planted = '"encoder_none", Comparison.AT_MOST, 0.6, **BLIND)'
    assert text.count(planted) == 1
    experiment.write_text(text.replace(planted, planted.replace("0.6", "0.65")))
    problems = preregistration.check_results(results_copy / "results", results_copy, REPO)
    assert [p for p in problems if p.startswith("positions: judged with fingerprint")]


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_verdict_without_its_record_is_found(results_copy):
    results = results_copy / "results"
    (results / f"scaling_{preregistration.FILE}").unlink()
    problems = preregistration.check_results(results, results_copy, REPO)
    assert any(p.startswith("scaling: no scaling_preregistration.json") for p in problems)


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_every_study_names_each_move_of_its_design_after_its_first_results():
    """The history rule (docs/verdicts.md) on this repository's history, with today's designs;
    the scratch-repository cases are in test_preregistration_history.py."""
    walk = history.Repository(REPO)
    problems = []
    for name, size in _committed_studies():
        study = load_study(EXPERIMENTS / f"{name}.py", size)
        past = walk.history(name, size, study.fingerprint())
        problems += preregistration.history_problems(past, tuple(study.amendments))
    assert problems == []


def _committed_studies() -> list[tuple[str, str]]:
    """(name, size) of every committed verdict."""
    names = [p.name[:-len("_verdict.json")] for p in sorted(RESULTS.glob("*_verdict.json"))]
    return [(n, json.loads((RESULTS / f"{n}_{preregistration.FILE}").read_text())["size"])
            for n in names]


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_the_page_shows_the_fingerprint_and_both_commits(tmp_path):
    from transformer_jax.studies.records import provenance
    from transformer_jax.studies.render import pages

    results = _copy_experiments(tmp_path) / "results"
    study = load_study(EXPERIMENTS / "positions.py", "default")
    record = dict(preregistration.record(study, "default", None), experiment="positions.py",
                  expectations_commit="c" * 40, experiment_changed_since=False)
    preregistration.write(results / f"positions_{preregistration.FILE}", record)
    produced = provenance.describe(
        study="positions", suite="main", size="default", seeds=(0, 1, 2), runs=6, shard=(0, 1),
        cpuinfo="", cpus=2, system="Linux", stack={}, commit="d" * 40, dirty=False, date="now")
    provenance.write(results / f"positions_{provenance.FILE}", produced)
    (entry,) = [e for e in pages.results_entries(results) if e.files.name == "positions"]
    page = pages.study_page(entry)  # the page alone: drawing every study's figures adds nothing
    assert f"fingerprint `{study.fingerprint()}` of `positions.py` at `--size=default`" in page
    assert "- **Design and first results commits:** not read (the experiment file is not in a " \
        "git checkout)." in page  # a copy of experiments/
    assert f"- **Results from the code at:** `{'d' * 40}`." in page
    assert "- fa0d73b: 'encoder with ALiBi beats no positions" in page  # the amendment


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_design_changed_after_the_run_and_rejudged_is_found(results_copy):
    """Moving a threshold, then re-writing the report (which records today's fingerprint), still
    fails: no commit holds that design, so it was not registered before any results."""
    experiment = results_copy / "positions.py"
    planted = '"encoder_none", Comparison.AT_MOST, 0.6, **BLIND)'
    experiment.write_text(experiment.read_text().replace(planted, planted.replace("0.6", "0.65")))
    record_path = results_copy / "results" / f"positions_{preregistration.FILE}"
    record = json.loads(record_path.read_text())
    record["fingerprint"] = load_study(experiment, record["size"]).fingerprint()
    record_path.write_text(json.dumps(record))
    problems = preregistration.check_results(results_copy / "results", results_copy, REPO)
    assert [p for p in problems if p.startswith("positions: no commit holds "
                                                 "experiments/positions.py's design of today")]
    assert not [p for p in problems if p.startswith("positions: judged with fingerprint")]


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_every_page_shows_its_design_commit_first_results_commit_and_amendments():
    from transformer_jax.studies.render import pages

    walk = history.Repository(REPO)
    for entry in [e for e in pages.results_entries(RESULTS) if e.ran]:
        name = entry.files.name
        registered = preregistration.read(RESULTS / f"{name}_{preregistration.FILE}")
        past = pages.page_history(entry, registered)
        today = load_study(EXPERIMENTS / f"{name}.py", registered["size"]).fingerprint()
        assert past == walk.history(name, registered["size"], today), name
        assert past.design_commit and past.results_commit, name
        page = pages.study_page(entry)
        assert f"- **Design committed in:** `{past.design_commit}`" in page, name
        assert f"- **First results committed in:** `{past.results_commit}`" in page, name
        assert "Expectations committed in" not in page, name  # the last touch, not a registration
        missing = [a for a in entry.amendments if f"- {a}" not in page]
        assert not missing, f"{name}: its page lacks the amendment {missing[0]!r}"

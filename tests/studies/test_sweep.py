"""The study runner: end to end on a tiny study, resuming a half-finished sweep, the verdict logic
on constructed results, and the experiment files themselves."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import math
from pathlib import Path

import pytest

from transformer_jax.studies import report
from transformer_jax.studies.records import provenance
from transformer_jax.studies.run import plan as plan_lib
from transformer_jax.studies.run import sweep
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.config import ConfigError
from transformer_jax.studies.study import Comparison, Expectation, Verdict, load_study
from tiny_study import tiny_study, tiny_study_sharing

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(p.stem for p in (REPO / "experiments").glob("[!_]*.py"))  # every one of them
assert len(EXPERIMENTS) >= 8, EXPERIMENTS


# conftest's session fixture: JAX's persistent compilation cache, as main enables it
pytestmark = pytest.mark.usefixtures("compilation_cache")


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_sweep_end_to_end_then_rerun_changes_no_run(tmp_path):
    study = tiny_study(tmp_path / "data", probes=lambda root: "probe table", seeds=(0, 1),
                       analyses=(lambda root, runs: f"analysed {len(runs)} runs",))
    root = tmp_path / "study"
    assert sweep.run_study(study, str(root))
    for name in ("curves.png", "summary.csv", "summary.md", "verdict.md"):
        assert (root / name).stat().st_size > 0, name
    verdict = (root / "verdict.md").read_text()
    assert "scaling helps" in verdict and "probe table" in verdict
    row = next(l for l in verdict.splitlines() if l.startswith("| scaled is not worse |"))
    assert "| holds | holds, p = " in row and "≥ -10" in row
    assert row.count("[") == 1  # the interval
    assert "the claim holds on this run** (1 hold, 0 do not hold, 0 inconclusive" in verdict
    assert "## Analysis\n\nanalysed 4 runs" in verdict
    assert "95 % interval" in (root / "summary.md").read_text()
    rows = (root / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("variant,seed,state,steps") and len(rows) == 5
    for variant in ("scaled", "unscaled"):
        for seed in (0, 1):
            status = workdir_lib.read_status(root / variant / f"seed_{seed}")
            assert status["state"] == "finished" and status["step"] == 6
    runs_before = {k: v for k, v in _hashes(root).items() if "seed_" in k}
    assert sweep.run_study(study, str(root))  # everything already ended: nothing retrained
    assert {k: v for k, v in _hashes(root).items() if "seed_" in k} == runs_before


def test_a_probes_task_alone_does_not_count_as_training():
    """A rerun that trains nothing still schedules a study's probes (with --jobs > 1); that
    must not rewrite the provenance of runs trained by an earlier commit."""
    from transformer_jax.studies.run import jobs as jobs_lib
    task = lambda study, variant=None: jobs_lib.Task(study, "root", "exp.py", "default", variant)
    names = ("a", "b", "c")
    assert plan_lib.studies_trained([task("a"), task("b")], {}, names) == dict.fromkeys(
        names, False)
    linked = {("a", "v"): {"c"}}  # c's runs link to a's variant v
    assert plan_lib.studies_trained([task("a"), task("a", "v")], linked, names) == {
        "a": True, "b": False, "c": True}


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_half_finished_sweep_completes_only_what_is_missing(tmp_path):
    study = tiny_study(tmp_path / "data")
    root = tmp_path / "study"
    assert not sweep.run_study(study, str(root), shard=(0, 2))  # only 'scaled' ran
    assert workdir_lib.read_status(root / "scaled" / "seed_0")["state"] == "finished"
    assert not (root / "unscaled").exists() and not (root / "verdict.md").exists()
    first = _hashes(root / "scaled")
    assert sweep.run_study(study, str(root), shard=(1, 2))  # the rest, then the report
    assert _hashes(root / "scaled") == first
    assert workdir_lib.read_status(root / "unscaled" / "seed_0")["state"] == "finished"
    assert (root / "verdict.md").exists()


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_identical_runs_of_two_studies_are_trained_once_and_both_reported(tmp_path):
    first = tiny_study(tmp_path / "data")
    second = tiny_study_sharing(tmp_path / "data")  # its 'same_as_scaled' is first's 'scaled'
    roots = [tmp_path / "w" / s.name for s in (first, second)]
    out = io.StringIO()
    progress = sweep.terminal.JobProgress(out=out, bar=False)
    done = sweep.run_studies([(first, str(roots[0]), None), (second, str(roots[1]), None)],
                             (0, 1), progress=progress)
    assert done == {"tiny": True, "tiny_too": True}
    link = roots[1] / "same_as_scaled" / "seed_0"
    assert link.is_symlink() and link.resolve() == (roots[0] / "scaled" / "seed_0").resolve()
    assert not (roots[1] / "same_as_scaled" / "train.log").exists()  # nothing trained there
    assert workdir_lib.read_status(link)["state"] == "finished"
    assert not (roots[1] / "longer" / "seed_0").is_symlink()
    assert workdir_lib.read_status(roots[1] / "longer" / "seed_0")["step"] == 9
    assert "| longer is not worse |" in (roots[1] / "verdict.md").read_text()
    assert "3 to train, 1 the same runs as another variant (trained once)" in out.getvalue()
    before = _hashes(roots[0])
    assert sweep.run_studies([(first, str(roots[0]), None), (second, str(roots[1]), None)],
                             (0, 1)) == done  # a rerun trains nothing, keeps the link
    assert _hashes(roots[0]) == before and link.is_symlink()
    # the second study alone: its link into the first's workdir is its own identical run
    assert sweep.run_studies([(second, str(roots[1]), None)], (0, 1)) == {"tiny_too": True}
    assert _hashes(roots[0]) == before and link.is_symlink()
    # the second study's variant changed: its link no longer holds its run, and is refused
    changed = dataclasses.replace(second, variants={**second.variants,
                                                    "same_as_scaled": {"model.attn_scale": False}})
    with pytest.raises(ConfigError, match="remove the link"):
        sweep.run_studies([(first, str(roots[0]), None), (changed, str(roots[1]), None)], (0, 1))


EXPERIMENT_FILE = """import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from tiny_study import {function}

def get_study(size):
    return {function}(Path({data!r}), probes=lambda root: "probe table")
"""


def _finished_runs(study, root: Path) -> None:
    """Every run of `study` ended before the sweep (a status file each, as training leaves),
    except those a sweep will link to another study's identical run."""
    workdir_lib.prepare(str(root), {"study": study.name, "runs": [list(r) for r in study.runs()]})
    for variant, seed in study.runs():
        if variant != "same_as_scaled":
            (root / variant / f"seed_{seed}").mkdir(parents=True)
            workdir_lib.write_status(root / variant / f"seed_{seed}", "finished", 6)


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_a_rerun_over_finished_runs_keeps_the_provenance_byte_for_byte(tmp_path):
    """provenance.json records what TRAINED the runs: a sweep that only re-writes the reports
    keeps it, also where a study's runs are links to another study's and where, with workers
    (--jobs=2), each study's probes are a task of their own (which trains nothing: counting it
    as training rewrote the records of the four main studies with probes)."""
    sweeps = []
    for function, make in (("tiny_study", tiny_study), ("tiny_study_sharing", tiny_study_sharing)):
        study = make(tmp_path / "data", probes=lambda root: "probe table")
        experiment = tmp_path / f"{study.name}.py"
        experiment.write_text(EXPERIMENT_FILE.format(
            tests=str(REPO / "tests"), function=function, data=str(tmp_path / "data")))
        _finished_runs(study, tmp_path / "w" / study.name)
        sweeps.append((study, str(tmp_path / "w" / study.name), str(experiment)))
    quiet = sweep.terminal.JobProgress(out=io.StringIO(), bar=False)
    assert sweep.run_studies(sweeps, (0, 1), size="tiny", progress=quiet) == {
        "tiny": True, "tiny_too": True}  # nothing recorded yet: each study's record written
    assert (tmp_path / "w" / "tiny_too" / "same_as_scaled" / "seed_0").is_symlink()
    records = [Path(where) / provenance.FILE for _, where, _ in sweeps]
    for record in records:  # as a record from the commit that trained the runs would read
        record.write_text(record.read_text().replace('"date": "', '"date": "trained earlier, '))
    before = [record.read_bytes() for record in records]
    for jobs in (2, 1):
        assert sweep.run_studies(sweeps, (0, 1), jobs=jobs, size="tiny", progress=quiet) == {
            "tiny": True, "tiny_too": True}
        assert [record.read_bytes() for record in records] == before, f"--jobs={jobs}"


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_two_identical_variants_of_one_study_train_once_and_the_report_is_written(tmp_path):
    study = tiny_study(tmp_path / "data")
    twins = dataclasses.replace(study, variants={**study.variants,
                                                 "scaled_again": {"model.attn_scale": True}})
    root = tmp_path / "study"
    assert sweep.run_study(twins, str(root))  # the report waits for 'scaled', then is written
    assert (root / "scaled_again" / "seed_0").is_symlink()
    assert "| scaled_again |" in (root / "summary.md").read_text()


def test_a_different_study_in_the_same_workdir_is_refused(tmp_path):
    study = tiny_study(tmp_path / "data")
    root = tmp_path / "study"
    workdir_lib.prepare(str(root), {"study": "other", "runs": []})
    with pytest.raises(workdir_lib.WorkdirError, match="different config"):
        sweep.run_study(study, str(root))


def test_bad_shard_and_unknown_experiment_and_variant(tmp_path):
    with pytest.raises(ConfigError, match="--shard='3/2'"):
        sweep.parse_shard("3/2")
    with pytest.raises(ConfigError, match="--shard='x'"):
        sweep.parse_shard("x")
    assert sweep.parse_shard("1/4") == (1, 4)
    with pytest.raises(ConfigError, match="scaling.py"):  # lists the experiments there are
        load_study(REPO / "experiments" / "nope.py")
    with pytest.raises(ConfigError, match="not one of"):
        tiny_study(tmp_path).config("missing", 0)


@pytest.mark.parametrize("jobs, fragment", [("0", "--jobs=0 must be at least 1"),
                                             ("two", "--jobs")])
def test_bad_jobs_is_one_line_and_exit_2(tmp_path, jobs, fragment):
    import sys

    from fork_server import run_command
    result = run_command(
        [sys.executable, "-m", "transformer_jax.sweep", "--experiment=experiments/scaling.py",
         f"--workdir={tmp_path / 'study'}", f"--jobs={jobs}"])
    errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1 and fragment in errors[0], result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "study").exists()


RESULTS = {"a": {0: 0.9, 1: 0.88, 2: 0.89}, "b": {0: 0.5, 1: 0.52, 2: 0.51},
           "diverged": {0: 0.5, 1: 0.52, 2: math.nan}}  # seed -> final value


@pytest.mark.parametrize("expectation, verdict", [
    (Expectation("", "m", "a", Comparison.BETTER, 0.2, b="b"), Verdict.HOLDS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.4, b="b"), Verdict.INCONCLUSIVE),  # [0.33, 0.43]
    (Expectation("", "m", "a", Comparison.BETTER, 0.5, b="b"), Verdict.FAILS),
    (Expectation("", "m", "b", Comparison.BETTER, 0.0, b="a"), Verdict.FAILS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.0, b="b", higher_is_better=False), Verdict.FAILS),
    # a diverged run's value is unknown: the claim holds counted as the study's worst (0.5), not
    # as its best (0.9), so the run decides it; `worst=` says what it counts as
    (Expectation("", "m", "a", Comparison.BETTER, 0.2, b="diverged"), Verdict.INCONCLUSIVE),
    (Expectation("", "m", "a", Comparison.BETTER, 0.2, b="diverged", worst=0.5), Verdict.HOLDS),
    (Expectation("", "m", "a", Comparison.BETTER, 0.9, b="diverged"), Verdict.FAILS),  # either way
    (Expectation("", "m", "a", Comparison.WITHIN, 0.1, b="b"), Verdict.FAILS),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.95), Verdict.HOLDS),
    (Expectation("", "m", "a", Comparison.AT_MOST, 0.75), Verdict.FAILS),
])
def test_verdict_logic_on_constructed_results(expectation, verdict):
    judgement = expectation.judge(RESULTS)
    assert judgement.verdict is verdict and judgement.holds is (verdict is Verdict.HOLDS)
    assert judgement.values["a"] == RESULTS["a"]


def test_within_is_relative():
    e = Expectation("", "m", "a", Comparison.WITHIN, 0.05, b="b")
    assert e.judge({"a": {0: 1.04, 1: 1.04}, "b": {0: 1.0, 1: 1.0}}).holds
    assert e.judge({"a": {0: 1.06, 1: 1.06}, "b": {0: 1.0, 1: 1.0}}).verdict is Verdict.FAILS


def test_final_value_and_verdict_markdown_mark_diverged_runs(tmp_path):
    # three seeds: beside one measured run a diverged one leaves the verdict inconclusive
    # (judging rules 6), beside two it counts at the least favourable finished value
    study = tiny_study(tmp_path, seeds=(0, 1, 2))
    runs = {("scaled", 0): {"status": {"state": "finished"}, "curves": {"eval/loss": [(3, 2.0), (6, 1.5)]}},
            ("scaled", 1): {"status": {"state": "finished"}, "curves": {"eval/loss": [(3, 2.0), (6, 1.7)]}},
            ("scaled", 2): {"status": {"state": "finished"}, "curves": {"eval/loss": [(6, 1.6)]}},
            ("unscaled", 0): {"status": {"state": "diverged"}, "curves": {"eval/loss": [(3, 2.5)]}},
            ("unscaled", 1): {"status": {"state": "finished"}, "curves": {"eval/loss": [(6, 1.6)]}},
            ("unscaled", 2): {"status": {"state": "finished"}, "curves": {"eval/loss": [(6, 1.65)]}}}
    assert report.final_value(runs[("scaled", 0)], "eval/loss") == 1.5
    assert math.isnan(report.final_value(runs[("unscaled", 0)], "eval/loss"))
    text = report.verdict_markdown(study, runs)
    row = next(l for l in text.splitlines() if l.startswith("| scaled is not worse |"))
    assert "unscaled: diverged→1.7, 1.6, 1.65" in row  # worst loss: 1.7
    assert "| holds | holds, p " in row


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_files_declare_a_complete_study(name):
    for size in ("tiny", "default", "large"):
        study = load_study(REPO / "experiments" / f"{name}.py", size)
        assert study.claim and study.published
        if study.expectations:  # judged with intervals over seeds
            assert len(study.seeds) >= 3
            # one variant only where nothing compares two (induction_matched: knock-outs of one
            # trained model, each against its own control)
            assert len(study.variants) >= 2 or all(e.b is None for e in study.expectations)
        else:  # one model read by its analyses (lm_head_roles): their checks are its findings
            assert study.analyses
        for variant in study.variants:  # every variant is a valid, buildable config
            config = study.config(variant, study.seeds[0])
            assert study.evaluate is not None or config.model.d_model > 0  # else: a checkpoint's

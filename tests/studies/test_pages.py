"""Results pages and provenance: the committed pages are exactly what the code writes from the
committed results files (a planted change to one of them shows), every link on them resolves,
provenance is read off the machine and the checkout, and a sweep's output carries both."""
from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
import pytest

from transformer_jax.studies.records import preregistration, provenance, record, suite_time
from transformer_jax.studies.render import forest, pages, templating
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.run import sweep
from transformer_jax.train import workdir as workdir_lib

from tiny_study import tiny_study

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"
README = REPO / "README.md"
INPUTS = ("_" + record.FILE, "_summary.csv", "_" + provenance.FILE, "_" + preregistration.FILE)
STUDIES = sorted(p.name[:-len("_" + record.FILE)] for p in RESULTS.glob("*_" + record.FILE))
LINK = re.compile(r"\]\(([^)\s]+)\)")
INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2
"""
AMD = "processor : 0\nmodel name : AMD EPYC 7B13 64-Core Processor\nflags : fpu avx avx2 sse4_2\n"
ARM = "processor : 0\nBogoMIPS : 50.00\nFeatures : fp asimd\nCPU implementer : 0x41\n"


def _copy_results(to: Path, names=STUDIES, experiments=None) -> Path:
    """The committed results files of studies `names` the pages are made from (no pages, no
    plots) in to/experiments/results, beside links to the experiment files (default: all)."""
    results = to / "experiments" / "results"
    results.mkdir(parents=True)
    for experiment in (REPO / "experiments").glob("*.py"):
        if experiments is None or experiment.stem in experiments:
            (to / "experiments" / experiment.name).symlink_to(experiment)
    for name in names:
        for suffix in INPUTS:
            if (RESULTS / f"{name}{suffix}").exists():
                shutil.copy(RESULTS / f"{name}{suffix}", results)
    if names is STUDIES:  # every study: how long each suite took too
        for record in RESULTS.glob(f"{suite_time.PREFIX}*.json"):
            shutil.copy(record, results)
    return results


def _readme_with_markers(tmp_path: Path) -> tuple[Path, str]:
    """A copy of README.md (or, where it has no headline markers, one that has them) and the
    text it must have once updated."""
    readme = tmp_path / "README.md"
    text = README.read_text()
    if pages.HEADLINE_START in text:
        readme.write_text(text)
        return readme, text
    readme.write_text(f"# x\n\n{pages.HEADLINE_START}\nold\n{pages.HEADLINE_END}\n\nafter\n")
    return readme, ""


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_committed_pages_are_what_the_code_writes_from_the_committed_results(tmp_path,
                                                                            monkeypatch):
    """Byte for byte, from the JSON records alone (no verdict.md or summary.md is copied: they
    are written again too). The pages only: drawing 20 forest plots took half of this test's
    time, and test_forest.py checks what they draw."""
    monkeypatch.setattr(forest, "write_forest", lambda record, path, machine="": None)
    results = _copy_results(tmp_path)
    readme, expected_readme = _readme_with_markers(tmp_path)
    assert pages.main([f"--results={results}", f"--readme={readme}"]) == 0
    written = sorted(p.name for p in results.glob("*.md"))
    assert written == sorted([pages.INDEX] + [f"{n}{kind}" for n in STUDIES
                                              for kind in (".md", "_verdict.md", "_summary.md")])
    for name in written:
        assert (results / name).read_bytes() == (RESULTS / name).read_bytes(), (
            f"experiments/results/{name} is stale: run python -m "
            "transformer_jax.studies.render.pages")
    text = readme.read_text()
    if expected_readme:
        assert text == expected_readme, "README.md's headline table is stale: run the same"
    else:  # the markers' block was replaced, the rest kept
        assert text.startswith(f"# x\n\n{pages.HEADLINE_START}\n| study | claim | verdict |")
        assert text.endswith(f"{pages.HEADLINE_END}\n\nafter\n") and "old" not in text
    for name in STUDIES:
        assert f"| [{name}](experiments/results/{name}.md) |" in text


def _plant(path: Path, change) -> None:
    """Rewrites the verdict record at `path` with `change(record)` applied."""
    found = record.read(path)
    change(found)
    record.write(path, found)


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_planted_change_to_a_committed_result_changes_the_pages(tmp_path):
    results = _copy_results(tmp_path, ["scaling", "residuals"])

    def first_mean(r):
        r["summary"]["variants"][0]["metrics"]["eval/accuracy"].update(mean=9.876, std=0.054)

    def one_fails(r):
        r["counts"].update(held=1, failed=1, overall="partly holds")  # of its 2 findings
        r["expectations"][0]["verdict"] = "does not hold"
    _plant(results / f"scaling_{record.FILE}", first_mean)
    _plant(results / f"residuals_{record.FILE}", one_fails)
    csv = results / "residuals_summary.csv"
    csv.write_text(csv.read_text().replace(",finished,", ",diverged,", 1))
    pages.write_results(results)
    scaling = (results / "scaling.md").read_text()
    residuals = (results / "residuals.md").read_text()
    assert scaling != (RESULTS / "scaling.md").read_text() and "9.876 ± 0.054" in scaling
    assert residuals != (RESULTS / "residuals.md").read_text()
    assert "| does not hold |" in residuals
    assert "claim partly holds on this run** (1 hold" in residuals
    assert "8 finished, 1 diverged." in residuals
    index = (results / pages.INDEX).read_text()
    machine = {name: pages.machine_cell(provenance.read(results / f"{name}_{provenance.FILE}"))
               for name in ("scaling", "residuals")}
    assert (f"| partly holds: 1 of 2 findings hold, 1 does not · checks 1 of 1 hold | "
            f"{machine['residuals']} |") in index
    assert f"| holds: 2 of 2 findings hold | {machine['scaling']} |" in index  # unchanged
    assert "| [positions](../positions.py) | main |" in index  # no results here: not run yet
    assert not (results / "positions.md").exists()


def test_every_link_on_the_committed_pages_resolves(monkeypatch):
    for page in [RESULTS / pages.INDEX, *(RESULTS / f"{n}.md" for n in STUDIES)]:
        links = LINK.findall(page.read_text())
        assert links, page
        for link in links:
            assert (page.parent / link).is_file(), f"{page.name} links to missing {link}"
    table = pages.headline_table(RESULTS, REPO)
    assert all((REPO / link).is_file() for link in LINK.findall(table))
    monkeypatch.chdir(REPO)  # without a link base, links are the results directory as given
    assert pages.headline_table(Path("experiments/results")).count("](experiments/results/") \
        == len(STUDIES)


def test_pages_without_provenance_say_so():
    for name in STUDIES:
        if not (RESULTS / f"{name}_{provenance.FILE}").exists():
            text = (RESULTS / f"{name}.md").read_text()
            assert "Provenance not recorded: these results predate provenance files" in text
            assert f"no {name}_{provenance.FILE} beside them" in text


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_page_shows_the_recorded_provenance(tmp_path):
    results = _copy_results(tmp_path, ["scaling"])
    record = provenance.describe(
        study="scaling", suite="main", size="default", seeds=(0, 1, 2), runs=12, shard=(1, 2),
        cpuinfo=INTEL, cpus=224, system="Linux x86_64",
        stack={"python": "3.11.7", "jax": "0.4.38", "flax": None}, commit="ab" * 20,
        dirty=True, date="2026-12-02T12:00:00+00:00")
    provenance.write(results / f"scaling_{provenance.FILE}", record)
    pages.write_results(results)
    page = (results / "scaling.md").read_text()
    assert ("- **Machine:** Intel(R) Xeon(R) Platinum 8480+, 224 logical CPUs, Linux x86_64; "
            "CPU flags: avx2, avx512f, avx512_bf16, amx_bf16, amx_int8, amx_tile") in page
    assert "- **Stack:** python 3.11.7, jax 0.4.38, flax not installed" in page
    assert f"commit `{'ab' * 20}` with uncommitted changes" in page
    assert "`--size=default`, seeds [0, 1, 2], 12 runs; the report written by shard 1/2" in page
    assert "2026-12-02T12:00:00+00:00" in page and "Provenance not recorded" not in page
    index = (results / pages.INDEX).read_text()
    assert "| Intel(R) Xeon(R) Platinum 8480+, 224 CPUs, AMX |" in index


def test_cpuinfo_model_and_flags():
    assert provenance.parse_cpuinfo(INTEL) == (
        "Intel(R) Xeon(R) Platinum 8480+",
        ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile"))
    assert provenance.parse_cpuinfo(AMD) == ("AMD EPYC 7B13 64-Core Processor", ("avx2",))
    assert provenance.parse_cpuinfo(ARM) == (provenance.UNKNOWN, ())


def test_a_machine_cell_tells_the_avx2_epyc_from_the_avx512_one():
    """The two EPYCs these machines have had share a model name; values and times differ."""
    def cell(cpuinfo):
        return provenance.machine_cell(provenance.machine_record(cpuinfo, 2, "Linux x86_64"))
    assert cell(AMD) == "AMD EPYC 7B13 64-Core Processor, 2 CPUs, AVX2"
    assert cell(AMD.replace("avx2", "avx2 avx512f")) == \
        "AMD EPYC 7B13 64-Core Processor, 2 CPUs, AVX-512"
    assert cell(INTEL) == "Intel(R) Xeon(R) Platinum 8480+, 2 CPUs, AMX"
    assert cell(ARM) == f"{provenance.UNKNOWN}, 2 CPUs"
    assert provenance.machine_cell(None) == "machine not recorded"


def test_collect_reads_this_machine_and_stack(tmp_path):
    study = tiny_study(tmp_path / "data", seeds=(0, 1))
    now = datetime.datetime(2026, 12, 2, 15, 0, tzinfo=datetime.timezone.utc)
    record = provenance.collect(study, "tiny", (0, 1), now=now)
    model, flags = provenance.parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert record["machine"] == {"cpu": model, "cpus": os.cpu_count(), "cpu_flags": list(flags),
                                 "system": record["machine"]["system"]}
    assert model != provenance.UNKNOWN  # this is a Linux x86 machine with a model name
    stack = record["stack"]
    assert stack["jax"] == jax.__version__ and stack["numpy"] == np.__version__
    assert stack["jaxlib"] == metadata.version("jaxlib")
    assert stack["flax"] == metadata.version("flax")
    assert stack["optax"] == metadata.version("optax") and stack["python"].count(".") == 2
    assert record["sweep"] == {"size": "tiny", "seeds": [0, 1], "runs": 4, "shard": "0/1"}
    assert record["date"] == "2026-12-02T15:00:00+00:00" and record["suite"] == "main"
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:
        assert record["code"]["commit"] == head.stdout.strip()
        assert isinstance(record["code"]["dirty"], bool)
    path = provenance.write(tmp_path / provenance.FILE, record)
    assert provenance.read(path) == record and provenance.read(tmp_path / "none.json") is None


def test_git_commit_and_dirty_flag(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                               "user.email=t@t", *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-q", "-m", "code")
    head = git("rev-parse", "HEAD")
    assert provenance.git_commit(repo) == (head, False)
    (repo / "runs").mkdir()
    (repo / "runs" / "out.txt").write_text("untracked")
    assert provenance.git_commit(repo) == (head, False)  # untracked files are not the code
    (repo / "code.py").write_text("x = 2\n")
    assert provenance.git_commit(repo) == (head, True)
    assert provenance.git_commit(repo / "runs") == (provenance.UNKNOWN, None)  # inside, not top
    assert provenance.git_commit(tmp_path / "elsewhere") == (provenance.UNKNOWN, None)


def test_update_readme_needs_the_markers(tmp_path):
    results = _copy_results(tmp_path, ["scaling"], experiments=["scaling", "residuals"])
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(pages.PageError, match="headline:start"):
        pages.update_readme(readme, results)
    readme.write_text(f"a\n{pages.HEADLINE_END}\n{pages.HEADLINE_START}\n")
    with pytest.raises(pages.PageError, match="headline:end"):
        pages.update_readme(readme, results)
    readme.write_text(f"a\n{pages.HEADLINE_START}\n{pages.HEADLINE_END}\nb\n")
    assert pages.update_readme(readme, results)
    assert readme.read_text() == (f"a\n{pages.HEADLINE_START}\n| study | claim | verdict |\n"
                                  "|---|---|---|\n| [scaling](experiments/results/scaling.md) | "
                                  "Dividing Q·Kᵀ by √d_k keeps softmax out of saturation so "
                                  "gradients flow. | holds: 2 of 2 findings hold |\n"
                                  f"{pages.HEADLINE_END}\nb\n")  # residuals: not run, left out
    assert not pages.update_readme(readme, results)  # already current


@pytest.mark.parametrize("args, message", [
    (["--results=/nonexistent/results", "--readme="],
     "--results='/nonexistent/results' is not a directory"),
    (["--results={empty}", "--readme="], "holds no <study>_verdict.json files"),
    (["--results={results}", "--experiments={experiments}", "--readme=/nonexistent/README.md"],
     "--readme='/nonexistent/README.md' is not a file"),
    (["--results={results}", "--experiments=/nonexistent", "--readme="],
     "--experiments='/nonexistent' is not a directory"),
    (["--results={results}", "--experiments={empty}", "--readme="], "no experiment file"),
])
def test_bad_paths_are_one_line_errors(tmp_path, capsys, args, message):
    results = _copy_results(tmp_path, ["scaling"])
    (tmp_path / "empty").mkdir()
    args = [a.format(results=results, empty=tmp_path / "empty", experiments=REPO / "experiments")
            for a in args]
    assert pages.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and err.startswith("error: ")


def test_a_results_file_not_written_by_the_sweep_is_named(tmp_path):
    results = _copy_results(tmp_path, ["scaling"])
    (results / f"scaling_{record.FILE}").write_text('{"claim": "hand-written"}\n')
    with pytest.raises(pages.PageError, match=f"scaling_{record.FILE}: not a verdict record"):
        pages.write_results(results)
    (results / f"scaling_{record.FILE}").write_text("| a markdown table |\n")
    with pytest.raises(pages.PageError, match=f"scaling_{record.FILE}: not JSON"):
        pages.write_results(results)
    shutil.copy(RESULTS / f"scaling_{record.FILE}", results)
    (results / "scaling_summary.csv").unlink()
    with pytest.raises(pages.PageError, match="scaling_summary.csv: missing"):
        pages.write_results(results)


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_a_reworded_claim_shows_today_and_the_one_the_results_were_produced_with(tmp_path):
    results = _copy_results(tmp_path, ["scaling"])
    today = (RESULTS / "scaling.md").read_text()
    assert "These results were produced when the claim read" not in today
    _plant(results / f"scaling_{record.FILE}", lambda r: r.update(claim="Scaling helps."))
    pages.write_results(results)
    page = (results / "scaling.md").read_text()
    claim = "Dividing Q·Kᵀ by √d_k keeps softmax out of saturation so gradients flow."
    assert page.startswith(f"# scaling\n\n**Claim.** {claim}\n\n"
                           "These results were produced when the claim read: Scaling helps.\n")


def test_the_committed_verdict_and_summary_markdown_render_from_the_records():
    for name in STUDIES:
        found = record.read(RESULTS / f"{name}_{record.FILE}")
        assert verdict_text.verdict_markdown(found, f"{name}_curves.png") == \
            (RESULTS / f"{name}_verdict.md").read_text(), name
        assert verdict_text.summary_markdown(found) == \
            (RESULTS / f"{name}_summary.md").read_text(), name
        # converted from a verdict.md: numbers as printed; written by a sweep: at full precision
        assert found["precision"] == (record.AS_PRINTED if "converted" in found
                                      else record.FULL_PRECISION), name


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_a_sweep_writes_provenance_and_pages_beside_its_report(tmp_path):
    """Runs that already ended (status files only): the sweep trains nothing and reports."""
    first, second = (tiny_study(tmp_path / "data", seeds=(0, 1)) for _ in range(2))
    second = dataclasses.replace(second, name="other", claim="other claim")
    root = tmp_path / "studies"
    for study in (first, second):
        workdir_lib.prepare(str(root / study.name),
                            {"study": study.name, "runs": [list(r) for r in study.runs()]})
        for variant, seed in study.runs():
            run = root / study.name / variant / f"seed_{seed}"
            run.mkdir(parents=True)
            workdir_lib.write_status(run, "finished", 6)
    quiet = sweep.terminal.JobProgress(out=io.StringIO(), bar=False)
    done = sweep.run_studies([(first, str(root / "tiny"), None),
                              (second, str(root / "other"), None)], (0, 1), size="tiny",
                             progress=quiet)
    assert done == {"tiny": True, "other": True}
    for study in (first, second):
        record = provenance.read(root / study.name / provenance.FILE)
        assert record["study"] == study.name and record["sweep"]["size"] == "tiny"
        page = (root / study.name / pages.INDEX).read_text()
        assert page.startswith(f"# {study.name}\n\n**Claim.** {study.claim}\n")
        assert "4 runs (2 variants × 2 seeds), 6 steps each: 4 finished." in page
        assert "![curves](curves.png)" in page and "[summary.csv](summary.csv)" in page
        assert record["machine"]["cpu"] in page and "not recorded" not in page
    kept = root / "tiny" / provenance.FILE
    date = provenance.read(kept)["date"]
    kept.write_text(kept.read_text().replace(date, "an earlier run's date"))
    assert sweep.run_studies([(first, str(root / "tiny"), None)], (0, 1), size="tiny",
                             progress=quiet) == {"tiny": True}
    assert "an earlier run's date" in kept.read_text()  # nothing trained: the record is kept
    assert "an earlier run's date" in (root / "tiny" / pages.INDEX).read_text()
    pages.write_run_index(root, [(first, root / "tiny"), (second, root / "other")])
    index = (root / pages.INDEX).read_text()
    assert "| [tiny](tiny/README.md) | main | scaling helps |" in index
    assert "| [other](other/README.md) | main | other claim |" in index


def _sweep_output_of_scaling(root: Path) -> Path:
    """scaling's committed results as a sweep lays them out: root/scaling/verdict.md, ..."""
    study = root / "scaling"
    (study / "scaled" / "seed_0").mkdir(parents=True)
    (study / "scaled" / "seed_0" / "status.json").write_text("{}")
    (study / "config.json").write_text(json.dumps({"study": "scaling", "runs": []}))
    for name in ("summary.md", "summary.csv", "curves.png", "probe_softmax_saturation.png"):
        shutil.copy(RESULTS / f"scaling_{name}", study / name)
    for name in ("verdict.md", record.FILE):
        verdict = (RESULTS / f"scaling_{name}").read_text()
        (study / name).write_text(verdict.replace("](scaling_", "]("))  # the run's own names
    (study / pages.INDEX).write_text("the run's own page: not a result")
    provenance.write(study / provenance.FILE, provenance.describe(
        study="scaling", suite="main", size="default", seeds=(0, 1, 2), runs=12, shard=(0, 1),
        cpuinfo=AMD, cpus=2, system="Linux x86_64", stack={"jax": "0.4.38"}, commit="c" * 40,
        dirty=False, date="2026-12-02T12:00:00+00:00"))
    return study


def test_export_copies_a_sweeps_results_with_their_links_renamed(tmp_path, capsys):
    study = _sweep_output_of_scaling(tmp_path / "runs")
    results = _copy_results(tmp_path, [])
    assert pages.main([f"--results={results}", "--readme=", f"--export={tmp_path / 'runs'}"]) == 0
    assert sorted(p.name for p in results.iterdir() if not p.is_symlink()) == [
        "README.md", "scaling.md", "scaling_curves.png", "scaling_forest.png",
        "scaling_probe_softmax_saturation.png",
        "scaling_provenance.json", "scaling_summary.csv", "scaling_summary.md",
        "scaling_verdict.json", "scaling_verdict.md",
        "suite-main.json"]  # a directory's sweep: how long it took too
    verdict = (results / "scaling_verdict.md").read_text()
    assert "![curves](scaling_curves.png)" in verdict
    assert "![saturation](scaling_probe_softmax_saturation.png)" in verdict
    page = (results / "scaling.md").read_text()
    for link in LINK.findall(page):
        assert (results / link).exists(), link
    assert "AMD EPYC 7B13 64-Core Processor, 2 logical CPUs" in page
    assert f"commit `{'c' * 40}`" in page and "uncommitted" not in page
    index = (results / pages.INDEX).read_text()
    assert "| AMD EPYC 7B13 64-Core Processor, 2 CPUs, AVX2 |" in index
    (study / provenance.FILE).unlink()  # a run without one: the earlier copy must not stay
    assert pages.main([f"--results={results}", "--readme=", f"--export={study}"]) == 0
    assert not (results / f"scaling_{provenance.FILE}").exists()
    assert "Provenance not recorded" in (results / "scaling.md").read_text()
    capsys.readouterr()
    assert pages.main([f"--results={results}", "--readme=", f"--export={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"holds no study's {record.FILE}" in err


def test_a_bar_inside_a_cell_does_not_split_it():
    """An expectation about |f(P·x) − P·f(x)| keeps its row's cells (positions' did not)."""
    from transformer_jax.studies.render import verdict_text
    from transformer_jax.studies.render.markdown import markdown_table
    for line in (verdict_text.table(["expected", "verdict"], [["max |f(x)| ≤ 1", "holds"]])[2],
                 markdown_table(["max |f(x)|", "n"], [("a|b", 1.0)]).splitlines()[0]):
        assert line.replace("\\|", "").count("|") == 3, line


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_check_names_each_stale_page_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(forest, "write_forest", lambda record, path, machine="": None)
    results = _copy_results(tmp_path, ["scaling"])
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{pages.HEADLINE_START}\nold\n{pages.HEADLINE_END}\n")
    args = [f"--results={results}", f"--readme={readme}"]
    assert pages.main([*args, "--check"]) == 1  # nothing written yet
    assert not (results / "scaling.md").exists() and "old" in readme.read_text()
    assert pages.main(args) == 0 and pages.main([*args, "--check"]) == 0
    page = results / "scaling.md"
    page.write_text(page.read_text() + "edited\n")
    capsys.readouterr()
    assert pages.main([*args, "--check"]) == 1 and page.read_text().endswith("edited\n")
    assert capsys.readouterr().err == (f"error: {page} is out of date: run python -m "
                                       "transformer_jax.studies.render.pages\n")
    readme.write_text(readme.read_text().replace("[scaling]", "[renamed]"))
    assert pages.out_of_date(results, readme=readme) == [page, readme]


@pytest.mark.slow  # reads every committed study (git history, tests/fast_lane.py)
@pytest.mark.parametrize("template, stale", [("index.md.j2", "experiments/results/README.md"),
                                             ("headline.md.j2", "README.md")])
def test_a_changed_template_makes_its_page_out_of_date(template, stale, tmp_path, monkeypatch,
                                                       capsys):
    """The index's and the headline's words live in studies/render/templates/: one edited and
    the page not written again is found by --check, as a changed record is."""
    folder = tmp_path / "templates"
    shutil.copytree(Path(templating.__file__).parent / "templates", folder)
    (folder / template).write_text((folder / template).read_text() + "planted\n")
    monkeypatch.setattr(pages, "TEMPLATES", folder)
    assert pages.main([f"--results={RESULTS}", f"--readme={REPO / 'README.md'}", "--check"]) == 1
    assert capsys.readouterr().err == (f"error: {REPO / stale} is out of date: run python -m "
                                       "transformer_jax.studies.render.pages\n")


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
@pytest.mark.parametrize("template, kind", [("study.md.j2", ".md"),
                                            ("verdict.md.j2", "_verdict.md"),
                                            ("summary.md.j2", "_summary.md")])
def test_a_changed_study_template_makes_each_study_page_out_of_date(template, kind, tmp_path,
                                                                    monkeypatch, capsys):
    """A study page's words live in studies/render/templates/study.md.j2, verdict.md's and
    summary.md's in verdict.md.j2 and summary.md.j2: a line planted in one and the pages not
    written again is found by --check on each study's page of that kind, and no other."""
    monkeypatch.setattr(forest, "write_forest", lambda record, path, machine="": None)
    results = _copy_results(tmp_path, ["scaling", "heads"])
    args = [f"--results={results}", "--readme="]
    assert pages.main(args) == 0 and pages.main([*args, "--check"]) == 0
    folder = tmp_path / "templates"
    shutil.copytree(Path(templating.__file__).parent / "templates", folder)
    (folder / template).write_text((folder / template).read_text() + "planted\n")
    monkeypatch.setattr(pages, "TEMPLATES", folder)
    monkeypatch.setattr(verdict_text, "TEMPLATES", folder)
    capsys.readouterr()
    assert pages.main([*args, "--check"]) == 1
    assert capsys.readouterr().err == "".join(
        f"error: {results / name}{kind} is out of date: run python -m "
        "transformer_jax.studies.render.pages\n" for name in ("scaling", "heads"))
    assert "planted" not in (results / f"scaling{kind}").read_text()  # --check writes nothing

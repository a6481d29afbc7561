r"""Results pages, written by code from results files, so that no number is retyped:

    python -m transformer_jax.studies.render.pages [--results=experiments/results] \
        [--readme=README.md] [--export=runs/studies ...]

writes, from the results files alone (each study's verdict record verdict.json, summary.csv
and provenance.json: `record`, rendered by `verdict_text`) and the claim and suite of its
experiment file:
  RESULTS/<study>.md   one page per study: claim, verdict table, final metrics, plots, and the
                       machine, software and commit that produced them (where recorded);
  RESULTS/<study>_verdict.md, _summary.md   the sweep's verdict.md and summary.md of it, again
                       from its record (verdict_text), so that --check covers them too;
  RESULTS/README.md    the index: one row per study with its verdict and machine;
  README's headline    the table between `<!-- headline:start -->` and `<!-- headline:end -->`
                       (`--readme=` skips it).
A study's page is laid out by templates/study.md.j2 from its records and the pieces verdict_text
renders from them (the tables, the verdict's sentences), the index and the headline table by
templates/index.md.j2 and headline.md.j2 from their rows (studies/render/templating.py); every
page is written, or with `--check` compared, by studies/render/generated.py.
`--export=DIR` first copies a sweep's results (its --workdir) into the results directory
(`transformer_jax.studies.records.export`).

Two layouts hold the same files: a results directory (experiments/results: <study>_verdict.json,
..., page <study>.md) and a sweep's study directory (DIR/<study>/verdict.json, ..., page
DIR/<study>/README.md, index DIR/README.md), which the sweep writes as each report is written.
A page sits beside its study's files, so the plot links in its analyses' markdown resolve.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import enum
import io
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from transformer_jax.config import ConfigError
from transformer_jax.studies.design import catalog, loading
from transformer_jax.studies.records import cap_reason, export, suite_time
from transformer_jax.studies.records import history as history_lib
from transformer_jax.studies.records import preregistration as preregistration_lib
from transformer_jax.studies.records import provenance as provenance_lib
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import forest, generated, templating
from transformer_jax.studies.render import verdict_text
from transformer_jax.studies.study import Study

HEADLINE = "headline"  # README's region (generated.markers) that holds the headline table
HEADLINE_START, HEADLINE_END = generated.markers(HEADLINE)
INDEX = "README.md"
COMMAND = "python -m transformer_jax.studies.render.pages"
NOT_RUN = "not run yet"
TEMPLATES: Optional[Path] = None  # the pages' templates (None: the package's)


class PageError(ValueError):
    """A results file that is missing or not as the sweep writes it; a bad path."""


class Layout(enum.Enum):
    RESULTS = "results"  # <dir>/<study>_verdict.md, ...; page <dir>/<study>.md
    RUN = "run"  # a sweep's study directory: <dir>/verdict.md, ...; page <dir>/README.md


@dataclasses.dataclass(frozen=True)
class StudyFiles:
    """Where one study's results files and page are."""

    name: str
    directory: Path
    layout: Layout

    def path(self, kind: str) -> Path:
        """kind: record_lib.FILE, 'verdict.md', 'summary.md', 'summary.csv', 'curves.png',
        forest.FILE or provenance_lib.FILE."""
        return self.directory / (f"{self.name}_{kind}" if self.layout is Layout.RESULTS else kind)

    @property
    def page(self) -> Path:
        return self.directory / (f"{self.name}.md" if self.layout is Layout.RESULTS else INDEX)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A study's files, and what its experiment file says: the claim and the suite."""

    files: StudyFiles
    claim: str
    suite: str
    experiment: Optional[Path] = None  # the experiment file, where known
    amendments: tuple[str, ...] = ()  # where the design changed after a result (with commits)

    @property
    def ran(self) -> bool:
        """Whether it has results (a pre-registered study has none yet)."""
        return self.files.path(record_lib.FILE).is_file()

    @classmethod
    def of(cls, study: Study, files: StudyFiles, experiment: Optional[Path] = None) -> Entry:
        return cls(files, study.claim, study.suite, experiment, tuple(study.amendments))


def runs_line(csv_text: str, where: Path) -> str:
    """'12 runs (4 variants × 3 seeds), 300 steps each: 12 finished' from summary.csv."""
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    if not rows or not {"variant", "seed", "state", "steps"} <= set(rows[0]):
        raise PageError(f"{where}: not a summary.csv that the sweep wrote (columns variant, "
                        f"seed, state, steps, then the metrics)")
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    seeds = list(dict.fromkeys(r["seed"] for r in rows))
    steps = sorted({int(r["steps"]) for r in rows})
    states = {}
    for r in rows:
        states[r["state"]] = states.get(r["state"], 0) + 1
    length = f"{steps[0]} steps each" if len(steps) == 1 else f"{steps[0]}–{steps[-1]} steps"
    order = sorted(states, key=lambda state: (state != "finished", state != "diverged", state))
    ended = ", ".join(f"{states[state]} {state}" for state in order)
    return (f"{len(rows)} runs ({len(variants)} variants × {len(seeds)} seeds), {length}: "
            f"{ended}.")


def render_page(entry: Entry, verdict: dict[str, Any], runs: str,
                record: Optional[dict[str, Any]],
                registered: Optional[dict[str, Any]] = None,
                past: Optional[history_lib.History] = None,
                suite: Optional[dict[str, Any]] = None) -> str:
    """One study's page (templates/study.md.j2) from its verdict record (`verdict`), runs line,
    provenance record (`record`), pre-registration record (`registered`) and git history
    (`past`); pure. `suite`: its suite's time record (suite_time), which says why a plateau's
    cap stopped it there."""
    files = entry.files
    return templating.render(
        "study.md.j2", TEMPLATES, name=files.name, claim=entry.claim, claimed=verdict["claim"],
        suite=entry.suite, **_where(entry), published=verdict["published"],
        **_verdict_section(verdict, entry, suite), runs=runs,
        csv=files.path("summary.csv").name,
        curves=None if verdict.get("evaluation_only") else files.path("curves.png").name,
        # the probes' and analyses' markdown, verbatim, a line at a time
        analyses="\n".join(verdict_text.sections(verdict)).splitlines(),
        registration=registered, registration_file=files.path(preregistration_lib.FILE).name,
        past=past, code=(record or {}).get("code", {}).get("commit", provenance_lib.UNKNOWN),
        amendments=entry.amendments, produced=record,
        provenance_file=files.path(provenance_lib.FILE).name,
        seeds=verdict_text.seed_list(record["sweep"]["seeds"]) if record else None,
        cpu_flags=provenance_lib.CPU_FLAGS, unknown=provenance_lib.UNKNOWN)


def _where(entry: Entry) -> dict[str, Any]:
    """Where the study sits: its experiment file (linked from a results directory; a sweep's
    directory may be anywhere, so there its path) and the index beside a results directory's
    pages (a sweep's single study has none)."""
    files, experiment = entry.files, entry.experiment
    results = files.layout is Layout.RESULTS
    link = (Path(os.path.relpath(experiment, files.page.parent)).as_posix()
            if experiment is not None and results else None)
    return dict(experiment=experiment, experiment_link=link,
                experiment_name=f"{experiment.parent.name}/{experiment.name}" if link else None,
                index=INDEX if results else None)


def _verdict_section(verdict: dict[str, Any], entry: Entry, suite: Optional[dict[str, Any]]
                     ) -> dict[str, Any]:
    """The verdict's and the final metrics' pieces of a page, rendered by verdict_text (and
    cap_reason) as verdict.md renders them; the forest plot's file (none without
    expectations)."""
    return dict(
        forest=entry.files.path(forest.FILE).name if verdict["expectations"] else None,
        expectations="\n".join(verdict_text.expectations_table(verdict)),
        overall=verdict_text.overall_line(verdict), notes=verdict_text.notes(verdict),
        budget=[*verdict_text.plateau_lines(verdict),
                *cap_reason.cap_lines(verdict, entry.suite, suite,
                                      catalog.limit_minutes(entry.suite)),
                *verdict_text.tuning_lines(verdict)],
        over=verdict_text.summary_over(verdict),
        summary="\n".join(verdict_text.summary_table(verdict)),
        intervals=verdict_text.intervals_line(verdict))


def machine_cell(record: Optional[dict[str, Any]]) -> str:
    if record is None:
        return "not recorded"
    return provenance_lib.machine_cell(record["machine"])


def read_entry(entry: Entry) -> tuple[dict[str, Any], str, Optional[dict[str, Any]]]:
    """(verdict record, runs line, provenance record) of a study's results files."""
    files = entry.files
    try:
        verdict = record_lib.read(files.path(record_lib.FILE))
    except record_lib.RecordError as e:
        raise PageError(str(e)) from None
    csv_path = files.path("summary.csv")
    if not csv_path.is_file():
        raise PageError(f"{csv_path}: missing; the sweep writes it with {files.name}'s report")
    return (verdict, runs_line(csv_path.read_text(), csv_path),
            provenance_lib.read(files.path(provenance_lib.FILE)))


def write_study_page(entry: Entry) -> Path:
    """Writes a study's forest plot (from its record) and its page; returns the page."""
    verdict, runs, produced = read_entry(entry)  # read once, for the figure and the page
    forest.write_forest(verdict, entry.files.path(forest.FILE),
                        provenance_lib.machine_words(produced["machine"]) if produced else "")
    return _write(entry.files.page, study_page(entry, (verdict, runs, produced)))


def study_page(entry: Entry, read: Optional[tuple[dict[str, Any], str, Optional[dict[str, Any]]]]
               = None) -> str:
    """The page of a study; `read`: its read_entry, where the caller has it already."""
    registered = preregistration_lib.read(entry.files.path(preregistration_lib.FILE))
    return render_page(entry, *(read or read_entry(entry)), registered,
                       page_history(entry, registered), suite_record(entry))


def suite_record(entry: Entry) -> Optional[dict[str, Any]]:
    """The time record of the study's suite beside a results directory's pages (None: none, or
    a sweep's directory, whose suite time is not recorded)."""
    if entry.files.layout is not Layout.RESULTS:
        return None
    return suite_time.read(entry.files.page.parent / suite_time.file_name(entry.suite))


def page_history(entry: Entry, registered: Optional[dict[str, Any]]
                 ) -> Optional[history_lib.History]:
    """The design and first results commits of a results directory's study, from git history
    (none for a sweep's directory, or without a pre-registration record)."""
    if entry.files.layout is not Layout.RESULTS or entry.experiment is None or not registered:
        return None
    return preregistration_lib.registration(entry.experiment, registered["size"])


def index_page(root: Path, entries: Sequence[Entry]) -> str:
    """root/README.md (templates/index.md.j2): one row per study (claim, verdict, suite,
    machine), linked to its page; then how long each suite took, where recorded."""
    rows = []
    for entry in entries:
        link, verdict, record = _row(entry, root)
        rows.append(dict(name=entry.files.name, link=link, suite=entry.suite, claim=entry.claim,
                         verdict=verdict, machine=machine_cell(record) if entry.ran else "—"))
    return templating.render("index.md.j2", TEMPLATES, rows=rows, suites=suite_times(root))


def suite_times(root: Path) -> list[dict[str, Any]]:
    """The rows of how long each suite took (suite-*.json beside the pages); none without."""
    return [dict(suite=r["suite"], studies=r["studies"], runs=r["runs"], size=r["size"],
                 wall=suite_time.minutes(r["wall_s"]), machine=machine_cell(r), date=r["end"][:10])
            for r in suite_time.read_all(root)]


def _row(entry: Entry, base: Optional[Path]) -> tuple[str, str, Optional[dict[str, Any]]]:
    """(link to its page, else to its experiment file; verdict cell; provenance record) of a
    study's row, links relative to `base` (None: the paths as given)."""
    if entry.ran:
        verdict, _, record = read_entry(entry)
        target, cell = entry.files.page, verdict_text.verdict_cell(verdict)
    elif entry.experiment is not None:
        target, cell, record = entry.experiment, NOT_RUN, None
    else:
        raise PageError(f"{entry.files.path(record_lib.FILE)}: missing")
    link = os.path.relpath(target, base) if base is not None else str(target)
    return Path(link).as_posix(), cell, record


def results_entries(results_dir: Path, experiments_dir: Optional[Path] = None) -> list[Entry]:
    """Every study of experiments_dir (default: results_dir's parent) with its claim and suite,
    in the sweep's order, whether `results_dir` (a results directory) holds its results or not
    yet; a verdict there without an experiment file is an error."""
    results_dir = Path(results_dir)
    experiments_dir = Path(experiments_dir) if experiments_dir else results_dir.parent
    if not results_dir.is_dir():
        raise PageError(f"--results={str(results_dir)!r} is not a directory")
    suffix = "_" + record_lib.FILE
    names = sorted(p.name[:-len(suffix)] for p in results_dir.glob(f"*{suffix}"))
    if not names:
        raise PageError(f"--results={str(results_dir)!r} holds no <study>{suffix} files")
    for name in names:
        experiment = experiments_dir / f"{name}.py"
        if not experiment.is_file():
            raise PageError(f"{results_dir / (name + suffix)}: no experiment file {experiment} "
                            f"to take its claim and suite from")
    entries = []
    for experiment in experiments_dir.glob("[!_]*.py"):
        study = loading.load_study(experiment, "tiny")  # claim and suite: the same at any size
        entries.append(Entry.of(study, StudyFiles(experiment.stem, results_dir, Layout.RESULTS),
                                experiment))
    return sorted(entries, key=lambda e: catalog.order_key(e.suite, e.files.name))


def headline_table(results_dir: Path, link_base: Optional[Path] = None,
                   experiments_dir: Optional[Path] = None) -> str:
    """One line per claim with results (study, claim, verdict), each study linked to its page
    relative to `link_base` (the README's directory), else as the results directory is given.
    A study not run yet is left out: the front door shows results (and keeps to 200 lines while
    a split study's parts are registered); the results index lists it."""
    rows = []
    for entry in results_entries(results_dir, experiments_dir):
        if entry.ran:
            link, verdict, _ = _row(entry, link_base)
            rows.append(dict(name=entry.files.name, link=link, claim=entry.claim, verdict=verdict))
    return templating.render("headline.md.j2", TEMPLATES, rows=rows)


def replace_headline(text: str, table: str, where: Path) -> str:
    """`text` with what is between the headline markers replaced by `table`."""
    try:
        return generated.replace(text, HEADLINE, table, where)
    except generated.RegionError as e:
        raise PageError(f"{e} around the headline table (or pass --readme=)") from None


def update_readme(readme_path: Path, results_dir: Path,
                  experiments_dir: Optional[Path] = None) -> bool:
    """Rewrites the headline table of the README at `readme_path`, its links relative to the
    README. Returns whether the file changed."""
    readme_path = Path(readme_path)
    if not readme_path.is_file():
        raise PageError(f"--readme={str(readme_path)!r} is not a file")
    text = readme_path.read_text()
    table = headline_table(results_dir, readme_path.parent, experiments_dir)
    new = replace_headline(text, table, readme_path)
    if new != text:
        readme_path.write_text(new)
    return new != text


def write_results(results_dir: Path, experiments_dir: Optional[Path] = None,
                  studies: Optional[Sequence[str]] = None) -> list[Path]:
    """Every study's page (or only those of `studies`, by name) and the index of a results
    directory. Returns the files written."""
    entries = results_entries(results_dir, experiments_dir)
    written = [path for e in entries if e.ran and (studies is None or e.files.name in studies)
               for path in (write_study_page(e),
                            *(_write(p, text) for p, text in record_pages(e).items()))]
    return written + [_write(Path(results_dir) / INDEX, index_page(Path(results_dir), entries))]


def record_pages(entry: Entry) -> dict[Path, str]:
    """A results directory's verdict.md and summary.md of a study (<study>_verdict.md, ...), as
    verdict_text renders them from its record: the sweep wrote them, an export copied them and
    a re-judgement rewrites them; here they are written and checked with the other pages."""
    files = entry.files
    verdict = read_entry(entry)[0]
    return {files.path("verdict.md"): verdict_text.verdict_markdown(
                verdict, files.path("curves.png").name),
            files.path("summary.md"): verdict_text.summary_markdown(verdict)}


def out_of_date(results_dir: Path, experiments_dir: Optional[Path] = None,
                readme: Optional[Path] = None) -> list[Path]:
    """The pages of a results directory (each study's pages, the index) and the README headline
    table that differ from what `write_results` and `update_readme` would write; nothing is
    written."""
    return [path for path, text in expected_pages(results_dir, experiments_dir, readme).items()
            if generated.stale(path, text)]


def expected_pages(results_dir: Path, experiments_dir: Optional[Path] = None,
                   readme: Optional[Path] = None) -> dict[Path, str]:
    """What `write_results` and `update_readme` would write: each page's path and text (a
    study's page, verdict.md and summary.md, the index, the README). The forest plots are not
    among them: they are drawn on a write (their PNG bytes follow the matplotlib build;
    tests/studies/test_forest.py checks what they draw)."""
    results_dir = Path(results_dir)
    entries = results_entries(results_dir, experiments_dir)
    expected = {path: text for e in entries if e.ran
                for path, text in {e.files.page: study_page(e), **record_pages(e)}.items()}
    expected[results_dir / INDEX] = index_page(results_dir, entries)
    if readme is not None:
        text = Path(readme).read_text()
        expected[Path(readme)] = replace_headline(
            text, headline_table(results_dir, Path(readme).parent, experiments_dir), Path(readme))
    return expected


def write_run_page(study: Study, root: Path, experiment: Optional[str] = None) -> Path:
    """root/README.md: the page of the study whose report the sweep just wrote into root (from
    the experiment file at `experiment`, where known)."""
    entry = Entry.of(study, StudyFiles(study.name, Path(root), Layout.RUN),
                     Path(experiment) if experiment else None)
    return write_study_page(entry)


def write_run_index(root: Path, studies: Sequence[tuple[Study, Path]]) -> Path:
    """root/README.md: the index of a sweep's studies, each (study, its directory)."""
    entries = [Entry.of(s, StudyFiles(s.name, Path(d), Layout.RUN)) for s, d in studies]
    return _write(Path(root) / INDEX, index_page(Path(root), entries))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_jax.studies.render.pages",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="experiments/results",
                        help="the results directory (<study>_verdict.json, ...)")
    parser.add_argument("--experiments", default="",
                        help="the experiment files (default: the results directory's parent)")
    parser.add_argument("--readme", default="README.md",
                        help="README whose headline table to rewrite ('' for none)")
    parser.add_argument("--export", action="append", default=[],
                        help="a sweep's --workdir whose results to copy in first (repeatable)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each page that is out of date")
    args = parser.parse_args(argv)
    if args.check:
        return _check(args)
    try:
        experiments = Path(args.experiments) if args.experiments else None
        if experiments is not None and not experiments.is_dir():
            raise PageError(f"--experiments={args.experiments!r} is not a directory")
        if args.readme and not Path(args.readme).is_file():
            raise PageError(f"--readme={args.readme!r} is not a file")
        results = Path(args.results)
        copied = [p for run in args.export for p in export.export_run(Path(run), results)]
        written = write_results(Path(args.results), experiments)
        if args.readme:
            if update_readme(Path(args.readme), Path(args.results), experiments):
                written.append(Path(args.readme))
    except (PageError, export.ExportError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if copied:
        print(f"copied {len(copied)} results files into {args.results}")
    print(f"wrote {len(written)} files: {', '.join(str(p) for p in written)}")
    return 0


def _check(args) -> int:
    try:
        expected = expected_pages(Path(args.results), Path(args.experiments) if args.experiments
                                  else None, Path(args.readme) if args.readme else None)
    except (PageError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return max([generated.write_or_check(path, text, True, COMMAND)
                for path, text in expected.items()], default=0)


if __name__ == "__main__":
    sys.exit(main())

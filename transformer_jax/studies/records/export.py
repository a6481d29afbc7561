"""A sweep's results copied into a results directory (experiments/results), from which the
results pages are written: `python -m transformer_jax.studies.render.pages --export=runs/studies`.

A sweep writes each study's files into the study's own directory (DIR/<study>/verdict.json,
verdict.md, curves.png, ...); a results directory holds every study's side by side, each file
named after its study (<study>_verdict.json, <study>_curves.png, ...). The copy renames the
links inside the markdown, and inside the markdown the record keeps verbatim, to match, so every
plot a verdict shows comes along and still resolves.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from transformer_jax.studies.records import preregistration, provenance, record, suite_time
from transformer_jax.studies import rundir

RESULTS = (record.FILE, "verdict.md", "summary.md", "summary.csv", "curves.png", provenance.FILE,
           preregistration.FILE)
# the files whose links name the study's files: the markdown, and the record, whose probes' and
# analyses' markdown (kept verbatim in it) links their plots
RENAMED = (record.FILE, "verdict.md", "summary.md")
_LOCAL_LINK = re.compile(r"\]\(([^)/\s:]+)\)")  # a file beside the page: no directory, no scheme


class ExportError(ValueError):
    """A directory that holds no sweep's study."""


def study_dirs(run_root: Path) -> list[Path]:
    """The study directories of a sweep's --workdir: itself (one experiment file) or each
    sub-directory with a verdict record (a directory of experiments)."""
    run_root = Path(run_root)
    if (run_root / record.FILE).is_file():
        return [run_root]
    found = sorted(d for d in run_root.glob("*/") if (d / record.FILE).is_file())
    if not found:
        raise ExportError(f"--export={str(run_root)!r} holds no study's {record.FILE} (a sweep's "
                          f"--workdir, or one of its study directories)")
    return found


def study_name(study_dir: Path) -> str:
    """The study a sweep's directory belongs to, from the config.json the sweep wrote."""
    config = Path(study_dir) / rundir.CONFIG_FILE
    try:
        return json.loads(config.read_text())["study"]
    except (OSError, KeyError, ValueError):
        raise ExportError(f"{config}: missing or not a sweep's (no 'study' field)") from None


def exported_names(study_dir: Path) -> list[str]:
    """The files of a study directory that its results are: RESULTS, every file the verdict
    links to (probe and analysis plots), and the analyses' tables (*.csv)."""
    linked = _LOCAL_LINK.findall((Path(study_dir) / record.FILE).read_text())
    tables = [p.name for p in sorted(Path(study_dir).glob("*.csv"))]
    names = dict.fromkeys([*RESULTS, *linked, *tables])
    return [n for n in names if (Path(study_dir) / n).is_file()]


def rename_links(text: str, names: list[str], study: str) -> str:
    """`text` with each link to one of `names` pointing at its copy, <study>_<name>."""
    names = set(names)
    return _LOCAL_LINK.sub(lambda m: f"]({study}_{m[1]})" if m[1] in names else m[0], text)


def export_study(study_dir: Path, results_dir: Path) -> list[Path]:
    """Copies one study's results into results_dir; returns the copies. A provenance or
    pre-registration file left there by an earlier export is removed when this run has none (it
    would describe another run)."""
    study_dir, results_dir = Path(study_dir), Path(results_dir)
    study, names = study_name(study_dir), exported_names(study_dir)
    written = []
    for name in names:
        target = results_dir / f"{study}_{name}"
        if name in RENAMED:
            target.write_text(rename_links((study_dir / name).read_text(), names, study))
        else:
            shutil.copyfile(study_dir / name, target)
        written.append(target)
    for record in (provenance.FILE, preregistration.FILE):
        stale = results_dir / f"{study}_{record}"
        if record not in names and stale.exists():
            stale.unlink()
    return written


def export_run(run_root: Path, results_dir: Path) -> list[Path]:
    """Every study of a sweep's --workdir into results_dir (which must exist); of a sweep of a
    directory of experiments (one suite), also how long it took (suite_time)."""
    if not Path(results_dir).is_dir():
        raise ExportError(f"--results={str(results_dir)!r} is not a directory")
    if not Path(run_root).is_dir():
        raise ExportError(f"--export={str(run_root)!r} is not a directory")
    dirs = study_dirs(run_root)
    copied = [path for d in dirs for path in export_study(d, results_dir)]
    if dirs != [Path(run_root)]:
        found = suite_time.record(dirs)
        if found is not None:
            copied.append(suite_time.write(results_dir, found))
    return copied

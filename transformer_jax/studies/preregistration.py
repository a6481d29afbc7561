"""Pre-registration the tool checks: what a verdict was judged against, recorded beside it.

A study's design (claim, variants, seeds, metrics, expectations and thresholds, base config) has
a fingerprint (`Study.fingerprint`). Each report writes `preregistration.json` beside the
verdict: that fingerprint, the size, and the commit that last changed the experiment file (the
expectations as committed before the run). tests/studies/test_preregistration.py then fails when a
committed verdict's fingerprint differs from its experiment file's today, so moving a threshold
after a result forces a re-run and a new results commit; and when the expectations' commit
holds results too, or does not come before the code that produced them.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

from transformer_jax.studies import loading, provenance
from transformer_jax.studies.provenance import read, write  # noqa: F401 (one JSON record format)

FILE = "preregistration.json"
SCHEMA = 1


def experiment_commit(experiment: Path, at: str = "HEAD") -> tuple[str, Optional[bool]]:
    """(the last commit up to `at` that changed `experiment`, whether the file differs from HEAD
    now), or (UNKNOWN, None) outside a git checkout or for a file git does not track."""
    directory = Path(experiment).resolve().parent
    at = "HEAD" if at == provenance.UNKNOWN else at
    commit = provenance.git(directory, "log", "-1", "--format=%H", at, "--",
                            Path(experiment).name)
    if not commit:
        return provenance.UNKNOWN, None
    changed = provenance.git(directory, "status", "--porcelain", "--", Path(experiment).name)
    return commit, None if changed is None else bool(changed)


def record(study, size: str, experiment: Optional[str | Path],
           code: str = "HEAD") -> dict[str, Any]:
    """The pre-registration record of a verdict judged with `study` (loaded at `size`), whose
    runs were trained by the code at commit `code` (the provenance's): the expectations commit
    is the last change to the experiment file up to that code."""
    commit, changed = (experiment_commit(Path(experiment), code) if experiment
                       else (provenance.UNKNOWN, None))
    return {"schema": SCHEMA, "study": study.name, "size": size,
            "fingerprint": study.fingerprint(),
            "experiment": None if experiment is None else Path(experiment).name,
            "expectations_commit": commit, "experiment_changed_since": changed}


def check_results(results_dir: Path, experiments_dir: Path, repo: Path) -> list[str]:
    """What is wrong with the committed results' pre-registration, one line each ([] if
    nothing): a verdict without a record; a record whose fingerprint is not its experiment
    file's today (an expectation moved after the run); an expectations commit that also holds
    results, or that does not come before the code the results were produced by."""
    problems = []
    for verdict in sorted(Path(results_dir).glob("*_verdict.json")):  # record.FILE
        name = verdict.name[:-len("_verdict.json")]
        entry = read(Path(results_dir) / f"{name}_{FILE}")
        if entry is None:
            problems.append(f"{name}: no {name}_{FILE} beside its verdict: re-run the study")
            continue
        today = loading.load_study(Path(experiments_dir) / f"{name}.py", entry["size"])
        if today.fingerprint() != entry["fingerprint"]:
            problems.append(f"{name}: judged with fingerprint {entry['fingerprint']}, but "
                            f"experiments/{name}.py's is {today.fingerprint()} today: its "
                            "design changed after the run; re-run it and commit the results")
        problems += _commit_order(name, entry, Path(results_dir), Path(repo))
    return problems


def _commit_order(name: str, entry: Mapping[str, Any], results_dir: Path, repo: Path) -> list[str]:
    expectations = entry["expectations_commit"]
    if expectations == provenance.UNKNOWN:
        return [f"{name}: its expectations' commit is unknown (run outside a git checkout)"]
    files = provenance.git(repo, "show", "--name-only", "--format=", expectations)
    if files is None:
        return [f"{name}: commit {expectations} is not in this repository's history"]
    mixed = [f for f in files.splitlines() if f.startswith("experiments/results/")]
    problems = [f"{name}: its expectations' commit {expectations[:12]} also holds results "
                f"({mixed[0]}, ...): commit a study's design alone"] if mixed else []
    produced = provenance.read(results_dir / f"{name}_{provenance.FILE}")
    code = (produced or {}).get("code", {}).get("commit", provenance.UNKNOWN)
    if code == provenance.UNKNOWN:
        return problems + [f"{name}: the commit that produced its results is not recorded"]
    if provenance.git(repo, "merge-base", "--is-ancestor", expectations, code) is None:
        problems.append(f"{name}: its expectations' commit {expectations[:12]} does not come "
                        f"before the code its results came from ({code[:12]})")
    elif design_at(repo, code, name, entry["size"]) != entry["fingerprint"]:
        problems.append(f"{name}: the design it was judged with (fingerprint "
                        f"{entry['fingerprint']}) is not experiments/{name}.py's at the code "
                        f"its results came from ({code[:12]}): it changed after the run")
    return problems


def design_at(repo: Path, commit: str, name: str, size: str) -> Optional[str]:
    """The fingerprint of experiments/<name>.py as committed at `commit` (experiments/ and
    configs/ of that commit, loaded by today's package), or None if it cannot be read."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "experiments",
                                  "configs"], capture_output=True, timeout=60)
        if archive.returncode:
            return None
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True, timeout=60)
        experiment = Path(tmp) / "experiments" / f"{name}.py"
        return (loading.load_study(experiment, size, judgeable=False).fingerprint()
                if experiment.is_file() else None)

"""Pre-registration the tool checks: what a verdict was judged against, recorded beside it.

A study's design (claim, variants, seeds, metrics, expectations and thresholds, base config,
the analyses' checks) has a fingerprint (`Study.fingerprint`). Each report writes
`preregistration.json` beside the verdict: that fingerprint and the size.
tests/studies/test_preregistration.py then fails when a committed verdict's fingerprint differs
from its experiment file's today, and when git history breaks the rule of docs/verdicts.md
("Pre-registration, read from history"): today's design was committed before the study's first
results, and every move of the design at or after them is named by an amendment. Re-running to
identical numbers after moving a threshold therefore does not pass unseen.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from transformer_jax.studies import history, loading, provenance
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
    file's today (an expectation moved after the run); a design that moved at or after the
    study's first results commit without an amendment naming that commit (`history_problems`,
    docs/verdicts.md); runs trained under another training design than today's."""
    problems, walk = [], history.Repository(Path(repo))
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
        problems += history_problems(walk.history(name, entry["size"], today.fingerprint()),
                                     tuple(today.amendments))
        problems += _trained_as_today(walk, name, entry["size"], today, Path(results_dir))
    return problems


def history_problems(past: history.History, amendments: tuple[str, ...]) -> list[str]:
    """The rule: today's design is committed, strictly before the first results commit, and
    every later move of the fingerprint (the design commit itself, if it came with or after the
    results) is named by an amendment (a hex prefix of >= 7 characters of the commit)."""
    name = past.name
    if past.results_commit is None:
        return [f"{name}: no commit adds experiments/results/{name}_verdict.json (or its "
                "summary): commit the results"]
    if past.design_commit is None:
        return [f"{name}: no commit holds experiments/{name}.py's design of today: commit it"]
    problems = []
    for change in past.late:
        if history.names_commit(amendments, change.commit):
            continue
        today = ", today's design" if change.commit == past.design_commit else ""
        problems.append(f"{name}: its design moved ({change.before} -> {change.after}{today}) in "
                        f"{change.commit[:12]}, not before its first results "
                        f"({past.results_commit[:12]}), and no amendment names {change.commit[:7]}")
    return problems


def _trained_as_today(walk: history.Repository, name: str, size: str, today,
                      results_dir: Path) -> list[str]:
    """Runs may be re-judged under amended expectations, not reused for another training
    design: the training fingerprint at the code that produced them must be today's."""
    produced = provenance.read(results_dir / f"{name}_{provenance.FILE}")
    code = (produced or {}).get("code", {}).get("commit", provenance.UNKNOWN)
    if code == provenance.UNKNOWN:
        return [f"{name}: the commit that produced its results is not recorded"]
    if code not in walk.order:
        return [f"{name}: commit {code[:12]}, which produced its results, is not in this "
                "repository's history"]
    trained = walk.designs_at(code, name, size)[1]
    if trained != today.training_fingerprint():
        return [f"{name}: its runs were trained with training fingerprint {trained} (the code at "
                f"{code[:12]}), experiments/{name}.py's is {today.training_fingerprint()} today: "
                "what is trained changed after the run; re-run it"]
    return []


def registration(experiment: Path, size: str) -> Optional[history.History]:
    """The history of `experiment` (a checkout's experiments/<name>.py) judged against its
    design today at `size`, for its page: the design commit and the first results commit; None
    outside a git checkout (a copied experiments/, a sweep's directory)."""
    experiment = Path(experiment).resolve()
    top = provenance.git(experiment.parent, "rev-parse", "--show-toplevel")
    if top is None or experiment.parent != Path(top).resolve() / "experiments":
        return None
    today = loading.load_study(experiment, size).fingerprint()
    return history.Repository(Path(top)).history(experiment.stem, size, today)

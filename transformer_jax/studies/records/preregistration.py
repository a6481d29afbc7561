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

import json

from pathlib import Path
from typing import Any, Optional

from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design import loading, measured_code
from transformer_jax.studies.records import history, provenance
# read and write: one JSON record format, provenance's
from transformer_jax.studies.records.provenance import read, write  # noqa: F401

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
            "measured_code": measured_code.digest(study.measured_code(),
                                                  measured_code.read_disk),
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
        problems += history_problems(walk.history(name, entry["size"], walk.today(today)),
                                     tuple(today.amendments))
        problems += _trained_as_today(walk, name, entry["size"], today, Path(results_dir))
        problems += _measured_as_today(walk, name, today, Path(results_dir))
        problems += kind_problems(walk, name, entry["size"], today)
    return problems


def kind_problems(walk: history.Repository, name: str, size: str, today) -> list[str]:
    """The rules of kinds (docs/verdicts.md, "Kinds of expectation"), read from history: a
    finding was written before any results of what it judges were committed, and was a finding
    at every commit since its study's first results; a finding declared a check or post hoc
    after those results is named by an amendment."""
    results = walk.results_commits(name)
    if not results:
        return []
    versions = [(c, walk.loaded_at(c, name, size)) for c in walk.touching]
    versions = [(c, v) for c, v in versions if isinstance(v, tuple)]
    problems = []
    for e in today.expectations:
        key = study_lib.expectation_key(e)
        kinds = [(c, v[3][key]) for c, v in versions if key in v[3]]
        if not kinds:
            continue
        written = kinds[0][0]
        late = [(c, k) for c, k in kinds if not walk.strictly_before(c, results[0])]
        if e.kind is study_lib.Kind.FINDING:
            seen = _seen_before(walk, name, size, e, today, written, results)
            if seen:
                problems.append(f"{name}: {e.text!r} is a finding, but it was written in "
                                f"{written[:12]}, after results of its variants were committed "
                                f"({seen[:12]}): declare it Kind.POST_HOC")
            then = [k for c, k in kinds if not walk.strictly_before(results[0], c)][-1:]
            was = [k for k in then + [k for _, k in late] if k != study_lib.Kind.FINDING.value]
            if was:
                problems.append(f"{name}: {e.text!r} was a {was[0]} when or after its results "
                                "were committed: nothing becomes a finding after its results")
            continue
        moved = [c for (c, k), (_, before) in zip(kinds[1:], kinds) if k != before]
        problems += [f"{name}: {e.text!r} was declared {e.kind.value} in {c[:12]}, after its "
                     f"results, and no amendment names {c[:7]}" for c in moved
                     if not walk.strictly_before(c, results[0])
                     and not history.names_commit(tuple(today.amendments), c)]
    return problems


def _seen_before(walk: history.Repository, name: str, size: str, e, today, written: str,
                 results: list[str]) -> Optional[str]:
    """The first results commit, at or before the commit that wrote `e`, holding the metric
    `e` judges for runs of every variant it judges trained as today's are (None: its values
    could not have been seen)."""
    for commit in results:
        if commit != written and not walk.strictly_before(commit, written):
            continue
        if e.metric not in walk.summary_columns(commit, name):
            continue
        then = walk.loaded_at(commit, name, size)
        if isinstance(then, tuple) and all(
                variant_design(then[0], v) == variant_design(today.design(), v)
                for v in e.variants()):
            return commit
    return None


def variant_design(design: dict[str, Any], variant: str) -> Optional[str]:
    """What a variant's runs (a tuned arm's: its candidates') are trained as, in a study's
    design (Study.design), as one string (None: the design has no such variant)."""
    names = design.get("tuned", {}).get(variant, [variant])
    if any(n not in design["variants"] for n in names):
        return None
    return json.dumps({"base": design["base"], "seeds": design["seeds"],
                       "plateau": design.get("plateau"),
                       "variants": {n: design["variants"][n] for n in names}},
                      sort_keys=True, default=str)


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


def _measured_as_today(walk: history.Repository, name: str, today,
                       results_dir: Path) -> list[str]:
    """Judging again cannot compute an analysis, a data set or an evaluation anew: the code
    that computes what the study judges, at the commit that produced its results, must be
    today's (none to compare where that commit predates the fingerprint holding it)."""
    produced = provenance.read(results_dir / f"{name}_{provenance.FILE}")
    code = (produced or {}).get("code", {}).get("commit", provenance.UNKNOWN)
    if code not in walk.order:
        return []  # _trained_as_today names it
    refs = today.measured_code()
    then = walk.measured_at(code, refs)
    if then == history.NOT_TRACKED:
        return []
    now = measured_code.digest(refs, measured_code.read_disk)
    if then == now:
        return []
    return [f"{name}: the code that computes what it judges (studies/design/measured_code.py) "
            f"is not what produced its results (at {code[:12]}): "
            f"{', '.join(changed_refs(walk, code, refs)) or 'a file of it'} changed; re-run it"]


def changed_refs(walk: history.Repository, commit: str, refs) -> list[str]:
    """'file:name' of each piece of measured code that differs between `commit` and today."""
    return [f"{path}:{name}" for path, name in refs
            if walk.measured_at(commit, ((path, name),))
            != measured_code.digest(((path, name),), measured_code.read_disk)]


def registration(experiment: Path, size: str) -> Optional[history.History]:
    """The history of `experiment` (a checkout's experiments/<name>.py) judged against its
    design today at `size`, for its page: the design commit and the first results commit; None
    outside a git checkout (a copied experiments/, a sweep's directory)."""
    experiment = Path(experiment).resolve()
    top = provenance.git(experiment.parent, "rev-parse", "--show-toplevel")
    if top is None or experiment.parent != Path(top).resolve() / "experiments":
        return None
    walk = history.Repository(Path(top))
    return walk.history(experiment.stem, size, walk.today(loading.load_study(experiment, size)))

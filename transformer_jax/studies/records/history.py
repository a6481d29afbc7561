"""A study's design through git history: the fingerprint of experiments/<name>.py at every commit
that could move it, the first commit with today's design, and the first commit with its results.

Each old version is loaded by today's package (the fingerprint is today's definition), from the
commit's experiment files and configs/, written into a temporary directory; a version is loaded
once per (its files' blobs, size). One that no longer loads is UNREADABLE:<hash of the files it
names, transitively: itself, the experiment and config files it loads>: it cannot show that it
kept the design, so each new unreadable version counts as a change like any other, and one after
the study's results must be named too.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import re
import tempfile
import warnings
from pathlib import Path
from typing import Optional

from transformer_jax._moved import removed_paths_readable
from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design import loading, measured_code, syntax
from transformer_jax.studies.records import provenance

def built_file_names(text: str) -> frozenset[str]:
    """'<word>.py' for each bare word that a statement calling load_module names: the sibling
    files it loads by a built name (`load_module(HERE / f"{n}.py") for n in ("lm_positions",
    "lm_scaling")`), which the *.py names in its text miss; none where the text does not parse."""
    return frozenset(f"{word}.py" for word in syntax.load_module_strings(syntax.parsed(text))
                     if re.fullmatch(r"\w+", word))


ABSENT, UNREADABLE = "absent", "unreadable"  # a fingerprint where the file is missing or broken
# The measured code's digest at a commit before the fingerprint held it (measured_code.py did
# not exist there): one unknown value, so history sees it move once, at the commit that added it.
NOT_TRACKED = "not tracked"
# where measured_code.py was first added (it moved to studies/design/ later, leaving its old
# path behind): the commit that added it is where the fingerprint began to hold that code
TRACKER = "transformer_jax/studies/measured_code.py"
RESULTS = "experiments/results"
COMMIT_NAME = re.compile(r"\b[0-9a-f]{7,40}\b")  # how an amendment names a commit: a hex prefix


@dataclasses.dataclass(frozen=True)
class Change:
    """A commit at which the study's fingerprint moved (from `before` to `after`)."""

    commit: str
    before: str
    after: str


@dataclasses.dataclass(frozen=True)
class History:
    name: str
    design_commit: Optional[str]  # the first commit with today's fingerprint
    results_commit: Optional[str]  # the first commit that added a results file it owns
    changes: tuple[Change, ...]  # every move of the fingerprint, oldest first
    late: tuple[Change, ...]  # the moves at or after results_commit


# Results files of the project, not of one study: the index (pages.py), the suites' times
# (suite_time.py) and the pretrained checkpoint's parity record (scripts/pretrained_parity.py)
PROJECT_RESULTS = ("README.md", "suite-*.json", "pretrained_parity.json")


def unowned(results_dir: Path, studies: list[str]) -> list[str]:
    """The files of a results directory that no study owns and the project does not declare:
    each must count for a study's first results, or be one of PROJECT_RESULTS."""
    return [p.name for p in sorted(Path(results_dir).iterdir()) if p.is_file()
            and owner(p.name, studies) is None
            and not any(fnmatch.fnmatch(p.name, pattern) for pattern in PROJECT_RESULTS)]


def owner(file_name: str, studies: list[str]) -> Optional[str]:
    """The study a results file belongs to: the longest study name it starts with, followed by
    '_' or '.' (None: no study's)."""
    found = [s for s in studies if file_name.startswith((f"{s}_", f"{s}."))]
    return max(found, key=len) if found else None


def names_commit(amendments: tuple[str, ...], commit: str) -> bool:
    """Whether an amendment names `commit` by a hex prefix of at least 7 characters."""
    return any(commit.startswith(word) for line in amendments for word in COMMIT_NAME.findall(line))


_TREES: dict[str, dict[str, str]] = {}  # commit -> path -> blob
_BLOBS: dict[str, str] = {}  # blob -> text
_NAMES: dict[str, frozenset[str]] = {}  # blob -> the *.py names in it
_DESIGNS: dict[tuple, tuple[str, str]] = {}  # (name, size, (path, blob)s) -> fingerprints
_PARENTS: dict[str, list[str]] = {}  # commit -> its parents
_ANCESTORS: dict[str, frozenset[str]] = {}  # commit -> itself and every commit before it
_COLUMNS: dict[tuple[str, str], list[str]] = {}  # (commit, study) -> its summary's columns
_MEASURED: dict[tuple, str] = {}  # (refs, their files' blobs) -> the measured code's digest
_LOADS: dict[tuple[str, str], tuple] = {}  # (commit, path) -> (path, blob)s it loads by name
_AT: dict[tuple[str, str, str], tuple[str, str]] = {}  # (commit, name, size) -> designs_at
_HEADS: dict[tuple[str, str], tuple] = {}  # (repo, HEAD) -> what __init__ reads of the graph


class Repository:
    """One repository's history, read once per check: commit order, trees, blobs, fingerprints."""

    def __init__(self, repo: Path):
        self.repo = Path(repo)
        # A page, a check and a re-judge each open the repository once per study: the graph
        # below is read once per HEAD (its reading took 13 git calls, ~60 ms, each time)
        head = provenance.git(self.repo, "rev-parse", "HEAD")
        key = (str(self.repo.resolve()), head or "")
        if head is None or key not in _HEADS:
            self._read_graph()
            _HEADS[key] = (self.order, self.tracked, self.touching, self.studies)
        self.order, self.tracked, self.touching, self.studies = _HEADS[key]
        # Commits, blobs and trees are named by their content's hash, so what was read from them
        # holds in any repository for the life of the process: one cache for all checks.
        self._trees, self._blobs, self._designs = _TREES, _BLOBS, _DESIGNS

    def _read_graph(self) -> None:
        """Commit order, the commits since the fingerprint held the measured code, those that
        could move a design, and the studies at HEAD."""
        self.order = {c: i for i, c in enumerate(self._lines("rev-list", "--topo-order",
                                                            "--reverse", "HEAD"))}
        added = self._lines("log", "--diff-filter=A", "--format=%H", "HEAD", "--", TRACKER)
        self.tracked = set(self._lines("rev-list", "--ancestry-path", f"{added[-1]}..HEAD")
                           ) | {added[-1]} if added else set()
        # what can move a design: its experiment and config files, and (since the fingerprint
        # holds it) the package, where the code that computes the judged values lives
        touching = set(self._lines("rev-list", "HEAD", "--", ":(glob)experiments/*.py",
                                   "configs"))
        touching |= set(self._lines("rev-list", "HEAD", "--", "transformer_jax")) & self.tracked
        self.touching = [c for c in self.order if c in touching]
        self.studies = sorted(Path(p).stem for p in self._lines(
            "ls-tree", "--name-only", "HEAD", "experiments/") if p.endswith(".py"))

    def _lines(self, *args: str) -> list[str]:
        out = provenance.git(self.repo, *args)
        return out.splitlines() if out else []

    def _tree(self, commit: str) -> dict[str, str]:
        """path -> blob of experiments/*.py and configs/**/*.py at `commit`."""
        if commit not in self._trees:
            rows = self._lines("ls-tree", "-r", commit, "--", "configs", "experiments")
            paths = (r.split("\t") for r in rows)
            self._trees[commit] = {path: meta.split()[2] for meta, path in paths
                                   if path.endswith(".py") and "/results/" not in path}
        return self._trees[commit]

    def _package(self, commit: str) -> dict[str, str]:
        """path -> blob of the package's files at `commit`."""
        key = f"package:{commit}"
        if key not in self._trees:
            rows = self._lines("ls-tree", "-r", commit, "--", "transformer_jax")
            self._trees[key] = {path: meta.split()[2] for meta, path in
                                (r.split("\t") for r in rows) if path.endswith(".py")}
        return self._trees[key]

    def measured_at(self, commit: str, refs: tuple[tuple[str, str], ...]) -> str:
        """The digest of the code `refs` names, as it was at `commit` (NOT_TRACKED before the
        fingerprint held it)."""
        if commit not in self.tracked:
            return NOT_TRACKED
        package = self._package(commit)
        key = (refs, tuple(package.get(path) for path in sorted({p for p, _ in refs})))
        if key not in _MEASURED:
            _MEASURED[key] = measured_code.digest(
                refs, lambda path: self._blob(package[path]) if path in package else None)
        return _MEASURED[key]

    def today(self, study) -> str:
        """The fingerprint the history is held against: `study`'s design today, with its measured
        code as this repository's working tree holds it (NOT_TRACKED in a repository whose history
        never held the package that measures, e.g. a user's own repository of studies)."""
        if not self.tracked:
            return study_lib.design_fingerprint(study.design(), NOT_TRACKED)

        def read(path: str) -> Optional[str]:
            try:
                return (self.repo / path).read_text()
            except OSError:
                return None
        return study_lib.design_fingerprint(study.design(),
                                            measured_code.digest(study.measured_code(), read))

    def _blob(self, blob: str) -> str:
        if blob not in self._blobs:
            self._blobs[blob] = provenance.git(self.repo, "cat-file", "blob", blob) or ""
        return self._blobs[blob]

    def _file_names(self, blob: str) -> frozenset[str]:
        """The *.py names a file's text mentions (the files it may load)."""
        if blob not in _NAMES:
            text = self._blob(blob)
            _NAMES[blob] = frozenset(re.findall(r"\b\w+\.py\b", text)) | built_file_names(text)
        return _NAMES[blob]

    def _loaded(self, commit: str, path: str) -> tuple[tuple[str, str], ...]:
        """(path, blob) of the files `path` loads by name at `commit`, and those they load:
        another experiment file (load_module(HERE / "lm_positions.py")) or a config file."""
        if (commit, path) in _LOADS:
            return _LOADS[(commit, path)]
        tree = self._tree(commit)
        by_name: dict[str, list[str]] = {}
        for other in tree:
            by_name.setdefault(other.rsplit("/", 1)[-1], []).append(other)
        found, todo = {path: tree[path]}, [path]
        while todo:
            for name in self._file_names(tree[todo.pop()]):
                for other in by_name.get(name, ()):
                    if other not in found:
                        found[other] = tree[other]
                        if other.startswith("experiments/"):  # a config file loads no other
                            todo.append(other)
        _LOADS[(commit, path)] = tuple(sorted(found.items()))
        return _LOADS[(commit, path)]

    def designs_at(self, commit: str, name: str, size: str) -> tuple[str, str]:
        """(fingerprint, training fingerprint) of experiments/<name>.py at `commit`: ABSENT
        where the file is not there, UNREADABLE:<version> where today's package cannot load it
        (<version>: a hash of the files it loads, so an edit to any of them is a new one)."""
        key = (commit, name, size)
        if key not in _AT:  # a history asks for each commit and its parents: once per process
            found = self.loaded_at(commit, name, size)
            if found is None:
                _AT[key] = ABSENT, ABSENT
            elif isinstance(found, str):
                _AT[key] = found, found
            else:
                design, training, refs = found[:3]
                _AT[key] = (study_lib.design_fingerprint(design, self.measured_at(commit, refs)),
                            training)
        return _AT[key]

    def loaded_at(self, commit: str, name: str, size: str):
        """What today's package reads of experiments/<name>.py at `commit`: (design, training
        fingerprint, measured refs, {expectation's design: its kind}); None where the file is
        not there; UNREADABLE:<version> where it cannot be loaded (<version>: a hash of the
        files it loads, so an edit to any of them is a new one)."""
        tree = self._tree(commit)
        path = f"experiments/{name}.py"
        if path not in tree:
            return None
        loaded = self._loaded(commit, path)
        files = tuple(sorted({*loaded, *((p, b) for p, b in tree.items()
                                         if p.startswith("configs/"))}))
        key = (name, size, files)
        if key not in self._designs:
            self._designs[key] = self._load(name, size, files)
        found = self._designs[key]
        if found is not None:
            return found
        return f"{UNREADABLE}:{hashlib.sha256(repr(loaded).encode()).hexdigest()[:8]}"

    def _load(self, name: str, size: str, files: tuple[tuple[str, str], ...]):
        """Today's package loads the study from these (path, blob) files, in a scratch root
        (None: it cannot)."""
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for path, blob in files:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(self._blob(blob))
            try:
                # an old file imports old paths: a deprecated one warns, a removed one is read
                with warnings.catch_warnings(), removed_paths_readable():
                    warnings.simplefilter("ignore")
                    study = loading.load_study(root / "experiments" / f"{name}.py", size,
                                               judgeable=False)
                    kinds = {study_lib.expectation_key(e): e.kind.value
                             for e in study.expectations}
                    return (study.design(), study.training_fingerprint(),
                            study.measured_code(), kinds)
            except Exception:  # noqa: BLE001 (an old file may fail in any way: it is unreadable)
                return None

    def results_commit(self, name: str) -> Optional[str]:
        """The first commit that added any results file the study owns (`owner`: so
        batchnorm's are not batchnorm_text's)."""
        return next(iter(self.results_commits(name, added_only=True)), None)

    def results_commits(self, name: str, added_only: bool = False) -> list[str]:
        """Every commit, oldest first, that added (or, unless `added_only`, changed) a results
        file the study owns."""
        lines = self._lines("log", "--topo-order", "--reverse", "--format=commit %H",
                            "--name-only", *(["--diff-filter=A"] if added_only else []), "HEAD",
                            "--", f"{RESULTS}/{name}_*", f"{RESULTS}/{name}.*")
        found, commit = [], None
        for line in lines:
            if line.startswith("commit "):
                commit = line.split()[1]
            elif line and owner(Path(line).name, self.studies) == name and commit not in found:
                found.append(commit)
        return found

    def summary_columns(self, commit: str, name: str) -> list[str]:
        """The columns of the study's summary.csv at `commit` (the metrics its results showed;
        []: none there)."""
        key = (commit, name)
        if key not in _COLUMNS:  # a commit's files never change: one git call per pair
            text = provenance.git(self.repo, "show", f"{commit}:{RESULTS}/{name}_summary.csv")
            _COLUMNS[key] = text.splitlines()[0].split(",") if text else []
        return _COLUMNS[key]

    def history(self, name: str, size: str, today: str) -> History:
        """The study's fingerprint through history, judged against `today`'s fingerprint. A
        commit moves the design when its fingerprint is none of its parents': so a merge that
        takes one side's design moves nothing, and a branch's own commits, which did not see
        what the other line changed meanwhile, are judged against their own parents."""
        changes, design = [], None
        for commit in self.touching:
            after = self.designs_at(commit, name, size)[0]
            before = [self.designs_at(p, name, size)[0] for p in self._parents(commit)] or [ABSENT]
            if after not in before:
                changes.append(Change(commit, before[0], after))
            if after == today and design is None:
                design = commit
        results = self.results_commit(name)
        late = tuple(c for c in changes if results and not self.strictly_before(c.commit, results))
        return History(name, design, results, tuple(changes), late)

    def _parents(self, commit: str) -> list[str]:
        if commit not in _PARENTS:  # a commit's parents never change: the graph read once
            for line in self._lines("rev-list", "--parents", commit):
                head, *parents = line.split()
                _PARENTS[head] = parents
        return _PARENTS[commit]

    def strictly_before(self, first: str, second: str) -> bool:
        """Whether commit `first` is an ancestor of `second` and not `second` itself (from the
        parent graph, read once: a git call per pair took 1,646 calls a check)."""
        return first != second and first in self._ancestors(second)

    def _ancestors(self, commit: str) -> frozenset[str]:
        if commit not in _ANCESTORS:
            seen, todo = set(), [commit]
            while todo:
                for parent in self._parents(todo.pop()):
                    if parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
            _ANCESTORS[commit] = frozenset(seen | {commit})
        return _ANCESTORS[commit]

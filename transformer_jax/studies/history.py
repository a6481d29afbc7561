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
import hashlib
import re
import tempfile
import warnings
from pathlib import Path
from typing import Optional

from transformer_jax.studies import loading, provenance

RESULT_KINDS = ("verdict.md", "verdict.json", "summary.csv", "summary.md")  # what a report adds
ABSENT, UNREADABLE = "absent", "unreadable"  # a fingerprint where the file is missing or broken
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
    results_commit: Optional[str]  # the first commit that added a RESULT_KINDS file
    changes: tuple[Change, ...]  # every move of the fingerprint, oldest first
    late: tuple[Change, ...]  # the moves at or after results_commit


def names_commit(amendments: tuple[str, ...], commit: str) -> bool:
    """Whether an amendment names `commit` by a hex prefix of at least 7 characters."""
    return any(commit.startswith(word) for line in amendments for word in COMMIT_NAME.findall(line))


_TREES: dict[str, dict[str, str]] = {}  # commit -> path -> blob
_BLOBS: dict[str, str] = {}  # blob -> text
_NAMES: dict[str, frozenset[str]] = {}  # blob -> the *.py names in it
_DESIGNS: dict[tuple, tuple[str, str]] = {}  # (name, size, (path, blob)s) -> fingerprints
_PARENTS: dict[str, list[str]] = {}  # commit -> its parents


class Repository:
    """One repository's history, read once per check: commit order, trees, blobs, fingerprints."""

    def __init__(self, repo: Path):
        self.repo = Path(repo)
        self.order = {c: i for i, c in enumerate(self._lines("rev-list", "--topo-order",
                                                            "--reverse", "HEAD"))}
        self.touching = self._lines("rev-list", "--topo-order", "--reverse", "HEAD", "--",
                                    ":(glob)experiments/*.py", "configs")
        # Commits, blobs and trees are named by their content's hash, so what was read from them
        # holds in any repository for the life of the process: one cache for all checks.
        self._trees, self._blobs, self._designs = _TREES, _BLOBS, _DESIGNS

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

    def _blob(self, blob: str) -> str:
        if blob not in self._blobs:
            self._blobs[blob] = provenance.git(self.repo, "cat-file", "blob", blob) or ""
        return self._blobs[blob]

    def _file_names(self, blob: str) -> frozenset[str]:
        """The *.py names a file's text mentions (the files it may load)."""
        if blob not in _NAMES:
            _NAMES[blob] = frozenset(re.findall(r"\b\w+\.py\b", self._blob(blob)))
        return _NAMES[blob]

    def _loaded(self, tree: dict[str, str], path: str) -> tuple[tuple[str, str], ...]:
        """(path, blob) of the files `path` loads by name, and those they load: another
        experiment file (load_module(HERE / "lm_positions.py")) or a config file."""
        found, todo = {path: tree[path]}, [path]
        while todo:
            names = self._file_names(tree[todo.pop()])
            for other, blob in tree.items():
                if other not in found and Path(other).name in names:
                    found[other] = blob
                    if other.startswith("experiments/"):  # a config file loads no other file
                        todo.append(other)
        return tuple(sorted(found.items()))

    def designs_at(self, commit: str, name: str, size: str) -> tuple[str, str]:
        """(fingerprint, training fingerprint) of experiments/<name>.py at `commit`: ABSENT
        where the file is not there, UNREADABLE:<version> where today's package cannot load it
        (<version>: a hash of the files it loads, so an edit to any of them is a new one)."""
        tree = self._tree(commit)
        path = f"experiments/{name}.py"
        if path not in tree:
            return ABSENT, ABSENT
        loaded = self._loaded(tree, path)
        files = tuple(sorted({*loaded, *((p, b) for p, b in tree.items()
                                         if p.startswith("configs/"))}))
        key = (name, size, files)
        if key not in self._designs:
            self._designs[key] = self._load(name, size, files)
        found = self._designs[key]
        if found[0] != UNREADABLE:
            return found
        version = hashlib.sha256(repr(loaded).encode()).hexdigest()[:8]
        return f"{UNREADABLE}:{version}", f"{UNREADABLE}:{version}"

    def _load(self, name: str, size: str, files: tuple[tuple[str, str], ...]) -> tuple[str, str]:
        """Today's package loads the study from these (path, blob) files, in a scratch root."""
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for path, blob in files:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(self._blob(blob))
            try:
                with warnings.catch_warnings():  # an old import path warns; the verdict is the same
                    warnings.simplefilter("ignore")
                    study = loading.load_study(root / "experiments" / f"{name}.py", size,
                                               judgeable=False)
                    return study.fingerprint(), study.training_fingerprint()
            except Exception:  # noqa: BLE001 (an old file may fail in any way: it is unreadable)
                return UNREADABLE, UNREADABLE

    def results_commit(self, name: str) -> Optional[str]:
        """The first commit that added one of the study's RESULT_KINDS files (exact names, so
        batchnorm's are not batchnorm_text's)."""
        paths = [f"experiments/results/{name}_{kind}" for kind in RESULT_KINDS]
        added = self._lines("log", "--topo-order", "--reverse", "--diff-filter=A",
                            "--format=%H", "HEAD", "--", *paths)
        return added[0] if added else None

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
        if commit not in _PARENTS:  # a commit's parents never change: one git call per commit
            line = self._lines("rev-list", "--parents", "-n", "1", commit)[0]
            _PARENTS[commit] = line.split()[1:]
        return _PARENTS[commit]

    def strictly_before(self, first: str, second: str) -> bool:
        """Whether commit `first` is an ancestor of `second` and not `second` itself."""
        return first != second and provenance.git(
            self.repo, "merge-base", "--is-ancestor", first, second) is not None

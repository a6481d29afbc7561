"""The code that computes a judged value is inside the fingerprint
(studies/design/measured_code.py): each side door a referee found (a change to how pretrained_claims
draws its random heads, to a package constant the experiments import, to a task's data generator) is
planted in a scratch clone and must move the fingerprint, as history reads it, of exactly the
studies that use it."""
import collections
import subprocess
from pathlib import Path

import pytest

from transformer_jax.studies.design import measured_code, syntax
from transformer_jax.studies.records import history
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(p.stem for p in (REPO / "experiments").glob("[!_]*.py"))
FLATTENED = {"norm_placement", "residual_flow",
             "residuals",  # import FLAT_ACCURACY
             # through experiments/_depth_remedies.py, a shared file they load
             "depth_remedies_pre", "depth_remedies_post", "depth_remedies_nonorm", "depth_remedies_noresidual",
             # through experiments/_depth_article.py
             "depth_article_pre", "depth_article_post", "depth_article_nonorm",
             # through experiments/_depth.py
             "depth_sweep", "depth_deepest",
             # through experiments/_softmax_plateau.py
             "softmax_plateau_narrow", "softmax_plateau_wide"}


def _synthetic() -> set[str]:
    """The studies that train on generated data (their configs say so)."""
    found = set()
    for name in EXPERIMENTS:
        study = load_study(REPO / "experiments" / f"{name}.py", "tiny")
        kinds = {o.get("data.kind", study.base.data.get("kind", "synthetic"))
                 for o in study.variants.values()}
        if study.evaluate is None and "synthetic" in kinds:
            found.add(name)
    return found


PLANTS = [  # (file, text, planted text, the studies that must move)
    ("transformer_jax/studies/analysis/checkpoint_claims.py",
     "rng.choice(len(every), size, replace=False)", "rng.choice(len(every), size, replace=True)",
     lambda: {"pretrained_claims"}),
    ("transformer_jax/studies/study.py", "FLAT_ACCURACY = 0.02", "FLAT_ACCURACY = 0.07",
     lambda: FLATTENED),
    ("transformer_jax/data/synthetic.py", "lengths = rng.integers(min_len, max_len + 1, size=num)",
     "lengths = rng.integers(min_len, max_len, size=num)", _synthetic),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, list[str]]:
    """A clone of this repository's HEAD with each plant committed on top, one commit each:
    (the clone, [HEAD, then each plant's commit])."""
    root = tmp_path_factory.mktemp("clone")
    git = lambda *a: subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c",  # noqa
                                     "user.email=t@t", *a], capture_output=True, text=True,
                                    check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(root)], check=True)
    commits = [git("rev-parse", "HEAD")]
    for path, text, planted, _ in PLANTS:
        source = (root / path).read_text()
        assert source.count(text) == 1, f"{path}: the plant's text is not there once: {text}"
        (root / path).write_text(source.replace(text, planted))
        git("commit", "-q", "-am", f"plant in {path}")
        commits.append(git("rev-parse", "HEAD"))
    return root, commits


@pytest.mark.parametrize("plant", range(len(PLANTS)), ids=["random heads", "FLAT_ACCURACY",
                                                           "task generator"])
def test_a_planted_change_moves_the_fingerprint_of_exactly_the_studies_that_use_it(scratch,
                                                                                   plant):
    root, commits = scratch
    walk = history.Repository(root)
    before, after = commits[plant], commits[plant + 1]
    moved = {name for name in EXPERIMENTS
             if walk.designs_at(before, name, "default")[0]
             != walk.designs_at(after, name, "default")[0]}
    assert moved == PLANTS[plant][3]()


def test_a_shared_file_loaded_beside_is_followed_and_another_study_is_not(tmp_path):
    (tmp_path / "_shared.py").write_text(
        "from transformer_jax.studies.study import FLAT_ACCURACY\n")
    (tmp_path / "other.py").write_text("from transformer_jax.studies.study import study_schedule\n")
    (tmp_path / "mine.py").write_text(
        "from pathlib import Path\nfrom transformer_jax.studies.study import load_module\n"
        "SHARED = load_module(Path(__file__).parent / '_shared.py')\n"
        "OTHER = load_module(Path(__file__).parent / 'other.py')\n")
    imported = set(measured_code._imported(tmp_path / "mine.py"))
    assert ("transformer_jax/studies/study.py", "FLAT_ACCURACY") in imported
    assert ("transformer_jax/studies/study.py", "study_schedule") not in imported
    (tmp_path / "_shared.py").write_text("SHARED = load_module(Path(__file__).parent / 'mine.py')")
    # a study that a shared file loads is not followed either
    assert measured_code._imported(tmp_path / "_shared.py") == []


def test_todays_fingerprint_reads_the_measured_code_from_disk():
    study = load_study(REPO / "experiments" / "pretrained_claims.py", "default")
    refs = study.measured_code()
    assert ("transformer_jax/studies/analysis/checkpoint_claims.py", "random_distance") in refs
    planted = measured_code.digest(refs, lambda path: measured_code.read_disk(path).replace(
        "replace=False", "replace=True"))
    assert study.fingerprint(planted) != study.fingerprint()
    assert study.fingerprint(measured_code.digest(refs, measured_code.read_disk)) == \
        study.fingerprint()


def test_a_docstring_or_comment_moves_nothing():
    refs = (("transformer_jax/studies/study.py", "flattened"),)
    text = measured_code.read_disk(refs[0][0])
    reworded = text.replace('"""The "flattened" check of a', '"""The flattened check, of a')
    assert reworded != text
    assert measured_code.digest(refs, lambda p: reworded) == \
        measured_code.digest(refs, lambda p: text)


def _reader(files: dict[str, str]):
    return files.get


def test_code_moved_unchanged_keeps_its_digest_and_a_change_still_moves_it(monkeypatch):
    """Issue 67 moves measured files into rooms: with the move in `MOVED`, the digest of today's
    refs reads a commit from before the move at the old path and names both by it."""
    body = "def f(x):\n    return x + 1\n"
    before = _reader({"pkg/old.py": body})
    after = _reader({"pkg/new.py": "import os\n\n\n" + body})  # imports are not f's text
    today, then = (("pkg/new.py", "f"),), (("pkg/old.py", "f"),)
    was = measured_code.digest(then, before)
    assert measured_code.digest(today, after) != was  # a move with no table moves it
    monkeypatch.setattr(measured_code, "MOVED", {"pkg/new.py": ("pkg/old.py",)})
    assert measured_code.digest(today, after) == measured_code.digest(today, before) == was
    changed = _reader({"pkg/new.py": body.replace("+ 1", "+ 2")})
    assert measured_code.digest(today, changed) != was


def test_a_measured_name_imported_through_an_old_paths_shim_is_followed_to_its_new_module(
        monkeypatch):
    """An experiment file that imports a moved module's constant by the old path (a shim that
    hands every name over: transformer_jax/_moved.py) measures it as it did before the move:
    the ref is the constant where it is bound now, whose digest MOVED names by its old path."""
    old, new = "transformer_jax/studies/values.py", "transformer_jax/studies/analysis/values.py"
    files = {old: '__getattr__, __dir__ = moved(__name__, "transformer_jax.studies.analysis.'
                  'values")\n', new: "LIMIT = 0.5\n"}
    monkeypatch.setattr(measured_code, "read_disk", files.get)
    monkeypatch.setattr(measured_code, "_file", lambda m: m.replace(".", "/") + ".py")
    found = {}
    measured_code._add_name((old, "LIMIT"), found, {})
    assert list(found) == [(new, "LIMIT")]
    assert syntax.moved_to(files[new]) is None and syntax.moved_to("x = moved") is None


def test_a_name_moved_alone_is_read_where_it_was_bound_at_each_commit(monkeypatch):
    """A function moved out of a file that stays (report.py's final_value into its own module):
    before the move, the new file may exist without it, and the old one is read."""
    g, h = "def g():\n    return 1\n", "def h():\n    return g()\n"
    before = _reader({"pkg/report.py": g + h, "pkg/values.py": "X = 1\n"})
    after = _reader({"pkg/report.py": "from pkg.values import g\n" + h,
                     "pkg/values.py": "X = 1\n" + g})
    then = (("pkg/report.py", "g"), ("pkg/report.py", "h"))
    today = (("pkg/report.py", "h"), ("pkg/values.py", "g"))
    monkeypatch.setattr(measured_code, "MOVED_NAMES", {("pkg/values.py", "g"): ("pkg/report.py",)})
    was = measured_code.digest(then, before)
    assert measured_code.digest(today, after) == measured_code.digest(today, before) == was
    assert measured_code.digest((("pkg/values.py", "X"),), after) != was
    gone = _reader({"pkg/report.py": h, "pkg/values.py": "X = 1\n"})  # g bound nowhere
    assert measured_code.digest(today, gone) != was


def test_every_results_file_is_a_studys_or_declared_the_projects(tmp_path):
    results = REPO / "experiments" / "results"
    assert history.unowned(results, EXPERIMENTS) == []
    assert history.owner("batchnorm_text_curves.png", EXPERIMENTS) == "batchnorm_text"
    assert history.owner("scaling_large_h200_summary.md", EXPERIMENTS) == "scaling"
    (tmp_path / "stray_notes.md").write_text("x")
    (tmp_path / "suite-main.json").write_text("{}")
    assert history.unowned(tmp_path, EXPERIMENTS) == ["stray_notes.md"]


def test_what_a_run_put_in_a_cache_moves_no_fingerprint(monkeypatch):
    """restore._RESTORED holds the checkpoints an earlier analysis restored: a process that ran
    one (the suite's workers do) must read the same measured code as a fresh one."""
    from transformer_jax.studies.analysis import restore
    path = REPO / "experiments" / "heads.py"
    fresh = load_study(path, "default")
    filled = collections.OrderedDict({("a run",): object()})
    monkeypatch.setattr(restore, "_RESTORED", filled)
    measured_code.forget()  # follow the package again, with the cache filled
    again = load_study(path, "default")
    assert again.measured_code() == fresh.measured_code()
    assert again.fingerprint() == fresh.fingerprint()
    assert ("transformer_jax/studies/analysis/restore.py", "_RESTORED") not in fresh.measured_code()
    assert ("transformer_jax/studies/analysis/restore.py", "KEEP_RESTORED") in fresh.measured_code()


def test_remembering_what_package_code_reaches_changes_no_studys_refs(monkeypatch):
    """measured_code._REACHED keeps what each package function reaches, for the next study's
    load: every study's refs, loaded one after another with it filled (cycles included), are the
    refs of walking every object each time, as before it."""
    measured_code.forget()
    remembered = {n: load_study(REPO / "experiments" / f"{n}.py").measured_code()
                  for n in EXPERIMENTS}
    monkeypatch.setattr(measured_code, "_package_key", lambda obj: None)  # nothing remembered
    walked = {n: load_study(REPO / "experiments" / f"{n}.py").measured_code()
              for n in EXPERIMENTS}
    assert remembered == walked


def test_a_table_written_out_is_a_constant_and_a_cache_built_by_a_call_is_not():
    text = "TABLE = {'a': 1}\nLIST = [1, 2]\nCACHE = collections.OrderedDict()\nMEMO = dict()\n"
    assert [syntax.bound_to_display(text, n) for n in ("TABLE", "LIST", "CACHE", "MEMO")] == \
        [True, True, False, False]

"""The pre-registration rule read from git history (docs/verdicts.md), in a scratch repository:
a design must be committed before its first results, and every later move of it named by an
amendment, so a threshold moved after results and re-run to identical numbers does not pass."""
import json
import shutil
import subprocess
from pathlib import Path

from transformer_jax.studies.records import history, preregistration, provenance
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = '''from pathlib import Path
from transformer_jax.studies.study import Comparison, Expectation, Kind, Study, load_config

REPO = Path(__file__).resolve().parents[1]


def get_study(size):
    base = load_config(REPO / "configs/synthetic.py", "task=sort,tiny")
    return Study(name="toy", claim="scaling helps", published="-", base=base,
                 variants={{"a": {{}}, "b": {{"model.attn_scale": False}}}}, seeds={seeds},
                 metrics=("eval/accuracy",),
                 expectations=(Expectation("a beats b", "eval/accuracy", "a", Comparison.BETTER,
                                           {margin}, b="b"{kind}),{extra}),
                 amendments={amendments!r})
'''


class Scratch:
    """A git repository with configs/ (copied), experiments/toy.py and its results."""

    def __init__(self, root: Path):
        self.root = root
        shutil.copytree(REPO / "configs", root / "configs",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (root / "experiments" / "results").mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.root), "-c", "user.name=t", "-c",
                               "user.email=t@t", *args], capture_output=True, text=True,
                              check=True).stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def design(self, margin=0.02, seeds=(0, 1), amendments=(), kind="", extra=""):
        """`kind`: the expectation's kind (`Kind.CHECK`; '': a finding); `extra`: another
        expectation, as Python."""
        kind = f", kind={kind}, why='a reason'" if kind else ""
        (self.root / "experiments" / "toy.py").write_text(EXPERIMENT.format(
            margin=margin, seeds=seeds, amendments=tuple(amendments), kind=kind, extra=extra))

    def results(self, trained_by: str):
        """The report of a run (identical numbers every time) by the code at `trained_by`."""
        results = self.root / "experiments" / "results"
        study = load_study(self.root / "experiments" / "toy.py", "default")
        (results / "toy_verdict.json").write_text(json.dumps({"accuracy": {"a": 0.9, "b": 0.5}}))
        (results / "toy_summary.csv").write_text("variant,seed,state,steps,eval/accuracy\n"
                                                 "a,0,finished,9,0.9\nb,0,finished,9,0.5\n")
        preregistration.write(results / f"toy_{preregistration.FILE}",
                              {"size": "default", "fingerprint": study.fingerprint()})
        provenance.write(results / f"toy_{provenance.FILE}", {"code": {"commit": trained_by}})

    def problems(self) -> list[str]:
        return preregistration.check_results(self.root / "experiments" / "results",
                                             self.root / "experiments", self.root)


def _registered_then_moved(tmp_path: Path) -> tuple[Scratch, str, str]:
    """Registered at 0.02, results committed, then the threshold moved to 0.3: (repo, the
    registering commit, the moving one)."""
    repo = Scratch(tmp_path)
    repo.design(margin=0.02)
    registered = repo.commit("toy: design")
    repo.results(registered)
    repo.commit("toy: results")
    repo.design(margin=0.3, kind="Kind.POST_HOC")  # set after its values were seen
    return repo, registered, repo.commit("toy: threshold 0.02 -> 0.3")


def _moved_after_results(tmp_path: Path) -> tuple[Scratch, str]:
    """Registered at 0.02, results committed, the threshold moved to 0.3 and re-run."""
    repo, _, moved = _registered_then_moved(tmp_path)
    repo.results(moved)
    repo.commit("toy: re-run, identical numbers")
    return repo, moved


def test_a_design_committed_before_its_results_passes(tmp_path):
    repo = Scratch(tmp_path)
    repo.design()
    registered = repo.commit("toy: design")
    repo.results(registered)
    repo.commit("toy: results")
    assert repo.problems() == []


def test_a_threshold_moved_after_results_and_re_run_to_identical_numbers_fails(tmp_path):
    repo, moved = _moved_after_results(tmp_path)
    problems = repo.problems()
    assert len(problems) == 1 and problems[0].startswith("toy: its design moved (")
    assert f"no amendment names {moved[:7]}" in problems[0]


def test_the_same_move_with_an_amendment_naming_its_commit_passes(tmp_path):
    repo, moved = _moved_after_results(tmp_path)
    repo.design(margin=0.3, kind="Kind.POST_HOC",
                amendments=[f"{moved[:8]}: margin 0.02 -> 0.3; held at 0.02"])
    repo.commit("toy: amendment")  # amendments are not in the fingerprint: nothing moves
    assert repo.problems() == []


def test_an_amendment_naming_another_commit_does_not_pass(tmp_path):
    repo, moved = _moved_after_results(tmp_path)
    other = "0" * 7 if not moved.startswith("0" * 7) else "1" * 7
    repo.design(margin=0.3, kind="Kind.POST_HOC",
                amendments=[f"{other}: margin 0.02 -> 0.3", f"{moved[:6]}: too short"])
    repo.commit("toy: amendment")
    assert [p for p in repo.problems() if f"no amendment names {moved[:7]}" in p]


def test_a_design_committed_together_with_its_results_fails_unless_disclosed(tmp_path):
    repo = Scratch(tmp_path)
    repo.design()
    repo.results("0" * 40)  # the code is fixed below, once the commit exists
    together = repo.commit("toy: design and results")
    repo.results(together)
    repo.commit("toy: provenance")
    problems = repo.problems()
    assert len(problems) == 2  # and its threshold was set with its values in view: post hoc
    assert problems[0].startswith(f"toy: its design moved ({history.ABSENT} -> ")
    assert f", today's design) in {together[:12]}, not before its first results" in problems[0]
    assert problems[1].endswith("declare it Kind.POST_HOC")
    disclosed = [f"{together[:7]}: design committed with its results"]
    repo.design(kind="Kind.POST_HOC", amendments=disclosed)
    declared = repo.commit("toy: disclose")  # a kind declared after results: named too
    repo.design(kind="Kind.POST_HOC", amendments=[*disclosed, f"{declared[:7]}: post hoc"])
    repo.commit("toy: name the declaration")
    assert repo.problems() == []


def test_runs_of_another_training_design_cannot_be_re_judged(tmp_path):
    """Amended expectations may be judged again on the same runs; changed seeds may not."""
    repo = Scratch(tmp_path)
    repo.design(seeds=(0, 1))
    registered = repo.commit("toy: design")
    repo.results(registered)
    repo.commit("toy: results")
    repo.design(seeds=(0, 1, 2))
    moved = repo.commit("toy: a third seed")
    repo.design(seeds=(0, 1, 2), amendments=[f"{moved[:7]}: a third seed"])
    repo.results(registered)  # re-judged, but on the runs trained with two seeds
    repo.commit("toy: re-judged on the old runs")
    problems = repo.problems()
    assert len(problems) == 1 and problems[0].startswith("toy: its runs were trained with "
                                                         "training fingerprint")


def test_a_version_that_no_longer_loads_is_a_change(tmp_path):
    repo = Scratch(tmp_path)
    (repo.root / "experiments" / "toy.py").write_text("import no_such_module\n")
    broken = repo.commit("toy: a draft")
    (repo.root / "experiments" / "toy.py").write_text("import no_such_module  # again\n")
    again = repo.commit("toy: another draft")
    walk = history.Repository(repo.root)
    first, second = (walk.designs_at(c, "toy", "default")[0] for c in (broken, again))
    assert first.startswith(f"{history.UNREADABLE}:") and second.startswith(f"{history.UNREADABLE}:")
    assert first != second  # an unreadable edit cannot show it kept the design: a change


def test_amended_expectations_may_be_re_judged_on_the_same_runs(tmp_path):
    repo, registered, moved = _registered_then_moved(tmp_path)
    repo.design(margin=0.3, kind="Kind.POST_HOC",
                amendments=[f"{moved[:7]}: margin 0.02 -> 0.3; held at 0.02"])
    repo.results(registered)  # today's fingerprint, judged on the runs of the registered code
    repo.commit("toy: re-judged on the same runs")
    assert repo.problems() == []


def test_a_branch_merged_after_the_line_moved_is_not_read_as_moves(tmp_path):
    """A branch started before an amended move, merged after it (the branch itself never saw
    the move): the walk follows the first-parent line, where only the named move happened. Read
    in topological order, the branch's commits would move the design back, the merge forward."""
    repo, registered, moved = _registered_then_moved(tmp_path)
    repo.git("checkout", "-q", "-b", "side", registered + "~0")
    (repo.root / "configs" / "notes.txt").write_text("a branch's own change")
    repo.commit("side: touches configs/")
    repo.git("checkout", "-q", "main")
    repo.design(margin=0.3, kind="Kind.POST_HOC",
                amendments=(f"{moved[:7]}: the threshold moved after results",))
    repo.commit("toy: name the move")
    repo.git("merge", "-q", "--no-edit", "side")
    repo.results(repo.git("rev-parse", "HEAD"))
    repo.commit("toy: re-run")
    assert repo.problems() == []


def test_a_study_registered_and_run_on_a_branch_then_merged_passes(tmp_path):
    """Design, then results, each its own commit on a branch merged with --no-ff: the merge
    brings both at once to the line it joins, but the design came first where it was made."""
    repo = Scratch(tmp_path)
    (repo.root / "configs" / "notes.txt").write_text("the line before the branch")
    repo.commit("line: start")
    repo.git("checkout", "-q", "-b", "study")
    repo.design(margin=0.02)
    registered = repo.commit("toy: design")
    repo.results(registered)
    repo.commit("toy: results")
    repo.git("checkout", "-q", "main")
    (repo.root / "configs" / "notes.txt").write_text("the line moved on meanwhile")
    repo.commit("line: meanwhile")
    repo.git("merge", "-q", "--no-ff", "--no-edit", "study")
    assert repo.problems() == []


LATER = ('Expectation("b stays under 0.6", "eval/accuracy", "b", Comparison.AT_MOST, 0.6{kind})')


def _results_then_added(tmp_path: Path, kind: str = "") -> tuple[Scratch, str]:
    """Registered, results committed, then an expectation on the same runs added (named)."""
    repo = Scratch(tmp_path)
    repo.design()
    registered = repo.commit("toy: design")
    repo.results(registered)
    repo.commit("toy: results")
    extra = LATER.format(kind=f", kind={kind}, why='set after'" if kind else "")
    repo.design(extra=extra)
    added = repo.commit("toy: another expectation")
    repo.design(extra=extra, amendments=[f"{added[:7]}: an expectation added after results"])
    repo.results(registered)  # judged again on the same runs
    repo.commit("toy: name it, judge again")
    return repo, added


def test_a_finding_written_after_its_values_were_committed_must_be_declared_post_hoc(tmp_path):
    repo, added = _results_then_added(tmp_path)
    problems = repo.problems()
    assert len(problems) == 1 and problems[0].startswith("toy: 'b stays under 0.6' is a finding")
    assert f"written in {added[:12]}" in problems[0] and "declare it Kind.POST_HOC" in problems[0]
    repo2, _ = _results_then_added(tmp_path / "declared", kind="Kind.POST_HOC")
    assert repo2.problems() == []


def test_a_finding_declared_a_check_after_its_results_is_named_by_an_amendment(tmp_path):
    repo = Scratch(tmp_path)
    repo.design()
    repo.results(repo.commit("toy: design"))
    repo.commit("toy: results")
    repo.design(kind="Kind.CHECK")
    declared = repo.commit("toy: a check, not a finding")
    problems = repo.problems()
    assert problems == [f"toy: 'a beats b' was declared check in {declared[:12]}, after its "
                        f"results, and no amendment names {declared[:7]}"]
    repo.design(kind="Kind.CHECK", amendments=[f"{declared[:7]}: a check (why: beside it)"])
    repo.commit("toy: name it")
    assert repo.problems() == []


def test_nothing_becomes_a_finding_after_its_results(tmp_path):
    repo = Scratch(tmp_path)
    repo.design(kind="Kind.CHECK")
    repo.results(repo.commit("toy: design"))
    repo.commit("toy: results")
    repo.design()  # the check, now a finding
    repo.commit("toy: promoted")
    problems = repo.problems()
    assert problems == ["toy: 'a beats b' was a check when or after its results were committed: "
                        "nothing becomes a finding after its results"]


def test_a_sibling_loaded_by_a_built_name_is_found_for_the_scratch_load():
    """experiments/lm_head_dim.py loads lm_positions.py and lm_scaling.py through f"{n}.py": the
    history walker must copy them beside it, or every version of it reads as unreadable."""
    text = ('a, b = (load_module(HERE / f"{n}.py") for n in ("lm_positions", "lm_scaling"))\n'
            'c = load_module(HERE / "x.py")\nname = "depth"\n')
    assert history.built_file_names(text) == {"lm_positions.py", "lm_scaling.py"}
    assert history.built_file_names("def broken(:\n") == frozenset()
    real = (REPO / "experiments" / "lm_head_dim.py").read_text()
    assert history.built_file_names(real) == {"lm_positions.py", "lm_scaling.py"}

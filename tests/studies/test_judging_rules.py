"""The judging rules' version is tied to their code, and every committed verdict was reached
under today's version (issue 49, item 2): changing how verdicts are computed without judging
the committed studies again fails here."""
import ast
import json
import shutil
from pathlib import Path

from transformer_jax.studies import judging_digest, judging_rules
from transformer_jax.studies.design import syntax

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"


def test_the_judging_code_is_the_code_todays_version_names():
    digest = judging_digest.code_digest()
    assert judging_rules.VERSIONS[judging_rules.VERSION] == digest, (
        f"the judging code changed (digest {digest}): add version {judging_rules.VERSION + 1} "
        f"with it to judging_rules.VERSIONS, then re-judge the committed studies "
        f"(python -m transformer_jax.studies.rejudge) in the same change")


def test_versions_are_appended_never_rewritten():
    versions = list(judging_rules.VERSIONS)
    assert versions == list(range(versions[0], versions[0] + len(versions)))
    assert len(set(judging_rules.VERSIONS.values())) == len(versions)


def test_every_committed_verdict_was_reached_under_todays_rules():
    assert judging_rules.stale_records(RESULTS) == []


def test_a_record_under_other_rules_is_found(tmp_path):
    (tmp_path / "a_verdict.json").write_text(json.dumps({"judging_rules": 1}))
    (tmp_path / "b_verdict.json").write_text(json.dumps({}))
    (tmp_path / "c_verdict.json").write_text(json.dumps(
        {"judging_rules": judging_rules.VERSION}))
    found = judging_rules.stale_records(tmp_path)
    assert [line.split(":")[0] for line in found] == ["a_verdict.json", "b_verdict.json"]


RULE = '''def rule(x):
    """{doc}"""
    return x {op} {bound}  # {comment}
'''


def _digest(tmp_path, **parts) -> str:
    """The digest of a room holding one module, `rule` (RULE with `parts`)."""
    text = RULE.format(**{**dict(doc="A docstring.", op=">=", bound="0.05",
                                 comment="a comment"), **parts})
    room = tmp_path / f"room_{abs(hash(text))}"
    room.mkdir()
    (room / "rule.py").write_text(text)
    return judging_digest.code_digest(room)


def test_the_digest_moves_with_a_number_or_an_operator_not_with_words(tmp_path):
    base = _digest(tmp_path)
    assert _digest(tmp_path, doc="Reworded.", comment="another") == base
    assert _digest(tmp_path, bound="0.04") != base
    assert _digest(tmp_path, op=">") != base


def test_the_digest_reads_every_module_of_the_judge_room_found_by_walking_it():
    """No hand-made list: the digest's modules are the room's .py files, subpackages' too."""
    found = {p.relative_to(judging_digest.JUDGE).as_posix() for p in judging_digest.modules()}
    assert found == {p.relative_to(judging_digest.JUDGE).as_posix()
                     for p in judging_digest.JUDGE.rglob("*.py")}
    assert {"stats.py", "multiplicity.py", "expectation.py", "counts.py"} <= found


def _room_copy(tmp_path: Path, name: str) -> Path:
    room = tmp_path / name
    shutil.copytree(judging_digest.JUDGE, room, ignore=shutil.ignore_patterns("__pycache__"))
    return room


def _first_number(source: str) -> tuple[int, int, str]:
    """(line, column, text) of the first number literal outside a docstring in `source`."""
    tree = syntax.without_docstrings(ast.parse(source))
    return min((n.lineno, n.col_offset, ast.get_source_segment(source, n))
               for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and type(n.value) in (int, float))


def test_a_changed_number_in_any_module_of_the_room_moves_the_digest(tmp_path):
    """Each module of the judge room, found by the walk (so a module added later is covered
    too): a reworded docstring or comment leaves the digest; a line of code added, or its first
    number changed (where it has one), moves it."""
    room = _room_copy(tmp_path, "judge")
    base = judging_digest.code_digest(room)
    assert base == judging_digest.code_digest()  # the copy is the room
    numbered = []
    for path in judging_digest.modules(room):
        source = path.read_text()
        path.write_text(source.replace('"""', '"""Reworded. ', 1) + "# a comment\n")
        assert judging_digest.code_digest(room) == base, path.name
        path.write_text(source + "PLANTED = None\n")
        assert judging_digest.code_digest(room) != base, path.name
        if any(isinstance(n, ast.Constant) and type(n.value) in (int, float)
               for n in ast.walk(syntax.without_docstrings(ast.parse(source)))):
            numbered.append(path.name)
            line, column, text = _first_number(source)
            lines = source.splitlines(keepends=True)
            lines[line - 1] = lines[line - 1][:column] + f"({text} + 1)" + \
                lines[line - 1][column + len(text):]
            path.write_text("".join(lines))
            assert judging_digest.code_digest(room) != base, path.name
        path.write_text(source)
    assert {"stats.py", "expectation.py", "multiplicity.py"} <= set(numbered)


def test_a_module_added_to_the_room_moves_the_digest(tmp_path):
    room = _room_copy(tmp_path, "judge")
    base = judging_digest.code_digest(room)
    (room / "new_rule.py").write_text("LIMIT = 0.05\n")
    assert judging_digest.code_digest(room) != base

"""The judging rules' version is tied to their code, and every committed verdict was reached
under today's version (issue 49, item 2): changing how verdicts are computed without judging
the committed studies again fails here."""
import json
from pathlib import Path

from transformer_jax.studies import judging_digest, judging_rules

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


def _digest(monkeypatch, tmp_path, **parts) -> str:
    from transformer_jax.studies.design.loading import load_module

    text = RULE.format(**{**dict(doc="A docstring.", op=">=", bound="0.05",
                                 comment="a comment"), **parts})
    path = tmp_path / f"rule_{abs(hash(text))}.py"
    path.write_text(text)
    monkeypatch.setattr(judging_digest, "judging_code", lambda: [load_module(path).rule])
    return judging_digest.code_digest()


def test_the_digest_moves_with_a_number_or_an_operator_not_with_words(monkeypatch, tmp_path):
    base = _digest(monkeypatch, tmp_path)
    assert _digest(monkeypatch, tmp_path, doc="Reworded.", comment="another") == base
    assert _digest(monkeypatch, tmp_path, bound="0.04") != base
    assert _digest(monkeypatch, tmp_path, op=">") != base

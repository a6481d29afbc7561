"""The suites are declared once (`catalog.DECLARED`): the names the sweep accepts, its --suite
help, and every text that lists suites (scripts/run.sh, scripts/large_studies.sh, README.md,
docs/verdicts.md) agree with that declaration, so a suite added or renamed there fails here until
the texts say so. README and the docs page are written by scripts/suites_page.py; the shell
scripts cannot import Python, so their lists are checked."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import suites_page  # scripts/ is on pytest's path (pytest.ini)
from transformer_jax.config import ConfigError
from transformer_jax.studies.design import catalog
from transformer_jax.studies.design.catalog import DECLARED, SUITES, Suite
from transformer_jax.studies.run import sweep

REPO = Path(__file__).resolve().parents[2]
RUN_SH, LARGE_SH = REPO / "scripts" / "run.sh", REPO / "scripts" / "large_studies.sh"
# A usage comment of scripts/run.sh that lists a suite: "#     name   description".
RUN_SH_ENTRY = re.compile(r"^#     (\S+) {2,}(\S.*)$", re.M)
# Where a text names suites: "--suite=lm", or "--suite=main|lm|...|all" in the usage of a script.
NAMED = re.compile(r"--suite=([A-Za-z_|]+)")
FAKE = Suite("fake", "a suite no text names yet", 30)


def run_sh_problems(text: str, declared: tuple[Suite, ...]) -> list[str]:
    """What scripts/run.sh's list of suites gets wrong against `declared` (empty: nothing)."""
    listed = dict(RUN_SH_ENTRY.findall(text))
    wanted = {s.name: s.description for s in declared}
    return [f"{name}: listed as {listed.get(name)!r}, declared {wanted.get(name)!r}"
            for name in sorted(set(listed) | set(wanted)) if listed.get(name) != wanted.get(name)]


def choice_problems(text: str, declared: tuple[Suite, ...]) -> list[str]:
    """Each 'a|b|c' list of suites in `text` that is not every declared name, in order; each
    single name that is not declared ('NAME' stands for any)."""
    names = [s.name for s in declared]
    problems = []
    for found in NAMED.findall(text):
        if "|" in found and found.split("|") != names:
            problems.append(f"--suite={found}, declared {'|'.join(names)}")
        elif "|" not in found and found not in names + ["NAME"]:
            problems.append(f"--suite={found} is not declared")
    return problems


def test_the_names_come_from_the_declaration():
    assert SUITES == tuple(s.name for s in DECLARED) and len(set(SUITES)) == len(SUITES)
    assert SUITES[0] == "main" and SUITES[-1] == "all"  # the default first, 'all' last
    limits = {s.name: s.limit_minutes for s in DECLARED}
    assert limits.pop("main") == 10 and limits.pop("all") is None
    assert set(limits.values()) == {30}
    assert all(s.description and "\n" not in s.description for s in DECLARED)


def test_a_bad_suite_is_named_with_every_choice():
    with pytest.raises(ConfigError) as error:
        catalog.check_suite("nope")
    assert str(error.value) == f"--suite='nope' is not one of: {', '.join(SUITES)}"


def test_the_sweep_help_lists_every_suite_with_its_description():
    text = sweep.flags.FLAGS["suite"].help
    for suite in DECLARED:
        assert f"{suite.name}: {suite.description}" in text


def test_run_sh_lists_every_declared_suite_and_no_other():
    text = RUN_SH.read_text()
    assert run_sh_problems(text, DECLARED) == []
    assert choice_problems(text, DECLARED) == []


def test_large_studies_sh_offers_every_declared_suite_and_no_other():
    text = LARGE_SH.read_text()
    assert len([f for f in NAMED.findall(text) if "|" in f]) == 2  # the usage and the error
    assert choice_problems(text, DECLARED) == []


@pytest.mark.parametrize("page", ["README.md", "docs/verdicts.md", "docs/scaling-out.md"])
def test_the_pages_name_only_declared_suites(page):
    assert choice_problems((REPO / page).read_text(), DECLARED) == []


def test_readme_and_verdicts_list_what_the_declaration_gives():
    assert suites_page.main(["--check"]) == 0


def test_a_suite_declared_and_not_written_fails_every_check(monkeypatch, capsys):
    """What these tests are for: a new suite is one line in catalog.py, and then every text that
    lists suites is out of date until it names it."""
    declared = DECLARED[:-1] + (FAKE, DECLARED[-1])
    assert run_sh_problems(RUN_SH.read_text(), declared) == [
        "fake: listed as None, declared 'a suite no text names yet'"]
    assert len(choice_problems(LARGE_SH.read_text(), declared)) == 2
    monkeypatch.setattr(suites_page, "DECLARED", declared)
    assert suites_page.main(["--check"]) == 1
    assert capsys.readouterr().err.count("out of date") == 2  # README.md and docs/verdicts.md

"""scripts/generated_pages.py runs every page generator of the project, and --check each one's
check: a generator that writes a page with write_or_check (studies/render/generated.py, or its
region form) and is not in it fails here."""
from __future__ import annotations

import ast
import importlib
import shutil
from pathlib import Path

import pytest

import generated_pages

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
WRITERS = {"write_or_check", "write_or_check_region"}


def _modules_calling_write_or_check() -> set[str]:
    found = set()
    for path in SCRIPTS.rglob("*.py"):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                 and getattr(n.func, "attr", getattr(n.func, "id", None)) in WRITERS]
        if calls:
            found.add(".".join(path.relative_to(SCRIPTS).with_suffix("").parts))
    return found


def _imported_by(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {f"{n.module}.{a.name}" for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.module for a in n.names}


def test_every_page_generator_is_run():
    generators = _modules_calling_write_or_check()
    assert {"pretrained_page", "bench.page", "hooks_page", "suites_page"} <= generators
    assert generators <= _imported_by(SCRIPTS / "generated_pages.py")
    assert "transformer_jax.studies.render.pages" in _imported_by(SCRIPTS / "generated_pages.py")
    assert len(generated_pages.GENERATORS) == len(generators) + 1  # + the results pages


def test_check_runs_every_generators_check_and_reports_the_worst(monkeypatch):
    asked = []
    statuses = iter([0, 1, 0, 2, 0])
    monkeypatch.setattr(generated_pages, "GENERATORS", tuple(
        (name, lambda check: (asked.append(check), next(statuses))[1])
        for name, _ in generated_pages.GENERATORS))
    assert generated_pages.main(["--check"]) == 2 and asked == [True] * 5
    statuses = iter([0] * 5)
    assert generated_pages.main([]) == 0 and asked[5:] == [False] * 5


@pytest.mark.parametrize("module, template", [
    ("hooks_page", "hooks.md.j2"), ("suites_page", "suites_table.md.j2"),
    ("suites_page", "suites_readme.md.j2"), ("pretrained_page", "pretrained.md.j2"),
    ("bench.page", "performance.md.j2")])
def test_a_changed_template_makes_its_page_out_of_date(module, template, tmp_path, monkeypatch,
                                                       capsys):
    """The words of a page live in its template (scripts/templates/): a template edited and its
    page not written again is found by --check, as a changed record is."""
    generator = importlib.import_module(module)
    shutil.copytree(generator.TEMPLATES, tmp_path / "templates")
    planted = tmp_path / "templates" / template
    planted.write_text(planted.read_text() + "planted\n")
    monkeypatch.setattr(generator, "TEMPLATES", tmp_path / "templates")
    assert generator.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err

"""docs/hooks.md's table of hook points is what scripts/hooks_page.py writes from the model's own
`hook_names`, not typed."""
from __future__ import annotations

import hooks_page as page  # scripts/ is on pytest's path (pytest.ini)


def test_the_page_lists_the_models_hook_points():
    assert page.main(["--check"]) == 0


def test_a_retyped_shape_is_found(tmp_path, capsys):
    text = page.PAGE.read_text()
    planted = tmp_path / "hooks.md"
    planted.write_text(text.replace("| [B, H, T, T] |", "| [B, T, H, T] |", 1))
    assert page.main(["--check", f"--page={planted}"]) == 1
    assert "out of date" in capsys.readouterr().err


def test_a_point_that_exists_in_some_models_only_must_say_when(monkeypatch):
    monkeypatch.delitem(page.WHEN, "pooled")
    try:
        page.rows()
    except ValueError as error:
        assert "pooled" in str(error)
    else:
        raise AssertionError("a conditional point without its condition was accepted")

"""studies/render/generated.py, the last step every page generator shares: a marked region is
found and replaced one way, the text outside it kept, and a file that is not what its generator
writes is reported (with the command that writes it) and left as it is under --check."""
from __future__ import annotations

import pytest

from transformer_jax.studies.render import generated

START, END = generated.markers("table")


def test_a_region_holds_its_body_on_lines_of_their_own_and_the_rest_is_kept():
    text = f"# page\n\nhand-written {START}\nold\nlines\n{END} and after\n"
    assert generated.split(text, "table") == (f"# page\n\nhand-written {START}", "\nold\nlines\n",
                                              f"{END} and after\n")
    new = f"# page\n\nhand-written {START}\n| a |\n{END} and after\n"
    assert generated.replace(text, "table", "| a |") == new
    assert generated.replace(text, "table", "| a |\n") == new  # a final newline is not doubled


@pytest.mark.parametrize("text", ["no markers", f"{START}\n", f"{END}\n{START}\n",
                                  f"{START}\n{END}\n{START}\n{END}\n", f"{START}\n{END}\n{END}"])
def test_a_missing_repeated_or_reversed_marker_is_an_error_naming_both(text):
    with pytest.raises(generated.RegionError, match=f"page.md: needs one {START} .* one {END}"):
        generated.replace(text, "table", "x", "page.md")


def test_check_reports_a_stale_or_missing_file_and_writes_nothing(tmp_path, capsys):
    page = tmp_path / "page.md"
    assert generated.write_or_check(page, "new\n", True, "make page") == 1
    assert not page.exists() and "page.md is out of date: run make page" in capsys.readouterr().err
    page.write_text("old\n")
    assert generated.write_or_check(page, "new\n", True, "make page") == 1
    assert page.read_text() == "old\n"
    assert generated.write_or_check(page, "new\n", False, "make page") == 0
    assert page.read_text() == "new\n"
    assert generated.write_or_check(page, "new\n", True, "make page") == 0
    assert capsys.readouterr().err.count("out of date") == 1


def test_a_region_out_of_date_is_reported_and_then_written(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{START}\nold\n{END}\n")
    assert generated.write_or_check_region(page, "table", "new", True, "make page") == 1
    assert generated.write_or_check_region(page, "table", "new", False, "make page") == 0
    assert page.read_text() == f"intro\n{START}\nnew\n{END}\n"
    assert generated.write_or_check_region(page, "table", "new", True, "make page") == 0

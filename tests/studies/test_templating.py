"""studies/render/templating.py, the one Jinja2 environment of every generated page: numbers in
the f-string's formats, a name the data lacks an error (not an empty cell), markdown not
HTML-escaped, and a block tag taking no line of its own."""
from __future__ import annotations

import jinja2
import pytest

from transformer_jax.studies.render import templating


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "page.md.j2").write_text(
        "| a | b |\n|---|---|\n{% for x in rows %}\n| {{ x | fmt('.2g') }} | {{ name | cell }} |\n"
        "{% endfor %}\n")
    return tmp_path


def test_a_page_renders_its_rows_in_the_python_formats(folder):
    text = templating.render("page.md.j2", folder, rows=[0.000123, 2000.0], name="|x| <b>")
    assert text == (f"| a | b |\n|---|---|\n| {0.000123:.2g} | \\|x\\| <b> |\n"
                    f"| {2000.0:.2g} | \\|x\\| <b> |\n")


def test_a_name_the_data_lacks_is_an_error(folder):
    with pytest.raises(jinja2.UndefinedError, match="name"):
        templating.render("page.md.j2", folder, rows=[1.0])


def test_the_packages_templates_are_found_without_a_folder():
    empty = templating.render("headline.md.j2", rows=[])
    assert empty == "| study | claim | verdict |\n|---|---|---|\n"

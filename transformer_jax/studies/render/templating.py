"""Pages rendered from data through Jinja2 templates: a generator computes its records (dicts,
lists, the cells' strings) and a template lays them out as markdown, so the page's words live in
one file a reader can read as the page, and no generator builds markdown line by line.

The package's templates are studies/render/templates/ (package data: setup.py); the scripts'
pages are scripts/templates/. Numbers keep the Python formats they always had, as filters
(`{{ x | fmt(".2g") }}` is f"{x:.2g}"), so a page moved to a template is the same bytes. Blocks
take no line of their own (trim_blocks, lstrip_blocks), a missing name is an error, not an empty
cell (StrictUndefined), and nothing is HTML-escaped: the output is markdown.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Optional

import jinja2

from transformer_jax.studies.render import markdown

FILTERS = {
    "fmt": format,  # format(value, spec): the f-string's `{value:spec}`
    "cell": markdown.cell,  # a table cell: '|' escaped
}


@functools.cache
def environment(folder: Optional[Path] = None) -> jinja2.Environment:
    """The templates of `folder` (None: the package's, studies/render/templates/)."""
    loader = (jinja2.PackageLoader("transformer_jax.studies.render", "templates")
              if folder is None else jinja2.FileSystemLoader(folder))
    env = jinja2.Environment(loader=loader, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                             autoescape=False)
    env.filters.update(FILTERS)
    return env


def render(template: str, folder: Optional[Path] = None, /, **data: Any) -> str:
    """The template of `folder` (None: the package's) rendered from `data` (positional-only
    arguments, so that the data may hold any name)."""
    return environment(folder).get_template(template).render(**data)

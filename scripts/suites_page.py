"""The suites as README.md and docs/verdicts.md list them, written by code from their one
declaration (`transformer_jax.studies.design.catalog.DECLARED`), so that no suite's name or
description is typed twice:

    .venv/bin/python scripts/suites_page.py [--check]

Each page's text goes between `<!-- suites:start -->` and `<!-- suites:end -->`: README.md gets
how many there are inside its paragraph (the front door keeps to 200 lines), docs/verdicts.md a
table of each suite's name, what it holds and its time limit. `--check` writes nothing and fails
when a page is not what the declaration gives.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from transformer_jax.studies.design.catalog import DECLARED, Suite
from transformer_jax.studies.render import generated, templating

REPO = Path(__file__).resolve().parents[1]
REGION = "suites"
START, END = generated.markers(REGION)
COMMAND = "scripts/suites_page.py"
TEMPLATES = REPO / "scripts" / "templates"  # suites_readme.md.j2, suites_table.md.j2


def limit(suite: Suite) -> str:
    return "-" if suite.limit_minutes is None else f"{suite.limit_minutes} min"


def readme_sentence() -> str:
    """How many suites there are, and where they are listed: the front door keeps to 200 lines
    and grows no line with each suite; their names, what each holds and its time limit are
    docs/verdicts.md's table (a new suite still changes the count, so README is out of date)."""
    # one line inside README's paragraph (rewritten_inline wraps it): no newline of its own
    return templating.render("suites_readme.md.j2", TEMPLATES, count=len(DECLARED)).rstrip("\n")


def verdicts_table() -> str:
    suites = [dict(name=s.name, description=s.description, limit=limit(s)) for s in DECLARED]
    return templating.render("suites_table.md.j2", TEMPLATES, suites=suites)


def rewritten(old: str, text: str) -> str:
    """`old` with its one START..END block replaced by `text`, on lines of their own."""
    return generated.replace(old, REGION, text)


def rewritten_inline(old: str, text: str, width: int = 100) -> str:
    """`old` with its one START..END block replaced by `text` inside its paragraph: from the
    paragraph's start to END, wrapped again to `width` columns, each marker kept whole."""
    head, _, rest = generated.split(old, REGION)
    head = head.removesuffix(START)
    line_start = head.rfind("\n\n") + 2 if "\n\n" in head else 0
    whole = [START.replace(" ", "\xa0"), END.replace(" ", "\xa0")]  # textwrap breaks at ASCII spaces
    lines = textwrap.wrap(f"{head[line_start:]}{whole[0]} {text} {whole[1]}", width,
                          break_long_words=False, break_on_hyphens=False)
    wrapped = "\n".join(lines).replace(whole[0], START).replace(whole[1], END)
    return f"{head[:line_start]}{wrapped}{rest.removeprefix(END)}"


PAGES = {"README.md": (readme_sentence, rewritten_inline),
         "docs/verdicts.md": (verdicts_table, rewritten)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is out of date")
    args = parser.parse_args(argv)
    status = 0
    for name, (render, rewrite) in PAGES.items():
        page = REPO / name
        status |= generated.write_or_check(page, rewrite(page.read_text(), render()),
                                           args.check, COMMAND)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""MkDocs hooks (mkdocs.yml `hooks:`) that put the findings into the docs site, taken from the
repository at each build, never copied into docs/ by hand: the README as the site's overview
page, and the committed results (experiments/results/: the index, every study's page, its plots
and files) with the experiment files the pages link to, at the same paths as in the repository.

Their links are written for the repository. Those to files the site holds are pointed at the
site's copy (the README's docs/X.md is the site's X.md); those to other repository files (the
README's source links) point into the repository at `repo_url` when mkdocs.yml sets one, and
are plain text otherwise, so that `mkdocs build --strict` passes and no link 404s. A study
page's table cells may break after '_', '=' and '→' (`breakable_cells`), so that its tables fit
the page at 1400 px. Only MkDocs itself is imported: the site builds from the `docs` extra alone.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
README_PAGE = "overview.md"  # the README's place in the site
RESULTS = "experiments/results"
RECORD_SUFFIX = "_verdict.json"  # a study's record: its page is <study>.md beside it
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")  # [text](target), not an image


def site_files() -> dict[str, Path]:
    """site path -> repository file, of every file the hooks add."""
    results = ROOT / RESULTS
    pages = {f"{p.name[:-len(RECORD_SUFFIX)]}.md" for p in results.glob(f"*{RECORD_SUFFIX}")}
    added = {README_PAGE: ROOT / "README.md"}
    for path in sorted(results.iterdir()):
        if path.is_file() and (path.suffix != ".md" or path.name in pages | {"README.md"}):
            added[f"{RESULTS}/{path.name}"] = path
    for path in sorted((ROOT / "experiments").glob("[!_]*.py")):  # the pages link to them
        added[f"experiments/{path.name}"] = path
    return added


def on_files(files: Files, config) -> Files:
    for src_uri, path in site_files().items():
        files.append(File.generated(config, src_uri, abs_src_path=str(path)))
    return files


def site_path(repo_path: str) -> str:
    """Where the repository file `repo_path` is in the site ('' when it is not there)."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    if repo_path.rstrip("/") == RESULTS:
        return f"{RESULTS}/README.md"
    if repo_path == "README.md":
        return README_PAGE
    return repo_path if repo_path in site_files() else ""


def rewrite_link(text: str, target: str, repo_dir: str, page_dir: str, repo_url: str) -> str:
    """A link of a page whose repository file is in `repo_dir` and whose site file is in
    `page_dir`, pointed at the site's copy, the repository, or left as its text."""
    if re.match(r"^[a-z]+:|^#", target):  # a URL or an anchor on the page
        return f"[{text}]({target})"
    path, _, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(repo_dir, path))
    found = site_path(repo_path)
    if found:
        relative = posixpath.relpath(found, page_dir or ".")
        return f"[{text}]({relative}{'#' + anchor if anchor else ''})"
    if repo_url:
        return f"[{text}]({repo_url.rstrip('/')}/blob/main/{repo_path})"
    return text


def on_page_markdown(markdown: str, page, config, files) -> str:
    """The added pages' links, from the repository's layout to the site's."""
    src_uri = page.file.src_uri
    if src_uri == README_PAGE:
        repo_dir = ""
    elif src_uri.startswith(f"{RESULTS}/"):
        repo_dir = RESULTS
    else:
        return markdown
    page_dir = posixpath.dirname(src_uri)
    repo_url = config.get("repo_url") or ""
    return LINK.sub(lambda m: rewrite_link(m[1], m[2], repo_dir, page_dir, repo_url), markdown)


# A break opportunity (<wbr>) after each of these in a results table's cell: a variant, a metric
# or an override ('res_no_norm_warmup_clip_L24_best', 'model.norm=none', '(1920→2400)') is one
# word to the browser, so a column could not be narrower than its longest name, and a study's
# tables pushed past the text column at 1400 px. Numbers keep whole (docs/stylesheets/extra.css).
BREAK_AFTER = "_=→"
CELL = re.compile(r"(<t[dh][ >].*?</t[dh]>)", re.S)
TEXT = re.compile(r"(?<=>)[^<]+")  # the text between tags, never a tag's attributes


def breakable_cells(html: str) -> str:
    """`html` with <wbr> after each BREAK_AFTER character in the text of its table cells."""
    def cell(match: re.Match) -> str:
        return TEXT.sub(lambda text: re.sub(f"([{BREAK_AFTER}])", r"\1<wbr>", text[0]),
                        match[0])
    return CELL.sub(cell, html)


def on_page_content(html: str, page, config, files) -> str:
    """The study pages' tables, breakable at BREAK_AFTER (not the index's: it fits, and its
    study names read better whole)."""
    uri = page.file.src_uri
    study_page = uri.startswith(f"{RESULTS}/") and uri != f"{RESULTS}/README.md"
    return breakable_cells(html) if study_page else html

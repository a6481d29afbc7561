"""The README and docs/ say what the code does: the trace teaser is the command's real output,
every local link resolves, the docs site builds strictly (a broken link or a renamed symbol in
an API page fails), and every Python and shell snippet runs as pasted, except the ones marked
long-running.

Snippets are found by pytest-codeblocks' parser (`extract_from_file`), so they are marked its
way: `<!--pytest.mark.skip(reason="...")-->` on the line before a block, and
`<!--pytest-codeblocks:expected-output-->` before the block that shows what a Python snippet
prints (its numbers compared to `OUTPUT_TOLERANCE`, `same_output`). Its plugin itself is not
used: it collects only Markdown files named on the command line with `--codeblocks`, which the
suite's `pytest tests/` never does, and runs shell blocks in pytest's directory instead of a
fresh checkout's.
"""
from __future__ import annotations

import contextlib
import io
import json
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytest_codeblocks import extract_from_file

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
RUNNABLE = ("python", "bash", "sh")
SNIPPET_TIMEOUT_S = 120
# A page shows numbers to two decimals; XLA:CPU rounds differently on AVX2 and AVX-512 (one
# instruction set's float sums are not another's), and a snippet that trains for a hundred
# steps carries that into the second decimal. The words and the layout must match exactly.
OUTPUT_TOLERANCE = 0.05
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def section(text: str, heading: str) -> str:
    """The text from `heading` to the next heading of the same or a higher level."""
    level = heading.split()[0]
    assert heading in text, f"no {heading!r} section"
    rest = text[text.index(heading) + len(heading):]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[:end.start()] if end else rest


def fenced(text: str, syntax: str) -> list[str]:
    return re.findall(rf"^```{syntax}\n(.*?)^```", text, flags=re.S | re.M)


# ---- the README as a front door ---------------------------------------------------------------

FRONT_DOOR = ["## Quick start", "## The two commands", "## Trace it by hand", "## The concepts, and where they live",
              "## Use the modules", "## Train one model", "## Run a study", "## Documentation"]


def test_readme_is_a_short_front_door_in_order():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    positions = [text.index(h) for h in FRONT_DOOR]
    assert positions == sorted(positions), "README sections out of order"
    two = fenced(section(text, "## The two commands"), "bash")[0]
    assert [line.split()[0] for line in two.splitlines()] == ["scripts/run.sh", "scripts/test.sh"]
    headline = section(text, "## Run a study")
    assert headline.index("<!-- headline:start -->") < headline.index("<!-- headline:end -->")


def teaser_segments(teaser: str) -> list[list[str]]:
    """The teaser's runs of lines between '...' lines: each must appear whole in the output."""
    segments, current = [], []
    for line in teaser.splitlines():
        if line.strip() == "...":
            segments.append(current)
            current = []
        else:
            current.append(line)
    return [s for s in segments + [current] if s]


def find_in_order(segments: list[list[str]], lines: list[str]) -> list[int]:
    """Where each segment starts in `lines`, each after the previous one; ValueError if not."""
    starts, at = [], 0
    for segment in segments:
        start = next((i for i in range(at, len(lines) - len(segment) + 1)
                      if lines[i:i + len(segment)] == segment), None)
        if start is None:
            raise ValueError(f"not in the output (in order, contiguous): {segment!r}")
        starts.append(start)
        at = start + len(segment)
    return starts


def test_teaser_matching_needs_every_line_in_order():
    lines = ["a", "b", "c", "d"]
    assert find_in_order([["a", "b"], ["d"]], lines) == [0, 3]
    for wrong in ([["a", "c"]], [["d"], ["a"]], [["b", "x"]]):
        with pytest.raises(ValueError):
            find_in_order(wrong, lines)


def test_readme_trace_teaser_is_real_output():
    trace = section(README.read_text(), "## Trace it by hand")
    (command,) = [line for line in fenced(trace, "bash")[0].splitlines() if line.strip()]
    teaser = fenced(trace, "text")[0]
    segments = teaser_segments(teaser)
    assert sum(map(len, segments)) >= 5, "the teaser shows a few lines of the trace"
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                          timeout=SNIPPET_TIMEOUT_S, env=snippet_env())
    assert done.returncode == 0, done.stderr
    find_in_order(segments, done.stdout.splitlines())


# ---- links ------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def local_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:|#", t)]


def test_readme_local_links_resolve():
    links = local_links(README)
    assert any(link.startswith("docs/") for link in links)
    missing = [t for t in links if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_docs_site_builds_strictly(tmp_path):
    """mkdocs fails on a link to a missing page or anchor, a page left out of the nav, or a
    `::: module` whose symbol no longer exists."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    start = time.monotonic()
    done = subprocess.run([str(mkdocs), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=SNIPPET_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "api" / "index.html").exists()
    assert time.monotonic() - start < 60
    # mkdocs.yml's extra_css (wide results tables scroll in their box, not the page): copied,
    # and linked from a results page
    (sheets,) = re.findall(r"^extra_css:\n((?:  - .+\n)+)", (ROOT / "mkdocs.yml").read_text(),
                           flags=re.M)
    for sheet in re.findall(r"- (\S+)", sheets):
        assert (site / sheet).is_file() and (ROOT / "docs" / sheet).is_file(), sheet
        assert sheet in (site / "experiments/results/depth_sweep/index.html").read_text(), sheet
    # a study page's table cells are breakable after '_' (mkdocs_hooks.breakable_cells); the
    # index, which fits, keeps its study names whole
    assert "<td>pre_<wbr>res_<wbr>L24" in (site / "experiments/results/depth_sweep/index.html"
                                              ).read_text()
    assert "<wbr>" not in (site / "experiments/results/index.html").read_text()
    # the findings are in the site, from the repository: the README, every study's page with
    # its plots, each link and image of those pages resolving to a file of the site
    overview = (site / "overview" / "index.html").read_text()
    assert "transformer_jax" in overview and "experiments/results/depth_sweep/" in overview
    results = ROOT / "experiments" / "results"
    studies = sorted(p.name.removesuffix("_verdict.json") for p in results.glob("*_verdict.json"))
    assert len(studies) > 10
    for page in [site / "overview" / "index.html", site / "experiments/results/index.html",
                 *(site / "experiments/results" / name / "index.html" for name in studies)]:
        html = page.read_text()
        targets = re.findall(r'(?:src|href)="([^"#:]+)"', html.split('role="main"', 1)[-1])
        missing = [t for t in targets if not _site_target(page.parent / t).exists()]
        assert not missing, (page, missing)
    for name in studies:
        images = re.findall(r'<img alt="[^"]*" src="([^"]+)"',
                            (site / "experiments/results" / name / "index.html").read_text())
        record = json.loads((results / f"{name}_verdict.json").read_text())
        # a forest plot on every page with expectations; curves where the study trained
        assert (f"../{name}_forest.png" in images) == bool(record["expectations"]), name
        assert (f"../{name}_curves.png" in images) != record["evaluation_only"], (name, images)


def _site_target(path: Path) -> Path:
    """The file a link of the built site opens: a directory's index.html."""
    return path / "index.html" if path.is_dir() or not path.suffix else path


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts/mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sites_copy_of_a_repository_link():
    """The README's and results pages' links point at the site's copy of a file, else into the
    repository when mkdocs.yml names one, else are left as their text (no dead link)."""
    rewrite = _hooks().rewrite_link
    assert rewrite("cfg", "docs/configuration.md#x", "", "", "") == "[cfg](configuration.md#x)"
    assert rewrite("r", "experiments/results/depth_sweep.md", "", "", "") == \
        "[r](experiments/results/depth_sweep.md)"
    assert rewrite("idx", "experiments/results", "", "", "") == "[idx](experiments/results/README.md)"
    assert rewrite("code", "transformer_jax/config.py", "", "", "") == "code"
    assert rewrite("code", "transformer_jax/config.py", "", "", "https://example.org/tj/") == \
        "[code](https://example.org/tj/blob/main/transformer_jax/config.py)"
    results = "experiments/results"  # a study page: the experiment file it links to is there
    assert rewrite("e", "../depth_sweep.py", results, results, "") == "[e](../depth_sweep.py)"
    assert rewrite("home", "../../README.md", results, results, "") == "[home](../../overview.md)"
    assert rewrite("web", "https://flax.readthedocs.io", "", "", "") == \
        "[web](https://flax.readthedocs.io)"


def test_a_study_tables_names_break_after_underscores_equals_and_arrows_only():
    """A variant or an override is one word to a browser: the hook gives each cell's text a
    break after '_', '=' and '→' (so that a study's tables fit the page at 1400 px), and leaves
    tags, numbers and text outside the tables as they are."""
    breakable = _hooks().breakable_cells
    html = ('<p>pre_res</p><table><tr><th align="left">eval/accuracy: step</th></tr>'
            '<tr><td><a href="../res_no_norm.md">res_no_norm</a></td>'
            '<td>model.norm=none, 0.3535533905932738 (1920→2400)</td></tr></table><p>a=b</p>')
    assert breakable(html) == (
        '<p>pre_res</p><table><tr><th align="left">eval/accuracy: step</th></tr>'
        '<tr><td><a href="../res_no_norm.md">res_<wbr>no_<wbr>norm</a></td>'
        '<td>model.norm=<wbr>none, 0.3535533905932738 (1920→<wbr>2400)</td></tr></table>'
        '<p>a=b</p>')


# ---- pages that mirror the code --------------------------------------------------------------

CONFIG_PAGE = DOCS / "configuration.md"


def config_fields() -> set[str]:
    """Every leaf field of every config file's config, as `section.field` (or `seed`)."""
    fields = set()
    for path in sorted((ROOT / "configs").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"config_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config = module.get_config("tiny").to_dict()
        fields |= {f"{k}.{f}" if isinstance(v, dict) else k
                   for k, v in config.items() for f in (v if isinstance(v, dict) else [None])}
    return fields


def test_configuration_page_names_every_field_and_no_other():
    fields = config_fields()
    assert {"seed", "model.position", "train.num_steps", "data.task"} <= fields
    rows = set(re.findall(r"^\| `([a-z_]+(?:\.[a-z_0-9]+)?)` \|", CONFIG_PAGE.read_text(),
                          flags=re.M))
    assert not fields - rows, f"fields missing from docs/configuration.md: {sorted(fields - rows)}"
    assert not rows - fields, f"docs/configuration.md names no such field: {sorted(rows - fields)}"


def test_tutorial_shows_the_study_file_it_runs():
    page = (DOCS / "writing-a-study.md").read_text()
    shown = fenced(section(page, "## The file"), "python")[0]
    assert shown == (DOCS / "examples" / "my_study.py").read_text()
    assert "--experiment=docs/examples/my_study.py" in page and "--size=tiny" in page


# ---- the snippets -----------------------------------------------------------------------------

def snippets():
    for page in PAGES:
        for block in extract_from_file(page):
            if block.syntax in RUNNABLE:
                marks = [eval(m, {"pytest": pytest, "sys": sys}) for m in block.marks]
                yield pytest.param(page, block, id=f"{page.relative_to(ROOT)}:{block.lineno}",
                                   marks=marks)


def snippet_env() -> dict[str, str]:
    """A fresh shell's environment: no virtualenv activated, headless plots."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["MPLBACKEND"] = "Agg"
    return env


def checkout(tmp_path: Path) -> Path:
    """A fresh checkout to run a snippet in: the repository's entries linked, runs/ empty."""
    where = tmp_path / "checkout"
    where.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("runs", ".git"):
            (where / entry.name).symlink_to(entry)
    return where


def same_output(printed: str, shown: str, tolerance: float = OUTPUT_TOLERANCE) -> bool:
    """Whether `printed` is what the page `shown`: the same words between the numbers, line by
    line (the spaces between them aside: a right-aligned -0.00 is one column wider than 0.00),
    and every number within `tolerance` of the page's."""
    lines = [[" ".join(line.split()) for line in text.strip("\n").splitlines()]
             for text in (printed, shown)]
    if len(lines[0]) != len(lines[1]):
        return False
    for got, want in zip(*lines):
        if NUMBER.split(got) != NUMBER.split(want):
            return False
        numbers = [[float(n) for n in NUMBER.findall(line)] for line in (got, want)]
        if any(abs(a - b) > tolerance for a, b in zip(*numbers)):
            return False
    return True


def test_same_output_takes_rounding_and_nothing_else():
    shown = "layer 0   0.25  -1.50\ncheck: 1.00 (72 heads)\n"
    assert same_output("layer 0   0.27  -1.48  \ncheck: 1.00 (72 heads)", shown)
    assert same_output("layer 0  -0.00  -1.50\ncheck: 1.00 (72 heads)",
                       "layer 0   0.00  -1.50\ncheck: 1.00 (72 heads)")  # a signed zero
    assert not same_output("layer 0   0.35  -1.50\ncheck: 1.00 (72 heads)", shown)  # a number
    assert not same_output("layer 1   0.25  -1.50\ncheck: 1.00 (72 heads)", shown)  # a word's
    assert not same_output("layer 0   0.25  -1.50\ncheck: 1.00 (72 heads)\nmore", shown)
    assert not same_output("layer 0   0.25   1.50\ncheck: 1.00 (72 heads)", shown)  # the sign


@pytest.mark.parametrize("page,block", list(snippets()))
def test_snippet_runs_as_pasted(page, block, tmp_path, monkeypatch, shakespeare_file):
    where = checkout(tmp_path)
    monkeypatch.setenv("TJ_SHAKESPEARE", shakespeare_file)  # the real-text studies' variable
    if block.syntax == "python":
        monkeypatch.chdir(where)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block.code, f"{page.name}:{block.lineno}", "exec"),
                 {"__name__": "__main__"})
        if block.expected_output is not None:
            assert same_output(printed.getvalue(), block.expected_output), (
                f"{page.name}:{block.lineno} printed, where the page shows another output:\n"
                f"{printed.getvalue()}")
        return
    done = subprocess.run([shutil.which("bash"), "-e", "-c", block.code], cwd=where,
                          capture_output=True, text=True, timeout=SNIPPET_TIMEOUT_S,
                          env=snippet_env())
    assert done.returncode == 0, (f"{page.name}:{block.lineno}\n{done.stdout[-2000:]}\n"
                                  f"{done.stderr[-4000:]}")

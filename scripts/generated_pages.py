"""Every generated page of the project written again from its data, or, with --check, compared
with what its generator writes (nothing written; exit 1 naming each page that is out of date):
one command after anything that moves a generated page, such as an export, a re-judgement, a
benchmark's results, a new hook point or a new suite.

    .venv/bin/python scripts/generated_pages.py [--check]

Each generator also runs alone; this runs them all, in this order (GENERATORS):
  - the results pages (each study's page, verdict.md and summary.md), their index and
    README's headline table (python -m transformer_jax.studies.render.pages; its forest plots
    are drawn on a write and not compared on a check);
  - docs/pretrained.md (scripts/pretrained_page.py), from pretrained_claims' results;
  - docs/performance.md (scripts/bench/page.py), from the benchmarks' results;
  - docs/hooks.md (scripts/hooks_page.py), from the model's hook points;
  - the suites' lines in README and docs/verdicts.md (scripts/suites_page.py).
The results pages come first: docs/pretrained.md reads pretrained_claims' record, not its page,
but a re-judgement changes both. Each generator computes its data and renders it through a
Jinja2 template (the scripts' in scripts/templates/; transformer_jax.studies.render.templating),
then writes or checks the page with transformer_jax.studies.render.generated.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import page as bench_page  # scripts/ is on the path: this file's folder
import hooks_page
import pretrained_page
import suites_page

from transformer_jax.studies.render import pages

REPO = Path(__file__).resolve().parents[1]


def _results_pages(check: bool) -> int:
    return pages.main([f"--results={REPO / 'experiments' / 'results'}",
                       f"--readme={REPO / 'README.md'}", *(["--check"] if check else [])])


# (what it writes, its generator: main(argv) -> exit status, taking --check)
GENERATORS = (
    ("experiments/results/*.md and README's headline", _results_pages),
    ("docs/pretrained.md", lambda check: pretrained_page.main(["--check"] if check else [])),
    ("docs/performance.md", lambda check: bench_page.main(["--check"] if check else [])),
    ("docs/hooks.md", lambda check: hooks_page.main(["--check"] if check else [])),
    ("the suites in README and docs/verdicts.md",
     lambda check: suites_page.main(["--check"] if check else [])),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when any generated page is out of date")
    args = parser.parse_args(argv)
    worst = 0
    for _, generate in GENERATORS:
        worst = max(worst, generate(args.check))  # 2 (an error) over 1 (out of date) over 0
    return worst


if __name__ == "__main__":
    sys.exit(main())

"""docs/pretrained.md's numbers, written by code from the results files, so that none is
retyped:

    .venv/bin/python scripts/pretrained_page.py [--check]

From experiments/results/pretrained_parity.json (scripts/pretrained_parity.py: the checkpoint
against BertModel) and the study pretrained_claims' record (pretrained_claims_verdict.json,
pretrained_claims_head_roles.json: `python -m transformer_jax.studies.run.evaluate`, then `pages
--export`). The text goes between `<!-- generated:start -->` and `<!-- generated:end -->`;
`--check` writes nothing and fails when the page is not what the results files give.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from transformer_jax.studies.render import generated, templating

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
PAGE = REPO / "docs" / "pretrained.md"
REGION = "generated"
START, END = generated.markers(REGION)
STUDY = "pretrained_claims"
TEMPLATES = REPO / "scripts" / "templates"  # pretrained.md.j2: the text between the markers


def findings(record: dict, roles: dict) -> dict:
    """What the Findings section shows of the study's record and its head roles: the verdict's
    line and table (verdict_text, as on the study's page), the roles' table, the checks."""
    from transformer_jax.studies.render import verdict_text
    from transformer_jax.studies.analysis.checkpoint_analysis import role_table
    return dict(overall=verdict_text.overall_line(record),
                expectations="\n".join(verdict_text.expectations_table(record,
                                                                       drop_per_seed=True)),
                role_table=role_table(np.asarray(roles["scores"]), roles["groups"],
                                      roles["threshold"]),
                checks=[c for section in record["analyses"] for c in section["checks"]])


def render(results: Path) -> str:
    parity = json.loads((results / "pretrained_parity.json").read_text())
    record = json.loads((results / f"{STUDY}_verdict.json").read_text())
    roles = json.loads((results / f"{STUDY}_head_roles.json").read_text())
    return templating.render("pretrained.md.j2", TEMPLATES, parity=parity, roles=roles,
                             **findings(record, roles))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    try:
        return generated.write_or_check_region(args.page, REGION, render(args.results),
                                               args.check, "python scripts/pretrained_page.py")
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

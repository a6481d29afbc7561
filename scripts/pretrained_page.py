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

from transformer_jax.studies.render import generated

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
PAGE = REPO / "docs" / "pretrained.md"
REGION = "generated"
START, END = generated.markers(REGION)
STUDY = "pretrained_claims"


def parity_lines(parity: dict) -> list[str]:
    d = parity["max_abs_diff"]
    return [f"Measured by `scripts/pretrained_parity.py` on {parity['date']} ({parity['machine']}, "
            f"jax {parity['jax']}) against {parity['reference']}: {parity['sentences']} "
            f"sentences (one a pair, token type 1), {parity['tokens']} tokens padded to "
            f"{parity['padded_length']}; the test's tolerance is {parity['tolerance']:g}.", "",
            "| compared | max \\|ours − reference\\| |", "|---|---|",
            f"| last hidden states (padding included) | {d['last_hidden_state']:.2g} |",
            f"| attention weights, every layer and head | {d['attention_weights']:.2g} |",
            f"| sentence embedding (mean pool, L2-normalized) | {d['sentence_embedding']:.2g} |"]


def findings_lines(record: dict, roles: dict) -> list[str]:
    from transformer_jax.studies.render import verdict_text
    from transformer_jax.studies.analysis.checkpoint_analysis import role_table
    scores = np.asarray(roles["scores"])
    checks = [c for section in record["analyses"] for c in section["checks"]]
    return [verdict_text.overall_line(record), "",
            *verdict_text.expectations_table(record, drop_per_seed=True), "",
            f"Heads by role over {roles['sentences']} sentences of tiny Shakespeare (average "
            f"attention mass on the target; a head has the role at ≥ {roles['threshold']:g}):", "",
            role_table(scores, roles["groups"], roles["threshold"]), "",
            *[f"- {c['text']}: **{c['verdict']}**" for c in checks]]


def render(results: Path) -> str:
    parity = json.loads((results / "pretrained_parity.json").read_text())
    record = json.loads((results / f"{STUDY}_verdict.json").read_text())
    roles = json.loads((results / f"{STUDY}_head_roles.json").read_text())
    return "\n".join(["## Parity with the reference", "", *parity_lines(parity), "",
                      "## Findings", "", *findings_lines(record, roles)]) + "\n"


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

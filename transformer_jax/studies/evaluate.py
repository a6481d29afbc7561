r"""An evaluation-only study: measures a trained checkpoint, trains nothing.

    python -m transformer_jax.studies.evaluate --experiment=experiments/pretrained_claims.py \
        --workdir=runs/pretrained_claims [--size=default] [--text_path=FILE]

Calls the study's `evaluate(study, root)` (its variants are ablations of the checkpoint, its
"seeds" units of evaluation, e.g. sentences) and writes what a sweep writes beside finished
runs (`publish.publish`: verdict.json, verdict.md, summary.csv, provenance.json,
preregistration.json, the page README.md), judged by the same expectations and rules.
`python -m transformer_jax.studies.pages --export=DIR` copies them into experiments/results.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from transformer_jax.config import ConfigError
from transformer_jax.model.pretrained import PretrainedError
from transformer_jax.studies import publish
from transformer_jax.studies.loading import STUDY_SIZES, load_study

TEXT_VARIABLE = "TJ_SHAKESPEARE"  # as the sweep's --text_path: read by the experiment as it loads


def run(experiment: Path, workdir: Path, size: str = "default") -> Path:
    """Evaluates the study of `experiment` into `workdir`; returns its verdict.md."""
    study = load_study(experiment, size)
    if study.evaluate is None:
        raise ConfigError(f"{experiment}: study {study.name!r} trains its runs: run it with "
                          f"python -m transformer_jax.sweep --experiment={experiment}")
    workdir.mkdir(parents=True, exist_ok=True)
    runs = study.evaluate(study, workdir)
    publish.publish(study, workdir, experiment=str(experiment), size=size, shard=(0, 1),
                    trained=True, runs=runs)
    return workdir / "verdict.md"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_jax.studies.evaluate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True, help="the experiment file")
    parser.add_argument("--workdir", required=True, help="where its results are written")
    parser.add_argument("--size", default="default", help=f"one of: {', '.join(STUDY_SIZES)}")
    parser.add_argument("--text_path", default=None,
                        help=f"the text the study reads (sets ${TEXT_VARIABLE} before it loads)")
    args = parser.parse_args(argv)
    if args.text_path is not None:
        os.environ[TEXT_VARIABLE] = args.text_path
    try:
        verdict = run(Path(args.experiment), Path(args.workdir), args.size)
    except (ConfigError, PretrainedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(Path(verdict).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

r"""An evaluation-only study: measures a trained checkpoint, trains nothing.

    python -m transformer_jax.studies.run.evaluate --experiment=experiments/pretrained_claims.py \
        --workdir=runs/pretrained_claims [--size=default] [--text_path=FILE]

Calls the study's `evaluate(study, root)` (its variants are ablations of the checkpoint, its
"seeds" units of evaluation, e.g. sentences) and writes what a sweep writes beside finished
runs (`publish.publish`: verdict.json, verdict.md, summary.csv, provenance.json,
preregistration.json, the page README.md), judged by the same expectations and rules.
`python -m transformer_jax.studies.render.pages --export=DIR` copies them into experiments/results.
The measurements are kept in DIR/measured.json: run again, it writes the report from them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from transformer_jax.config import ConfigError
from transformer_jax.model.pretrained import PretrainedError
from transformer_jax.studies import publish
from transformer_jax.studies.design.loading import STUDY_SIZES, load_study
from transformer_jax.studies import rundir

MEASURED = "measured.json"  # the measurements, in the workdir: a second run re-judges them
TEXT_VARIABLE = "TJ_SHAKESPEARE"  # as the sweep's --text_path: read by the experiment as it loads


def run(experiment: Path, workdir: Path, size: str = "default") -> Path:
    """Evaluates the study of `experiment` into `workdir`; returns its verdict.md."""
    study = load_study(experiment, size)
    if study.evaluate is None:
        raise ConfigError(f"{experiment}: study {study.name!r} trains its runs: run it with "
                          f"python -m transformer_jax.sweep --experiment={experiment}")
    workdir = rundir.prepare(str(workdir), {"study": study.name,  # as a sweep's
                                                 "runs": [list(r) for r in study.runs()]})
    runs = read_measured(workdir / MEASURED, study)
    if runs is None:
        runs = study.evaluate(study, workdir)
        write_measured(workdir / MEASURED, study, runs)
    publish.publish(study, workdir, experiment=str(experiment), size=size, shard=(0, 1),
                    trained=True, runs=runs)
    return workdir / "verdict.md"


def write_measured(path: Path, study, runs: dict) -> None:
    """The measurements, so that writing the report again does not measure again."""
    rows = [{"variant": v, "seed": s, **run} for (v, s), run in runs.items()]
    path.write_text(json.dumps({"training_fingerprint": study.training_fingerprint(),
                                "runs": rows}) + "\n")


def read_measured(path: Path, study) -> Optional[dict]:
    """The measurements a run of today's variants and seeds saved at `path` (None: none)."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved["training_fingerprint"] != study.training_fingerprint():
        return None
    return {(r["variant"], r["seed"]): {"status": r["status"], "curves": {
        k: [tuple(point) for point in v] for k, v in r["curves"].items()}} for r in saved["runs"]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_jax.studies.run.evaluate",
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
    except (ConfigError, PretrainedError, rundir.WorkdirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(Path(verdict).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Everything a sweep writes beside a study's runs once they have all ended: the report, the
provenance record, the pre-registration record and the study's page.

The provenance record says what TRAINED the runs, so it is written only by a sweep that trained
some of them (or where there is none yet): a sweep that only re-writes the report over finished
runs keeps it, byte for byte. The pre-registration record says what the verdict was judged
with, so every report writes it, naming the commit that trained the runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from transformer_jax.train import cli
from transformer_jax.studies import report
from transformer_jax.studies.records import preregistration, provenance
from transformer_jax.studies.records.record import REPORT_LOG
from transformer_jax.studies.render import pages
from transformer_jax.studies.study import Study


def publish(study: Study, root: Path, *, experiment: Optional[str], size: str,
            shard: tuple[int, int], trained: bool, runs: Optional[dict] = None) -> None:
    """Writes study's report and records into root. `trained`: whether this sweep trained any
    of its runs (`plan.Plan.trains`); only then is an existing provenance record replaced.
    `runs`: an evaluation-only study's measurements (default: the runs trained into root)."""
    root = Path(root)
    with cli.log_to_file(root / REPORT_LOG):  # the analyses' own lines, and TFDS's
        report.write_report(study, root, runs, size)
    record = root / provenance.FILE
    if trained or not record.exists():
        provenance.write(record, provenance.collect(study, size, shard))
    trained_by = provenance.read(record)["code"]["commit"]
    preregistration.write(root / preregistration.FILE, preregistration.record(
        study, size, experiment, trained_by))
    pages.write_run_page(study, root, experiment)

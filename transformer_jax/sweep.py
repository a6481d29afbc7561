r"""Run an ablation study: python -m transformer_jax.sweep --experiment=experiments/NAME.py --workdir=DIR

`--experiment=experiments/` (a directory) runs every study in it, each into DIR/<name>, and
writes DIR/report.md linking their verdicts and plots (what scripts/run.sh does).

Runs every variant × seed into DIR/<variant>/seed_<n> (one TensorBoard logdir:
`tensorboard --logdir DIR` overlays them), the seeds of a variant side by side in one compiled
program (`train.train_replicas`); skips finished runs, resumes partial ones, then writes
curves.png, summary.csv, summary.md and verdict.md.
`--shard=i/n` runs every n-th run starting at i (cluster array jobs); the report is written
by whichever shard finds every run ended.
"""
import sys
from pathlib import Path

from absl import app, flags, logging

from transformer_jax import cli, report, study as study_lib, workdir as workdir_lib
from transformer_jax.train import DIVERGED, FINISHED, train_replicas

_EXPERIMENT = flags.DEFINE_string("experiment", None,
                                  "Experiment file (experiments/scaling.py) or a directory of them.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of the study (one run per sub-dir).")
_SIZE = flags.DEFINE_string("size", "default", "default (2-core CPU) | large (GPU/TPU) | tiny (smoke).")
_SHARD = flags.DEFINE_string("shard", "0/1", "i/n: run only every n-th run, starting at i.")
flags.mark_flags_as_required(["experiment", "workdir"])
STUDY_ORDER = ("scaling", "positions", "residuals", "norm_placement", "length_generalization")


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise study_lib.ConfigError(f"--shard={text!r} must be i/n with 0 <= i < n, e.g. 0/4")
    return index, count


def run_study(study: study_lib.Study, workdir: str, shard: tuple[int, int] = (0, 1)) -> bool:
    """Runs this shard's share of the study; writes the report once every run has ended.

    Returns whether the report was written.
    """
    root = workdir_lib.prepare(workdir, {"study": study.name, "runs": [list(r) for r in study.runs()]})
    index, count = shard
    mine = [run for i, run in enumerate(study.runs()) if i % count == index]
    for variant in study.variants:
        seeds = [seed for v, seed in mine if v == variant]
        if not seeds:
            continue
        dirs = [str(root / variant / f"seed_{seed}") for seed in seeds]
        logging.info("[%s] %s, seeds %s: %s", study.name, variant, seeds, root / variant)
        # The seeds of a variant train side by side in one compiled program.
        train_replicas([study.config(variant, seed) for seed in seeds], dirs)
    ended = [workdir_lib.read_status(root / v / f"seed_{s}") for v, s in study.runs()]
    missing = sum(1 for s in ended if not s or s["state"] not in (FINISHED, DIVERGED))
    if missing:
        logging.info("[%s] %d of %d runs not ended yet; the report follows when they are",
                     study.name, missing, len(ended))
        return False
    report.write_report(study, root)
    return True


def run_all(directory: Path, workdir: str, size: str, shard: tuple[int, int]) -> Path | None:
    """Every study in `directory` (in STUDY_ORDER, then by name); DIR/report.md when all ended."""
    files = sorted(directory.glob("[!_]*.py"), key=lambda p: (
        STUDY_ORDER.index(p.stem) if p.stem in STUDY_ORDER else len(STUDY_ORDER), p.stem))
    if not files:
        raise study_lib.ConfigError(f"--experiment={str(directory)!r} holds no experiment files")
    root = Path(workdir)
    done = {}
    for path in files:
        study = study_lib.load_study(path, size)
        done[study.name] = run_study(study, str(root / study.name), shard)
    if not all(done.values()):
        return None
    return report.write_index(root, list(done))


def main(argv):
    del argv
    cli.enable_compilation_cache()
    cli.quiet_progress_bars()
    with cli.user_errors_exit():
        shard = parse_shard(_SHARD.value)
        experiment = Path(_EXPERIMENT.value)
        if experiment.is_dir():
            index = run_all(experiment, _WORKDIR.value, _SIZE.value, shard)
            where = index
        else:
            study = study_lib.load_study(experiment, _SIZE.value)
            where = Path(_WORKDIR.value) / "verdict.md" if run_study(study, _WORKDIR.value, shard) else None
    if where:
        print(f"\nreport: {where}\ncurves: tensorboard --logdir {_WORKDIR.value}")
    sys.exit(0)


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main, flags_parser=cli.parse_flags)

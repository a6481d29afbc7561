r"""The sweep behind `python -m transformer_jax.sweep` --experiment=experiments/NAME.py --workdir=DIR

`--experiment=experiments/` (a directory) runs every study in it of one suite (`--suite`, main
by default; `--help` lists each suite and what it holds, from `catalog.DECLARED`), each into
DIR/<name>, and writes DIR/report.md linking their verdicts and plots and DIR/README.md, the
index of their pages (what scripts/run.sh does). A single experiment file runs whatever its suite.

Runs every variant × seed into DIR/<variant>/seed_<n> (one TensorBoard logdir:
`tensorboard --logdir DIR` overlays them), the seeds of a variant side by side in one compiled
program (`train.train_replicas`); skips finished runs, resumes partial ones, then writes
curves.png, summary.csv, summary.md, verdict.md, provenance.json (the machine, stack and commit
of the process that trained its last runs: `transformer_jax.studies.records.provenance`) and
README.md, the study's page (`transformer_jax.studies.render.pages`).
`--shard=i/n` runs every n-th run starting at i (cluster array jobs); the report is written
by whichever shard finds every run ended. `--jobs=N` trains N variants at once in worker
processes (`transformer_jax.studies.run.jobs`), longest first. `--text_path=FILE` is the text of the
real-text studies (any local UTF-8 file; '' the TFDS dataset tiny_shakespeare, downloaded once).

In three parts: `survey` readies each study's directory and reads what has ended; the pure
`plan.plan` decides the tasks, which tasks each report waits for and which studies this sweep
trains; `schedule.Sweep` runs the tasks and publishes each study (`publish.publish`) as soon as
the last task it waits for ends.

The terminal gets one line per finished variant, each study's verdict as it is written, a
summary table and the TensorBoard command (`transformer_jax.studies.run.terminal`); each
variant's full log is DIR/<variant>/train.log, and `--verbosity=0` shows it on the terminal too.
"""
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

from absl import flags, logging

from transformer_jax.train import cli
from transformer_jax.studies import grid as grid_lib, rundir
from transformer_jax.studies import plateau as plateau_lib
from transformer_jax.studies import report
from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design import catalog
from transformer_jax.studies.design.catalog import check_suite, select_studies
from transformer_jax.studies.render import board, pages
from transformer_jax.studies.run import plan as plan_lib
from transformer_jax.studies.run import schedule
from transformer_jax.studies.run import terminal
from transformer_jax.train.run import check_config

_EXPERIMENT = flags.DEFINE_string("experiment", None,
                                  "Experiment file (experiments/scaling.py) or a directory of them.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of the study (one run per sub-dir).")
_SIZE = flags.DEFINE_string("size", "default", "default (2-core CPU) | large (GPU/TPU) | tiny (smoke).")
_SHARD = flags.DEFINE_string("shard", "0/1", "i/n: run only every n-th run, starting at i.")
_JOBS = flags.DEFINE_integer("jobs", 1, "Worker processes: variants trained at once (2 on a "
                             "2-core CPU: scripts/run.sh).")
_SUITE = flags.DEFINE_string("suite", "main", "Which studies of a directory --experiment run (a file "
                             f"ignores it). {catalog.suite_help()}.")
_TEXT_PATH = flags.DEFINE_string(
    "text_path", None, "The text of the real-text studies (the lm, precision and circuits suites, "
    "and the mechanisms suite's text studies): a local UTF-8 file, or '' for the TFDS dataset tiny_shakespeare (downloaded "
    "once into ~/.cache/transformer_jax). Unset: $TJ_SHAKESPEARE, else "
    "../shared/data/tinyshakespeare.txt beside the repository if present, else TFDS.")
flags.mark_flags_as_required(["experiment", "workdir"])
# Where the real-text experiments read their text's path as they load (experiments/lm_positions.py):
# --text_path sets it, for this process and the workers it starts, which inherit it.
TEXT_VARIABLE = "TJ_SHAKESPEARE"


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise study_lib.ConfigError(f"--shard={text!r} must be i/n with 0 <= i < n, e.g. 0/4")
    return index, count


def use_text(path: Optional[str]) -> None:
    """--text_path as the experiments' $TJ_SHAKESPEARE (None: leave it as it is). The path goes
    into the runs' config as given: a resumed study must name its text the same way."""
    if path is None:
        return
    if path and not os.path.isfile(os.path.expanduser(path)):
        raise study_lib.ConfigError(
            f"--text_path={path!r} is not a file; give a local UTF-8 text file, or "
            "--text_path='' for the TFDS dataset tiny_shakespeare (downloaded once)")
    os.environ[TEXT_VARIABLE] = path


def run_study(study: study_lib.Study, workdir: str, shard: tuple[int, int] = (0, 1),
              progress: Optional[terminal.JobProgress] = None, size: str = "default") -> bool:
    """Runs this shard's share of the study (loaded at `size`, which its provenance records)
    in this process; writes the report once every run has ended. Returns whether the report
    was written."""
    return run_studies([(study, workdir, None)], shard, size=size,
                       progress=progress)[study.name]


def run_studies(studies: list[tuple[study_lib.Study, str, Optional[str]]], shard: tuple[int, int],
                jobs: int = 1, size: str = "default",
                progress: Optional[terminal.JobProgress] = None) -> dict[str, bool]:
    """(study, workdir, experiment file) each: its runs as tasks (`jobs`), each study's report
    as soon as its last run ends; a plateau budget's or a grid's next stage joins the running
    pool as soon as it is decided. Returns study name -> whether its report was written.
    `progress` prints a line per variant and each verdict (a new one on stdout if None)."""
    if jobs > 1 and any(experiment is None for _, _, experiment in studies):
        raise ValueError("jobs > 1 needs each study's experiment file (workers load it)")
    progress = progress or terminal.JobProgress()
    entries = {entry[0].name: entry for entry in studies}

    def restage(name: str, budget: Optional[int], grown: Optional[study_lib.Study]):
        return survey([entries[name]], {name: budget} if budget else {},
                      {name: grown} if grown else {})

    found, linked = survey(studies)
    planned = plan_lib.plan(found, linked, shard, jobs, size)
    return schedule.Sweep(planned, found, size, shard, progress, restage).run(jobs)


def survey(studies: list[tuple[study_lib.Study, str, Optional[str]]],
           budgets: Optional[dict[str, int]] = None,
           grown: Optional[dict[str, study_lib.Study]] = None
           ) -> tuple[list[plan_lib.Found], plan_lib.Linked]:
    """Each study's workdir made ready (every run's config checked before anything runs,
    identical runs linked: `link_identical_runs`) and its ended runs read, for `plan.plan`;
    with the (study, variant) -> studies linking to its runs map. `budgets`: study name -> the
    next stage of its plateau budget, `grown`: study name -> the study with the candidates its
    grid extension adds, both decided by the sweep's previous stage."""
    found, owners, linked = [], {}, {}
    for study, workdir, experiment in studies:
        grid_lib.check(study)  # and the candidates earlier stages added, from their directories
        study = grid_lib.reached((grown or {}).get(study.name, study), Path(workdir))
        if study.evaluate is not None:  # a trained checkpoint's study: nothing to train
            raise study_lib.ConfigError(
                f"study {study.name!r} is evaluation-only: run python -m "
                f"transformer_jax.studies.run.evaluate --experiment={experiment or 'FILE'}")
        root = Path(workdir)
        budget = (budgets or {}).get(study.name) or plateau_budget(study, root)
        configs = {run: study.config(*run, budget) for run in study.runs()}
        for config in configs.values():
            check_config(config)
        declared = grid_lib.declared(study).runs()  # the runs its grid added are its outcome
        root = rundir.prepare(workdir, {"study": study.name,
                                             "runs": [list(r) for r in declared]})
        board.write_view(study, root, list(configs.values()))
        shared = link_identical_runs(study.name, root, configs, owners, linked,
                                     own=study.plateau is not None)
        ended = {(v, s) for v, s in study.runs()
                 if rundir.RunRecord.of(root, v, s).ended(budget)}
        found.append(plan_lib.Found(study, root, experiment, frozenset(ended), frozenset(shared),
                                    budget))
    return found, linked


def plateau_budget(study: study_lib.Study, root: Path) -> Optional[int]:
    """The stage a plateau study's runs train to (None: no plateau budget): the largest
    train.num_steps its runs were sent to, so a resumed sweep goes on where it was."""
    if study.plateau is None:
        return None
    return plateau_lib.budget_of([root / v / f"seed_{s}" for v, s in study.runs()],
                                 study.plateau.first)


def link_identical_runs(name: str, root: Path, configs: dict[tuple[str, int], Any],
                        owners: dict[str, tuple[str, str, Path]],
                        linked: dict[tuple[str, str], set[str]], own: bool = False
                        ) -> set[tuple[str, int]]:
    """Runs of study `name` ((variant, seed) -> config) whose config equals a run seen before
    (an earlier study's, or an earlier variant's) are trained once: root/<variant>/seed_<n>
    becomes a relative symlink to the first one's directory. Returns the (variant, seed) runs so
    linked. A run directory that already exists is kept as it is (trained before; never
    replaced), and a link whose run now differs is refused: remove the link to train that run
    on its own. `owners` (config -> study, variant, run dir) and `linked` ((study, variant) ->
    studies linking to it) grow across studies. `own`: share runs within the study only (a
    plateau study extends its runs, which must not move another study's)."""
    shared = set()
    for (variant, seed), config in configs.items():
        key = (name if own else "") + json.dumps(config.to_dict(), sort_keys=True, default=repr)
        run = root / variant / f"seed_{seed}"
        owner = owners.get(key)
        if owner is None or (run.exists() and not run.is_symlink()):
            # a link made by an earlier sweep with the study it points into: still this run
            # when the run it holds has this config (the study swept alone now)
            if run.is_symlink() and not _holds_config(run, config):
                raise study_lib.ConfigError(
                    f"{run} links to {os.readlink(run)}, whose config is no longer the same as "
                    f"{name}/{variant}'s; remove the link to train this run on its own")
            owners.setdefault(key, (name, variant, run))
            continue
        owner_study, owner_variant, owner_run = owner
        target = os.path.relpath(owner_run, run.parent)
        if run.is_symlink():
            if os.path.realpath(run) != os.path.realpath(owner_run):
                raise study_lib.ConfigError(
                    f"{run} links to {os.readlink(run)}, but its config is now "
                    f"{owner_study}/{owner_variant}'s ({owner_run}); remove the link")
        else:
            run.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.symlink(target, run, target_is_directory=True)
            except FileExistsError:  # another shard linked it at the same moment
                if os.path.realpath(run) != os.path.realpath(owner_run):
                    raise
        logging.info("[%s] %s/seed_%d: the same config as %s/%s: linked to %s, trained once",
                     name, variant, seed, owner_study, owner_variant, owner_run)
        if owner_study != name or owner_variant != variant:
            linked.setdefault((owner_study, owner_variant), set()).add(name)
        shared.add((variant, seed))
    return shared


def _holds_config(run: Path, config: Any) -> bool:
    """Whether the run directory `run` was trained with `config` (its saved config.json)."""
    saved = run / rundir.CONFIG_FILE
    return saved.is_file() and json.loads(saved.read_text()) == json.loads(
        json.dumps(config.to_dict(), default=repr))


def run_all(directory: Path, workdir: str, size: str, shard: tuple[int, int],
            jobs: int = 1, suite: str = "main",
            progress: Optional[terminal.JobProgress] = None) -> Path | None:
    """Every study of `suite` in `directory`, each into workdir/<name>; workdir/report.md when
    all ended."""
    root = Path(workdir)
    studies = [(study, str(root / study.name), str(path))
               for study, path in select_studies(directory, size, suite)]
    done = run_studies(studies, shard, jobs, size, progress)
    if not all(done.values()):
        return None
    pages.write_run_index(root, [(study, Path(where)) for study, where, _ in studies])
    return report.write_index(root, list(done))


def main(argv):
    del argv
    cli.set_up_command()
    progress = terminal.JobProgress()
    with cli.user_errors_exit():
        shard = parse_shard(_SHARD.value)
        if _JOBS.value < 1:
            raise study_lib.ConfigError(f"--jobs={_JOBS.value} must be at least 1")
        check_suite(_SUITE.value)
        use_text(_TEXT_PATH.value)
        experiment = Path(_EXPERIMENT.value)
        if experiment.is_dir():
            where = run_all(experiment, _WORKDIR.value, _SIZE.value, shard, _JOBS.value,
                            _SUITE.value, progress)
        else:
            study = study_lib.load_study(experiment, _SIZE.value)
            written = run_studies([(study, _WORKDIR.value, str(experiment))], shard, _JOBS.value,
                                  _SIZE.value, progress)[study.name]
            where = Path(_WORKDIR.value) / "verdict.md" if written else None
    progress.finish(_WORKDIR.value, where)
    sys.exit(0)


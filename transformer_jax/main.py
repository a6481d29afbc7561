r"""Train one model: python -m transformer_jax.main --config=configs/NAME.py[:args] --workdir=DIR

Any config field can be overridden: --config.model.position=rotary --config.train.num_steps=500.
Several hosts (one process each, all running this same command): pass --coordinator_address,
--num_processes and --process_id, or --distributed_auto where JAX finds them itself (SLURM,
Open MPI, Cloud TPU, GKE). The batch is split over every process's devices
(train.num_devices=0); process 0 writes the logs and status, all take part in checkpoints.
Exit codes: 0 finished (or preempted by SIGTERM after saving a checkpoint: rerun to resume),
2 bad input (one line on stderr, nothing written into an existing run), 3 diverged (NaN/inf),
4 another process of a multi-host run was lost (rerun on every host to resume).
`--extend_to=N` trains a finished or stopped run on to N steps.
`--help` with a --config lists that config's fields, their defaults and what each does;
`--show_config` prints the config the flags resolve to (as the run saves it, config.json) and
exits, without --workdir.
The terminal shows a progress bar (when it is one), warnings and the result; every logged step
goes to DIR/train.log (`--verbosity=0` shows those lines on the terminal too).
"""
import functools
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # first: glibc reads its tunables only when a process starts
    from transformer_jax.runtime import hugepages
    hugepages.reexec_if_useful()

from absl import app, flags
from ml_collections import config_flags

from transformer_jax.train import cli
from transformer_jax.train import config_help
from transformer_jax.train import loop
from transformer_jax.train import parallel
from transformer_jax.train import terminal
from transformer_jax.train import workdir as workdir_lib

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file path[:args].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of this run (logs, checkpoints).")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None,
                                   "Multi-host: host:port of process 0 (with --num_processes, --process_id).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Multi-host: number of processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "Multi-host: this process, 0..n-1.")
_AUTO = flags.DEFINE_bool("distributed_auto", False,
                          "Multi-host: join the cluster JAX detects (SLURM, Open MPI, Cloud TPU, GKE).")
_HEARTBEAT = flags.DEFINE_integer(
    "heartbeat_timeout", parallel.HEARTBEAT_TIMEOUT_S,
    "Multi-host: seconds without a heartbeat after which a process counts as dead and the "
    "others exit (status 4).")
_EXTEND_TO = flags.DEFINE_integer(
    "extend_to", None, "Continue this workdir's finished or stopped run up to N steps "
    "(train.num_steps becomes N; the LR schedule is recomputed for N; recorded in "
    "config_history.json). Every other config change is still refused.")
_SHOW_CONFIG = flags.DEFINE_bool(
    "show_config", False, "Print the config these flags resolve to (the file, its arguments and "
    "the --config.* overrides, checked; as the run saves it in config.json) and exit.")
flags.mark_flags_as_required(["config"])


def main(argv):
    del argv
    if _SHOW_CONFIG.value:
        with cli.user_errors_exit():
            print(config_help.resolved(_CONFIG.value))
        sys.exit(cli.EXIT_OK)
    if _WORKDIR.value is None:
        cli.fail("--workdir is required: the directory of this run (logs, checkpoints)")
    cli.set_up_command()
    workdir = Path(_WORKDIR.value)
    with cli.user_errors_exit():
        parallel.maybe_initialize_distributed(_COORDINATOR.value, _NUM_PROCESSES.value,
                                              _PROCESS_ID.value, auto_detect=_AUTO.value,
                                              heartbeat_timeout_s=_HEARTBEAT.value)
        import jax
        log = workdir / (cli.LOG_FILE if jax.process_index() == 0
                         else f"train.{jax.process_index()}.log")
        start = terminal.Start()  # says on the terminal where a resumed run picks up
        # the log file only once this process has started training (its status.json says
        # 'running'): bad input leaves no file behind and adds nothing to an existing run's
        with cli.log_to_file(log, ready=functools.partial(_started_after, workdir, time.time())):
            status = loop.train_and_evaluate(_CONFIG.value, str(workdir),
                                             extend_to=_EXTEND_TO.value, on_start=start)
    print(f"{terminal.outcome(status, already_ended=start.step is None)}\nfull log:    {log}\n"
          f"TensorBoard: {terminal.tensorboard_executable()} --logdir {workdir}")
    sys.exit(cli.exit_code(status))


def _started_after(workdir: Path, t0: float) -> bool:
    status = workdir / workdir_lib.STATUS_FILE
    return status.exists() and status.stat().st_mtime >= t0


if __name__ == "__main__":
    app.run(main, flags_parser=cli.parse_flags)

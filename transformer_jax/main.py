r"""Train one model: python -m transformer_jax.main --config=configs/NAME.py[:args] --workdir=DIR

Any config field can be overridden: --config.model.position=rotary --config.train.num_steps=500.
Several hosts (one process each, all running this same command): pass --coordinator_address,
--num_processes and --process_id, or --distributed_auto where JAX finds them itself (SLURM,
Open MPI, Cloud TPU, GKE). The batch is split over every process's devices
(train.num_devices=0); process 0 writes the logs and status, all take part in checkpoints.
Exit codes: 0 finished (or preempted by SIGTERM after saving a checkpoint: rerun to resume),
2 bad input (one line on stderr, nothing written into an existing run), 3 diverged (NaN/inf).
"""
import sys

if __name__ == "__main__":  # first: glibc reads its tunables only when a process starts
    from transformer_jax import hugepages
    hugepages.reexec_if_useful()

from absl import app, flags, logging
from ml_collections import config_flags

from transformer_jax import cli, parallel, train

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file path[:args].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of this run (logs, checkpoints).")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None,
                                   "Multi-host: host:port of process 0 (with --num_processes, --process_id).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Multi-host: number of processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "Multi-host: this process, 0..n-1.")
_AUTO = flags.DEFINE_bool("distributed_auto", False,
                          "Multi-host: join the cluster JAX detects (SLURM, Open MPI, Cloud TPU, GKE).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    cli.enable_compilation_cache()
    cli.quiet_progress_bars()
    with cli.user_errors_exit():
        parallel.maybe_initialize_distributed(_COORDINATOR.value, _NUM_PROCESSES.value,
                                              _PROCESS_ID.value, auto_detect=_AUTO.value)
        status = train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
    sys.exit(cli.exit_code(status))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main, flags_parser=cli.parse_flags)

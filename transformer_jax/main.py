r"""Train one model: python -m transformer_jax.main --config=configs/NAME.py[:args] --workdir=DIR

Any config field can be overridden: --config.model.position=rotary --config.train.num_steps=500.
Exit codes: 0 finished (or preempted by SIGTERM after saving a checkpoint: rerun to resume),
2 bad input (one line on stderr, nothing written into an existing run), 3 diverged (NaN/inf).
"""
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from transformer_jax import cli, train

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file path[:args].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of this run (logs, checkpoints).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    cli.enable_compilation_cache()
    cli.quiet_progress_bars()
    with cli.user_errors_exit():
        status = train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
    sys.exit(cli.exit_code(status))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main, flags_parser=cli.parse_flags)

r"""Run an ablation study: python -m transformer_jax.sweep --experiment=experiments/NAME.py --workdir=DIR

`--experiment=experiments/` runs every study of one `--suite` (`--help` lists them) into
DIR/<name> and writes DIR/report.md. The sweep itself is `transformer_jax.studies.run.sweep`.
"""
if __name__ == "__main__":  # first: glibc reads its tunables only when a process starts
    from transformer_jax.runtime import hugepages
    hugepages.reexec_if_useful()

from absl import app, flags

from transformer_jax.studies.run import sweep
from transformer_jax.studies.run.sweep import main
from transformer_jax.train import cli

if __name__ == "__main__":
    flags.adopt_module_key_flags(sweep)  # --help lists the flags defined beside the sweep
    app.run(main, flags_parser=cli.parse_flags)

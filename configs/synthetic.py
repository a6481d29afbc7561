"""Bidirectional encoder on a synthetic sequence task, generated offline (no download).

Tasks: copy, reverse, sort, sort_distinct (per-token outputs), lag_bits (per-token: the bits at
lags 1-4 behind each position as one symbol; experiments/heads.py), order (one label per
sequence: does symbol A come before symbol B? An encoder without positions cannot beat chance
on it) and repeat (random symbols, then the same again, as next-token prediction: a decoder's
task, with --config.model.arch=decoder; the induction-head task of experiments/induction.py).
Run:
  python -m transformer_jax.main --config=configs/synthetic.py --workdir=runs/reverse \
      --config.data.task=reverse --config.model.position=none
Smoke size (seconds):
  python -m transformer_jax.main --config=configs/synthetic.py:tiny --workdir=runs/syn_tiny
Config arguments: `task=NAME` picks the task, e.g. --config=configs/synthetic.py:tiny,task=order
Every field, its default here and what it does: add --help to a command with this --config;
--show_config prints the resolved config.
"""
from transformer_jax.train import defaults as common


def get_config(arg=None):
    options = common.parse_arg(arg, task="reverse")
    config = common.base_config()
    config.model.arch = "encoder"
    config.model.num_layers = 2
    config.data.kind = "synthetic"
    config.data.task = options.task
    config.data.seq_len = 16
    config.data.min_len = 4
    config.train.num_steps = 1500
    config.train.learning_rate = 1e-3
    if options.size == "tiny":
        common.tiny(config)
        config.data.seq_len = 8
    config.lock()
    return config

"""Causal character-level language model on text (tiny Shakespeare by default).

The text: with data.text_path '' (the default), the TFDS dataset tiny_shakespeare, downloaded
once (1.1 MB) into data.data_dir and read from there afterwards, offline too (split 90/5/5);
with --config.data.text_path=FILE, any local UTF-8 file (split 90/10), e.g. a copy fetched by
hand: curl -o input.txt https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
Run:
  python -m transformer_jax.main --config=configs/lm.py --workdir=runs/lm \
      --config.model.position=rotary
Smoke size (seconds), on a local file:
  python -m transformer_jax.main --config=configs/lm.py:tiny --workdir=runs/lm_tiny \
      --config.data.text_path=input.txt
On a CPU with AMX or AVX512-BF16 (recent Intel Xeons), --config.model.dense_matmul=bfloat16
multiplies the Dense layers' products on bfloat16 operands with float32 sums: a faster step
there (docs/performance.md, the --profile table) at the same validation loss
(experiments/results/lm_bfloat16.md).
"""
from transformer_jax.train import defaults as common


def get_config(arg=None):
    options = common.parse_arg(arg)
    config = common.base_config()
    config.model.arch = "decoder"
    config.data.kind = "text"
    config.data.task = ""
    config.data.seq_len = 64
    config.data.num_eval = 0  # every window of the held-out 10 % (111,540 characters)
    config.train.batch_size = 12
    # 50 steps per compiled call, one log interval (a call ends on every log step anyway): the
    # step once, the call's overhead (its temporary buffers mapped and faulted in anew, ~40 MiB)
    # a fiftieth. Same numbers as 10 or 1 per call, bitwise. Against 10 per call, whole warm
    # 2,000-step runs of scripts/vs_nanogpt.sh's command (bf16 Dense products, Intel Xeon with
    # AMX, 2 CPUs, alternating): 45.1 / 44.9 s against 47.1 / 47.4, page faults 0.59 M against
    # 2.26 M, peak no higher (one step per call against k: scripts/benchmark.py --profile)
    config.train.steps_per_call = 50
    # each batch as 2 independent half-batch passes, run on both cores at once (same update)
    config.train.microbatches = 2
    if options.size == "tiny":
        common.tiny(config)
        config.data.seq_len = 32
    config.lock()
    return config

"""Defaults shared by every config file (configs/*.py): one place for the fields all runs have.

A config file calls `base_config()` and changes what its family needs. Field names are the
command-line contract (`--config.model.position=rotary`, `--config.train.learning_rate=3e-4`).
"""
import ml_collections

SIZES = ("default", "tiny")


def parse_arg(arg: str | None, **defaults: str) -> ml_collections.ConfigDict:
    """`get_config("tiny")` or `get_config("size=tiny,task=sort")` -> ConfigDict of options.

    A bare word sets `size`; unknown keys or sizes fail with the valid choices.
    """
    options = dict(size="default", **defaults)
    for item in filter(None, (arg or "").split(",")):
        key, value = item.split("=", 1) if "=" in item else ("size", item)
        if key not in options:
            raise ValueError(f"config argument {key!r} is not one of: {', '.join(options)}")
        options[key] = value
    if options["size"] not in SIZES:
        raise ValueError(f"config size {options['size']!r} is not one of: {', '.join(SIZES)}")
    return ml_collections.ConfigDict(options)


def base_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.seed = 0

    config.model = model = ml_collections.ConfigDict()
    model.arch = "decoder"  # encoder | decoder
    model.d_model = 128
    model.num_heads = 4
    model.num_layers = 4
    model.d_ff = 512
    model.dropout = 0.0
    model.position = "sinusoidal"  # sinusoidal | learned | rotary | alibi | none
    model.norm = "pre"  # post | pre | none: where the norm sits
    model.norm_type = "layernorm"  # layernorm | rmsnorm | dyt: what it computes
    model.attn_scale = True  # divide Q·Kᵀ by √d_k
    model.qk_norm = False  # LayerNorm on each head's queries and keys before Q·Kᵀ
    model.residual = True  # x + sublayer(x)
    model.max_len = 512  # longest sequence (size of a learned position table)
    model.attention = "explicit"  # explicit | fused (jax.nn.dot_product_attention)
    model.dtype = "float32"  # float32 | bfloat16 (compute; parameters stay float32)

    config.train = train = ml_collections.ConfigDict()
    train.num_steps = 2000
    train.batch_size = 32
    train.learning_rate = 1e-3
    train.warmup_steps = 100
    train.end_learning_rate_factor = 0.1  # cosine decay to learning_rate * factor
    train.weight_decay = 0.01
    train.b1 = 0.9
    train.b2 = 0.99
    train.grad_clip_norm = 1.0  # global-norm clipping; 0 disables
    train.log_every = 50
    train.eval_every = 250
    train.checkpoint_every = 500
    train.keep_checkpoints = 3
    train.eval_batches = 8  # batches per periodic evaluation (0 = all); the final one takes all
    train.num_devices = 0  # data parallel: batch split over this many devices (0 = all of them)
    train.steps_per_call = 1  # steps per compiled call: > 1 saves per-call overhead (small models)
    train.microbatches = 1  # > 1: the batch's forward/backward as that many independent slices,
    #                         which XLA:CPU runs on different cores at once (same update)

    config.data = data = ml_collections.ConfigDict()
    data.kind = "synthetic"  # synthetic | text
    data.task = "reverse"  # synthetic: copy | reverse | sort | order | sort_distinct | lag_bits
    data.vocab_size = 16  # synthetic symbols (pad and separator come on top)
    data.seq_len = 32
    data.min_len = 1
    data.eval_seq_len = 0  # 0 = seq_len
    data.eval_min_len = 0  # 0 = min_len
    data.num_train = 20000
    data.num_eval = 1000
    data.text_path = ""  # '' = TFDS hub dataset `tiny_shakespeare`; else a local UTF-8 file
    data.data_dir = ""  # where TFDS prepares datasets; '' = ~/.cache/transformer_jax/tensorflow_datasets
    return config


def tiny(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Seconds-long smoke size of any config (the `tiny` config argument)."""
    config.model.d_model = 32
    config.model.num_heads = 2
    config.model.num_layers = 2
    config.model.d_ff = 64
    config.train.num_steps = 20
    config.train.batch_size = 8
    config.train.warmup_steps = 5
    config.train.log_every = 5
    config.train.eval_every = 10
    config.train.checkpoint_every = 10
    config.train.eval_batches = 2
    config.data.num_train = 512
    config.data.num_eval = 64
    return config

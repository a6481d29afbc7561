"""Claim, on real text: a causal LM needs no positional encoding to model language well; the
causal mask itself tells a token how many came before it.

Run:  python -m transformer_jax.sweep --experiment=experiments/lm_positions.py --workdir=runs/lm_positions
(or the whole real-text suite: scripts/run.sh --suite=lm). Causal character LMs
(configs/lm.py) on tiny Shakespeare with each positional scheme; the metric is validation bits
per character, lower is better.

The text: $TJ_SHAKESPEARE when set (a path; empty = the TFDS hub dataset), else
<repo>/../shared/data/tinyshakespeare.txt when that file exists, else '' = the TFDS hub
dataset `tiny_shakespeare` (downloaded once; offline it fails at once, naming data.text_path).
The path becomes the runs' `data.text_path`, so a workdir stays tied to the text it was trained on.

Thresholds, chosen before the first run and kept: Haviv et al. 2022 measured NoPE 1 % above
learned positions in log-perplexity after full training; we train for minutes, not to
convergence, where NoPE must first learn to count, so "within 5 %" is the claim. "Beats none by
≥ 0.02 bits/char": about 1 % of a char LM's bits/char, the size of effect worth a sentence.

Trained past the bigram plateau: the default size (1,200 steps of 24 windows of 64 characters,
1.8 M characters, about 1.8 passes over the 1.0 M training characters) is sized to bring the
learned-positions baseline below 2.6 bits/char on the whole held-out split within the suite's
30 minutes on 2 cores (probes of this model with learned positions, 3 seeds each: 2.558 at batch
24 and 1,200 steps, 5 min 11 s a variant beside another; 2.528 at batch 32, 6 min 9 s; 2.604 at
batch 32 and 900 steps). An earlier version
trained a 64-wide model 600 steps and stopped at 3.0-3.5 bits/char, barely off the bigram
plateau: that comparison measured how fast each scheme leaves the plateau; the periodic
evaluations in the curves still show that early picture.
"""
import os
from pathlib import Path

import ml_collections

from transformer_jax.studies.study import (Comparison, Expectation, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SHARED_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
BITS = "eval/bits_per_char"
SIZES = {  # width, layers, heads, context, batch, steps, peak learning rate
    "tiny": dict(d_model=32, num_layers=2, num_heads=2, seq_len=32, batch=8, steps=20, lr=1e-3),
    "default": dict(d_model=128, num_layers=2, num_heads=4, seq_len=64, batch=24, steps=1200,
                    lr=3e-3),
    "large": dict(d_model=384, num_layers=6, num_heads=6, seq_len=256, batch=64, steps=5000,
                  lr=1e-3),
}
SCHEMES = ("none", "learned", "sinusoidal", "rotary", "alibi")


def shakespeare_path() -> str:
    """$TJ_SHAKESPEARE, else the shared local copy if it exists, else '' (the TFDS hub)."""
    if "TJ_SHAKESPEARE" in os.environ:
        return os.environ["TJ_SHAKESPEARE"]
    return str(SHARED_TEXT) if SHARED_TEXT.is_file() else ""


def lm_base(size: str, d_model: int, num_layers: int, num_heads: int, seq_len: int, batch: int,
            steps: int, lr: float, d_ff: int = 0) -> ml_collections.ConfigDict:
    """configs/lm.py on tiny Shakespeare at this size (shared with lm_scaling.py); unlocked.
    Periodic evaluations read 8 batches of windows spread over the held-out split; the final
    one reads all of it (every non-overlapping window: 111,540 characters)."""
    base = load_config(REPO / "configs/lm.py", "tiny" if size == "tiny" else "")
    base.unlock()
    base.data.update(text_path=shakespeare_path(), seq_len=seq_len)
    base.model.update(d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                      d_ff=d_ff or 4 * d_model)
    # 10 steps per call, configs/lm.py's value when these studies were registered: the count
    # changes no number (bitwise), but it is part of each study's design and fingerprint
    study_schedule(base, steps, batch_size=batch, learning_rate=lr, eval_batches=8,
                   steps_per_call=10)
    if size == "tiny":  # seconds: one step per call compiles faster than a scan of ten
        base.train.update(steps_per_call=1, microbatches=1, eval_every=steps, log_every=steps)
    return base


def get_study(size: str) -> Study:
    base = lm_base(size, **SIZES[size])
    variants = {p: {"model.position": p} for p in SCHEMES}
    return Study(
        name="lm_positions",
        claim="A causal language model needs no positional encoding: the causal mask leaks "
              "position (real text, tiny Shakespeare, bits per character).",
        published=("Haviv et al. 2022 (causal LMs, no positions): 20.97 vs 20.42 perplexity for "
                   "learned positions (1 % in log-perplexity); Su et al. 2021 (RoFormer) and "
                   "Press et al. 2022 (ALiBi): rotary and ALiBi train faster than absolute "
                   "positions."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(BITS, "eval/accuracy", "train/loss"),
        expectations=(
            Expectation("no positions within 5 % of learned positions (bits/char)", BITS,
                        "none", Comparison.WITHIN, 0.05, b="learned", higher_is_better=False),
            Expectation("rotary beats no positions by ≥ 0.02 bits/char", BITS, "rotary",
                        Comparison.BETTER, 0.02, b="none", higher_is_better=False),
            Expectation("ALiBi beats no positions by ≥ 0.02 bits/char", BITS, "alibi",
                        Comparison.BETTER, 0.02, b="none", higher_is_better=False),
        ),
        suite="lm",
        amendments=(
            "4ea43b5: the final evaluation reads the whole held-out split (was 200 windows), "
            "periodic ones 8 batches, after the first results (74857dd, 600 steps, d_model 64: no"
            " positions within 5 % of learned held at -1.4 %, rotary and ALiBi beat none)",
            "19a818e: re-sized past the bigram plateau (d_model 128, 2 layers, batch 32, lr 3e-3,"
            " 1,200 steps), thresholds kept; 'no positions within 5 %' then turned from holds to "
            "does not hold (+21.2 %, da71ade)",
            "5b1829a: batch 32 -> 24 so that the lm suite fits its 30 minutes",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )

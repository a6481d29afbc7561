"""Claim, on real text: rounding the operands of every Dense layer's products to bfloat16 (sums
and weights in float32, `model.dense_matmul=bfloat16`) trains a character LM to the validation
loss float32 reaches, because the rounding moves the gradient far less than the batch does.

Run:  python -m transformer_jax.sweep --experiment=experiments/lm_bfloat16.py --workdir=runs/lm_bfloat16
(or its suite: scripts/run.sh --suite=precision). Causal character LMs on tiny
Shakespeare (lm_positions.lm_base), metric validation bits per character (lower is better).

Why this study: XLA:CPU multiplies bfloat16 x bfloat16 -> float32 on the AMX / AVX512-BF16
units of recent Intel Xeons at 2.5-3.8x its float32 rate on these shapes, and issue 33 asks
for bfloat16 compute with float32 weights where the loss stays within the float32 run's noise.
The model is the one `scripts/vs_nanogpt.sh` races against nanoGPT (configs/lm.py: 4 layers of
width 128, 4 heads, context 64, batch 12, learning rate 1e-3, 2,000 steps), on the studies'
schedule. Only the Dense products change: attention's Q·Kᵀ and ·V, the softmax, the norms and
the optimizer stay float32.

A suite of its own (precision), apart from lm's: on a CPU without AMX or AVX512-BF16 its
bfloat16 arm is emulated in float32 arithmetic and its 4-layer, 2,000-step runs are the longest
of the real-text studies; with it the lm suite took about an hour on a 2-core AMD EPYC (4 of 15
variants in its first 15 minutes), without it the lm suite keeps its 30 minutes.

Thresholds, chosen before the first run:
  outcome    bfloat16 within 1 % of float32 in final bits/char. The lm studies' seed spread at
             this scale is 0.006-0.012 bits/char (0.3-0.5 %), so 1 % is about two to three
             of it; Kalamkar et al. 2019 report bfloat16 training matching float32 across
             models without changing hyperparameters.
  mechanism  at every finished run's final parameters, rounding / batch ≤ 0.1 (the rounding
             moves the gradient by at most a tenth of what drawing another batch does; see
             transformer_jax/studies/analysis/rounding.py), in every seed of both variants.
"""
from pathlib import Path

from transformer_jax.studies.analysis import rounding
from transformer_jax.studies.study import Comparison, Expectation, Study, load_module

HERE = Path(__file__).resolve().parent
BITS = "eval/bits_per_char"
# configs/lm.py's model and batch at the default size; lm_positions' tiny and large sizes
DEFAULT = dict(d_model=128, num_layers=4, num_heads=4, seq_len=64, batch=12, steps=2000, lr=1e-3)
WITHIN = 0.01  # relative, final bits/char
MAX_RATIO = 0.1  # rounding / batch, per seed
TINY_PAIRS = 2  # the tiny size's batch pairs: a smoke run measures fewer (seconds)


def get_study(size: str) -> Study:
    lm_positions = load_module(HERE / "lm_positions.py")
    base = lm_positions.lm_base(size, **(DEFAULT if size == "default" else lm_positions.SIZES[size]))
    variants = {"float32": {"model.dense_matmul": "compute"},
                "bfloat16": {"model.dense_matmul": "bfloat16"}}
    checks = tuple(rounding.Check(f"{v}: the rounding moves the gradient ≤ {MAX_RATIO} × as far "
                                  f"as another batch does", v, lambda r: r <= MAX_RATIO)
                   for v in variants)
    return Study(
        name="lm_bfloat16",
        claim="Rounding every Dense product's operands to bfloat16 (float32 sums and weights) "
              "trains a character LM as well as float32: the rounding moves the gradient far "
              "less than the choice of batch does (tiny Shakespeare, bits per character).",
        published=("Kalamkar et al. 2019 (A Study of BFLOAT16 for Deep Learning Training): "
                   "bfloat16 operands with float32 accumulation and weights match float32 "
                   "training across models without changing hyperparameters. Micikevicius et "
                   "al. 2018: the same for float16 with loss scaling."),
        base=base, variants=variants, seeds=(0, 1, 2, 3, 4),
        metrics=(BITS, "eval/accuracy", "train/loss", "train/grad_norm"),
        expectations=(
            Expectation(f"bfloat16 Dense products within {WITHIN:.0%} of float32 (bits/char)",
                        BITS, "bfloat16", Comparison.WITHIN, WITHIN, b="float32",
                        higher_is_better=False),
        ),
        suite="precision",
        analyses=(rounding.make_analysis(
            checks, pairs=TINY_PAIRS if size == "tiny" else rounding.PAIRS),),
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )

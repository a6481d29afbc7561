"""Claim, on real text: the price of leaving ÷√d_k out grows with d_k itself, with the number of
heads held fixed: at one head, the unscaled model's penalty in bits per character is larger at
d_k 128 than at d_k 16, each arm at its own best learning rate.

Run:  python -m transformer_jax.sweep --experiment=experiments/lm_head_dim.py --workdir=runs/lm_head_dim --jobs=2
(or its suite: scripts/run.sh --suite=lm_head_dim)

Issue 65, item 4 (written before the run). lm_scaling varies d_k through the head count at a
fixed d_model: 8 heads of d_k 16 against 1 head of d_k 128. d_k and the number of heads move
together there, so each of its verdicts mixes the two, and the growth of the penalty with d_k,
the claim's core, is only an analysis on its page. Here one variable moves:
  - Heads. Every arm has one head; `model.head_dim` sets its d_k (16 or 128) at d_model 128, so
    W_q, W_k, W_v are 128 × d_k and W_o is d_k × 128. What moves with d_k is the attention's
    width and parameter count (lm_scaling kept those and moved the head count instead): the two
    studies together separate the head count from d_k. The penalty is compared at one d_k, so
    the extra parameters are on both sides of it.
  - Learning rate. Each arm is tuned over LEARNING_RATES, lm_scaling's 3e-3 and one below, each
    seed choosing by its training loss (studies/tuning.py), the grid grown ×3 or ÷3 while a
    seed's choice sits at an edge, up to GRID_CAP point beyond each end (studies/grid.py).
    softmax_plateau found, on a synthetic task, most of d_k 64's penalty gone once each arm had
    its own rate: a penalty here is one each arm's best rate leaves.
  - Budget. lm_scaling's: 1,200 steps, its cosine schedule. It is not the plateau (lm_scaling's
    runs still gained 0.05–0.08 bits/char over their last 20 %); the page's "Budget: fixed"
    table gives each arm's late gain. A plateau budget is not attempted: this design changes
    one thing in lm_scaling's, the head count, and tunes the rate.
The model and text are lm_scaling's (lm_positions' base: 2 layers, sinusoidal positions, tiny
Shakespeare), so at d_k 128 its arms are lm_scaling's dk128 arms with a tuned rate.

Expectations (bits/char, lower is better), with lm_scaling's thresholds, written there before
its first run:
  - d_k 16: unscaled within 2 % of scaled (Vaswani et al.: "perform similarly" for small d_k;
    lm_scaling's 8 heads of 16 gave +2.7 %, contradicted);
  - d_k 128: scaled ahead by at least 0.02 bits/char (about 1 % of a char LM's bits/char;
    lm_scaling's one head of 128 at 3e-3 gave 0.86: this tunes the rate, which can shrink it);
  - the claim's core, the growth: (unscaled − scaled) at d_k 128 minus (unscaled − scaled) at
    d_k 16, per seed, at least GROWTH bits/char (Comparison.DIFFERENCE_OF_DIFFERENCES). The
    rival, "the head count, not d_k, made lm_scaling's penalty grow", predicts a growth near 0.
No pilot was run for this design: nothing of these one-head d_k 16 arms, or of any arm at another
rate than 3e-3, was seen before it.

Sized (default): 4 tuned arms, 8 candidates, 24 runs of 1,200 steps, 3 more for each arm whose
grid grows; in a suite of its own (the lm suite already takes 29 of its 30 minutes).
"""
from pathlib import Path

from transformer_jax.studies import tuning
from transformer_jax.studies.grid import GridExtension
from transformer_jax.studies.study import Comparison, Expectation, Study, load_module

HERE = Path(__file__).resolve().parent
BITS = "eval/bits_per_char"
HEAD_DIMS = {"tiny": (8, 32), "default": (16, 128), "large": (16, 256)}  # one head each
LEARNING_RATES = {"tiny": (1e-3, 3e-3), "default": (1e-3, 3e-3), "large": (3e-4, 1e-3)}
GRID_FACTOR, GRID_CAP = 3.0, 1
SIMILAR = 0.02  # lm_scaling's: unscaled within 2 % of scaled at the narrow head
AHEAD = 0.02  # lm_scaling's: scaled ahead by at least this many bits/char at the wide head
GROWTH = 0.02  # the penalty at the wide head exceeds the narrow head's by at least this much


def name(d_k: int, scaled: bool) -> str:
    return f"dk{d_k}_{'scaled' if scaled else 'unscaled'}"


def expectations(narrow: int, wide: int) -> tuple[Expectation, ...]:
    tuned = "one head, each arm at its best learning rate"
    return (
        Expectation(f"d_k={narrow}, {tuned}: unscaled within {SIMILAR:.0%} of scaled (bits/char)",
                    BITS, name(narrow, False), Comparison.WITHIN, SIMILAR, b=name(narrow, True),
                    higher_is_better=False),
        Expectation(f"d_k={wide}, {tuned}: scaled beats unscaled by ≥ {AHEAD} bits/char", BITS,
                    name(wide, True), Comparison.BETTER, AHEAD, b=name(wide, False),
                    higher_is_better=False),
        Expectation(f"{tuned}: the penalty of no ÷√d_k (unscaled − scaled, bits/char) is at "
                    f"least {GROWTH} larger at d_k={wide} than at d_k={narrow}", BITS,
                    name(wide, True), Comparison.DIFFERENCE_OF_DIFFERENCES, GROWTH,
                    b=name(wide, False), c=name(narrow, True), d=name(narrow, False),
                    higher_is_better=False),
    )


def get_study(size: str) -> Study:
    lm_positions, lm_scaling = (load_module(HERE / f"{n}.py") for n in ("lm_positions",
                                                                       "lm_scaling"))
    sizes = dict(lm_positions.SIZES, large=lm_scaling.LARGE)  # lm_scaling's model at each size
    base = lm_positions.lm_base(size, **dict(sizes[size], num_heads=1))
    variants, tuned = {}, {}
    for d_k in HEAD_DIMS[size]:
        for scaled in (True, False):
            arm = name(d_k, scaled)
            candidates = tuning.tuned_arm(
                arm, {"model.head_dim": d_k, "model.attn_scale": scaled},
                {"train.learning_rate": LEARNING_RATES[size]})
            variants.update(candidates)
            tuned[arm] = tuple(candidates)
    return Study(
        name="lm_head_dim",
        claim="The unscaled attention's penalty grows with d_k itself: at a fixed head count "
              "(one), each arm at its own best learning rate, leaving ÷√d_k out costs more bits "
              "per character at d_k 128 than at d_k 16 (real text, tiny Shakespeare).",
        published=("Vaswani et al. 2017: for small d_k scaled and unscaled dot products perform "
                   "similarly; for large d_k the unscaled logits push the softmax into regions "
                   "of tiny gradients. Unit-variance q, k: var(q·k) = d_k."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(BITS, "eval/accuracy", "attention/entropy/layer_00", "train/grad_norm"),
        expectations=expectations(*HEAD_DIMS[size]),
        tuned=tuned, extend_grid=GridExtension("train.learning_rate", GRID_FACTOR, GRID_CAP),
        suite="lm_head_dim")

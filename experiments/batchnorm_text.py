"""Claim: on real text at small batches, BatchNorm trains a causal language model worse than
LayerNorm, and more so the smaller the batch; its predictions then depend on the rest of the
batch in training mode, and never in evaluation mode. Stated before running (issue 32 item 3).

Run:  python -m transformer_jax.sweep --experiment=experiments/batchnorm_text.py --workdir=runs/bn_text

The synthetic `batchnorm` study found no deficit (sort, 8 × 4-16 tokens per statistic, stationary
data): an honest negative whose set-up favours BatchNorm. Text is where Shen et al. 2020 saw the
batch statistics fluctuate. Here the lm suite's character LM (tiny Shakespeare, Pre-LN decoder,
2 layers of width 128, context 64, 1,200 steps) takes LayerNorm or BatchNorm in every norm's
place, at the lm suite's batch of 24 and at a batch of 4 (24 × 64 and 4 × 64 tokens per
statistic). Both batches run the same number of steps, so batch 4 sees a sixth of the data: only
the gap between the norms at each batch is compared, never the batches. Both arms run one pass
per batch (train.microbatches = 1, which BatchNorm needs: its statistics are the whole batch's).

A caveat stated up front: in a causal decoder, BatchNorm's training statistics pool every
position of the batch, the later ones too, so a token's normalization carries a little of its
own sequence's future (one part in B·T); evaluation normalizes with running averages and does
not. If that helped BatchNorm's training loss, it would not help its evaluation.

The batch-independence analysis (studies/analysis/batch_independence.py) scores each variant's
first seed on 64 held-out windows in one batch, in batches of 8 and of 1, and with 8 more padded
positions, in evaluation mode and (BatchNorm) training mode. Its checks are written here before
any run, with the float32-rounding bound the synthetic study needed (1e-4) from the start.
"""
from pathlib import Path

from transformer_jax.studies.analysis import batch_independence
from transformer_jax.studies.study import Comparison, Expectation, Study, load_module

HERE = Path(__file__).resolve().parent
BITS = "eval/bits_per_char"
NORMS = ("layernorm", "batchnorm")
BATCHES = {"tiny": (8, 2), "default": (24, 4), "large": (64, 8)}  # the lm suite's, and small
BATCH_DEPENDENT = 1e-3  # a logit moved by more than this: the output depends on the batch


def name(norm: str, batch: int) -> str:
    return f"{norm}_batch{batch}"


def get_study(size: str) -> Study:
    lm_positions = load_module(HERE / "lm_positions.py")
    base = lm_positions.lm_base(size, **lm_positions.SIZES[size])  # the lm suite's model and steps
    base.train.microbatches = 1  # BatchNorm's statistics are the whole batch's; LayerNorm alike
    large, small = BATCHES[size]
    variants = {name(norm, b): {"model.norm_type": norm, "train.batch_size": b}
                for b in (large, small) for norm in NORMS}
    return Study(
        name="batchnorm_text",
        claim="On real text at small batches, BatchNorm trains a causal character LM worse than "
              "LayerNorm, the more so the smaller the batch (tiny Shakespeare, bits per "
              "character).",
        published=("Shen et al. 2020 (PowerNorm): BatchNorm in a Transformer's LayerNorm places "
                   "trains worse on machine translation (IWSLT14 De-En 34.4 vs 35.5 BLEU), "
                   "traced to large fluctuations of the batch statistics on text; Ioffe 2017 "
                   "(Batch Renormalization): BatchNorm degrades at small batches, where "
                   "training and running statistics differ most."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(BITS, "eval/accuracy", "train/loss"),
        expectations=(
            Expectation(f"at batch {large}, LayerNorm beats BatchNorm by ≥ 0.05 bits/char", BITS,
                        name("layernorm", large), Comparison.BETTER, 0.05,
                        b=name("batchnorm", large), higher_is_better=False),
            Expectation(f"at batch {small}, LayerNorm beats BatchNorm by ≥ 0.1 bits/char", BITS,
                        name("layernorm", small), Comparison.BETTER, 0.1,
                        b=name("batchnorm", small), higher_is_better=False),
        ),
        suite="mechanisms",
        analyses=(batch_independence.make_analysis(independence_checks(large, small)),),
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )


def independence_checks(large: int, small: int) -> tuple[batch_independence.Check, ...]:
    """Written before the first run."""
    Mode = batch_independence.Mode
    unchanged_to_rounding = load_module(HERE / "batchnorm.py").unchanged_to_rounding
    ln = tuple(name("layernorm", b) for b in (large, small))
    bn = tuple(name("batchnorm", b) for b in (large, small))
    return (
        batch_independence.Check(
            "LayerNorm: no prediction and no accuracy changes, and no logit moves by more than "
            "1e-4, in batches of 8 and of 1 and with more padding", ln,
            lambda found: unchanged_to_rounding(found[Mode.EVAL])),
        batch_independence.Check(
            "BatchNorm in evaluation mode (running statistics): the same", bn,
            lambda found: unchanged_to_rounding(found[Mode.EVAL])),
        batch_independence.Check(
            "BatchNorm in training mode (batch statistics): the logits change with the batch "
            f"(batches of 8 or of 1: some logit moves by more than {BATCH_DEPENDENT})", bn,
            lambda found: any(c.max_logit_diff > BATCH_DEPENDENT for c in found[Mode.TRAINING][1:3])),
    )


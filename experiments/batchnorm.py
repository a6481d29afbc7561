"""Claim: BatchNorm trains worse than LayerNorm in a Transformer, or its predictions change with
the evaluation batch. Stated before running: the first. BatchNorm trains worse, and more so at
a small batch, where its batch statistics are noisier.

Run:  python -m transformer_jax.sweep --experiment=experiments/batchnorm.py --workdir=runs/bn
The second half of the claim does not apply to this implementation, by construction: evaluation
normalizes with running statistics (`model.norm_type=batchnorm`, `transformer_jax.model.norms`), so a
prediction does not depend on the rest of the evaluation batch; tests/test_batchnorm.py checks
that exactly (and that in training mode it does depend on it), and the batch-independence
analysis measures it on the trained models (studies/analysis/batch_independence.py: batches of
64, 8 and 1, more padding; evaluation and training mode). What remains to measure is the
cost of normalizing by batch statistics while training: the statistics of a batch of token
vectors move from batch to batch (Shen et al. 2020 measured large fluctuations in NLP and
traced BatchNorm's deficit to them), and evaluation uses averages of them that the model never
saw during training. Pre-LN encoders learn `sort` with LayerNorm or BatchNorm in every norm's
place, at batch 32 and at batch 8 (the same number of steps: batch 8 sees a quarter of the data,
so only the gap between the norms at each batch is compared, never the batches).
"""
from pathlib import Path

from transformer_jax.studies.analysis import batch_independence
from transformer_jax.studies.study import (Comparison, Expectation, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {
    "tiny": dict(steps=20, d_model=16, layers=1, batches=(8, 4)),
    "default": dict(steps=300, d_model=64, layers=2, batches=(32, 8)),
    "large": dict(steps=5000, d_model=256, layers=6, batches=(128, 16)),
}
NORMS = ("layernorm", "batchnorm")
BATCH_DEPENDENT = 1e-3  # a logit moved by more than this: the output depends on the batch
ROUNDING = 1e-4  # float32 rounding of a logit of size ~10 through a few layers


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"], norm="pre",
                      num_layers=s["layers"])
    study_schedule(base, s["steps"], learning_rate=1e-3)
    large, small = s["batches"]
    variants = {f"{norm}_batch{b}": {"model.norm_type": norm, "train.batch_size": b}
                for b in (large, small) for norm in NORMS}
    acc = "eval/accuracy"
    return Study(
        name="batchnorm",
        claim="BatchNorm trains worse than LayerNorm in a Transformer (stated before running; "
              "its predictions do not change with the evaluation batch here: evaluation uses "
              "running statistics).",
        published=("Shen et al. 2020 (PowerNorm): a Transformer with BatchNorm in LayerNorm's "
                   "places trains worse on machine translation (IWSLT14 De-En 34.4 vs 35.5 "
                   "BLEU), which they trace to large fluctuations of the batch statistics in "
                   "NLP; Ioffe 2017 (Batch Renormalization): BatchNorm degrades at small "
                   "batches, where training and running statistics differ most."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(acc, "train/accuracy", "eval/loss"),
        expectations=(
            Expectation(f"at batch {large}, LayerNorm beats BatchNorm (accuracy ≥ 0.02)", acc,
                        f"layernorm_batch{large}", Comparison.BETTER, 0.02,
                        b=f"batchnorm_batch{large}"),
            Expectation(f"at batch {small}, LayerNorm beats BatchNorm (accuracy ≥ 0.05)", acc,
                        f"layernorm_batch{small}", Comparison.BETTER, 0.05,
                        b=f"batchnorm_batch{small}"),
        ),
        suite="components",
        analyses=(batch_independence.make_analysis(independence_checks(large, small)),),
        amendments=(
            "5b85c94: the batch-independence checks 'identical, not merely close' failed by ~1e-5"
            " (float32 rounding); two checks with a bound of 1e-4 were added after that result, "
            "beside them (the originals kept)",
            "f9bddeb: the commit that added those two checks (after the first results, 0e64cc5, "
            "and the first analysis, 5b85c94)",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )


def independence_checks(large: int, small: int) -> tuple[batch_independence.Check, ...]:
    """Written before the analysis first ran (issue 32 item 3; the runs it reads existed)."""
    Mode = batch_independence.Mode
    ln = tuple(f"layernorm_batch{b}" for b in (large, small))
    bn = tuple(f"batchnorm_batch{b}" for b in (large, small))
    return (
        batch_independence.Check(
            "LayerNorm: the logits are identical, not merely close, in batches of 8 and of 1 "
            "and with more padding", ln, lambda found: batch_independence.identical(found[Mode.EVAL])),
        batch_independence.Check(
            "BatchNorm in evaluation mode (running statistics): identical the same way", bn,
            lambda found: batch_independence.identical(found[Mode.EVAL])),
        batch_independence.Check(
            "BatchNorm in training mode (batch statistics): the logits change with the batch "
            f"(batches of 8 or of 1: some logit moves by more than {BATCH_DEPENDENT})", bn,
            lambda found: any(c.max_logit_diff > BATCH_DEPENDENT for c in found[Mode.TRAINING][1:3])),
        # Added after the first analysis (5b85c94): the 'identical' checks above failed by
        # ~1e-5 in batches of 1 and with padding, while batches of 8 were bitwise equal and no
        # prediction moved: float32 rounding of matmuls of other shapes, not a dependence on
        # the batch. The checks above stay as they were; these say what was meant, with a bound.
        batch_independence.Check(
            f"LayerNorm: no prediction and no accuracy changes, and no logit moves by more than "
            f"{ROUNDING} (float32 rounding of other matmul shapes)", ln,
            lambda found: unchanged_to_rounding(found[Mode.EVAL])),
        batch_independence.Check(
            "BatchNorm in evaluation mode: the same", bn,
            lambda found: unchanged_to_rounding(found[Mode.EVAL])),
    )


def unchanged_to_rounding(comparisons) -> bool:
    return all(c.changed == 0.0 and c.accuracy == comparisons[0].accuracy
               and c.max_logit_diff <= ROUNDING for c in comparisons)

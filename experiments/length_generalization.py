"""Claim (an extension of the positional one): how a model encodes position decides whether it
works on sequences longer than any it was trained on.

Run:  python -m transformer_jax.sweep --experiment=experiments/length_generalization.py \
          --workdir=runs/length
Causal decoders learn to copy sequences of length ≤ N and are evaluated on lengths N+1 … 2N
only. A learned table has never trained its rows past N; sinusoidal angles past N were never
seen; ALiBi and no positions see only relative distances or counts.
"""
from pathlib import Path

from transformer_jax.study import Comparison, Expectation, Study, load_config, study_schedule

REPO = Path(__file__).resolve().parents[1]
SIZES = {
    "tiny": dict(steps=30, d_model=32, n=6),
    "default": dict(steps=400, d_model=64, n=8),
    "large": dict(steps=10000, d_model=256, n=32),
}
SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi")


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=copy" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    n = s["n"]
    base.model.update(arch="decoder", d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"],
                      num_layers=2, max_len=4 * n + 2)
    base.data.update(seq_len=n, min_len=1, eval_seq_len=2 * n, eval_min_len=n + 1)
    study_schedule(base, s["steps"])
    variants = {p: {"model.position": p} for p in SCHEMES}
    return Study(
        name="length_generalization",
        claim="Relative or no positional information extrapolates to longer sequences; absolute "
              "(learned, sinusoidal) does not.",
        published=("Kazemnejad et al. 2023 and Press et al. 2021: trained on lengths ≤ N and tested "
                   "to 2N, ALiBi and no positions degrade least, learned and sinusoidal collapse "
                   "past N; results vary with seed, so every seed is reported (summary.csv)."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=("eval/accuracy", "eval/loss", "train/accuracy"),
        expectations=(
            Expectation("ALiBi beats learned positions on unseen lengths (accuracy ≥ 0.05)",
                        "eval/accuracy", "alibi", Comparison.BETTER, 0.05, b="learned"),
            Expectation("no positions beats learned positions on unseen lengths (≥ 0.05)",
                        "eval/accuracy", "none", Comparison.BETTER, 0.05, b="learned"),
            Expectation("ALiBi beats sinusoidal on unseen lengths (accuracy ≥ 0.05)",
                        "eval/accuracy", "alibi", Comparison.BETTER, 0.05, b="sinusoidal"),
        ),
    )

r"""Claim: RMSNorm, which only rescales, trains as well as LayerNorm, which also re-centres.

Run:  .venv/bin/python -m transformer_jax.sweep --experiment=docs/examples/my_study.py \
          --workdir=runs/rmsnorm
The tutorial study of docs/writing-a-study.md: Pre-LN encoders learn `sort` with LayerNorm,
RMSNorm or no norm at all in the norm's places.
"""
from pathlib import Path

from transformer_jax.studies.study import (Comparison, Expectation, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[2]
SIZES = {  # --size=tiny is a smoke test; default fits a 2-core CPU; large is for a GPU
    "tiny": dict(steps=20, d_model=32, seeds=(0, 1)),
    "default": dict(steps=300, d_model=64, seeds=(0, 1, 2)),
    "large": dict(steps=5000, d_model=256, seeds=(0, 1, 2)),
}


def get_study(size: str) -> Study:
    s = SIZES[size]
    tiny = ",tiny" if size == "tiny" else ""
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + tiny)
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"], norm="pre")
    study_schedule(base, s["steps"])
    return Study(
        name="rmsnorm",
        claim="RMSNorm (rescaling only) trains as well as LayerNorm (re-centring and rescaling).",
        published="Zhang & Sennrich 2019: RMSNorm matches LayerNorm's quality, 7-64 % faster.",
        base=base,
        variants={"layernorm": {"model.norm_type": "layernorm"},
                  "rmsnorm": {"model.norm_type": "rmsnorm"},
                  "no_norm": {"model.norm": "none"}},
        seeds=s["seeds"],
        metrics=("eval/accuracy", "eval/loss"),
        expectations=(
            Expectation("RMSNorm within 5 % of LayerNorm (accuracy)", "eval/accuracy",
                        "rmsnorm", Comparison.WITHIN, 0.05, b="layernorm"),
            Expectation("LayerNorm beats no norm (accuracy ≥ 0.05)", "eval/accuracy",
                        "layernorm", Comparison.BETTER, 0.05, b="no_norm"),
        ),
    )

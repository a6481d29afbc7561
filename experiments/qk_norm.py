"""Claim: normalizing each head's queries and keys (QK-norm) bounds the attention logits, so
training stays stable at learning rates where ÷√d_k alone lets them grow until it degrades.

Run:  python -m transformer_jax.sweep --experiment=experiments/qk_norm.py --workdir=runs/qk_norm
A Pre-LN encoder with one wide head learns to sort at three learning rates, with a short warm-up
(5 %) and no gradient clipping: scaled-only (÷√d_k) and QK-norm (a LayerNorm over head_dim on q
and k, with the ÷√d_k scale still on) at each, unscaled at the middle one. ÷√d_k fixes the logits' scale at
initialization only; nothing stops W_q, W_k from growing later, and at a high learning rate
they do (Wortsman et al. 2023). With QK-norm |q̂·k̂|·scale ≤ max γ_q·max γ_k·√d_k whatever W_q, W_k do.
"""
from pathlib import Path

from transformer_jax.studies.study import (Comparison, Expectation, Kind, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # steps, d_model (= d_k, one head), layers, learning rates low, mid, high
    "tiny": dict(steps=30, d_model=32, layers=2, lrs=(3e-3, 1e-2, 3e-2)),
    "default": dict(steps=150, d_model=64, layers=2, lrs=(3e-3, 1e-2, 3e-2)),
    "large": dict(steps=5000, d_model=512, layers=6, lrs=(1e-3, 3e-3, 1e-2)),
}
ATTENTION = {  # what each variant does to Q·Kᵀ
    "scaled": {"model.attn_scale": True, "model.qk_norm": False},
    "qk_norm": {"model.attn_scale": True, "model.qk_norm": True},
}
UNSCALED = {"model.attn_scale": False, "model.qk_norm": False}  # at the middle rate only: the
# scaling study sweeps it; here it shows the logit scale ÷√d_k removes at initialization
LR_NAMES = ("low_lr", "mid_lr", "high_lr")


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=1, d_ff=4 * s["d_model"], norm="pre",
                      num_layers=s["layers"])
    study_schedule(base, s["steps"], grad_clip_norm=0.0, warmup_steps=max(s["steps"] // 20, 1))
    lrs = dict(zip(LR_NAMES, s["lrs"]))
    variants = {f"{kind}_{name}": {**overrides, "train.learning_rate": lr}
                for name, lr in lrs.items() for kind, overrides in ATTENTION.items()}
    variants["unscaled_mid_lr"] = {**UNSCALED, "train.learning_rate": lrs["mid_lr"]}
    last_layer = f"attention/max_abs_logit/layer_{s['layers'] - 1:02d}"
    return Study(
        name="qk_norm",
        claim="QK-norm bounds the attention logits, so training stays stable at learning rates "
              "where ÷√d_k alone degrades.",
        published=("Wortsman et al. 2023: without QK-layernorm, small Transformers' attention "
                   "logits grow and training diverges above lr ≈ 1e-2; with it the final loss "
                   "stays flat over two orders of magnitude of learning rate. Dehghani et al. "
                   "2023 (ViT-22B): LayerNorm on q and k was needed to train at 22B at all."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=("eval/accuracy", "eval/loss", "attention/max_abs_logit/layer_00", last_layer,
                 "train/grad_norm"),
        expectations=(
            Expectation("at the high learning rate, QK-norm beats scaled-only (accuracy ≥ 0.1)",
                        "eval/accuracy", "qk_norm_high_lr", Comparison.BETTER, 0.1,
                        b="scaled_high_lr"),
            Expectation("at the high learning rate, QK-norm keeps the first layer's max logit "
                        "lower than scaled-only (by ≥ 10)", "attention/max_abs_logit/layer_00",
                        "qk_norm_high_lr", Comparison.BETTER, 10.0, b="scaled_high_lr",
                        higher_is_better=False),
            # Added after the results (the amendment below): the same comparison judged as a
            # ratio on the log scale, where a heavy-tailed max logit belongs; the one above
            # stays as registered. 10×: an order of magnitude.
            Expectation("at the high learning rate, scaled-only's first-layer max logit is at "
                        "least 10× QK-norm's (geometric mean of the per-seed ratios)",
                        "attention/max_abs_logit/layer_00", "qk_norm_high_lr", Comparison.RATIO,
                        10.0, b="scaled_high_lr", higher_is_better=False, kind=Kind.POST_HOC,
                        why="its 10× was set after per-seed ratios of 33–58× had been seen "
                            "(the amendment 06bcce4)"),
            Expectation("QK-norm keeps its accuracy from the middle to the high learning rate "
                        "(within 10 %)", "eval/accuracy", "qk_norm_high_lr", Comparison.WITHIN,
                        0.1, b="qk_norm_mid_lr"),
            Expectation("at the low learning rate, QK-norm costs nothing (accuracy within 5 % "
                        "of scaled-only)", "eval/accuracy", "qk_norm_low_lr", Comparison.WITHIN,
                        0.05, b="scaled_low_lr"),
            Expectation("÷√d_k still matters at the middle rate (scaled beats unscaled, "
                        "accuracy ≥ 0.05)", "eval/accuracy", "scaled_mid_lr", Comparison.BETTER,
                        0.05, b="unscaled_mid_lr"),
        ),
        amendments=(
            "4d878cf: the design was committed with its measured result in the commit message (5 "
            "of 5 expectations hold at --size=default), so it was never registered before a run; "
            "its first results file (74857dd) said the same",
            "06bcce4 (issue 49): the max-logit comparison added as a ratio on the log scale "
            "(scaled-only's at least 10x QK-norm's), the absolute one (by at least 10) kept as "
            "registered. Before, the absolute one was inconclusive, 112.5 [-2.7, 227.7], with "
            "per-seed ratios of 58, 35 and 33 already seen when the 10x was chosen",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
            "c3185cb: kinds declared after the results (issue 63): each check and post hoc says "
            "why beside it; no threshold, variant or seed moved",
        ),
    )

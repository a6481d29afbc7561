"""Claim: dividing Q·Kᵀ by √d_k keeps the softmax out of saturation, so gradients flow.

Run:  python -m transformer_jax.sweep --experiment=experiments/scaling.py --workdir=runs/scaling
An encoder with one wide head (d_k = d_model) learns to sort, with and without the scaling, at
two learning rates. Unscaled logits have variance ≈ d_k at initialization: the softmax starts
nearly one-hot, and its gradient nearly vanishes.
"""
from pathlib import Path

from transformer_jax.studies.analysis import probes
from transformer_jax.studies.study import (Comparison, Expectation, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # steps, d_model (= d_k, one head), learning rates
    "tiny": dict(steps=30, d_model=32, lrs=(1e-3, 3e-3)),
    "default": dict(steps=300, d_model=64, lrs=(1e-3, 3e-3)),
    "large": dict(steps=5000, d_model=512, lrs=(3e-4, 1e-3)),
}


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=1, d_ff=4 * s["d_model"], norm="post",
                      num_layers=2)
    study_schedule(base, s["steps"])
    low, high = s["lrs"]
    variants = {
        "scaled": {"model.attn_scale": True, "train.learning_rate": low},
        "unscaled": {"model.attn_scale": False, "train.learning_rate": low},
        "scaled_high_lr": {"model.attn_scale": True, "train.learning_rate": high},
        "unscaled_high_lr": {"model.attn_scale": False, "train.learning_rate": high},
    }
    return Study(
        name="scaling",
        claim="Dividing Q·Kᵀ by √d_k keeps softmax out of saturation so gradients flow.",
        published=("Unit-variance q, k with d_k = 64: max attention weight ≈ 0.79 and normalized "
                   "entropy ≈ 0.14 unscaled vs ≈ 0.11 / 0.89 scaled; Britz et al. 2017: unscaled "
                   "dot attention loses ≈ 4 BLEU at 1024 dims; Wortsman et al. 2023: logit growth "
                   "makes small models unstable at high learning rates."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=("eval/accuracy", "eval/loss", "attention/entropy/layer_00", "train/grad_norm"),
        expectations=(
            Expectation("scaled reaches higher eval accuracy than unscaled (≥ 0.02)",
                        "eval/accuracy", "scaled", Comparison.BETTER, 0.02, b="unscaled"),
            Expectation("the gap holds at the higher learning rate (≥ 0.02)",
                        "eval/accuracy", "scaled_high_lr", Comparison.BETTER, 0.02,
                        b="unscaled_high_lr"),
        ),
        probes=write_probes,
        amendments=(
            "0972c63: the train.update lines became study_schedule(), the same schedule then (6 "
            "evaluations), which later changed for every study (4ea43b5: 10 evaluations, the last"
            " on the whole eval split), so the design moved after the first results (14a4eba: "
            "both held: scaled 0.73 vs unscaled 0.42 at lr 1e-3, 0.91 vs 0.42 at 3e-3)",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )


def write_probes(root: Path) -> str:
    rows = probes.score_scale((16, 64, 256))
    d = [r[0] for r in rows]
    probes.plot_lines(root / "probe_softmax_saturation.png",
                      {"max weight, unscaled": (d, [r[3] for r in rows]),
                       "max weight, scaled": (d, [r[4] for r in rows]),
                       "entropy, unscaled": (d, [r[5] for r in rows]),
                       "entropy, scaled": (d, [r[6] for r in rows])},
                      title="softmax over 64 keys at init", xlabel="d_k", ylabel="value")
    table = probes.markdown_table(
        ["d_k", "var(q·k)", "var(q·k/√d_k)", "max weight unscaled", "max weight scaled",
         "entropy unscaled", "entropy scaled"], rows)
    return (f"Random unit-variance q, k; softmax over 64 keys (entropy normalized to [0, 1]).\n\n"
            f"{table}\n\n![saturation](probe_softmax_saturation.png)")

"""Claim: the causal mask is what makes a decoder a language model. Trained without it, each
position sees the token it must predict, and the training loss falls toward zero; evaluated with
the mask, as generation runs (no future exists there), that model predicts the next character
far worse than the masked model.

Run:  python -m transformer_jax.sweep --experiment=experiments/causal_mask.py --workdir=runs/causal_mask
(or the whole suite: scripts/run.sh --suite=mechanisms). Causal character LMs on tiny Shakespeare,
built by lm_positions.lm_base at the lm suite's size (2 layers, d_model 128, 64-character
windows, 1,200 steps; the text from $TJ_SHAKESPEARE as there), with `model.causal_mask` True or
False: the same seeds, data and everything else. Evaluation masks in both (the switch acts on the
train step only), so eval/loss is next-character loss as a generator would meet it. About 5
minutes for the study on 2 cores (two variants at once, as lm_positions' variants run).

Thresholds, written before any run of this study, from the task, not from a run of it:
- Unmasked, the target of position i is token i + 1, which it attends to: only the last position
  of each 64-character window has its target outside the window, so copying leaves at most 1/64
  of the per-window loss, under ln(65)/64 = 0.07 nats even at chance there. "Unmasked train loss
  at most 0.5 nats" allows the copy to be imperfect by a margin; "below the masked model's by
  ≥ 0.75 nats" because a 2-layer char LM trained 1.8 passes stays well above 1.25 nats: the
  lm suite sized this model to reach 2.6 bits (1.80 nats) per character on held-out text.
- Evaluated with the mask, the unmasked model has lost the attention it predicted with; what it
  can still know of the past is what it learnt before copying took over, at best a bigram model:
  2.48 nats per character on the held-out 10 % (counts over the training 90 %, computed from the
  text alone). The masked model is sized to reach below 1.80 nats, so "masked beats unmasked by
  ≥ 0.5 nats of eval loss" leaves the unmasked model room to be better than a bigram.
"""
from pathlib import Path

from transformer_jax.studies.study import Comparison, Expectation, Study, load_module

HERE = Path(__file__).resolve().parent
TRAIN_LOSS, EVAL_LOSS = "train/loss", "eval/loss"  # nats per character


def get_study(size: str) -> Study:
    lm_positions = load_module(HERE / "lm_positions.py")
    base = lm_positions.lm_base(size, **lm_positions.SIZES[size])  # the lm suite's size
    variants = {"masked": {"model.causal_mask": True}, "unmasked": {"model.causal_mask": False}}
    return Study(
        name="causal_mask",
        claim="Without the causal mask a decoder trains on the future: its training loss falls "
              "toward zero while its next-character loss with the mask, as generation runs, is "
              "far worse than the masked model's (tiny Shakespeare).",
        published=("Vaswani et al. 2017, §3.2.3: the decoder masks the future 'to prevent "
                   "leftward information flow ... to preserve the auto-regressive property'; "
                   "Radford et al. 2018 (GPT): a masked self-attention decoder trained on the "
                   "next-token objective."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(TRAIN_LOSS, EVAL_LOSS, "eval/accuracy"),
        expectations=(
            Expectation("unmasked train loss at most 0.5 nats (it copies the next token)",
                        TRAIN_LOSS, "unmasked", Comparison.AT_MOST, 0.5),
            Expectation("unmasked beats masked on train loss by ≥ 0.75 nats", TRAIN_LOSS,
                        "unmasked", Comparison.BETTER, 0.75, b="masked", higher_is_better=False),
            Expectation("masked beats unmasked on eval loss (masked, as generated) by ≥ 0.5 nats",
                        EVAL_LOSS, "masked", Comparison.BETTER, 0.5, b="unmasked",
                        higher_is_better=False),
        ),
        suite="mechanisms",
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )

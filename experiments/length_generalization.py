"""Claim (an extension of the positional one): how a model encodes position decides whether it
works on sequences longer than any it was trained on.

Run:  python -m transformer_jax.sweep --experiment=experiments/length_generalization.py \
          --workdir=runs/length
Causal decoders (2 layers, 4 heads) learn to sort sets of length ≤ N and are evaluated on
lengths N+1 … 4N only: `eval/accuracy` (what the expectations compare) pools every unseen
length; the analysis (`transformer_jax.studies.analysis.length.accuracy_by_length`) restores each run's final parameters
and scores them on each length 1 … 4N separately (accuracy_by_length.csv, curves_by_length.png).

Why `sort_distinct` (a set of distinct symbols, sorted) and not copy: the earlier version of
this study (copy with repeated symbols, train ≤ 8, test 9–16) gave margins near its 0.05
thresholds, and train accuracy itself was poor for some schemes (no positions 0.53, ALiBi 0.68),
so its ranking partly measured fitting. Sorting a set has one rule at every length — the next
output is the smallest input symbol above the previous output — which needs no position at all,
so every scheme can fit it (train accuracy ≈ 1.00 for all five at 400 steps) and whatever
breaks past N is what the positional signal does at unseen positions and distances: a learned
table's rows past 2N were never trained, sinusoidal angles past 2N never seen, rotary rotations
past distance 2N never seen, while ALiBi's penalty and no positions at all change smoothly with
length (Press et al. 2021; Kazemnejad et al. 2023 test NoPE on sorting among other tasks).
"""
from pathlib import Path

from transformer_jax.studies.analysis.length import accuracy_by_length
from transformer_jax.studies.study import (Comparison, Expectation, Kind, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
# The 0.05 thresholds were set after the first design's results (amendment 6ace3a6)
SET_AFTER = dict(kind=Kind.POST_HOC, why="the task, lengths and the 0.05 threshold were set "
                 "after the first design's results, against measured gaps of 0.17–0.36 (6ace3a6)")
SIZES = {  # n: longest training length; symbols >= 4n (no symbol twice in a sequence)
    "tiny": dict(steps=30, d_model=32, n=4, symbols=16),
    "default": dict(steps=400, d_model=64, n=8, symbols=32),
    "large": dict(steps=5000, d_model=256, n=32, symbols=128),
}
SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi")


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py",
                       "task=sort_distinct" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    n = s["n"]
    base.model.update(arch="decoder", d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"],
                      num_layers=2, max_len=8 * n)  # decoder sequences [x, SEP, y]: 2 × 4n
    base.data.update(vocab_size=s["symbols"], seq_len=n, min_len=1, eval_seq_len=4 * n,
                     eval_min_len=n + 1)
    study_schedule(base, s["steps"])
    variants = {p: {"model.position": p} for p in SCHEMES}
    unseen = f"on unseen lengths {n + 1}–{4 * n} (eval accuracy ≥ 0.05)"
    return Study(
        name="length_generalization",
        amendments=(
            "6ace3a6: the task (sort_distinct in causal decoders), the lengths (train ≤ 8, "
            "evaluate 9–32) and the 0.05 thresholds were set after the first design's marginal "
            "results (6c62dbf), against measured gaps of 0.17–0.36",
            "0972c63: the train.update lines became study_schedule(), the same schedule then (6 "
            "evaluations), which later changed for every study (4ea43b5: 10 evaluations, the last"
            " on the whole eval split), so the design moved after the first results (14a4eba: "
            "held: ALiBi 0.35, none 0.29, sinusoidal 0.29, learned 0.23, rotary 0.16 on copy, "
            "tested at 9–16)",
            "c30ab5f: configs/synthetic.py gained the lag_bits task (for heads); this file did "
            "not load with today's package then, so history cannot show whether its design moved",
            "f208c5f: the package move rewrote only its import lines; the version before it no "
            "longer loads with today's package, so history cannot show the design kept",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
            "c3185cb: kinds declared after the results (issue 63): each check and post hoc says "
            "why beside it; no threshold, variant or seed moved",
        ),
        claim="Relative or no positional information extrapolates to longer sequences; absolute "
              "(learned, sinusoidal) does not.",
        published=("Press et al. 2021 (ALiBi extrapolates far past the training length, "
                   "sinusoidal and rotary degrade soon after it) and Kazemnejad et al. 2023 (in "
                   "causal decoders no positions and relative schemes generalize to longer "
                   "inputs than absolute ones); Haviv et al. 2022 (causal decoders without "
                   "positions still infer them). Every seed and every length is reported "
                   "(summary.csv, accuracy_by_length.csv)."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=("eval/accuracy", "eval/seq_accuracy", "train/accuracy"),
        expectations=(
            Expectation(f"ALiBi beats learned positions {unseen}",
                        "eval/accuracy", "alibi", Comparison.BETTER, 0.05, b="learned",
                        **SET_AFTER),
            Expectation(f"no positions beats learned positions {unseen}",
                        "eval/accuracy", "none", Comparison.BETTER, 0.05, b="learned",
                        **SET_AFTER),
            Expectation(f"ALiBi beats sinusoidal {unseen}",
                        "eval/accuracy", "alibi", Comparison.BETTER, 0.05, b="sinusoidal",
                        **SET_AFTER),
            Expectation(f"no positions beats sinusoidal {unseen}",
                        "eval/accuracy", "none", Comparison.BETTER, 0.05, b="sinusoidal",
                        **SET_AFTER),
            Expectation(f"ALiBi beats rotary {unseen}",
                        "eval/accuracy", "alibi", Comparison.BETTER, 0.05, b="rotary",
                        **SET_AFTER),
            Expectation("every scheme fits the training lengths: learned positions, the slowest "
                        "to fit, within 5 % of no positions' train accuracy",
                        "train/accuracy", "learned", Comparison.WITHIN, 0.05, b="none",
                        kind=Kind.CHECK, why="that training worked: each scheme fits the lengths "
                        "it trained on, so the gaps above are about unseen lengths"),
        ),
        analyses=(accuracy_by_length,),
    )

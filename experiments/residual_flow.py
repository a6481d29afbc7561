"""Claim: residual connections give gradients a highway through deep stacks, judged on the
gradients themselves and on a task whose answer is not the input.

Run:  python -m transformer_jax.sweep --experiment=experiments/residual_flow.py --workdir=runs/residual_flow --jobs=2
(or the mechanisms suite: scripts/run.sh --suite=mechanisms)

The `residuals` study trains on `copy`, where the skip path *is* the answer, and judges only
accuracy. Here the task is `reverse` (token i answers with token n−1−i: only attention can move
it there), and the mechanism is judged directly: `layers/grad_norm_ratio`, the first layer's
gradient norm over the last layer's, logged by the trainer at every logged step. With a residual
stream the gradient reaches the first layer undiminished, so the ratio stays near 1 at every
depth (Pre-LN's gradient norms are depth-independent at initialization, Xiong et al. 2020); without
it, the gradient passes through every layer's Jacobian and fades toward the input. "At the start"
is the first logged step (step 6 of 300 at the default size, inside the 30-step warm-up, so the
weights are still close to their initialization).

Pre-LN at 6 and 24 layers, with and without residuals, 3 seeds. The step-0 probe shows token
similarity after each layer at initialization (rank collapse without skips, Dong et al. 2021).
Expectations and thresholds written before the first run.
"""
import functools
from pathlib import Path

from transformer_jax.studies.analysis import depth as depth_eval
from transformer_jax.studies.study import (FLAT_ACCURACY, FLATTENED_ADDED, Comparison,
                                           Expectation, Kind, Study, flattened, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {
    "tiny": dict(steps=20, d_model=16, depths=(2, 3)),
    "default": dict(steps=300, d_model=64, depths=(6, 24)),
    "large": dict(steps=3000, d_model=128, depths=(6, 48)),
}
RATIO = "layers/grad_norm_ratio"
START = 1  # at_step: the first logged step
# with residuals, the first layer's gradient is at least half the last's at the start, and a
# fifth after training; without them, under a tenth at the deepest depth, start and end
HIGHWAY_AT_START, HIGHWAY_AT_END, FADED = 0.5, 0.2, 0.1


def name(residual: bool, depth: int) -> str:
    return f"{'residual' if residual else 'no_residual'}_L{depth}"


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=reverse" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"], norm="pre")
    study_schedule(base, s["steps"])
    shallow, deep = s["depths"]
    variants = {name(r, d): {"model.num_layers": d, "model.residual": r}
                for d in (shallow, deep) for r in (True, False)}
    acc = "eval/accuracy"
    return Study(
        name="residual_flow",
        claim="Residual connections give gradients a highway through deep stacks: with them the "
              "first layer gets as much gradient as the last at any depth; without them it fades "
              "with depth, and the deep stack does not learn a task whose answer is not its input.",
        published=("Xiong et al. 2020: Pre-LN's gradient norms are about the same in every layer "
                   "at initialization. Dong et al. 2021: without skips, token representations "
                   "collapse toward rank 1 doubly exponentially in depth."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(acc, "eval/loss", RATIO, "train/grad_norm"),
        expectations=(
            Expectation(f"{shallow} layers with residuals beat {shallow} without on reverse "
                        "(accuracy ≥ 0.2)", acc, name(True, shallow), Comparison.BETTER, 0.2,
                        b=name(False, shallow)),
            Expectation(f"{deep} layers with residuals beat {deep} without on reverse "
                        "(accuracy ≥ 0.2)", acc, name(True, deep), Comparison.BETTER, 0.2,
                        b=name(False, deep)),
            # The two "no run's first layer gets less than ..." rates (at most 0 % of runs)
            # became means (≥ the same bound): a rate of 0 cannot be shown at any seed count
            # (the amendment below).
            Expectation(f"at the start, with residuals at {deep} layers, the first layer gets at "
                        f"least {HIGHWAY_AT_START} of the last layer's gradient norm (mean ratio "
                        f"≥ {HIGHWAY_AT_START})", RATIO, name(True, deep), Comparison.AT_LEAST,
                        HIGHWAY_AT_START, at_step=START, kind=Kind.POST_HOC,
                        why=f"its {HIGHWAY_AT_START} was set after ratios of about 3 had been "
                            "seen (06bcce4)"),
            Expectation(f"at the start, without residuals at {deep} layers, the first layer's "
                        f"gradient norm is under {FADED} of the last's (mean ratio ≤ {FADED})",
                        RATIO, name(False, deep), Comparison.AT_MOST, FADED, at_step=START),
            Expectation(f"after training, with residuals at {deep} layers, the first layer gets "
                        f"at least {HIGHWAY_AT_END} of the last layer's gradient norm (mean ratio "
                        f"≥ {HIGHWAY_AT_END})", RATIO, name(True, deep), Comparison.AT_LEAST,
                        HIGHWAY_AT_END, kind=Kind.POST_HOC,
                        why=f"its {HIGHWAY_AT_END} was set after ratios of about 6.5 had been "
                            "seen (06bcce4)"),
            Expectation(f"after training, without residuals at {deep} layers, the ratio stays "
                        f"under {FADED} (mean ≤ {FADED})", RATIO, name(False, deep),
                        Comparison.AT_MOST, FADED, kind=Kind.CHECK,
                        why="the 24-layer stack without residuals stays at chance: a network "
                            "that learns nothing has a first-layer gradient of exactly 0"),
            flattened(name(True, shallow), acc, FLAT_ACCURACY),
            flattened(name(True, deep), acc, FLAT_ACCURACY),
        ),
        amendments=("e23a1b8: " + FLATTENED_ADDED + "; this page already showed both "
                    "residual arms' late change under 0.01 when the amount was fixed (by "
                    "FLAT_ACCURACY's rule, not by that)",
                    "06bcce4 (issue 49): the two 'no run's first layer gets less than 0.5 (at the "
                    "start) / 0.2 (after training) of the last layer's gradient norm' "
                    "expectations, failure rates of at most 0 %, which no seed count can show, "
                    "became 'mean ratio at least 0.5 / 0.2' (the same bounds). Before, both were "
                    "inconclusive with 0 of 3 runs failing; the ratios seen were 2.86, 3.25, 2.79 "
                    "at the start and 6.47, 6.84, 6.09 after training",
                    "ebb101f: the fingerprint holds the code that computes the judged values from "
                    "this commit on (studies/measured_code.py, issue 63): it moved once for every "
                    "study; no design of this study changed",
                    "c3185cb: kinds declared after the results (issue 63): each check and post hoc"
                    " says why beside it; no threshold, variant or seed moved"),
        probes=functools.partial(depth_eval.write_probes, depth=deep),
        suite="mechanisms",
    )

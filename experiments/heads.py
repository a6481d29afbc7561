"""Claim: one attention operation is a bottleneck — it learns one notion of relevance at a time —
and more heads, at the same width, cost about nothing.

Run:  python -m transformer_jax.sweep --experiment=experiments/heads.py --workdir=runs/heads
One-layer encoders (learned positions, d_model fixed) learn `lag_bits`: every position must
report the bits at lags 1, 2, 3 and 4 behind it as one of 16 symbols. The heads vary over
1, 2, 4, 8 (d_k = d_model / h); W_q, W_k, W_v, W_o are d_model × d_model whatever h, so every
variant has exactly the same parameters (asserted by the analysis and by tests/test_heads.py).

Why this task: one softmax gives position i a convex mix of the four tokens' values,
Σ_m α_m·W_v x_{i-m}; with two symbols the values lie on a line, so the mix is one number
Σ_m α_m b_m, from which four bits must be decoded nonlinearly. h ≥ 4 heads can each fetch one
bit through its own W_v into its own directions, where a linear readout suffices. (A first
version asked for the pair (x_{i-1}, x_{i-3}) of 4 symbols: one head solved it best, 0.99 vs
0.87 for two heads at 200 steps: with generic values a two-token mix still names the pair.)

Anchor: Vaswani et al. 2017, Table 3 (A), at the same compute: h=1 (d_k=512) 24.9 BLEU against
25.8 for h=8, and h=32 (d_k=16) 25.4 — too many heads hurt again.

Thresholds, written before the first default-size run and kept (calibration at 1 layer, d_model
64, 2 seeds, on a loaded 2-core machine: at 200 steps h=1 0.25 vs h≥2 0.40-0.42 accuracy; at
400 steps h=1 0.83 vs h=4 1.00): h=4 and h=8 beat h=1 by ≥ 0.1 eval accuracy, h=2 beats h=1 by
≥ 0.05. Cost: the forward pass's FLOPs (XLA's cost analysis) at h=8 within 10 % of h=1; the
measured train-step time at h=8 within a factor of 2 of h=1 (the ratio of final
train/steps_per_sec; judged only if that and the ratio of the runs' wall seconds agree within
30 %, else reported as unstable). The head-roles analysis (transformer_jax/studies/analysis/head_roles.py) checks
the mechanism: with h ≥ 4 some head puts ≥ 0.5 of its weight on the previous token, and the
heads' mean offsets spread more than at initialization.
By cause (head_importance: each head alone knocked out before W_o, eval accuracy; added after
the committed results above, before the run that judges it): if four heads each deliver one of
the four bits, knocking out any one of h=4's heads costs ≥ 0.05 accuracy, and the most important
of h=8's heads costs ≥ 0.05 too.
What heads cost, counted and explained (issue 51; added after the results above, before the run
that judges it): XLA's FLOPs of one replica's train step (train/flops_per_step, logged by every
run) at h=8 within 1 % of h=1's. Counted before this run (one lowering of each variant's step,
no training): 1.0048. The step time is reported beside it, not judged by it, with the reason
from a profile (studies/analysis/step_profile.py: kernels per step and time per kernel of each
variant's compiled step, on the machine that ran it).
"""
import json
import math
from pathlib import Path

import jax
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax.studies.analysis import head_importance, head_roles
from transformer_jax.studies.analysis import probes, step_profile
from transformer_jax.studies import report
from transformer_jax.train import loop as train
from transformer_jax.model.transformer import Transformer, count_params
from transformer_jax.studies.study import (Comparison, Expectation, Kind, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
ACC = "eval/accuracy"
SIZES = {  # steps, d_model (fixed across variants), sequence length
    "tiny": dict(steps=20, d_model=32, n=8),
    "default": dict(steps=300, d_model=64, n=16),
    "large": dict(steps=3000, d_model=256, n=32),
}
HEADS = (1, 2, 4, 8)
FLOPS_WITHIN, TIME_FACTOR, STABLE_WITHIN = 0.10, 2.0, 0.30
FLOPS = "train/flops_per_step"  # XLA's count of one replica's train step
STEP_FLOPS_WITHIN = 0.01  # the relative gap of train-step FLOPs, h=8 against h=1
PREVIOUS_TOKEN_MIN = 0.5
KNOCKOUT_COST_MIN = 0.05  # accuracy a head's knock-out costs when it carries a bit


def name(h: int) -> str:
    return f"h{h}"


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=lag_bits" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(arch="encoder", d_model=s["d_model"], num_heads=1, d_ff=4 * s["d_model"],
                      num_layers=1, position="learned", max_len=s["n"])
    base.data.update(vocab_size=16, seq_len=s["n"], min_len=s["n"])
    study_schedule(base, s["steps"])
    variants = {name(h): {"model.num_heads": h} for h in HEADS}
    checks = tuple(head_roles.Check(
        f"{name(h)}: some head's previous-token score ≥ {PREVIOUS_TOKEN_MIN}", name(h),
        lambda t, i: t.previous.max() >= PREVIOUS_TOKEN_MIN) for h in HEADS if h >= 4) + (
        head_roles.Check("h8: the heads' mean offsets spread more than at initialization",
                         name(8), lambda t, i: np.std(t.offset) > np.std(i.offset)),)
    knockouts = (
        head_importance.Check(f"h4: knocking out any one head costs ≥ {KNOCKOUT_COST_MIN} accuracy",
                              name(4), lambda imp, sc: imp.min() >= KNOCKOUT_COST_MIN),
        head_importance.Check(f"h8: the most important head costs ≥ {KNOCKOUT_COST_MIN} accuracy",
                              name(8), lambda imp, sc: imp.max() >= KNOCKOUT_COST_MIN),
    )
    return Study(
        name="heads",
        amendments=(
            "c30ab5f: the thresholds were set from calibration runs (200 and 400 steps, 2 seeds) "
            "before the first default-size run, and the task (lag_bits) after a first one, the "
            "pair (x_{i-1}, x_{i-3}), favoured one head",
            "c7bde60: the parameter count through abstract_model() (same numbers); 09a39da: the "
            "study joined the depth suite; neither version loads with today's package",
            "f208c5f: the package move rewrote only its import lines; the version before it no "
            "longer loads with today's package, so history cannot show the design kept",
            "5690061: head importance by knock-out and its checks (h4: every head costs ≥ 0.05 "
            "accuracy) added after the first results (ba0f9f8: h1 0.616, h2 0.944, h4 0.921, h8 "
            "0.968; all three expectations held), before the run that judged them",
            "2f67c5c: issue 51 item 4, h8's train-step FLOPs within 1 % of h1's (a new "
            "expectation; counted before the run, 1.0048) and the step profile, added after the "
            "results above (forward FLOPs h8/h1 1.005, step time h4/h1 2.28 had been seen), "
            "before the run that judged them",
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
            "c3185cb: kinds declared after the results (issue 63): each check and post hoc says "
            "why beside it; no threshold, variant or seed moved",
            "3f52521 (issue 67, item 6): the step profile reads the CPU's name from "
            "runtime/machine.py, not provenance: the same values, but the line that reads them "
            "is measured code, so the fingerprint moved; re-run from the code beside it",
        ),
        claim="One attention head is a bottleneck (one notion of relevance at a time); more "
              "heads at the same d_model learn several relations at once at the same cost.",
        published=("Vaswani et al. 2017, Table 3 (A), same compute: h=1 (d_k 512) 24.9 BLEU vs "
                   "25.8 for h=8; h=32 (d_k 16) 25.4. Michel et al. 2019, Voita et al. 2019: "
                   "trained heads take recognisable roles (positional, previous-token, ...)."),
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(ACC, "eval/loss", "train/steps_per_sec", FLOPS),
        expectations=(
            *(Expectation(f"{name(h)} beats one head by ≥ 0.1 accuracy", ACC, name(h),
                          Comparison.BETTER, 0.1, b=name(1)) for h in (4, 8)),
            Expectation("h2 beats one head by ≥ 0.05 accuracy", ACC, name(2), Comparison.BETTER,
                        0.05, b=name(1)),
            Expectation(f"h8's train step costs the FLOPs of one head's, within "
                        f"{STEP_FLOPS_WITHIN:.0%}", FLOPS, name(8), Comparison.WITHIN,
                        STEP_FLOPS_WITHIN, b=name(1), higher_is_better=False, kind=Kind.CHECK,
                        why="arithmetic: h heads of width d/h do the products of one head of "
                            "width d; XLA's count of the compiled step, the same in every seed"),
        ),
        analyses=(cost_by_heads, head_roles.make_analysis(checks),
                  head_importance.make_analysis("accuracy", knockouts),
                  step_profile.make_analysis([name(h) for h in HEADS])),
        suite="components",  # with batchnorm and induction: depth.py fills its own suite
    )


def with_heads(config: ml_collections.ConfigDict, heads: int) -> ml_collections.ConfigDict:
    config = config.copy_and_resolve_references()
    config.model.num_heads = heads
    return config


def abstract_model(config) -> Transformer:
    """The config's model as shapes only (nothing allocated, nothing compiled)."""
    cfg = train.check_config(config)[1]
    return nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(params=0)))


def model_cost(config) -> tuple[int, float]:
    """(parameters, forward FLOPs of one train batch by XLA's cost analysis) of a config."""
    model = abstract_model(config)
    graphdef, params = nnx.split(model)
    tokens = jax.ShapeDtypeStruct((config.train.batch_size, config.data.seq_len), np.int32)
    forward = jax.jit(lambda p, x: nnx.merge(graphdef, p)(x)[0])
    cost = forward.lower(params, tokens).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return count_params(model), float(cost.get("flops", math.nan))


def cost_by_heads(root: Path, runs: dict) -> str:
    """Parameters (asserted equal), FLOPs and measured step time against h."""
    seeds = sorted({seed for _, seed in runs})
    config = ml_collections.ConfigDict(json.loads(
        (Path(root) / name(1) / f"seed_{seeds[0]}" / "config.json").read_text()))
    costs = {h: model_cost(with_heads(config, h)) for h in HEADS}
    params = {p for p, _ in costs.values()}
    assert len(params) == 1, f"parameter counts differ across heads: {costs}"
    rate = lambda h: np.nanmean([report.final_value(runs[(name(h), s)], "train/steps_per_sec")
                                 for s in seeds])  # noqa: E731
    wall = lambda h: np.nanmean([runs[(name(h), s)]["status"].get("seconds", math.nan)
                                 for s in seeds])  # noqa: E731
    rows = [(h, config.model.d_model // h, costs[h][0], f"{costs[h][1]:.3g}",
             f"{costs[h][1] / costs[1][1]:.3f}", f"{rate(1) / rate(h):.2f}",
             f"{wall(h) / wall(1):.2f}") for h in HEADS]
    table = probes.markdown_table(["heads", "d_k", "parameters", "forward FLOPs", "FLOPs / h=1",
                                   "step time / h=1 (steps/s)", "wall time / h=1"], rows)
    flops_ratio = costs[8][1] / costs[1][1]
    step_ratio, wall_ratio = rate(1) / rate(8), wall(8) / wall(1)
    stable = abs(step_ratio / wall_ratio - 1) <= STABLE_WITHIN
    time_verdict = (("PASS" if step_ratio <= TIME_FACTOR else "FAIL") if stable else
                    f"not judged: unstable (step-time ratio {step_ratio:.2f} and wall ratio "
                    f"{wall_ratio:.2f} differ by more than {STABLE_WITHIN:.0%})")
    return (f"### Cost against heads\n\nParameters are identical for every h ({params.pop()}: "
            f"asserted). Forward FLOPs of one train batch from XLA's cost analysis; measured "
            f"time from each run's final train/steps_per_sec and total wall seconds (mean over "
            f"seeds; the seeds of a variant train in one program).\n\n{table}\n\n"
            f"| check | value | verdict |\n|---|---|---|\n"
            f"| FLOPs at h=8 within {FLOPS_WITHIN:.0%} of h=1 | {flops_ratio:.3f} | "
            f"{'PASS' if abs(flops_ratio - 1) <= FLOPS_WITHIN else 'FAIL'} |\n"
            f"| train-step time at h=8 ≤ {TIME_FACTOR}× h=1 | {step_ratio:.2f} | {time_verdict} |\n")

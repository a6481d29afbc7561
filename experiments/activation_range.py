r"""Claim: Add & Norm keeps activations in range: Post-LN's residual stream stays at unit scale at
any depth, Pre-LN's grows with depth, and a stack with residuals but no norm grows fastest.

Run:  python -m transformer_jax.sweep --experiment=experiments/activation_range.py \
          --workdir=runs/activation_range --jobs=2
(or the components suite: scripts/run.sh --suite=components; the mechanisms suite has no room for it
within 30 minutes)

Issue 51, item 2: "keeps activations in range" was never measured. Measured here:
`layers/residual_rms_last_layer`, the root mean square of the residual stream after the last
block (its output, before Pre-LN's final norm) over the real tokens of the step's train batch,
logged by the trainer beside `layers/residual_rms/layer_NN` for every layer. Logged at every
step (log_every=1), so `at_step=1` is step 1 itself, whose forward pass reads the initial
parameters: the stream at initialization, where the arithmetic below holds. The same
expectations are judged again after training, with the same thresholds: whether training keeps
what initialization sets (the arithmetic says nothing about the trained weights).

Post-LN, Pre-LN and no norm (all with residuals) at 2, 6 and 12 layers on `sort` (an encoder,
lengths 4–16, which 2 layers learn), d_model 64, 4 heads, 3 seeds; the trainer's defaults
otherwise (lr 1e-3, 10 % warm-up, gradients clipped to norm 1), so that the deep stacks without
a norm or with Post-LN train rather than diverge (a diverged run has no value).

The thresholds come from the arithmetic of initialization (Xiong et al. 2020), written before
any run:
- The stream entering layer 0: token embeddings of unit variance per entry plus sinusoids of
  mean square 1/2, so v₀ ≈ 1.5 (RMS ≈ 1.22). Each FFN, relu(x·W₁)·W₂ with LeCun-normal kernels
  and zero biases, returns variance ½·var(x) (relu keeps half of a unit-variance input's mean
  square), uncorrelated with x; attention returns a weighted mean of values, variance a·var(x)
  with 0 ≤ a ≤ 1 (Σ_j w_j², larger as the softmax sharpens).
- Post-LN: the last block ends in a LayerNorm of unit gain and zero bias, whose output has RMS
  √(var/(var + ε)) ≈ 1 for every token. "Within a constant of 1": between 1/2 and 2 at the
  deepest depth (AT_LEAST 0.5 and AT_MOST 2). At initialization this holds by construction:
  the check that the measurement reads the stream where the norm leaves it. After training it
  rests on the learned gain and bias.
- Pre-LN: each block adds updates computed from normalized inputs, variance c = ½ (FFN) + a
  per layer, a ≈ e/n for unit-variance logits over n ≈ 4–16 keys: c between 0.5 and about 1.
  The stream's variance is v₀ + c·L, so the RMS ratio of 12 layers over 2 is
  √((1.5 + 12c)/(1.5 + 2c)): 1.73 at c = 0.5, 1.86 at c = 1 (it lies between 1, embedding
  dominant, and √6 = 2.45, updates dominant). Threshold: RATIO ≥ 1.5, what c = 0.3 would give;
  the FFN alone adds 0.5.
- No norm: each block multiplies the stream's variance by (1 + a)·(1 + ½) ≥ 1.5 (the updates
  scale with the unnormalized stream), so its RMS grows at least as 1.5^(L/2): after 12 layers
  ≥ 1.22·1.5⁶ ≈ 13.9, against Pre-LN's √(1.5 + 12c) ≤ 4.4 even at c = 1.5. Threshold: RATIO
  no-norm over Pre-LN at 12 layers ≥ 3, under that worst case (3.2); the central estimate is
  5 or more. Compounding against adding up: "grows fastest".
"""
from pathlib import Path

from transformer_jax.studies.study import (Comparison, Expectation, Kind, Study, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # steps, width, depths (the first and last are judged), seeds
    "tiny": dict(steps=20, d_model=16, depths=(1, 3), seeds=(0, 1, 2)),
    "default": dict(steps=300, d_model=64, depths=(2, 6, 12), seeds=(0, 1, 2)),
    "large": dict(steps=3000, d_model=128, depths=(2, 12, 24), seeds=(0, 1, 2)),
}
NORMS = {"post": "post", "pre": "pre", "no_norm": "none"}  # variant prefix -> model.norm
RMS = "layers/residual_rms_last_layer"
START = 1  # at_step: step 1 is logged (log_every=1); its forward pass reads the initial weights
UNIT_LOW, UNIT_HIGH = 0.5, 2.0  # Post-LN's last-layer RMS "within a constant of 1"
PRE_GROWS = 1.5  # Pre-LN's RMS, deepest over shallowest, at least this factor
NO_NORM_FASTER = 3.0  # no norm's RMS over Pre-LN's at the deepest depth, at least this factor


def name(norm: str, depth: int) -> str:
    return f"{norm}_L{depth}"


def expectations(shallow: int, deep: int, at_step) -> tuple[Expectation, ...]:
    when = "at initialization (step 1)" if at_step else "after training"
    post, pre, free = name("post", deep), name("pre", deep), name("no_norm", deep)
    # Post-LN normalizes the stream after every addition: its RMS is its LayerNorm's gain, 1 at
    # initialization; at the start, how sums of random branches grow is arithmetic
    unit = dict(kind=Kind.CHECK, why="Post-LN's stream is a LayerNorm's output: its RMS is the "
                "norm's gain, 1 at initialization (1.000 in every seed) and ≈ 1 after it")
    start = dict(kind=Kind.CHECK, why="at initialization the stream's growth is the arithmetic "
                 "of summed random branches, known before the run") if at_step else {}
    return (
        Expectation(f"{when}, Post-LN's last-layer residual RMS at {deep} layers is at most "
                    f"{UNIT_HIGH:g}", RMS, post, Comparison.AT_MOST, UNIT_HIGH, at_step=at_step,
                    **unit),
        Expectation(f"{when}, Post-LN's last-layer residual RMS at {deep} layers is at least "
                    f"{UNIT_LOW:g}", RMS, post, Comparison.AT_LEAST, UNIT_LOW, at_step=at_step,
                    **unit),
        Expectation(f"{when}, Pre-LN's last-layer residual RMS grows with depth: {deep} layers "
                    f"over {shallow} at least ×{PRE_GROWS:g}", RMS, pre, Comparison.RATIO,
                    PRE_GROWS, b=name("pre", shallow), at_step=at_step, **start),
        Expectation(f"{when}, no norm grows fastest: its last-layer residual RMS at {deep} "
                    f"layers at least ×{NO_NORM_FASTER:g} Pre-LN's", RMS, free, Comparison.RATIO,
                    NO_NORM_FASTER, b=pre, at_step=at_step, **start),
    )


def get_study(size: str) -> Study:
    s = SIZES[size]
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(d_model=s["d_model"], num_heads=4, d_ff=4 * s["d_model"], residual=True)
    study_schedule(base, s["steps"], log_every=1)
    depths = s["depths"]
    variants = {name(n, d): {"model.norm": norm, "model.num_layers": d}
                for n, norm in NORMS.items() for d in depths}
    shallow, deep = depths[0], depths[-1]
    return Study(
        name="activation_range",
        claim="Add & Norm keeps activations in range: Post-LN's residual stream stays within a "
              "constant of 1 at any depth, Pre-LN's grows with depth, and without a norm it "
              "grows fastest.",
        published=("Xiong et al. 2020: Post-LN's layer outputs are normalized (unit scale); "
                   "Pre-LN's residual stream adds every layer's update, so its scale grows with "
                   "depth (as √L at initialization); Vaswani et al. 2017: LayerNorm(x + "
                   "Sublayer(x))."),
        base=base, variants=variants, seeds=s["seeds"],
        metrics=(RMS, "eval/accuracy", "eval/loss"),
        expectations=(*expectations(shallow, deep, START), *expectations(shallow, deep, None)),
        suite="components",  # for time: mechanisms is at 26 of its 30 minutes
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
            "c3185cb: kinds declared after the results (issue 63): each check and post hoc says "
            "why beside it; no threshold, variant or seed moved",
        ),
    )

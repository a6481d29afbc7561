r"""What the two parts of softmax_plateau share: the registration, the task, the grid, the budget
and the thresholds (not a study: a file whose name starts with _ is none; studies/catalog.py).

experiments/softmax_plateau.py was registered at ede4c31, before any run, as a suite of its own.
Its suite took 23 min 58 s from a fresh clone on the AVX-512 EPYC, inside its 30 minutes; on the
slower CPU these machines have had (the AVX2 EPYC, on which issue 69 sets the limits), the suites
measured on both took 1.3-1.6 times as long (main 9:44 -> 12:29, mechanisms 14:33 -> 23:32), so
about 31-38 minutes. So it is split by d_k into two suites: softmax_plateau_narrow (d_k 64 at the
default size) and softmax_plateau_wide (d_k 256), each with its three arms. Nothing of the design
moved: the task, width, grid, plateau budget, seeds, thresholds, expectations and their kinds are
ede4c31's, below. What changes with the split: each part decides its plateau alone (its budget
grows until every arm of the part has flattened, or the cap), and Holm's family is the part's.
softmax_plateau's results had been seen when the split was written; nothing here was chosen from
them. They stay in git: first committed at 1c55a66, last held at c7259c1 (softmax_plateau.py and
its results were retired with its parts' first results).

What follows is softmax_plateau's registration as the file held it at the split ("this study" is
softmax_plateau), but for the sizing at the end, which says where each arm went.

Claim: ÷√d_k matters where training has stopped, not only for how fast a short run learns:
each arm at its own best learning rate and trained until it stops learning, the model without
÷√d_k ends below the scaled one at d_k = 64 and 256, its attention still saturated and its
gradient to W_q and W_k smaller than the scaled model's through training.

Run:  python -m transformer_jax.sweep --experiment=experiments/softmax_plateau.py --workdir=runs/softmax_plateau --jobs=2
(or its suite: scripts/run.sh --suite=softmax_plateau)

Issue 64, item 5 (written before the run). softmax_gradient (experiments/softmax_gradient.py)
found the unscaled model's Q/K gradient *larger* at initialization (4.3× at d_k 64, 5.6× at 256),
yet the unscaled model ended far worse after 300 steps at one rate tuned for the scaled arm.
Whether that is harm done in training, or only slower training at someone else's rate, is what
this study asks. It takes out what confounded that answer:
  - Learning rate. Every arm is tuned over LEARNING_RATES, each seed choosing by its training
    loss (studies/tuning.py), the grid grown by ×3 or ÷3 while a seed's choice sits at an edge,
    up to GRID_CAP points beyond each end (studies/grid.py).
  - Budget. Every run trains PLATEAU["first"] steps at a constant rate, then PLATEAU["step"]
    more until every arm has flattened (gains at most FLAT_ACCURACY over its last 20 %), or
    PLATEAU["cap"] steps (studies/plateau.py); the page says which arm the cap stopped.
  - Width. d_k moves alone: d_model is 64 in every arm and the one head's d_k is set by
    `model.head_dim` (64 or 256), so W_q, W_k, W_v are 64 × d_k and the rest of the model is the
    same at both d_k (softmax_gradient and lm_scaling moved d_model or the head count with it).

Arms, at each d_k (sort, a 2-layer Post-LN encoder, one head, no warm-up and no clipping, so
that the arms differ in the scale alone):
  scaled               ÷√d_k (the paper)
  unscaled             no ÷√d_k
  unscaled_small_init  no ÷√d_k, W_q and W_k initialized d_k^(-1/4) smaller
                       (`model.qk_init_scale`): its logits at initialization are the scaled
                       arm's, the remedy of the initialization alone. softmax_gradient saw it
                       recover the scaled accuracy at d_k 64 (−2.3 %) and not at 256 (−57 %) at
                       300 steps; whether 256's gap is slowness is a question of its own here.

Expectations, at each d_k, with the thresholds of softmax_gradient (written there before its
run, from the arithmetic of the mechanism; none is set from what the pilot below saw):
  - the harm is there at the plateau: scaled beats unscaled by at least HARM accuracy (the rival,
    "only slower", predicts the unscaled arm ends within HARM of the scaled one);
  - the small initialization does not remove it at the plateau: within RECOVERS (5 %, relative)
    of the scaled arm's accuracy means it does (either outcome is a finding);
  - the softmax stays saturated: at the end, layer 0's attention entropy (normalized to [0, 1],
    measured at every evaluation) is lower unscaled by at least LOWER_ENTROPY;
  - the gradient through it is smaller: layer 0's Q/K gradient norm (logged every LOG_EVERY
    steps over the whole run) unscaled at most 1/WELL_BELOW of scaled's at MID_STEP, in the
    first stage, where every arm is still training, and at the end. At the end the scaled arm has
    flattened at a lower loss, and a lower loss makes gradients smaller: that works against this
    expectation, so a hold is not made by it.
Checks (docs/verdicts.md): each scaled arm learns the task (accuracy at least LEARNS; the pilot
saw it), and each arm has flattened.

The pilot (measured first, not a result, nothing of it committed; a 2-core AMD EPYC with
AVX-512, under other load), seed 0 alone, 2,000 steps at a constant rate:
  - d_k = 64 (this design's arm) at 3e-3: scaled reached 0.98 by step 1,100 and 0.999 at 2,000;
    unscaled sat at 0.37–0.42 from step 300 on; layer 0's entropy ended 0.997 scaled, 0.03
    unscaled; the Q/K gradient ran 0.3–1.2 scaled, 0.05–0.18 unscaled after step 250.
    So at d_k 64 the pilot saw the expectations' outcomes at one rate of the grid and one seed:
    they are registered as findings all the same (at their own best rates over a grid grown at
    its edges, three seeds, the outcomes can differ), and a referee should weigh them knowing
    this; d_k = 256's unscaled arms and every small-init arm were not run before this design.
  - d_k = 256 (this design's arm, scaled only, its accuracy and speed read, nothing else) at
    3e-3 and 1e-3: training accuracy 0.97 by step 1,000 at 1e-3 and 0.93 at 1,230 at 3e-3
    (still noisy); about 20 steps a second with four processes on the two cores.
  - d_model = 256 (not this design: one head of 256 at width 256): about 5 steps a second under
    load, too slow for a suite, hence `model.head_dim`.

Sized (default): 6 tuned arms, 18 candidates, 54 runs of 1,200 steps, more for each grid
extension and plateau stage; in a suite of its own. (Added at the split: the three arms at
d_k 64 went to softmax_plateau_narrow, the three at 256 to softmax_plateau_wide, each part
9 candidates and 27 runs before its grids grow; the d_k 256 arms cost more a step.)
"""
from pathlib import Path

from transformer_jax.studies import tuning
from transformer_jax.studies.grid import GridExtension
from transformer_jax.studies.study import (FLAT_ACCURACY, Comparison, Expectation, Kind, Plateau,
                                           Study, chance_accuracy, flattened, load_config,
                                           study_schedule)

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # the plateau budget's stages, the two d_k (d_model fixed), where the gradient is read
    "tiny": dict(first=20, step=10, cap=30, d_model=16, d_ks=(16, 32), mid=10, log_every=2),
    "default": dict(first=1200, step=400, cap=2400, d_model=64, d_ks=(64, 256), mid=400,
                    log_every=10),
    "large": dict(first=6000, step=2000, cap=12000, d_model=128, d_ks=(128, 512), mid=2000,
                  log_every=20),
}
LEARNING_RATES = (1e-3, 3e-3, 1e-2)  # the declared grid; grown by GRID_FACTOR at a chosen edge
GRID_FACTOR, GRID_CAP = 3.0, 1
ACCURACY = "eval/accuracy"
QK_GRAD = "layers/qk_grad_norm/layer_00"
ENTROPY = "attention/entropy/layer_00"
HARM = 0.05  # softmax_gradient's: scaled beats unscaled in accuracy by at least this
RECOVERS = 0.05  # softmax_gradient's: within 5 % (relative) of the scaled arm's accuracy
LOWER_ENTROPY = 0.3  # softmax_gradient's: scaled's entropy above unscaled's by at least this
WELL_BELOW = 2.0  # softmax_gradient's: unscaled's Q/K gradient at most 1/2 of scaled's
LEARNS = 0.25  # 4 × chance (1/16): the scaled arm learns the task
PILOT_SAW = "the pilot saw the scaled arm at d_k 64 reach 0.999 and at 256 learn the task"


def name(arm: str, d_k: int) -> str:
    return f"{arm}_d{d_k}"


def arms(d_k: int) -> dict[str, dict]:
    """The three arms at one d_k: one head of d_k (model.head_dim), d_model the same for all."""
    return {name("scaled", d_k): {"model.head_dim": d_k, "model.attn_scale": True},
            name("unscaled", d_k): {"model.head_dim": d_k, "model.attn_scale": False},
            name("unscaled_small_init", d_k): {"model.head_dim": d_k, "model.attn_scale": False,
                                               "model.qk_init_scale": d_k ** -0.25}}


def expectations(d_k: int, mid: int, chance: float) -> list[Expectation]:
    scaled, unscaled = name("scaled", d_k), name("unscaled", d_k)
    small = name("unscaled_small_init", d_k)
    at = f"d_k = {d_k}, each arm at its best learning rate, at the plateau"
    return [
        Expectation(f"{at}: scaled beats unscaled in accuracy by at least {HARM}", ACCURACY,
                    scaled, Comparison.BETTER, HARM, b=unscaled, worst=chance),
        Expectation(f"{at}: unscaled with W_q, W_k initialized d_k^(-1/4) smaller recovers the "
                    f"scaled accuracy (within {RECOVERS:.0%})", ACCURACY, small,
                    Comparison.WITHIN, RECOVERS, b=scaled, worst=chance),
        Expectation(f"{at}: layer 0's attention entropy at the end is lower unscaled (scaled − "
                    f"unscaled ≥ {LOWER_ENTROPY})", ENTROPY, scaled, Comparison.BETTER,
                    LOWER_ENTROPY, b=unscaled),
        Expectation(f"d_k = {d_k}, at step {mid} (every arm still training): layer 0's Q/K "
                    f"gradient unscaled is at most 1/{WELL_BELOW:g} of scaled's", QK_GRAD,
                    unscaled, Comparison.RATIO, WELL_BELOW, b=scaled, higher_is_better=False,
                    at_step=mid),
        Expectation(f"{at}: layer 0's Q/K gradient at the end unscaled is at most "
                    f"1/{WELL_BELOW:g} of scaled's", QK_GRAD, unscaled, Comparison.RATIO,
                    WELL_BELOW, b=scaled, higher_is_better=False),
        Expectation(f"{at}: scaled learns the task (accuracy at least {LEARNS})", ACCURACY,
                    scaled, Comparison.AT_LEAST, LEARNS, worst=chance, kind=Kind.CHECK,
                    why=PILOT_SAW),
    ]


PARTS = ("narrow", "wide")  # a part holds the arms at SIZES[size]["d_ks"][PARTS.index(part)]
PUBLISHED = ("Vaswani et al. 2017, footnote 4 and §3.2.1: q·k has variance d_k, pushing the "
             "softmax into regions with extremely small gradients; ÷√d_k counteracts it.")


def part_d_k(part: str, size: str) -> int:
    """The d_k of `part` (narrow or wide) at `size`."""
    return SIZES[size]["d_ks"][PARTS.index(part)]


def build_part(study_name: str, claim: str, size: str, part: str) -> Study:
    """One part of softmax_plateau: the three arms at `part`'s d_k, with ede4c31's task, grid,
    budget and thresholds; its suite is `study_name`."""
    s = SIZES[size]
    d_k = part_d_k(part, size)
    base = load_config(REPO / "configs/synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.model.update(num_heads=1, norm="post", num_layers=2, d_model=s["d_model"],
                      d_ff=4 * s["d_model"])
    # A constant rate from the first step (an extended run must be the run trained straight:
    # studies/plateau.py), no warm-up and no clipping: the arms differ in the scale alone.
    study_schedule(base, s["first"], warmup_steps=0, grad_clip_norm=0.0, schedule="constant",
                   log_every=s["log_every"])
    variants, tuned = {}, {}
    for arm, overrides in arms(d_k).items():
        candidates = tuning.tuned_arm(arm, overrides, {"train.learning_rate": LEARNING_RATES})
        variants.update(candidates)
        tuned[arm] = tuple(candidates)
    chance = chance_accuracy(base)
    found = expectations(d_k, s["mid"], chance)
    found += [flattened(arm, ACCURACY, FLAT_ACCURACY) for arm in tuned]
    return Study(
        name=study_name, claim=claim, published=PUBLISHED,
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(ACCURACY, "eval/loss", QK_GRAD, ENTROPY), expectations=tuple(found),
        tuned=tuned, extend_grid=GridExtension("train.learning_rate", GRID_FACTOR, GRID_CAP),
        plateau=Plateau(ACCURACY, FLAT_ACCURACY, first=s["first"], step=s["step"],
                        cap=s["cap"]),
        suite=study_name)

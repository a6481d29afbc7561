"""What the parts of depth_remedies share: the registration, the task, the grid, the budget and
the thresholds (not a study: a file whose name starts with _ is none; studies/catalog.py).

experiments/depth_remedies.py was registered at cbd11a8, before any run. Its suite took 37 min 05 s
from a fresh clone with a cold compilation cache (5d00224), over its 30 minutes, so it was split in
two suites (a8938ef): depth_remedies_ln (Pre-LN and Post-LN) and depth_remedies_bare (no norm or no
residual). depth_remedies_ln's suite then took 32 min 31 s, cold (its results, with that time, are
in c85b80c), still over, on the AVX2 EPYC, a slower CPU than the AVX-512 one that measured
depth_remedies' 37 minutes. Its stages also wait on each other (the grid grown at an edge, then
every candidate extended to the next plateau stage), so two workers stay busy only while a stage
has two tasks left. So it is split again, by architecture: depth_remedies_pre (Pre-LN with
residuals) and depth_remedies_post (Post-LN with residuals). Nothing of the design moved in either
split: the task, width, depth, grid, plateau budget, seeds, thresholds, each arm's registered
outcome and each expectation's kind are cbd11a8's, below. What changes with a split: each part
decides its plateau alone, and Holm's family is the part's. depth_remedies's and
depth_remedies_ln's results had been seen when the splits were written; nothing here was chosen
from them. depth_remedies_bare took 31 min 12 s on the AVX2 EPYC (47c7bdb), over its 30 minutes
too, so it was split the same way (3eb8e9b): depth_remedies_nonorm (residuals without a norm) and
depth_remedies_noresidual (Pre-LN without residuals). The retired parts' results stay in git:
depth_remedies_ln's at c85b80c, depth_remedies_bare's at 47c7bdb.

What follows is cbd11a8's registration as written ("this study" is depth_remedies), but for the
line after the arms' table and the sizing at the end, which say where each arm went.

Issue 64 (written before the run). The depth study (experiments/depth.py) found that only Pre-LN
with residuals leaves chance at 24 and 96 layers; a referee found that answer confounded three
ways, and this study takes each out:
  - Initialization. `model.branch_init` (model/blocks.py) gives each arm the remedies the field
    uses: `depth_scaled` (GPT-2: each branch's output projection × 1/√(2L)), `rezero` (a gate
    on each branch, 0 at the start; Bachlechner et al. 2020) and `deepnet` (Post-LN's residual
    × α, branch kernels × β; Wang et al. 2022).
  - Learning rate. Every arm, and every 2-layer reference, is tuned over LEARNING_RATES, each
    seed choosing by its training loss (studies/tuning.py), and the grid grows by ×3 or ÷3 while
    a seed's choice sits at an edge, up to GRID_CAP points beyond each end (studies/grid.py): the
    page shows the grid reached and flags an optimum the cap left at an edge.
  - Budget. Every run trains PLATEAU["first"] steps at a constant rate, then PLATEAU["step"]
    more until every tuned arm has flattened (gains at most FLAT_ACCURACY over its last 20 %),
    or PLATEAU["cap"] steps (studies/plateau.py); the page says which arm the cap stopped.
The 96-layer half of the question is experiments/depth_article.py (its own suite: one suite
cannot hold both in 30 minutes on 2 cores).

The task is `sort` on sequences of 4–8 symbols (16 symbols, chance 1/16), at width 24, which the
pilot below saw 2-layer stacks learn to 0.94–0.98 within 800 steps; the 2-layer reference of
each architecture (today's initialization, tuned alike) is what "how far below" is measured from.

Arms (`deep_arms.Arm`): each architecture under today's initialization and the remedies that
apply to it, at 24 layers, with the outcome registered for it:
  pre_res    standard       trains     (Xiong et al. 2020: Pre-LN needs no warm-up at depth)
  pre_res    depth_scaled   trains     (GPT-2's recipe)
  post_res   standard       collapses  (Liu et al. 2020: deep Post-LN fails without warm-up)
  post_res   deepnet        trains     (Wang et al. 2022: DeepNet trains 1,000 Post-LN layers)
  post_res   depth_scaled   trains     (Liu et al. 2020's Admin: Post-LN fails through its
                                        dependence on the branches, which a smaller branch
                                        output at the start removes)
  none_res   standard       collapses  (the article: no norm, the deep stack collapses)
  none_res   depth_scaled   trains     (the rival prediction, below)
  none_res   rezero         trains     (the rival prediction; Bachlechner et al. 2020 train
                                        deep Transformers with no norm)
  pre_nores  standard       collapses  (Dong et al. 2021: rank collapse without skips)
  pre_nores  depth_scaled   collapses  (a smaller branch cannot give back a missing skip)
Post-LN and no-norm stacks without residuals, and ReZero on Pre-LN and Post-LN, are left out:
with them the suite does not fit in 30 minutes (each arm is three rates × three seeds).
The pre_res arms are experiments/depth_remedies_pre.py's, the post_res arms
depth_remedies_post.py's, the none_res arms depth_remedies_nonorm.py's and the pre_nores arms
depth_remedies_noresidual.py's, each part with the 2-layer reference of its architecture.

The rival prediction, written before the run: "initialization, not the norm, explains the
no-norm collapse": with a depth-scaled or zero-gated branch, residuals without a norm train at 24
layers and end near their own 2-layer reference. The article predicts they stay at chance. The
expectations register the rival's side (`none_res` remedies: trains); whatever the runs show is
the finding.

The mechanism, judged at the start (the first logged step, step 10) and at the end of every arm:
finiteness (training loss), `layers/grad_norm_ratio` (the first layer's gradient norm over the
last's, residual_flow's measure) and `layers/residual_rms_last_layer` (the stream's RMS). An arm
that trains starts finite (loss ≤ 10 nats; chance is ln 16 = 2.77), gets at least 0.1 of the last
layer's gradient to its first layer, and keeps its stream's RMS at most 100 (activation_range
measured 503–891 for the 12-layer no-norm stream at initialization); residuals without a norm
under today's initialization blow up at the start; Pre-LN without residuals starts with its
first layer's gradient under 0.1 of the last's.

Kinds (docs/verdicts.md). Checks: the references leaving chance, every flattened check, and what
the pilot showed of Pre-LN with residuals under today's initialization (it started finite, left
chance and ended near its reference); residual_flow measured Pre-LN's first/last gradient ratio at 24 layers
(about 3 at the start, 6.5 after training), so those two are checks too. Everything else is a
finding.

The pilot (issue 64: measured first, not a result, nothing of it committed; a 2-core AMD EPYC
with AVX-512, under other load): sort at lengths 4–16 left 2-layer stacks still learning at 1,000
steps (0.84–0.97), so the lengths became 4–8. There, 2-layer stacks at width 24 reached
0.94–0.98 by 800 steps at 3e-3 and 1e-2, and Pre-LN with residuals at 24 layers, width 24, 3e-3
reached 0.96–0.98 by 800 steps (65 CPU-s for 3 seeds side by side, compilation included). No
other arm of this study was run at 24 layers before this design was written.

Sized (default), the whole: 14 tuned arms (10 at 24 layers, 4 references at 2), 42 candidates,
126 runs before the grids grow; each part's docstring gives its own.
"""
from pathlib import Path

from transformer_jax.studies import deep_arms
from transformer_jax.studies.deep_arms import Thresholds
from transformer_jax.studies.study import FLAT_ACCURACY, Plateau, Study

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # first, step, cap: the plateau budget's stages; depth: the deep arms'
    "tiny": dict(first=20, step=10, cap=30, width=16, depth=3, log_every=2),
    "default": dict(first=600, step=200, cap=1000, width=24, depth=24, log_every=10),
    "large": dict(first=4000, step=1000, cap=6000, width=64, depth=48, log_every=20),
}
LEARNING_RATES = (1e-3, 3e-3, 1e-2)  # the declared grid; grown by GRID_FACTOR at a chosen edge
GRID_FACTOR, GRID_CAP = 3.0, 1
THRESHOLDS = Thresholds(
    leaves_chance=0.25,  # 4 × chance (1/16)
    near_reference=0.05,  # as the depth study's "flat in depth"
    blown_loss=10.0,  # nats at the first logged step; a uniform guess is ln 16 = 2.77
    vanished_ratio=0.1,  # residual_flow's FADED
    exploded_rms=100.0)  # activation_range: 503–891 for the 12-layer no-norm stream at init
PILOT_SAW = ("the pilot saw Pre-LN with residuals at 24 layers reach 0.96–0.98 by 800 steps at "
             "3e-3, and 2-layer stacks 0.94–0.98")
PUBLISHED = ("Liu et al. 2020 (Post-LN fails deep; Admin rescues it), Xiong et al. 2020 (Pre-LN "
             "needs no warm-up), Radford et al. 2019 (GPT-2's 1/√N init), Bachlechner et al. "
             "2020 (ReZero: deep Transformers with no norm), Wang et al. 2022 (DeepNet: "
             "1,000-layer Post-LN), Dong et al. 2021 (rank collapse without skips).")
RESIDUAL_FLOW_SAW = ("residual_flow measured Pre-LN's first/last gradient ratio at 24 layers: "
                     "about 3 at the start and 6.5 after training")


# Changes after the parts' first results, each naming its commit (every part's: they share them).
AMENDMENTS = (
    "0a30ba2: the fingerprint now holds what this shared file imports from the package "
    "(FLAT_ACCURACY): measured_code.py had not followed a shared file's imports, so it moved "
    "once for each part; no design, threshold or code that computes a value changed, and the "
    "suite ran again from this commit",
)


def build_part(name: str, claim: str, size: str, part_arms) -> Study:
    """One part of depth_remedies: `part_arms` (a part's `arms`), with cbd11a8's task, grid,
    budget and thresholds; its suite is `name`."""
    s = SIZES[size]
    design = deep_arms.Design(name=name, claim=claim, published=PUBLISHED, rates=LEARNING_RATES,
                              grid_factor=GRID_FACTOR, grid_cap=GRID_CAP, thresholds=THRESHOLDS,
                              amendments=AMENDMENTS)
    base = deep_arms.base_config(REPO / "configs", size, s["width"], s["first"], s["log_every"])
    return deep_arms.build(design, part_arms(s["depth"]), base,
                           Plateau(deep_arms.ACCURACY, FLAT_ACCURACY, first=s["first"],
                                   step=s["step"], cap=s["cap"]))

"""What the parts of depth_article share: the registration, the task, the grid, the budget and
the thresholds (not a study: a file whose name starts with _ is none; studies/catalog.py).

experiments/depth_article.py was registered at cbd11a8, before any run, as a suite of its own. Its
suite took 27 min 44 s from a fresh clone on the AVX-512 EPYC, inside its 30 minutes, but the
slower CPU these machines have had (the AVX2 EPYC, on which issue 69 sets the limits) had taken
18 min 24 s to end its first 9 of 21 candidates, with every plateau stage still to come: about
50 minutes in all. So it is split, by architecture, into three suites: depth_article_pre (Pre-LN
with residuals), depth_article_post (Post-LN under DeepNet's initialization) and
depth_article_nonorm (residuals without a norm), each with its 2-layer reference. Nothing of the
design moved: the task, width, depth, grid, plateau budget, seeds, thresholds, each arm's
registered outcome and each expectation's kind are cbd11a8's, below. What changes with the split:
each part decides its plateau alone, and Holm's family is the part's. depth_article's results had
been seen when the split was written; nothing here was chosen from them. Its results stay in git
at 601ee13, the last commit that holds them (first committed at 12609c6).

What follows is depth_article's registration as the file held it at the split ("this study" is
depth_article), but for the line after the arms' table and the sizing at the end, which say where
each arm went.

Claim (the rival to the article's "without a norm the deep stack collapses"): at the article's
depth, 96 layers, each arm at its own best learning rate and trained until it stops learning,
residuals without a norm leave chance once their branches start depth-scaled, as Pre-LN with
residuals and Post-LN under DeepNet's initialization do; only the no-norm stack under today's
initialization collapses. Initialization, not the norm, explains its collapse.

Issue 64 (written before the run): the 96-layer half of experiments/depth_remedies.py, in a
suite of its own, because a 96-layer run costs about four times a 24-layer one and both do not
fit in one 30-minute suite on 2 cores. The design is that study's (studies/deep_arms.py): every
arm and every 2-layer reference tuned over LEARNING_RATES with the grid grown at a chosen edge
(×3 or ÷3, GRID_CAP points beyond each end), every run trained to the plateau (PLATEAU: first,
then step more, up to cap), the mechanism judged at the start (the first logged step, step 10)
and at the end. Read its docstring for the remedies, the thresholds and the kinds. (Added after
the runs: depth_remedies.py, registered at cbd11a8, is since split for its suite's time into
depth_remedies_pre.py, depth_remedies_post.py and depth_remedies_bare.py, each a suite;
experiments/_depth_remedies.py holds that registration. depth_remedies_bare is split again into
depth_remedies_nonorm.py and depth_remedies_noresidual.py.)

The task is `sort` on sequences of 4–8 symbols (chance 1/16) at width 16: the width at which 96
layers fit the suite (0.17 CPU-s a step for 3 seeds side by side in the pilot); the pilot saw
2-layer stacks at width 16 reach 0.94–0.97 by 1,000 steps at 1e-2, so the 2-layer references
learn the task.

Arms, with the outcome registered for each:
  pre_res    standard       trains     (the article; Xiong et al. 2020)
  post_res   deepnet        trains     (Wang et al. 2022: DeepNet trains 1,000 Post-LN layers)
  none_res   standard       collapses  (the article: without a norm the deep stack collapses)
  none_res   depth_scaled   trains     (the rival prediction: "initialization, not the norm,
                                        explains the no-norm collapse")
The pre_res arm is experiments/depth_article_pre.py's, the post_res arm depth_article_post.py's,
the none_res arms depth_article_nonorm.py's, each part with its architecture's 2-layer
reference.
Left out, for the suite's 30 minutes: Post-LN under today's initialization (the depth study ran
it at 96 layers, width 16, with warm-up, at 1e-3 and 3e-3: at chance), ReZero, and stacks
without residuals (experiments/depth_remedies_noresidual.py asks about them at 24 layers).

The rival prediction, written before the run, is registered as the expectation: residuals
without a norm under the depth-scaled initialization leave chance and end within 0.05 of their
2-layer reference. The article predicts they stay at chance. Whatever the runs show is the
finding.

Kinds (docs/verdicts.md). Checks: the references leaving chance, the flattened checks, what the
depth study saw (every no-norm run at 96 layers under today's initialization was non-finite at
step 1), what the issue measured (the depth-scaled no-norm stream's RMS at initialization: 1.9
at 96 layers, width 16) and what the pilot saw (below). Post hoc: the depth-scaled no-norm arm
leaving chance, whose threshold was written after the pilot had seen it at 0.31–0.35. Everything
else is a finding.

The pilot (issue 64: measured first, not a result, nothing of it committed; a 2-core AMD EPYC
with AVX-512, under other load), at 96 layers, width 16, lengths 4–8:
  - Pre-LN with residuals, today's initialization: 0.82–0.89 after 600 steps at 3e-3 and
    0.66–0.80 at 1e-2, still gaining ≈ 0.05 per 100 steps (so the first stage is 1,000 steps);
  - residuals without a norm, depth-scaled, 3e-3: two seeds at 0.31–0.35 after 300 steps, one
    diverged at step 148; every run finite at its first logged steps.
No other arm of this study was run at 96 layers before this design was written.

Sized (default): 7 tuned arms (4 at 96 layers, 3 references at 2), 21 candidates, 63 runs.
Estimated from the pilot's CPU time: ≈ 190 CPU-s a 96-layer candidate at 1,000 steps and ≈ 230
at 1,250 (the no-norm arm under today's initialization stops at its first step); ≈ 22–28 minutes
on 2 cores, more for each grid extension. Each part's docstring gives its own.
"""
from pathlib import Path

from transformer_jax.studies import deep_arms
from transformer_jax.studies.deep_arms import Thresholds
from transformer_jax.studies.study import FLAT_ACCURACY, Plateau, Study

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # first, step, cap: the plateau budget's stages; depth: the deep arms'
    "tiny": dict(first=20, step=10, cap=30, width=16, depth=6, log_every=2),
    "default": dict(first=1000, step=250, cap=1500, width=16, depth=96, log_every=10),
    "large": dict(first=5000, step=1500, cap=8000, width=64, depth=96, log_every=20),
}
LEARNING_RATES = (1e-3, 3e-3, 1e-2)  # the declared grid; grown by GRID_FACTOR at a chosen edge
GRID_FACTOR, GRID_CAP = 3.0, 1
THRESHOLDS = Thresholds(  # as experiments/_depth_remedies.py's
    leaves_chance=0.25, near_reference=0.05, blown_loss=10.0, vanished_ratio=0.1,
    exploded_rms=100.0)
PUBLISHED = ("Xiong et al. 2020 (Pre-LN needs no warm-up), Radford et al. 2019 (GPT-2's 1/√N "
             "init), Wang et al. 2022 (DeepNet: 1,000-layer Post-LN).")
PILOT_PRE = ("the pilot saw Pre-LN with residuals at 96 layers reach 0.82–0.89 after 600 steps "
             "at 3e-3, every run finite")
PILOT_NONE = ("the pilot saw residuals without a norm, depth-scaled, at 96 layers finite at their "
              "first logged steps")
DEPTH_SAW = ("the depth study saw every no-norm run at 96 layers under today's initialization "
             "non-finite at step 1")
ISSUE_MEASURED = ("issue 64 measured the depth-scaled no-norm stream's RMS at initialization: 1.9 "
                  "at 96 layers, width 16")
POST_HOC_WHY = ("its threshold (0.25) was written after the pilot had seen two seeds at "
                "0.31–0.35 after 300 steps at 3e-3 (the third diverged)")


def build_part(name: str, claim: str, size: str, part_arms) -> Study:
    """One part of depth_article: `part_arms` (a part's `arms`), with cbd11a8's task, grid,
    budget and thresholds; its suite is `name`."""
    s = SIZES[size]
    design = deep_arms.Design(name=name, claim=claim, published=PUBLISHED, rates=LEARNING_RATES,
                              grid_factor=GRID_FACTOR, grid_cap=GRID_CAP, thresholds=THRESHOLDS)
    base = deep_arms.base_config(REPO / "configs", size, s["width"], s["first"], s["log_every"])
    return deep_arms.build(design, part_arms(s["depth"]), base,
                           Plateau(deep_arms.ACCURACY, FLAT_ACCURACY, first=s["first"],
                                   step=s["step"], cap=s["cap"]))

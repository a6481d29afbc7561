"""The arms of a deep-stack study with initialization, learning rate and budget taken out of the
answer (issue 64): an architecture (norm placement, residual or not) under one branch
initialization (`model.branch_init`), at one depth, each tuned over the learning rate with a grid
grown until its optimum is interior (`studies/grid.py`), trained to the plateau.

An experiment file (experiments/depth_remedies_pre.py, _post.py, _nonorm.py, _noresidual.py,
depth_article_pre.py, _post.py, _nonorm.py) lists its arms and, for each, the outcome it registers
before the run: `TRAINS` (it leaves chance and ends near its 2-layer reference) or `COLLAPSES` (it
stays at chance). This module builds the variants, the tuned arms and the expectations those words
mean, the same way for every depth, so that the studies ask one question. The thresholds are the
experiment's (`Thresholds`).

Every arm is judged on three things beside accuracy, at the start (the first logged step, which
`at_step=1` reads) and at the end, from what the trainer logs at every logged step:
  - finiteness: the training loss at the start (a diverged run counts as a blown-up loss);
  - `layers/grad_norm_ratio`: the first layer's gradient norm over the last's (residual_flow's
    measure: about 1 when the gradient reaches the input, far below when it vanishes);
  - `layers/residual_rms_last_layer`: the residual stream's RMS after the last layer (how far
    the stream has grown: the no-norm stack's explosion).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping, Optional, Sequence

import ml_collections

from transformer_jax.studies import tuning
from transformer_jax.studies.grid import GridExtension
from transformer_jax.studies.study import (FLAT_ACCURACY, Comparison, Expectation, Kind, Plateau,
                                           Study, chance_accuracy, flattened, load_config,
                                           study_schedule)

ARCHITECTURES = {  # name -> the overrides that make it
    "pre_res": {"model.norm": "pre", "model.residual": True},
    "post_res": {"model.norm": "post", "model.residual": True},
    "none_res": {"model.norm": "none", "model.residual": True},
    "pre_nores": {"model.norm": "pre", "model.residual": False},
}
WORDS = {"pre_res": "Pre-LN with residuals", "post_res": "Post-LN with residuals",
         "none_res": "residuals without a norm", "pre_nores": "Pre-LN without residuals"}
INIT_WORDS = {"standard": "today's initialization", "depth_scaled": "the depth-scaled init "
              "(GPT-2's 1/√(2L))", "rezero": "ReZero's zero-initialized gate",
              "deepnet": "DeepNet's α and β"}
TRAINS, COLLAPSES = "trains", "collapses"  # the outcome an arm registers before its run
REFERENCE_DEPTH = 2  # "how far below its 2-layer reference": the architecture at 2 layers
ACCURACY, LOSS = "eval/accuracy", "train/loss"
RATIO, RMS = "layers/grad_norm_ratio", "layers/residual_rms_last_layer"
START = 1  # at_step: the first logged step


@dataclasses.dataclass(frozen=True)
class Arm:
    """One architecture under one branch initialization at one depth, and what it registers."""

    architecture: str  # a key of ARCHITECTURES
    init: str  # a model.branch_init value
    depth: int
    outcome: str  # TRAINS or COLLAPSES
    # key -> (Kind.CHECK or Kind.POST_HOC, why) for an expectation whose outcome was known, or
    # whose threshold was written after values were seen (the pilot, another study); the keys
    # are those of `keyed`; every other expectation of the arm is a finding
    kinds: Mapping[str, tuple[Kind, str]] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return arm_name(self.architecture, self.init, self.depth)

    @property
    def reference(self) -> str:
        return arm_name(self.architecture, "standard", REFERENCE_DEPTH)

    def words(self) -> str:
        return f"{WORDS[self.architecture]} under {INIT_WORDS[self.init]} at {self.depth} layers"


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """The amounts an experiment registers: accuracy that counts as leaving chance, how far
    below its reference an arm that trains may end, the loss that counts as blown up, the
    gradient ratio below which the gradient has vanished, the RMS above which the stream has
    exploded."""

    leaves_chance: float
    near_reference: float
    blown_loss: float
    vanished_ratio: float
    exploded_rms: float
    diverged_loss: float = 1e6  # what a diverged run's loss counts as: blown up
    diverged_rms: float = 1e6  # and its stream: exploded


def arm_name(architecture: str, init: str, depth: int) -> str:
    """'none_res_depth_scaled_L24'."""
    return f"{architecture}_{init}_L{depth}"


def references(arms: Sequence[Arm]) -> list[str]:
    """Each architecture's 2-layer reference, once, in the arms' order."""
    return list(dict.fromkeys(a.reference for a in arms))


def variants_and_arms(arms: Sequence[Arm], rates: Sequence[float],
                      width: Optional[int] = None) -> tuple[dict, dict]:
    """(variants, tuned): every arm and every reference tuned over `rates` (its candidates
    differ in train.learning_rate alone); `width`: model.d_model (and d_ff = 4 × it)."""
    shape = {} if width is None else {"model.d_model": width, "model.d_ff": 4 * width}
    specs = {a.name: (a.architecture, a.init, a.depth) for a in arms}
    specs.update({name: (name.split("_standard_L")[0], "standard", REFERENCE_DEPTH)
                  for name in references(arms)})
    variants, tuned = {}, {}
    for name, (architecture, init, depth) in specs.items():
        overrides = {**ARCHITECTURES[architecture], "model.branch_init": init,
                     "model.num_layers": depth, **shape}
        candidates = tuning.tuned_arm(name, overrides, {"train.learning_rate": tuple(rates)})
        variants.update(candidates)
        tuned[name] = tuple(candidates)
    return variants, tuned


def expectations(arms: Sequence[Arm], t: Thresholds, chance: float) -> list[Expectation]:
    """What each arm registers (`outcome_expectations`, `mechanism_expectations`), then every
    reference leaving chance and every tuned arm's flattened check."""
    found = [e for arm in arms for e in keyed(arm, t, chance)]
    for ref in references(arms):
        found.append(Expectation(
            f"the 2-layer reference {ref} learns the task: accuracy at least {t.leaves_chance}",
            ACCURACY, ref, Comparison.AT_LEAST, t.leaves_chance, worst=chance, kind=Kind.CHECK,
            why="the pilot saw 2-layer stacks at this width learn the task: it shows the "
                "reference is one"))
    found += [flattened(name, ACCURACY, FLAT_ACCURACY) for name in [*references(arms),
                                                                    *(a.name for a in arms)]]
    return found


def keyed(arm: Arm, t: Thresholds, chance: float) -> list[Expectation]:
    """What the arm registers (`outcome_of`, `mechanism_of`), each of its kind (`Arm.kinds`)."""
    found = []
    for key, e in [*outcome_of(arm, t, chance), *mechanism_of(arm, t)]:
        kind, why = arm.kinds.get(key, (Kind.FINDING, ""))
        found.append(dataclasses.replace(e, kind=kind, why=why))
    return found


def outcome_of(arm: Arm, t: Thresholds, chance: float) -> list[tuple[str, Expectation]]:
    """TRAINS: it leaves chance and ends no more than near_reference below its 2-layer
    reference; COLLAPSES: it stays at chance. A diverged run counts as chance accuracy."""
    where = f"{arm.words()}, at its best learning rate, at the plateau"
    if arm.outcome == COLLAPSES:
        return [("stays_at_chance", Expectation(
            f"{where}: stays at chance (accuracy at most {t.leaves_chance})", ACCURACY,
            arm.name, Comparison.AT_MOST, t.leaves_chance, worst=chance))]
    return [("leaves_chance", Expectation(
                f"{where}: leaves chance (accuracy at least {t.leaves_chance})", ACCURACY,
                arm.name, Comparison.AT_LEAST, t.leaves_chance, worst=chance)),
            ("near_reference", Expectation(
                f"{where}: ends no more than {t.near_reference} accuracy below its 2-layer "
                "reference", ACCURACY, arm.name, Comparison.BETTER, -t.near_reference,
                b=arm.reference, worst=chance))]


def mechanism_of(arm: Arm, t: Thresholds) -> list[tuple[str, Expectation]]:
    """The mechanism of the outcome the arm registers, at the start and at the end: an arm
    that trains starts finite, its gradient reaches the first layer and its stream stays
    bounded; one that collapses shows the failure its architecture is known for (no norm: the
    loss blows up at the start; no residual: the gradient vanishes toward the input)."""
    name, at = arm.name, f"{arm.words()}"
    if arm.outcome == TRAINS:
        return [
            ("finite", Expectation(f"{at}: starts finite (training loss at the first logged "
                                   f"step at most {t.blown_loss})", LOSS, name,
                                   Comparison.AT_MOST, t.blown_loss, higher_is_better=False,
                                   worst=t.diverged_loss, at_step=START)),
            ("ratio_start", Expectation(f"{at}: at the start the first layer gets at least "
                                        f"{t.vanished_ratio} of the last layer's gradient norm",
                                        RATIO, name, Comparison.AT_LEAST, t.vanished_ratio,
                                        at_step=START)),
            ("ratio_end", Expectation(f"{at}: at the end the first layer gets at least "
                                      f"{t.vanished_ratio} of the last layer's gradient norm",
                                      RATIO, name, Comparison.AT_LEAST, t.vanished_ratio)),
            ("rms_start", Expectation(f"{at}: at the start the residual stream's RMS after the "
                                      f"last layer is at most {t.exploded_rms}", RMS, name,
                                      Comparison.AT_MOST, t.exploded_rms, higher_is_better=False,
                                      worst=t.diverged_rms, at_step=START)),
            ("rms_end", Expectation(f"{at}: at the end the residual stream's RMS after the last "
                                    f"layer is at most {t.exploded_rms}", RMS, name,
                                    Comparison.AT_MOST, t.exploded_rms, higher_is_better=False,
                                    worst=t.diverged_rms)),
        ]
    if not ARCHITECTURES[arm.architecture]["model.residual"]:
        return [("ratio_start", Expectation(
            f"{at}: at the start the first layer gets less than {t.vanished_ratio} of the last "
            "layer's gradient norm (it vanishes toward the input)", RATIO, name,
            Comparison.AT_MOST, t.vanished_ratio, at_step=START))]
    if ARCHITECTURES[arm.architecture]["model.norm"] == "none":
        return [("finite", Expectation(
            f"{at}: blows up at the start (training loss at the first logged step at least "
            f"{t.blown_loss}, a diverged run counting as blown up)", LOSS, name,
            Comparison.AT_LEAST, t.blown_loss, higher_is_better=False, worst=t.diverged_loss,
            at_step=START))]
    return []


@dataclasses.dataclass(frozen=True)
class Design:
    """What an experiment file declares beside its arms: its words, the grid and the budget."""

    name: str
    claim: str
    published: str
    rates: tuple[float, ...]  # the declared learning-rate grid
    grid_factor: float  # the next point out: × or ÷ this
    grid_cap: int  # points added beyond each end, at most
    thresholds: Thresholds
    amendments: tuple[str, ...] = ()  # each change after the first results, naming its commit


def base_config(configs: Path, size: str, width: int, first: int,
                log_every: int) -> ml_collections.ConfigDict:
    """`sort` on 4-8 symbols at `width`, `first` steps at a constant rate from the first step
    (an extended run must be the run trained straight: studies/plateau.py), with no warm-up and
    no clipping, so that a remedy is the initialization alone."""
    base = load_config(configs / "synthetic.py", "task=sort" + (",tiny" if size == "tiny" else ""))
    base.unlock()
    base.data.seq_len = 8  # lengths 4-8 (min_len 4)
    base.model.update(d_model=width, num_heads=4, d_ff=4 * width)
    study_schedule(base, first, warmup_steps=0, grad_clip_norm=0.0, schedule="constant",
                   log_every=log_every)
    return base


def build(design: Design, arms: Sequence[Arm], base: ml_collections.ConfigDict,
          plateau: Plateau) -> Study:
    """The study: every arm and reference tuned over design.rates (grown at a chosen edge),
    to the plateau, judged as `expectations` says; its suite is its name."""
    variants, tuned = variants_and_arms(arms, design.rates)
    return Study(
        name=design.name, claim=design.claim, published=design.published,
        base=base, variants=variants, seeds=(0, 1, 2),
        metrics=(ACCURACY, "eval/loss", RATIO, RMS),
        expectations=tuple(expectations(arms, design.thresholds, chance_accuracy(base))),
        tuned=tuned,
        extend_grid=GridExtension("train.learning_rate", design.grid_factor, design.grid_cap),
        plateau=plateau, suite=design.name,
        amendments=design.amendments)

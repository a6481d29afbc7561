"""What an ablation study is: a claim, variants of one base config, seeds, and the measurable
outcome that would support the claim. Experiment files (`experiments/*.py`) define
`get_study(size) -> Study`; `transformer_jax.sweep` runs one and writes its verdict.

How an expectation is judged, its terms (`Comparison`, `Measure`, `Kind`) and the statistics
are the judge room's (`transformer_jax.studies.judge`); loading experiment and config files is
`transformer_jax.studies.design.loading`. Their names are re-exported here: experiment files
import everything they use from this module.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import ml_collections

from transformer_jax.config import ADDED_FIELDS, IN_EVERY_FINGERPRINT, ConfigError
from transformer_jax.studies import plateau as plateau_lib
from transformer_jax.studies.design import judged_code, measured_code
from transformer_jax.studies.design.loading import STUDY_SIZES, load_config, load_module, load_study
from transformer_jax.studies.judge import expectation as judging
from transformer_jax.studies.judge import terms, unjudgeable
from transformer_jax.studies.plateau import Plateau
# The judge room's names (studies/judge/), here as before it had a room: experiment files (and
# the package's users) import them from this module. Re-exported, so unused here: noqa F401.
from transformer_jax.studies.judge.expectation import MIN_MEASURED  # noqa: F401
from transformer_jax.studies.judge.judgement import Judgement
from transformer_jax.studies.judge.stats import (  # noqa: F401
    CONFIDENCE, INTERVAL_METHOD, MAX_SEEDS, Failure, Verdict, decide, difference_interval,
    how_it_failed, interval_of_mean, mean_interval, mean_over_seeds, rate_interval, relative_gap,
    relative_gap_interval, seeds_to_bound, seeds_to_settle, seeds_to_settle_rate, settle_note,
    smaller_note, unbounded_note)
from transformer_jax.studies.judge.terms import (  # noqa: F401
    NO_EFFECT, PAIRS, RATES, REFUSED_ON_LOST, Comparison, Kind, Measure)

if TYPE_CHECKING:  # grid.py builds on Study
    from transformer_jax.studies.grid import GridExtension

__all__ = [  # the experiment-file API
    "CONFIDENCE", "Comparison", "Expectation", "FLATTENED_ADDED", "FLAT_ACCURACY",
    "INTERVAL_METHOD", "Judgement", "Kind", "MAX_SEEDS", "Measure", "RATES", "STUDY_SIZES",
    "Study",
    "Verdict", "decide", "difference_interval", "flattened", "interval_of_mean", "load_config",
    "load_module", "load_study", "mean_interval", "mean_over_seeds", "Plateau", "rate_interval",
    "relative_gap", "relative_gap_interval", "seeds_to_bound", "seeds_to_settle",
    "seeds_to_settle_rate", "settle_note", "unbounded_note", "study_schedule", "chance_accuracy"]


KIND_WORDS = {Kind.FINDING: "finding", Kind.CHECK: "check", Kind.POST_HOC: "post hoc"}
PROBES_FILE = "probes.md"  # a study's step-0 probes, as markdown (its plots beside it)
MACHINE_FIELDS = ("data_dir", "text_path")  # where this machine keeps data: not the design
# Expectation fields added after fingerprints existed, with their default, left out the same way.
NEWER_EXPECTATION_FIELDS = {"at_step": None, "measure": Measure.FINAL.value, "c": None,
                            "d": None}
DISCLOSURE_FIELDS = ("kind", "why")  # what an expectation is evidence of: not its design


@dataclasses.dataclass(frozen=True)
class Expectation:
    """One measurable outcome, judged on the final value of `metric` over seeds: its effect
    gets a 95 % interval (`INTERVAL_METHOD`), and the verdict is settled only when the whole
    interval is on one side of the threshold `margin`.

    A diverged run (final value nan) has no value. Unless `worst` says what it counts as, the
    verdict must not depend on it: it counts as the study's finished value least favourable to
    the expectation (the judgement shows that case), the verdict stands only if it is the same
    with every diverged run at the study's lowest or highest finished value, and it is
    inconclusive when every run of a judged variant diverged. So a diverged run never helps a
    claim, nor refutes one: "at most" cannot hold because runs blew up, nor "a beats b" fail
    because b's blow-up was counted as a good run. Where divergence *is* the expected failure,
    say so before the run: `worst=` (e.g. chance accuracy), or a FAIL_RATE comparison, which
    counts a diverged run as failed."""

    text: str  # the expected outcome in words
    metric: str  # a TensorBoard tag, e.g. 'eval/accuracy'
    a: str  # variant
    comparison: Comparison
    margin: float  # BETTER: the gain; WITHIN: the relative gap; AT_MOST: the mean; rates: rate
    b: Optional[str] = None  # the other variant (BETTER, WITHIN)
    higher_is_better: bool = True
    worst: Optional[float] = None  # the value a diverged run counts as; None: see above
    threshold: Optional[float] = None  # FAIL_RATE_*: a run passes at or beyond this value
    # None: the metric's final value; a step: its value at the first logged step at or after it
    # (1: the start of training, e.g. gradients at initialization)
    at_step: Optional[int] = None
    measure: Measure = Measure.FINAL
    kind: Kind = Kind.FINDING
    why: str = ""  # why a check or post hoc is one (shown beside it); a finding needs none
    c: Optional[str] = None  # DIFFERENCE_OF_DIFFERENCES: the second pair's variants (c − d)
    d: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.kind, Kind):
            raise ConfigError(f"expectation {self.text!r}: kind={self.kind!r}; valid: "
                              f"{', '.join(f'Kind.{k.name}' for k in Kind)}")
        if self.kind is not Kind.FINDING and not self.why.strip():
            raise ConfigError(f"expectation {self.text!r}: kind=Kind.{self.kind.name} needs "
                              "why= (what makes it one, shown beside it)")
        if not isinstance(self.measure, Measure):
            raise ConfigError(f"expectation {self.text!r}: measure={self.measure!r}; valid: "
                              f"{', '.join(f'Measure.{m.name}' for m in Measure)}")
        if self.measure is not Measure.FINAL and self.at_step is not None:
            raise ConfigError(f"expectation {self.text!r}: at_step={self.at_step} goes with "
                              f"Measure.FINAL, not {self.measure}")
        four = self.comparison is Comparison.DIFFERENCE_OF_DIFFERENCES
        two = self.comparison in PAIRS or four
        if two != (self.b is not None):
            raise ConfigError(f"expectation {self.text!r}: comparison {self.comparison.value} "
                              f"{'needs' if two else 'takes no'} b= (the other variant)")
        if four != (self.c is not None and self.d is not None) or \
                (not four and (self.c, self.d) != (None, None)):
            raise ConfigError(f"expectation {self.text!r}: comparison {self.comparison.value} "
                              f"{'needs' if four else 'takes no'} c= and d= (the second pair, "
                              "whose gain c − d the gain a − b is compared with)")
        rate = self.comparison in RATES
        if rate and self.threshold is None:
            raise ConfigError(f"expectation {self.text!r}: {self.comparison.value} needs "
                              "threshold= (the final value a run must reach not to fail)")
        if not rate and self.threshold is not None:
            raise ConfigError(f"expectation {self.text!r}: threshold= goes with "
                              f"{' or '.join(c.value for c in RATES)}, not {self.comparison.value}")
        if rate and self.worst is not None:
            raise ConfigError(f"expectation {self.text!r}: worst= has no use with "
                              f"{self.comparison.value}: a diverged run fails")
        if self.at_step is not None and (isinstance(self.at_step, bool)
                                         or not isinstance(self.at_step, int) or self.at_step < 0):
            raise ConfigError(f"expectation {self.text!r}: at_step={self.at_step!r} must be a "
                              "non-negative integer (a step) or None (the final value)")
        if not math.isfinite(self.margin):
            raise ConfigError(f"expectation {self.text!r}: margin={self.margin} must be a finite "
                              "number")
        if self.comparison is Comparison.WITHIN and self.margin < 0:
            raise ConfigError(f"expectation {self.text!r}: margin={self.margin} is a relative "
                              "gap |mean a − mean b|/|mean b|, >= 0")
        if self.comparison is Comparison.RATIO and self.margin <= 0:
            raise ConfigError(f"expectation {self.text!r}: margin={self.margin} is a factor "
                              "(a ratio of a to b), > 0")
        if rate and not 0.0 <= self.margin <= 1.0:
            raise ConfigError(f"expectation {self.text!r}: margin={self.margin} is a fraction of "
                              "runs, between 0 and 1")

    def variants(self) -> list[str]:
        return [v for v in (self.a, self.b, self.c, self.d) if v is not None]

    def accepted(self) -> tuple[float, float]:
        """The region of `effect` that supports the expectation (judge/terms.py)."""
        return terms.accepted(self)

    def judge(self, final: Mapping[str, Mapping[int, float]],
              confidence: float = CONFIDENCE,
              stopped: Optional[Mapping[str, Mapping[int, int]]] = None) -> Judgement:
        """final: variant -> seed -> the metric's final value (nan for a diverged run), every
        variant of the study; `stopped`: where each diverged run stopped. The judge room's
        (judge/expectation.py: `judge`, which says more)."""
        return judging.judge(self, final, confidence, stopped)


def chance_accuracy(config: ml_collections.ConfigDict) -> Optional[float]:
    """eval/accuracy of a uniform guess on the config's task (None: not known without the
    data): what a diverged run counts as, at most, when divergence is the expected failure."""
    from transformer_jax import data  # here: the data layer imports TFDS (seconds)
    return data.chance_accuracy(config.data)


# The amount of the "flattened" check (issue 32) for the studies whose verdicts say a variant
# "trains at all" (residuals, norm_placement, depth, residual_flow): 0.02 accuracy over the last
# 20 % of steps, under the smallest margin (0.05) of those expectations, so that what the
# baseline still gains could not alone make up a margin. One rule for all four, fixed before
# the runs that judged it; FLATTENED_ADDED is the amendment line each of them carries.
FLAT_ACCURACY = 0.02
FLATTENED_ADDED = ("issue 32: the 'flattened' check (a new expectation, no threshold moved), "
                   "added after results had been seen")


def flattened(variant: str, metric: str, amount: float, higher_is_better: bool = True
              ) -> Expectation:
    """The "flattened" check of a "trains at all" verdict: `variant` (the baseline that trains)
    gained at most `amount` of `metric` over its last 20 % of steps (mean over seeds), so the
    budget measured whether the others train at all, not only how fast they learn. A check of
    the instrument (Kind.CHECK): one that does not hold is an alarm."""
    return Expectation(f"{variant} has flattened: its {metric} gains at most {amount:g} over "
                       "its last 20 % of steps (else the budget measures speed as well)", metric,
                       variant, Comparison.AT_MOST, amount, higher_is_better=higher_is_better,
                       measure=Measure.LATE_GAIN, kind=Kind.CHECK, why=FLATTENED_WHY)


# Why "flattened" is a check: it judges the budget, not the claim (docs/verdicts.md)
FLATTENED_WHY = ("a check of the budget, not of the claim: that the arm had stopped learning, so "
                 "the comparisons measure whether the others train, not how fast")


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    claim: str
    published: str  # the published result this echoes
    base: ml_collections.ConfigDict
    variants: Mapping[str, Mapping[str, Any]]  # name -> {'model.attn_scale': False, ...}
    seeds: tuple[int, ...]
    metrics: tuple[str, ...]  # curves to plot, e.g. ('eval/loss', 'eval/accuracy')
    expectations: tuple[Expectation, ...]
    probes: Optional[Callable[[Path], str]] = None  # step-0 probes: write plots, return markdown
    suite: str = "main"  # the collection it belongs to: 'main' (scripts/run.sh), 'lm' (real text)
    # Called after every run ended with (root, report.collect(...)'s runs); each returns markdown
    # for verdict.md's '## Analysis', or a checks.Section (that markdown and its checks' results
    # as data), and may write plots into root.
    analyses: tuple[Callable[[Path, dict], Any], ...] = ()
    # One line each, with the commits: where an expectation or the design was changed after a
    # result had been seen (shown on the study's results page; not part of the fingerprint).
    amendments: tuple[str, ...] = ()
    # Arms at their own best setting (studies/tuning.py): arm -> its candidate variants, one
    # chosen per seed by training loss; expectations may name the arm.
    tuned: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # An evaluation-only study (a trained checkpoint, nothing to train): evaluate(study, root)
    # measures every variant and returns runs as report.collect gives them ((variant, seed) ->
    # {"status", "curves"}, a "seed" being a unit of evaluation, e.g. a sentence). Run by
    # `python -m transformer_jax.studies.run.evaluate`; the sweep refuses it.
    evaluate: Optional[Callable[["Study", Path], dict]] = None
    # A budget that runs to the plateau (studies/plateau.py); None: train.num_steps, fixed.
    plateau: Optional[Plateau] = None
    # Tuned arms' grids grown outward while a seed's choice sits at an edge (studies/grid.py);
    # None: the grids as declared.
    extend_grid: Optional["GridExtension"] = None
    # The code that computes what the study judges, as (file, name) pairs (measured_code.refs,
    # with the experiment file's imports from the package): set by loading.load_study, found
    # from the study alone where it is None. Not a statement of the study: it is its digest
    # that the fingerprint holds.
    measured_refs: Optional[tuple[tuple[str, str], ...]] = dataclasses.field(
        default=None, compare=False, repr=False)

    def __post_init__(self):
        if not self.variants or not self.seeds:
            raise ConfigError(f"study {self.name!r} needs at least one variant and one seed")
        self._check_tuned()
        self._check_plateau()
        for e in self.expectations:
            for v in e.variants():
                if v not in self.variants and v not in self.tuned:
                    raise ConfigError(f"expectation names variant {v!r}; variants: "
                                      f"{', '.join([*self.variants, *self.tuned])}")
        if not isinstance(self.suite, str) or not self.suite:
            raise ConfigError(f"study {self.name!r}: suite={self.suite!r} must be a non-empty "
                              "string, e.g. 'main' or 'lm'")
        if not all(callable(f) for f in self.analyses):
            raise ConfigError(f"study {self.name!r}: analyses must be functions (root, runs) -> "
                              "markdown")

    def _check_tuned(self) -> None:
        for arm, candidates in self.tuned.items():
            if arm in self.variants:
                raise ConfigError(f"study {self.name!r}: tuned arm {arm!r} is also a variant: "
                                  "name the arm apart from its candidates")
            unknown = [c for c in candidates if c not in self.variants]
            if unknown or len(candidates) < 2:
                raise ConfigError(f"study {self.name!r}: tuned arm {arm!r} needs two or more "
                                  f"candidates among the variants; not variants: "
                                  f"{', '.join(unknown) or 'none'} ({len(candidates)} given)")

    def _check_plateau(self) -> None:
        """A plateau study starts at plateau.first steps, at a constant LR after the warm-up
        (an extended run must be the run trained straight), and no variant changes either."""
        p = self.plateau
        if p is None:
            return
        train = self.base.train
        if train.num_steps != p.first or train.get("schedule") != plateau_lib.SCHEDULE:
            raise ConfigError(
                f"study {self.name!r}: a plateau budget needs train.num_steps=plateau.first "
                f"({p.first}) and train.schedule={plateau_lib.SCHEDULE!r}; the base has "
                f"{train.num_steps} and {train.get('schedule')!r}")
        fixed = [f"{v}: {k}" for v, o in self.variants.items() for k in o
                 if k in ("train.num_steps", "train.schedule")]
        if fixed:
            raise ConfigError(f"study {self.name!r}: the plateau budget sets every run's "
                              f"steps and schedule; variants override them: {', '.join(fixed)}")
        if not plateau_lib.judged_arms(self.expectations, p.metric):
            raise ConfigError(f"study {self.name!r}: plateau metric {p.metric!r} is judged by "
                              "no expectation")

    def refuse_unjudgeable(self) -> "Study":
        """ConfigError naming the first expectation that holds or fails by construction (a
        failure rate the seed count cannot show; a diverged run counted below chance:
        judge/unjudgeable.py), else self. load_study calls it; reading an old design's
        fingerprint from history does not."""
        problem = unjudgeable.refusal(self, chance_accuracy)
        if problem:
            raise ConfigError(f"study {self.name!r}: {problem}")
        return self

    def config(self, variant: str, seed: int,
               steps: Optional[int] = None) -> ml_collections.ConfigDict:
        """The base config with the variant's overrides and the seed applied; `steps`: at
        that train.num_steps (a plateau budget's stage), not the base's."""
        if variant not in self.variants:
            raise ConfigError(f"variant {variant!r} is not one of: {', '.join(self.variants)}")
        config = self.base.copy_and_resolve_references()
        config.unlock()
        budget = {} if steps is None else {"train.num_steps": steps}
        for key, value in {**self.variants[variant], **budget, "seed": seed}.items():
            _set(config, key, value)
        config.lock()
        return config

    def runs(self) -> list[tuple[str, int]]:
        return [(v, s) for v in self.variants for s in self.seeds]

    def design(self) -> dict[str, Any]:
        """What the study commits to before it runs, as plain values: the claim, the variants,
        the seeds, the metrics, every expectation and threshold, and the base config (without
        the machine's paths: data.data_dir, data.text_path; nor the config fields added since
        fingerprints existed, at the value older designs had: config.ADDED_FIELDS), and what
        the analyses judge (their checks' thresholds and tests: judged_code.describe)."""
        design = {"claim": self.claim, "metrics": list(self.metrics),
                  "expectations": [_expectation_design(e) for e in self.expectations],
                  **self.training_design()}
        if self.tuned:  # which runs an arm's verdicts may choose from
            design["tuned"] = {arm: list(c) for arm, c in self.tuned.items()}
        if self.analyses:  # their checks' thresholds and tests are part of the judgement
            design["analyses"] = judged_code.describe(list(self.analyses))
        return design

    def training_design(self) -> dict[str, Any]:
        """What was trained: the variants, the seeds and the base config (design() without the
        claim, metrics, expectations and analyses: what the runs themselves depend on)."""
        base = self.base.to_dict()
        base["data"] = {k: v for k, v in base["data"].items() if k not in MACHINE_FIELDS}
        for dotted, default in ADDED_FIELDS.items():
            if dotted in IN_EVERY_FINGERPRINT:
                continue
            section, leaf = dotted.split(".")
            fields = base.get(section, {})
            if leaf in fields and type(fields[leaf]) is type(default) and fields[leaf] == default:
                del fields[leaf]
        design = {"variants": {v: dict(o) for v, o in self.variants.items()},
                  "seeds": list(self.seeds), "base": base}
        if self.plateau is not None:  # how long the runs train: part of what they are
            design["plateau"] = self.plateau.design()
        if self.extend_grid is not None:  # which candidates train: likewise
            design["extend_grid"] = self.extend_grid.design()
        return design

    def fingerprint(self, measured: Optional[str] = None) -> str:
        """sha256 of `design()` (canonical JSON) and of the code that computes what it judges
        (`measured`: that code's digest in another source tree, measured_code.digest; else
        today's files'): a results page carries the fingerprint it was judged with, and
        tests/studies/test_preregistration.py fails when the experiment file's fingerprint has
        moved since, so a changed expectation, or a changed analysis, data generator or
        evaluation, forces a new judgement."""
        if measured is None:
            measured = measured_code.digest(self.measured_code(), measured_code.read_disk)
        return design_fingerprint(self.design(), measured)

    def measured_code(self) -> tuple[tuple[str, str], ...]:
        """The (file, name) pairs of the code that computes what the study judges."""
        return self.measured_refs if self.measured_refs is not None else measured_code.refs(self)

    def training_fingerprint(self) -> str:
        """sha256 of `training_design()`: runs trained under one training fingerprint can be
        judged again under another design's expectations (an amendment) without re-training."""
        return _sha(self.training_design())

    def probe_markdown(self, root: Path) -> str:
        """The step-0 probes' markdown (their plots go into `root`), computed once and kept in
        root/PROBES_FILE: a sweep's worker runs them beside the training, the report reads them."""
        if not self.probes:
            return ""
        path = Path(root) / PROBES_FILE
        if not path.exists():
            path.write_text(self.probes(Path(root)))
        return path.read_text()


def study_schedule(config: ml_collections.ConfigDict, steps: int, **train: Any) -> None:
    """The schedule every study uses: `steps` steps, 10 % warm-up, 10 evaluations (on
    `train.eval_batches` batches; the last on the whole eval split), about 50 logged train
    points, one checkpoint at the end; `train` overrides any train.* field."""
    config.train.update(num_steps=steps, warmup_steps=steps // 10, eval_every=max(steps // 10, 1),
                        log_every=max(steps // 50, 1), checkpoint_every=steps)
    config.train.update(**train)


def design_fingerprint(design: dict[str, Any], measured: str) -> str:
    """The fingerprint of a design (Study.design) whose measured code has digest `measured`."""
    return _sha({**design, "measured_code": measured})


def _sha(design: dict[str, Any]) -> str:
    text = json.dumps(design, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _set(config: ml_collections.ConfigDict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = config
    for p in parents:
        node = node[p]
    if leaf not in node:
        raise ConfigError(f"override {dotted!r} names no config field")
    node[leaf] = value


def expectation_key(expectation: Expectation) -> str:
    """An expectation's design as one string (what it states, not its kind): the same
    expectation in two versions of a study has the same key."""
    return json.dumps(_expectation_design(expectation), sort_keys=True, default=str)


def _expectation_design(expectation: Expectation) -> dict[str, Any]:
    """An expectation as plain values, without NEWER_EXPECTATION_FIELDS at their default: a
    design that does not use one keeps its fingerprint."""
    design = _plain(dataclasses.asdict(expectation))
    return {k: v for k, v in design.items() if k not in DISCLOSURE_FIELDS
            and not (k in NEWER_EXPECTATION_FIELDS and v == NEWER_EXPECTATION_FIELDS[k])}


def _plain(value: Any) -> Any:
    """Enums as their values, recursively (an expectation's comparison)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value

"""What an ablation study is: a claim, variants of one base config, seeds, and the measurable
outcome that would support the claim. Experiment files (`experiments/*.py`) define
`get_study(size) -> Study`; `transformer_jax.sweep` runs one and writes its verdict.

The statistics that judge an expectation are `transformer_jax.studies.stats`; loading experiment
and config files is `transformer_jax.studies.design.loading`. Both are re-exported here:
experiment files import everything they use from this module.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import ml_collections
import numpy as np

from transformer_jax.config import ADDED_FIELDS, IN_EVERY_FINGERPRINT, ConfigError
from transformer_jax.studies import plateau as plateau_lib
from transformer_jax.studies.design import judged_code, measured_code
from transformer_jax.studies.design.loading import STUDY_SIZES, load_config, load_module, load_study
from transformer_jax.studies.plateau import Plateau
from transformer_jax.studies.stats import (CONFIDENCE, INTERVAL_METHOD, MAX_SEEDS, Failure,
                                           Verdict, decide, difference_interval, how_it_failed,
                                           interval_of_mean, mean_interval,
                                           mean_over_seeds, rate_interval, relative_gap,
                                           relative_gap_interval, seeds_to_settle,
                                           seeds_to_bound, seeds_to_settle_rate, settle_note,
                                           smaller_note, unbounded_note)

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


class Comparison(enum.Enum):
    BETTER = "better"  # mean of `a` beats mean of `b` by at least `margin`
    WITHIN = "within"  # |mean a − mean b| <= margin · |mean b|  (relative)
    AT_MOST = "at_most"  # mean of `a` <= margin (absolute), e.g. accuracy stuck at chance
    AT_LEAST = "at_least"  # mean of `a` >= margin (absolute), e.g. a gradient ratio kept up
    # `a` beats `b` by at least a factor `margin` (> 1): judged on the log scale, where a
    # heavy-tailed positive quantity (a max logit, a gradient norm) is near normal: the mean
    # over seeds of log(a/b) (per seed if paired), its t interval, back-transformed for the page
    # (the geometric mean ratio). Lower is better: the factor is b/a.
    RATIO = "ratio"
    # All-or-nothing outcomes, judged as a rate, not a mean: a run of `a` fails when it diverged
    # or its final value is on the wrong side of `threshold` (below it if higher_is_better, above
    # it if not); `margin` bounds the fraction of `a`'s runs that fail.
    FAIL_RATE_AT_LEAST = "fail_rate_at_least"  # e.g. Post-LN without warm-up fails on some seeds
    FAIL_RATE_AT_MOST = "fail_rate_at_most"  # e.g. Pre-LN fails on at most a few
    # `a`'s gain over `b` beats `c`'s gain over `d` by at least `margin`: per seed (the four
    # variants paired by seed), (a − b) − (c − d), signed so that > 0 is better; e.g. the price
    # of leaving ÷√d_k out grows with d_k (a, b: unscaled, scaled at the wide head; c, d: at the
    # narrow one, lower is better). An interaction, which two differences judged apart cannot
    # state.
    DIFFERENCE_OF_DIFFERENCES = "difference_of_differences"


RATES = (Comparison.FAIL_RATE_AT_LEAST, Comparison.FAIL_RATE_AT_MOST)
# What an expectation measures on a variant, where one whose every run diverged measured none
# of it (Expectation._refused): a final value that `worst` stands in for is no gain or gap.
REFUSED_ON_LOST = {Comparison.BETTER: "a gain", Comparison.WITHIN: "a gap",
                   Comparison.DIFFERENCE_OF_DIFFERENCES: "a gain"}
# Each comparison's effect when nothing differs ("no effect"; None: it has no such value), from
# which a verdict that does not hold is told contradicted or smaller than stated
# (stats.how_it_failed). A new comparison declares its own here (tests/studies/test_failure.py).
NO_EFFECT: dict[Comparison, Optional[float]] = {
    Comparison.BETTER: 0.0,  # no gain
    Comparison.WITHIN: 0.0,  # no gap
    Comparison.AT_MOST: None,  # one variant's mean against a bound: no "no effect" to compare
    Comparison.AT_LEAST: None,
    Comparison.RATIO: 1.0,  # a factor of 1 (the judgement's interval is back-transformed)
    Comparison.FAIL_RATE_AT_LEAST: 0.0,  # no run fails
    Comparison.FAIL_RATE_AT_MOST: 0.0,
    Comparison.DIFFERENCE_OF_DIFFERENCES: 0.0,  # the two gains are equal
}
PAIRS = (Comparison.BETTER, Comparison.WITHIN, Comparison.RATIO)  # of two variants, a and b


class Measure(enum.Enum):
    """What of each run's curve an expectation judges."""

    FINAL = "final"  # the metric's final value (or its value at `at_step`)
    # How much the metric still improved over the run's last fifth of steps (convergence.
    # window_change, signed so that > 0 is better): a "trains at all" verdict asks that its
    # baseline has flattened, e.g. AT_MOST 0.02 on the baseline's late gain.
    LATE_GAIN = "late_gain"


class Kind(enum.Enum):
    """What an expectation is evidence of (docs/verdicts.md, "Kinds of expectation"). Declaring
    a kind is disclosure, not a design move: it is outside the fingerprint. A finding may be
    declared a check or post hoc after its results (an amendment names the commit, `why` says
    why); nothing becomes a finding after its results (preregistration.kind_problems)."""

    FINDING = "finding"  # could have come out either way, given what was known when written
    # holds by construction or arithmetic, or was known before the run: it shows that the
    # instrument works; counted apart, and one that does not hold is an alarm
    CHECK = "check"
    POST_HOC = "post_hoc"  # its threshold or comparison was set after its values were seen


KIND_WORDS = {Kind.FINDING: "finding", Kind.CHECK: "check", Kind.POST_HOC: "post hoc"}
PROBES_FILE = "probes.md"  # a study's step-0 probes, as markdown (its plots beside it)
MACHINE_FIELDS = ("data_dir", "text_path")  # where this machine keeps data: not the design
# Expectation fields added after fingerprints existed, with their default, left out the same way.
NEWER_EXPECTATION_FIELDS = {"at_step": None, "measure": Measure.FINAL.value, "c": None,
                            "d": None}
DISCLOSURE_FIELDS = ("kind", "why")  # what an expectation is evidence of: not its design


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What one expectation measured: the numbers behind its verdict."""

    verdict: Verdict
    values: Mapping[str, Mapping[int, float]]  # variant -> seed -> final value as counted
    diverged: Mapping[str, tuple[int, ...]]  # variant -> seeds that diverged
    fill: Mapping[str, float]  # variant -> what its diverged runs counted as (rates: none)
    effect: float  # a − b (gain, sign so that > 0 is better), relative gap, mean(a), fail rate
    low: float  # 95 % interval of `effect`; ±inf when it cannot be measured (one seed)
    high: float
    paired: bool
    note: str = ""  # why inconclusive, and how many seeds would settle it; how it failed
    failure: Optional[Failure] = None  # a verdict that does not hold: contradicted or smaller

    @property
    def holds(self) -> bool:
        return self.verdict is Verdict.HOLDS


# A variant with runs that diverged (or gave no value) is judged, with those runs filled, only
# where at least this many of its runs have a value (judging rules 6).
MIN_MEASURED = 2


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
        """The region of `effect` that supports the expectation."""
        if self.comparison in (Comparison.BETTER, Comparison.FAIL_RATE_AT_LEAST,
                               Comparison.AT_LEAST, Comparison.RATIO,
                               Comparison.DIFFERENCE_OF_DIFFERENCES):
            return self.margin, math.inf
        if self.comparison is Comparison.WITHIN:
            return -self.margin, self.margin
        return -math.inf, self.margin

    def judge(self, final: Mapping[str, Mapping[int, float]],
              confidence: float = CONFIDENCE,
              stopped: Optional[Mapping[str, Mapping[int, int]]] = None) -> Judgement:
        """final: variant -> seed -> the metric's final value (nan for a diverged run). Give
        every variant of the study: diverged runs count as the study's finished values.
        `confidence`: of the intervals (another than CONFIDENCE: multiplicity.p_value).
        `stopped`: variant -> seed -> the step at which each diverged run stopped (None: not
        known), which tells a variant that was never finite (`_refused`)."""
        refused = self._refused(final, stopped)
        return refused if refused is not None else self._classified(self._judged(final, confidence))

    def _refused(self, final: Mapping[str, Mapping[int, float]],
                 stopped: Optional[Mapping[str, Mapping[int, int]]]) -> Optional[Judgement]:
        """What cannot be judged, whatever `worst` says (None: it can be), inconclusive with why:
        a late gain ("flattened"), a gain or a gap on a variant whose every run diverged (its
        runs measured no such thing: a `worst` would decide it alone); and a comparison of two
        variants one of which was never finite (every run stopped at step 1 or before), unless
        the expectation is declared a check of exactly that."""
        if self.comparison in RATES:
            return None
        lost = [v for v in self.variants() if final.get(v)
                and not any(math.isfinite(x) for x in final[v].values())]
        what = ("a late gain" if self.measure is Measure.LATE_GAIN else
                REFUSED_ON_LOST.get(self.comparison))
        if lost and what:
            note = f"refused: every run of {' and '.join(lost)} diverged, so {what} on it " \
                   "measures nothing"
        else:
            never = [v for v in lost if stopped is not None and self.b is not None
                     and all(stopped.get(v, {}).get(s, math.inf) <= 1 for s in final[v])]
            if not never or self.kind is Kind.CHECK:
                return None
            note = (f"refused: every run of {' and '.join(never)} was non-finite from step 1, so "
                    "nothing was measured on that side (a check of that is declared one)")
        diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                    for v in self.variants()}
        return Judgement(Verdict.INCONCLUSIVE, values={v: dict(final[v]) for v in self.variants()},
                         diverged=diverged, fill={}, effect=math.nan, low=-math.inf,
                         high=math.inf, paired=False, note=note)

    def _classified(self, j: Judgement) -> Judgement:
        """A verdict that does not hold, with how it failed (the note says which kind of
        smaller than stated)."""
        no_effect = NO_EFFECT[self.comparison]
        failure = how_it_failed(j.low, j.high, self.accepted(), no_effect)
        if j.verdict is not Verdict.FAILS or failure is None:
            return j
        note = smaller_note(j.low, no_effect) if failure is Failure.SMALLER else j.note
        return dataclasses.replace(j, failure=failure, note=note)

    def _judged(self, final: Mapping[str, Mapping[int, float]],
                confidence: float) -> Judgement:
        diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                    for v in self.variants()}
        empty = [v for v in self.variants() if not final[v]]
        if empty:
            values = {v: dict(final[v]) for v in self.variants()}
            return Judgement(Verdict.INCONCLUSIVE, values=values, diverged=diverged, fill={},
                             effect=math.nan, low=-math.inf, high=math.inf, paired=False,
                             note=f"no runs of {' and '.join(empty)}")
        if self.comparison in RATES:
            return self._judge_rate(final[self.a], diverged, confidence)
        cases = [self._judge_filled(final, diverged, fill, confidence)
                 for fill in self._fills(final, diverged)]
        shown = min(cases, key=self._support)  # the case least favourable to the expectation
        # The fill stands for the runs without a value only beside two or more with one: with
        # none there is nothing to fill from, and beside a single one the fill copies it and the
        # interval has no spread to show (rules 6; since 7 one rule for both)
        few = [v for v in self.variants()
               if diverged[v] and len(final[v]) - len(diverged[v]) < MIN_MEASURED]
        if few and self.worst is None:
            counts = ", ".join(f"{len(final[v]) - len(diverged[v])} of {len(final[v])} runs of {v}"
                               for v in few)
            return dataclasses.replace(shown, verdict=Verdict.INCONCLUSIVE, note=(
                f"fewer than {MIN_MEASURED} runs with a value ({counts}; the others diverged or "
                "gave none), so what the others count as would decide it: set "
                "Expectation.worst, the value a run without one counts as"))
        if len({j.verdict for j in cases}) > 1:
            ends = sorted({x for j in cases for x in j.fill.values()})
            return dataclasses.replace(shown, verdict=Verdict.INCONCLUSIVE, note=(
                f"the diverged runs decide it (counted as {' or '.join(f'{x:.4g}' for x in ends)}: "
                f"{' or '.join(sorted({j.verdict.value for j in cases}))}): set Expectation.worst"))
        return shown

    def _fills(self, final, diverged) -> list[dict[str, float]]:
        """What diverged runs may count as: `worst` if set; else the study's lowest or highest
        finished value, each combination over the variants with diverged runs."""
        hit = [v for v in self.variants() if diverged[v]]
        if self.worst is not None:
            return [{v: self.worst for v in hit}]
        finite = [x for per_seed in final.values() for x in per_seed.values() if math.isfinite(x)]
        ends = (min(finite), max(finite)) if finite else (math.nan,)
        return [dict(zip(hit, ends_)) for ends_ in itertools.product(ends, repeat=len(hit))]

    def _support(self, j: Judgement) -> float:
        """How far the interval sits inside the accepted region (< 0: it pokes out)."""
        lo, hi = self.accepted()
        return min(j.low - lo, hi - j.high) if math.isfinite(j.high - j.low) else -math.inf

    def _judge_filled(self, final, diverged, fill: Mapping[str, float],
                      confidence: float) -> Judgement:
        names = self.variants()
        values = {v: {s: fill[v] if s in diverged[v] else final[v][s] for s in sorted(final[v])}
                  for v in names}
        paired = len(names) >= 2 and all(list(values[v]) == list(values[names[0]])
                                         for v in names[1:])
        samples = [np.array(list(values[v].values())) for v in names]  # each (seeds,), by seed
        base = dict(values=values, diverged=diverged, fill=fill, paired=paired)
        if any(np.isnan(x).any() for x in samples):
            return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                             note="every run diverged: set Expectation.worst", **base)
        if len(names) == 4 and not paired:
            return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                             note="a difference of differences pairs its four variants by seed: "
                                  "they must have the same seeds", **base)
        if self.comparison is Comparison.RATIO and any((x <= 0).any() for x in samples):
            return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                             note="a ratio needs positive values: a value is ≤ 0", **base)
        effect, low, high = (float(x) for x in self._interval(samples, paired, confidence))
        verdict = decide(low, high, self.accepted())
        note = (self._why_inconclusive(samples, effect, low, high)
                if verdict is Verdict.INCONCLUSIVE else "")
        return Judgement(verdict, effect=effect, low=low, high=high, note=note, **base)

    def _why_inconclusive(self, samples: list[np.ndarray], effect: float, low: float,
                          high: float) -> str:
        """How many seeds would settle it; for an unbounded relative gap (the mean it is
        relative to not yet told apart from 0), how many would bound it."""
        n = min(map(len, samples))
        if n >= 2 and not math.isfinite(high - low):
            return unbounded_note(n, seeds_to_bound(samples[-1]), self.variants()[-1])
        accepted = self.accepted()
        if self.comparison is Comparison.RATIO:  # the interval is symmetric on the log scale
            effect, low, high = (math.log(x) for x in (effect, low, high))
            accepted = (math.log(accepted[0]), accepted[1])
        return settle_note(n, seeds_to_settle(n, effect, low, high, accepted))

    def _interval(self, samples: list[np.ndarray], paired: bool, confidence: float):
        """(effect, low, high) of the comparison's statistic."""
        if self.comparison in (Comparison.AT_MOST, Comparison.AT_LEAST):
            return (mean_over_seeds(samples[0]), *mean_interval(samples[0], confidence))
        sign = 1.0 if self.higher_is_better else -1.0  # gain: > 0 means `a` is better
        if self.comparison is Comparison.DIFFERENCE_OF_DIFFERENCES:
            a, b, c, d = samples
            per_seed = sign * ((a - b) - (c - d))  # (seeds,), paired (_judge_filled)
            return (mean_over_seeds(per_seed), *mean_interval(per_seed, confidence))
        a, b = samples
        if self.comparison is Comparison.RATIO:
            log_a, log_b = (np.log(x) if self.higher_is_better else -np.log(x) for x in (a, b))
            # of mean log a − mean log b
            low, high = difference_interval(log_a, log_b, paired, confidence)
            return tuple(np.exp(x) for x in (np.mean(log_a) - np.mean(log_b), low, high))
        if self.comparison is Comparison.WITHIN:
            return (relative_gap(a, b), *relative_gap_interval(a, b, paired, confidence))
        low, high = difference_interval(a, b, paired, confidence)  # of mean a − mean b
        gain = sign * (mean_over_seeds(a) - mean_over_seeds(b))
        return (gain, low, high) if sign > 0 else (gain, -high, -low)

    def _judge_rate(self, runs: Mapping[int, float], diverged, confidence: float) -> Judgement:
        """The fraction of `a`'s runs that fail, with its Clopper–Pearson interval."""
        values = {s: runs[s] for s in sorted(runs)}
        passes = (lambda x: x >= self.threshold) if self.higher_is_better else \
            (lambda x: x <= self.threshold)
        k, n = sum(not (math.isfinite(x) and passes(x)) for x in values.values()), len(values)
        low, high = rate_interval(k, n, confidence)
        verdict = decide(low, high, self.accepted())
        note = settle_note(n, seeds_to_settle_rate(k, n, self.accepted()), "this rate") \
            if verdict is Verdict.INCONCLUSIVE else ""
        return Judgement(verdict, values={self.a: values}, diverged=diverged, fill={},
                         effect=k / n, low=low, high=high, paired=False, note=note)


def chance_accuracy(config: ml_collections.ConfigDict) -> Optional[float]:
    """eval/accuracy of a uniform guess on the config's task (None: not known without the
    data): what a diverged run counts as, at most, when divergence is the expected failure."""
    from transformer_jax import data  # here: the data layer imports TFDS (seconds)
    return data.chance_accuracy(config.data)


def _rate_beyond_seeds(e: Expectation, n: int) -> Optional[str]:
    """Why a failure-rate expectation cannot hold at `n` seeds (None: it can). With k of n runs
    failing the Clopper–Pearson interval never reaches 0 or 1 unless k does, so "at most 0 %"
    cannot hold at any n, "at most 10 %" not below 36 seeds, "at least 50 %" not below 6."""
    if e.comparison not in RATES:
        return None
    at_most = e.comparison is Comparison.FAIL_RATE_AT_MOST

    def can_hold(m: int) -> bool:  # with every run alike, the best case for the expectation
        return rate_interval(0, m)[1] <= e.margin if at_most else rate_interval(m, m)[0] >= e.margin

    if can_hold(n):
        return None
    best = rate_interval(0, n)[1] if at_most else rate_interval(n, n)[0]
    needed = next((m for m in range(n + 1, MAX_SEEDS + 1) if can_hold(m)), None)
    return (f"a failure rate {'≤' if at_most else '≥'} {e.margin:.0%} cannot hold at {n} seeds "
            f"(with {'no' if at_most else 'every'} run failing, its 95 % interval still "
            f"{'reaches' if at_most else 'starts at'} {best:.0%}): " +
            (f"it needs {needed} seeds" if needed else
             f"no number of seeds up to {MAX_SEEDS} can show it"))


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
            raise ConfigError(f"study {self.name!r}: analyses must be functions (root, runs) -> markdown")

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
        failure rate the seed count cannot show; a diverged run counted below chance), else
        self. load_study calls it; reading an old design's fingerprint from history does not."""
        for e in self.expectations:
            problem = _rate_beyond_seeds(e, len(self.seeds)) or self._worst_below_chance(e)
            if problem:
                raise ConfigError(f"study {self.name!r}: expectation {e.text!r}: {problem}")
        return self

    def _worst_below_chance(self, e: Expectation) -> Optional[str]:
        """Why `e` counts a diverged run below chance accuracy (None: it does not). A failed run
        counted below chance would let an arm at chance "beat" it."""
        if e.worst is None or not e.metric.startswith("eval/accuracy") or not e.higher_is_better:
            return None
        # a tuned arm is no variant: its candidates are what trained
        trained = [c for v in e.variants() for c in self.tuned.get(v, (v,))]
        chances = [chance_accuracy(self.config(v, self.seeds[0])) for v in trained]
        chance = min((c for c in chances if c is not None), default=None)
        if chance is None or e.worst >= chance - 1e-12:
            return None
        return (f"worst={e.worst:g} counts a diverged run below chance accuracy ({chance:.4g}, a "
                f"uniform guess on its task): count it as chance at most")

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

"""What an ablation study is: a claim, variants of one base config, seeds, and the measurable
outcome that would support the claim. Experiment files (`experiments/*.py`) define
`get_study(size) -> Study`; `transformer_jax.sweep` runs one and writes its verdict.

A verdict is settled only by a 95 % interval that covers 95 % of the time at 3 seeds (for
normal or mildly skewed per-seed values): Student-t intervals. A percentile bootstrap over 3
seeds never leaves their range and covered the mean 74 % of the time;
tests/test_interval_coverage.py measures both.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib.util
import itertools
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import ml_collections
import numpy as np

from transformer_jax.config import ConfigError

SIZES = ("default", "large", "tiny")  # default fits a 2-core CPU; large is for a GPU/TPU


class Comparison(enum.Enum):
    BETTER = "better"  # mean of `a` beats mean of `b` by at least `margin`
    WITHIN = "within"  # |mean a − mean b| <= margin · |mean b|  (relative)
    AT_MOST = "at_most"  # mean of `a` <= margin (absolute), e.g. accuracy stuck at chance
    # All-or-nothing outcomes, judged as a rate, not a mean: a run of `a` fails when it diverged
    # or its final value is on the wrong side of `threshold` (below it if higher_is_better, above
    # it if not); `margin` bounds the fraction of `a`'s runs that fail.
    FAIL_RATE_AT_LEAST = "fail_rate_at_least"  # e.g. Post-LN without warm-up fails on some seeds
    FAIL_RATE_AT_MOST = "fail_rate_at_most"  # e.g. Pre-LN fails on at most a few


RATES = (Comparison.FAIL_RATE_AT_LEAST, Comparison.FAIL_RATE_AT_MOST)


class Verdict(enum.Enum):
    HOLDS = "holds"  # the whole 95 % interval is on the expected side of the threshold
    FAILS = "does not hold"  # the whole interval is on the other side
    INCONCLUSIVE = "inconclusive"  # the interval straddles the threshold: more seeds needed


CONFIDENCE = 0.95
MAX_SEEDS = 100  # beyond this, "more seeds" is not a practical answer
INTERVAL_METHOD = (f"{CONFIDENCE * 100:.0f} % Student-t interval over seeds (paired by seed: of "
                   "the per-seed differences, n − 1 dof; unpaired: Welch; a relative gap: "
                   "Fieller's interval of the ratio of means; a failure rate: Clopper–Pearson "
                   "exact binomial)")


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
    note: str = ""  # why inconclusive, and how many seeds would settle it

    @property
    def holds(self) -> bool:
        return self.verdict is Verdict.HOLDS


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

    def __post_init__(self):
        two = self.comparison in (Comparison.BETTER, Comparison.WITHIN)
        if two != (self.b is not None):
            raise ConfigError(f"expectation {self.text!r}: comparison {self.comparison.value} "
                              f"{'needs' if two else 'takes no'} b= (the other variant)")
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
        if rate and not 0.0 <= self.margin <= 1.0:
            raise ConfigError(f"expectation {self.text!r}: margin={self.margin} is a fraction of "
                              "runs, between 0 and 1")

    def variants(self) -> list[str]:
        return [self.a, self.b] if self.b is not None else [self.a]

    def accepted(self) -> tuple[float, float]:
        """The region of `effect` that supports the expectation."""
        if self.comparison in (Comparison.BETTER, Comparison.FAIL_RATE_AT_LEAST):
            return self.margin, math.inf
        if self.comparison is Comparison.WITHIN:
            return -self.margin, self.margin
        return -math.inf, self.margin

    def judge(self, final: Mapping[str, Mapping[int, float]]) -> Judgement:
        """final: variant -> seed -> the metric's final value (nan for a diverged run). Give
        every variant of the study: diverged runs count as the study's finished values."""
        diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                    for v in self.variants()}
        if self.comparison in RATES:
            return self._judge_rate(final[self.a], diverged)
        cases = [self._judge_filled(final, diverged, fill) for fill in self._fills(final, diverged)]
        shown = min(cases, key=self._support)  # the case least favourable to the expectation
        lost = [v for v in self.variants() if len(diverged[v]) == len(final[v])]
        if lost and self.worst is None:
            return dataclasses.replace(shown, verdict=Verdict.INCONCLUSIVE, note=(
                f"every run of {' and '.join(lost)} diverged: set Expectation.worst, the value "
                "a diverged run counts as"))
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

    def _judge_filled(self, final, diverged, fill: Mapping[str, float]) -> Judgement:
        names = self.variants()
        values = {v: {s: fill[v] if s in diverged[v] else final[v][s] for s in sorted(final[v])}
                  for v in names}
        paired = len(names) == 2 and list(values[names[0]]) == list(values[names[1]])
        samples = [np.array(list(values[v].values())) for v in names]  # each (seeds,), by seed
        base = dict(values=values, diverged=diverged, fill=fill, paired=paired)
        if any(np.isnan(x).any() for x in samples):
            return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                             note="every run diverged: set Expectation.worst", **base)
        effect, low, high = (float(x) for x in self._interval(samples, paired))
        verdict = decide(low, high, self.accepted())
        n = min(map(len, samples))
        note = settle_note(n, seeds_to_settle(n, effect, low, high, self.accepted())) \
            if verdict is Verdict.INCONCLUSIVE else ""
        return Judgement(verdict, effect=effect, low=low, high=high, note=note, **base)

    def _interval(self, samples: list[np.ndarray], paired: bool):
        """(effect, low, high) of the comparison's statistic."""
        if self.comparison is Comparison.AT_MOST:
            return (mean_over_seeds(samples[0]), *mean_interval(samples[0]))
        a, b = samples
        if self.comparison is Comparison.WITHIN:
            return (relative_gap(a, b), *relative_gap_interval(a, b, paired))
        sign = 1.0 if self.higher_is_better else -1.0  # gain: > 0 means `a` is better
        low, high = difference_interval(a, b, paired)  # of mean a − mean b
        gain = sign * (mean_over_seeds(a) - mean_over_seeds(b))
        return (gain, low, high) if sign > 0 else (gain, -high, -low)

    def _judge_rate(self, runs: Mapping[int, float], diverged) -> Judgement:
        """The fraction of `a`'s runs that fail, with its Clopper–Pearson interval."""
        values = {s: runs[s] for s in sorted(runs)}
        passes = (lambda x: x >= self.threshold) if self.higher_is_better else \
            (lambda x: x <= self.threshold)
        k, n = sum(not (math.isfinite(x) and passes(x)) for x in values.values()), len(values)
        low, high = rate_interval(k, n)
        verdict = decide(low, high, self.accepted())
        note = settle_note(n, seeds_to_settle_rate(k, n, self.accepted()), "this rate") \
            if verdict is Verdict.INCONCLUSIVE else ""
        return Judgement(verdict, values={self.a: values}, diverged=diverged, fill={},
                         effect=k / n, low=low, high=high, paired=False, note=note)


def relative_gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(mean a − mean b) / |mean b| over the last axis (seeds)."""
    mean_a, mean_b = mean_over_seeds(a), mean_over_seeds(b)
    return (mean_a - mean_b) / np.maximum(np.abs(mean_b), 1e-12)


def mean_over_seeds(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """The statistic of a single variant: its mean over seeds."""
    return np.mean(values, axis)


def interval_of_mean(values: np.ndarray) -> tuple[float, float]:
    """The 95 % interval of the mean of per-seed values; (nan, nan) if one is not finite."""
    values = np.asarray(values, float)  # (seeds,)
    if not np.isfinite(values).all():
        return math.nan, math.nan
    return tuple(float(x) for x in mean_interval(values))


# The intervals below take per-seed values on the last axis, any leading axes (the coverage
# test judges thousands of simulated studies at once), and return (low, high) arrays. One
# seed has no spread to measure: the interval is unbounded.

def mean_interval(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval of the mean, n − 1 dof (= scipy.stats.ttest_1samp's)."""
    n = x.shape[-1]
    if n < 2:
        return _unbounded(x.shape[:-1])
    return _t_interval(np.mean(x, -1), np.std(x, -1, ddof=1) / math.sqrt(n), n - 1)


def difference_interval(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """Of mean a − mean b. Paired by seed (both variants saw the same seed and data order,
    so only their per-seed difference varies): the t interval of the differences. Unpaired:
    Welch's (= scipy.stats.ttest_ind(equal_var=False)'s)."""
    if paired:
        return mean_interval(a - b)
    (na, nb), (va, vb) = (a.shape[-1], b.shape[-1]), (_var_of_mean(a), _var_of_mean(b))
    if min(na, nb) < 2:
        return _unbounded(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    with np.errstate(invalid="ignore", divide="ignore"):  # zero spread: 0/0, handled below
        dof = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))  # Welch–Satterthwaite
    return _t_interval(np.mean(a, -1) - np.mean(b, -1), np.sqrt(va + vb), dof)


def relative_gap_interval(a: np.ndarray, b: np.ndarray,
                          paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """Of the relative gap (mean a − mean b)/|mean b| = ±(ρ − 1), ρ = mean a / mean b:
    Fieller's interval, the ρ at which a t-test does not reject mean a − ρ·mean b = 0 (paired:
    of a_i − ρ·b_i, n − 1 dof, exact for normal pairs; unpaired: min(n_a, n_b) − 1 dof,
    conservative). Unbounded when mean b is not clearly away from 0."""
    na, nb = a.shape[-1], b.shape[-1]
    if min(na, nb) < 2:
        return _unbounded(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    mean_a, mean_b = np.mean(a, -1), np.mean(b, -1)
    v_aa, v_bb = _var_of_mean(a), _var_of_mean(b)  # variances of the means
    if paired:
        v_ab = np.sum((a - mean_a[..., None]) * (b - mean_b[..., None]), -1) / (na - 1) / na
        dof = na - 1
    else:
        v_ab, dof = 0.0, min(na, nb) - 1
    q = _t_quantiles(dof) ** 2
    # ρ inside: (mean_a − ρ mean_b)² <= q (v_aa − 2ρ v_ab + ρ² v_bb), i.e. A ρ² − 2B ρ + C <= 0
    A, B, C = mean_b ** 2 - q * v_bb, mean_a * mean_b - q * v_ab, mean_a ** 2 - q * v_aa
    bounded = A > 0
    A = np.where(bounded, A, 1.0)
    root = np.sqrt(np.maximum(B ** 2 - A * C, 0.0))
    rho_low, rho_high = (B - root) / A, (B + root) / A
    positive = mean_b > 0
    low = np.where(positive, rho_low - 1, 1 - rho_high)
    high = np.where(positive, rho_high - 1, 1 - rho_low)
    flat = np.sqrt(v_aa + v_bb) <= 1e-9 * np.maximum(1.0, np.maximum(abs(mean_a), abs(mean_b)))
    gap = relative_gap(a, b)
    low, high = np.where(flat, gap, low), np.where(flat, gap, high)  # zero spread: the point
    return np.where(bounded | flat, low, -np.inf), np.where(bounded | flat, high, np.inf)


def rate_interval(k: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson (exact binomial) interval of a rate: k of n runs."""
    tail = (1 - CONFIDENCE) / 2  # the beta quantiles that binomtest's 'exact' CI finds by search
    low = 0.0 if k == 0 else _scipy_special().betaincinv(k, n - k + 1, tail)
    high = 1.0 if k == n else _scipy_special().betaincinv(k + 1, n - k, 1 - tail)
    return float(low), float(high)


def _var_of_mean(x: np.ndarray) -> np.ndarray:
    return np.var(x, -1, ddof=1) / x.shape[-1]


def _t_interval(center, se, dof) -> tuple[np.ndarray, np.ndarray]:
    """center ± t_{dof} · se; a spread lost in rounding (a constant per-seed difference) is
    zero, and the interval is the point."""
    flat = se <= 1e-9 * np.maximum(1.0, np.abs(center))
    half = np.where(flat, 0.0, _t_quantiles(np.where(flat, 1, dof)) * se)
    return center - half, center + half


def _unbounded(shape) -> tuple[np.ndarray, np.ndarray]:
    return np.full(shape, -np.inf), np.full(shape, np.inf)


def decide(low: float, high: float, accepted: tuple[float, float]) -> Verdict:
    """Holds if the interval lies inside the accepted region, fails if it misses it."""
    lo, hi = accepted
    if lo <= low and high <= hi:
        return Verdict.HOLDS
    if high < lo or low > hi:
        return Verdict.FAILS
    return Verdict.INCONCLUSIVE


def seeds_to_settle(n: int, effect: float, low: float, high: float,
                    accepted: tuple[float, float]) -> Optional[int]:
    """Seeds m after which the interval, at the measured per-seed spread, would no longer
    reach the nearest threshold: its half-width shrinks like t_{m−1}/√m (the t quantile falls
    too: 4.30 at 3 seeds, 2.78 at 5). For a Welch or Fieller interval this is an estimate.
    MAX_SEEDS + 1: more than MAX_SEEDS. None: not estimable (one seed, or the effect sits on
    the threshold)."""
    distance = min(abs(effect - t) for t in accepted if math.isfinite(t))
    if n < 2 or distance <= 1e-9 * max(1.0, abs(effect)) or not math.isfinite(high - low):
        return None
    spread = (high - low) / 2 * math.sqrt(n) / _t_quantile(n - 1)  # per-seed standard deviation
    return next((m for m in range(n + 1, MAX_SEEDS + 1)
                 if _t_quantile(m - 1) * spread / math.sqrt(m) <= distance * (1 + 1e-9)),
                MAX_SEEDS + 1)


def seeds_to_settle_rate(k: int, n: int, accepted: tuple[float, float]) -> Optional[int]:
    """Runs m after which k/n of them failing would give a Clopper–Pearson interval on one
    side of the threshold. None: the rate sits on the threshold."""
    if any(abs(k / n - t) <= 1e-9 for t in accepted):
        return None
    return next((m for m in range(n + 1, MAX_SEEDS + 1)
                 if decide(*rate_interval(round(k / n * m), m), accepted) is not Verdict.INCONCLUSIVE),
                MAX_SEEDS + 1)


def _t_quantile(dof: int) -> float:
    return float(_t_quantiles(dof))


def _t_quantiles(dof):
    """The two-sided CONFIDENCE quantile of Student's t at `dof` (an array or a number)."""
    return _scipy_special().stdtrit(dof, 0.5 + CONFIDENCE / 2)  # what scipy.stats.t.ppf calls


def _scipy_special():
    """scipy.special, imported on first use (≈ 0.2 s; scipy.stats, which only wraps these
    functions here, takes ≈ 1.1 s more to import in every process that writes a report)."""
    from scipy import special
    return special


def settle_note(n: int, needed: Optional[int], at: str = "this spread") -> str:
    """Why an inconclusive verdict is so, given seeds_to_settle's answer."""
    if needed is None and n < 2:
        return f"{n} seed: no spread to measure, run at least 3"
    if needed is None:
        return "the effect sits on the threshold: no number of seeds would settle it"
    if needed > MAX_SEEDS:
        return f"> {MAX_SEEDS} seeds needed at {at}: the effect is too close to the threshold"
    return f"≈ {needed} seeds would settle it at {at} (now {n})"


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
    # for verdict.md's '## Analysis' and may write plots into root.
    analyses: tuple[Callable[[Path, dict], str], ...] = ()

    def __post_init__(self):
        if not self.variants or not self.seeds:
            raise ConfigError(f"study {self.name!r} needs at least one variant and one seed")
        for e in self.expectations:
            for v in filter(None, (e.a, e.b)):
                if v not in self.variants:
                    raise ConfigError(f"expectation names variant {v!r}; variants: {', '.join(self.variants)}")
        if not isinstance(self.suite, str) or not self.suite:
            raise ConfigError(f"study {self.name!r}: suite={self.suite!r} must be a non-empty "
                              "string, e.g. 'main' or 'lm'")
        if not all(callable(f) for f in self.analyses):
            raise ConfigError(f"study {self.name!r}: analyses must be functions (root, runs) -> markdown")

    def config(self, variant: str, seed: int) -> ml_collections.ConfigDict:
        """The base config with the variant's overrides and the seed applied."""
        if variant not in self.variants:
            raise ConfigError(f"variant {variant!r} is not one of: {', '.join(self.variants)}")
        config = self.base.copy_and_resolve_references()
        config.unlock()
        for key, value in {**self.variants[variant], "seed": seed}.items():
            _set(config, key, value)
        config.lock()
        return config

    def runs(self) -> list[tuple[str, int]]:
        return [(v, s) for v in self.variants for s in self.seeds]


def study_schedule(config: ml_collections.ConfigDict, steps: int, **train: Any) -> None:
    """The schedule every study uses: `steps` steps, 10 % warm-up, 10 evaluations (on
    `train.eval_batches` batches; the last on the whole eval split), about 50 logged train
    points, one checkpoint at the end; `train` overrides any train.* field."""
    config.train.update(num_steps=steps, warmup_steps=steps // 10, eval_every=max(steps // 10, 1),
                        log_every=max(steps // 50, 1), checkpoint_every=steps)
    config.train.update(**train)


def _set(config: ml_collections.ConfigDict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = config
    for p in parents:
        node = node[p]
    if leaf not in node:
        raise ConfigError(f"override {dotted!r} names no config field")
    node[leaf] = value


def load_config(path: str | Path, arg: str = "") -> ml_collections.ConfigDict:
    """`get_config(arg)` of a config file, e.g. load_config(REPO / 'configs/synthetic.py', 'tiny')."""
    return load_module(path).get_config(arg)


def load_study(path: str | Path, size: str = "default") -> Study:
    if size not in SIZES:
        raise ConfigError(f"--size={size!r} is not one of: {', '.join(SIZES)}")
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--experiment={str(path)!r} is not a file; experiments: "
                          f"{', '.join(sorted(p.name for p in path.parent.glob('*.py'))) or 'none found'}")
    return load_module(path).get_study(size)


def load_module(path: str | Path):
    """A Python file as a module (experiment and config files are files, not a package)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_tj_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

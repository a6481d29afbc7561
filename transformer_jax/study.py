"""What an ablation study is: a claim, variants of one base config, seeds, and the measurable
outcome that would support the claim. Experiment files (`experiments/*.py`) define
`get_study(size) -> Study`; `transformer_jax.sweep` runs one and writes its verdict.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib.util
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import ml_collections
import numpy as np
import scipy.stats

from transformer_jax.config import ConfigError

SIZES = ("default", "large", "tiny")  # default fits a 2-core CPU; large is for a GPU/TPU


class Comparison(enum.Enum):
    BETTER = "better"  # `a` beats `b` by at least `margin`
    WITHIN = "within"  # |a - b| <= margin · |b|  (relative)
    AT_MOST = "at_most"  # `a` <= margin (absolute), e.g. accuracy stuck at chance


class Verdict(enum.Enum):
    HOLDS = "holds"  # the whole 95 % interval is on the expected side of the threshold
    FAILS = "does not hold"  # the whole interval is on the other side
    INCONCLUSIVE = "inconclusive"  # the interval straddles the threshold: more seeds needed


CONFIDENCE = 0.95
RESAMPLES = 9999
BOOTSTRAP_SEED = 0  # fixed, so that the same runs always give the same report
MAX_SEEDS = 100  # beyond this, "more seeds" is not a practical answer
INTERVAL_METHOD = (f"{CONFIDENCE * 100:.0f} % percentile bootstrap over seeds ({RESAMPLES} resamples, "
                   f"rng seed {BOOTSTRAP_SEED}; paired by seed when both variants share seeds)")


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What one expectation measured: the numbers behind its verdict."""

    verdict: Verdict
    values: Mapping[str, Mapping[int, float]]  # variant -> seed -> final value as counted
    diverged: Mapping[str, tuple[int, ...]]  # variant -> seeds that diverged (counted as `worst`)
    worst: float  # the value a diverged run counted as (nan: none diverged)
    effect: float  # a − b (gain, sign so that > 0 is better), relative gap, or mean(a)
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
    gets a 95 % bootstrap interval, and the verdict is settled only when the whole interval
    is on one side of the threshold `margin`."""

    text: str  # the expected outcome in words
    metric: str  # a TensorBoard tag, e.g. 'eval/accuracy'
    a: str  # variant
    comparison: Comparison
    margin: float
    b: Optional[str] = None  # the other variant (BETTER, WITHIN)
    higher_is_better: bool = True
    # The value a diverged run (final value nan) counts as. None: the worst finite value among
    # all runs judged together (every variant of the study), i.e. a diverged run is as bad
    # as the worst run that did finish; set it (e.g. chance accuracy) when that is too kind.
    worst: Optional[float] = None

    def accepted(self) -> tuple[float, float]:
        """The region of `effect` that supports the expectation."""
        if self.comparison is Comparison.BETTER:
            return self.margin, math.inf
        if self.comparison is Comparison.WITHIN:
            return -self.margin, self.margin
        return -math.inf, self.margin

    def judge(self, final: Mapping[str, Mapping[int, float]]) -> Judgement:
        """final: variant -> seed -> the metric's final value (nan for a diverged run). Give
        every variant of the study: the default `worst` is taken over all of them."""
        worst = self.worst if self.worst is not None else worst_finite(final, self.higher_is_better)
        names = [self.a] if self.comparison is Comparison.AT_MOST else [self.a, self.b]
        values = {v: {s: _count(final[v][s], worst) for s in sorted(final[v])} for v in names}
        diverged = {v: tuple(s for s in sorted(final[v]) if not math.isfinite(final[v][s]))
                    for v in names}
        paired = len(names) == 2 and list(values[names[0]]) == list(values[names[1]])
        samples = [np.array(list(values[v].values())) for v in names]  # each (seeds,), by seed
        base = dict(values=values, diverged=diverged, paired=paired,
                    worst=worst if any(diverged.values()) else math.nan)
        if any(np.isnan(x).any() for x in samples):
            return Judgement(Verdict.INCONCLUSIVE, effect=math.nan, low=-math.inf, high=math.inf,
                             note="every run diverged: set Expectation.worst", **base)
        statistic = self._statistic()
        effect = float(statistic(*samples))
        low, high = bootstrap_interval(statistic, samples, paired)
        verdict = decide(low, high, self.accepted())
        note = settle_note(min(map(len, samples)), effect, low, high, self.accepted()) \
            if verdict is Verdict.INCONCLUSIVE else ""
        return Judgement(verdict, effect=effect, low=low, high=high, note=note, **base)

    def _statistic(self) -> Callable[..., np.ndarray]:
        """The effect as a function of per-seed samples along `axis` (vectorized for scipy)."""
        if self.comparison is Comparison.AT_MOST:
            return mean_over_seeds
        if self.comparison is Comparison.WITHIN:
            return lambda a, b, axis=-1: ((np.mean(a, axis) - np.mean(b, axis))
                                          / np.maximum(np.abs(np.mean(b, axis)), 1e-12))
        sign = 1.0 if self.higher_is_better else -1.0  # gain: > 0 means `a` is better
        return lambda a, b, axis=-1: sign * (np.mean(a, axis) - np.mean(b, axis))


def worst_finite(final: Mapping[str, Mapping[int, float]], higher_is_better: bool) -> float:
    """The worst finite final value of any run; nan when none finished."""
    finite = [x for per_seed in final.values() for x in per_seed.values() if math.isfinite(x)]
    if not finite:
        return math.nan
    return min(finite) if higher_is_better else max(finite)


def _count(value: float, worst: float) -> float:
    return value if math.isfinite(value) else worst


def mean_over_seeds(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """The statistic of a single variant: its mean over seeds (vectorized for scipy)."""
    return np.mean(values, axis)


def interval_of_mean(values: np.ndarray) -> tuple[float, float]:
    """The 95 % interval of the mean of per-seed values; (nan, nan) if one is not finite."""
    values = np.asarray(values, float)  # (seeds,)
    if not np.isfinite(values).all():
        return math.nan, math.nan
    return bootstrap_interval(mean_over_seeds, [values], paired=False)


def bootstrap_interval(statistic: Callable[..., np.ndarray], samples: list[np.ndarray],
                       paired: bool) -> tuple[float, float]:
    """The 95 % interval of `statistic` over resampled seeds. Paired resamples whole seeds
    (both variants saw the same seed and data order, so their difference is what varies);
    percentile, not BCa, because BCa's jackknife is meaningless at 3 seeds and nan at zero
    spread. One seed has no spread to measure: the interval is unbounded."""
    if min(map(len, samples)) < 2:
        return -math.inf, math.inf
    result = scipy.stats.bootstrap(tuple(samples), statistic, paired=paired, vectorized=True,
                                   n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                                   method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
    point = float(statistic(*samples))
    if np.ptp(result.bootstrap_distribution) <= 1e-9 * max(1.0, abs(point)):
        return point, point  # zero spread (up to rounding): the interval is the point
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


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
    """Seeds after which the interval, shrinking like 1/√n at the measured spread, would no
    longer reach the nearest threshold: n·(half-width / distance)². None: not estimable (one
    seed, or the effect sits on the threshold)."""
    distance = min(abs(effect - t) for t in accepted if math.isfinite(t))
    if n < 2 or distance <= 1e-9 * max(1.0, abs(effect)) or not math.isfinite(high - low):
        return None
    return max(n + 1, math.ceil(round(n * ((high - low) / 2 / distance) ** 2, 9)))  # round: 4.0000001 is 4


def settle_note(n: int, effect: float, low: float, high: float,
                accepted: tuple[float, float]) -> str:
    if n < 2:
        return f"{n} seed: no spread to measure, run at least 3"
    needed = seeds_to_settle(n, effect, low, high, accepted)
    if needed is None:
        return "the effect sits on the threshold: no number of seeds would settle it"
    if needed > MAX_SEEDS:
        return f"> {MAX_SEEDS} seeds needed at this spread: the effect is too close to the threshold"
    return f"≈ {needed} seeds would settle it at this spread (now {n})"


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
    """The schedule every study uses: `steps` steps, 10 % warm-up, 6 evaluations, about 20
    log lines, one checkpoint at the end; `train` overrides any train.* field."""
    config.train.update(num_steps=steps, warmup_steps=steps // 10, eval_every=max(steps // 6, 1),
                        log_every=max(steps // 20, 1), checkpoint_every=steps)
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

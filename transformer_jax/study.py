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

from transformer_jax.config import ConfigError

SIZES = ("default", "large", "tiny")  # default fits a 2-core CPU; large is for a GPU/TPU


class Comparison(enum.Enum):
    BETTER = "better"  # `a` beats `b` by at least `margin`
    WITHIN = "within"  # |a - b| <= margin · |b|  (relative)
    AT_MOST = "at_most"  # `a` <= margin (absolute), e.g. accuracy stuck at chance


@dataclasses.dataclass(frozen=True)
class Expectation:
    """One measurable outcome, judged on the final value of `metric` (mean over seeds)."""

    text: str  # the expected outcome in words
    metric: str  # a TensorBoard tag, e.g. 'eval/accuracy'
    a: str  # variant
    comparison: Comparison
    margin: float
    b: Optional[str] = None  # the other variant (BETTER, WITHIN)
    higher_is_better: bool = True

    def judge(self, final: Mapping[str, list[float]]) -> tuple[bool, str]:
        """final: variant -> the metric's final value per seed (nan for a diverged run)."""
        worst = -math.inf if self.higher_is_better else math.inf
        mean = lambda v: float(np.mean([worst if not math.isfinite(x) else x for x in final[v]]))
        a = mean(self.a)
        if self.comparison is Comparison.AT_MOST:
            return a <= self.margin, f"{self.a}: {a:.4g} (limit {self.margin:.4g})"
        b = mean(self.b)
        if self.comparison is Comparison.WITHIN:
            gap = abs(a - b) / max(abs(b), 1e-12)
            return gap <= self.margin, f"{self.a}: {a:.4g} vs {self.b}: {b:.4g} (relative gap {gap:.1%}, limit {self.margin:.0%})"
        gain = (a - b) if self.higher_is_better else (b - a)
        return gain >= self.margin, f"{self.a}: {a:.4g} vs {self.b}: {b:.4g} (gain {gain:.4g}, needed {self.margin:.4g})"


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

    def __post_init__(self):
        if not self.variants or not self.seeds:
            raise ConfigError(f"study {self.name!r} needs at least one variant and one seed")
        for e in self.expectations:
            for v in filter(None, (e.a, e.b)):
                if v not in self.variants:
                    raise ConfigError(f"expectation names variant {v!r}; variants: {', '.join(self.variants)}")

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
    return _load_module(path).get_config(arg)


def load_study(path: str | Path, size: str = "default") -> Study:
    if size not in SIZES:
        raise ConfigError(f"--size={size!r} is not one of: {', '.join(SIZES)}")
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--experiment={str(path)!r} is not a file; experiments: "
                          f"{', '.join(sorted(p.name for p in path.parent.glob('*.py'))) or 'none found'}")
    return _load_module(path).get_study(size)


def _load_module(path: str | Path):
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_tj_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

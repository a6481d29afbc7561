"""Intervals for an effect measured against random draws nested in units: a head set against
matched random sets (`head_controls`), a removal against random perturbations of the same norm
(`yardsticks`). Each unit (sentence, sequence, seed) gives one effect and several random draws;
the intervals run over units and carry the spread of the draws within a unit (`summarize`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any

import numpy as np

from transformer_jax.studies.judge.stats import CONFIDENCE, mean_interval


def keyed_rng(key: tuple, seed: int) -> np.random.Generator:
    """A generator for one key (a unit's id and what is drawn for it), from sha256 of its repr:
    reproducible across processes, where Python's hash() of a string is not."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng([seed, *np.frombuffer(digest[:16], np.uint32).tolist()])


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A mean over units and its interval (low, high: ±inf where the data bound nothing)."""
    mean: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class AgainstRandom:
    """What every comparison with random draws reports beside its own fields: the difference
    (effect − random, paired by unit) and the ratio (effect / random), and the random draws'
    sd between units and within a unit."""
    difference: Estimate
    ratio: Estimate
    between_units_sd: float
    within_unit_sd: float

    @property
    def above_random(self) -> bool:
        """The effect exceeds the random draws': the difference's interval lies above 0."""
        return self.difference.low > 0

    def statistics(self) -> dict[str, Any]:
        """These four as plain values (JSON)."""
        return {"difference": self.difference.to_dict(), "ratio": self.ratio.to_dict(),
                "between_units_sd": self.between_units_sd, "within_unit_sd": self.within_unit_sd}


def summarize(effect: np.ndarray, random: np.ndarray,
              confidence: float = CONFIDENCE) -> dict[str, Any]:
    """effect [N] (one per unit) against random [N, draws] (random draws within each unit):
    the mean effect, the random draws' mean, their difference (paired by unit) and ratio (effect
    / random), each an `Estimate`, and the random draws' two variance components (sd between
    units, sd of draws within a unit).

    Why intervals over the units' means, not a two-stage bootstrap: in a balanced nested design
    the unbiased variance of the grand mean is MS_between / (N·draws) = var(unit means) / N,
    and var(unit means) holds the spread between units plus the spread of sets within a unit
    divided by draws: both sources, each counted once. A bootstrap that also resamples the sets
    inside each resampled unit counts the second one twice (Davison & Hinkley 1997, §3.8), and
    one over a few units (seeds: 3 to 5) undercovers; the t interval on unit means is exact when
    they are normal. The difference pairs each unit's effect with its own draws; the ratio's
    interval is Fieller's, the t interval of effect − θ·random inverted in θ (unbounded when
    the random draws' mean is not clear of 0)."""
    g = np.asarray(effect, float)
    r = np.asarray(random, float)
    if r.ndim != 2 or r.shape[0] != g.shape[0] or r.shape[1] < 2:
        raise ValueError(f"random has shape {r.shape}; it must be [units, draws >= 2] with "
                         f"units = {g.shape[0]}")
    r_unit = r.mean(1)  # each unit's mean over its sets: carries the sets' spread
    within = float(np.mean(np.var(r, 1, ddof=1)))  # nested ANOVA's MS_within: σ²_sets
    between = float(np.var(r_unit, ddof=1)) - within / r.shape[1] if len(g) > 1 else math.nan
    return {"effect": _estimate(g, mean_interval(g, confidence)),
            "random": _estimate(r_unit, mean_interval(r_unit, confidence)),
            "difference": _estimate(g - r_unit, mean_interval(g - r_unit, confidence)),
            "ratio": Estimate(float(g.mean() / r_unit.mean()) if r_unit.mean() else math.nan,
                              *map(float, ratio_interval(g, r_unit, confidence))),
            "between_units_sd": math.sqrt(max(between, 0.0)) if math.isfinite(between)
            else math.nan,
            "within_unit_sd": math.sqrt(within)}


def ratio_interval(a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Fieller's interval of mean a / mean b for paired units on the last axis (any leading
    axes): the θ whose mean(a − θ·b) has a t interval holding 0. (-inf, inf) where mean b is not
    clear of 0 at this confidence (no finite set of θ), or with fewer than 2 units."""
    n = a.shape[-1]
    if n < 2:
        shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
        return np.full(shape, -np.inf), np.full(shape, np.inf)
    ma, mb = a.mean(-1), b.mean(-1)
    vaa, vbb = np.var(a, -1, ddof=1) / n, np.var(b, -1, ddof=1) / n
    vab = np.sum((a - ma[..., None]) * (b - mb[..., None]), -1) / (n - 1) / n
    t2 = _t_quantile(n - 1, confidence) ** 2
    qa, qb, qc = mb ** 2 - t2 * vbb, -2 * (ma * mb - t2 * vab), ma ** 2 - t2 * vaa
    bounded = qa > 0
    root = np.sqrt(np.maximum(qb ** 2 - 4 * qa * qc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)
    return np.where(bounded, low, -np.inf), np.where(bounded, high, np.inf)


def _t_quantile(dof: int, confidence: float) -> float:
    from scipy import special  # imported on first use, as studies/stats.py does
    return float(special.stdtrit(dof, 0.5 + confidence / 2))


def _estimate(values: np.ndarray, interval: tuple) -> Estimate:
    return Estimate(float(np.mean(values)), float(interval[0]), float(interval[1]))

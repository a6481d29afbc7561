"""The statistics behind a verdict: 95 % intervals over seeds and the rule that decides.

Each interval takes per-seed values on the last axis (any leading axes: the coverage test judges
thousands of simulated studies at once) and returns (low, high). A verdict is settled only by a
95 % interval that covers 95 % of the time at 3 seeds (for normal or mildly skewed per-seed
values): Student-t intervals. A percentile bootstrap over 3 seeds never leaves their range and
covered the mean 74 % of the time; tests/studies/test_interval_coverage.py measures both.
"""
from __future__ import annotations

import enum
import math
from typing import Optional

import numpy as np


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

def mean_interval(x: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval of the mean, n − 1 dof (= scipy.stats.ttest_1samp's)."""
    n = x.shape[-1]
    if n < 2:
        return _unbounded(x.shape[:-1])
    return _t_interval(np.mean(x, -1), np.std(x, -1, ddof=1) / math.sqrt(n), n - 1, confidence)


def difference_interval(a: np.ndarray, b: np.ndarray, paired: bool,
                        confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Of mean a − mean b. Paired by seed (both variants saw the same seed and data order,
    so only their per-seed difference varies): the t interval of the differences. Unpaired:
    Welch's (= scipy.stats.ttest_ind(equal_var=False)'s)."""
    if paired:
        return mean_interval(a - b, confidence)
    na, nb = a.shape[-1], b.shape[-1]
    if min(na, nb) < 2:
        return _unbounded(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    va, vb = _var_of_mean(a), _var_of_mean(b)
    with np.errstate(invalid="ignore", divide="ignore"):  # zero spread: 0/0, handled below
        dof = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))  # Welch–Satterthwaite
    return _t_interval(np.mean(a, -1) - np.mean(b, -1), np.sqrt(va + vb), dof, confidence)


def relative_gap_interval(a: np.ndarray, b: np.ndarray, paired: bool,
                          confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Of the relative gap (mean a − mean b)/|mean b| = ±(ρ − 1), ρ = mean a / mean b:
    Fieller's interval, the ρ at which a t-test does not reject mean a − ρ·mean b = 0 (paired:
    of a_i − ρ·b_i, n − 1 dof, exact for normal pairs; unpaired: min(n_a, n_b) − 1 dof,
    conservative). Unbounded when mean b is not clearly away from 0."""
    na, nb = a.shape[-1], b.shape[-1]
    if min(na, nb) < 2:
        return _unbounded(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    mean_a, mean_b = np.mean(a, -1), np.mean(b, -1)
    v_aa, v_bb = _var_of_mean(a), _var_of_mean(b)  # variances of the means
    # Solved for δ = ρ − 1, the gap itself, not for ρ: then identical variants (diff, the mean
    # of a − b, and v_dd, v_db all 0) give δ exactly 0, where ρ − 1 kept B² − AC's rounding.
    if paired:
        d = a - b
        diff = np.mean(d, -1)
        v_dd = _var_of_mean(d)
        v_db = np.sum((d - diff[..., None]) * (b - mean_b[..., None]), -1) / (na - 1) / na
        dof = na - 1
    else:
        diff, v_dd, v_db, dof = mean_a - mean_b, v_aa + v_bb, -v_bb, min(na, nb) - 1
    q = _t_quantiles(dof, confidence) ** 2
    # δ inside: (diff − δ mean_b)² <= q (v_dd − 2δ v_db + δ² v_bb), i.e. A δ² − 2B δ + C <= 0
    A, B, C = mean_b ** 2 - q * v_bb, diff * mean_b - q * v_db, diff ** 2 - q * v_dd
    bounded = A > 0
    A = np.where(bounded, A, 1.0)
    root = np.sqrt(np.maximum(B ** 2 - A * C, 0.0))
    delta_low, delta_high = (B - root) / A, (B + root) / A
    positive = mean_b > 0
    low = np.where(positive, delta_low, -delta_high)
    high = np.where(positive, delta_high, -delta_low)
    flat = np.sqrt(v_aa + v_bb) <= 1e-9 * np.maximum(1.0, np.maximum(abs(mean_a), abs(mean_b)))
    gap = relative_gap(a, b)
    low, high = np.where(flat, gap, low), np.where(flat, gap, high)  # zero spread: the point
    return np.where(bounded | flat, low, -np.inf), np.where(bounded | flat, high, np.inf)


def rate_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Clopper–Pearson (exact binomial) interval of a rate: k of n runs."""
    tail = (1 - confidence) / 2  # the beta quantiles that binomtest's 'exact' CI finds by search
    low = 0.0 if k == 0 else _scipy_special().betaincinv(k, n - k + 1, tail)
    high = 1.0 if k == n else _scipy_special().betaincinv(k + 1, n - k, 1 - tail)
    return float(low), float(high)


def _var_of_mean(x: np.ndarray) -> np.ndarray:
    return np.var(x, -1, ddof=1) / x.shape[-1]


def _t_interval(center, se, dof, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """center ± t_{dof} · se; a spread lost in rounding (a constant per-seed difference) is
    zero, and the interval is the point."""
    flat = se <= 1e-9 * np.maximum(1.0, np.abs(center))
    half = np.where(flat, 0.0, _t_quantiles(np.where(flat, 1, dof), confidence) * se)
    return center - half, center + half


def _unbounded(shape) -> tuple[np.ndarray, np.ndarray]:
    return np.full(shape, -np.inf), np.full(shape, np.inf)


def decide(low: float, high: float, accepted: tuple[float, float]) -> Verdict:
    """Holds if the interval lies inside the accepted region, fails if it misses it. The region
    is closed: an interval that starts exactly on a lower threshold or ends exactly on an upper
    one holds; one that touches a threshold from outside shares that point with the region and
    is inconclusive (tests/studies/test_verdict_boundaries.py)."""
    lo, hi = accepted
    if lo <= low and high <= hi:
        return Verdict.HOLDS
    if high < lo or low > hi:
        return Verdict.FAILS
    return Verdict.INCONCLUSIVE


class Failure(enum.Enum):
    """How a verdict that does not hold failed."""
    CONTRADICTED = "contradicted"  # the effect went the other way: past "no effect"
    SMALLER = "smaller than stated"  # the stated way, or not told apart from none, but short


def how_it_failed(low: float, high: float, accepted: tuple[float, float],
                  no_effect: Optional[float]) -> Optional[Failure]:
    """Of a verdict that does not hold (None if the interval is not wholly outside the
    accepted region). Only an expectation whose accepted region is [margin, ∞) with margin
    beyond its comparison's "no effect" value (`no_effect`; None: it has none) can fail by
    being smaller than stated: when the interval does not lie wholly below "no effect".
    Every other failure (a region bounded above, "no worse than" with margin <= no effect,
    no "no effect" value) went against what was stated: contradicted."""
    if decide(low, high, accepted) is not Verdict.FAILS:
        return None
    lo, hi = accepted
    can_be_smaller = no_effect is not None and hi == math.inf and lo > no_effect
    return Failure.SMALLER if can_be_smaller and high >= no_effect else Failure.CONTRADICTED


def smaller_note(low: float, no_effect: float) -> str:
    """Which kind of "smaller than stated": an effect told apart from none, or not."""
    if low > no_effect:
        return f"the effect is in the stated direction (the interval is above {no_effect:g}) " \
               "but short of the threshold"
    return f"the effect is not told apart from none (the interval reaches {no_effect:g})"


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
                 if decide(*rate_interval(round(k / n * m), m), accepted)
                 is not Verdict.INCONCLUSIVE), MAX_SEEDS + 1)


def seeds_to_bound(b: np.ndarray) -> Optional[int]:
    """Seeds m after which, at b's per-seed spread, mean b would be told apart from 0, which is
    when a relative gap's (Fieller) interval becomes bounded: t_{m−1}·sd(b)/√m < |mean b|.
    MAX_SEEDS + 1: more than MAX_SEEDS. None: not estimable (one seed, or mean b is 0)."""
    n, mean = len(b), float(np.mean(b))
    if n < 2 or mean == 0.0:
        return None
    sd = float(np.std(b, ddof=1))
    return next((m for m in range(n + 1, MAX_SEEDS + 1)
                 if _t_quantile(m - 1) * sd / math.sqrt(m) < abs(mean)), MAX_SEEDS + 1)


def _t_quantile(dof: int) -> float:
    return float(_t_quantiles(dof))


def _t_quantiles(dof, confidence: float = CONFIDENCE):
    """The two-sided `confidence` quantile of Student's t at `dof` (an array or a number)."""
    return _scipy_special().stdtrit(dof, 0.5 + confidence / 2)  # what scipy.stats.t.ppf calls


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


def unbounded_note(n: int, needed: Optional[int], of: str) -> str:
    """Why a relative gap's interval is unbounded, given seeds_to_bound's answer for `of` (the
    variant the gap is relative to): too few seeds to tell its mean from 0, not a gap that sits
    on the threshold."""
    why = f"the interval is unbounded at {n} seeds (the mean of {of} is not yet told apart from 0)"
    if needed is None:
        return f"{why}: run at least 3 seeds" if n < 3 else why
    if needed > MAX_SEEDS:
        return f"{why}: > {MAX_SEEDS} seeds needed at this spread"
    return f"{why}: ≈ {needed} seeds would bound it at this spread"

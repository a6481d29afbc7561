"""A study's checks: statements about what an analysis measures (head roles, head importance,
rounding), written in the experiment file before the analysis first ran, each judged on every
finished seed of one variant. A check's result is data in the study's record (verdict.json):
the page renders it as a table row and the index counts the checks that pass."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

PASS, FAIL, MIXED, NO_RUN = "PASS", "FAIL", "MIXED", "no finished run"


@dataclasses.dataclass(frozen=True)
class Check:
    """One statement an analysis judges pass/fail on each seed of `variant` (thresholds from
    the study). What `test` is given is the analysis's measurements of one seed: each analysis
    says which (head_roles: trained and initial scores; head_importance: the knock-out drops
    and the role scores; rounding: the median ratio rounding / batch)."""
    text: str
    variant: str
    test: Callable[..., bool]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """A check judged: whether it held on each finished seed, in seed order."""
    text: str
    passed: tuple[bool, ...]

    @property
    def verdict(self) -> str:
        """PASS (every seed), FAIL (none), MIXED, or NO_RUN (no finished seed to judge)."""
        if not self.passed:
            return NO_RUN
        return PASS if all(self.passed) else FAIL if not any(self.passed) else MIXED

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "passed": list(self.passed), "verdict": self.verdict}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CheckResult:
        return cls(record["text"], tuple(bool(p) for p in record["passed"]))


def judged(check: Check, per_seed: Sequence[tuple]) -> CheckResult:
    """`check` on each seed's measurements (each a tuple of `test`'s arguments)."""
    return CheckResult(check.text, tuple(bool(check.test(*args)) for args in per_seed))


@dataclasses.dataclass(frozen=True)
class Section:
    """What one analysis adds to a study's record: its markdown (tables, figure links), kept
    verbatim, and its checks' results as data. `values`: what it measured of each run, metric
    -> (variant, seed) -> value; the report counts each as that run's final value of the
    metric (summary.csv), so an expectation can judge it like any logged metric."""
    markdown: str
    checks: tuple[CheckResult, ...] = ()
    values: Mapping[str, Mapping[tuple[str, int], float]] = dataclasses.field(
        default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"markdown": self.markdown, "checks": [c.to_json() for c in self.checks]}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Section:
        return cls(record["markdown"], tuple(CheckResult.from_json(c) for c in record["checks"]))


def as_section(found: Optional[str | Section]) -> Section:
    """An analysis's output as a Section: one without checks may return its markdown alone."""
    return found if isinstance(found, Section) else Section(found or "")

"""A grid whose best lies inside it: a tuned arm's grid grown outward until no seed's choice sits
at an edge, or a cap.

An optimum at the edge of its grid is not a best setting: the next point out might be better
still. A study that declares `Study.extend_grid = GridExtension(field, factor, cap)` has every
tuned arm's candidates (`tuning.tuned_arm`) vary `field` alone. Once all runs of a stage have
ended, each seed's candidate is chosen as the judge chooses it (`tuned_choice.choose`, by
training loss); when any seed's choice has the smallest (largest) value of `field` in the arm's
grid, the next point out, that value ÷ `factor` (× `factor`), becomes a new candidate and trains
(the sweep's next stage); and so on until every choice is interior or the grid has grown `cap`
points beyond that end of the declared grid. The rule decides what to train, not a verdict: the
choice rule and the judging are the judge room's, unchanged; the record says which grid was
reached and flags each seed whose choice the cap left at an edge (`record`).

No state is kept beside the runs: a new point's value is rounded to the significant digits its
candidate's name shows (`candidate_name`: 1e-3 ÷ 3 -> 'learning_rate=0.000333333'), so the name
is the value, and the grid reached is read back from the run directories (`reached`); a resumed
sweep decides again what it decided before. The grown study keeps the declared study's design
and fingerprint: the points the rule added are its outcome, like a plateau's budget.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from transformer_jax.config import ConfigError
from transformer_jax.studies import tuning
from transformer_jax.studies.judge import tuned_choice
from transformer_jax.studies.study import Study

LOW, HIGH = "low", "high"  # the two edges of a grid


@dataclasses.dataclass(frozen=True)
class GridExtension:
    """Grow each tuned arm's grid in `field` by `factor` at an edge a seed chose, at most `cap`
    points beyond each end of the declared grid."""

    field: str = "train.learning_rate"  # the dotted numeric field the candidates vary
    factor: float = 3.0  # the next point out: the edge's value × factor (top) or ÷ factor (bottom)
    cap: int = 2  # points added beyond each end of the declared grid, at most

    def __post_init__(self):
        if not isinstance(self.field, str) or self.field.count(".") != 1:
            raise ConfigError(f"extend_grid field={self.field!r} must be a dotted config field, "
                              f"e.g. 'train.learning_rate'")
        if (not isinstance(self.factor, (int, float)) or isinstance(self.factor, bool)
                or not (math.isfinite(self.factor) and self.factor > 1)):
            raise ConfigError(f"extend_grid factor={self.factor!r} must be a number above 1")
        if not isinstance(self.cap, int) or isinstance(self.cap, bool) or self.cap < 1:
            raise ConfigError(f"extend_grid cap={self.cap!r} must be a positive integer (points "
                              f"beyond each end of the declared grid)")

    def design(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def next_value(self, edge: float, end: str) -> Optional[float]:
        """The point beyond `edge` at that `end`, rounded as its candidate's name shows it; an
        integer field's is rounded to a whole number (None: no whole number beyond it >= 1)."""
        value = edge * self.factor if end == HIGH else edge / self.factor
        if isinstance(edge, int):
            value = round(value)
            return value if value >= 1 and value != edge else None
        return float(f"{value:g}")


@dataclasses.dataclass(frozen=True)
class GrownStudy(Study):
    """A study with the candidates its grid extension added: it trains and reports them, and
    its design (so its fingerprint) stays the declared study's."""

    declared: Optional[Study] = None

    def design(self) -> dict[str, Any]:
        return self.declared.design()

    def training_design(self) -> dict[str, Any]:
        return self.declared.training_design()


def declared(study: Study) -> Study:
    return study.declared if isinstance(study, GrownStudy) else study


def value_of(study: Study, candidate: str, field: str,
             variants: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Any:
    """The candidate's value of the dotted `field`: its override (in `variants`, default the
    study's), else the base config's."""
    section, leaf = field.split(".")
    overrides = (study.variants if variants is None else variants)[candidate]
    return overrides.get(field, study.base[section].get(leaf))


def check(study: Study) -> None:
    """One ConfigError line when the extension cannot apply: no tuned arm, or an arm whose
    candidates differ in anything but distinct numbers in `field`."""
    ext = study.extend_grid
    if ext is None:
        return
    if not study.tuned:
        raise ConfigError(f"study {study.name!r}: extend_grid needs a tuned arm (tuned=...)")
    for arm, candidates in study.tuned.items():
        values = [value_of(study, c, ext.field) for c in candidates]
        rest = {repr(sorted((k, v) for k, v in study.variants[c].items() if k != ext.field))
                for c in candidates}
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if not numeric or len(set(values)) != len(values) or len(rest) != 1:
            raise ConfigError(f"study {study.name!r}: extend_grid grows {ext.field!r}, but tuned "
                              f"arm {arm!r}'s candidates are not one distinct number each in it "
                              f"with all else equal (values: {values})")


def including(study: Study, names: Iterable[Optional[str]]) -> Study:
    """The study with the named candidates (`candidate_name(arm, {field: value})`) added to
    their arms; names it already has, or None, change nothing. ConfigError for a name that is
    no candidate of an arm."""
    ext = study.extend_grid
    new = [n for n in names if n is not None and n not in study.variants]
    if ext is None or not new:
        return study
    variants, tuned = dict(study.variants), {a: list(c) for a, c in study.tuned.items()}
    for name in new:
        arm, value = parse(study, name)
        if arm is None:
            raise ConfigError(f"{name!r} is neither a variant of study {study.name!r} nor a "
                              f"candidate its grid extension could add")
        variants[name] = {**study.variants[tuned[arm][0]], ext.field: value}
        tuned[arm].append(name)
    order = {a: tuple(sorted(c, key=lambda n: value_of(study, n, ext.field, variants)))
             for a, c in tuned.items()}
    return GrownStudy(**{**{f.name: getattr(study, f.name) for f in dataclasses.fields(Study)},
                         "variants": variants, "tuned": order, "declared": declared(study)})


def parse(study: Study, name: str) -> tuple[Optional[str], Optional[float]]:
    """(arm, value) when `name` is the candidate name of a point of an arm's field, else
    (None, None): the name must be exactly what candidate_name writes for that value."""
    ext = study.extend_grid
    for arm in study.tuned:
        prefix = f"{arm}~{ext.field.rsplit('.', 1)[-1]}="
        if not name.startswith(prefix):
            continue
        try:
            value = float(name[len(prefix):])
        except ValueError:
            continue
        if all(isinstance(value_of(study, c, ext.field), int) for c in study.tuned[arm]):
            value = int(value) if value.is_integer() else value  # an integer field stays one
        if math.isfinite(value) and tuning.candidate_name(arm, {ext.field: value}) == name:
            return arm, value
    return None, None


def reached(study: Study, root: Path) -> Study:
    """The study with every candidate its extension added in an earlier stage: the run
    directories under `root` named as candidates of its arms."""
    if study.extend_grid is None or not Path(root).is_dir():
        return study
    found = sorted(d.name for d in Path(root).iterdir()
                   if d.is_dir() and d.name not in study.variants and parse(study, d.name)[0])
    return including(study, found)


def arm_stage(study: Study, arm: str, choices: Mapping[int, Optional[str]]) -> dict[str, Any]:
    """One arm at this stage, as data: its grid (values in order), each seed's chosen value,
    the edges a seed chose, the candidates to add, and the edges the cap holds (or an integer
    field's, where no whole number >= 1 lies beyond)."""
    ext, first = study.extend_grid, declared(study)
    values = [value_of(study, c, ext.field) for c in study.tuned[arm]]  # in increasing order
    start = [value_of(first, c, ext.field) for c in first.tuned[arm]]
    beyond = {LOW: sum(v < min(start) for v in values), HIGH: sum(v > max(start) for v in values)}
    edge_value = {LOW: values[0], HIGH: values[-1]}
    chosen = {s: None if c is None else value_of(study, c, ext.field) for s, c in choices.items()}
    at_edge = {end: sorted(s for s, v in chosen.items() if v == edge_value[end])
               for end in (LOW, HIGH)}
    following = {end: ext.next_value(edge_value[end], end) for end in (LOW, HIGH)}
    grow = [end for end in (LOW, HIGH)
            if at_edge[end] and beyond[end] < ext.cap and following[end] is not None]
    return {"grid": values, "declared": sorted(start),
            "chosen": {str(s): v for s, v in chosen.items()},
            "at_edge": {end: seeds for end, seeds in at_edge.items() if seeds},
            "capped": [end for end in (LOW, HIGH) if at_edge[end] and end not in grow],
            "next": [tuning.candidate_name(arm, {ext.field: following[end]}) for end in grow]}


def stage(study: Study, runs: Mapping[tuple[str, int], Mapping[str, Any]]) -> dict[str, Any]:
    """Every tuned arm at this stage (`arm_stage`), its seeds' choices made by
    tuned_choice.choose from `runs` (report.collect's) exactly as the report will make them."""
    choices = tuned_choice.choose(study.tuned, study.seeds, runs)
    return {arm: arm_stage(study, arm, choices[arm]) for arm in study.tuned}


def added(decided: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The candidates a stage's decision adds, over every arm."""
    return [name for arm in decided.values() for name in arm["next"]]


def record(study: Study, runs: Mapping[tuple[str, int], Mapping[str, Any]]) -> dict[str, Any]:
    """arm -> the grid extension as data for the record's tuning section: the rule, the declared
    grid and the grid reached, and each seed the cap left at an edge (`left_at_edge`: an
    optimum that is not known to be one)."""
    decided = stage(study, runs)
    return {arm: {**study.extend_grid.design(), "declared": d["declared"], "reached": d["grid"],
                  "interior": not d["at_edge"],
                  "left_at_edge": [{"seed": int(seed), "edge": end,
                                    "value": d["chosen"][str(seed)]}
                                   for end in d["capped"] for seed in d["at_edge"][end]]}
            for arm, d in decided.items()}

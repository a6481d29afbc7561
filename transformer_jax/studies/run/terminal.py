"""What a person running a sweep reads: one line per finished variant (its final metric, how
many of all are done, time spent and left), each study's verdict as soon as it is written, a
summary table at the end, and how to open TensorBoard on the results, one study at a time.

Everything else (every logged step, the libraries' INFO lines) goes to the runs' train.log
files (`cli.log_to_file`); absl's `--verbosity=0` brings it back to the terminal. When stderr
is a terminal a bar shows the variants done and the time left.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Optional, Sequence, TextIO

from transformer_jax.train.cli import LOG_FILE
from transformer_jax.train.terminal import duration, tensorboard_executable
from transformer_jax.studies.study import KIND_WORDS, Kind, Study
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import board
from transformer_jax.studies.render import verdict_text

TENSORBOARD_PORT = 6006
# Run names end in <variant>/seed_<n>, a comparison run's in compare/<variant>: the seeds of a
# variant (of a study) and its mean share a colour. TensorBoard colours runs by the list of the
# regex's groups, (the study's part, the variant): the lazy first group stops before the
# variant in both. (The URLs' regexes avoid + and \ , which a URL must escape: [0-9]* for a
# seed's digits.)
RUN_COLOR_GROUP = "regex:^(.*?/)??(?:compare/)?([^/][^/]*)(?:/seed_[0-9][0-9]*)?$"
# TensorBoard's Images tab (and its other pre-Time-Series tabs) selects no run by default when
# more than this many match its run filter; Time Series selects up to 500.
LEGACY_TAB_MAX_RUNS = 40
VERDICT_WORDS = ("holds", "does not hold", "inconclusive")  # study.Verdict's values


def headline_metric(study: Study) -> str:
    """The metric a variant's line shows: the study's first eval/ or train/ metric (those are
    in each run's status.json), else eval/accuracy."""
    return next((m for m in study.metrics if m.split("/")[0] in ("eval", "train")),
                "eval/accuracy")


def final_metric(status: dict[str, Any], metric: str) -> Optional[float]:
    """`metric`'s final value from a run's status.json (None: not there)."""
    section, _, name = metric.partition("/")
    if section == "eval":
        return (status.get("eval") or {}).get(name)
    return (status.get("train") or {}).get(metric)


def describe_seeds(statuses: Sequence[dict], metric: str) -> str:
    """'eval/accuracy 0.412 (0.41, 0.40, 0.43)'; a diverged or preempted seed says so."""
    values, notes = [], []
    for s in statuses:
        state = (s or {}).get("state", "missing")
        value = final_metric(s or {}, metric) if state == "finished" else None
        if value is None:
            notes.append(f"{state} at step {s.get('step', 0)}" if s else state)
        else:
            values.append(float(value))
            notes.append(f"{value:.3g}")
    if not values:
        return f"{metric}: " + ", ".join(notes)
    mean = sum(values) / len(values)
    return f"{metric} {mean:.3g}" + (f" ({', '.join(notes)})" if len(statuses) > 1 else "")


@dataclasses.dataclass
class StudyVerdict:
    """What the verdict record says, for the terminal: the overall line and each expectation's
    verdict."""

    overall: str
    # (verdict, expected outcome in words, kind: study.Kind's value)
    expectations: list[tuple[str, str, str]]
    short: str = "-"  # the overall verdict in words: 'partly holds', 'not judged'
    kinds: str = ""  # how those that do not hold failed: '1 contradicted, 1 smaller than stated'

    def count(self, word: str, kind: Kind = Kind.FINDING) -> int:
        return sum(v.startswith(word) for v, _, k in self.expectations if k == kind.value)

    def cell(self, word: str) -> str:
        """How many findings have the verdict `word`; for 'does not hold', how they failed."""
        kinds = f" ({self.kinds})" if word == "does not hold" and self.kinds else ""
        return f"{self.count(word)}{kinds}"

    def apart(self, kind: Kind) -> str:
        """'3/3 hold' of the checks or post hoc ('-': none); an alarm where a check does not."""
        total = sum(k == kind.value for _, _, k in self.expectations)
        held = self.count("holds", kind)
        if not total:
            return "-"
        return f"{held}/{total} hold" + (" ALARM" if kind is Kind.CHECK and held < total else "")


def read_verdict(path: Path) -> StudyVerdict:
    """A study's verdict record (record.FILE at `path`): its overall line and each
    expectation's verdict and text; empty where the report wrote none."""
    try:
        found = record_lib.read(path)
    except record_lib.RecordError:
        return StudyVerdict("", [])
    overall = verdict_text.overall_line(found).replace("**", "")
    expectations = [(verdict_text.verdict_words(row), row["text"], record_lib.kind_of(row).value)
                    for row in found["expectations"]]
    size = verdict_text.size_words(found)
    short = found["counts"]["overall"].removeprefix("is ") + (f" ({size})" if size else "")
    return StudyVerdict(overall, expectations, short, verdict_text.failure_kinds(found["counts"]))


def runs_url(query: dict[str, str], port: int = TENSORBOARD_PORT) -> str:
    """TensorBoard's Time Series with `query`'s URL parameters, regex characters left readable
    (TensorBoard decodes each value as a whole), curves unsmoothed (its default 0.6 averages
    an eval curve of ten points into a different curve)."""
    return (f"http://localhost:{port}/?"
            + urllib.parse.urlencode({**query, "smoothing": "0"}, safe="/^[]():,*?$|",
                                     quote_via=urllib.parse.quote)
            + "#timeseries")


def pinned_cards(root: Path, metrics: Sequence[str] = ()) -> list[str]:
    """The tags a link to the study at `root` pins: its comparison cards (one per judged
    metric, a line per variant: studies/render/board.py), then its metrics (`metrics`, else its view
    file's), from the view file the sweep wrote there."""
    view = board.read_view(root)
    return list(dict.fromkeys([*view.get("cards", []), *(metrics or view.get("metrics", []))]))


def _pinned(tags: Sequence[str]) -> dict[str, str]:
    if not tags:
        return {}
    return {"pinnedCards": json.dumps([{"plugin": "scalars", "tag": t} for t in tags],
                                      separators=(",", ":"))}


def study_url(name: str, pinned: Sequence[str], multi_study: bool,
              port: int = TENSORBOARD_PORT, directory: Optional[str] = None) -> str:
    """TensorBoard's Time Series, showing one study: its runs only, coloured by variant (the
    seeds of a variant share a colour), and its comparison runs; the `pinned` tags on top.

    TensorBoard names a run by its path below the --logdir it serves, which may be the sweep's
    directory (`<study>/<variant>/seed_<n>`), the study's own (`<variant>/seed_<n>`) or any
    parent of them (`studies/<study>/...` from runs/): the regexes match the study's runs under
    any of these. `directory`: the name of the study's directory (default: the study's name, as
    a sweep of several studies names them)."""
    escaped = re.escape(directory or name)
    # a multi-study directory holds other studies: the study's directory must be in the name
    study_part = f"(.*/)?{escaped}/" if multi_study else f"((.*/)?{escaped}/)?"
    runs = f"([^/]*/seed_[0-9]*|{board.COMPARE_DIR}/[^/]*)"
    query = {"runFilter": f"^{study_part}{runs}$", "runColorGroup": RUN_COLOR_GROUP}
    return runs_url({**query, **_pinned(pinned)}, port)


def all_studies_url(pinned: Sequence[str], port: int = TENSORBOARD_PORT) -> str:
    """Every run, coloured by variant, every study's comparison cards pinned on top."""
    return runs_url({"runColorGroup": RUN_COLOR_GROUP, **_pinned(pinned)}, port)


def tensorboard_lines(logdir: str, studies: Sequence[tuple[Study, Path]],
                      multi_study: bool) -> list[str]:
    """How to open TensorBoard on the sweep's `logdir`: a link per study (study, its root)."""
    script = " (or scripts/tensorboard.sh " + logdir + ")" if Path(
        "scripts/tensorboard.sh").exists() else ""
    lines = [f"TensorBoard:  {tensorboard_executable()} --logdir {logdir}{script}",
             "  then open, one study at a time (its variants compared first, then its runs, "
             "the seeds of a variant in one colour):"]
    width = max([len(s.name) for s, _ in studies] + [5])
    directory = None if multi_study else Path(logdir).name
    pinned = {s.name: pinned_cards(root, s.metrics) for s, root in studies}
    lines += [f"  {s.name:<{width}}  "
              f"{study_url(s.name, pinned[s.name], multi_study, directory=directory)}"
              for s, _ in studies]
    if len(studies) > 1:
        cards = [t for s, root in studies for t in board.read_view(root).get("cards", [])]
        lines.append(f"  {'(all)':<{width}}  {all_studies_url(cards)}")
    runs = sum(len(s.variants) * len(s.seeds) for s, _ in studies)
    return lines + legacy_tabs_note(runs)


def legacy_tabs_note(runs: int) -> list[str]:
    """Over LEGACY_TAB_MAX_RUNS runs, where to look instead of the tabs that select none."""
    if runs <= LEGACY_TAB_MAX_RUNS:
        return []
    return [f"  ({runs} runs: TensorBoard's Images and Custom Scalars tabs select none above "
            f"{LEGACY_TAB_MAX_RUNS}; each study's link shows its images and its comparison in "
            f"Time Series)"]


class JobProgress:
    """Prints a sweep's progress; `bar`: a tqdm bar on stderr (only if it is a terminal)."""

    def __init__(self, out: Optional[TextIO] = None, bar: bool = True):
        self.out = out or sys.stdout
        self.want_bar = bar and sys.stderr.isatty()
        self.bar = None
        self.studies: dict[str, tuple[Study, Path]] = {}
        self.variants = 0  # of this shard, every study
        self.done = 0
        self.skipped = 0
        self.shared = 0  # variants whose runs another variant trains (the same config)
        self.cost_total = self.cost_done = 0.0
        self.t0 = time.perf_counter()
        self.verdicts: dict[str, StudyVerdict] = {}
        self.diverged: dict[str, int] = {}

    def add_study(self, study: Study, root: Path) -> None:
        self.studies[study.name] = (study, Path(root))
        self.diverged.setdefault(study.name, 0)

    def add_variant(self, cost: Optional[float], shared: bool = False) -> None:
        """One variant of this shard; cost None: it had already ended, or (`shared`) its runs
        are another variant's, trained once (`sweep.link_identical_runs`)."""
        self.variants += 1
        if cost is None:
            self.done += 1
            self.skipped += not shared
            self.shared += shared
        else:
            self.cost_total += cost

    def start(self, jobs: int) -> None:
        runs = sum(len(s.seeds) * len(s.variants) for s, _ in self.studies.values())
        todo = self.variants - self.skipped - self.shared
        where = ", ".join(str(root) for _, root in self.studies.values())
        if len(self.studies) > 1:
            where = str(Path(os.path.commonpath([str(r) for _, r in self.studies.values()])))
        self.print(f"{len(self.studies)} {'study' if len(self.studies) == 1 else 'studies'}, "
                   f"{self.variants} variants ({runs} runs) into {where}: {todo} to train"
                   f"{f', {self.skipped} already ended' if self.skipped else ''}"
                   f"{f', {self.shared} the same runs as another variant (trained once)' if self.shared else ''}"
                   f"{f', {jobs} at a time' if jobs > 1 and todo else ''}.")
        if todo:
            self.print(f"Each variant's full log: <study>/<variant>/{LOG_FILE} "
                       f"(--verbosity=0 shows it here too).")
        if self.want_bar and todo:
            from tqdm import tqdm
            self.bar = tqdm(total=self.variants, initial=self.done, unit="variant",
                            bar_format="{n}/{total} variants |{bar}| {elapsed}{postfix}",
                            leave=False, file=sys.stderr)
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> Optional[float]:
        """Seconds left, from the time per unit of cost (`jobs.cost`) of the variants done."""
        if self.cost_done <= 0:
            return None
        spent = time.perf_counter() - self.t0
        return spent * max(self.cost_total - self.cost_done, 0.0) / self.cost_done

    def variant_done(self, study: str, variant: str, cost: float,
                     statuses: Sequence[dict]) -> None:
        self.done += 1
        self.cost_done += cost
        self.diverged[study] = self.diverged.get(study, 0) + sum(
            (s or {}).get("state") == "diverged" for s in statuses)
        left = self.left()
        width = len(str(self.variants))
        label = f"{study}/{variant}"
        self.print(f"[{self.done:>{width}}/{self.variants}] {label:<34} "
                   f"{describe_seeds(statuses, headline_metric(self.studies[study][0]))}  "
                   f"| {duration(self.elapsed())}"
                   + (f", ~{duration(left)} left" if left is not None and self.done < self.variants
                      else ""))
        if self.bar is not None:
            self.bar.update(1)
            self.tick()

    def study_reported(self, name: str) -> None:
        study, root = self.studies[name]
        verdict = read_verdict(root / record_lib.FILE)
        self.verdicts[name] = verdict
        self.print(f"  {name}: {verdict.overall or 'verdict written'}")
        for word, text, kind in verdict.expectations:
            shown = "" if kind == Kind.FINDING.value else f" ({KIND_WORDS[Kind(kind)]})"
            self.print(f"    {word.split(':')[0]:<14} {text}{shown}")
        self.print(f"    -> {root / 'verdict.md'}")

    def tick(self) -> None:
        if self.bar is not None:
            left = self.left()
            self.bar.set_postfix_str(f"~{duration(left)} left" if left is not None else "",
                                     refresh=False)
            self.bar.refresh()

    def print(self, line: str) -> None:
        if self.bar is not None:
            self.bar.clear()
        print(line, file=self.out, flush=True)
        if self.bar is not None:
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def summary(self) -> list[str]:
        """One row per study: variants, diverged runs, expectations by verdict, the verdict."""
        header = ["study", "variants", "diverged runs", *(f"findings {w}" for w in VERDICT_WORDS),
                  "checks", "post hoc", "verdict"]
        rows = []
        for name, (study, _) in self.studies.items():
            verdict = self.verdicts.get(name)
            counts = [verdict.cell(w) if verdict else "-" for w in VERDICT_WORDS]
            apart = [verdict.apart(k) if verdict else "-" for k in (Kind.CHECK, Kind.POST_HOC)]
            overall = verdict.short if verdict else "not reported (runs left)"
            rows.append([name, str(len(study.variants)), str(self.diverged.get(name, 0)),
                         *counts, *apart, overall])
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
        return [fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)]

    def finish(self, logdir: str, report: Optional[Path]) -> None:
        """The summary table, where the report is, and how to look at the curves."""
        self.close()
        studies = [s for s, _ in self.studies.values()]
        self.print("")
        self.print(f"Done in {duration(self.elapsed())}: {self.done} of {self.variants} variants.")
        for line in self.summary():
            self.print(line)
        self.print("")
        if report is not None:
            self.print(f"Report:       {report}")
        multi = len(studies) > 1 or (len(studies) == 1 and
                                      Path(logdir).resolve() != self.studies[studies[0].name][1].resolve())
        for line in tensorboard_lines(logdir, list(self.studies.values()), multi):
            self.print(line)

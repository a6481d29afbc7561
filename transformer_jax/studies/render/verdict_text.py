"""Markdown rendered from a study's record (record.py): verdict.md, summary.md, and the pieces
of them the results pages, the index and the terminal show. Pure functions of the record.
verdict.md and summary.md are laid out by templates/verdict.md.j2 and summary.md.j2
(studies/render/templating.py) from the pieces computed here: the tables (their cells formatted
here), the verdict's sentences, whose words follow the record's counts."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from transformer_jax.studies import convergence
from transformer_jax.studies.checks import PASS, CheckResult, Section
from transformer_jax.studies.records import record as record_lib
from transformer_jax.studies.render import bounds, templating
from transformer_jax.studies.render.markdown import cell
from transformer_jax.studies.study import KIND_WORDS, RATES, Comparison, Kind, Measure

TEMPLATES: Optional[Path] = None  # verdict.md's and summary.md's templates (None: the package's)
VERDICT_HEADER = ["expected", "kind", "per-seed values", "effect", "95 % interval", "threshold",
                  "verdict"]
PROBES_TITLE, ANALYSIS_TITLE = "## Step-0 probes (no training)", "## Analysis"
TUNING_TITLE = "## Tuned arms"
PLATEAU_TITLE = "## Budget: to the plateau"
FIXED_BUDGET_TITLE = "## Budget: fixed"
STOPPED = {"flattened": "every judged arm had flattened",
           "cap": "the cap stopped it: an arm was still gaining",
           "extend": "not finished: the rule asked for more steps"}


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(map(cell, r)) + " |" for r in rows)]


def expectation_cells(row: dict[str, Any], flat_window: float = convergence.FLAT_WINDOW
                      ) -> list[str]:
    """One row of verdict.md: expected, per-seed values, effect, interval, threshold, verdict
    (a late gain is over the run's last `flat_window` of steps: the record's summary says)."""
    comparison = Comparison(row["comparison"])
    effect, threshold, number = _effect_and_threshold(row, comparison)
    if row["at_step"] is not None:
        effect += f", at step {row['at_step']}"
    if Measure(row["measure"]) is Measure.LATE_GAIN:
        effect += f", gain over the last {round(100 * flat_window)} % of steps"
    low, high = row["interval"]["low"], row["interval"]["high"]
    interval = "unmeasured" if low is None or high is None else \
        f"[{number(low)}, {number(high)}]" + (
            "" if row["interval"]["paired"] or row["b"] is None else " unpaired")
    return [row["text"], kind_cell(row), per_seed_cell(row), effect, interval, threshold,
            verdict_words(row)]


def kind_cell(row: dict[str, Any]) -> str:
    """'finding'; 'check: why' or 'post hoc: why' (what makes it one)."""
    kind = record_lib.kind_of(row)
    return KIND_WORDS[kind] + (f": {row['why']}" if kind is not Kind.FINDING else "")


def verdict_words(row: dict[str, Any]) -> str:
    """'holds', 'does not hold (contradicted)', or 'inconclusive: ≈ 7 seeds would settle it
    ...' (with the note). A record judged before failures were told apart has no "failure"."""
    failure = row.get("failure")
    return (row["verdict"] + (f" ({failure})" if failure else "")
            + (f": {row['note']}" if row["note"] else ""))


HOLM_HEADER = "under Holm"


def holm_cell(row: dict[str, Any]) -> str:
    """What the verdict becomes under Holm's correction over the study's findings, with its
    p-value; in bold where it differs from the verdict ('—': a check or post hoc, not
    corrected: it is not counted as evidence)."""
    holm = row.get("holm")
    if holm is None:
        return "— (not a finding)"
    words = holm["verdict"] + (f" ({holm['failure']})" if holm["failure"] else "")
    if holm["verdict"] != row["verdict"]:
        words = f"**{words}**"
    p = holm["p"]
    return f"{words}, p {'< 0.0001' if p < 1e-4 else f'= {p:.2g}'}"


def failed_words(counts: dict[str, Any], verb: str = "do not hold") -> str:
    """'2 do not hold (1 contradicted, 1 smaller than stated)': how many failed and, where the
    record says, how (`verb`: as the sentence needs it)."""
    kinds = failure_kinds(counts)
    return f"{counts['failed']} {verb}" + (f" ({kinds})" if kinds else "")


def failure_kinds(counts: dict[str, Any]) -> str:
    """'1 contradicted, 1 smaller than stated' (the kinds that occur; '': none, or a record
    judged before failures were told apart)."""
    return ", ".join(f"{counts[key]} {name}" for key, name in
                     (("contradicted", "contradicted"),
                      ("smaller_than_stated", "smaller than stated")) if counts.get(key))


def _effect_and_threshold(row: dict[str, Any], comparison: Comparison):
    """(effect cell, threshold cell, the number format of both) of an expectation's row."""
    a, b, effect, margin = row["a"], row["b"], _nan(row["effect"]), row["margin"]
    if comparison in RATES:
        number = lambda x: f"{x:.1%}"  # noqa: E731
        runs = len(row["values"][a])
        side = "<" if row["higher_is_better"] else ">"
        text = (f"{number(effect)} ({round(effect * runs)}/{runs} runs of {a} fail: "
                f"diverged or {side} {row['threshold']:.4g})")
        at = "≥ " if comparison is Comparison.FAIL_RATE_AT_LEAST else "≤ "
        return text, at + number(margin), number
    if comparison is Comparison.WITHIN:
        number = lambda x: f"{x:+.1%}"  # noqa: E731
        return f"{number(effect)} ({a} vs {b})", f"within ±{margin:.1%}", number
    if comparison is Comparison.RATIO:
        number = lambda x: f"{x:.4g}×"  # noqa: E731
        order = f"{a} / {b}" if row["higher_is_better"] else f"{b} / {a}, lower is better"
        return f"{number(effect)} ({order}, geometric mean over seeds)", f"≥ {number(margin)}", \
            number
    number = lambda x: f"{x:.4g}"  # noqa: E731
    if comparison in (Comparison.AT_MOST, Comparison.AT_LEAST):
        at = "≤" if comparison is Comparison.AT_MOST else "≥"
        return f"{number(effect)} (mean of {a})", f"{at} {number(margin)}", number
    return f"{number(effect)} ({gain_words(row)})", f"≥ {number(margin)}", number


def gain_words(row: dict[str, Any]) -> str:
    """What a gain measures: 'a − b', 'b − a, lower is better', or for a difference of
    differences '(a − b) − (c − d)' (each pair reversed where lower is better)."""
    a, b, c, d = row["a"], row["b"], row.get("c"), row.get("d")
    lower = not row["higher_is_better"]
    pair = lambda x, y: f"{y} − {x}" if lower else f"{x} − {y}"  # noqa: E731
    words = pair(a, b) if c is None else f"({pair(a, b)}) − ({pair(c, d)}), paired by seed"
    return words + (", lower is better" if lower else "")


def _nan(x: Optional[float]) -> float:
    return float("nan") if x is None else x


def per_seed_cell(row: dict[str, Any]) -> str:
    """'a: 0.91, 0.9, diverged→0.2 · b: ...' in seed order (a failure rate: 'diverged'); a run
    that finished without a value (a refused control): 'no value→0.2'."""
    def cell(v: dict[str, Any]) -> str:
        if not v["diverged"]:
            return f"{_nan(v['value']):.4g}"
        why = "no value" if v.get("no_value") else "diverged"
        return why if v["value"] is None else f"{why}→{v['value']:.4g}"
    return " · ".join(f"{variant}: " + ", ".join(cell(v) for v in values)
                      for variant, values in row["values"].items())


def expectations_table(record: dict[str, Any], drop_per_seed: bool = False) -> list[str]:
    header = list(VERDICT_HEADER)
    window = record["summary"]["flat_window"]
    rows = [expectation_cells(row, window) for row in record["expectations"]]
    if any("holm" in row for row in record["expectations"]):  # judged before Holm: no column
        header.append(HOLM_HEADER)
        rows = [r + [holm_cell(row)] for r, row in zip(rows, record["expectations"])]
    if drop_per_seed:  # report.md: the table without the per-seed values
        at = header.index("per-seed values")
        header, rows = header[:at] + header[at + 1:], [r[:at] + r[at + 1:] for r in rows]
    return table(header, rows)


def overall_line(record: dict[str, Any]) -> str:
    """The study's headline: an alarm first where a check of the instrument does not hold; the
    findings' verdict (under Holm's correction, where it changes one); then the checks and the
    post hoc expectations, counted apart."""
    c = record["counts"]
    size = size_words(record)
    return (alarm_line(c) + (f"**{size}.** " if size else "")
            + f"**Verdict: the claim {c['overall']} on this run** "
            f"({findings_words(c)}; {seeds_words(record)}).") + holm_line(c) + apart_line(c)


# What a verdict judged at a size other than the default is (docs/verdicts.md: --size).
SIZE_WORDS = {"tiny": "a smoke run, not evidence",
              "large": "not the default size the committed results are judged at"}
LISTED_SEEDS = 8  # more seeds than this are written as a range


def size_words(record: dict[str, Any]) -> str:
    """'judged at --size=tiny: a smoke run, not evidence' for a record judged at a size other
    than the default; '' at the default, or for a record that predates sizes."""
    return at_size(record.get("size"), "judged")


def at_size(size: Optional[str], done: str) -> str:
    """'<done> at --size=tiny: a smoke run, not evidence' (done: 'judged', 'trained') at a size
    other than the default; '' at the default or an unknown size (None)."""
    if size in (None, "default"):
        return ""
    return f"{done} at --size={size}: {SIZE_WORDS.get(size, 'not the default size')}"


def seeds_words(record: dict[str, Any]) -> str:
    """'seeds [0, 1, 2]'; many seeds as a range, 'seeds 0–95 (96)'; an evaluation-only study's
    seeds are units of evaluation (sentences, pairs): '96 units of evaluation (0–95)'."""
    seeds = list(record["seeds"])
    if record.get("evaluation_only"):
        return f"{len(seeds)} units of evaluation ({seed_list(seeds).strip('[]')})"
    return f"seeds {seed_list(seeds)}" + (f" ({len(seeds)})" if len(seeds) > LISTED_SEEDS else "")


def seed_list(seeds: list[int]) -> str:
    """'[0, 1, 2]'; more than LISTED_SEEDS: '0–95' (consecutive) or '0, 1, 2, …, 99'."""
    if len(seeds) <= LISTED_SEEDS:
        return str(list(seeds))
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}–{seeds[-1]}"
    return f"{', '.join(map(str, seeds[:3]))}, …, {seeds[-1]}"


def findings_words(c: dict[str, Any]) -> str:
    """'2 hold, 1 does not hold (1 contradicted), 0 inconclusive of 3 findings'."""
    return (f"{c['held']} hold, {failed_words(c)}, {c['inconclusive']} inconclusive of "
            f"{c['total']} {'findings' if 'checks' in c else 'expectations'}")


def alarm_line(c: dict[str, Any]) -> str:
    """'**Alarm: ...** ' where a check of the instrument does not hold; '' where none."""
    alarms = c.get("alarms") or []
    if not alarms:
        return ""
    listed = "; ".join(f"“{text}”" for text in alarms)
    return (f"**Alarm: {len(alarms)} of {c['checks']['total']} checks of the instrument do not "
            f"hold ({listed}): the instrument may be broken, and the findings with it.** ")


def apart_line(c: dict[str, Any]) -> str:
    """' Counted apart, not as evidence: checks of the instrument 3 of 3 hold; post hoc 1 of 1
    hold.' ('' where the record has neither, or predates kinds)."""
    parts = [f"{words} {c[key]['held']} of {c[key]['total']} hold"
             for key, words in (("checks", "checks of the instrument"),
                                ("post_hoc", "post hoc (a threshold set after its values were "
                                             "seen)"))
             if c.get(key, {}).get("total")]
    return f" Counted apart, not as evidence: {'; '.join(parts)}." if parts else ""


def holm_line(counts: dict[str, Any]) -> str:
    """' Under Holm's correction ...: the claim partly holds (1 hold, ...).' where it differs
    from the verdict; '' where it does not, or the record was judged without it."""
    holm = counts.get("holm")
    if holm is None or all(holm[k] == counts[k] for k in ("held", "failed", "inconclusive")):
        return ""
    over = "findings" if "checks" in counts else "expectations"
    return (f" Under Holm's correction over its {holm['total']} {over} (family level "
            f"{holm['family_level']:g}): the claim {holm['overall']} ({holm['held']} hold, "
            f"{failed_words(holm)}, {holm['inconclusive']} inconclusive).")


def notes(record: dict[str, Any]) -> str:
    ratio = any(row["comparison"] == Comparison.RATIO.value for row in record["expectations"])
    ratio = (" A ratio is judged on the log scale (the t interval of the mean per-seed log "
             "ratio), shown back-transformed: the geometric mean ratio and its interval."
             if ratio else "")
    return (f"Effect: a − b (sign so that > 0 is better), the relative gap (a − b)/|b|, the "
            f"mean of a, {'the ratio a/b, ' if ratio else ''}or the fraction of a's runs that "
            f"fail.{ratio} Intervals: "
            f"{record['interval_method']}; with 3 seeds a t interval reaches 2.5 per-seed "
            f"standard deviations either side of the mean. A diverged run counts as the "
            f"expectation's `worst` if it sets one; else as the study's finished value least "
            f"favourable to the expectation, and a verdict that its value would change, or that "
            f"rests on fewer than two runs with a value, is inconclusive; a run that finished "
            f"without a value (a refused control: 'no value') counts the same way. A failure "
            f"rate counts a diverged run as failed.") + holm_note(record) \
        + judged_note(record)


def judged_note(record: dict[str, Any]) -> str:
    """Under which judging rules, and whether judged again without re-training ('': a record
    that predates both)."""
    rules = record.get("judging_rules")
    judged = record.get("judged")
    text = f" Judging rules: version {rules} (studies/judging_rules.py)." if rules else ""
    if judged:
        text += (f" Judged again at commit {judged['commit'][:12]} from the per-seed values in "
                 f"{' and '.join(judged['from'])}, without re-training.")
    return text


def holm_note(record: dict[str, Any]) -> str:
    """What the 'under Holm' column means ('': a record judged without it)."""
    holm = record["counts"].get("holm")
    if holm is None:
        return ""
    kinds = "checks" in record["counts"]
    return (f" Kind: a finding could have come out either way when it was written; a check "
            f"holds by construction or was known before the run (it shows that the instrument "
            f"works); post hoc: its threshold was set after its values were seen. Only findings "
            f"count as evidence (docs/verdicts.md)." if kinds else "") + (
            f" Under Holm: the verdict under Holm's step-down correction over the study's "
            f"{holm['total']} {'findings' if kinds else 'expectations'} at family level "
            f"{holm['family_level']:g}; p: the "
            f"smallest α at which the expectation's interval at confidence 1 − α is settled, "
            f"and a settled verdict whose p does not survive becomes inconclusive "
            f"(docs/verdicts.md).")


def tuning_lines(record: dict[str, Any]) -> list[str]:
    """'## Tuned arms': per arm its grid and each seed's chosen candidate (none: [])."""
    if not record.get("tuning"):
        return []
    lines = [TUNING_TITLE, ""]
    for arm, t in record["tuning"].items():
        chosen = [c["variant"] for c in t["choices"]]
        grid = "; ".join(f"{c}: " + ", ".join(f"{k}={v}" for k, v in o.items())
                         for c, o in t["candidates"].items())
        lines += [f"**{arm}**, chosen per seed by {t['selected_by']} (never by a judged "
                  f"metric) among: {grid}.", "",
                  *table(["seed", "chosen", "its training loss"],
                         [[str(c["seed"]), c["variant"] or "none (every candidate diverged)",
                           "—" if c["loss"] is None else f"{c['loss']:.4g}"]
                          for c in t["choices"]]), "",
                  "Share of the seeds: " + ", ".join(
                      f"{c} {chosen.count(c)}/{len(chosen)}" for c in t["candidates"]) + ".", "",
                  *grid_lines(t.get("grid"))]
    return lines


def grid_lines(grid: Optional[dict[str, Any]]) -> list[str]:
    """The grid a tuned arm reached (Study.extend_grid), and each optimum its cap left at an
    edge, flagged: a best setting not known to be one (none: [])."""
    if not grid:
        return []
    values = lambda xs: ", ".join(f"{x:g}" for x in xs)  # noqa: E731
    lines = [f"Grid of {grid['field']}: declared {values(grid['declared'])}, reached "
             f"{values(grid['reached'])} (a seed's choice at an edge adds the point ×"
             f"{grid['factor']:g} beyond it, up to {grid['cap']} beyond each end)."]
    if grid["interior"]:
        lines.append("Every seed's choice lies inside the grid reached.")
    lines += [f"**Flag: the cap left seed {e['seed']}'s optimum at the {e['edge']} edge "
              f"({e['value']:g}): not known to be its best setting.**"
              for e in grid["left_at_edge"]]
    return lines + [""]


def fixed_budget_lines(record: dict[str, Any]) -> list[str]:
    """'## Budget: fixed' (a study without a plateau budget): that its verdicts compare the arms
    at a fixed number of steps, and each variant's late change on the metrics they judge, so a
    reader sees which arms were still learning there (a record without them: [])."""
    steps, summary = record.get("budget", {}).get("steps"), record.get("summary", {})
    judged = summary.get("judged_metrics", [])
    rows = [[v["variant"], *(_late_change(v, m) for m in judged)]
            for v in summary.get("variants", [])]
    if not any(steps or []) or all(cell == "—" for row in rows for cell in row[1:]):
        return []  # nothing trained (an evaluation-only study), or no late change measured
    budget = (f"{steps[0]} steps" if len(steps) == 1 else
              f"up to {max(steps)} steps (a run that diverged stopped where it did)")
    return [FIXED_BUDGET_TITLE, "",
            f"Every run trained {budget}: a fixed budget, not run to the plateau (the study "
            "sets no `plateau=`), so its verdicts compare the arms at that budget. Each variant's "
            "change over its last 20 % of steps on the metrics the verdicts judge: near 0, it had "
            "flattened; far from 0, its final value measures how fast it learns as well as how "
            "far.", "", *table(["variant", *(f"{m}: late change" for m in judged)], rows), ""]


def _late_change(variant: dict[str, Any], metric: str) -> str:
    return late_change_cell(variant.get("late_change", {}).get(metric), digits=4)


def late_change_cell(found: Optional[dict[str, Any]], digits: int = 3) -> str:
    """A variant's late change as a table cell: '+0.0421 (200→250)', '—' where none."""
    if not found or found.get("change") is None:
        return "—"
    return f"{found['change']:+.{digits}g} ({found['start']}→{found['end']})"


def plateau_lines(record: dict[str, Any]) -> list[str]:
    """'## Budget: to the plateau': the rule, the budget reached and why it stopped there, and
    each judged arm's late gain at every stage (no plateau budget: the fixed budget's lines)."""
    p = record.get("plateau")
    if not p:
        return fixed_budget_lines(record)
    stages = p["stages"]
    gain = lambda a: "— (every run diverged)" if a["late_gain"] is None else (
        f"{a['late_gain']:+.4g}" + ("" if a["flattened"] else " (still gaining)"))
    return [PLATEAU_TITLE, "",
            f"Every run trained {p['first']} steps, then {p['step']} more at a time (constant "
            f"learning rate after the warm-up) until each arm an expectation on {p['metric']} "
            f"judges gained at most {p['amount']:g} over its last 20 % of steps (mean over its "
            f"seeds), or {p['cap']} steps. **Budget reached: {p['budget']} steps; "
            f"{STOPPED[p['stopped_by']]}.**", "",
            *table(["arm", *(f"late gain at {s['budget']}" for s in stages)],
                   [[arm, *(gain(s["arms"][arm]) for s in stages)] for arm in p["arms"]]), ""]


def sections(record: dict[str, Any]) -> list[str]:
    """The probes' and the analyses' markdown, each under its heading (none: [])."""
    lines = []
    if record["probes"]:
        lines += [PROBES_TITLE, "", record["probes"], ""]
    analysis = "\n\n".join(s["markdown"] for s in record["analyses"])
    if analysis:
        lines += [ANALYSIS_TITLE, "", analysis, ""]
    return lines


def verdict_markdown(record: dict[str, Any], curves: str = "curves.png") -> str:
    """verdict.md (templates/verdict.md.j2), its curves figure at `curves` (a file beside it;
    none for an evaluation-only study, which trained nothing). Its last line has no newline
    after it (as verdict.md always had), so the rendered page's last one is taken off."""
    return templating.render(
        "verdict.md.j2", TEMPLATES, study=record["study"], claim=record["claim"],
        published=record["published"], expectations="\n".join(expectations_table(record)),
        overall=overall_line(record), notes=notes(record),
        curves=None if record.get("evaluation_only") else curves,
        rest=plateau_lines(record) + tuning_lines(record) + sections(record)
    ).removesuffix("\n")


def checks(record: dict[str, Any]) -> list[CheckResult]:
    return [c for s in record["analyses"] for c in Section.from_json(s).checks]


def verdict_cell(record: dict[str, Any]) -> str:
    """'partly holds: 2 of 5 findings hold, 3 inconclusive; checks 4 of 4 hold; post hoc 1 of
    1 holds' (a table cell), an alarm first where a check does not hold; a study without
    expectations: how many of its analyses' checks pass."""
    c = record["counts"]
    size = size_words(record)
    if not c["total"] and not c.get("checks", {}).get("total") \
            and not c.get("post_hoc", {}).get("total"):
        found = checks(record)  # its findings are its analyses' checks: count those
        passed = sum(check.verdict == PASS for check in found)
        return (f"not judged (no expectations); its analyses' checks: {passed} of "
                f"{len(found)} pass" + (f" · **{size}**" if size else ""))
    failed = ", " + failed_words(c, "does not" if c["failed"] == 1 else "do not") \
        if c["failed"] else ""
    extra = failed + (f", {c['inconclusive']} inconclusive" if c["inconclusive"] else "")
    overall = c["overall"].removeprefix("is ")  # 'the claim is inconclusive'
    what = "findings" if "checks" in c else ""
    cell = (f"{overall}: {c['held']} of {c['total']} {what + ' ' if what else ''}hold{extra}"
            if c["total"] else "no findings")
    alarms = c.get("alarms") or []
    alarm = (f"**alarm: {len(alarms)} of {c['checks']['total']} checks do not hold** · "
             if alarms else "")
    apart = [f"{words} {c[key]['held']} of {c[key]['total']}"
             for key, words in (("checks", "checks"), ("post_hoc", "post hoc"))
             if c.get(key, {}).get("total")]
    return (alarm + cell + (f" · {', '.join(apart)} hold" if apart else "")
            + (f" · **{size}**" if size else ""))


def summary_over(record: dict[str, Any]) -> str:
    """What the final metrics are over."""
    return f"mean ± std [95 % interval] over {seeds_words(record)}, diverged runs left out"


def metric_cell(m: Optional[dict[str, Any]], metric: str = "") -> str:
    """'mean ± std [95 % interval of the mean]' over the finite values, the interval clipped
    to `metric`'s range (bounds.CLIPPED_NOTE)."""
    if m is None:
        return "—"
    if m["n"] == 1:
        return f"{m['mean']:.4g}"
    low, high = bounds.clip_to_bounds(metric, m["low"], m["high"])
    return f"{m['mean']:.4g} ± {m['std']:.2g} [{low:.4g}, {high:.4g}]"


def clipped_summary(record: dict[str, Any]) -> bool:
    """Whether any final-metrics interval of `record` is shown clipped (`metric_cell`)."""
    s = record["summary"]
    return any(m is not None and m["n"] > 1 and bounds.reaches_past_bounds(name, m["low"],
                                                                           m["high"])
               for v in s["variants"] for name, m in v["metrics"].items())


def summary_table(record: dict[str, Any]) -> list[str]:
    s = record["summary"]
    percent, window = round(100 * s["speed_fraction"]), round(100 * s["flat_window"])
    judged = s["judged_metrics"]
    header = (["variant", "overrides", "diverged"] + s["metrics"]
              + [f"{m}: step at {percent} % of best" for m in judged]
              + [f"{m}: change over the last {window} % of steps" for m in judged])
    rows = []
    for v in s["variants"]:
        late = [v["late_change"][m] for m in judged]
        rows.append([v["variant"], ", ".join(f"{k}={x}" for k, x in
                                             v["overrides"].items()) or "(base)",
                     f"{v['diverged']}/{v['runs']}",
                     *(metric_cell(v["metrics"][m], m) for m in s["metrics"]),
                     *("never" if v["speed"][m] is None else str(v["speed"][m]) for m in judged),
                     *(late_change_cell(c) for c in late)])
    return table(header, rows)


def intervals_line(record: dict[str, Any]) -> str:
    s = record["summary"]
    percent, window = round(100 * s["speed_fraction"]), round(100 * s["flat_window"])
    return (f"Intervals: {record['interval_method']}. Steps at {percent} % of best: the first "
            f"evaluation at which the variant's mean curve over its finished seeds reached "
            f"{percent} % of the best variant's final mean (for a lower-is-better metric, the "
            f"best divided by {s['speed_fraction']}); 'never': not within the run. "
            f"Change over the last {window} % of steps: the mean curve's last value minus its "
            f"value at the last evaluation at or before {100 - window} % of the run (steps in "
            f"brackets): near 0, the variant had flattened at this budget; far from 0, its "
            f"final value still measures how fast it learns as well as how far."
            + (f" {bounds.CLIPPED_NOTE}" if clipped_summary(record) else ""))


def summary_markdown(record: dict[str, Any]) -> str:
    """summary.md (templates/summary.md.j2): the final metrics' table and what it shows."""
    return templating.render("summary.md.j2", TEMPLATES, study=record["study"],
                             over=summary_over(record),
                             table="\n".join(summary_table(record)),
                             intervals=intervals_line(record))

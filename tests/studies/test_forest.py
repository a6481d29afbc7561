"""The forest plot (studies/render/forest.py), read back from matplotlib's objects, not its pixels:
a row per expectation in the record's order, each in its verdict's colour with its kind's marker, on
the scale it was judged on, its threshold and accepted region where the record puts them."""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.colors
import matplotlib.pyplot
import pytest

from transformer_jax.studies.records import provenance
from transformer_jax.studies.render import forest, pages

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"
GREEN, RED, ORANGE, GREY = "#2ca02c", "#d62728", "#ff7f0e", "#7f7f7f"


def _row(text, comparison="better", verdict="holds", failure=None, kind="finding", effect=0.3,
         low=0.2, high=0.4, margin=0.1, **more):
    return {"text": text, "kind": kind, "why": "", "metric": "eval/accuracy",
            "comparison": comparison, "a": "x", "b": "y", "higher_is_better": True,
            "threshold": None, "margin": margin, "at_step": None, "measure": "final",
            "effect": effect, "interval": {"low": low, "high": high, "paired": True},
            "verdict": verdict, "note": "", "failure": failure, **more}


ROWS = [
    _row("gain holds"),
    _row("gain contradicted", verdict="does not hold", failure="contradicted", effect=-0.1,
         low=-0.2, high=-0.05),
    _row("gain smaller", verdict="does not hold", failure="smaller than stated", effect=0.05,
         low=0.02, high=0.08, kind="check"),
    _row("ratio inconclusive", comparison="ratio", verdict="inconclusive", effect=3.0, low=1.2,
         high=9.0, margin=2.0, kind="post_hoc"),
    _row("one seed", comparison="at_most", effect=0.5, low=None, high=None, margin=0.6,
         verdict="inconclusive"),
    _row("all diverged", effect=None, low=None, high=None, verdict="inconclusive",
         note="refused: every run of x diverged"),
]


@pytest.fixture(autouse=True)
def _close_figures():
    """pyplot keeps every figure it made until closed, and warns past 20: the tests here draw
    many, and start with none left open by a test before them in the same worker."""
    matplotlib.pyplot.close("all")
    yield
    matplotlib.pyplot.close("all")


def _figure(rows=ROWS, machine="", **record):
    return forest.forest_figure({"study": "s", "expectations": rows, **record}, machine)


def _rows(fig):
    found = {ax.get_gid(): ax for ax in fig.axes if (ax.get_gid() or "").startswith("row ")}
    return [found[f"row {i}"] for i in range(len(found))]


def _line(ax, gid):
    return [line for line in ax.lines if line.get_gid() == gid]


def _hex(line):
    return matplotlib.colors.to_hex(line.get_color())


def test_one_row_per_expectation_in_its_verdicts_colour_with_its_kinds_marker():
    rows = _rows(_figure())
    assert len(rows) == len(ROWS)
    expected = [(GREEN, "o"), (RED, "o"), (ORANGE, "s"), (GREY, "^"), (GREY, "o")]
    for ax, (colour, marker), row in zip(rows, expected, ROWS):
        (effect,) = _line(ax, "effect")
        assert (_hex(effect), effect.get_marker()) == (colour, marker), row["text"]
        assert effect.get_xdata()[0] == row["effect"]
        assert _hex(_line(ax, "interval")[0]) == colour
    assert "[post hoc] ratio inconclusive" in rows[3].texts[0].get_text()


def test_each_row_is_on_the_scale_it_was_judged_on_with_its_threshold():
    rows = _rows(_figure())
    assert [ax.get_xscale() for ax in rows] == ["linear"] * 3 + ["log"] + ["linear"] * 2
    assert [line.get_xdata()[0] for line in _line(rows[0], "threshold")] == [0.1]
    assert [line.get_xdata()[0] for line in _line(rows[3], "threshold")] == [2.0]
    assert [line.get_xdata()[0] for line in _line(rows[3], "no effect")] == [1.0]
    assert _line(rows[0], "interval")[0].get_xdata().tolist() == [0.2, 0.4]
    # the ratio's axis pads on log values: 1.2 .. 9 spans the same decades either side
    left, right = rows[3].get_xlim()
    assert math.log10(1.0) - math.log10(left) == pytest.approx(
        math.log10(right) - math.log10(9.0))


def test_an_interval_without_an_end_runs_to_the_edge_and_an_unmeasured_effect_says_so():
    rows = _rows(_figure())
    assert len(_line(rows[4], "unbounded")) == 2
    assert _line(rows[4], "interval")[0].get_xdata().tolist() == list(rows[4].get_xlim())
    assert not _line(rows[5], "effect") and not _line(rows[5], "interval")
    assert "every run of x diverged" in next(t.get_text() for t in rows[5].texts
                                             if t.get_gid() == "unmeasured")


def test_an_unmeasured_rows_note_stays_inside_its_axis():
    """pretrained_claims' [CLS] note (109 characters) was printed on the axis' lower edge, one
    line wide, across the labels and the next row."""
    note = ("every run of matched_cls diverged: set Expectation.worst, the value a diverged run "
            "counts as")
    fig = _figure([_row("all diverged", effect=None, low=None, high=None, verdict="inconclusive",
                        note=note), _row("next")])
    fig.canvas.draw()
    ax = _rows(fig)[0]
    (text,) = [t for t in ax.texts if t.get_gid() == "unmeasured"]
    inside, box = ax.get_window_extent(), text.get_window_extent()
    assert inside.x0 <= box.x0 and box.x1 <= inside.x1
    assert inside.y0 <= box.y0 and box.y1 <= inside.y1
    assert "diverged run counts as" in text.get_text()
    matplotlib.pyplot.close(fig)  # pyplot keeps every figure it made: the file draws many


def test_the_accepted_region_of_a_gap_is_both_sides_of_no_gap():
    row = _row("gap", comparison="within", effect=0.01, low=-0.02, high=0.03, margin=0.05)
    (ax,) = _rows(_figure([row]))
    assert sorted(line.get_xdata()[0] for line in _line(ax, "threshold")) == [-0.05, 0.05]
    assert forest.accepted_region(row) == (-0.05, 0.05)


def test_a_tiny_record_says_so_in_the_title():
    fig = _figure(size="tiny")
    assert "tiny: a smoke run, not evidence" in fig._suptitle.get_text()


def test_the_title_names_the_cpu_of_the_values_and_the_pages_pass_the_records():
    assert "values from AMD EPYC, 2 CPUs (avx2)" in _figure(
        machine="AMD EPYC, 2 CPUs (avx2)")._suptitle.get_text()
    assert "values from" not in _figure()._suptitle.get_text()
    record = json.loads((RESULTS / "positions_provenance.json").read_text())
    assert provenance.machine_words(record["machine"]) == (
        f"{record['machine']['cpu']}, {record['machine']['cpus']} CPUs "
        f"({', '.join(record['machine']['cpu_flags'])})")
    assert provenance.machine_words(None) == "machine not recorded"


@pytest.mark.slow  # the page reads its design's history: git (a process, tests/fast_lane.py)
def test_a_study_page_draws_its_forest_with_its_provenance_machine(tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr(forest, "write_forest",
                        lambda record, path, machine="": drawn.update(machine=machine))
    entry = next(e for e in pages.results_entries(RESULTS) if e.files.name == "positions")
    monkeypatch.setattr(pages, "_write", lambda path, text: path)
    # the page's history section reads git's history of the study (seconds), not the machine
    monkeypatch.setattr(pages, "page_history", lambda entry, registered: None)
    pages.write_study_page(entry)
    record = json.loads((RESULTS / "positions_provenance.json").read_text())
    assert drawn["machine"] == provenance.machine_words(record["machine"])


def test_the_committed_records_rows_and_colours():
    """positions' record: every expectation a row, in its verdict's colour."""
    record = json.loads((RESULTS / "positions_verdict.json").read_text())
    rows = _rows(forest.forest_figure(record))
    assert len(rows) == len(record["expectations"])
    colours = {"holds": GREEN, "inconclusive": GREY}
    for ax, row in zip(rows, record["expectations"]):
        assert row["text"][:40] in ax.texts[0].get_text().replace("\n", " ")
        assert _hex(_line(ax, "effect")[0]) == colours.get(row["verdict"], RED)


def test_no_expectations_no_figure(tmp_path):
    path = tmp_path / "forest.png"
    path.write_text("old")
    assert forest.write_forest({"study": "s", "expectations": []}, path) is None
    assert not path.exists()

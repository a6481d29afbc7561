"""Why a plateau's cap stopped a study (studies/records/cap_reason.py): the arms still gaining, the
suite's time against its limit, and whether one more stage would fit, on the page."""
from __future__ import annotations

import json
from pathlib import Path

from transformer_jax.studies.design import catalog
from transformer_jax.studies.records import cap_reason, suite_time
from transformer_jax.studies.render import pages

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"


def _record(stopped_by="cap", cap=2400, step=400, size="default"):
    arms = {"a_flat": {"late_gain": 0.001, "flattened": True},
            "b_climbing": {"late_gain": 0.05, "flattened": False},
            "c_lost": {"late_gain": None, "flattened": False},
            "d_climbing": {"late_gain": 0.03, "flattened": False}}
    return {"size": size, "plateau": {"amount": 0.02, "cap": cap, "step": step,
                                      "stopped_by": stopped_by, "arms": arms}}


def _suite(wall_s, size="default", studies=("x",)):
    return {"suite": "s", "size": size, "wall_s": wall_s, "end": "2026-12-06T18:50:26+00:00",
            "studies": list(studies),
            "machine": {"cpu": "AMD EPYC", "cpus": 2}}


def test_nothing_is_said_unless_the_cap_stopped_it():
    assert cap_reason.cap_lines({"plateau": None}, "s", _suite(100.0), 30) == []
    assert cap_reason.cap_lines(_record("flattened"), "s", _suite(100.0), 30) == []


def test_it_names_the_arms_still_gaining_and_not_the_flat_or_the_lost_ones():
    assert cap_reason.still_gaining(_record()["plateau"]) == ["b_climbing", "d_climbing"]
    text = cap_reason.cap_lines(_record(), "s", _suite(600.0), 30)[0]
    assert "At 2400 steps b_climbing, d_climbing still gained more than 0.02" in text
    assert "a_flat" not in text and "c_lost" not in text


def test_one_more_stage_over_the_limit_says_the_suite_could_not_go_further():
    # 27 min at a cap of 1500: one more 250-step stage is 27 × 1750/1500 = 31 min 30 s
    text = cap_reason.cap_lines(_record(cap=1500, step=250), "s", _suite(27 * 60.0), 30)[0]
    assert "took 27 min 00 s at this cap (AMD EPYC, 2 CPUs, 2026-12-06)" in text
    assert "about 31 min 30 s (its time × 1750/1500), over its limit of 30 min" in text
    assert "could not go further" in text


def test_in_a_suite_of_several_studies_the_estimate_is_a_bound_and_over_it_decides_nothing():
    text = cap_reason.cap_lines(_record(cap=500, step=100), "s",
                                _suite(550.0, studies=("x", "y")), 10)[0]
    assert "about 11 min 00 s (its time × 600/500, an upper bound" in text
    assert "whether the suite could go further is not shown" in text
    assert "could not go further" not in text


def test_one_more_stage_within_the_limit_says_a_higher_cap_fits():
    # 24 min at 2400: 24 × 2800/2400 = 28 min
    text = cap_reason.cap_lines(_record(), "s", _suite(24 * 60.0), 30)[0]
    assert "about 28 min 00 s" in text and "within its limit of 30 min" in text
    assert "could not go further" not in text


def test_without_a_suite_time_of_the_records_size_it_says_it_is_not_known():
    for suite in (None, _suite(600.0, size="tiny")):
        text = cap_reason.cap_lines(_record(), "s", suite, 30)[0]
        assert "No time of suite `s` at this size is recorded" in text
        assert "limit" in text and "took" not in text


def test_the_committed_depth_remedies_nonorm_page_says_why_its_cap_stopped_it():
    # the page as written from the committed records: its suite's time, its limit, its arms
    # (softmax_plateau, which this read first, is retired for its two parts: neither was stopped
    # by its cap)
    name = "depth_remedies_nonorm"
    entry = next(e for e in pages.results_entries(RESULTS) if e.files.name == name)
    verdict = json.loads((RESULTS / f"{name}_verdict.json").read_text())
    suite = suite_time.read(RESULTS / suite_time.file_name(name))
    page = pages.render_page(entry, verdict, "", None, None, None, pages.suite_record(entry))
    expected = cap_reason.cap_lines(verdict, name, suite, catalog.limit_minutes(name))
    assert expected and expected[0] in page and "none_res_depth_scaled_L24" in expected[0]
    assert catalog.limit_minutes("main") == 10 and catalog.limit_minutes("all") is None

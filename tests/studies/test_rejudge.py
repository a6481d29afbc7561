"""Re-judging committed results from the per-seed values their files hold (issue 49, item 8):
the same rules give the same verdicts; an amended expectation is judged on the recorded values;
what no file holds is refused, not guessed."""
import json
import math
import shutil
from pathlib import Path

import pytest

from transformer_jax.studies import rejudge
from transformer_jax.studies.records import record
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"


def test_summary_csv_gives_every_run_with_diverged_runs_as_nan(tmp_path):
    path = tmp_path / "s_summary.csv"
    path.write_text("variant,seed,state,steps,eval/accuracy\na,0,finished,10,0.5\n"
                    "a,1,diverged,4,0.9\nb,0,finished,10,0.25\n")
    found = rejudge.from_summary_csv(path)["eval/accuracy"]
    assert found["a"][0] == 0.5 and math.isnan(found["a"][1]) and found["b"] == {0: 0.25}


def test_the_record_gives_its_rows_values_with_diverged_runs_as_nan():
    old = record.read(RESULTS / "depth_sweep_verdict.json")
    found = rejudge.from_record(old)[("eval/accuracy", "final", None)]
    assert all(math.isnan(x) for x in found["res_no_norm_L24"].values())  # diverged: was 0
    # a finished run's value as printed (4 significant digits): summary.csv's, to that precision
    full = rejudge.from_summary_csv(RESULTS / "depth_sweep_summary.csv")["eval/accuracy"]
    assert found["pre_res_L24"][0] == pytest.approx(full["pre_res_L24"][0], abs=1e-4)
    assert found["pre_res_L24"][0] != full["pre_res_L24"][1]  # the seed's own value


@pytest.mark.parametrize("name", ["scaling", "positions", "norm_placement"])
def test_judging_the_same_values_again_gives_the_same_verdicts(name):
    """summary.csv's full-precision values against the record's printed ones: same verdicts."""
    old = record.read(RESULTS / f"{name}_verdict.json")
    size = json.loads((RESULTS / f"{name}_preregistration.json").read_text())["size"]
    study = load_study(REPO / "experiments" / f"{name}.py", size)
    summary = rejudge.from_summary_csv(RESULTS / f"{name}_summary.csv")
    stops = rejudge.stops_from_summary_csv(RESULTS / f"{name}_summary.csv")
    new = rejudge.rejudged_record(study, old, summary, "c" * 40, stops)
    assert [r["verdict"] for r in new["expectations"]] == \
        [r["verdict"] for r in old["expectations"]]
    assert new["judged"]["commit"] == "c" * 40 and new["analyses"] == old["analyses"]


def test_values_no_file_holds_are_refused_not_guessed():
    study = load_study(REPO / "experiments" / "scaling.py", "default")
    old = dict(record.read(RESULTS / "scaling_verdict.json"), expectations=[])
    with pytest.raises(rejudge.RejudgeError, match="re-run the study"):
        rejudge.rejudged_record(study, old, {}, "c" * 40, {})  # neither summary.csv nor rows


def test_a_changed_verdict_is_listed():
    old = {"expectations": [{"text": "x", "verdict": "holds", "note": ""}]}
    new = {"expectations": [{"text": "x", "verdict": "does not hold", "note": ""},
                            {"text": "y", "verdict": "holds", "note": ""}]}
    assert rejudge.changes(old, new) == ["x: holds -> does not hold", "y: (new) -> holds"]
    assert rejudge.changes(new, new) == []


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
def test_the_command_rewrites_a_results_directory(tmp_path):
    for folder in ("experiments", "configs"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.png"))
    results = tmp_path / "experiments" / "results"
    assert rejudge.main(["residual_flow", f"--results={results}", "--readme="]) == 0
    new = record.read(results / "residual_flow_verdict.json")
    assert [r["comparison"] for r in new["expectations"]].count("at_least") == 2
    assert "mean ratio ≥ 0.5" in (results / "residual_flow_verdict.md").read_text()
    # its page and figure written again (copied without figures), no other study's
    assert sorted(p.name for p in results.glob("*_forest.png")) == ["residual_flow_forest.png"]
    assert rejudge.main(["nonexistent", f"--results={results}", "--readme="]) == 2

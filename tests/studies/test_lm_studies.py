"""The real-text studies (experiments/lm_*.py) end to end at --size=tiny on the local tiny
Shakespeare, and the sweep's --suite filter that keeps them out of the main job."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_jax.studies.design import loading
from transformer_jax.studies.design.catalog import SUITES
from transformer_jax.studies.run import sweep
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.config import ConfigError
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
LM_STUDIES = ("lm_positions", "lm_scaling", "lm_bfloat16", "lm_heads")
SUITE = {"lm_positions": "lm", "lm_scaling": "lm", "lm_heads": "lm", "lm_bfloat16": "precision"}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def lm_suite(tmp_path_factory, shakespeare_file, tj_data_dir, compilation_cache) -> dict:
    """The real-text studies at --size=tiny in one sweep, as `scripts/run.sh --suite=all` runs
    them (lm_bfloat16 is the precision suite's, the others the lm suite's):
    runs whose configs are the same (lm_scaling's dk16_scaled, lm_bfloat16's float32 and lm_heads'
    h2 are lm_positions' sinusoidal; h1 is dk32_scaled) are trained once and linked.
    name -> (study, root, reported)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TJ_SHAKESPEARE", shakespeare_file)
        # Two seeds each, where the studies run 3 or 5: every path a second seed takes (intervals,
        # the analyses' per-seed and seed-pair rows) at fewer per-seed analyses and checkpoints.
        studies = {name: dataclasses.replace(load_study(EXPERIMENTS / f"{name}.py", "tiny"),
                                             seeds=SEEDS) for name in LM_STUDIES}
    base = tmp_path_factory.mktemp("lm_suite")
    for name, study in studies.items():
        assert study.suite == SUITE[name] and study.base.data.text_path == shakespeare_file
        study.base.data.data_dir = tj_data_dir  # the session's prepared data (unlocked base)
        # One layer, where the tiny size has two: the 11 distinct models' ~130 programs compile
        # in ~10-15 CPU-s less, and nothing checked here counts layers (the analyses on two
        # layers: test_induction.py's L2)
        study.base.model.num_layers = 1
        # 4 steps, where the tiny size trains 20: compiling is what costs here, and nothing
        # checked here reads what training reached (one eval, log and checkpoint, at the end)
        study.base.train.update(num_steps=4, warmup_steps=1, eval_every=4, log_every=4,
                                checkpoint_every=4)
    reported = sweep.run_studies([(s, str(base / n), None) for n, s in studies.items()], (0, 1))
    return {n: (s, base / n, reported[n]) for n, s in studies.items()}


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_identical_runs_of_the_lm_studies_are_trained_once(lm_suite):
    linked = {(name, variant): os.readlink(root / variant / "seed_0")
              for name, (study, root, _) in lm_suite.items() for variant in study.variants
              if (root / variant / "seed_0").is_symlink()}
    assert linked == {("lm_scaling", "dk16_scaled"): "../../lm_positions/sinusoidal/seed_0",
                      ("lm_bfloat16", "float32"): "../../lm_positions/sinusoidal/seed_0",
                      ("lm_heads", "h1"): "../../lm_scaling/dk32_scaled/seed_0",
                      ("lm_heads", "h2"): "../../lm_positions/sinusoidal/seed_0"}, linked


@pytest.mark.parametrize("name", LM_STUDIES)
@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_lm_study_at_tiny_size_writes_its_verdict(lm_suite, name):
    study, root, reported = lm_suite[name]
    assert reported
    for variant, seed in study.runs():
        status = workdir_lib.read_status(root / variant / f"seed_{seed}")
        assert status["state"] == "finished" and "bits_per_char" in status["eval"], status
    verdict = (root / "verdict.md").read_text()
    for e in study.expectations:
        assert e.text in verdict
    assert "eval/bits_per_char" in (root / "summary.csv").read_text().splitlines()[0]
    if name == "lm_scaling":
        assert "Growth of the penalty" in verdict and (root / "penalty_by_head_dim.png").exists()
    if name == "lm_heads":
        assert "### What the heads learned" in verdict and (root / "head_roles.png").exists()
        assert "| h4: some head's previous-token score ≥ 0.5 | " in verdict
    if name == "lm_bfloat16":  # both variants' runs measured, a check row per variant
        assert "### How far the rounding moves the gradient, against the batch" in verdict
        for variant in study.variants:
            assert f"| {variant}: the rounding moves the gradient ≤ 0.1 × as far" in verdict
            assert f"| {variant} | 1 | " in verdict  # its seed 1's row


def test_text_path_defaults_to_the_shared_copy_else_the_hub(monkeypatch, tmp_path):
    monkeypatch.delenv("TJ_SHAKESPEARE", raising=False)
    positions = load_study(EXPERIMENTS / "lm_positions.py", "tiny")
    shared = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
    assert positions.base.data.text_path == (str(shared) if shared.is_file() else "")
    monkeypatch.setenv("TJ_SHAKESPEARE", "")  # explicitly the TFDS hub dataset
    for name in LM_STUDIES:
        assert load_study(EXPERIMENTS / f"{name}.py", "tiny").base.data.text_path == ""


def test_the_sweep_takes_the_text_as_a_flag(monkeypatch, tmp_path):
    """--text_path, not only $TJ_SHAKESPEARE: it wins over the variable, '' is the TFDS dataset,
    and a missing file is one line before anything loads."""
    mine = tmp_path / "mine.txt"
    mine.write_text("To be, or not to be: that is the question.\n" * 100)
    monkeypatch.setenv("TJ_SHAKESPEARE", str(tmp_path / "elsewhere.txt"))
    sweep.use_text(str(mine))
    for name in LM_STUDIES:
        assert load_study(EXPERIMENTS / f"{name}.py", "tiny").base.data.text_path == str(mine)
    sweep.use_text("")
    assert load_study(EXPERIMENTS / "lm_positions.py", "tiny").base.data.text_path == ""
    with pytest.raises(ConfigError, match=r"^--text_path='.*missing.txt' is not a file; give a "):
        sweep.use_text(str(tmp_path / "missing.txt"))
    done = subprocess.run(
        [sys.executable, "-m", "transformer_jax.sweep", "--experiment=experiments/lm_positions.py",
         f"--workdir={tmp_path / 'runs'}", f"--text_path={tmp_path / 'missing.txt'}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"error: --text_path='{tmp_path / 'missing.txt'}' is not a file; give a local UTF-8 "
        "text file, or --text_path='' for the TFDS dataset tiny_shakespeare (downloaded once)"]
    assert not (tmp_path / "runs").exists()


def test_lm_scaling_varies_only_the_head_width():
    study = load_study(EXPERIMENTS / "lm_scaling.py", "default")
    widths = set()
    for variant in study.variants:
        config = study.config(variant, 0)
        widths.add(config.model.d_model)
        d_k = config.model.d_model // config.model.num_heads
        assert variant == f"dk{d_k}_{'scaled' if config.model.attn_scale else 'unscaled'}"
    assert len(widths) == 1 and len({study.config(v, 0).train.learning_rate
                                     for v in study.variants}) == 1


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_suites_filter_the_studies_of_a_directory(size, monkeypatch):
    # Each experiment file loaded once, not once per suite asked for (~20 times each)
    loaded, load = {}, loading.load_study

    def once(path, size):
        if (path, size) not in loaded:
            loaded[(path, size)] = load(path, size)
        return loaded[(path, size)]
    monkeypatch.setattr(loading, "load_study", once)
    main = {s.name for s, _ in sweep.select_studies(EXPERIMENTS, size, "main")}
    lm = [s.name for s, _ in sweep.select_studies(EXPERIMENTS, size, "lm")]
    everything = [s.name for s, _ in sweep.select_studies(EXPERIMENTS, size, "all")]
    assert lm == [n for n in LM_STUDIES if SUITE[n] == "lm"] and not main & set(LM_STUDIES)
    assert {"scaling", "positions"} <= main
    of = {name: [s.name for s, _ in sweep.select_studies(EXPERIMENTS, size, name)]
          for name in SUITES if name != "all"}
    # Every declared suite holds a study, no study is in two suites, and 'all' is their union.
    assert all(of.values()), [name for name, studies in of.items() if not studies]
    assert sum(len(v) for v in of.values()) == len(everything) == len(set(everything))
    assert set(everything) == set().union(*of.values())
    assert "heads" in set(of["components"])
    assert "causal_mask" in of["mechanisms"]
    assert of["precision"] == ["lm_bfloat16"]  # alone: its bfloat16 arm is slow where emulated
    assert of["circuits"] == ["lm_head_roles"]  # alone: its one 4,000-step run fills 20 minutes
    for alone in ("depth_sweep", "depth_deepest", "depth_remedies_pre", "depth_remedies_post", "depth_remedies_nonorm",
                  "depth_remedies_noresidual", "depth_article_pre", "depth_article_post",
                  "depth_article_nonorm", "softmax_plateau_narrow",
                  "softmax_plateau_wide", "lm_head_dim", "induction",
                  "induction_matched"):
        assert of[alone] == [alone]
    # the main suite first, then each suite's studies together (suites by name)
    assert everything[:len(main)] == [n for n in everything if n in main]
    for studies in of.values():
        first = everything.index(studies[0])
        assert everything[first:first + len(studies)] == studies
    with pytest.raises(ConfigError, match=f"--suite='nope' is not one of: {', '.join(SUITES)}"):
        sweep.select_studies(EXPERIMENTS, size, "nope")


@pytest.mark.parametrize("args", [["--suite=nope"], ["WORKDIR", "--suite", "nope", "--jobs=1"]])
def test_bad_suite_through_run_sh_is_one_line_and_exit_2(tmp_path, args):
    """scripts/run.sh takes --suite anywhere, WORKDIR first among the rest, and hands it to the
    sweep, which refuses a bad one before any workdir is made (so nothing trains here)."""
    args = [str(tmp_path / "w") if a == "WORKDIR" else a for a in args]
    result = subprocess.run(["bash", "scripts/run.sh", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert f"--suite='nope' is not one of: {', '.join(SUITES)}" in errors[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "w").exists() and not (REPO / "runs" / "nope_studies").exists()

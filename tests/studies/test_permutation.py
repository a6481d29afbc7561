"""The permutation probe as per-run values a verdict judges (positions' expectations): each
finished encoder run's model at initialization, without positions equivariant within float32
rounding and with a scheme not; decoder runs give none."""
from __future__ import annotations

import json
from pathlib import Path

from tiny_study import tiny_experiment

from transformer_jax.studies.analysis import permutation
from transformer_jax.studies.study import Comparison, load_study

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "positions.py"


def test_each_finished_encoder_run_gets_its_permutation_gap(tmp_path):
    study = tiny_experiment(EXPERIMENT, tmp_path / "data")
    runs = {}
    for variant in ("encoder_none", "encoder_rotary", "decoder_none"):
        run_dir = tmp_path / variant / "seed_1"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps(study.config(variant, 1).to_dict()))
        runs[(variant, 1)] = {"status": {"state": "finished"}, "curves": {}}
    runs[("encoder_learned", 1)] = {"status": {"state": "diverged"}, "curves": {}}
    gaps = permutation.analyse(tmp_path, runs).values[permutation.METRIC]
    assert set(gaps) == {("encoder_none", 1), ("encoder_rotary", 1)}  # finished encoders only
    assert gaps[("encoder_none", 1)] <= 1e-5 < 0.1 <= gaps[("encoder_rotary", 1)]


def test_positions_judges_the_gap_of_every_encoder():
    study = load_study(EXPERIMENT, "default")
    judged = {e.a: e for e in study.expectations if e.metric == permutation.METRIC}
    assert set(judged) == {f"encoder_{p}" for p in ("none", "sinusoidal", "learned", "rotary",
                                                    "alibi")}
    assert judged["encoder_none"].comparison is Comparison.AT_MOST
    assert all(e.comparison is Comparison.AT_LEAST and e.margin >= 1e3 * judged["encoder_none"]
               .margin for v, e in judged.items() if v != "encoder_none")

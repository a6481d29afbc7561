"""The depth study (experiments/_depth.py, in two parts: depth_sweep and depth_deepest) and its
analysis (transformer_jax/studies/analysis/depth.py): variants named by architecture and depth,
expectations that compare one architecture at two depths, and accuracy-by-depth points,
intervals, csv and plot from made-up runs."""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.studies.analysis import depth as depth_eval
from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design.loading import load_module
from transformer_jax.studies.render import bounds
from transformer_jax.train import check_config

REPO = Path(__file__).resolve().parents[2]


PARTS = ("depth_sweep", "depth_deepest")  # experiments/_depth.py: depth, split by width


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_every_architecture_at_every_depth_and_expectations_across_depths(size):
    experiment = load_module(REPO / "experiments" / "_depth.py")
    parts = [study_lib.load_study(REPO / "experiments" / f"{n}.py", size) for n in PARTS]
    assert tuple(p.suite for p in parts) == PARTS
    variants = [v for p in parts for v in p.variants]
    tuned = {arm: c for p in parts for arm, c in p.tuned.items()}
    expectations = [e for p in parts for e in p.expectations]

    def config(variant: str):
        return next(p for p in parts if variant in p.variants).config(variant, 0)
    table = {}
    for variant in variants:
        cfg = config(variant)
        _, model = check_config(cfg)
        line, depth = depth_eval.NAME.match(variant).groups()
        assert model.num_layers == int(depth)
        # a tuned arm's candidate at another rate or the article's width: its architecture's
        name, width, rate = re.match(r"^(.+?)(?:_w(\d+))?(?:_lr([\d.e-]+))?$", line).groups()
        assert cfg.train.learning_rate == float(rate or experiment.LEARNING_RATE)
        assert model.d_model == int(width or parts[0].base.model.d_model)
        if line == name:
            table.setdefault(name, set()).add(model.num_layers)
        # a careful arm is one of the probed architectures, trained with warm-up (and clipping)
        architecture, train = experiment.CAREFUL.get(name, (name, {}))
        assert (model.norm.value, model.residual) == \
            tuple(x.value if hasattr(x, "value") else x for x in depth_eval.PROBED[architecture])
        if name in experiment.CAREFUL:
            assert cfg.train.warmup_steps == cfg.train.num_steps // 4 > 0
            assert cfg.train.grad_clip_norm == train.get("train.grad_clip_norm", 0.0)
        else:
            assert cfg.train.warmup_steps == 0 and cfg.train.grad_clip_norm == 0.0
        own = ("warmup_steps", "grad_clip_norm", "learning_rate")
        others = {k: v for k, v in cfg.train.items() if k not in own}
        shallowest = experiment.SIZES[size]["depths"][0]
        anchor = config(experiment.variant("pre_res", shallowest)).train
        assert others == {k: v for k, v in anchor.items() if k not in own}
    assert set(table) == set(depth_eval.PROBED) | set(experiment.CAREFUL)
    assert len({frozenset(d) for d in table.values()}) == 1
    if size == "default":
        assert next(iter(table.values())) == {2, 6, 12, 24}
    across = [e for e in expectations
              if e.b and e.a.rsplit("_L", 1)[0] == e.b.rsplit("_L", 1)[0]]
    assert len(across) >= 3  # flat (Pre-LN), collapses (no residual), degrades (Post-LN, no norm)
    # issue 50: every tuned arm's candidates differ in the learning rate only, each arm a new
    # verdict rests on has a flattened check, and the article's depth is there
    for arm, names in tuned.items():
        configs = [config(c).to_dict() for c in names]
        rates = sorted(c["train"].pop("learning_rate") for c in configs)
        assert rates == list(experiment.LEARNING_RATES) and configs[0] == configs[1], arm
    checked = {e.a for e in expectations if e.measure is study_lib.Measure.LATE_GAIN}
    assert set(tuned) <= checked
    assert experiment.SIZES[size]["article"][0] in {config(v).model.num_layers for v in variants}
    assert parts[0].plateau.first == experiment.SIZES[size]["steps"]


def made_up_runs() -> dict:
    """pre_res flat at 0.9 ± 0.01; pre_no_res falling with depth, one diverged run at L24."""
    values = {("pre_res", 2): [0.90, 0.91, 0.89], ("pre_res", 24): [0.92, 0.90, 0.91],
              ("pre_no_res", 2): [0.60, 0.62, 0.58], ("pre_no_res", 24): [0.10, 0.12, math.nan]}
    runs = {}
    for (architecture, depth), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            state = "diverged" if math.isnan(value) else "finished"
            runs[(f"{architecture}_L{depth}", seed)] = {
                "status": {"state": state}, "curves": {depth_eval.METRIC: [(100, value)]}}
    return runs


def test_accuracy_by_depth_points_intervals_csv_and_plot(tmp_path):
    text = depth_eval.accuracy_by_depth(tmp_path, made_up_runs())
    row = next(l for l in text.splitlines() if l.startswith("| pre_no_res |"))
    # the diverged run counts as 0: mean (0.10 + 0.12 + 0) / 3, Student-t interval around it
    low, high = study_lib.interval_of_mean(np.array([0.10, 0.12, 0.0]))
    assert low < 0 and f"0.073 [0.00, {high:.2f}] (1 diverged)" in row, row  # shown clipped
    assert bounds.CLIPPED_NOTE in text
    assert row.split(" | ")[1].startswith("0.600 [")
    assert "| architecture | 2 layers | 24 layers |" in text
    with (tmp_path / depth_eval.CSV_FILE).open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    diverged = [r for r in rows if r["diverged"] == "1"]
    assert [(r["architecture"], r["depth"], r["seed"], r["accuracy"]) for r in diverged] == \
        [("pre_no_res", "24", "2", "")]
    assert (tmp_path / depth_eval.PLOT_FILE).stat().st_size > 1000


def test_a_variant_not_named_by_depth_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="<architecture>_L<depth>"):
        depth_eval.by_depth({("pre_res", 0): {"status": {}, "curves": {}}})


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_probe_shows_no_residual_collapsing_faster_than_pre_ln(tmp_path):
    text = depth_eval.write_probes(tmp_path, depth=3)
    rows = {l.split(" | ")[0].strip("| "): [float(x) for x in l.strip(" |").split(" | ")[1:]]
            for l in text.splitlines() if l.startswith("| pre_")}
    assert rows["pre_no_res"][-1] > 0.99 > rows["pre_res"][-1]  # rank collapse after 3 layers
    assert (tmp_path / depth_eval.PROBE_FILE).exists()


def test_the_plot_draws_a_panel_for_every_architecture(tmp_path):
    """Six architectures (the depth study's four and its two careful arms): six panels, none
    dropped (tests/studies/test_plots.py reads the figure itself)."""
    names = ["a", "b", "c", "d", "e", "f"]
    points = {n: {d: {"mean": 0.5, "low": 0.4, "high": 0.6, "diverged": 0, "runs": 3}
                  for d in (2, 24)} for n in names}
    assert depth_eval._plot(points, tmp_path / "p.png") == names


def test_intervals_past_1_are_shown_clipped_and_said_so(tmp_path):
    runs = {(f"pre_res_L{d}", seed): {"status": {"state": "finished"},
                                      "curves": {depth_eval.METRIC: [(100, value)]}}
            for d in (2, 24) for seed, value in enumerate([0.98, 0.99, 1.0])}
    text = depth_eval.accuracy_by_depth(tmp_path, runs)
    row = next(l for l in text.splitlines() if l.startswith("| pre_res |"))
    assert "0.990 [0.97, 1.00]" in row, row  # 0.99 + 0.025 printed as 1
    assert bounds.CLIPPED_NOTE in text
    inside = {run: r for run, r in made_up_runs().items() if run[0].startswith("pre_res_")}
    assert bounds.CLIPPED_NOTE not in depth_eval.accuracy_by_depth(tmp_path, inside)


def test_the_table_reads_back_from_its_csv(tmp_path):
    depth_eval.accuracy_by_depth(tmp_path, made_up_runs())
    again = depth_eval.read_csv(tmp_path / depth_eval.CSV_FILE)
    table = depth_eval.by_depth(made_up_runs())
    assert again.keys() == table.keys()
    for architecture, per_depth in table.items():
        for depth, per_seed in per_depth.items():
            np.testing.assert_allclose(list(again[architecture][depth].values()),
                                       list(per_seed.values()), atol=1e-4)

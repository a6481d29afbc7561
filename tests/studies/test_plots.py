"""The study figure (transformer_jax/studies/render/plots.py) on constructed curves shaped like
norm_placement's (one variant's loss ~100x and gradient norm ~10^4x the others'), its colours
and line styles from the variants' overrides (qk_norm's, positions'), overlapping curves, the
labels (normalized entropy, the eval lengths), the length analysis' figure, and the depth
analysis' small multiples (a panel per architecture, no line across a depth not run, chance)."""
from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.studies.judge import stats
from transformer_jax.studies.render import plots

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ["post", "pre", "no_norm", "post_no_warmup", "pre_no_warmup", "pre_dyt", "pre_rms"]
METRICS = ("eval/accuracy", "eval/loss", "train/grad_norm", "attention/entropy/layer_00")


@pytest.fixture(autouse=True)
def _matplotlib_config(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))


def _study_and_runs():
    study = types.SimpleNamespace(name="norm_placement", metrics=METRICS, seeds=(0, 1, 2),
                                  variants={v: {} for v in VARIANTS})
    rng = np.random.default_rng(0)
    steps = range(0, 301, 30)
    runs = {}
    for i, v in enumerate(VARIANTS):
        big = v == "no_norm"
        for s in study.seeds:
            noise = lambda: 1 + 0.1 * rng.random()
            runs[(v, s)] = {"curves": {
                "eval/accuracy": [(t, 0.1 + 0.002 * t * noise()) for t in steps],
                "eval/loss": [(t, (116.0 if big else 2.0) * np.exp(-t / 300) * noise())
                              for t in steps],
                "train/grad_norm": [(t, (4e4 if big else 1.0 + i) * noise()) for t in steps],
                "attention/entropy/layer_00": [(t, 1.5 + 0.1 * i * noise()) for t in steps]}}
    return study, runs


def test_figure_is_readable_with_seven_variants(tmp_path):
    study, runs = _study_and_runs()
    fig = plots.curves_figure(study, runs)
    assert fig._suptitle.get_text() == "norm_placement"
    named = plots.curves_figure(study, runs, "AMD EPYC, 2 CPUs (avx2)")
    assert named._suptitle.get_text() == "norm_placement\ntrained on AMD EPYC, 2 CPUs (avx2)"
    assert plots.curves_figure(study, runs, size="default")._suptitle.get_text() == \
        "norm_placement"
    tiny = plots.curves_figure(study, runs, "AMD EPYC", size="tiny")  # curves as the verdict
    assert tiny._suptitle.get_text() == ("norm_placement\ntrained on AMD EPYC\n(trained at "
                                         "--size=tiny: a smoke run, not evidence)")
    axes = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert set(axes) == set(METRICS)
    # log scale where a panel spans decades, linear elsewhere (and always for accuracy)
    assert axes["eval/loss"].get_yscale() == "log"
    assert axes["train/grad_norm"].get_yscale() == "log"
    assert axes["eval/accuracy"].get_yscale() == "linear"
    assert axes["attention/entropy/layer_00"].get_yscale() == "linear"
    for metric, ax in axes.items():
        assert ax.get_xlabel() == "training step" and ax.get_ylabel() == plots.y_label(metric)
        assert ax.get_legend() is None  # no legend on top of the curves
        lines = ax.get_lines()
        assert len(lines) == len(VARIANTS)
        # colour and line style (and marker) together tell the 7 variants apart
        assert len({(l.get_color(), l.get_linestyle(), l.get_marker()) for l in lines}) == 7
        assert len({l.get_linestyle() for l in lines}) == len(plots.LINE_STYLES)
    assert plots.y_label("eval/loss").startswith("cross-entropy")
    assert "accuracy" in plots.y_label("eval/seq_accuracy")
    # one legend, for the whole figure, below every panel; the band is named in the title
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == VARIANTS
    fig.canvas.draw()
    legend_box = legend.get_window_extent()
    assert all(legend_box.y1 <= ax.get_window_extent().y0 for ax in axes.values())
    assert "95 % t-interval" in legend.get_title().get_text()
    assert "[0, 1, 2]" in legend.get_title().get_text()
    path = tmp_path / "curves.png"
    plots.plot_curves(study, runs, path)
    assert path.stat().st_size > 10_000


def test_log_scale_rule():
    wide, narrow = np.array([0.5, 100.0]), np.array([0.5, 20.0])
    assert plots.wants_log_scale("eval/loss", [wide])
    assert not plots.wants_log_scale("eval/loss", [narrow])
    assert not plots.wants_log_scale("eval/accuracy", [np.array([0.001, 0.9])])
    assert not plots.wants_log_scale("train/x", [np.array([-1.0, 100.0])])  # not all positive
    assert not plots.wants_log_scale("eval/loss", [np.array([np.nan, 1.0])])


QK_NORM = {f"{arm}_{lr}_lr": {"model.attn_scale": True, "model.qk_norm": arm == "qk_norm",
                              "train.learning_rate": rate}
           for lr, rate in (("low", 3e-3), ("mid", 1e-2), ("high", 3e-2))
           for arm in ("scaled", "qk_norm")}
QK_NORM["unscaled_mid_lr"] = {"model.attn_scale": False, "model.qk_norm": False,
                              "train.learning_rate": 1e-2}


def _hue(colour) -> float:
    import matplotlib.colors
    return float(matplotlib.colors.rgb_to_hsv(matplotlib.colors.to_rgb(colour))[0])


def test_variants_sharing_a_learning_rate_share_a_hue():
    """qk_norm's seven variants: a hue per learning rate (shades of it), a line style per arm
    (scaled, qk_norm, unscaled), a marker per variant."""
    assert plots.hue_key(QK_NORM) == "train.learning_rate"
    styles = plots.variant_styles(QK_NORM)
    rate = {v: o["train.learning_rate"] for v, o in QK_NORM.items()}
    arm = {v: v.rsplit("_", 2)[0] for v in QK_NORM}
    for a in QK_NORM:
        for b in QK_NORM:
            same_hue = abs(_hue(styles[a]["color"]) - _hue(styles[b]["color"])) < 0.02
            assert same_hue == (rate[a] == rate[b]), (a, b)
            assert (styles[a]["linestyle"] == styles[b]["linestyle"]) == (arm[a] == arm[b]), (a, b)
    assert len({(s["color"], s["linestyle"], s["marker"]) for s in styles.values()}) == 7
    assert len({s["marker"] for s in styles.values()}) == 7
    # the legend: one column per learning rate, the shorter ones padded with blank entries
    handles, labels, columns, title = plots.legend_entries(QK_NORM, styles)
    assert columns == 3 and "train.learning_rate" in title
    assert labels == ["scaled_low_lr", "qk_norm_low_lr", "", "scaled_mid_lr", "qk_norm_mid_lr",
                      "unscaled_mid_lr", "scaled_high_lr", "qk_norm_high_lr", ""]


def test_grouping_key_is_derived_from_the_overrides():
    positions = {f"{arch}_{p}": ({"model.arch": "decoder"} if arch == "decoder" else {})
                 | {"model.position": p}
                 for arch, schemes in (("encoder", ("none", "rotary", "alibi")),
                                       ("decoder", ("none", "rotary"))) for p in schemes}
    assert plots.hue_key(positions) == "model.position"
    batch = {f"{n}_b{b}": {"model.norm_type": n, "train.batch_size": b}
             for n in ("layernorm", "batchnorm") for b in (8, 32)}
    assert plots.hue_key(batch) == "train.batch_size"  # a tie: the number, not the choice
    heads = {f"h{h}": {"model.num_heads": h} for h in (1, 2, 4)}
    assert plots.hue_key(heads) is None  # nothing shared: a hue each, line styles cycle
    styles = plots.variant_styles(heads)
    assert len({_hue(s["color"]) for s in styles.values()}) == 3


def test_identical_curves_stay_visible():
    """encoder_none and encoder_alibi learn the same curves: the one drawn first is wider, with
    a bigger and different marker, so the one drawn over it does not hide it."""
    study = types.SimpleNamespace(name="positions", metrics=("eval/loss",), seeds=(0,),
                                  variants={"encoder_none": {"model.position": "none"},
                                            "encoder_alibi": {"model.position": "alibi"}})
    curve = [(t, 2.0 * np.exp(-t / 100)) for t in range(0, 301, 30)]
    runs = {(v, 0): {"curves": {"eval/loss": curve}} for v in study.variants}
    fig = plots.curves_figure(study, runs)
    under, over = fig.axes[0].get_lines()
    assert (under.get_xydata() == over.get_xydata()).all()
    assert under.get_linewidth() > over.get_linewidth() + 0.5
    assert under.get_markersize() > over.get_markersize()
    assert under.get_marker() != over.get_marker()


def test_entropy_label_says_normalized():
    label = plots.y_label("attention/entropy/layer_00")
    assert "nats" not in label and "ln(keys)" in label and "uniform" in label


def test_eval_panels_name_the_eval_lengths_from_the_data_config():
    import ml_collections

    base = ml_collections.ConfigDict({"data": {"kind": "synthetic", "seq_len": 8, "min_len": 1,
                                               "eval_seq_len": 32, "eval_min_len": 9}})
    study = types.SimpleNamespace(name="length", metrics=("eval/accuracy", "train/accuracy"),
                                  seeds=(0,), base=base,
                                  variants={"none": {"model.position": "none"}})
    curve = [(t, 0.5) for t in range(0, 31, 10)]
    runs = {("none", 0): {"curves": {m: curve for m in study.metrics}}}
    titles = [ax.get_title() for ax in plots.curves_figure(study, runs).axes]
    assert titles == ["eval/accuracy\nlengths 9–32, unseen (trained on 1–8)", "train/accuracy"]
    base.data.update(eval_seq_len=16, eval_min_len=0)  # eval 1–16 includes the training lengths
    assert plots.eval_lengths_note(study) == "\nlengths 1–16 (trained on 1–8)"
    base.data.update(eval_seq_len=0)  # eval = train lengths: nothing to say
    assert plots.eval_lengths_note(study) == ""


def test_length_figure_labels_from_the_training_length():
    from transformer_jax.studies.analysis import length

    by_length = {l: {"accuracy": np.array([1.0, 0.9]), "seq_accuracy": np.array([0.8, 0.7])}
                 for l in range(1, 13)}
    fig = length.length_figure({"none": ((0, 1), by_length), "alibi": ((0, 1), by_length)}, 4)
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert [ax.get_ylabel() for ax in panels] == [plots.y_label("eval/accuracy"),
                                                  plots.y_label("eval/seq_accuracy")]
    assert all("trained on ≤ 4, unseen 5–12" in ax.get_title() for ax in panels)
    under, over = panels[0].get_lines()
    assert under.get_linewidth() > over.get_linewidth()


# t_{0.975, 2 dof} = 4.302653: the 95 % interval of the mean of 3 seeds is mean ± 4.3027 · sd/√3
T2 = 4.302653


def test_band_is_the_verdicts_t_interval_clipped_to_the_metrics_range():
    values = np.array([[1.0, 0.98, 0.5], [2.0, 0.99, np.nan], [3.0, 1.0, np.nan]])  # [seeds, steps]
    mean, low, high = plots.seed_band(values, "train/unbounded")
    half = T2 * 1.0 / np.sqrt(3)  # seeds 1, 2, 3: sd 1
    assert np.allclose([mean[0], low[0], high[0]], [2.0, 2.0 - half, 2.0 + half])
    assert (low[0], high[0]) == pytest.approx(tuple(map(float, stats.mean_interval(values[:, 0]))))
    assert np.isnan(low[2]) and np.isnan(high[2]) and mean[2] == 0.5  # one finite seed: no band
    half = T2 * 0.01 / np.sqrt(3)  # 0.98, 0.99, 1.0: the interval reaches past 1 ...
    assert high[1] == pytest.approx(0.99 + half)
    _, low, high = plots.seed_band(values, "eval/accuracy")
    assert high[1] == 1.0 and low[1] == pytest.approx(0.99 - half)  # ... and an accuracy stops at 1
    _, low, _ = plots.seed_band(values, "eval/loss")
    assert low[0] == 0.0  # 2 − 2.48 < 0: a loss stops at 0


def test_the_figures_shaded_band_is_the_interval():
    values = [0.98, 0.99, 1.0]
    study = types.SimpleNamespace(name="s", metrics=("eval/accuracy",), seeds=(0, 1, 2),
                                  variants={"a": {}})
    runs = {("a", s): {"curves": {"eval/accuracy": [(0, 0.5), (10, v)]}}
            for s, v in zip(study.seeds, values)}
    fig = plots.curves_figure(study, runs)
    (band,) = fig.axes[0].collections
    x, y = band.get_paths()[0].vertices.T
    assert set(y[x == 0]) == {0.5}  # the seeds agree at step 0: no spread, no band
    assert y[x == 10].max() == 1.0
    assert y[x == 10].min() == pytest.approx(0.99 - T2 * 0.01 / np.sqrt(3))


def test_length_results_read_back_from_their_csv(tmp_path):
    from transformer_jax.studies.analysis import length

    by_length = {l: {"accuracy": np.array([1.0, 0.5]), "seq_accuracy": np.array([0.25, 0.0])}
                 for l in (1, 2, 9)}
    length._write_csv({"none": ((3, 7), by_length)}, tmp_path / "a.csv")
    ((variant, (seeds, again)),) = length.read_csv(tmp_path / "a.csv").items()
    assert (variant, seeds, list(again)) == ("none", (3, 7), [1, 2, 9])
    assert again[9]["accuracy"].tolist() == [1.0, 0.5]
    assert again[2]["seq_accuracy"].tolist() == [0.25, 0.0]


def test_a_log_band_is_the_interval_of_the_log_values_back_transformed():
    """Seeds 1, 10, 100: on log values mean ln 10, sd ln 10 (n − 1), so the geometric mean is
    10 and the band 10 · exp(∓ 4.3027 · ln 10 / √3) = 0.03281 .. 3047.9 (by hand)."""
    values = np.array([[1.0], [10.0], [100.0]])
    mean, low, high = plots.seed_band(values, "train/grad_norm", log=True)
    assert mean[0] == pytest.approx(10.0)
    assert low[0] == pytest.approx(0.03281, rel=1e-3) and high[0] == pytest.approx(3047.9, rel=1e-3)
    mean, low, _ = plots.seed_band(values, "train/grad_norm")  # linear: the arithmetic band
    assert mean[0] == pytest.approx(37.0) and low[0] == 0.0  # 37 − 4.3 · 54.9 / √3 < 0: clipped


def test_a_band_on_a_log_panel_stays_within_the_values_drawn():
    """norm_placement's no-norm gradient norm: seeds 10^2 .. 10^5 apart at a step. Its linear
    t-interval reached 0 and covered the whole panel; on log values, kept to the values drawn,
    it stops at the panel's lowest value."""
    study = types.SimpleNamespace(name="s", metrics=("train/grad_norm",), seeds=(0, 1, 2),
                                  variants={"no_norm": {}, "pre": {}})
    spread = {0: 1e2, 1: 1e3, 2: 1e5}
    runs = {("no_norm", s): {"curves": {"train/grad_norm": [(0, 3.0), (10, spread[s])]}}
            for s in study.seeds}
    runs |= {("pre", s): {"curves": {"train/grad_norm": [(0, 1.0 + s), (10, 2.0 + s)]}}
             for s in study.seeds}
    bands, log = plots.panel_bands(study, runs, "train/grad_norm", ["no_norm", "pre"])
    assert log
    steps, mean, low, high = bands["no_norm"]
    assert mean[1] == pytest.approx(10 ** (10 / 3))  # geometric mean of 10^2, 10^3, 10^5
    assert low[1] == 1.0 and high[1] == 1e5  # the interval of the logs, cut at the data's range
    fig = plots.curves_figure(study, runs)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert ax.get_yscale() == "log"
    lowest = min(p.vertices[:, 1].min() for band in ax.collections for p in band.get_paths())
    assert lowest >= 1.0


def _positions_runs(study):
    steps = range(0, 101, 50)
    return {(v, s): {"curves": {"eval/accuracy": [(t, 0.3 + 0.005 * t) for t in steps],
                                "eval/loss": [(t, 2.0 - 0.01 * t) for t in steps]}}
            for v in study.variants for s in study.seeds}


def test_positions_draws_one_panel_per_task_each_with_its_chance_level():
    """Its encoders learn `order` (chance 1/2), its decoders `sort` (chance 1/16 per token)."""
    from transformer_jax.studies.design import loading
    study = loading.load_study(REPO / "experiments" / "positions.py", "tiny")
    fig = plots.curves_figure(study, _positions_runs(study))
    axes = {ax.get_title().split("\n")[0]: ax for ax in fig.axes if ax.get_visible()}
    assert set(axes) == {f"{m} · task {t}" for m in study.metrics for t in ("order", "sort")}
    for task, prefix, chance in (("order", "encoder_", 0.5), ("sort", "decoder_", 1 / 16)):
        ax = axes[f"eval/accuracy · task {task}"]
        drawn = [line.get_label() for line in ax.get_lines() if line.get_gid() != "chance"]
        assert drawn and all(name.startswith(prefix) for name in drawn), drawn
        (line,) = [line for line in ax.get_lines() if line.get_gid() == "chance"]
        assert line.get_ydata()[0] == pytest.approx(chance)
        assert not [line for line in axes[f"eval/loss · task {task}"].get_lines()
                    if line.get_gid() == "chance"]  # a loss has no chance line here


# The depth study's lines by name (experiments/_depth.py): six architectures at 2..24 layers,
# pre_res's tuned arms at 2 and 24 (lr 0.001) and at width 16 at 2 and 96 layers.
DEPTH_LINES = {**{a: (2, 6, 12, 24) for a in ("pre_res", "post_res", "res_no_norm", "pre_no_res",
                                              "post_res_warmup", "res_no_norm_warmup_clip")},
               "pre_res_lr0.001": (2, 24), "pre_res_w16": (2, 96), "pre_res_w16_lr0.001": (2, 96),
               "pre_no_res_w16": (24, 96)}
DEPTH_GRID = (2, 6, 12, 24, 96)


def _arm_lines(ax):
    """The arms' lines of a panel (not the chance level, nor the error bars' caps)."""
    return [l for l in ax.get_lines() if not l.get_label().startswith("_")]


def _depth_figure(chance=1 / 16):
    from transformer_jax.studies.analysis import depth

    points = {line: {d: {"mean": 0.5, "low": 0.4, "high": 0.6, "diverged": 0, "runs": 3}
                     for d in depths} for line, depths in DEPTH_LINES.items()}
    # every seed of res_no_norm diverged at 24 layers (counted as 0 by the table), one at 12
    points["res_no_norm"][24] = {"mean": 0.0, "low": 0.0, "high": 0.0, "diverged": 3, "runs": 3}
    points["res_no_norm"][12] = {"mean": 0.2, "low": 0.0, "high": 0.5, "diverged": 1, "runs": 3}
    panels = depth.arms_of(points, width=32, rate=3e-3)
    return plots.by_depth_figure(panels, metric="eval/accuracy", chance=chance), panels


def _depth_of(x: float) -> int:
    """The depth a (dodged) x was drawn at: the nearest on the log axis."""
    return min(DEPTH_GRID, key=lambda d: abs(np.log2(x / d)))


def test_the_depth_figure_draws_one_panel_per_architecture():
    fig, panels = _depth_figure()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["pre_res", "post_res", "res_no_norm",
                                               "pre_no_res", "post_res_warmup",
                                               "res_no_norm_warmup_clip"]
    drawn = {ax.get_title(): [l.get_label() for l in _arm_lines(ax)]
             for ax in axes}
    assert drawn["pre_res"] == ["width 32, lr 0.003", "width 32, lr 0.001", "width 16, lr 0.003",
                                "width 16, lr 0.001"]
    assert drawn["pre_no_res"] == ["width 32, lr 0.003", "width 16, lr 0.003"]
    assert all(drawn[a] == ["width 32, lr 0.003"] for a in ("post_res", "res_no_norm"))
    # colour by width, line style by learning rate: the same in every panel, and in the legend
    lines = {l.get_label(): l for ax in axes for l in _arm_lines(ax)}
    assert lines["width 16, lr 0.001"].get_color() == lines["width 16, lr 0.003"].get_color() \
        != lines["width 32, lr 0.001"].get_color()
    assert lines["width 32, lr 0.001"].get_linestyle() == \
        lines["width 16, lr 0.001"].get_linestyle() != lines["width 32, lr 0.003"].get_linestyle()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "width 32, lr 0.003", "width 32, lr 0.001", "width 16, lr 0.003", "width 16, lr 0.001",
        "chance (a uniform guess)", "no value: every seed diverged"]
    assert all(ax.get_xscale() == "log" for ax in axes)


def test_the_depth_figure_draws_no_line_across_a_depth_not_run():
    fig, _ = _depth_figure()
    joined = {}
    for ax in fig.axes:
        for line in _arm_lines(ax):
            x, y = line.get_xydata().T
            pairs = [(_depth_of(x[i]), _depth_of(x[i + 1])) for i in range(len(x) - 1)
                     if np.isfinite(y[i]) and np.isfinite(y[i + 1])]
            joined[(ax.get_title(), line.get_label())] = pairs
    assert joined[("pre_res", "width 32, lr 0.003")] == [(2, 6), (6, 12), (12, 24)]
    assert joined[("pre_res", "width 32, lr 0.001")] == []  # 2 and 24: 6 and 12 not run
    assert joined[("pre_res", "width 16, lr 0.003")] == []  # 2 and 96
    assert joined[("pre_no_res", "width 16, lr 0.003")] == [(24, 96)]  # next to each other
    # each point that ran is drawn, at its depth (a point alone shows as its marker)
    drawn = {(ax.get_title(), line.get_label()): [_depth_of(x) for x, y in line.get_xydata()
                                                   if np.isfinite(y)]
             for ax in fig.axes for line in _arm_lines(ax)}
    assert drawn[("pre_res", "width 16, lr 0.001")] == [2, 96]
    assert drawn[("pre_res", "width 32, lr 0.001")] == [2, 24]
    assert drawn[("pre_res", "width 32, lr 0.003")] == [2, 6, 12, 24]
    # a depth where every seed diverged has no value: no line to it, a cross on the floor
    assert joined[("res_no_norm", "width 32, lr 0.003")] == [(2, 6), (6, 12)]
    (ax,) = [ax for ax in fig.axes if ax.get_title() == "res_no_norm"]
    (cross,) = [l for l in ax.get_lines() if l.get_gid() == "failed"]
    assert [_depth_of(x) for x in cross.get_xdata()] == [24] and list(cross.get_ydata()) == [0]
    assert "no value: every seed diverged" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_the_depth_figure_draws_the_chance_level_in_every_panel():
    fig, _ = _depth_figure(chance=1 / 16)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for ax in axes:
        (chance,) = [l for l in ax.get_lines() if l.get_gid() == "chance"]
        assert list(chance.get_ydata()) == pytest.approx([1 / 16, 1 / 16])
        assert any("chance 0.0625" in t.get_text() for t in ax.texts)
    fig, _ = _depth_figure(chance=None)
    assert not [l for ax in fig.axes for l in ax.get_lines() if l.get_gid() == "chance"]

"""The study figure (transformer_jax/plots.py) on constructed curves shaped like norm_placement's:
one variant's loss ~100x and gradient norm ~10^4x the others'."""
from __future__ import annotations

import types

import numpy as np
import pytest

from transformer_jax.studies import plots

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
    assert "min–max" in fig._suptitle.get_text() and "[0, 1, 2]" in fig._suptitle.get_text()
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

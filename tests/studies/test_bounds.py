"""A bounded metric's interval in the final-metrics table: shown clipped to the metric's range,
with the note saying why; the record's numbers (the verdict's) are left as they are."""
from __future__ import annotations

import math

from transformer_jax.studies.render import bounds, verdict_text

NEAR_ONE = {"n": 3, "mean": 0.9997, "std": 0.00047, "low": 0.9982, "high": 1.001}


def test_ranges_by_kind_of_metric():
    assert bounds.metric_bounds("eval/accuracy") == (0.0, 1.0)
    assert bounds.metric_bounds("eval/seq_accuracy") == (0.0, 1.0)
    assert bounds.metric_bounds("train/loss") == (0.0, math.inf)
    assert bounds.metric_bounds("eval/bits_per_char") == (0.0, math.inf)
    assert bounds.metric_bounds("layers/residual_rms_last_layer") == (-math.inf, math.inf)


def test_cells_show_intervals_clipped_to_the_metrics_range():
    assert verdict_text.metric_cell(NEAR_ONE, "eval/accuracy") == "0.9997 ± 0.00047 [0.9982, 1]"
    assert verdict_text.metric_cell(NEAR_ONE, "eval/margin") == "0.9997 ± 0.00047 [0.9982, 1.001]"
    loss = {"n": 3, "mean": 0.4269, "std": 0.2, "low": -0.1885, "high": 1.042}
    assert verdict_text.metric_cell(loss, "eval/loss") == "0.4269 ± 0.2 [0, 1.042]"
    assert NEAR_ONE["high"] == 1.001  # the record keeps the interval as computed


def _record(metrics):
    variant = {"variant": "a", "overrides": {}, "diverged": 0, "runs": 3, "metrics": metrics,
               "speed": {}, "late_change": {}}
    return {"interval_method": "t", "summary": {
        "speed_fraction": 0.95, "flat_window": 0.2, "judged_metrics": [],
        "metrics": list(metrics), "variants": [variant]}}


def test_the_note_is_written_only_when_an_interval_was_clipped():
    clipped = _record({"eval/accuracy": NEAR_ONE})
    assert bounds.CLIPPED_NOTE in verdict_text.intervals_line(clipped)
    inside = _record({"eval/accuracy": dict(NEAR_ONE, high=0.9999)})
    assert bounds.CLIPPED_NOTE not in verdict_text.intervals_line(inside)
    unbounded = _record({"eval/margin": NEAR_ONE})
    assert bounds.CLIPPED_NOTE not in verdict_text.intervals_line(unbounded)

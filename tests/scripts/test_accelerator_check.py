"""`scripts/accelerator_check.py --smoke` on this machine's CPU: every attention path agrees with
float32 explicit attention, and every dtype x attention train step learns (speed not asserted)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers_train import BACKGROUND_RUNS

REPO = Path(__file__).resolve().parents[2]
# Run from the start of the session, while other tests run (helpers_train.BackgroundRuns).
BACKGROUND = {"accelerator_smoke": (("test_smoke_checks_every_path",), lambda paths: (
    [sys.executable, str(REPO / "scripts" / "accelerator_check.py"), "--smoke"], 240))}


def test_smoke_checks_every_path():
    proc = BACKGROUND_RUNS.result("accelerator_smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["backend"] == "cpu"
    attention = result["attention"]
    assert len(attention) == 8  # {explicit, fused, fused_xla, fused_dense_mask} x {f32, bf16}
    for name, row in attention.items():
        assert "error" not in row, (name, row)
        assert row["kernel"] in ("ours", "xla"), (name, row)  # no cuDNN on a CPU
        bound = 1e-5 if name.endswith("float32") else 2e-2  # bfloat16: 8 mantissa bits
        assert row["out_err"] < bound and row["grad_err"] < bound, (name, row)
    assert set(result["train"]) == {f"smoke/{d}/{a}" for d in ("float32", "bfloat16")
                                    for a in ("explicit", "fused")}
    for name, row in result["train"].items():
        assert "error" not in row, (name, row)
        assert row["finite"] and row["loss_last"] < row["loss_first"], (name, row)
        assert row["ms_per_step"] > 0 and 0 < row["mfu"], (name, row)
    assert all(v > 0 for v in result["peak_tflops"].values())

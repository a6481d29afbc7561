"""The kernel-by-kernel profile: HLO parsing (shapes, ops, matmul FLOPs), grouping, end to end."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from transformer_jax.train import op_profile

from helpers_train import BACKGROUND_RUNS

REPO = Path(__file__).resolve().parents[2]
# Run from the start of the session, while other tests run (helpers_train.BackgroundRuns).
BACKGROUND = {"ops_smoke": (("test_ops_smoke_prints_a_kernel_table",), lambda paths: (
    [sys.executable, str(REPO / "scripts" / "benchmark.py"), "ops", "charlm", "--smoke",
     "--text_path", paths.shakespeare, "--data_dir", paths.data_dir,
     "--trace_dir", paths.tmp / "ops_trace"], 170))}


def test_parse_hlo_finds_each_matmul_and_its_flops():
    def f(a, b, c):
        return jnp.tanh(a @ b) @ c  # [32,48]x[48,64] -> [32,64]x[64,16]

    args = [jnp.ones(s, jnp.float32) for s in ((32, 48), (48, 64), (64, 16))]
    text = jax.jit(f).lower(*args).compile().as_text()
    parsed = op_profile.parse_hlo(text)
    # A fused dot's FLOPs show on the dot and on the fusion that runs it (the kernel).
    assert {i.flops for i in parsed.values() if i.flops} == {2.0 * 32 * 48 * 64, 2.0 * 32 * 64 * 16}
    shapes = {i.shape for i in parsed.values() if i.flops}
    assert {"f32[32,64]", "f32[32,16]"} <= shapes


def test_summarize_groups_kernels_per_step_and_skips_runtime_events():
    instructions = {
        "ynn_fusion.1": op_profile.Instruction("f32[8,8]", "fusion", "dot_general", 1e6),
        "fusion.2": op_profile.Instruction("f32[8,8]", "fusion", "add", 0.0),
        "fusion.3": op_profile.Instruction("f32[8,8]", "fusion", "add", 0.0),
        "dot.4": op_profile.Instruction("f32[4,4]", "dot", "transpose", 1e9),  # unfused, async
    }
    times = {"ynn_fusion.1": (4000.0, 2), "fusion.2": (1000.0, 2), "fusion.3": (1000.0, 2),
             "dot.4": (20.0, 2), "ThunkExecutor::Execute": (9e9, 2)}  # µs, count over 2 steps
    result = op_profile.summarize(instructions, times, steps=2)
    assert result["kernel_ms"] == pytest.approx(3.01) and result["kernels"] == 4
    first, second, third = result["rows"]
    assert (first["kind"], first["ms"], first["kernels"]) == ("matmul", 2.0, 1)
    assert first["gflops"] == pytest.approx(1e6 / 2e-3 / 1e9)  # 1 MFLOP in 2 ms = 0.5 GFLOP/s
    assert (second["kind"], second["op"], second["ms"], second["kernels"]) == ("other", "add", 1.0, 2)
    assert third["kind"] == "matmul*"  # shown, but not in the timed-matmul total
    assert result["matmul_ms"] == pytest.approx(2.0)
    assert result["matmul_gflops"] == pytest.approx(0.5)
    assert "matmul*" in op_profile.format_table(result)


def test_ops_smoke_prints_a_kernel_table(shakespeare_file):
    proc = BACKGROUND_RUNS.result("ops_smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert any("where the charlm train step's time goes" in line for line in lines)
    result = json.loads(lines[-1])
    assert result["ops"] == "charlm" and result["kernels"] > 10
    assert 0 < result["matmul_ms"] < result["kernel_ms"]
    assert any(row["kind"] == "matmul" and row["gflops"] > 0 for row in result["top"])
    assert list((BACKGROUND_RUNS.paths.tmp / "ops_trace").rglob("*perfetto_trace.json.gz"))  # kept, as asked

"""The step profile's page: rendered from its JSON, with the machine named and the explanation
in numbers (ratios of the last variant to the first)."""
from __future__ import annotations

from transformer_jax.studies.analysis import step_profile


def variant(wall_ms: float, kernels: float, kernel_ms: float, flops: float) -> dict:
    return {"seeds": 3, "flops_per_replica_step": flops, "wall_ms": wall_ms,
            "wall_ms_rounds": [wall_ms - 1, wall_ms, wall_ms + 2], "kernels": kernels,
            "kernel_ms": kernel_ms, "matmul_ms": 0.5,
            "top": [{"kind": "matmul", "op": "dot_general", "shape": "f32[8,8]", "ms": 0.25,
                     "kernels": 2.0, "gflops": 1.0}]}


def test_render_names_the_cpu_and_explains_in_ratios():
    data = {"cpu": "AMD EPYC", "cpus": 2, "steps": 50, "rounds": 3,
            "variants": {"h1": variant(4.0, 100, 2.0, 1e6), "h8": variant(10.0, 200, 8.0, 1.005e6)}}
    text = step_profile.render(data)
    assert "**AMD EPYC** (2 CPUs" in text and f"]({step_profile.FILE})" in text
    # wall 10/4, kernels 200/100, per kernel (8/200)/(2/100) = 2: µs 20 → 40
    assert ("h8 against h1: 2.50× the wall time (fastest rounds: 3.00×) for 1.0050× the FLOPs "
            "and 4.00× the kernel time; 2.00× the kernels per step (100 → 200), each 2.00× as long (20.0 → 40.0 µs).")\
        in text
    assert "| h8 | 10.00 (9.0–12.0) | 2.50 | 3.00 | 200 | 8.00 | 40.0 |" in text
    assert "| h1 | matmul dot_general → f32[8,8] | 0.250 | 2 |" in text


def test_render_without_runs_says_so():
    assert "No finished run" in step_profile.render({"cpu": "x", "cpus": 1, "steps": 1,
                                                      "rounds": 1, "variants": {}})


def test_variants_take_turns_and_each_round_is_timed():
    order = []
    calls = {v: (lambda v=v: order.append(v)) for v in ("h1", "h2", "h8")}
    wall = step_profile.interleaved_wall_ms(calls, rounds=3, steps=2)
    assert {v: len(t) for v, t in wall.items()} == {"h1": 3, "h2": 3, "h8": 3}
    rounds = ["".join(order[i:i + 6:2]) for i in range(0, 18, 6)]  # first call of each turn
    assert rounds == ["h1h2h8", "h2h8h1", "h8h1h2"]  # a different variant first each round

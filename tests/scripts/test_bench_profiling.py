"""`scripts/benchmark.py profile`'s driver logic (scripts/bench/profiling.py): which workers
run together, the XLA_FLAGS and model settings each gets, and how an option is judged against
its program without it (speed in the same rounds; arithmetic by a digest of the parameters)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from bench import profiling  # noqa: E402

FLAGGED = [name for name, v in profiling.VARIANTS.items() if profiling.changes(v)]


def test_every_option_is_compared_with_a_variant_that_exists():
    assert any(profiling.VARIANTS[n].xla_flags for n in FLAGGED)
    assert any(profiling.VARIANTS[n].model for n in FLAGGED)
    for name in FLAGGED:
        reference = profiling.VARIANTS[profiling.VARIANTS[name].kind]
        assert reference.kind == profiling.VARIANTS[name].kind, name
        assert not profiling.changes(reference) and profiling._reference(name) == reference.kind


def test_an_options_change_reads_as_a_user_would_set_it():
    assert (profiling.changes(profiling.VARIANTS["model_bf16_dense"])
            == "model.dense_matmul=bfloat16")
    assert (profiling.changes(profiling.VARIANTS["xla_vector_512"])
            == "XLA_FLAGS=--xla_cpu_prefer_vector_width=512")
    both = profiling.Variant("x", "scan_10", "--f=1", (("dtype", "bfloat16"),))
    assert profiling.changes(both) == "model.dtype=bfloat16 XLA_FLAGS=--f=1"
    assert profiling.changes(profiling.VARIANTS["scan_10"]) == ""


def test_a_workers_model_settings_reach_the_model_it_builds(monkeypatch):
    from types import SimpleNamespace

    from bench import setups
    from transformer_jax import DenseMatmul

    class Built(Exception):
        pass

    def build(model, tcfg, seed=0):
        raise Built(model)

    monkeypatch.setattr(setups, "text_dataset", lambda *a, **k: SimpleNamespace(vocab_size=13))
    monkeypatch.setattr(setups.Ours, "build", build)
    for settings, want in (({}, DenseMatmul.COMPUTE),
                           ({"dense_matmul": "bfloat16"}, DenseMatmul.BFLOAT16)):
        with pytest.raises(Built) as built:
            profiling._make_runner("scan_10", "unused.txt", "", settings)
        assert built.value.args[0].dense_matmul is want


def test_groups_start_with_the_baseline_and_hold_each_option_with_its_reference():
    assert profiling.groups([], 8) == [["trainer"]]
    assert profiling.groups(["scan_10_mb1", "trainer"], 8) == [["trainer", "scan_10_mb1"]]
    assert profiling.groups(["xla_no_ynn", "xla_vector_512"], 8) == [
        ["trainer", "scan_10", "xla_no_ynn", "xla_vector_512"]]
    every = profiling.groups(list(profiling.VARIANTS), 4)
    assert sorted({n for g in every for n in g}) == sorted(profiling.VARIANTS)
    for group in every:
        assert group[0] == "trainer" and len(group) <= 4 and len(set(group)) == len(group)
        for name in group:
            if name in FLAGGED:  # its reference runs in the same rounds, before it
                assert group.index(profiling.VARIANTS[name].kind) < group.index(name)


def test_a_worker_gets_the_users_xla_flags_then_its_variants():
    variant = profiling.VARIANTS["xla_vector_512"]
    assert profiling.worker_xla_flags("", variant) == "--xla_cpu_prefer_vector_width=512"
    assert (profiling.worker_xla_flags(" --a=1 ", variant)
            == "--a=1 --xla_cpu_prefer_vector_width=512")
    assert profiling.worker_xla_flags("--a=1", profiling.VARIANTS["scan_10"]) == "--a=1"


def test_digest_tells_apart_weights_one_ulp_apart():
    params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float32)}
    same = {"w": params["w"].copy(), "b": params["b"].copy()}
    assert profiling.params_digest(params) == profiling.params_digest(same)
    moved = {"w": params["w"].copy(), "b": params["b"].copy()}
    moved["b"][1] = np.nextafter(moved["b"][1], np.float32(2))
    assert profiling.params_digest(params) != profiling.params_digest(moved)
    reshaped = {"w": params["w"].reshape(3, 2), "b": params["b"]}  # same bytes, other shape
    assert profiling.params_digest(params) != profiling.params_digest(reshaped)


def test_an_option_is_judged_by_its_rounds_and_its_last_digest():
    reference = [{"wall": 1.0, "digest": "a"}, {"wall": 2.0, "digest": "b"},
                 {"wall": 1.0, "digest": "c"}]
    option = [{"wall": 1.2, "digest": "x"}, {"wall": 1.0, "digest": "y"},
              {"wall": 0.9, "digest": "c"}]
    got = profiling._versus(option, reference)
    assert got["ratio_vs_reference"] == pytest.approx(0.9)  # median of 1.2, 0.5, 0.9
    assert got["same_arithmetic"] is True  # the state after every step run
    option[-1]["digest"] = "d"
    assert profiling._versus(option, reference)["same_arithmetic"] is False


def test_steps_per_call_of_each_variant():
    assert profiling.steps_per_call("trainer") == 1
    assert profiling.steps_per_call("torch_2_threads") == 1
    assert profiling.steps_per_call("scan_10") == 10 and profiling.steps_per_call("scan_50") == 50
    assert profiling.steps_per_call("scan_10_mb1") == 10
    assert profiling.steps_per_call("model_bf16_dense") == 10  # its program is scan_10's


@pytest.mark.parametrize("chunk", ["20", "0"])
def test_a_chunk_the_calls_do_not_divide_is_a_one_line_error(chunk):
    """50 steps per call in chunks of 20 would time no step at all; refused before any worker
    starts, naming the value and what would do."""
    import subprocess
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "benchmark.py"), "profile", "--variants",
         "scan_10,scan_50", "--chunk", chunk, "--text_path", str(REPO / "README.md")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --chunk {chunk} is not a positive multiple of the steps per call of "
        f"{['scan_10', 'scan_50'] if chunk == '0' else ['scan_50']}: use a multiple of 50"]

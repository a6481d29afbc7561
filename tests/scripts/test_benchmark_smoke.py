"""`scripts/benchmark.py suite --smoke` runs end to end and ends with its JSON line (speed not asserted)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers_train import BACKGROUND_RUNS

REPO = Path(__file__).resolve().parents[2]
BENCHMARK = str(REPO / "scripts" / "benchmark.py")
TIMEOUT_S = 600  # ~40 s on an idle 2-core machine; 170 s timed out under a load of 12 (helpers)
KEYS = ("charlm_wall_ratio_vs_torch", "charlm_val_loss", "charlm_torch_val_loss", "midsize_mfu",
        "compile_ratio_4_vs_2", "matmul_peak_gflops", "seeds_vmap_ratio_vs_sequential",
        "charlm_wall_ratio_worst_chunk", "midsize_mfu_vs_xla_dot")
GEMM_TEST = "test_gemm_table_and_json_for_each_backend"
GEMM = [sys.executable, BENCHMARK, "gemm", "--smoke", "--backends", "xla,eigen"]
# The commands of this module's tests run from the start of the session, while other tests run
# (helpers_train.BackgroundRuns); each test then judges its command's outcome.
BACKGROUND = {
    "benchmark_smoke": (("test_smoke_run_prints_tables_and_a_json_line",), lambda paths: (
        [sys.executable, BENCHMARK, "suite", "--smoke", "--text_path", paths.shakespeare,
         "--data_dir", paths.data_dir], TIMEOUT_S)),
    "benchmark_profile": (("test_profile_races_a_variant_against_the_trainer",), lambda paths: (
        [sys.executable, BENCHMARK, "profile", "--smoke", "--variants", "xla_vector_512",
         "--rounds", "1", "--chunk", "10", "--text_path", paths.shakespeare,
         "--data_dir", paths.data_dir], TIMEOUT_S)),
    "benchmark_gemm": ((GEMM_TEST,), lambda paths: (GEMM, TIMEOUT_S)),
    "first_step": (("test_first_step_times_the_stages_cold_then_warm",), lambda paths: (
        [sys.executable, str(REPO / "scripts" / "first_step.py"), "--runs", "2",
         "--config", "configs/lm.py:tiny", "--text_path", paths.shakespeare], TIMEOUT_S)),
}


def test_smoke_run_prints_tables_and_a_json_line(shakespeare_file):
    proc = BACKGROUND_RUNS.result("benchmark_smoke")  # suite --smoke (shakespeare_file: it exists)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    for title in ("== matmul peak", "== charlm", "== compile time", "== midsize", "seeds"):
        assert any(title in line for line in lines), title
    result = json.loads(lines[-1])
    for key in KEYS:
        assert isinstance(result[key], (int, float)) and math.isfinite(result[key]), key
    assert result["charlm_val_loss"] > 0 and result["midsize_mfu"] > 0
    # Same initial weights and batches: our loss and PyTorch's agree closely after 30 steps.
    assert abs(result["charlm_val_loss"] - result["charlm_torch_val_loss"]) < 1e-3


def test_profile_races_a_variant_against_the_trainer(shakespeare_file):
    """`profile --smoke` (the suite's smoke shapes): a worker per variant (here an XLA option,
    which brings its reference `scan_10`, 10 steps per call: two variants from one name),
    measured in turns against the trainer's loop.
    One named variant suffices: another worker would take no path this one does not."""
    proc = BACKGROUND_RUNS.result("benchmark_profile")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])["profile"]
    assert set(result) == {"trainer", "scan_10", "xla_vector_512"}
    assert result["trainer"]["ratio_vs_trainer"] == 1.0
    for row in result.values():
        assert row["ms_per_step"] > 0 and row["cpu_per_wall"] > 0 and row["peak_mib"] > 100
    option = result["xla_vector_512"]
    assert option["reference"] == "scan_10" and "prefer_vector_width=512" in option["xla_flags"]
    assert option["ratio_vs_reference"] > 0 and isinstance(option["same_arithmetic"], bool)
    assert "reference" not in result["scan_10"]


def test_missing_text_is_a_one_line_error(tmp_path, capsys):
    """Bad input is checked before any work (main() as the command line calls it: in-process,
    where a subprocess would spend its seconds importing)."""
    import benchmark

    missing = tmp_path / "missing.txt"
    assert benchmark.main(["suite", "--smoke", "--text_path", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: --text_path {str(missing)!r} does not exist\n"


def test_next_call_size_ends_calls_on_every_boundary():
    from transformer_jax.train.steps import next_call_size

    def calls(start, stop, k, boundaries):
        sizes, step = [], start
        while step < stop:
            sizes.append(next_call_size(step, stop, k, boundaries))
            step += sizes[-1]
        return sizes

    assert calls(0, 100, 10, (50, 100)) == [10] * 10
    assert calls(0, 25, 10, (50,)) == [10, 10] + [1] * 5  # the end is a boundary too
    assert calls(3, 20, 5, (10,)) == [5, 1, 1, 5, 5]  # resumed off the grid: 4..8, 9, 10, ...
    assert calls(0, 6, 1, (2,)) == [1] * 6
    step = 0
    for size in calls(0, 100, 8, (10, 25)):
        step += size
        # no boundary strictly inside a call
        assert not any(b for b in range(step - size + 1, step) if b % 10 == 0 or b % 25 == 0)


@pytest.fixture(scope="module")
def tiny_training():
    """A tiny model, its optimizer, the trainer's one-step program (compiled once for both
    tests below) and 4 batches of 6 with uneven target weights and a row without targets."""
    import types

    import jax
    import jax.numpy as jnp

    from conftest import tiny_config
    from transformer_jax.train import init, steps
    from transformer_jax.config import TrainConfig

    model = tiny_config(num_outputs=13)
    tcfg = TrainConfig(num_steps=20, batch_size=6, warmup_steps=2)
    graphdef, params = init.init_model(model, 0)
    tx, schedule = steps.make_optimizer(tcfg)
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(4):
        weights = (rng.random((6, 8)) > 0.4).astype(np.float32)
        weights[2] = 0.0  # a sequence without targets (padding only)
        batches.append(dict(inputs=rng.integers(1, 13, (6, 8)).astype(np.int32),
                            targets=rng.integers(1, 13, (6, 8)).astype(np.int32),
                            weights=weights, padding_mask=np.ones((6, 8), bool)))

    def fresh():
        return {"params": jax.tree.map(jnp.array, params), "opt_state": tx.init(params),
                "step": jnp.zeros((), jnp.int32)}

    return types.SimpleNamespace(
        model=model, tcfg=tcfg, graphdef=graphdef, tx=tx, schedule=schedule, batches=batches,
        fresh=fresh, step_fn=steps.make_train_step(graphdef, model, tx, schedule))


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_multi_step_trains_exactly_like_single_steps(tiny_training):
    import jax

    from transformer_jax.train import steps

    t = tiny_training
    model, tcfg, graphdef, tx, schedule = t.model, t.tcfg, t.graphdef, t.tx, t.schedule
    step_fn, batches, fresh = t.step_fn, t.batches, t.fresh
    key = jax.random.key(0)
    single, losses = fresh(), []
    for b in batches:
        single, m = step_fn(single, b, key)
        losses.append(float(m["loss"]))
    # A call of 3 steps, then a call of 1 (as the trainer ends a call on a boundary).
    multi, first = steps.make_multi_step(step_fn)(fresh(), steps.stack_batches(batches[:3]), key)
    multi, last = step_fn(multi, batches[3], key)
    got = [float(x) for x in first["loss"]] + [float(last["loss"])]
    np.testing.assert_allclose(got, losses, rtol=1e-6)
    # As the trainer builds it: one step body, diagnostics on the last step of the call only,
    # from that step's gradients and updates. Its training is that of the program the committed
    # studies trained with (k - 1 lean steps scanned, then the logged step) to float rounding:
    # bitwise for every committed study variant with train.steps_per_call > 1 (checked when it
    # changed), not for this tiny post-norm model, whose Adam moments move in the last bit.
    lean_fn = steps.make_train_step(graphdef, model, tx, schedule, diagnostics=False)
    stacked = steps.stack_batches(batches[:3])
    two_bodies = jax.jit(lambda state, bs, rng: step_fn(
        steps.make_multi_step(lean_fn)(state, jax.tree.map(lambda x: x[:-1], bs), rng)[0],
        jax.tree.map(lambda x: x[-1], bs), rng))
    plain, _ = two_bodies(fresh(), stacked, key)
    logged = steps.make_logged_multi_step(graphdef, model, tx, schedule)
    state, mixed = logged(fresh(), stacked, key)
    reference = dict(jax.tree_util.tree_leaves_with_path(jax.device_get(plain)))
    for path, a in jax.tree_util.tree_leaves_with_path(jax.device_get(state)):
        if "['key']['bias']" not in jax.tree_util.keystr(path):  # rounding noise: see below
            np.testing.assert_allclose(a, reference[path], rtol=1e-5, atol=1e-8,
                                       err_msg=jax.tree_util.keystr(path))
    np.testing.assert_allclose(np.asarray(mixed["loss"]), losses[:3], rtol=1e-6)
    for name in steps.DIAGNOSTICS:
        values = np.asarray(mixed[name])
        assert np.isnan(values[:2]).all() and np.isfinite(values[2]).all(), name
        np.testing.assert_allclose(values[2], np.asarray(first[name][2]), rtol=1e-6, err_msg=name)
    # The forward and backward passes are in the program once (a step body traced a second
    # time for the logged step doubled its compile time and memory).
    def dots(fn, *args):
        return fn.lower(*args).as_text().count("stablehlo.dot_general")
    assert dots(logged, fresh(), stacked, key) == dots(step_fn, fresh(), batches[0], key) > 0
    assert int(multi["step"]) == 4
    flat_multi = dict(jax.tree_util.tree_leaves_with_path(multi["params"]))
    for path, a in jax.tree_util.tree_leaves_with_path(single["params"]):
        name = jax.tree_util.keystr(path)
        if "['key']['bias']" in name:
            # Softmax ignores a constant added to a row of logits, and q·b_k is one: the key bias
            # has a zero gradient, so AdamW moves it by rounding noise (sign included) × lr.
            assert np.abs(np.asarray(a) - np.asarray(flat_multi[path])).max() <= 4 * 2 * tcfg.learning_rate
            continue
        np.testing.assert_allclose(np.asarray(a), np.asarray(flat_multi[path]), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_microbatches_make_the_update_of_one_batch(tiny_training):
    """train.microbatches=2 and 3: independent passes over slices of the batch, combined by
    weight, give one pass's loss, metrics and parameters (uneven weights, an empty row)."""
    import jax

    from transformer_jax.train import steps

    t = tiny_training
    batches = t.batches[:3]
    key = jax.random.key(0)
    out = {}
    for m in (1, 2, 3):
        step_fn = t.step_fn if m == 1 else steps.make_train_step(
            t.graphdef, t.model, t.tx, t.schedule, microbatches=m)
        state = t.fresh()
        metrics = []
        for b in batches:
            state, got = step_fn(state, b, key)
            metrics.append(jax.device_get(got))
        out[m] = (state, metrics)
    for m in (2, 3):
        for one, split in zip(out[1][1], out[m][1]):
            assert set(one) == set(split)
            for name in ("loss", "accuracy", "seq_accuracy", "max_abs_logit", "weight",
                         "grad_norm", "update_norm", "param_norm"):
                np.testing.assert_allclose(split[name], one[name], rtol=2e-5, err_msg=f"m={m} {name}")
        np.testing.assert_allclose(out[m][1][-1]["layer_grad_norm"], out[1][1][-1]["layer_grad_norm"],
                                   rtol=2e-5)
    assert len({float(m["loss"]) for m in out[1][1]}) == 3  # the steps train: updates matter


def test_gemm_chains_compute_the_same_thing_in_every_library():
    """The three libraries' chains are the same workload (so their GFLOP/s compare): equal
    outputs and weight gradients after 3 steps."""
    from bench import gemm
    shape = gemm.SMOKE_SHAPES[0]
    results = [gemm.jax_chain(shape, 3)(), gemm.torch_chain(shape, 3, threads=1)(),
               gemm.numpy_chain(shape, 3)()]
    reference_x, reference_grad = (np.asarray(a) for a in results[2])
    assert reference_x.shape == (shape.m, shape.k) and reference_grad.shape == (shape.k, shape.n)
    assert np.abs(reference_grad).max() > 1.0  # the weight gradient really accumulated
    for x, grad_w in results[:2]:
        np.testing.assert_allclose(np.asarray(x), reference_x, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.asarray(grad_w), reference_grad, rtol=1e-4, atol=1e-3)


def test_gemm_table_and_json_for_each_backend(capsys):
    import benchmark

    proc = BACKGROUND_RUNS.result("benchmark_gemm")  # GEMM
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("| smoke (64×32×48) |") for line in lines), proc.stdout
    measured = json.loads(lines[-1])["gemm"]["gflops"]
    assert set(measured) == {"jax/xla", "jax/eigen", "torch/2t", "numpy"}
    assert all(math.isfinite(v) and v > 0 for row in measured.values() for v in row.values())

    assert benchmark.main(GEMM[2:-1] + ["xla,mkl"]) == 2  # GEMM's arguments, with xla,mkl
    assert capsys.readouterr().err.strip() == ("error: --backends 'xla,mkl': unknown ['mkl']; "
                                               "valid: xla, eigen, onednn, xnnpack")


def test_first_step_times_the_stages_cold_then_warm(shakespeare_file):
    """scripts/first_step.py: the real entry point stopped after its first call, twice on one
    new compilation cache: the stages add up to the whole, the second run loads what the first
    compiled."""
    proc = BACKGROUND_RUNS.result("first_step")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "to first step" in proc.stdout and "peak MiB, first call" in proc.stdout
    cold, warm = json.loads(proc.stdout.strip().splitlines()[-1])["first_step"]
    for run in (cold, warm):
        stages = sum(run[k] for k in ("interpreter", "imports", "data", "init", "first call"))
        assert math.isclose(stages, run["to first step"], rel_tol=1e-6), run
        parts = sum(run[f"first call: {k}"] for k in ("trace", "lower", "compile", "run"))
        assert math.isclose(parts, run["first call"], rel_tol=1e-6), run
        assert run["first call: trace"] > 0 and run["first call: compile"] > 0, run
        assert run["peak MiB, imports"] <= run["peak MiB, init"] <= run["peak MiB, first call"]
    assert cold["cache hits"] == 0 and warm["cache hits"] > 0, (cold, warm)


def test_old_flag_spellings_become_sub_commands():
    """Commits, docstrings and records cite the modes as flags (`--profile`, `--ops NAME`):
    they still parse, into the sub-command and its options."""
    import benchmark

    assert benchmark.old_spelling([]) == ["suite"]
    assert benchmark.old_spelling(["--smoke", "--text_path", "t.txt"]) == [
        "suite", "--smoke", "--text_path", "t.txt"]
    assert benchmark.old_spelling(["--smoke", "--ops", "charlm", "--trace_dir", "d"]) == [
        "ops", "charlm", "--smoke", "--trace_dir", "d"]
    assert benchmark.old_spelling(["--ops=midsize"]) == ["ops", "midsize"]
    assert benchmark.old_spelling(["--profile", "--profile_chunk", "10",
                                   "--profile_variants=scan_10"]) == [
        "profile", "--chunk", "10", "--variants=scan_10"]
    assert benchmark.old_spelling(["--gemm", "--gemm_backends", "xla"]) == [
        "gemm", "--backends", "xla"]
    new = ["profile", "--chunk", "10"]
    assert benchmark.old_spelling(new) == new  # the new spelling passes as it is
    args = benchmark._parser().parse_args(benchmark.old_spelling(["--profile", "--profile_rounds",
                                                                  "2"]))
    assert args.mode is benchmark._profile and args.rounds == 2 and args.chunk == 50


def test_the_race_is_configs_lm_but_for_its_eval_windows():
    """The charlm race builds configs/lm.py's model and training (no copy of their values in
    the benchmark): the one setting it changes is how many held-out windows it scores; sizes
    change fields of that config, and a field it lacks is an error, not a new field."""
    import dataclasses

    import pytest

    from bench import setups
    from transformer_jax.studies.design.loading import load_config

    lm = load_config(REPO / "configs" / "lm.py").to_dict()
    race = setups.CharLM().config.to_dict()
    assert race["data"].pop("num_eval") == 200 and lm["data"].pop("num_eval") == 0
    assert race == lm
    model, train = setups.CharLM().configs(vocab_size=65)
    assert (model.d_model, model.num_layers, train.batch_size, train.microbatches) == (
        lm["model"]["d_model"], lm["model"]["num_layers"], lm["train"]["batch_size"],
        lm["train"]["microbatches"])
    deep, _ = setups.CharLM().override({"model.num_layers": 24}).configs(vocab_size=65)
    assert deep == dataclasses.replace(model, num_layers=24)
    with pytest.raises(KeyError, match="width"):
        setups.CharLM().override({"model.width": 3}).config

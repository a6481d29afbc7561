"""The training entrypoint end to end: tiny runs of each config through `python -m
transformer_jax.main`, resume equivalence, TensorBoard readback, divergence, re-running a
finished run."""
from __future__ import annotations

import json
import math
import os
import re
import signal

import numpy as np
import pytest

from conftest import ORBAX_LATE_CLOSE
from helpers_train import (BACKGROUND_RUNS, LM, SYNTHETIC, TIMEOUT_S, assert_trees_equal,
                           checkpoint_steps, main_args, main_command, restore_newest, run_main,
                           tiny_config, tree_hashes)

pytestmark = [pytest.mark.usefixtures("compilation_cache"), ORBAX_LATE_CLOSE]

STEPS = 20  # num_steps of the `tiny` size
PROGRESS_LINE = re.compile(r"step (\d+)/(\d+)\s+loss [\d.]+.*?\s+acc [\d.]+.*?\|\s+[\d.]+ steps/s\s+ETA \d+")
# Made to diverge: a huge step size, no clipping, no normalization, no warmup.
DIVERGE = {"train.learning_rate": 1e4, "train.grad_clip_norm": 0.0, "model.norm": "none",
           "train.warmup_steps": 0, "train.log_every": 1, "train.checkpoint_every": 1}


def _lm_args(paths) -> list[str]:
    return main_args(f"{LM}:tiny", paths.tmp / "lm" / "run", paths.tj_data_dir,
                     {"data.text_path": paths.shakespeare})


# The tiny LM run through main starts with the session, while other tests run
# (helpers_train.BackgroundRuns); no other test prepares its dataset.
BACKGROUND = {"lm_tiny_run": (("lm_run", "tiny_run"),
                              lambda paths: (main_command(_lm_args(paths)), TIMEOUT_S))}


@pytest.fixture(scope="module")
def lm_run(shakespeare_file):
    args = _lm_args(BACKGROUND_RUNS.paths)
    return args, BACKGROUND_RUNS.result("lm_tiny_run"), BACKGROUND_RUNS.paths.tmp / "lm" / "run"


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory, tj_data_dir):
    """The tiny synthetic config trained in-process for its 20 steps, one step per call, one
    microbatch (the defaults): (status, workdir). Tests may read it, never change it."""
    from transformer_jax import train

    workdir = tmp_path_factory.mktemp("straight") / "run"
    config = tiny_config(overrides={"data.data_dir": tj_data_dir})
    assert config.train.steps_per_call == 1 and config.train.microbatches == 1
    return train.train_and_evaluate(config, str(workdir)), workdir


@pytest.fixture(params=["synthetic", "lm"])
def tiny_run(request):
    """Either config's finished tiny run: (args, process, workdir, bits tag)."""
    if request.param == "synthetic":
        return (*request.getfixturevalue("finished_tiny_run"), "eval/bits_per_token")
    return (*request.getfixturevalue("lm_run"), "eval/bits_per_char")


def _status(workdir) -> dict:
    return json.loads((workdir / "status.json").read_text())


def test_tiny_run_through_main(tiny_run):
    _, proc, workdir, _ = tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    status = _status(workdir)
    assert status["state"] == "finished" and status["step"] == STEPS
    assert math.isfinite(status["eval"]["loss"]) and math.isfinite(status["train"]["train/loss"])
    progress = [m.groups() for m in PROGRESS_LINE.finditer(proc.stderr)]
    assert ("20", "20") in progress and ("5", "20") in progress, proc.stderr[-3000:]
    assert re.search(rf"finished {STEPS} steps in \d+s\b", proc.stderr)
    assert proc.stdout.splitlines()[0].startswith(f"finished at step {STEPS} in "), proc.stdout
    assert checkpoint_steps(workdir) == [10, 20]
    assert json.loads((workdir / "config.json").read_text())["train"]["num_steps"] == STEPS


def test_tensorboard_readback(tiny_run):
    from transformer_jax.train import summaries

    _, proc, workdir, bits = tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    scalars = summaries.read_scalars(str(workdir))
    expected = {f"train/{k}" for k in ("loss", "accuracy", "learning_rate", "grad_norm",
                                       "param_norm", "update_norm", "max_abs_logit",
                                       "steps_per_sec", "flops_per_step")}
    expected |= {"layers/grad_norm/layer_00", "layers/grad_norm/layer_01",
                 "layers/qk_grad_norm/layer_00", "layers/qk_grad_norm/layer_01",
                 "layers/grad_norm_ratio", "eval/loss", "eval/accuracy", bits}
    expected |= {"layers/residual_rms/layer_00", "layers/residual_rms/layer_01",
                 "layers/residual_rms_last_layer"}
    expected |= {f"attention/{k}/layer_{l:02d}" for k in ("entropy", "max_weight", "max_abs_logit")
                 for l in (0, 1)}
    assert expected <= set(scalars), sorted(expected - set(scalars))
    assert [s for s, _ in scalars["train/loss"]] == [5, 10, 15, 20]
    assert [s for s, _ in scalars["eval/loss"]] == [10, 20]
    for (step, ratio), (_, first), (_, last) in zip(scalars["layers/grad_norm_ratio"],
                                                    scalars["layers/grad_norm/layer_00"],
                                                    scalars["layers/grad_norm/layer_01"]):
        assert abs(ratio - first / last) <= 1e-5 * ratio, step  # first layer over the last
    for layer in ("00", "01"):  # W_q and W_k are a part of the layer's parameters
        for (step, qk), (_, whole) in zip(scalars[f"layers/qk_grad_norm/layer_{layer}"],
                                          scalars[f"layers/grad_norm/layer_{layer}"]):
            assert 0 < qk < whole, step
    # the last layer's RMS under its own name is layer 01's (this model has 2 layers)
    assert scalars["layers/residual_rms_last_layer"] == scalars["layers/residual_rms/layer_01"]
    assert all(math.isfinite(v) for points in scalars.values() for _, v in points)
    assert len({v for _, v in scalars["train/flops_per_step"]}) == 1  # one program, one count
    for _, value in scalars["attention/entropy/layer_00"] + scalars["attention/entropy/layer_01"]:
        assert 0.0 <= value <= 1.0
    # bits = loss / ln 2, on the same evaluation
    for (_, loss), (_, b) in zip(scalars["eval/loss"], scalars[bits]):
        assert b == pytest.approx(loss / math.log(2), rel=1e-5)
    tags = summaries.read_tags(str(workdir))
    assert {"attention_map/layer_00", "attention_map/layer_01"} <= set(tags["images"])
    hparams, metrics = summaries.read_hparams(str(workdir))
    assert metrics == ["eval/loss", "eval/accuracy"]
    assert hparams["train.num_steps"] == STEPS and hparams["model.d_model"] == 32
    assert hparams["model.position"] == "sinusoidal"


def test_rerun_of_finished_run_does_nothing(finished_tiny_run):
    args, proc, workdir = finished_tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = tree_hashes(workdir)
    again = run_main(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already finished at step 20; nothing to do" in again.stderr
    assert again.stdout.splitlines()[0] == ("already finished at step 20; nothing to do (rerun "
                                            "with --extend_to=N to train on)"), again.stdout
    assert not PROGRESS_LINE.search(again.stderr)
    assert tree_hashes(workdir) == before


class _StopAfterStep10:
    """Wraps the trainer's Checkpointer: right after the checkpoint of step 10 is saved, the
    process sends itself SIGTERM, which the trainer turns into a clean stop at that step."""

    def __init__(self, real):
        self.real = real

    def __call__(self, *args, **kwargs):
        checkpointer = self.real(*args, **kwargs)
        save = checkpointer.save

        def save_then_stop(step, *a, **k):
            save(step, *a, **k)
            if step == 10:
                os.kill(os.getpid(), signal.SIGTERM)

        checkpointer.save = save_then_stop
        return checkpointer


def test_resume_equals_uninterrupted(tmp_path, tj_data_dir, monkeypatch, straight_run):
    """20 steps straight vs 10, stop, restart, 10 more (same config): equal parameters, bitwise."""
    from transformer_jax import train
    from transformer_jax.train import loop, summaries

    config = tiny_config(overrides={"data.data_dir": tj_data_dir})
    straight, straight_dir = straight_run
    assert straight["state"] == "finished"

    with monkeypatch.context() as m:  # the loop's Checkpointer: the one the loop calls
        m.setattr(loop, "Checkpointer", _StopAfterStep10(train.Checkpointer))
        first = train.train_and_evaluate(config, str(tmp_path / "resumed"))
    # The stop is asked once per compiled call, before that call's checkpoint: a SIGTERM during
    # step 10's save stops the run after the next call (step 11), with its own checkpoint.
    assert first["state"] == "preempted" and first["step"] == 11, first
    assert checkpoint_steps(tmp_path / "resumed") == [10, 11]
    second = train.train_and_evaluate(config, str(tmp_path / "resumed"))
    assert second["state"] == "finished" and second["step"] == STEPS

    step_a, state_a = restore_newest(straight_dir, config)
    step_b, state_b = restore_newest(tmp_path / "resumed", config)
    assert step_a == step_b == STEPS
    assert_trees_equal(state_b, state_a)  # params, optimizer moments and step counter
    assert second["eval"] == straight["eval"]
    # TensorBoard shows one curve: the restart purges nothing it needs and duplicates nothing.
    resumed = summaries.read_scalars(str(tmp_path / "resumed"))
    assert resumed["train/loss"] == summaries.read_scalars(str(straight_dir))["train/loss"]


def test_divergence_stops_the_run(tmp_path, tj_data_dir):
    workdir = tmp_path / "boom"
    proc = run_main(main_args(f"{SYNTHETIC}:tiny", workdir, tj_data_dir, DIVERGE))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    status = _status(workdir)
    assert status["state"] == "diverged"
    step = status["step"]
    assert 1 < step < STEPS, status  # after some finite steps, long before the end
    assert re.search(rf"diverged at step {step}\b.*: loss=nan", proc.stderr)
    last = status["last_finite_metrics"]
    assert last and all(math.isfinite(v) for v in last.values()), last
    # the last finite metrics were logged at the step before (log_every=1)
    from transformer_jax.train import summaries

    scalars = summaries.read_scalars(str(workdir))
    assert scalars["train/loss"][-1] == (step - 1, pytest.approx(last["train/loss"]))
    # checkpoints only before the divergence step
    assert checkpoint_steps(workdir) and max(checkpoint_steps(workdir)) < step
    # and the ended run is not retried
    again = run_main(main_args(f"{SYNTHETIC}:tiny", workdir, tj_data_dir, DIVERGE))
    assert again.returncode == 3 and "already diverged" in again.stderr
    assert again.stdout.splitlines()[0] == f"already diverged at step {step}; nothing to do"


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_diverging_variant_does_not_stop_a_sweep(tmp_path, tj_data_dir):
    import csv

    from transformer_jax.studies import study as study_lib
    from transformer_jax.studies.run import sweep
    from transformer_jax.train import workdir as workdir_lib

    study = study_lib.Study(
        name="divergence", claim="one variant diverges", published="-",
        base=tiny_config(overrides={"data.data_dir": tj_data_dir}),
        variants={"diverges": DIVERGE, "fine": {}}, seeds=(0,), metrics=("eval/loss",),
        expectations=())
    assert sweep.run_study(study, str(tmp_path))
    states = {v: workdir_lib.read_status(tmp_path / v / "seed_0")["state"] for v in study.variants}
    assert states == {"diverges": "diverged", "fine": "finished"}
    rows = {r["variant"]: r for r in csv.DictReader(open(tmp_path / "summary.csv"))}
    assert rows["diverges"]["state"] == "diverged" and rows["fine"]["state"] == "finished"
    assert np.isfinite(float(rows["fine"]["eval/loss"]))


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_steps_per_call_trains_like_one_step_per_call(tmp_path, tj_data_dir, straight_run):
    """train.steps_per_call=4: calls of 4 steps (and of 1 up to each log/eval/checkpoint step)
    give the curves, evaluations and checkpoints of one step per call, to float rounding."""
    from transformer_jax.train import summaries
    from transformer_jax import train

    status, one_per_call = straight_run  # k=1, m=1
    assert status["state"] == "finished" and status["step"] == STEPS
    runs = {(1, 1): summaries.read_scalars(str(one_per_call))}
    dirs = {(1, 1): one_per_call}
    for k, m in ((4, 1), (4, 2)):  # m: train.microbatches (independent passes, same math)
        config = tiny_config(overrides={"data.data_dir": tj_data_dir, "train.steps_per_call": k,
                                        "train.microbatches": m})
        status = train.train_and_evaluate(config, str(tmp_path / f"k{k}m{m}"))
        assert status["state"] == "finished" and status["step"] == STEPS
        runs[k, m] = summaries.read_scalars(str(tmp_path / f"k{k}m{m}"))
        dirs[k, m] = tmp_path / f"k{k}m{m}"
    # The logged steps end their calls, so they carry the diagnostics the other steps skip.
    for other in ((4, 1), (4, 2)):
        for tag in ("train/loss", "train/accuracy", "eval/loss", "eval/accuracy",
                    "train/param_norm", "train/update_norm", "layers/grad_norm/layer_00"):
            assert [s for s, _ in runs[1, 1][tag]] == [s for s, _ in runs[other][tag]], tag
            for (step, a), (_, b) in zip(runs[1, 1][tag], runs[other][tag]):
                assert abs(a - b) <= 1e-5 * max(abs(a), 1e-6), f"{other} {tag} step {step}: {a} vs {b}"
        assert checkpoint_steps(dirs[1, 1]) == checkpoint_steps(dirs[other])


def test_divergence_inside_a_multi_step_call_is_found_at_its_step(tmp_path, tj_data_dir):
    """A NaN in the middle of a 5-step call stops the run at that step, as one step per call does,
    and no checkpoint is written at or after it."""
    from transformer_jax import train

    steps = {}
    for k in (1, 5):
        overrides = {**DIVERGE, "data.data_dir": tj_data_dir, "train.log_every": 5,
                     "train.checkpoint_every": 5, "train.steps_per_call": k}
        status = train.train_and_evaluate(tiny_config(overrides=overrides), str(tmp_path / f"k{k}"))
        assert status["state"] == "diverged", status
        steps[k] = status["step"]
        assert all(s < status["step"] for s in checkpoint_steps(tmp_path / f"k{k}"))
    assert steps[1] == steps[5] and steps[5] % 5, steps  # not on a call boundary: mid-call


@pytest.mark.parametrize("norm_type", ["LAYERNORM", "BATCHNORM"])
@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_stacked_initial_states_equal_each_seed_alone(norm_type):
    """init_states (one vmapped program for every replica) gives, per seed, exactly
    init_model's parameters, tx.init of them and step 0; replica j of it is take_replica's.
    init_params (head_roles' parameters at init) stacks the same parameters."""
    import jax
    import jax.numpy as jnp
    from conftest import tiny_config

    from transformer_jax.train import steps
    from transformer_jax import train
    from transformer_jax.config import NormType, TrainConfig

    model = tiny_config(norm_type=NormType[norm_type])
    tx, _ = steps.make_optimizer(TrainConfig())
    seeds = [3, 0, 7]
    _, stacked = train.init_states(model, tx, seeds)
    stacked_params = train.init_params(model, seeds)
    for j, seed in enumerate(seeds):
        _, params = train.init_model(model, seed)
        expected = {"params": params, "opt_state": tx.init(params), "step": np.int32(0)}
        assert_trees_equal(jax.device_get(train.take_replica(stacked, j)), expected)
        assert_trees_equal(jax.device_get(train.take_replica(stacked_params, j)), params)
    keys = train.seed_streams(jnp.asarray(seeds, jnp.int32), train.Stream.DROPOUT)
    for j, seed in enumerate(seeds):
        assert np.array_equal(jax.random.key_data(keys[j]),
                              jax.random.key_data(train.seed_stream(seed, train.Stream.DROPOUT)))

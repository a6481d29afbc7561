"""Reliability of a training run: kill -9 and resume, SIGTERM, a corrupt newest checkpoint,
bounded checkpoint retention, flat memory over many steps.

The interrupted run is the tiny synthetic model for 24 steps with an evaluation after every step
(FAULT_OVERRIDES) and a checkpoint every 6: slow enough (a few steps per second) that a signal
sent after a checkpoint at least 8 steps before the end lands mid-run. One run's life is killed
with -9, resumed and stopped by SIGTERM, then resumed (a copy) to its end. Its results are
compared bitwise with an uninterrupted run of the same config (trained in the test process: the
same trainer, and the same program, which the runs find in the compilation cache).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from transformer_jax.train import workdir as workdir_lib

from conftest import ORBAX_LATE_CLOSE
from fork_server import run_command, start_command
from helpers_train import (FAULT_OVERRIDES, LONG_SWEEP_STEPS, SYNTHETIC, TIMEOUT_S,
                           assert_no_worker_outlives, assert_trees_equal, checkpoint_steps, finish, main_args, restore_newest,
                           run_main, start_main, sweep_command, sweep_logs, sweep_workers,
                           tiny_config, tree_hashes, wait_for)

pytestmark = [pytest.mark.usefixtures("compilation_cache"), ORBAX_LATE_CLOSE]

STEPS = FAULT_OVERRIDES["train.num_steps"]
SIGTERM_EVERY = 6  # checkpoint_every of the SIGTERM run: the preemption step is usually not one
RESUMING = re.compile(r"resuming \S+ from step (\d+)")
RESUMING_RUN = re.compile(r"resuming \S+/(\w+)/seed_(\d+) from step \d+")


def _args(workdir, data_dir, **changes):
    return main_args(f"{SYNTHETIC}:tiny", workdir, data_dir, {**FAULT_OVERRIDES, **changes})


def _config(data_dir):
    overrides = {**FAULT_OVERRIDES, "data.data_dir": data_dir}
    return tiny_config(overrides=overrides)


def _status(workdir) -> dict:
    return json.loads((Path(workdir) / "status.json").read_text())


def _losses(workdir) -> dict[str, list]:
    from transformer_jax.train import summaries

    scalars = summaries.read_scalars(str(workdir))
    return {tag: scalars[tag] for tag in ("train/loss", "eval/loss")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tj_data_dir, compilation_cache):
    """The uninterrupted run: (workdir, newest checkpoint's step and state)."""
    from transformer_jax import train

    workdir = tmp_path_factory.mktemp("reference") / "run"
    # in this process (no interpreter to start): `main` trains with train_and_evaluate too
    assert train.train_and_evaluate(_config(tj_data_dir), str(workdir))["state"] == "finished"
    assert _status(workdir)["state"] == "finished"
    return workdir, restore_newest(workdir, _config(tj_data_dir))


@pytest.fixture(scope="module")
def killed_then_preempted(tmp_path_factory, tj_data_dir):
    """One run's life in two processes, with a checkpoint every SIGTERM_EVERY steps: kill -9 just
    after its first checkpoint (up to 0.2 s later), then the same command resumes it and is
    stopped by SIGTERM after its second checkpoint (so that it has two to fall back between).
    Returns what each test judges; tests copy the workdir."""
    seed = int(os.environ.get("TJ_KILL_SEED", "0"))  # TJ_KILL_SEED=n tries another kill delay
    delay = random.Random(seed).uniform(0.0, 0.2)
    note = f"killed after checkpoint {SIGTERM_EVERY} + {delay:.3f}s (TJ_KILL_SEED={seed})"
    workdir = tmp_path_factory.mktemp("preempted") / "run"
    killed_log, log = workdir.parent / "killed.txt", workdir.parent / "log.txt"
    args = _args(workdir, tj_data_dir, **{"train.checkpoint_every": SIGTERM_EVERY})
    proc = start_main(args, killed_log)
    wait_for(lambda: SIGTERM_EVERY in checkpoint_steps(workdir), proc,
             f"checkpoint {SIGTERM_EVERY}", log_path=killed_log)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    killed = {"note": note, "code": finish(proc), "status": _status(workdir),
              "listed": checkpoint_steps(workdir)}

    # a checkpoint the resumed process wrote itself: on an idle machine with a warm compilation
    # cache the killed one may have written the second before the kill, and a SIGTERM sent then
    # would reach the new process before it had installed its handler
    newer = max(killed["listed"], default=0) + SIGTERM_EVERY
    proc = start_main(args, log)
    wait_for(lambda: newer in checkpoint_steps(workdir), proc,
             f"checkpoint {newer}, its own", log_path=log)
    proc.send_signal(signal.SIGTERM)
    assert finish(proc) == 0, log.read_text()[-3000:]
    return {"args": args, "workdir": workdir, "log": log.read_text(), "killed": killed}


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, killed_then_preempted):
    """A copy of the preempted run, resumed by the same command to its end: (workdir, result)."""
    pristine = killed_then_preempted["workdir"]
    workdir = _copy(pristine, tmp_path_factory.mktemp("resumed"))
    again = run_main([a.replace(str(pristine), str(workdir)) for a in killed_then_preempted["args"]])
    return workdir, again


def _copy(workdir, tmp_path) -> Path:
    """A copy of a run to resume (the command does not name the workdir anywhere else)."""
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy)
    return copy


def test_kill_9_then_resume_equals_uninterrupted(tj_data_dir, killed_then_preempted, resumed,
                                                 reference):
    """The killed run resumes from a checkpoint it listed (falling back if the newest was caught
    half-finalized); after its SIGTERM and the last resume, it equals the uninterrupted run."""
    killed = killed_then_preempted["killed"]
    note, listed = killed["note"], killed["listed"]
    print(note)  # shown with the test's output when it fails
    assert killed["code"] == -signal.SIGKILL, f"{note}: the run ended by itself"
    assert killed["status"]["state"] == "running", note
    log = killed_then_preempted["log"]
    resumed_from = [int(s) for s in RESUMING.findall(log)]
    assert len(resumed_from) == 1 and resumed_from[0] in listed, (note, listed, resumed_from)
    if resumed_from[0] != max(listed):  # the newest was caught half-finalized
        assert "falling back" in log, note

    workdir, again = resumed
    assert again.returncode == 0, f"{note}\n{again.stderr[-3000:]}"
    status = _status(workdir)
    assert status["state"] == "finished" and status["step"] == STEPS, note
    ref_dir, (ref_step, ref_state) = reference
    step, state = restore_newest(workdir, _config(tj_data_dir))
    assert step == ref_step == STEPS
    assert_trees_equal(state, ref_state)
    assert status["eval"] == _status(ref_dir)["eval"], note
    # the curves as TensorBoard shows them: what the killed process logged after its checkpoint
    # is purged, nothing is missing or doubled
    assert _losses(workdir) == _losses(ref_dir), note


def test_sigterm_saves_a_checkpoint_and_resumes(tj_data_dir, killed_then_preempted, resumed,
                                                reference):
    pristine, log = killed_then_preempted["workdir"], killed_then_preempted["log"]
    status = _status(pristine)
    step = status["step"]
    assert status["state"] == "preempted" and 2 * SIGTERM_EVERY <= step < STEPS, status
    assert step in checkpoint_steps(pristine)
    assert f"SIGTERM: saved a checkpoint at step {step}; rerun the same command to resume" in log
    assert "Traceback" not in log

    workdir, again = resumed
    assert again.returncode == 0, again.stderr[-3000:]
    assert [int(s) for s in RESUMING.findall(again.stderr)] == [step]
    assert "falling back" not in again.stderr
    assert _status(workdir)["state"] == "finished" and _status(workdir)["step"] == STEPS
    _, (_, ref_state) = reference
    assert_trees_equal(restore_newest(workdir, _config(tj_data_dir))[1], ref_state)


def test_corrupt_newest_checkpoint_falls_back(tmp_path, tj_data_dir, killed_then_preempted,
                                              reference):
    args, pristine = killed_then_preempted["args"], killed_then_preempted["workdir"]
    workdir = _copy(pristine, tmp_path)
    steps = checkpoint_steps(workdir)
    assert len(steps) == 2, steps  # keep_checkpoints=2
    older, newest = steps
    data_files = [p for p in (workdir / "checkpoints" / str(newest) / "state").rglob("*")
                  if p.is_file() and p.parent.name == "d"]  # OCDBT's array bytes
    assert data_files
    for path in data_files:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)

    again = run_main([a.replace(str(pristine), str(workdir)) for a in args])
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(rf"checkpoint at step {newest} is unreadable .*; falling back to step {older}",
                     again.stderr), again.stderr[-3000:]
    assert [int(s) for s in RESUMING.findall(again.stderr)] == [older]
    # The aborted reads' late callbacks into Orbax's closed event loop print no tracebacks.
    at = again.stderr.find("Traceback")
    assert at < 0, again.stderr[max(at - 500, 0):at + 2500]
    assert _status(workdir)["state"] == "finished"
    _, (_, ref_state) = reference
    assert_trees_equal(restore_newest(workdir, _config(tj_data_dir))[1], ref_state)


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_checkpoint_retention_is_bounded(reference):
    workdir, _ = reference
    assert FAULT_OVERRIDES["train.keep_checkpoints"] == 2
    entries = sorted(p.name for p in (workdir / "checkpoints").iterdir())
    assert checkpoint_steps(workdir) == [STEPS - 4, STEPS], entries  # 6 were saved
    assert not [e for e in entries if "tmp" in e], entries


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_memory_stays_flat(tmp_path, tj_data_dir, monkeypatch):
    """250 tiny steps, logging every step: the process's RSS after step 100 grows by < 30 MB."""
    import psutil

    from transformer_jax.train import steps
    from transformer_jax import train

    process = psutil.Process()
    rss: list[int] = []
    real = steps.make_train_step

    def measured(*args, **kwargs):
        step_fn = real(*args, **kwargs)

        def step_and_measure(*a):
            out = step_fn(*a)
            rss.append(process.memory_info().rss)
            return out

        return step_and_measure

    monkeypatch.setattr(steps, "make_train_step", measured)
    config = tiny_config(overrides={
        "data.data_dir": tj_data_dir, "train.num_steps": 250, "train.log_every": 1,
        "train.eval_every": 50, "train.checkpoint_every": 50})
    status = train.train_and_evaluate(config, str(tmp_path / "run"))
    assert status["state"] == "finished" and len(rss) == 250
    # from step 101 on: the first evaluation and checkpoint (step 50) have set up what they keep
    growth_mb = (max(rss[100:]) - rss[100]) / 2**20
    assert growth_mb < 30, f"RSS grew {growth_mb:.1f} MB from step 101 to 250"


def _a_finished_b_checkpointed(root, after: int = 0) -> bool:
    states = [workdir_lib.read_status(root / "a" / f"seed_{s}") for s in (0, 1)]
    return (all(s and s["state"] == "finished" for s in states)
            and max(checkpoint_steps(root / "b" / "seed_0"), default=0) > after)


def test_signals_to_a_parallel_sweep_with_an_idle_worker(tmp_path, tj_data_dir):
    """One sweep's life, with two workers and variant b 3 times as long as a:

    1. SIGTERM once a has finished (its worker idle) and b has a checkpoint: b saves a
       checkpoint and stops as `preempted`, the idle worker does not die of the signal (that
       broke the pool, and the sweep then hung at exit waiting for a worker that waited for
       work), the sweep exits 0 leaving no worker behind.
    2. The same command resumes both seeds of b from that checkpoint; kill -9 of the sweep once b
       has a newer one: its worker does not outlive it, b is left `running`.
    3. The same command finishes only what is missing: a's files untouched, b resumed from the
       killed sweep's checkpoints, the report covers every run exactly once.
    (Both workers mid-run: test_sweep_interrupt; a sweep that trains in its own process, --jobs=1,
    resumes the same way: test_sweep's half-finished sweep; a run killed with -9 resumes exactly:
    test_kill_9_then_resume_equals_uninterrupted.)"""
    command, root = sweep_command(tmp_path, tj_data_dir, jobs=2,
                                  b_changes={"train.num_steps": LONG_SWEEP_STEPS})
    b_run = root / "b" / "seed_0"

    log_path = tmp_path / "first.log"
    process = start_command(command, log_path)
    wait_for(lambda: _a_finished_b_checkpointed(root), process,
             "a finished and a checkpoint of b", log_path=log_path)
    workers = sweep_workers(process)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=TIMEOUT_S) == 0, log_path.read_text()[-3000:]
    assert_no_worker_outlives(workers, 2)  # b's and a's idle one
    state = workdir_lib.read_status(b_run)
    preempted = state["step"]
    assert state["state"] == "preempted" and preempted < LONG_SWEEP_STEPS, state
    assert preempted in checkpoint_steps(b_run)
    finished_a = tree_hashes(root / "a")

    log_path = tmp_path / "second.log"
    process = start_command(command, log_path)
    wait_for(lambda: _a_finished_b_checkpointed(root, after=preempted), process,
             f"a checkpoint of b after step {preempted}", log_path=log_path)
    workers = sweep_workers(process)
    process.kill()
    process.wait(timeout=30)
    assert_no_worker_outlives(workers, 1)  # only b's task is left: the pool started one
    assert RESUMING.findall(log_path.read_text()) == [str(preempted)] * 2  # b's two seeds
    assert workdir_lib.read_status(b_run)["state"] == "running"

    result = run_command(command, timeout=TIMEOUT_S * 2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert tree_hashes(root / "a") == finished_a  # finished runs untouched
    logs = sweep_logs(result.stderr, root)
    assert "a, seeds [0, 1]: already finished" in logs, logs[-3000:]
    resumed = RESUMING_RUN.findall(logs)
    assert sorted(set(v for v, _ in resumed)) == ["b"], resumed
    from_step = re.search(rf"resuming {b_run} from step (\d+)", result.stderr)
    # from a checkpoint that the killed sweep wrote
    assert from_step and int(from_step[1]) > preempted, result.stderr[-3000:]
    rows = (root / "summary.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[:3] for r in rows) == [
        ["a", "0", "finished"], ["a", "1", "finished"], ["b", "0", "finished"], ["b", "1", "finished"]]

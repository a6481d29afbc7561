"""What a cluster does to a two-process (multi-host) run, on one machine as test_parallel's
two-process test runs it (one CPU device per process, gloo collectives, one shared workdir):

- SIGTERM to process 1 only: both processes stop after the same step (JAX's preemption sync,
  parallel.stop_requests), one checkpoint holds it, both exit 0 with status.json 'preempted',
  and the same command resumes both to the curves of an uninterrupted run (1e-5).
- kill -9 of process 1: process 0 exits with status 4 within seconds, one line naming process 1;
  the same command on both resumes from the last complete checkpoint to the same curves.
"""
from __future__ import annotations

import signal
import time

import pytest

from helpers_train import SYNTHETIC, checkpoint_steps, finish, main_args, run_main, wait_for
from test_parallel import _start_two_hosts

HEARTBEAT_S = 10
# 30 steps, evaluated after each (it only writes summaries, and keeps the run going long enough
# for a signal to land mid-run), a checkpoint every 5.
STEPS = 30
OVERRIDES = {"train.num_steps": STEPS, "train.log_every": 1, "train.eval_every": 1,
             "train.checkpoint_every": 5}
TAGS = ("train/loss", "eval/loss", "eval/accuracy")


def _args(root, name, data_dir):
    return lambda *extra: main_args(f"{SYNTHETIC}:tiny", root / name, data_dir, OVERRIDES,
                                    f"--heartbeat_timeout={HEARTBEAT_S}", *extra)


def _finish_both(procs) -> list[int]:
    return [finish(p, timeout=120) for p in procs]


def _assert_curves_match(reference, run) -> None:
    from transformer_jax import summaries

    one, two = summaries.read_scalars(str(reference)), summaries.read_scalars(str(run))
    for tag in TAGS:
        assert [s for s, _ in one[tag]] == [s for s, _ in two[tag]], tag  # each step once
        for (step, x), (_, y) in zip(one[tag], two[tag]):
            assert abs(x - y) <= 1e-5 * max(abs(x), 1e-6), f"{tag} step {step}: {x} vs {y}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tj_data_dir):
    """The uninterrupted run, as one process (test_parallel: two processes train like one)."""
    root = tmp_path_factory.mktemp("cluster")
    single = run_main(_args(root, "single", tj_data_dir)())
    assert single.returncode == 0, single.stderr[-3000:]
    return root, tj_data_dir


def _started_and_checkpointed(root, name, data_dir, tag):
    procs = _start_two_hosts(root / tag, _args(root, name, data_dir))
    wait_for(lambda: checkpoint_steps(root / name), procs[0], "a first checkpoint",
             log_path=root / tag / "process_0.log")
    return procs


def _logs(root, tag) -> list[str]:
    return [(root / tag / f"process_{i}.log").read_text() for i in range(2)]


def _resumed_from(workdir, step: int) -> bool:
    """Both processes' full logs (train.log, train.1.log) say they resumed from `step`."""
    return all(f"{workdir} from step {step}\n" in (workdir / name).read_text()
               for name in ("train.log", "train.1.log"))


def test_sigterm_to_one_process_stops_all_at_one_step(reference):
    from transformer_jax import workdir as workdir_lib

    root, data_dir = reference
    (root / "pre").mkdir()
    procs = _started_and_checkpointed(root, "preempted", data_dir, "pre")
    procs[1].send_signal(signal.SIGTERM)  # process 1 only
    codes = _finish_both(procs)
    logs = _logs(root, "pre")
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    status = workdir_lib.read_status(root / "preempted")
    assert status["state"] == "preempted", status
    stopped = status["step"]
    assert 5 <= stopped < STEPS
    for log in logs:  # each process saved at the same step
        assert f"saved a checkpoint at step {stopped};" in log, log[-2000:]
    assert max(checkpoint_steps(root / "preempted")) == stopped

    (root / "pre_resume").mkdir()
    procs = _start_two_hosts(root / "pre_resume", _args(root, "preempted", data_dir))
    logs = _logs(root, "pre_resume") if _finish_both(procs) != [0, 0] else None
    assert logs is None, logs[0][-2000:] + logs[1][-2000:]
    assert _resumed_from(root / "preempted", stopped)
    assert workdir_lib.read_status(root / "preempted")["state"] == "finished"
    _assert_curves_match(root / "single", root / "preempted")


def test_a_dead_peer_ends_the_others_in_seconds(reference):
    from transformer_jax import workdir as workdir_lib

    root, data_dir = reference
    (root / "dead").mkdir()
    procs = _started_and_checkpointed(root, "dead_peer", data_dir, "dead")
    procs[1].kill()  # SIGKILL: no goodbye
    killed = time.monotonic()
    code = finish(procs[0], timeout=HEARTBEAT_S * 6)
    took = time.monotonic() - killed
    procs[1].wait()
    log = _logs(root, "dead")[0]
    assert code == 4, log[-3000:]
    assert took < HEARTBEAT_S + 10, f"process 0 took {took:.1f} s to exit"
    lost = [l for l in log.splitlines() if "lost process" in l and not l.startswith(("E", "I", "W"))]
    assert len(lost) == 1 and lost[0].startswith("process 0: lost process 1 of 2 after step"), log[-3000:]
    last = max(checkpoint_steps(root / "dead_peer"))
    assert workdir_lib.read_status(root / "dead_peer")["state"] == "running"

    (root / "dead_resume").mkdir()
    procs = _start_two_hosts(root / "dead_resume", _args(root, "dead_peer", data_dir))
    codes = _finish_both(procs)
    logs = _logs(root, "dead_resume")
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert _resumed_from(root / "dead_peer", last), logs[0][-2000:]
    _assert_curves_match(root / "single", root / "dead_peer")

"""What a cluster does to a two-process (multi-host) run, on one machine (one CPU device per
process, gloo collectives, one shared workdir), as one workdir's life in three pairs of processes:

1. SIGTERM to process 1 only: both processes stop after the same step (JAX's preemption sync,
   parallel.stop_requests), one checkpoint holds it, both exit 0 with status.json 'preempted'.
2. The same command resumes both; kill -9 of process 1 after their next checkpoint: process 0
   exits with status 4 within seconds, one line naming process 1.
3. The same command resumes both from the last complete checkpoint and finishes: the curves are
   those of one uninterrupted process (1e-5), so two processes train like one.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from helpers_train import (SYNTHETIC, checkpoint_steps, finish, main_args, start_main,
                           tiny_config, wait_for)

HEARTBEAT_S = 10
# 30 steps, evaluated after each (it only writes summaries, and keeps the run going long enough
# for a signal to land mid-run), a checkpoint every 5.
STEPS = 30
OVERRIDES = {"train.num_steps": STEPS, "train.log_every": 1, "train.eval_every": 1,
             "train.checkpoint_every": 5}
TAGS = ("train/loss", "eval/loss", "eval/accuracy")
PAIRS = ("preempted", "dead_peer", "resumed")  # the three pairs, in order


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(pid: int, port: int) -> bool:
    import psutil

    try:
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in psutil.Process(pid).net_connections(kind="tcp"))
    except psutil.NoSuchProcess:
        return False


def _start_two_hosts(root: Path, args) -> list[subprocess.Popen]:
    """Process 0 (the coordinator) on a free port, then process 1 once process 0 listens there.

    A port found free may be taken by another program before process 0 binds it: then process 0
    never listens on it (it fails or waits), and both are started again on a new port, up to
    three times. Process 1 starts only when the coordinator is up, so it never meets the race.
    """
    for attempt in range(3):
        port = _free_port()
        coordinator = [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2"]
        first = start_main(args(*coordinator, "--process_id=0"), root / "process_0.log")
        deadline = time.monotonic() + 120
        while first.poll() is None and time.monotonic() < deadline and not _listening(first.pid, port):
            time.sleep(0.05)
        if first.poll() is None and _listening(first.pid, port):
            return [first, start_main(args(*coordinator, "--process_id=1"), root / "process_1.log")]
        first.kill()
        first.wait()
    pytest.fail("the coordinator never listened on a free port\n" +
                (root / "process_0.log").read_text()[-3000:])


def _finish_both(procs) -> list[int]:
    return [finish(p, timeout=120) for p in procs]


def _assert_curves_match(reference, run) -> None:
    from transformer_jax.train import summaries

    one, two = summaries.read_scalars(str(reference)), summaries.read_scalars(str(run))
    for tag in TAGS:
        assert [s for s, _ in one[tag]] == [s for s, _ in two[tag]], tag  # each step once
        for (step, x), (_, y) in zip(one[tag], two[tag]):
            assert abs(x - y) <= 1e-5 * max(abs(x), 1e-6), f"{tag} step {step}: {x} vs {y}"


def _logs(root, pair) -> list[str]:
    return [(root / pair / f"process_{i}.log").read_text() for i in range(2)]


@pytest.fixture(scope="module")
def life(tmp_path_factory, tj_data_dir, compilation_cache) -> dict:
    """The three pairs on one workdir, and the same config as one uninterrupted process. Each
    pair's outcome is recorded here and judged by its own test."""
    from transformer_jax import train
    from transformer_jax.train import workdir as workdir_lib

    root = tmp_path_factory.mktemp("cluster")
    workdir = root / "run"
    args = lambda *extra: main_args(f"{SYNTHETIC}:tiny", workdir, tj_data_dir, OVERRIDES,  # noqa: E731
                                    f"--heartbeat_timeout={HEARTBEAT_S}", *extra)
    # the one process is this one (the curves are compared within 1e-5, not bitwise)
    config = tiny_config(overrides={**OVERRIDES, "data.data_dir": tj_data_dir})
    single = train.train_and_evaluate(config, str(root / "single"))
    assert single["state"] == "finished" and single["step"] == STEPS, single
    out = {"root": root, "workdir": workdir, "single": root / "single"}
    for pair in PAIRS:
        (root / pair).mkdir()

    def started(pair, after: int):
        procs = _start_two_hosts(root / pair, args)
        wait_for(lambda: max(checkpoint_steps(workdir), default=0) > after, procs[0],
                 f"a checkpoint after step {after}", log_path=root / pair / "process_0.log")
        return procs

    procs = started("preempted", 0)
    procs[1].send_signal(signal.SIGTERM)  # process 1 only
    out["preempted"] = {"codes": _finish_both(procs),
                        "status": workdir_lib.read_status(workdir),
                        "checkpoints": checkpoint_steps(workdir)}

    stopped = out["preempted"]["status"]["step"]
    procs = started("dead_peer", stopped)
    procs[1].kill()  # SIGKILL: no goodbye
    killed = time.monotonic()
    code = finish(procs[0], timeout=HEARTBEAT_S * 6)
    out["dead_peer"] = {"code": code, "took": time.monotonic() - killed,
                        "status": workdir_lib.read_status(workdir),
                        "checkpoints": checkpoint_steps(workdir)}
    procs[1].wait()

    procs = _start_two_hosts(root / "resumed", args)
    out["resumed"] = {"codes": _finish_both(procs),
                      "status": workdir_lib.read_status(workdir),
                      "checkpoints": checkpoint_steps(workdir)}
    return out


def _resumed_from(workdir, step: int) -> bool:
    """Both processes' full logs (train.log, train.1.log) say they resumed from `step`."""
    return all(f"{workdir} from step {step}\n" in (workdir / name).read_text()
               for name in ("train.log", "train.1.log"))


def test_sigterm_to_one_process_stops_all_at_one_step(life):
    got, logs = life["preempted"], _logs(life["root"], "preempted")
    assert got["codes"] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert got["status"]["state"] == "preempted", got["status"]
    stopped = got["status"]["step"]
    assert 5 <= stopped < STEPS
    for log in logs:  # each process saved at the same step
        assert f"saved a checkpoint at step {stopped};" in log, log[-2000:]
    assert max(got["checkpoints"]) == stopped


def test_a_dead_peer_ends_the_others_in_seconds(life):
    got, log = life["dead_peer"], _logs(life["root"], "dead_peer")[0]
    assert _resumed_from(life["workdir"], life["preempted"]["status"]["step"]), log[-2000:]
    assert got["code"] == 4, log[-3000:]
    assert got["took"] < HEARTBEAT_S + 10, f"process 0 took {got['took']:.1f} s to exit"
    lost = [l for l in log.splitlines() if "lost process" in l and not l.startswith(("E", "I", "W"))]
    assert len(lost) == 1 and lost[0].startswith("process 0: lost process 1 of 2 after step"), log[-3000:]
    assert got["status"]["state"] == "running"


def test_the_same_command_resumes_both_to_the_uninterrupted_curves(life):
    got, logs = life["resumed"], _logs(life["root"], "resumed")
    assert got["codes"] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert _resumed_from(life["workdir"], max(life["dead_peer"]["checkpoints"])), logs[0][-2000:]
    assert got["status"]["state"] == "finished" and got["status"]["step"] == STEPS
    _assert_curves_match(life["single"], life["workdir"])


def test_two_processes_make_one_run(life):
    """Both train (data parallel over the two processes' devices); process 0 alone writes the
    events (one file per pair) and the status; the checkpoints are the run's."""
    for pair in PAIRS:
        assert all("data parallel over 2 devices" in log for log in _logs(life["root"], pair)), pair
    assert len(list(life["workdir"].glob("events.out.tfevents.*"))) == len(PAIRS)
    got = life["resumed"]["checkpoints"]
    assert max(got) == STEPS and len(got) == 3, got  # keep_checkpoints=3

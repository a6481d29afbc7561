"""A workdir written before the package moved into layers still resumes: its checkpoint, config
and status are read by today's code, which trains it on from where it stopped."""
import json
import shutil
from pathlib import Path

from helpers_train import SYNTHETIC, main_args, run_main

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "workdir_8503efe"  # finished at step 20


def test_a_workdir_from_before_the_move_trains_on(tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(OLD, workdir)
    assert json.loads((workdir / "status.json").read_text())["step"] == 20
    proc = run_main(main_args(f"{SYNTHETIC}:tiny", workdir, tmp_path / "data",
                              {"train.keep_checkpoints": 1}, "--extend_to=24"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resuming {workdir} from step 20" in proc.stderr
    status = json.loads((workdir / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 24
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["24"]

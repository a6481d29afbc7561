"""The package's layers hold: imports flow one way, entry points -> studies | explain -> train ->
model | data -> config (the contract is .importlinter, checked by import-linter)."""
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def lint(root: Path) -> subprocess.CompletedProcess:
    # import-linter imports nothing; it reads the files of the package found on the path
    return subprocess.run([LINT, "--config", str(root / ".importlinter"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": ""})


def test_the_layer_contract_is_kept():
    proc = lint(REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 kept, 0 broken" in proc.stdout or "kept, 0 broken" in proc.stdout


def test_an_import_against_the_layers_breaks_the_contract(tmp_path):
    """The contract is not vacuous: the model importing the trainer is reported."""
    shutil.copytree(REPO / "transformer_jax", tmp_path / "transformer_jax",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    dense = tmp_path / "transformer_jax" / "model" / "dense.py"
    dense.write_text(dense.read_text() + "\nfrom transformer_jax.train import steps  # noqa\n")
    proc = lint(tmp_path)
    assert proc.returncode != 0
    assert "transformer_jax.model.dense -> transformer_jax.train.steps" in proc.stdout

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


def lint_with_added_import(tmp_path: Path, module: str, line: str) -> str:
    """lint-imports' report on a copy of the package where `module` (a path) ends with `line`."""
    shutil.copytree(REPO / "transformer_jax", tmp_path / "transformer_jax",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    path = tmp_path / "transformer_jax" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    proc = lint(tmp_path)
    assert proc.returncode != 0
    return proc.stdout


def test_an_import_against_the_layers_breaks_the_contract(tmp_path):
    """The contract is not vacuous: the model importing the trainer is reported."""
    report = lint_with_added_import(tmp_path, "model/dense.py",
                                    "from transformer_jax.train import steps")
    assert "transformer_jax.model.dense -> transformer_jax.train.steps" in report


def test_importing_an_old_path_inside_the_package_breaks_the_contract(tmp_path):
    """The old paths (transformer_jax.study, ...) are for users, who are warned; the package itself
    imports only the new ones."""
    report = lint_with_added_import(tmp_path, "studies/export.py",
                                    "from transformer_jax import study")
    assert "transformer_jax.studies.export -> transformer_jax.study" in report

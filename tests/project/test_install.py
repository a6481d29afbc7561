"""The package installs into an environment users already have: ranges in setup.py, exact pins in
constraints.txt (.venv), no API that the newer JAX named in the README removed, a plain
`pip install .` that resolves without the constraints, and the stack recorded beside each run."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import transformer_jax
from test_readme_example import readme_example
from transformer_jax.train import workdir as workdir_lib

ROOT = Path(__file__).resolve().parents[2]
# Newer JAX releases the ranges must admit: the GPU image's (README "On a GPU") and the next minor.
NEWER_JAX = ("0.11.2", "0.12.0")


def setup_lists() -> dict[str, list[str]]:
    """setup.py's INSTALL_REQUIRES, DOCS_REQUIRES, PRETRAINED_REQUIRES and TEST_REQUIRES, read
    from its source (nothing is run); a list may unpack one defined above it (`*DOCS_REQUIRES`)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    lists: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("INSTALL_REQUIRES", "DOCS_REQUIRES", "PRETRAINED_REQUIRES",
                                       "TEST_REQUIRES"):
            lists[node.targets[0].id] = [
                x for e in node.value.elts for x in (lists[e.value.id] if isinstance(
                    e, ast.Starred) else [ast.literal_eval(e)])]
    return lists


def test_the_docs_extra_is_the_sites_packages_without_torch():
    lists = setup_lists()
    docs = {canonicalize_name(Requirement(r).name) for r in lists["DOCS_REQUIRES"]}
    assert "mkdocs" in docs and "torch" not in docs
    assert docs <= {canonicalize_name(Requirement(r).name) for r in lists["TEST_REQUIRES"]}
    assert '"docs": DOCS_REQUIRES' in (ROOT / "setup.py").read_text()


def requirements() -> dict[str, Requirement]:
    lists = setup_lists()
    return {canonicalize_name(r.name): r for r in map(Requirement, lists["INSTALL_REQUIRES"]
                                                       + lists["TEST_REQUIRES"])}


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


# --- Ranges and pins -----------------------------------------------------------------------------


def test_version_has_one_source():
    source = (ROOT / "transformer_jax" / "_version.py").read_text()
    assert f'__version__ = "{transformer_jax.__version__}"' in source
    # .venv's metadata was written by setup.py, which reads _version.py
    assert metadata.version("transformer_jax") == transformer_jax.__version__


def test_the_venv_reinstalls_when_a_file_setup_py_reads_changes():
    """scripts/_venv.sh re-installs when the digest of its inputs changes. setup.py writes the
    version it reads from _version.py into .venv's metadata, so that file is an input: without
    it, a new version leaves every existing .venv's metadata behind (and the test above fails)."""
    text = (ROOT / "scripts" / "_venv.sh").read_text()
    hashed = text[text.index('WANT="'):].split("sha256sum")[0]
    read_by_setup = re.findall(r'Path\(__file__\)\.parent((?: / "[^"]+")+)',
                               (ROOT / "setup.py").read_text())
    assert read_by_setup, "setup.py reads no file: this test no longer reads it right"
    for parts in read_by_setup:
        path = "/".join(re.findall(r'"([^"]+)"', parts))
        assert f'"$ROOT/{path}"' in hashed, f"scripts/_venv.sh's digest leaves out {path}"
    for path in ("setup.py", "constraints.txt"):
        assert f'"$ROOT/{path}"' in hashed, path


def test_ranges_admit_newer_jax():
    reqs = requirements()
    for name in ("jax", "jaxlib"):
        for version in NEWER_JAX:
            assert reqs[name].specifier.contains(version), f"{reqs[name]} refuses {name} {version}"
    assert not reqs["jax"].specifier.contains("0.13.0")  # the upper bound is a real one


def test_every_requirement_is_pinned_in_constraints_and_the_pin_is_in_range():
    pins = constraint_pins()
    for name, req in requirements().items():
        assert name in pins, f"{req} has no exact pin in constraints.txt"
        assert req.specifier.contains(pins[name]), f"constraints.txt {name}=={pins[name]} vs {req}"
        assert req.specifier, f"{name} has no lower bound"
        assert all(s.operator != "==" for s in req.specifier), f"{req}: exact pin in setup.py"


# The floors of the JAX stack in setup.py, checked together on 2026-12-01 (35 passed, no
# DeprecationWarning): in a fresh venv, `pip install jax==0.10.0 jaxlib==0.10.0 flax==0.12.7
# optax==0.2.5 orbax-checkpoint==0.11.31 pytest hypothesis .`, then from the repo root that venv's
# `python -m pytest -W error::DeprecationWarning tests/project/test_readme_example.py
# tests/train/test_checkpointing.py tests/model/test_positions.py tests/train/test_workdir_compat.py`.
# flax 0.12.0 failed there (imports jax._src.core.mutable_array, gone in jax 0.10).
CHECKED_FLOORS = {"jax": "0.10.0", "jaxlib": "0.10.0", "flax": "0.12.7", "optax": "0.2.5",
                  "orbax-checkpoint": "0.11.31"}


def test_the_stack_floors_are_the_checked_ones():
    """A floor moved in setup.py must be checked again (the recipe above) and noted here."""
    reqs = requirements()
    for name, floor in CHECKED_FLOORS.items():
        lower = [s.version for s in reqs[name].specifier if s.operator == ">="]
        assert lower == [floor], f"{reqs[name]}: floor checked was {floor}"


def test_every_upper_bound_says_why():
    lines = (ROOT / "setup.py").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r'\s*"[^"]*<[^"]*",', line):
            said = "#" in line or lines[i - 1].strip().startswith("#")
            assert said, f"setup.py line {i + 1}: an upper bound without a comment saying why"


def test_the_venv_is_the_pinned_set():
    """.venv is built from constraints.txt: what it has installed is exactly the pins."""
    pins = constraint_pins()
    for name in requirements():
        installed = metadata.version(name)
        assert installed.split("+")[0] == pins[name], f"{name} {installed} != pin {pins[name]}"


# --- APIs that newer JAX removed -----------------------------------------------------------------

# (pattern, what JAX's changelog says, a line it must catch). From the JAX changelog 0.10.0 to
# 0.11.0 (and the removal 0.11.0 announces for 0.12.0); names the code could plausibly reach for.
REMOVED = [
    (r"\bdevice_put_(sharded|replicated)\b", "0.10.0: removed from the public API",
     "jax.device_put_replicated(x, devs)"),
    (r"\bPmapSharding\b", "0.10.0: jax.sharding.PmapSharding removed",
     "jax.sharding.PmapSharding"),
    (r"\.vma\b", "0.10.0: ShapedArray.vma removed (use .manual_axis_type.varying)", "aval.vma"),
    (r"jax\.interpreters\.pxla", "0.10.0/0.11.0: the pmap internals and pxla names removed",
     "from jax.interpreters.pxla import shard_args"),
    (r"jax_pmap_shmap_merge", "0.10.0: config state removed",
     "jax.config.update('jax_pmap_shmap_merge', 1)"),
    (r"\bcustom_dce\b", "0.10.0: jax.experimental.custom_dce removed",
     "from jax.experimental import custom_dce"),
    (r"jnp\.clip\([^)]*\ba(_min|_max)?=", "0.10.0: jnp.clip's a, a_min, a_max keywords removed",
     "jnp.clip(x, a_min=0)"),
    (r"TFRT_CPU", "0.10.0: CPU devices are named cpu:0, cpu:1, ...", "'TFRT_CPU_0' in str(d)"),
    (r"\bcloud_tpu_init\b", "0.11.0: module jax.cloud_tpu_init removed",
     "import jax.cloud_tpu_init"),
    (r"jax\.core\.\w|from jax\.core import", "0.11.0: many jax.core names removed (moved to "
     "jax.extend.core)", "jax.core.new_jaxpr_eqn"),
    (r"jnp\.empty(_like)?\(", "0.11.0: jnp.empty is uninitialized now (was zeros)",
     "jnp.empty((3,))"),
    (r"jnp\.cross\(", "0.11.0 deprecates, 0.12.0 removes 2-D inputs of jnp.cross",
     "jnp.cross(a, b)"),
    (r"\bwith [\w.]*mesh\s*:", "0.10.1: `with mesh:` deprecated, use jax.set_mesh", "with mesh:"),
]


def test_removed_api_patterns_catch_their_examples():
    for pattern, why, example in REMOVED:
        assert re.search(pattern, example), (pattern, why)


def test_package_uses_no_api_removed_in_newer_jax():
    found = []
    for path in sorted((ROOT / "transformer_jax").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{number}: {why}: {line.strip()}"
                      for pattern, why, _ in REMOVED if re.search(pattern, line)]
    assert not found, "\n".join(found)


# --- The stack beside each run -------------------------------------------------------------------


def test_a_run_records_its_stack(tmp_path):
    import jax

    path = workdir_lib.prepare(str(tmp_path / "run"), {"model": {"d_model": 8}})
    saved = json.loads((path / workdir_lib.VERSIONS_FILE).read_text())["stacks"]
    assert len(saved) == 1 and saved[0]["on"] == "start"
    versions = saved[0]["versions"]
    assert versions["jax"] == jax.__version__ and versions["jaxlib"] == metadata.version("jaxlib")
    assert versions["transformer_jax"] == transformer_jax.__version__
    assert {"flax", "optax", "orbax-checkpoint", "python"} <= set(versions)
    assert "jax" not in json.loads((path / workdir_lib.CONFIG_FILE).read_text())  # not identity
    workdir_lib.prepare(str(path), {"model": {"d_model": 8}})  # same stack: nothing appended
    assert json.loads((path / workdir_lib.VERSIONS_FILE).read_text())["stacks"] == saved


def test_a_resume_under_another_stack_warns_and_is_recorded(tmp_path, monkeypatch, caplog):
    import jax

    config = {"model": {"d_model": 8}}
    path = workdir_lib.prepare(str(tmp_path / "run"), config)
    newer = dict(workdir_lib.stack_versions(), jax="0.11.2", jaxlib="0.11.2")
    monkeypatch.setattr(workdir_lib, "stack_versions", lambda: newer)
    with caplog.at_level("WARNING"):
        assert workdir_lib.prepare(str(path), config) == path  # resumed, not refused
    assert f"jax {jax.__version__} -> 0.11.2" in caplog.text and str(path) in caplog.text
    stacks = json.loads((path / workdir_lib.VERSIONS_FILE).read_text())["stacks"]
    assert [s["on"] for s in stacks] == ["start", "resume"]
    assert stacks[1]["versions"] == newer and stacks[1]["since"] >= stacks[0]["since"]


# --- `pip install .` as a user does it -----------------------------------------------------------

WHEELHOUSE = Path.home() / ".cache" / "transformer_jax" / "wheelhouse"
RESOLVE_MAX_AGE_S = 7 * 24 * 3600


def pip_env() -> dict[str, str]:
    """The environment without this project's constraints or paths: a user's shell."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_CONSTRAINT", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", JAX_PLATFORMS="cpu")
    return env


def run(*cmd, cwd=None, timeout=600) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=pip_env(), capture_output=True,
                          text=True, timeout=timeout)
    noise = "is neither a file nor a directory"  # pip config naming absent local indexes
    stderr = "\n".join(line for line in done.stderr.splitlines() if noise not in line)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{stderr}"
    return done.stdout


def package_source(into: Path) -> Path:
    """What `pip install .` reads: setup.py and the package, copied so no build files land here."""
    into.mkdir()
    shutil.copy(ROOT / "setup.py", into)
    shutil.copytree(ROOT / "transformer_jax", into / "transformer_jax",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return into


def user_wheelhouse(source: Path) -> Path:
    """The wheels of an unconstrained resolve of `pip install .`, from the configured index.

    Resolved again whenever setup.py changes or the resolve is a week old; between those, the
    fresh venv installs from these wheels offline (pip caches nothing for this index)."""
    house = WHEELHOUSE / hashlib.sha256((ROOT / "setup.py").read_bytes()).hexdigest()[:16]
    stamp = house / ".resolved"
    if stamp.exists() and time.time() - stamp.stat().st_mtime < RESOLVE_MAX_AGE_S:
        return house
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(dir=WHEELHOUSE, prefix=".resolving-"))
    run(sys.executable, "-m", "pip", "wheel", "-q", "-w", fresh, source, "setuptools", "wheel")
    (fresh / ".resolved").touch()
    for old in WHEELHOUSE.iterdir():  # one resolve kept: the newest
        if old != fresh:
            shutil.rmtree(old, ignore_errors=True)
    fresh.rename(house)
    return house


@pytest.mark.slow
def test_pip_install_without_constraints_runs_the_readme_example(tmp_path):
    source = package_source(tmp_path / "src")
    started = time.perf_counter()
    house = user_wheelhouse(source)
    resolved = time.perf_counter()
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    uv = Path(sys.executable).parent / "uv"  # scripts/_venv.sh puts it beside .venv's python
    if uv.exists():  # pip's resolve (the wheelhouse) unpacked in seconds, not pip's ~30 s
        run(sys.executable, "-m", "venv", "--without-pip", venv)  # (ensurepip: 4 s)
        run(uv, "pip", "install", "-q", "--link-mode", "hardlink", "--python", python,
            "--no-index", "--find-links", house, source)
        listed = run(uv, "pip", "list", "--python", python, "--format=json")
    else:
        run(sys.executable, "-m", "venv", venv)
        run(python, "-m", "pip", "install", "-q", "--no-compile", "--no-index", "--find-links",
            house, source)
        listed = run(python, "-m", "pip", "list", "--format=json")
    installed_at = time.perf_counter()
    names = {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed)}
    assert "torch" not in names and "tensorflow" not in names, "a heavy dependency was pulled in"
    reqs = requirements()
    for name in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint"):
        assert reqs[name].specifier.contains(names[name]), (name, names[name])

    outside = tmp_path / "elsewhere"  # not the repo: the import must come from the venv
    outside.mkdir()
    (outside / "example.py").write_text(
        "import transformer_jax as tj\nprint('FROM', tj.__file__, tj.__version__)\n"
        + readme_example())
    out = run(python, "example.py", cwd=outside)
    where, version = re.search(r"^FROM (\S+) (\S+)$", out, flags=re.M).groups()
    assert where.startswith(str(venv)) and version == transformer_jax.__version__
    assert "(2, 10, 100)" in out and "(1, 5, 2, 8) (1, 2, 5, 5)" in out
    print(f"resolve {resolved - started:.1f} s, venv + install {installed_at - resolved:.1f} s, "
          f"example {time.perf_counter() - installed_at:.1f} s; jax {names['jax']}, "
          f"flax {names['flax']}, {len(names)} distributions")

"""Small shared helpers for the test suite (everything float32, tiny shapes, CPU)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _fast_compile_xla_flags() -> str:
    """The suite compiles many tiny XLA programs on the CPU; the LLVM optimization passes dominate
    their compile time (3-4x) and buy nothing at these sizes, and XLA's MLIR fusion emitters take
    twice the legacy emitters' compile time (a tiny train step: 1.3 s -> 0.6 s; the suite's
    pytest 481 s -> 327 s). Float semantics are unchanged (no fast-math)."""
    from importlib import metadata

    flags = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    # XLA aborts at start on a flag it does not know: this one only where it was measured.
    if metadata.version("jaxlib").startswith("0.10."):
        flags += " --xla_cpu_use_fusion_emitters=false"
    return flags


# Set before JAX creates its backend; an XLA_FLAGS you already set is kept as given.
if "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = _fast_compile_xla_flags()

import fast_lane  # noqa: E402
import file_order  # noqa: E402
import numpy as np  # noqa: E402
import pytest
from hypothesis import settings  # noqa: E402

# How Hypothesis draws (docs/testing.md). The suite: derandomized, so every run draws the same
# examples and a failure is the code's, never the draw's; no example database, so a run does not
# depend on the last one. scripts/randomized_tests.py explores instead: "explore" draws afresh
# from the --hypothesis-seed it passes, to show that each property holds for any draw. Loaded
# here, before the test modules build their @settings (which inherit the loaded profile).
settings.register_profile("suite", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("TJ_HYPOTHESIS_PROFILE", "suite"))

from transformer_jax import ModelConfig, Norm  # noqa: E402
from transformer_jax.train import cli  # noqa: E402

# JAX's persistent compilation cache, on before anything compiles, in the pytest workers as in
# every command they start (`main` and the sweep's workers turn it on for theirs): a second run
# of the suite reads what the first compiled in-process too (tests/model's three largest files:
# 57 CPU-s cold, 31 warm). Writing costs nothing measurable: a fresh clone's cold run is as fast.
cli.enable_compilation_cache()

PARITY_ATOL = 1e-5  # max abs difference allowed in float32 parity checks


def tiny_config(**overrides) -> ModelConfig:
    """A ModelConfig small enough to compile in well under a second on a CPU.

    Keep d_model, d_ff and num_layers at these values where a test can: building the stacked
    layers compiles a batched initializer per parameter shape (seconds each on a CPU), which is
    paid once per process for each new shape. num_heads, vocab and outputs cost nothing there."""
    values = dict(vocab_size=13, num_outputs=7, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                  max_len=32, norm=Norm.POST)
    values.update(overrides)
    return ModelConfig(**values)


def max_abs_diff(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def assert_close(a, b, atol: float = PARITY_ATOL):
    diff = max_abs_diff(a, b)
    assert diff <= atol, f"max abs diff {diff:.3g} > {atol:.1g}"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def randomize_biases_and_scales(module, seed: int = 0) -> None:
    """Gives every bias and LayerNorm scale a random value (they initialize to 0 and 1), so the
    parity tests would notice a bias or scale that is dropped or misplaced. Kernels are kept."""
    import jax
    from flax import nnx

    rng = np.random.default_rng(seed)

    def draw(path, x):
        name = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)][-1]
        noise = rng.normal(0.0, 0.1, x.shape).astype(np.float32)
        if name == "bias":
            return noise
        if name == "scale":
            return 1.0 + noise
        return x

    nnx.update(module, jax.tree_util.tree_map_with_path(draw, nnx.state(module, nnx.Param)))


def kernel_and_bias(linear):
    return np.asarray(linear.kernel[...]), np.asarray(linear.bias[...])


def copy_mha_to_torch(mha, torch_mha) -> None:
    """Our MultiHeadAttention -> torch.nn.MultiheadAttention. Flax kernels are [in, out], PyTorch
    weights [out, in]; in_proj stacks the q, k, v projections."""
    import torch

    qkv = [kernel_and_bias(getattr(mha, n)) for n in ("query", "key", "value")]
    out_kernel, out_bias = kernel_and_bias(mha.out)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([k.T for k, _ in qkv])))
        torch_mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([b for _, b in qkv])))
        torch_mha.out_proj.weight.copy_(torch.from_numpy(out_kernel.T.copy()))
        torch_mha.out_proj.bias.copy_(torch.from_numpy(out_bias))


def copy_mha_to_flax(mha, flax_mha) -> None:
    """Our MultiHeadAttention -> flax's nnx.MultiHeadAttention, whose kernels keep the heads on
    their own axis: q/k/v [in, heads, head_dim], out [heads, head_dim, out]."""
    heads, head_dim = mha.num_heads, mha.head_dim
    for name in ("query", "key", "value"):
        kernel, bias = kernel_and_bias(getattr(mha, name))
        getattr(flax_mha, name).kernel[...] = kernel.reshape(-1, heads, head_dim)
        getattr(flax_mha, name).bias[...] = bias.reshape(heads, head_dim)
    kernel, bias = kernel_and_bias(mha.out)
    flax_mha.out.kernel[...] = kernel.reshape(heads, head_dim, -1)
    flax_mha.out.bias[...] = bias


# --- Training-entrypoint tests (test_train, test_cli_errors, test_faults; tests/helpers_train.py)


@pytest.fixture(scope="session")
def compilation_cache():
    """JAX's persistent compilation cache for in-process runs, as `main` enables it for its own
    (a tiny run compiles for ~20 s cold, well under a second warm). The suite turns it on at
    start (above); this says so where a test relies on it, and turns it on again if a test turned
    it off."""
    from jax._src import compilation_cache as jax_cache

    cli.enable_compilation_cache()
    # If an earlier test already compiled, JAX decided then that no cache is used; ask again.
    if getattr(jax_cache, "_cache_checked", False) and not getattr(jax_cache, "_cache_used", True):
        jax_cache.reset_cache()


@pytest.fixture(scope="session")
def tj_data_dir(tmp_path_factory) -> str:
    """One data_dir for every run of the session: each dataset is prepared once, and nothing goes
    to the user's ~/.cache/transformer_jax/tensorflow_datasets."""
    return str(tmp_path_factory.mktemp("tj_data"))


@pytest.fixture(scope="session")
def shakespeare_file() -> str:
    """The local Tiny Shakespeare ($TJ_SHAKESPEARE or <repo>/../shared/data); missing fails."""
    from helpers_train import shakespeare_path

    path = shakespeare_path()
    assert os.path.isfile(path), f"no Tiny Shakespeare at {path}; set TJ_SHAKESPEARE"
    return path


@pytest.fixture(scope="session")
def finished_tiny_run(tmp_path_factory, tj_data_dir):
    """One finished `configs/synthetic.py:tiny` run through main: (args, process, workdir).
    Tests may read it and re-run its command, never change it."""
    from helpers_train import SYNTHETIC, main_args, run_main

    workdir = tmp_path_factory.mktemp("finished") / "run"
    args = main_args(f"{SYNTHETIC}:tiny", workdir, tj_data_dir)
    return args, run_main(args), workdir


# --- Background commands (helpers_train.BackgroundRuns) -----------------------------------------


@pytest.hookimpl(trylast=True)  # after -k/-m have deselected
def pytest_collection_modifyitems(session, config, items):
    """Modules that list BACKGROUND commands run last (in their collected order), so that their
    commands, started with the session, overlap the in-process tests before them. A command is
    run only when a test that uses it (by name, or through a fixture of that name) is selected."""
    from helpers_train import BACKGROUND_RUNS

    by_module: dict = {}
    for item in items:
        by_module.setdefault(getattr(item, "module", None), []).append(item)
    if hasattr(config, "workerinput"):  # an xdist worker (scripts/test.sh: -n 2): the other
        for module in by_module:  # worker keeps the second core busy; each command runs
            BACKGROUND_RUNS.register({key: build for key, (_, build) in  # when asked
                                      (getattr(module, "BACKGROUND", None) or {}).items()})
        _longest_files_first(items)
        return
    planned = [m for m in by_module if getattr(m, "BACKGROUND", None)]
    for module in planned:
        for key, (users, build) in module.BACKGROUND.items():
            if any(i.originalname in users or set(users) & set(i.fixturenames)
                   for i in by_module[module]):
                BACKGROUND_RUNS.plan({key: build})
    last = set(planned)
    items[:] = ([i for i in items if getattr(i, "module", None) not in last] +
                [i for m in planned for i in by_module[m]])


# --- The order of the files (tests/file_order.py) ------------------------------------------------


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help="write each test file's duration in this run into tests/durations.json "
                          "(the order scripts/test.sh's workers take the files in), and each "
                          "test's into tests/test_durations.json (which leave the fast lane)")
    parser.addoption("--store-fast-lane-modules", action="store_true",
                     help="write which package modules each test of this run exercises into "
                          "tests/fast_lane_modules.json (run with --fast: docs/testing.md)")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # xdist: hand files out in the collected order,
        config.option.loadscopereorder = False  # which the workers make longest first (below)


def _longest_files_first(items) -> None:
    """Both workers collect in this same order; xdist's scheduler then hands the files out in it."""
    by_file: dict = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = file_order.longest_first(by_file, file_order.read_durations())
    items[:] = [item for f in order for item in by_file[f]]


_MEASURED: dict = {}  # test -> seconds in this run (--store-durations; a file's: its tests')
_EXERCISED: dict = {}  # test -> package modules whose code it ran (--store-fast-lane-modules)


def pytest_runtest_logreport(report):  # under xdist, the controller gets every worker's reports
    _MEASURED[report.nodeid] = _MEASURED.get(report.nodeid, 0.0) + report.duration
    for key, value in report.user_properties:
        if key == "package_modules":
            _EXERCISED.setdefault(report.nodeid, set()).update(value)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if config.getoption("--store-durations") and not hasattr(config, "workerinput"):
        root = Path(config.rootpath)
        existing = [str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")]
        by_file: dict = {}
        for test, seconds in _MEASURED.items():
            file = test.split("::")[0]
            by_file[file] = by_file.get(file, 0.0) + seconds
        file_order.write_durations(file_order.merged(file_order.read_durations(), by_file,
                                                     existing))
        file_order.write_durations(fast_lane.merged_test_durations(
            file_order.read_durations(fast_lane.TEST_DURATIONS), _MEASURED, existing),
            fast_lane.TEST_DURATIONS)
    if config.getoption("--store-fast-lane-modules") and not hasattr(config, "workerinput"):
        fast_lane.write_exercised(_EXERCISED)


@pytest.fixture(scope="session", autouse=True)
def _background_runs(tmp_path_factory, tj_data_dir):
    import types

    from helpers_train import BACKGROUND_RUNS, shakespeare_path

    paths = types.SimpleNamespace(data_dir=str(tmp_path_factory.mktemp("tj_data_background")),
                                  tj_data_dir=tj_data_dir, tmp=tmp_path_factory.mktemp("background"),
                                  shakespeare=shakespeare_path())
    BACKGROUND_RUNS.start(paths)
    yield BACKGROUND_RUNS
    BACKGROUND_RUNS.stop()


# Orbax's aborted TensorStore reads (a corrupt checkpoint; a run's checkpointer closed while a read
# is pending) may report "RuntimeError: Event loop is closed" late, through sys.unraisablehook: a
# known, harmless message. Only that one is ignored; any other unraisable exception still shows.
ORBAX_LATE_CLOSE = pytest.mark.filterwarnings(
    r"ignore:(?s).*Event loop is closed:pytest.PytestUnraisableExceptionWarning")


# --- The fast lane (tests/fast_lane.py) ----------------------------------------------------------

_PROCESS_FINDER = fast_lane.ProcessFinder()


_STORED_DURATIONS = file_order.read_durations(fast_lane.TEST_DURATIONS)


DESELECTED = pytest.StashKey[int]()  # tests collected then left out (-k, -m, --deselect)


def pytest_deselected(items):  # test_fast_lane: is this session's collection the whole suite?
    if items:
        stash = items[0].config.stash
        stash[DESELECTED] = stash.get(DESELECTED, 0) + len(items)


def pytest_itemcollected(item):  # before any -m deselects: `-m "not slow"` sees this mark
    if not item.get_closest_marker("slow") and (
            fast_lane.over_budget(item.nodeid, _STORED_DURATIONS)
            or fast_lane.starts_process(item, _PROCESS_FINDER)):
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _in_the_fast_lane(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield from _in_the_fast_lane(item)
    if item.config.getoption("--store-fast-lane-modules"):  # setup's and the call's, reported
        item.user_properties.append(("package_modules", sorted(item.stash.get(_RAN, set()))))
    return result


def _in_the_fast_lane(item):
    """A test in the fast lane that starts a process anyway, in its fixtures or itself, fails
    (tests/fast_lane.py)."""
    if item.get_closest_marker("slow"):
        return (yield)
    with fast_lane.watching_processes() as started, _recording(item):
        result = yield
    fast_lane.fail_if_started(item.nodeid, started)
    return result


_RAN = pytest.StashKey[set]()


@contextlib.contextmanager
def _recording(item):
    if not item.config.getoption("--store-fast-lane-modules"):
        yield
        return
    with fast_lane.recording_package_code() as files:
        yield
    item.stash.setdefault(_RAN, set()).update(files)

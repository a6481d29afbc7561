"""The fast lane (`scripts/test.sh --fast`, tests/fast_lane.py): a test that starts a process is
left out of it however it starts one, one that starts none stays in, and the lane still exercises
every module of the package."""
from __future__ import annotations

import ast
import importlib
import os
import runpy
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

import fast_lane
import file_order
import fork_server
import helpers_train
import conftest
from conftest import tiny_config

REPO = Path(__file__).resolve().parents[2]
FAST_LANE = '-m "not slow"'


# What the finder reads: functions of this test file (under tests/, so followed like helpers).


def _runs_a_command():
    return subprocess.run(["true"], check=True)


def _calls_a_helper_that_forks():
    return _forks_here()


def _forks_here():
    return os.fork()


class _Launcher:  # a helper class whose public method reaches Popen only through `self`
    def launch(self):
        return self._start()

    def _start(self):
        return subprocess.Popen(["true"])


def _calls_the_launcher():
    return _Launcher().launch()


def _names_process_types_only(proc):
    if isinstance(proc, subprocess.CompletedProcess):  # a type, an exception: nothing started
        raise subprocess.TimeoutExpired(proc.args, 1)
    return sys.executable


def _recursive(n):
    return _recursive(n - 1) if n else tiny_config()


@pytest.mark.parametrize("function, starts", [
    (_runs_a_command, True), (_calls_a_helper_that_forks, True), (_calls_the_launcher, True),
    (_names_process_types_only, False), (_recursive, False),
    (helpers_train.run_main, True), (helpers_train.start_main, True),
    (fork_server.run_command, True), (helpers_train.BackgroundRuns, True),
    (tiny_config, False), (helpers_train.checkpoint_steps, False)])
def test_the_finder_follows_what_a_function_uses_to_a_process(function, starts):
    assert fast_lane.ProcessFinder().starts_process(function) is starts


def _imports_the_fork_server_inside():
    from fork_server import run_command
    return run_command(["true"])


def test_a_helper_imported_inside_the_test_is_followed_whether_or_not_imported_before(
        monkeypatch):
    """`-k` on one file must mark a test as the whole suite does: there, an earlier test may
    have imported fork_server; here no module has."""
    monkeypatch.delitem(sys.modules, "fork_server")
    assert fast_lane.ProcessFinder().starts_process(_imports_the_fork_server_inside)


def _item(function, fixtures=None):
    """A collected test as starts_process reads it: its function and its fixtures' functions."""
    fixtures = fixtures or {}
    info = types.SimpleNamespace(names_closure=list(fixtures), name2fixturedefs={
        name: [types.SimpleNamespace(func=f)] for name, f in fixtures.items()})
    return types.SimpleNamespace(function=function, _fixtureinfo=info)


def test_a_test_is_marked_through_the_fixtures_it_asks_for():
    finder = fast_lane.ProcessFinder()
    assert fast_lane.starts_process(_item(_recursive, {"served": _calls_the_launcher}), finder)
    assert not fast_lane.starts_process(_item(_recursive, {"config": tiny_config}), finder)
    finished = {"finished_tiny_run": helpers_train.run_main}
    assert fast_lane.starts_process(_item(_recursive, finished), finder)
    # the background runs start only what a marked test asks for: their fixture is not read
    assert not fast_lane.starts_process(_item(_recursive, {
        "_background_runs": _runs_a_command}), finder)


def test_the_suites_own_process_tests_are_out_of_the_fast_lane(request):
    """Marks as collected in this very session (this file's own, at least)."""
    by_name = {item.name: item for item in request.session.items}
    this = by_name[request.node.name]
    assert this.get_closest_marker("slow") is None
    guard = by_name.get("test_the_guard_sees_a_process_started_from_the_test_itself")
    if guard is not None:  # collected with this file, -k aside
        assert guard.get_closest_marker("slow") is not None


def test_the_guard_sees_a_process_started_from_the_test_itself():
    with fast_lane.watching_processes() as started:
        subprocess.run(["true"], check=True)
        other = threading.Thread(target=lambda: subprocess.run(["true"], check=True))
        other.start()
        other.join()  # another thread's processes (the background runs') are not this test's
    assert len(started) == 1 and started[0].startswith("Popen.__init__")
    with pytest.raises(fast_lane.StartedAProcess, match="mark it @pytest.mark.slow"):
        fast_lane.fail_if_started("tests/x.py::test_y", started)
    assert subprocess.Popen.__init__.__module__ == "subprocess"  # put back as it was


def test_conftest_fails_a_test_in_the_lane_that_starts_a_process_and_no_slow_one():
    """conftest's wrapper of each test's setup and call, as pytest drives it."""
    def item(slow: bool):
        return types.SimpleNamespace(
            nodeid="tests/x.py::test_y", stash={}, config=types.SimpleNamespace(
                getoption=lambda name: False),
            get_closest_marker=lambda name: (name == "slow" and slow) or None)

    for slow in (False, True):
        phase = conftest._in_the_fast_lane(item(slow))
        next(phase)  # the test runs here
        subprocess.run(["true"], check=True)
        if slow:
            with pytest.raises(StopIteration):
                phase.send(None)
        else:
            with pytest.raises(fast_lane.StartedAProcess, match=r"tests/x.py::test_y started"):
                phase.send(None)


# --- Every module of the package has a fast test ---------------------------------------------


def _only_a_module_body(path: Path) -> bool:
    """A module without functions or classes of its own (a package's __init__, a moved path, an
    entry point's file): importing it is all it does."""
    tree = ast.parse(path.read_text())
    return not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                   for node in ast.walk(tree))


BODY_ONLY = [m for m in fast_lane.package_modules() if _only_a_module_body(REPO / m)]


@pytest.mark.parametrize("module", BODY_ONLY)
def test_a_module_that_is_only_its_body_runs_as_it_imports(module):
    """Runs the module's body afresh (not as __main__), so the fast lane exercises it; what it
    defines is what importing it defines."""
    ran = runpy.run_path(str(REPO / module), run_name="fast_lane")
    name = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    imported = importlib.import_module(name)
    public = lambda names: {n for n in names if not n.startswith("_")}
    assert public(ran) == public(vars(imported)) - _submodules(imported)


def _submodules(package) -> set[str]:
    """Names a package has because its submodules were imported, not because its body ran."""
    return {n for n, v in vars(package).items() if isinstance(v, types.ModuleType)
            and v.__name__.startswith(package.__name__ + ".")}


def _fast_lane_now(session) -> set[str]:
    """The tests of the fast lane as `-m "not slow"` collects them: this session's own where it
    collected the whole suite and kept every test (the full suite, as .ci/run runs it: ~34 s of
    a second collection saved on the AVX2 EPYC), else a collection of its own."""
    kept = fast_tests_of_whole_suite(session.items, session.config.stash.get(
        conftest.DESELECTED, 0), _test_files())
    return kept if kept is not None else _collected_fast_lane()


def fast_tests_of_whole_suite(items, deselected: int, test_files: set[str]) -> set[str] | None:
    """The node ids of `items` not marked slow, where `items` are every test of `test_files`
    and none was deselected; None otherwise."""
    if deselected or {i.nodeid.split("::")[0] for i in items} != test_files:
        return None
    return {i.nodeid for i in items if i.get_closest_marker("slow") is None}


def _test_files() -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")}


def _collected_fast_lane() -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                           "no:cacheprovider", "-m", "not slow", "tests"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


REFRESH = "scripts/test.sh --fast --store-fast-lane-modules (docs/testing.md)"
# A module that runs only as a command: its absl flags and those of a module the suite imports
# in-process share one registry, so importing both in one process fails (main's --workdir and
# the sweep's). Its tests run it as a command (tests/train/test_train.py, test_cli_errors.py).
COMMAND_ONLY = {"transformer_jax/main.py": "transformer_jax/studies/run/sweep.py"}


def _flag_names(path: Path) -> set[str]:
    return {node.args[0].value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("DEFINE") and node.args
            and isinstance(node.args[0], ast.Constant)}


def test_a_module_that_runs_only_as_a_command_shares_a_flag_with_one_imported_here():
    for module, imported in COMMAND_ONLY.items():
        assert _flag_names(REPO / module) & _flag_names(REPO / imported), module


def test_every_module_of_the_package_is_exercised_by_a_fast_test(request):
    exercised = fast_lane.read_exercised()
    modules = fast_lane.package_modules()
    missing = [m for m in modules if m not in exercised and m not in COMMAND_ONLY]
    assert not missing, f"no fast test ran these modules' code: {missing}; add one, then {REFRESH}"
    gone = sorted(set(exercised) - set(modules))
    assert not gone, f"tests/fast_lane_modules.json lists modules that are gone: {gone}; {REFRESH}"
    fast = _fast_lane_now(request.session)
    left = {m: tests for m, tests in exercised.items() if not set(tests) & fast}
    assert not left, f"these modules' fast tests are no longer in the fast lane: {left}; {REFRESH}"
    # and the stored durations are what conftest marks by: each stored test over the budget is out
    stored = file_order.read_durations(fast_lane.TEST_DURATIONS)
    over = {t for t in stored if fast_lane.over_budget(t, stored)}
    assert over and not over & fast, "tests/test_durations.json: scripts/test.sh --store-durations"


def test_the_whole_suites_own_collection_stands_for_the_lanes_only_when_nothing_was_left_out():
    def item(nodeid: str, slow: bool):
        return types.SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: (
            name == "slow" and slow) or None)

    files = {"tests/a/test_x.py", "tests/b/test_y.py"}
    items = [item("tests/a/test_x.py::test_1", False), item("tests/a/test_x.py::test_2", True),
             item("tests/b/test_y.py::test_3[p]", False)]
    assert fast_tests_of_whole_suite(items, 0, files) == {"tests/a/test_x.py::test_1",
                                                          "tests/b/test_y.py::test_3[p]"}
    assert fast_tests_of_whole_suite(items, 1, files) is None  # one deselected (-k, -m)
    assert fast_tests_of_whole_suite(items[:2], 0, files) is None  # one file not collected
    assert fast_tests_of_whole_suite(items, 0, files | {"tests/c/test_z.py"}) is None


def test_the_fast_lane_option_is_the_documented_marker_expression():
    script = (REPO / "scripts" / "test.sh").read_text()
    assert f'if [[ $arg == --fast ]]; then args+=({FAST_LANE});' in script
    assert f"`{FAST_LANE}`" in (REPO / "docs" / "testing.md").read_text()
    assert '"not slow"' in (REPO / "pytest.ini").read_text()


def test_a_test_over_the_budget_in_the_stored_run_leaves_the_lane():
    durations = {"tests/a/test_x.py::test_long": fast_lane.LANE_BUDGET_S + 0.1,
                 "tests/a/test_x.py::test_near": fast_lane.LANE_BUDGET_S}
    assert fast_lane.over_budget("tests/a/test_x.py::test_long", durations)
    assert not fast_lane.over_budget("tests/a/test_x.py::test_near", durations)
    assert not fast_lane.over_budget("tests/a/test_x.py::test_new", durations)  # not timed yet


def test_storing_durations_updates_what_ran_and_drops_what_got_fast_or_went():
    recorded = {"tests/a/test_x.py::test_long": 3.0, "tests/a/test_x.py::test_made_fast": 2.0,
                "tests/a/test_x.py::test_not_run": 2.5, "tests/gone/test_y.py::test_z": 4.0}
    measured = {"tests/a/test_x.py::test_long": 3.456, "tests/a/test_x.py::test_made_fast": 0.1,
                "tests/a/test_x.py::test_new": 1.0, "tests/a/test_x.py::test_quick": 0.01}
    stored = fast_lane.merged_test_durations(recorded, measured, ["tests/a/test_x.py"])
    assert stored == {"tests/a/test_x.py::test_long": 3.46, "tests/a/test_x.py::test_new": 1.0,
                      "tests/a/test_x.py::test_not_run": 2.5}

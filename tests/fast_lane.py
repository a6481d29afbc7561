"""The fast lane (`scripts/test.sh --fast`, pytest's `-m "not slow"`): the tests that start no
process, and what tells them apart as tests are added.

A test is marked `slow` (left out of the fast lane) by conftest.py when it *uses* something that
starts a process: its body, the fixtures it asks for (by argument or `getfixturevalue`), or a
helper of the tests or the scripts they call (followed through, function by function; a helper
class whole) names `subprocess.run`, `Popen`, `os.fork`, `multiprocessing`, `venv` and their
kin. The fork server and the helpers that run `main` or a sweep as commands (fork_server.py,
helpers_train.py) start their processes that way, so a test that uses them is found through
them. The package's own code is not read (what it names is no measure of what a test makes it
do: a bad flag stops before the sweep's `git`), so a test that starts a process through it
fails in every run until it is marked by hand: the guard below watches the setup and the call
of each test in the lane. Tests that start no process but take long are left out by their
measured time: one whose setup, call and teardown took over LANE_BUDGET_S in the last stored run
of the suite (`tests/test_durations.json`, written by `scripts/test.sh --store-durations` with
the files' durations, file_order.py) is marked `slow` too, so the lane stays within its 2
minutes as tests are added without anyone judging "long" by hand. A new test is in the lane
until a stored run has timed it.

The fast lane also exercises every module of the package: tests/project/test_fast_lane.py checks
that against `fast_lane_modules.json`, which the fast lane writes when run with
`--store-fast-lane-modules` (docs/testing.md says when).
"""
from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HELPERS = (REPO / "tests", REPO / "scripts")  # whose functions and classes are read
PACKAGE = REPO / "transformer_jax"
# What starts a process when called: these objects, and anything of these modules.
PROCESS_MODULES = ("multiprocessing", "venv", "pty", "concurrent.futures.process")
PROCESS_CALLS = frozenset(
    [getattr(subprocess, name) for name in ("Popen", "run", "call", "check_call", "check_output",
                                            "getoutput", "getstatusoutput")] +
    [getattr(os, name) for name in (
        "fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve",
        "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
        "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe") if hasattr(os, name)] +
    [asyncio.create_subprocess_exec, asyncio.create_subprocess_shell])
# Fixtures that start nothing a test did not ask for by name: conftest.py's background runs
# start only the commands that selected tests use, and those tests are marked through their use.
NOT_FOLLOWED_FIXTURES = frozenset({"_background_runs"})
MODULES_DATA = Path(__file__).resolve().parent / "fast_lane_modules.json"
TEST_DURATIONS = Path(__file__).resolve().parent / "test_durations.json"
# A test over this many seconds (setup, call and teardown; the AVX2 EPYC, 2 workers) leaves the
# lane. At 1.0 s, 80 of its 1,346 tests leave it: the lane took 1 min 44 s and 1 min 21 s in two
# runs, against 3 min 08 s with no budget and 2 min 04 s at 1.5 s, on that CPU (2026-12-07, each
# measured alone, warm venv).
LANE_BUDGET_S = 1.0
# Tests under this are not stored: the file keeps the ones near or over the budget.
STORED_FROM_S = 0.5


def _is_process_starter(obj) -> bool:
    with contextlib.suppress(TypeError):  # unhashable: not one of PROCESS_CALLS
        if obj in PROCESS_CALLS:
            return True
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    elif callable(obj):
        name = getattr(obj, "__module__", None) or ""
    else:
        return False
    return any(name == m or name.startswith(m + ".") for m in PROCESS_MODULES)


@functools.lru_cache(maxsize=None)
def _is_helper_file(path: str) -> bool:
    resolved = Path(path).resolve()
    return any(root in resolved.parents for root in HELPERS)


def _followed(obj) -> bool:
    """A function or class of the tests or the scripts (whose body is read). The package's own
    code is not read: what it names is no measure of what a test makes it do (an early error
    stops before the sweep's `git`); the guard sees what it starts."""
    if not isinstance(obj, (types.FunctionType, type)):
        return False
    try:
        return _is_helper_file(inspect.getsourcefile(obj) or "")
    except TypeError:
        return False


def _names_used(function) -> list:
    """The objects that `function`'s body names (globals, closure variables, what it imports, and
    their dotted attributes), as far as they resolve without running anything but getattr."""
    tree = _body(function)
    if tree is None:
        return []
    scope = dict(function.__globals__)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        with contextlib.suppress(ValueError):
            scope[name] = cell.cell_contents
    scope.update(_imported_inside(tree))
    found, inner = [], set()
    for node in ast.walk(tree):  # outer nodes first: an Attribute before the chain inside it
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
        if id(node) in inner:
            continue
        chain = _dotted(node)
        if not chain or chain[0] not in scope or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        found.append(_resolved(scope[chain[0]], chain[1:]))
    return found


@functools.lru_cache(maxsize=None)
def _body(function):
    """A function's parsed source without what decorates it (`@pytest.mark.parametrize` may name
    anything); None where there is no source. Parsed once per function (tests share fixtures)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.decorator_list = []
    return tree


def _resolved(obj, attributes):
    """`a.b.c` uses what a.b.c is (not `a`): a module named on the way (subprocess.TimeoutExpired)
    is not what is used."""
    for attribute in attributes:
        try:
            obj = inspect.getattr_static(obj, attribute)
        except AttributeError:
            break
        obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    return obj


def _imported_inside(tree) -> dict:
    """The names a function's own `import` lines bind, for the modules already imported (a test
    runs after its module, and what that imports, has been) and for the tests' own helpers
    (fork_server), imported here: whether an earlier test had imported them must not decide
    a test's lane (`-k` on one file would then fail where the whole suite passes)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name if alias.asname else alias.name.split(".")[0]
                if _module(top) is not None:
                    bound[alias.asname or top] = sys.modules[top]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _module(node.module):
            module = sys.modules[node.module]
            for alias in node.names:
                if hasattr(module, alias.name):
                    bound[alias.asname or alias.name] = getattr(module, alias.name)
    return bound


def _module(name: str):
    """The module `name` if it is imported, or is a helper of the tests or scripts (imported
    now); else None."""
    if name in sys.modules:
        return sys.modules[name]
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and _is_helper_file(spec.origin):
            return importlib.import_module(name)
    return None


def _dotted(node) -> list[str]:
    """`a.b.c` -> ["a", "b", "c"] for a Name or an Attribute chain ending in a Name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [node.id, *reversed(parts)]


class ProcessFinder:
    """Whether a function starts a process, through what it names (cached per object)."""

    def __init__(self):
        self._known: dict = {}

    def starts_process(self, obj) -> bool:
        key = id(obj)
        if key in self._known:
            return self._known[key][1]
        self._known[key] = (obj, False)  # a cycle (recursion) adds nothing while it is open
        found = any(self._through(used) for used in self._parts(obj))
        self._known[key] = (obj, found)
        return found

    def _parts(self, obj) -> list:
        if isinstance(obj, type):  # a helper class: whatever any of its methods names
            methods = [getattr(value, "__func__", value) for value in vars(obj).values()]
            return [used for m in methods if isinstance(m, types.FunctionType)
                    for used in _names_used(m)]
        return _names_used(inspect.unwrap(obj))

    def _through(self, used) -> bool:
        if _is_process_starter(used):
            return True
        if not isinstance(used, (types.FunctionType, type, types.ModuleType)):
            used = type(used)  # an instance of a helper class (BACKGROUND_RUNS): its class
        # what `self.x()` calls is in the class: a class used is all its methods
        return _followed(used) and self.starts_process(_class_of_method(used) or used)


def _class_of_method(function):
    """The class that defines a method (a helper's methods call each other through `self`)."""
    if not isinstance(function, types.FunctionType) or "<locals>" in function.__qualname__:
        return None
    owner = function.__globals__.get(function.__qualname__.split(".")[0])
    return owner if isinstance(owner, type) and "." in function.__qualname__ else None


def starts_process(item, finder: ProcessFinder) -> bool:
    """Whether a collected test, or a fixture it asks for, starts a process (module docstring)."""
    function = getattr(item, "function", None)
    if function is None:  # not a Python function (a doc snippet): decided by its own marks
        return False
    return any(finder.starts_process(f) for f in [function, *_fixture_functions(item)])


def _fixture_functions(item) -> list:
    """The functions of the fixtures a test asks for: by argument, and by name through
    `request.getfixturevalue("name")` in those fixtures (a parametrized choice of runs)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    definitions = {name: list(info.name2fixturedefs.get(name, ())) for name in info.names_closure}
    manager = getattr(getattr(item, "session", None), "_fixturemanager", None)
    for fixturedef in [d for ds in definitions.values() for d in ds]:
        for name in _requested_by_name(getattr(fixturedef, "func", None)):
            if name not in definitions and manager is not None:
                definitions[name] = list(manager.getfixturedefs(name, item) or ())
    return [inspect.unwrap(d.func) for name, ds in definitions.items() for d in ds
            if name not in NOT_FOLLOWED_FIXTURES and _followed(inspect.unwrap(d.func))]


@functools.lru_cache(maxsize=None)
def _requested_by_name(function) -> tuple[str, ...]:
    tree = _body(inspect.unwrap(function))
    if tree is None:
        return ()
    return tuple(node.args[0].value for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr == "getfixturevalue" and node.args
                 and isinstance(node.args[0], ast.Constant)
                 and isinstance(node.args[0].value, str))


# --- The guard: an unmarked test that starts a process anyway fails --------------------------


class StartedAProcess(AssertionError):
    pass


@contextlib.contextmanager
def watching_processes():
    """Records what starts a process from this thread while open (other threads, such as the
    background runs', are not this test's); yields that list."""
    started: list[str] = []
    here = threading.get_ident()

    def watch(name, original):
        def watched(*args, **kwargs):
            if threading.get_ident() == here and not _library_probe(args, kwargs):
                started.append(f"{name}({_shown(args)})")
            return original(*args, **kwargs)
        return watched

    patches = [(subprocess.Popen, "__init__"), *((os, n) for n in
               ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp") if hasattr(os, n))]
    if "fork_server" in sys.modules:  # its commands are forks of a server started earlier
        patches.append((sys.modules["fork_server"].ForkServer, "start"))
    originals = [(owner, name, getattr(owner, name)) for owner, name in patches]
    for owner, name, original in originals:
        setattr(owner, name, watch(f"{getattr(owner, '__name__', owner)}.{name}", original))
    try:
        yield started
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


# What libraries run once per process and keep (matplotlib's font list; ctypes.util.find_library;
# platform.uname): whichever test comes first in a worker would start them, so they are no test's.
LIBRARY_PROBES = frozenset({"fc-list", "ldconfig", "uname", "gcc", "cc", "ld", "objdump"})


def _library_probe(args, kwargs) -> bool:
    command = args[1] if len(args) > 1 else kwargs.get("args")
    if isinstance(command, (str, bytes, os.PathLike)):
        command = os.fsdecode(command).split()[:1]
    if not isinstance(command, (list, tuple)) or not command:
        return False
    return os.path.basename(os.fsdecode(command[0])) in LIBRARY_PROBES


def _shown(args) -> str:
    return ", ".join(repr(a)[:80] for a in args[1:3] if not isinstance(a, bytes))


def fail_if_started(nodeid: str, started: list[str]) -> None:
    if started:
        raise StartedAProcess(
            f"{nodeid} started a process ({started[0]}) but is in the fast lane: mark it "
            f"@pytest.mark.slow (tests/fast_lane.py says why)")


# --- Which package modules each test exercises (--store-fast-lane-modules) --------------------



@contextlib.contextmanager
def recording_package_code():
    """Yields a set that fills with the package files (relative to the repository) whose code
    runs in this thread while open: functions, methods, module bodies."""
    seen_codes: set = set()

    def tracer(frame, event, arg):
        seen_codes.add(frame.f_code)
        return None  # no line events: only each new frame's code is wanted

    files: set[str] = set()
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield files
    finally:
        sys.settrace(previous)
        package = str(PACKAGE) + os.sep
        for code in seen_codes:  # Python files only: Jinja2 compiles a template to code that
            # names the template's file (studies/render/templates/*.j2), which is no module
            if code.co_filename.startswith(package) and code.co_filename.endswith(".py"):
                files.add(str(Path(code.co_filename).relative_to(REPO)))


def write_exercised(records: dict[str, set], path: Path = MODULES_DATA) -> None:
    path.write_text(json.dumps(exercised_by(records), indent=1) + "\n")


def read_exercised(path: Path = MODULES_DATA) -> dict[str, list[str]]:
    return json.loads(path.read_text())


def package_modules() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py"))


def exercised_by(records: dict[str, set]) -> dict[str, list[str]]:
    """{module: [up to three tests that ran its code]} from {test: modules it ran}; three, so a
    test renamed or marked slow later leaves the module covered until the next refresh."""
    by_module: dict[str, list[str]] = {}
    for test in sorted(records):
        for module in records[test]:
            by_module.setdefault(module, []).append(test)
    return {m: tests[:3] for m, tests in sorted(by_module.items())}


def over_budget(nodeid: str, durations: dict[str, float]) -> bool:
    return durations.get(nodeid, 0.0) > LANE_BUDGET_S


def merged_test_durations(recorded: dict[str, float], measured: dict[str, float],
                          existing_files) -> dict[str, float]:
    """The durations to store: this run's (rounded; a test it timed under STORED_FROM_S is
    dropped, so a test made faster rejoins the lane) over the recorded ones, whose files still
    exist, sorted by id."""
    existing = set(existing_files)
    both = {**recorded, **{t: round(s, 2) for t, s in measured.items()}}
    return {t: both[t] for t in sorted(both)
            if t.split("::")[0] in existing and both[t] >= STORED_FROM_S}


"""The code that computes the values a study judges, so that its fingerprint covers that code.

A judged value comes from code outside the experiment file: the analyses and the helpers they
call, the task's data generator, the evaluation functions, how a run's curve becomes the value
an expectation reads, and the package constants all of these read, with those the experiment
file, or a shared file it loads (experiments/_*.py), imports from the package (e.g.
`FLAT_ACCURACY`). `refs(study, experiment)` names them, as
(file, top-level name) pairs: from the live objects, it follows the names each one's syntax tree
reads, within the measuring code (`measuring`). `digest(refs, read)` hashes what those names
are bound to in any source tree, docstrings out (studies/design/syntax.py): the files on disk, a git
commit's (history.py), or a scratch copy (the tests). So a change to the code that computes a
judged value moves the fingerprint of exactly the studies that use it, and no other.

Outside: training code (layers, optimizer, the loop; what the provenance's commit records),
the judging code (the statistics and comparisons; judging_rules' version covers it), and what
renders, stores or runs a study (pages, plots, records, the sweep).
"""
from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from transformer_jax.studies.design import syntax

PACKAGE = "transformer_jax"
ROOT = Path(__file__).resolve().parents[3]  # the directory that holds the package
# Measuring code: a module under one of these, unless under one of NOT_MEASURING.
MEASURING = (f"{PACKAGE}.studies", f"{PACKAGE}.data", f"{PACKAGE}.train.evaluation",
             f"{PACKAGE}.train.steps")
NOT_MEASURING = tuple(f"{PACKAGE}.studies.{m}" for m in (
    # the judge room (judging code: judging_rules' version covers it), the old paths of its
    # modules (stats, multiplicity), tuning (the design of a tuned arm, and the judge's choice
    # named there), the rules and their digest
    "judge.", "stats", "multiplicity", "tuning", "judging_rules", "judging_digest",
    # rooms that render a study's pages and figures, or run its sweep (a package each), and
    # the old paths of their modules (shims: an old commit's experiment file imports them)
    "render.", "run.", "plots", "markdown", "pages", "verdict_text", "board", "bounds", "forest",
    "terminal", "sweep", "jobs", "schedule", "plan", "evaluate",
    # the room of a study's records (what a results file holds, where it came from, its
    # design's history) and its modules' old paths; publishing
    "records.", "export", "record", "provenance", "preregistration", "history", "suite_time",
    "cap_reason", "publish", "rejudge",
    # the design room (loading, listing and fingerprinting a design: the fingerprint's own
    # machinery) and its modules' old paths
    "design.", "catalog", "loading", "measured_code", "judged_code", "syntax"))
# What the study module holds that is judging code (its verdict, not its measurement): Study and
# Expectation, which hand their judging to the judge room, and the judge room's names that it
# re-exports (defined in the room, which NOT_MEASURING names; listed here as before they moved).
JUDGING_NAMES = {f"{PACKAGE}.studies.study": ("Study", "Expectation", "Judgement", "Comparison",
                                              "Measure", "Kind", "NO_EFFECT", "RATES",
                                              "REFUSED_ON_LOST", "PAIRS", "MIN_MEASURED")}
# Every study's values pass through these: a run's evaluation and how a curve becomes the value
# an expectation reads (named, so that each is followed like an analysis).
EVALUATION = (("train.steps", "loss_and_metrics"), ("train.steps", "make_eval_step"),
              ("train.steps", "finish_eval"), ("train.evaluation", "evaluate"),
              ("studies.report", "judged_values"), ("studies.report", "add_measured"))
TASKS = {"synthetic": ("data.synthetic", "make"), "text": ("data.text", "make")}

# Measured code that moved (issue 67: studies/ in rooms): a file's path today -> the paths it had
# before, newest first. A name moved alone from one file to another: (path today, name) -> the
# same. The digest names such code by its first path and reads a commit from before a move
# there, so moving code moves no fingerprint, and changing it still does (`digest`).
MOVED: dict[str, tuple[str, ...]] = {}
MOVED_NAMES: dict[tuple[str, str], tuple[str, ...]] = {
    # below the analyses, which read them (analysis/depth.py had imported the report for one)
    **{("transformer_jax/studies/run_values.py", name): ("transformer_jax/studies/report.py",)
       for name in ("final_value", "value_at", "late_gain")},
}

EXPERIMENT_MODULE = "_tj_"  # how loading.load_module names an experiment file's module
Ref = tuple[str, str]  # (file relative to ROOT, name bound at its top level)


def measuring(module: str) -> bool:
    return module.startswith(MEASURING) and not module.startswith(NOT_MEASURING)


def refs(study, experiment: Optional[Path] = None) -> tuple[Ref, ...]:
    """The (file, name) pairs of the code that computes what `study` judges (module docstring);
    `experiment`: its file, whose imports from the package count too."""
    found: dict[Ref, None] = {}
    seen: dict[int, Any] = {}  # id -> the object, kept alive so that no id is used twice
    roots = [*_callables(list(study.analyses)), *_callables([study.evaluate]),
             *(_named(m, n) for m, n in EVALUATION), *_task_roots(study)]
    for obj in roots:
        _follow(obj, found, seen)
    if experiment is not None:
        for ref in _imported(Path(experiment)):
            _add_name(ref, found, seen)
    return tuple(sorted(found))


def digest(found: Iterable[Ref], read: Callable[[str], Optional[str]]) -> str:
    """sha256 (16 hex digits) of what each (file, name) is bound to in the source `read` gives
    ('absent' where the file or the name is not there), docstrings out. A ref is named by its
    first path (`MOVED`) and read at the first of its paths that binds it, today's first: so
    code that moved, unchanged, hashes as it did where it was, and a commit from before the
    move reads it there."""
    parts = []
    for (path, name), first in sorted(((ref, paths_of(ref)[-1]) for ref in found),
                                      key=lambda pair: (pair[1], pair[0][1])):
        bound = next(filter(None, (_bound(read(p), name) for p in paths_of((path, name)))), None)
        parts.append(f"{first}:{name}={bound}")
    return syntax.sha("\n".join(parts))


def _bound(text: Optional[str], name: str) -> Optional[str]:
    return syntax.top_level(text, name) if text else None


def paths_of(ref: Ref) -> tuple[str, ...]:
    """Where the code `ref` names has lived: today's path, then each earlier one back to its
    first (`MOVED`, `MOVED_NAMES`)."""
    path, name = ref
    return (path, *MOVED_NAMES.get(ref, MOVED.get(path, ())))


def read_disk(path: str) -> Optional[str]:
    """A file's text under ROOT (None: no such file): today's working tree."""
    try:
        return _read(path, (ROOT / path).stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=1024)
def _read(path: str, modified: int) -> str:
    return (ROOT / path).read_text()  # once per version of the file (`modified`)


def _named(module: str, name: str) -> Any:
    return getattr(sys.modules.get(f"{PACKAGE}.{module}") or _import(f"{PACKAGE}.{module}"), name)


def _import(module: str):
    import importlib
    return importlib.import_module(module)


def _task_roots(study) -> list[Any]:
    """The data generator of every kind of data the study's variants train on (an evaluation-
    only study trains on none: its evaluate function reads its own units)."""
    if study.evaluate is not None:
        return []
    base = (study.base.get("data") or {}).get("kind", "synthetic")
    kinds = {overrides.get("data.kind", base) for overrides in study.variants.values()}
    return [_named(*TASKS[k]) for k in sorted(kinds) if k in TASKS]


def _callables(objects: list[Any]) -> list[Any]:
    """The functions and classes inside analyses: partials, closures, dataclass fields, lists."""
    out: list[Any] = []

    def walk(obj: Any, depth: int) -> None:
        if depth > 8 or obj is None or isinstance(obj, (str, bytes, int, float, bool, enum.Enum)):
            return
        if isinstance(obj, functools.partial):
            walk(obj.func, depth + 1)
            for x in [*obj.args, *obj.keywords.values()]:
                walk(x, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                walk(x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                walk(x, depth + 1)
        elif isinstance(obj, types.FunctionType):
            out.append(obj)
            for cell in obj.__closure__ or ():
                try:
                    walk(cell.cell_contents, depth + 1)
                except ValueError:  # a cell not yet bound
                    pass
        elif isinstance(obj, type):
            out.append(obj)
        elif dataclasses.is_dataclass(obj):
            out.append(type(obj))
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name), depth + 1)
    walk(objects, 0)
    return out


# A package function or class (bound at its module's top level, no closure) -> every ref reached
# from it. The package's code is the same for the life of a process, and each study's load
# followed the same package code again: a history walk loads ~370 old versions of the studies,
# and following took 9.5 s of its 12 s of loading (AVX-512 EPYC).
_REACHED: dict[tuple[str, str], tuple[Ref, ...]] = {}
_REACHING: set[tuple[str, str]] = set()  # being followed now: a cycle back to one walks it


def _follow(obj: Any, found: dict[Ref, None], seen: dict[int, Any]) -> None:
    """Adds `obj` (a function or class) if it is measuring code, and follows the names its
    syntax tree reads: measuring functions, classes and module constants, recursively. Code
    outside the package (an experiment file's lambda) is followed but not added: its own file
    is the design's. What package code reaches is found once (`_REACHED`): the refs are the
    union of what each object reaches, whichever way it was reached."""
    if id(obj) in seen:
        return
    key = _package_key(obj)
    if key is None or key in _REACHING:
        _walk(obj, found, seen)
        return
    if key not in _REACHED:
        _REACHING.add(key)
        try:
            reached: dict[Ref, None] = {}
            _walk(obj, reached, {})
            _REACHED[key] = tuple(reached)
        finally:
            _REACHING.discard(key)
    seen[id(obj)] = obj
    found.update(dict.fromkeys(_REACHED[key]))


def forget() -> None:
    """Forgets what package code reaches (`_REACHED`): for a test that changes package state."""
    _REACHED.clear()


def _package_key(obj: Any) -> Optional[tuple[str, str]]:
    """(module, qualified name) of a package function or class bound at its module's top level;
    None for anything else (a closure, a local function, an experiment file's code)."""
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", "")
    if not module.startswith(f"{PACKAGE}.") or "<locals>" in name or "." in name:
        return None
    return None if getattr(obj, "__closure__", None) else (module, name)


def _walk(obj: Any, found: dict[Ref, None], seen: dict[int, Any]) -> None:
    seen[id(obj)] = obj
    module = getattr(obj, "__module__", None) or ""
    ours = measuring(module) and _top_name(obj) not in JUDGING_NAMES.get(module, ())
    if not ours and not module.startswith(EXPERIMENT_MODULE):
        return  # other package code, or a library's
    if ours:
        found[(_file(module), _top_name(obj))] = None
    for node, scope in _trees_and_scopes(obj):
        for name in syntax.loaded_names(node):
            _resolve(name, scope, found, seen)


def _trees_and_scopes(obj: Any) -> list[tuple[Any, dict]]:
    """The syntax tree(s) of a function or class with the names visible to it."""
    try:
        text = Path(inspect.getsourcefile(obj) or "").read_text()
    except (OSError, TypeError):
        return []
    if isinstance(obj, type):
        module = syntax.parsed(text)
        nodes = [n for n in (module.body if module else ())
                 if getattr(n, "name", None) == obj.__name__]
        return [(n, vars(sys.modules[obj.__module__])) for n in nodes]
    scope = dict(obj.__globals__)
    for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:
            pass
    return [(n, scope) for n in syntax.function_node(obj.__code__, text)]


def _resolve(name: str, scope: dict, found: dict[Ref, None], seen: dict[int, Any]) -> None:
    head, _, attr = name.partition(".")
    if head not in scope:
        return
    value = scope[head]
    if isinstance(value, types.ModuleType):
        if not attr or not hasattr(value, attr):
            return
        if measuring(value.__name__) and _is_constant(getattr(value, attr), value.__name__, attr):
            _add_name((_file(value.__name__), attr), found, seen)
            return
        value = getattr(value, attr)
    elif measuring(scope.get("__name__", "")) and _is_constant(value, scope["__name__"], head):
        _add_name((_file(scope["__name__"]), head), found, seen)
        return
    value = inspect.unwrap(value) if callable(value) and hasattr(value, "__wrapped__") else value
    if isinstance(value, (types.FunctionType, type)):
        _follow(value, found, seen)
    elif isinstance(value, functools.partial) or dataclasses.is_dataclass(value):
        for obj in _callables([value]):
            _follow(obj, found, seen)


def _add_name(ref: Ref, found: dict[Ref, None], seen: dict[int, Any]) -> None:
    """A module-level name of a measuring file: where it is bound there (a constant, or what
    the file imports from another measuring module: followed to where it is defined)."""
    path, name = ref
    text = read_disk(path) or ""
    if syntax.binds(text, name):
        module = sys.modules.get(_module(path))
        value = getattr(module, name, None) if module else None
        value = inspect.unwrap(value) if callable(value) and hasattr(value, "__wrapped__") \
            else value
        if isinstance(value, (types.FunctionType, type)):
            _follow(value, found, seen)
        elif measuring(_module(path)) and \
                name not in JUDGING_NAMES.get(_module(path), ()):
            found[ref] = None
        return
    # imported from another module, or an old path's shim handing every name to its new one
    # (an experiment file that imports a moved measured name through its old path)
    source = syntax.imported_from(text, name) or syntax.moved_to(text)
    if source and measuring(source):
        _add_name((_file(source), name), found, seen)


def _imported(experiment: Path, seen: Optional[set] = None) -> list[Ref]:
    """What an experiment file imports from measuring modules, by (file, name), with what the
    shared files it loads beside it import (`load_module(HERE / "_depth_remedies.py")`: that
    module's FLAT_ACCURACY is the study's as much as its own imports are). Another study's file
    that it loads (lm_positions.py) is not followed: its imports (study_schedule) write the
    config, which the design holds; following them would move the fingerprints of six studies
    whose code has not changed."""
    seen = set() if seen is None else seen
    seen.add(experiment.resolve())
    module = syntax.parsed(experiment.read_text())
    out = []
    for node in module.body if module else ():
        if isinstance(node, ast.ImportFrom) and node.module and measuring(node.module):
            out += [(_file(node.module), alias.name) for alias in node.names]
    for sibling in _loaded_beside(module, experiment.parent):
        if sibling.resolve() not in seen:
            out += _imported(sibling, seen)
    return out


def _loaded_beside(module: Optional[ast.Module], folder: Path) -> list[Path]:
    """The shared files (not studies: their names start with _) beside an experiment that it
    loads by name: each "_<name>.py" string in a statement that calls load_module."""
    return [folder / name for name in sorted(syntax.load_module_strings(module))
            if name.startswith("_") and name.endswith(".py") and (folder / name).is_file()]


def _is_constant(value: Any, module: str, name: str) -> bool:
    """Whether module `module`'s `name`, bound to `value`, is a constant. A mutable container
    is one only where the source binds it to a display (`{...}`, `[...]`): a cache built by a
    call (`_RESTORED = OrderedDict()`) is state, and what a run has put in it must not decide
    the refs, so the fingerprint is the same in every process."""
    if isinstance(value, (dict, list, set)):
        return syntax.bound_to_display(read_disk(_file(module)) or "", name)
    return _plain(value)


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_plain(v) for v in value)
    return isinstance(value, (bool, int, float, str, type(None)))


def _top_name(obj: Any) -> str:
    return obj.__qualname__.split(".")[0]


def _file(module: str) -> str:
    """The file of a package module, relative to ROOT."""
    mod = sys.modules.get(module) or _import(module)
    return Path(mod.__file__).resolve().relative_to(ROOT).as_posix()


def _module(path: str) -> str:
    """The module name of a package file (relative to ROOT)."""
    dotted = path[:-len(".py")].replace("/", ".")
    return dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted

"""What a study's analyses judge, as plain values, so that the design's fingerprint covers them.

An analysis is a function (often a closure made by `make_analysis(checks)`, or a functools.partial);
its checks are dataclasses holding a text and a `test` function whose thresholds are literals,
module constants or closed-over values. `describe` reduces such an object to JSON-able values: a
function's name, its syntax tree (docstrings out, strings emptied: studies/design/syntax.py), the
module constants it reads, its closed-over values, partial arguments and defaults, recursively. So
moving a check's threshold (`>= 0.5` to `>= 0.4`, a constant, a partial keyword) or flipping its
test's comparison moves the fingerprint, while the markdown an analysis writes does not: it is text,
and strings inside a function are not part of the description (a check's own `text` is). A syntax
tree reads the same under every CPython; the bytecode this once read did not.

Functions that a description reaches through a module's globals are named, not descended into:
the code that computes what the study judges is measured_code's, digested whole.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import types
from pathlib import Path
from typing import Any

from transformer_jax.studies.design import syntax

PLAIN = (bool, int, float, str, type(None))
MAX_DEPTH = 6  # closures of closures: deeper than any analysis goes; a cycle stops here


def describe(obj: Any, depth: int = 0) -> Any:
    """`obj` as plain values (see the module docstring)."""
    if depth > MAX_DEPTH:
        return "…"
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, PLAIN):
        return obj
    if isinstance(obj, (tuple, list)):
        return [describe(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, functools.partial):
        return {"partial": describe(obj.func, depth + 1),
                "args": describe(list(obj.args), depth + 1),
                "keywords": describe(dict(obj.keywords), depth + 1)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"type": type(obj).__qualname__,
                **{f.name: describe(getattr(obj, f.name), depth + 1)
                   for f in dataclasses.fields(obj)}}
    if isinstance(obj, types.FunctionType):
        return _function(obj, depth)
    return f"{type(obj).__module__}.{type(obj).__qualname__}"  # no finer reading of it


def _function(f: types.FunctionType, depth: int) -> dict[str, Any]:
    trees = _trees(f)
    names = {n.split(".")[0] for tree in trees for n in syntax.loaded_names(tree)}
    constants = {name: f.__globals__[name] for name in sorted(names)
                 if name in f.__globals__ and _is_plain_constant(f.__globals__[name])}
    cells = [c.cell_contents for c in f.__closure__ or () if _filled(c)]
    return {"function": f"{f.__module__}.{f.__qualname__}",
            "tree": [syntax.dump(t, strings=False, name=False) for t in trees],
            "constants": describe(constants, depth + 1),
            "closure": [describe(c, depth + 1) for c in cells],
            "defaults": describe(list(f.__defaults__ or ()), depth + 1)}


def _trees(f: types.FunctionType) -> list:
    """The function's definition(s) in its source file's syntax tree ([]: no source)."""
    try:
        text = Path(f.__code__.co_filename).read_text()
    except OSError:
        return []
    return syntax.function_node(f.__code__, text)


def _is_plain_constant(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_plain_constant(v) for v in value)
    return isinstance(value, PLAIN) and not isinstance(value, str) or isinstance(value, str) \
        and len(value) <= 80  # a short string constant (a mode, a metric); not a paragraph


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet bound (a recursive closure)
        return False
    return True

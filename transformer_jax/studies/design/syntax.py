"""Code as its syntax tree, docstrings out: what the judging rules' digest, the analyses'
description and the measured code's digest hash, so that rewording a docstring or a comment moves
none of them, and a changed number, operator, branch or name moves each. A syntax tree, unlike
bytecode, is the same under every CPython version that parses the file.
"""
from __future__ import annotations

import ast
import copy
import functools
import hashlib
import types
from typing import Optional


def without_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with the docstring of every module, class and function in it taken out."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def without_strings(tree: ast.AST) -> ast.AST:
    """`tree` with every string constant emptied (text a function writes, not what it tests)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return tree


@functools.lru_cache(maxsize=512)
def parsed(text: str) -> Optional[ast.Module]:
    """A source text's syntax tree (None: it does not parse); one parse per distinct text."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


@functools.lru_cache(maxsize=8192)
def top_level(text: str, name: str) -> Optional[str]:
    """The dump, docstrings out, of what module source `text` binds to `name` at its top level:
    a function or class definition, or an assignment (None: it binds no such name)."""
    node = _bindings(text).get(name)
    return None if node is None else ast.dump(without_docstrings(_copy(node)))


def binds(text: str, name: str) -> bool:
    """Whether module source `text` binds `name` at its top level."""
    return name in _bindings(text)


@functools.lru_cache(maxsize=512)
def _bindings(text: str) -> dict[str, ast.stmt]:
    """name -> the first top-level statement of a source text that binds it."""
    module = parsed(text)
    found: dict[str, ast.stmt] = {}
    for node in module.body if module else ():
        for name in _names_bound(node):
            found.setdefault(name, node)
    return found


def bound_to_display(text: str, name: str) -> bool:
    """Whether module source `text` binds `name` at its top level to a dict, list or set
    display (a literal written out, not a call that builds one)."""
    node = _bindings(text).get(name)
    value = getattr(node, "value", None)
    return isinstance(value, (ast.Dict, ast.List, ast.Set))


def _names_bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def imported_from(text: str, name: str) -> Optional[str]:
    """The module that source `text` imports `name` from (`from M import name`; None: none)."""
    module = parsed(text)
    for node in module.body if module else ():
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any((alias.asname or alias.name) == name for alias in node.names):
                return node.module
    return None


def moved_to(text: str) -> Optional[str]:
    """The module an old path's shim hands its names over to (`__getattr__, __dir__ =
    moved(__name__, "new.module")`, transformer_jax/_moved.py; None: `text` is no shim)."""
    module = parsed(text)
    for node in module.body if module else ():
        call = getattr(node, "value", None)
        if isinstance(node, ast.Assign) and isinstance(call, ast.Call) \
                and isinstance(call.func, ast.Name) and call.func.id == "moved" \
                and len(call.args) == 2 and isinstance(call.args[1], ast.Constant):
            return call.args[1].value
    return None


def function_node(code: types.CodeType, text: str) -> list[ast.AST]:
    """The definitions in source `text` of the function whose code is `code`: the `def` or
    `lambda` that starts on its first line with its name (several lambdas on one line: all of
    them, an over-cover that never misses one)."""
    found = _functions(text).get((code.co_name, code.co_firstlineno), [])
    if len(found) > 1:  # lambdas on one line: the one whose span holds the code's positions
        inside = [n for n in found if _spans(n, code)]
        found = inside or found
    return found


def _spans(node: ast.AST, code: types.CodeType) -> bool:
    """Whether every source position of `code`'s instructions lies within `node` (the empty
    ones, at column 0, belong to no expression: the function's entry and return)."""
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
    positions = [(line, col, end_line, end_col) for line, end_line, col, end_col
                 in code.co_positions() if line is not None and col is not None
                 and (end_line, end_col) > (line, col)]
    return bool(positions) and all(start <= (line, col) and (end_line, end_col) <= end
                                   for line, col, end_line, end_col in positions)


@functools.lru_cache(maxsize=512)
def _functions(text: str) -> dict[tuple[str, int], list[ast.AST]]:
    """(name, first line) -> the function definitions and lambdas there, of a source text."""
    module = parsed(text)
    found: dict[tuple[str, int], list[ast.AST]] = {}
    for node in ast.walk(module) if module else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.setdefault((node.name, first), []).append(node)
        elif isinstance(node, ast.Lambda):
            found.setdefault(("<lambda>", node.lineno), []).append(node)
    return found


@functools.lru_cache(maxsize=4096)  # a node of a cached tree: read once
def loaded_names(node: ast.AST) -> tuple[str, ...]:
    """The names a piece of code reads, as written: 'name' or 'name.attribute' (one level),
    each once, in order."""
    names = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            names.append(f"{sub.value.id}.{sub.attr}")
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            names.append(sub.id)
    return tuple(dict.fromkeys(names))


# Statements that may call load_module (an assignment, a bare call, a return)
SIMPLE_STATEMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)


def load_module_strings(tree: Optional[ast.AST]) -> frozenset[str]:
    """Every string constant in a statement that calls load_module: the names of the files it
    loads, whole ("_depth_remedies.py") or in parts (f"{n}.py" for n in ("lm_positions", ...))."""
    if tree is None:
        return frozenset()
    found: set[str] = set()
    for statement in (n for n in ast.walk(tree) if isinstance(n, SIMPLE_STATEMENTS)):
        nodes = list(ast.walk(statement))
        if any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None))
               == "load_module" for n in nodes):
            found |= {n.value for n in nodes
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return frozenset(found)


def dump(node: ast.AST, strings: bool = True, name: bool = True) -> str:
    """A node's dump, docstrings out (every string emptied unless `strings`; a definition's own
    name left out unless `name`: it is said apart, where it matters)."""
    node = without_docstrings(_copy(node))
    if not name and hasattr(node, "name"):
        node.name = ""
    return ast.dump(node if strings else without_strings(node))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _copy(node: ast.AST) -> ast.AST:
    """A deep copy: the parsed trees are cached and shared, and the digests edit theirs."""
    return copy.deepcopy(node)

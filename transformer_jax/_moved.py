"""Old module paths that still work for one release, and say where the module went.

A module that moved leaves behind a file that calls `moved(__name__, new_path)`: the module-level
`__getattr__` and `__dir__` it returns hand every name over from the new module, the same objects
(so `isinstance` holds across both paths), and warn once per process with a DeprecationWarning
naming the new path, at the line that used the old one. (A module that replaced itself in
sys.modules did the same silently, and type checkers could not follow it; the old file says under
TYPE_CHECKING what it stands for.) Nothing inside transformer_jax imports an old path: .importlinter
forbids it.

A removed path is gone for users, but the design history (studies/records/history.py) still loads
old commits' experiment files, which import it: `removed_paths_readable()` lets them, silently and
only while it lasts, from REMOVED.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import runpy
import sys
import types
import warnings
from typing import Any, Callable, Iterator

# Paths removed after warning for a release (docs/changelog.md): old path -> where it went.
REMOVED = {  # 0.2.0
    "transformer_jax.study": "transformer_jax.studies.study",
    "transformer_jax.probes": "transformer_jax.studies.analysis.probes",
    "transformer_jax.attention": "transformer_jax.model.attention",
    "transformer_jax.positions": "transformer_jax.model.positions",
    "transformer_jax.norms": "transformer_jax.model.norms",
    "transformer_jax.blocks": "transformer_jax.model.blocks",
    "transformer_jax.defaults": "transformer_jax.train.defaults",
}


def moved(old: str, new: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for the module `old`, which now lives at `new`."""
    warned = False

    def __getattr__(name: str) -> Any:
        nonlocal warned
        if not warned and not (name.startswith("__") and name.endswith("__")):  # (tools' probes)
            warned = True  # first: a warning filter that raises must not make it warn twice
            warnings.warn(f"{old} is deprecated and will be removed in the next release: "
                          f"import {new} instead", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    def __dir__() -> list[str]:
        return dir(importlib.import_module(new))

    return __getattr__, __dir__


def run_moved(old: str, new: str) -> None:
    """`python -m old` of a module that moved: warns once, naming the new command, then runs
    `new` as __main__ with the same arguments."""
    warnings.warn(f"python -m {old} is deprecated and will be removed in the next release: "
                  f"run python -m {new} instead", DeprecationWarning, stacklevel=2)
    runpy.run_module(new, run_name="__main__", alter_sys=True)


class _RemovedPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports each REMOVED path as a module holding the new module's names (the same objects)."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in REMOVED else None

    def create_module(self, spec):
        return None  # a fresh module: the new one's own attributes (__spec__, ...) stay its own

    def exec_module(self, module: types.ModuleType) -> None:
        new = importlib.import_module(REMOVED[module.__name__])
        module.__dict__.update({k: v for k, v in vars(new).items()
                                if not (k.startswith("__") and k.endswith("__"))})
        if hasattr(new, "__all__"):
            module.__all__ = list(new.__all__)


@contextlib.contextmanager
def removed_paths_readable() -> Iterator[None]:
    """While it lasts, `import transformer_jax.study` (each REMOVED path) works without a warning;
    after, the paths are gone again: out of sys.modules and off their parent packages."""
    finder = _RemovedPaths()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for old in REMOVED:
            module = sys.modules.pop(old, None)
            parent, _, child = old.rpartition(".")
            if module is not None and getattr(sys.modules.get(parent), child, None) is module:
                delattr(sys.modules[parent], child)

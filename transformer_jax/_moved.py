"""Old module paths that still work for one release, and say where the module went.

A module that moved leaves behind a file that calls `moved(__name__, new_path)`: the module-level
`__getattr__` and `__dir__` it returns hand every name over from the new module, the same objects
(so `isinstance` holds across both paths), and warn once per process with a DeprecationWarning
naming the new path, at the line that used the old one. (A module that replaced itself in
sys.modules did the same silently, and type checkers could not follow it; the old file says under
TYPE_CHECKING what it stands for.) Nothing inside transformer_jax imports an old path: .importlinter
forbids it.
"""
from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable


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

"""Imports every module of transformer_jax and the libraries its commands and tests load, so that
Python writes their bytecode once (scripts/_venv.sh runs this after uv's install, with bytecode
writing on). uv, unlike pip, compiles nothing at install; where PYTHONDONTWRITEBYTECODE is set,
every process would otherwise parse all its imports from source (+2.7 s of CPU each).
  python scripts/_compile_imports.py [MORE_MODULES...]
MORE_MODULES (the tests' torch, pytest, ...) are imported by a second process at the same time
(on 2 cores: 12 s instead of 17 s)."""
import importlib
import pkgutil
import subprocess
import sys

USED = ["scipy.special", "matplotlib.pyplot", "tensorboard.backend.event_processing.event_accumulator"]


def import_all(names) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (a module that fails here fails the same way when used)
            pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--only"]:  # the second process: MORE_MODULES only
        import_all(sys.argv[2:])
    else:
        more = sys.argv[1:]
        second = subprocess.Popen([sys.executable, __file__, "--only", *more]) if more else None
        import transformer_jax
        import_all([m.name for m in pkgutil.walk_packages(transformer_jax.__path__,
                                                          "transformer_jax.")] + USED)
        if second:
            second.wait()

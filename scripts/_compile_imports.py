"""Imports every module of transformer_jax and the libraries its commands and tests load, so that
Python writes their bytecode once (scripts/_venv.sh runs this after uv's install, with bytecode
writing on). uv, unlike pip, compiles nothing at install; where PYTHONDONTWRITEBYTECODE is set,
every process would otherwise parse all its imports from source (+2.7 s of CPU each).
  python scripts/_compile_imports.py [MORE_MODULES...]"""
import importlib
import pkgutil
import sys

import transformer_jax

USED = ["scipy.stats", "matplotlib.pyplot", "tensorboard.backend.event_processing.event_accumulator"]
names = [m.name for m in pkgutil.walk_packages(transformer_jax.__path__, "transformer_jax.")]
for name in names + USED + sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 (a module that fails here fails the same way when used)
        pass

"""Deprecated: `transformer_jax.studies.evaluate` is now
`transformer_jax.studies.run.evaluate` (this path still works; it will warn once, then go).
"""
from typing import TYPE_CHECKING

from transformer_jax._moved import moved, run_moved

if TYPE_CHECKING:  # what a type checker sees here: the module it moved to
    from transformer_jax.studies.run.evaluate import *  # noqa: F401,F403

__getattr__, __dir__ = moved(__name__, "transformer_jax.studies.run.evaluate")

if __name__ == "__main__":  # `python -m` of the old path: runs the new module, after a warning
    run_moved(__spec__.name, "transformer_jax.studies.run.evaluate")

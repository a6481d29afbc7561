"""Deprecated: `transformer_jax.studies.stats` is now
`transformer_jax.studies.judge.stats` (this path still works; it will warn once, then go).
"""
from typing import TYPE_CHECKING

from transformer_jax._moved import moved

if TYPE_CHECKING:  # what a type checker sees here: the module it moved to
    from transformer_jax.studies.judge.stats import *  # noqa: F401,F403

__getattr__, __dir__ = moved(__name__, "transformer_jax.studies.judge.stats")

"""Deprecated: `transformer_jax.study` is `transformer_jax.studies.study`
(this path warns once, then works).
"""
from typing import TYPE_CHECKING

from transformer_jax._moved import moved

if TYPE_CHECKING:  # what a type checker sees here: the module it moved to
    from transformer_jax.studies.study import *  # noqa: F401,F403

__getattr__, __dir__ = moved(__name__, "transformer_jax.studies.study")

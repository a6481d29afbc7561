"""Deprecated: `transformer_jax.attention` is `transformer_jax.model.attention`
(this path warns once, then works).
"""
from typing import TYPE_CHECKING

from transformer_jax._moved import moved

if TYPE_CHECKING:  # what a type checker sees here: the module it moved to
    from transformer_jax.model.attention import *  # noqa: F401,F403

__getattr__, __dir__ = moved(__name__, "transformer_jax.model.attention")

"""Deprecated: `transformer_jax.studies.multiplicity` is now
`transformer_jax.studies.judge.multiplicity` (this path still works; it will warn once, then go).
"""
from typing import TYPE_CHECKING

from transformer_jax._moved import moved

if TYPE_CHECKING:  # what a type checker sees here: the module it moved to
    from transformer_jax.studies.judge.multiplicity import *  # noqa: F401,F403

__getattr__, __dir__ = moved(__name__, "transformer_jax.studies.judge.multiplicity")

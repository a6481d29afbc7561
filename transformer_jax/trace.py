r"""Trace one attention step by hand: python -m transformer_jax.trace "dog bites man"

Prints the numbers of the project's own modules on a tiny example (`transformer_jax.explain`).
"""
import os

if __name__ == "__main__":  # before JAX starts: the trace compiles a few programs and runs each
    # once, where LLVM's optimization passes cost 2x the compile time and buy nothing (the tests'
    # setting, tests/conftest.py); an XLA_FLAGS you set is kept as given.
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                                       "--xla_llvm_disable_expensive_passes=true")

from absl import app, flags, logging

from transformer_jax.explain import trace
from transformer_jax.explain.trace import main, parse_flags

if __name__ == "__main__":
    # absl's --help prints __main__'s docstring (None under python -OO)
    __doc__ = (__doc__ or "") + trace.vocabulary_help()  # noqa: A001
    flags.adopt_module_key_flags(trace)  # --help lists the flags defined beside the trace
    logging.set_verbosity(logging.WARNING)  # no INFO lines (JAX's backend probing) in the trace
    app.run(main, flags_parser=parse_flags)

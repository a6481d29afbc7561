"""What the command-line entry points share: bad input becomes one line and exit code 2.

A user who mistypes a flag should read what was wrong and what is valid, not a traceback;
`--debug` brings the traceback back.
"""
from __future__ import annotations

import contextlib
import difflib
import glob
import importlib.util
import os
import re
import sys
from typing import Any, Iterator, Mapping

from absl import flags

EXIT_OK, EXIT_BAD_INPUT, EXIT_DIVERGED = 0, 2, 3
_DEBUG = flags.DEFINE_bool("debug", False, "Show tracebacks for bad input.")


def quiet_progress_bars() -> None:
    """TFDS draws progress bars while it prepares a dataset; in logs they are noise."""
    import tensorflow_datasets as tfds
    tfds.disable_progress_bar()


def enable_compilation_cache() -> None:
    """Persist compiled programs across processes ($TJ_JAX_CACHE_DIR, '' disables).

    Runs of a sweep that differ only in seed compile to the same program; so do restarts.
    """
    import jax
    path = os.environ.get("TJ_JAX_CACHE_DIR",
                          os.path.join(os.path.expanduser("~/.cache"), "transformer_jax", "jax_cache"))
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)


def user_errors() -> tuple[type[Exception], ...]:
    from transformer_jax.config import ConfigError
    from transformer_jax.data import DataError
    from transformer_jax.workdir import WorkdirError
    return ConfigError, DataError, WorkdirError


@contextlib.contextmanager
def user_errors_exit() -> Iterator[None]:
    try:
        yield
    except user_errors() as e:
        if _DEBUG.value:
            raise
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__)


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, with its errors turned into one line (and valid config keys named)."""
    for arg in argv:  # ml_collections defers a missing config file's error to a traceback later
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1].partition(":")[0]
            if not os.path.isfile(path):
                folder = path if os.path.isdir(path) else (os.path.dirname(path) or ".")
                found = sorted(glob.glob(os.path.join(folder, "*.py")))
                fail(f"--config={path!r} is not a file; config files there: "
                     f"{', '.join(found) or 'none'}")
    try:
        rest = flags.FLAGS(argv)
    except (flags.Error, AttributeError, KeyError) as e:
        # ml_collections raises a bare AttributeError (not a flags.Error) for an unknown
        # --config.KEY override of a config file given on the command line.
        if "--debug" in argv:
            raise
        fail(_explain_flag_error(e, argv))
    if len(rest) > 1:
        fail(f"unexpected arguments {rest[1:]!r}; every setting is a --flag")
    return rest


def _explain_flag_error(error: Exception, argv: list[str]) -> str:
    raw = str(error)
    if "Traceback (most recent call last)" in raw:
        # The config file's get_config raised: ml_collections embeds the whole traceback in the
        # message; keep the flag and the exception's own last line.
        lines = [line.strip() for line in raw.splitlines() if line.strip()]
        where = raw.split(": Error whilst parsing config file", 1)[0].removeprefix("flag ")
        return f"{where}: {re.sub(r'^[A-Za-z_.]*(Error|Exception): ', '', lines[-1])}"
    message = " ".join(raw.split())
    unknown = re.search(r"[Uu]nknown command line flag '([^']+)'", message)
    key = unknown.group(1) if unknown else None
    if key is None and isinstance(error, (AttributeError, KeyError)):
        key = _unknown_override(argv)
        message = f"--{key} is not a config field" if key else f"bad --config override: {message}"
    if key and key.startswith("config."):
        valid = _config_keys(argv)
        if valid:
            close = difflib.get_close_matches(key, valid, n=3)
            section = key.rsplit(".", 1)[0]
            same_section = [k for k in valid if k.rsplit(".", 1)[0] == section] or valid
            hint = f"did you mean {', '.join(close)}? " if close else ""
            return f"--{key} is not a config field; {hint}valid: {', '.join(same_section)}"
    return message


def _unknown_override(argv: list[str]) -> str | None:
    """The first --config.KEY=VALUE of argv that names no field (nor section) of the config."""
    valid = _config_keys(argv)
    for arg in argv:
        if arg.startswith("--config."):
            key = arg[2:].split("=", 1)[0]
            if key not in valid and not any(v.startswith(key + ".") for v in valid):
                return key
    return None


def _config_keys(argv: list[str]) -> list[str]:
    """Loads the config file named on the command line again, to list its fields."""
    for arg in argv:
        if arg.startswith("--config="):
            path, _, config_arg = arg.split("=", 1)[1].partition(":")
            try:
                spec = importlib.util.spec_from_file_location("_config_for_help", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                value = module.get_config(config_arg) if config_arg else module.get_config()
            except Exception:  # the original error is the better message then
                return []
            return sorted(_flatten_keys(value.to_dict()))
    return []


def _flatten_keys(tree: Mapping[str, Any], prefix: str = "config.") -> list[str]:
    keys = []
    for k, v in tree.items():
        keys += _flatten_keys(v, f"{prefix}{k}.") if isinstance(v, Mapping) else [f"{prefix}{k}"]
    return keys


def exit_code(status: Mapping[str, Any]) -> int:
    return EXIT_DIVERGED if status.get("state") == "diverged" else EXIT_OK

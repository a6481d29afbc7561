"""What the command-line entry points share: bad input becomes one line and exit code 2, and a
terminal that shows what a person needs while the full log goes to a file beside the run.

A user who mistypes a flag should read what was wrong and what is valid, not a traceback;
`--debug` brings the traceback back. The terminal shows warnings and errors (absl's
`--verbosity=0` adds every INFO line, the logged steps among them); `log_to_file` appends INFO
and above, and whatever libraries print (TFDS announces each dataset it prepares on stdout), to
a run's own train.log.
"""
from __future__ import annotations

import contextlib
import difflib
import glob
import importlib.util
import logging as std_logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

from absl import flags
from absl import logging as absl_logging

# here too: set_up_compilation calls it by this module's name (tests replace it)
from transformer_jax.runtime.compile_cache import enable_compilation_cache  # noqa: F401

EXIT_OK, EXIT_BAD_INPUT, EXIT_DIVERGED = 0, 2, 3
_DEBUG = flags.DEFINE_bool("debug", False, "Show tracebacks for bad input.")


def quiet_progress_bars() -> None:
    """TFDS draws progress bars while it prepares a dataset; in logs they are noise."""
    import tensorflow_datasets as tfds
    tfds.disable_progress_bar()


LOG_FILE = "train.log"  # a run's (or a sweep variant's) full log, beside its checkpoints


class _Quiet(std_logging.Filter):
    """Library chatter kept off a terminal that shows warnings: TFDS warns about every custom
    dataset config it builds (harmless, and in the log file all the same)."""

    def filter(self, record: std_logging.LogRecord) -> bool:
        return not ("tensorflow_datasets" in record.pathname and record.levelno < std_logging.ERROR)


class _TerminalFormatter(std_logging.Formatter):
    """A warning or an error on a terminal that shows only those (the default) reads as one
    plain line, `warning: ...`, like the one-line errors of bad input: absl's prefix (level,
    time, thread, file:line) is for the log file, where every record keeps it, and for a
    terminal that shows every INFO line too (`--verbosity=0`), where it tells them apart."""

    def format(self, record: std_logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.getMessage()}"
        return text + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


def set_terminal_level(level: int) -> None:
    """Records are made at INFO (or finer) for the log files; the terminal shows `level` and up."""
    handler = absl_logging.get_absl_handler()
    handler.setLevel(level)
    handler.setFormatter(_TerminalFormatter() if level > std_logging.INFO
                         else absl_logging.PythonFormatter())
    handler.filters = [f for f in handler.filters if not isinstance(f, _Quiet)]
    if level > std_logging.INFO:
        handler.addFilter(_Quiet())
    absl_logging.get_absl_logger().setLevel(std_logging.NOTSET)  # inherits the root's level
    std_logging.root.setLevel(min(level, std_logging.INFO))


def terminal_level() -> int:
    """The level `set_terminal_level` set; INFO when none did (a library caller sees all)."""
    return absl_logging.get_absl_handler().level or std_logging.INFO


def terminal_level_from_flags() -> int:
    """The terminal's level from absl's --verbosity: warnings when it is not given (absl's
    app.run would make that INFO), 0 adds INFO, -1 is warnings, -2 errors only."""
    flag = flags.FLAGS["verbosity"]
    verbosity = flag.value if flag.present else -1
    level = (absl_logging.converter.absl_to_standard(verbosity) if verbosity <= 1
             else std_logging.DEBUG)
    set_terminal_level(level)
    return level


class _RunLog(std_logging.Handler):
    """Appends log records and printed text to `path` once `ready()` (the run's directory has
    been prepared), holding earlier lines in memory until then: bad input leaves no file."""

    def __init__(self, path: Path, ready: Callable[[], bool]):
        super().__init__(std_logging.INFO)
        self.setFormatter(absl_logging.PythonFormatter())
        self.path, self.ready = path, ready
        self.pending: list[str] = []
        self.file = None

    def write(self, text: str) -> int:  # file-like, for redirected stdout
        if self.file is None and self.ready():
            self.file = self.path.open("a")
            self.file.write("".join(self.pending))
            self.pending = []
        if self.file is None:
            self.pending.append(text)
        else:
            self.file.write(text)
            self.file.flush()
        return len(text)

    def flush(self) -> None:
        pass

    def emit(self, record: std_logging.LogRecord) -> None:
        try:
            self.write(self.format(record) + "\n")
        except Exception:  # a log line must never stop a run
            self.handleError(record)

    def close(self) -> None:
        if self.pending and self.ready():
            self.write("")
        if self.file is not None:
            self.file.close()
        super().close()


@contextlib.contextmanager
def log_to_file(path: Path, ready: Optional[Callable[[], bool]] = None) -> Iterator[Path]:
    """While the block runs, INFO and up, and stdout, are appended to `path` (a resumed run
    appends: an earlier run's lines are kept). `ready`: write only once it returns True (by
    default at once; main passes "the workdir holds config.json")."""
    path = Path(path)
    handler = _RunLog(path, ready or (lambda: path.parent.mkdir(parents=True, exist_ok=True)
                                      or True))
    std_logging.root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(handler):
            yield path
    finally:
        std_logging.root.removeHandler(handler)
        handler.close()


def set_up_command() -> None:
    """What a command (main, sweep) does once its flags are parsed, before it compiles: the
    terminal's level from --verbosity, the compilation set-up, and no TFDS progress bars. What
    it does before it imports anything heavy, a restart with huge pages where asked for, is
    `runtime.hugepages.reexec_if_useful()`, the first lines of its module."""
    terminal_level_from_flags()
    set_up_compilation()  # (by name: scripts/first_step.py times it by replacing it here)
    quiet_progress_bars()


def set_up_compilation() -> None:
    """What every entry point does before it compiles: the persistent compilation cache and the
    compiler's memory given back to the system after each compile (`runtime.compile_memory`,
    which also says why malloc's arenas are left at glibc's default)."""
    from transformer_jax.runtime import compile_memory
    enable_compilation_cache()
    compile_memory.release_after_compiles()


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)


def user_errors() -> tuple[type[Exception], ...]:
    from transformer_jax.config import ConfigError
    from transformer_jax.data import DataError
    from transformer_jax.train.workdir import WorkdirError
    return ConfigError, DataError, WorkdirError


@contextlib.contextmanager
def user_errors_exit() -> Iterator[None]:
    try:
        yield
    except user_errors() as e:
        if _DEBUG.value:
            raise
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__)


HELP_FLAGS = ("--help", "-?", "--helpshort", "--helpfull")


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, with its errors turned into one line (and valid config keys named),
    and its help (`show_help`) exiting 0."""
    for arg in argv:  # ml_collections defers a missing config file's error to a traceback later
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1].partition(":")[0]
            if not os.path.isfile(path):
                folder = path if os.path.isdir(path) else (os.path.dirname(path) or ".")
                found = sorted(glob.glob(os.path.join(folder, "*.py")))
                fail(f"--config={path!r} is not a file; config files there: "
                     f"{', '.join(found) or 'none'}")
    if any(arg in HELP_FLAGS for arg in argv[1:]):
        show_help(argv)
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


def show_help(argv: list[str]) -> None:
    """absl's help (`--helpfull`: every flag, absl's and JAX's too; else the command's own),
    then, for a command that takes a config file, the fields of the one given, with their
    defaults and descriptions; exits 0 (absl's own help exits 1, as for an error)."""
    from absl import app
    app.usage(shorthelp="--helpfull" not in argv, writeto_stdout=True)
    if "config" in flags.FLAGS:
        config, source = _config_from_argv(argv)
        given = [a for a in argv if a.startswith("--config=")]
        if given and config is None:
            print(f"({given[0]} did not load: without --help the command says why)")
        elif config is None:
            found = ", ".join(sorted(glob.glob(os.path.join("configs", "*.py")))) or "none here"
            print(f"Give --config=FILE with --help to list that config's fields; config files: "
                  f"{found}")
        else:
            from transformer_jax.train import config_help
            print(config_help.fields_help(config, source))
    sys.exit(EXIT_OK)


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
    config, _ = _config_from_argv(argv)
    return sorted(_flatten_keys(config.to_dict())) if config is not None else []


def _config_from_argv(argv: list[str]) -> tuple[Any, str]:
    """(the config of the --config=FILE[:ARGS] on the command line, FILE[:ARGS]), loaded
    without absl; (None, '') when there is none or it does not load."""
    for arg in argv:
        if arg.startswith("--config="):
            source = arg.split("=", 1)[1]
            path, _, config_arg = source.partition(":")
            try:
                spec = importlib.util.spec_from_file_location("_config_for_help", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return (module.get_config(config_arg) if config_arg else module.get_config(),
                        source)
            except Exception:  # the original error is the better message then
                return None, ""
    return None, ""


def _flatten_keys(tree: Mapping[str, Any], prefix: str = "config.") -> list[str]:
    keys = []
    for k, v in tree.items():
        keys += _flatten_keys(v, f"{prefix}{k}.") if isinstance(v, Mapping) else [f"{prefix}{k}"]
    return keys


def exit_code(status: Mapping[str, Any]) -> int:
    return EXIT_DIVERGED if status.get("state") == "diverged" else EXIT_OK

"""Experiment and config files are files, not a package: load them as modules."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import ml_collections

from transformer_jax.config import ConfigError

# The sizes of a study (`--size`, an experiment's `get_study(size)`): default fits a 2-core CPU,
# large is for a GPU/TPU, tiny is a smoke test. Not a config file's sizes (train/defaults.py's
# CONFIG_SIZES, which have no `large`): an experiment maps its size onto config overrides itself.
STUDY_SIZES = ("default", "large", "tiny")


def load_config(path: str | Path, arg: str = "") -> ml_collections.ConfigDict:
    """`get_config(arg)` of a config file, e.g. load_config(REPO / 'configs/synthetic.py', 'tiny')."""
    return load_module(path).get_config(arg)


def load_study(path: str | Path, size: str = "default", judgeable: bool = True):
    """`get_study(size)` of an experiment file: a `transformer_jax.studies.study.Study`. With
    `judgeable`, one whose expectations hold or fail by construction is refused
    (Study.refuse_unjudgeable); without, it loads as written (an old design read from git)."""
    if size not in STUDY_SIZES:
        raise ConfigError(f"--size={size!r} is not one of: {', '.join(STUDY_SIZES)}")
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--experiment={str(path)!r} is not a file; experiments: "
                          f"{', '.join(sorted(p.name for p in path.parent.glob('*.py'))) or 'none found'}")
    study = load_module(path).get_study(size)
    return study.refuse_unjudgeable() if judgeable else study


def load_module(path: str | Path):
    """A Python file as a module (experiment and config files are files, not a package)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_tj_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""Experiment and config files are files, not a package: load them as modules."""
from __future__ import annotations

import dataclasses
import difflib
import importlib.util
from pathlib import Path

import ml_collections

from transformer_jax.config import ConfigError
from transformer_jax.studies.design import measured_code
from transformer_jax.studies.rundir import flatten

# The sizes of a study (`--size`, an experiment's `get_study(size)`): default fits a 2-core CPU,
# large is for a GPU/TPU, tiny is a smoke test. Not a config file's sizes (train/defaults.py's
# CONFIG_SIZES, which have no `large`): an experiment maps its size onto config overrides itself.
STUDY_SIZES = ("default", "large", "tiny")


def load_config(path: str | Path, arg: str = "") -> ml_collections.ConfigDict:
    """`get_config(arg)` of a config file, e.g. load_config(REPO / 'configs/synthetic.py', 'tiny')."""
    return load_module(path).get_config(arg)


def load_study(path: str | Path, size: str = "default", judgeable: bool = True):
    """`get_study(size)` of an experiment file: a `transformer_jax.studies.study.Study`. With
    `judgeable`, its variants' overrides are checked against its base config, and one whose
    expectations hold or fail by construction is refused (Study.refuse_unjudgeable); without,
    it loads as written (an old design read from git, judged by the fingerprint alone)."""
    if size not in STUDY_SIZES:
        raise ConfigError(f"--size={size!r} is not one of: {', '.join(STUDY_SIZES)}")
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--experiment={str(path)!r} is not a file; experiments: "
                          f"{', '.join(sorted(p.name for p in path.parent.glob('*.py'))) or 'none found'}")
    module = load_module(path)
    study = _get_study(module, path, size)
    study = dataclasses.replace(study, measured_refs=measured_code.refs(study, path))
    if not judgeable:
        return study
    check_overrides(study)
    return study.refuse_unjudgeable()


def _get_study(module, path: Path, size: str):
    """An experiment's `get_study(size)`. Its own table of sizes may lack one (a user's study
    sized for a CPU only): its `KeyError: 'large'` becomes one line naming the sizes it has."""
    try:
        return module.get_study(size)
    except KeyError as e:
        if e.args != (size,):
            raise
    has = [s for s in STUDY_SIZES if s != size and _has_size(module, s)]
    raise ConfigError(f"--size={size!r}: {path} has no {size!r} size; its sizes: "
                      f"{', '.join(has) or 'none'}") from None


def _has_size(module, size: str) -> bool:
    try:
        module.get_study(size)
    except KeyError:
        return False
    return True


def check_overrides(study) -> None:
    """Every variant's overrides name a field (or a section) of the study's base config. A
    misspelt key fails as the study loads, before any run starts, naming the variant and the
    nearest field: `Study.config` would only say that the key names no field."""
    fields = flatten(study.base.to_dict())
    valid = sorted({*fields, *(k.rsplit(".", 1)[0] for k in fields if "." in k)})
    for variant, overrides in study.variants.items():
        for key in overrides:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"study {study.name!r}, variant {variant!r}: override "
                                  f"{key!r} names no config field{hint}")


def load_module(path: str | Path):
    """A Python file as a module (experiment and config files are files, not a package)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_tj_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""A config field added after studies existed moves no study's fingerprint (config.ADDED_FIELDS):
every committed verdict stays judged with today's design. Each experiment's design is built with
the field's default in its base config and again with the field deleted, as a design written
before the field existed had it; the two fingerprints must agree. A new field left out of
ADDED_FIELDS (or registered at a value other than its default) fails here."""
import dataclasses
from pathlib import Path

import pytest

from transformer_jax.config import ADDED_FIELDS, IN_EVERY_FINGERPRINT, ModelConfig, TrainConfig
from transformer_jax.studies.design.loading import STUDY_SIZES
from transformer_jax.studies.study import load_study

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
STUDIES = sorted(p for p in EXPERIMENTS.glob("*.py") if not p.name.startswith("_"))
LATER = sorted(set(ADDED_FIELDS) - IN_EVERY_FINGERPRINT)


def _without(study, dotted: str):
    """The study with `dotted` deleted from its base config, as before the field existed."""
    section, leaf = dotted.split(".")
    base = study.base.copy_and_resolve_references()
    base.unlock()
    del base[section][leaf]
    return dataclasses.replace(study, base=base)


@pytest.mark.parametrize("field", LATER)
def test_each_added_field_is_registered_at_its_default(field):
    section, leaf = field.split(".")
    defaults = {"model": ModelConfig.field_defaults(), "train": TrainConfig.field_defaults()}
    assert ADDED_FIELDS[field] == defaults[section][leaf]


@pytest.mark.parametrize("size", [s for s in STUDY_SIZES if s != "large"])
@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_no_added_field_at_its_default_moves_a_studys_fingerprint(path, size):
    study = load_study(path, size, judgeable=False)
    checked = 0
    for field in LATER:
        section, leaf = field.split(".")
        if study.base.get(section, {}).get(leaf, object()) != ADDED_FIELDS[field]:
            continue  # the study sets it, or trains nothing (pretrained_claims): as written
        assert _without(study, field).fingerprint() == study.fingerprint(), field
        checked += 1
    assert checked or "model" not in study.base, "no added field found at its default"


@pytest.mark.parametrize("field", ["model.branch_init"])
def test_a_field_no_study_sets_is_in_no_design(field):
    """The newest fields by name: a study that leaves one at its default keeps the design it had
    before the field (the check above cannot see a field missing from ADDED_FIELDS)."""
    section, leaf = field.split(".")
    for path in STUDIES:
        for size in ("default", "tiny"):
            study = load_study(path, size, judgeable=False)
            assert leaf not in study.training_design()["base"].get(section, {}), path.stem

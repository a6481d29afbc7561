"""experiments/depth_sweep.py and depth_deepest.py (issue 64): experiments/depth.py as registered,
split by width for its suite's time (experiments/_depth.py holds what the parts share)."""
from __future__ import annotations

from pathlib import Path

import pytest

from registered_experiments import experiments_at

from transformer_jax.studies import study as study_lib
from transformer_jax.studies.design.loading import load_module

REPO = Path(__file__).resolve().parents[2]
PARTS = ("depth_sweep", "depth_deepest")  # the sweep's depths; the article's depth and width
REGISTERED = "c7259c1"  # the last commit that changed experiments/depth.py before the split


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> Path:
    """experiments/depth.py as it stood at the split, beside today's configs."""
    return experiments_at(REGISTERED, ["depth"], tmp_path_factory.mktemp("registered"))["depth"]


def _parts(size: str) -> list[study_lib.Study]:
    return [study_lib.load_study(REPO / "experiments" / f"{n}.py", size) for n in PARTS]


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_each_part_holds_one_width_and_judges_only_its_own_arms(size):
    shared = load_module(REPO / "experiments" / "_depth.py")
    depth, width = shared.SIZES[size]["article"]
    sweep, deepest = _parts(size)
    assert (sweep.suite, deepest.suite) == PARTS
    for name, overrides in deepest.variants.items():  # the article's width, its depth or 2
        assert overrides["model.d_model"] == width, name
        assert overrides["model.num_layers"] in (depth, shared.SIZES[size]["depths"][0])
    for name, overrides in sweep.variants.items():  # the study's width, the sweep's depths
        assert "model.d_model" not in overrides, name
        assert overrides["model.num_layers"] in shared.SIZES[size]["depths"]
    for part in (sweep, deepest):
        names = set(part.variants) | set(part.tuned)
        assert all(set(e.variants()) <= names for e in part.expectations)
        assert part.amendments == ()  # a new study: depth's amendments stay on depth's page
    assert sweep.probes is not None and deepest.probes is None


@pytest.mark.slow  # runs git (a process, tests/fast_lane.py)
@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_parts_are_the_registered_study_split_by_width_with_nothing_moved(registered, size):
    """Every variant, tuned arm and expectation of depth as it stood at the split in exactly one
    part; the same base config, budget, seeds, metrics, published line and analyses."""
    was = study_lib.load_study(registered, size)
    parts = _parts(size)
    for part in parts:
        assert (part.base.to_dict(), part.seeds, part.metrics, part.plateau, part.extend_grid,
                part.published) == (was.base.to_dict(), was.seeds, was.metrics, was.plateau,
                                    was.extend_grid, was.published)
        assert [(a.func.__qualname__, a.keywords) for a in part.analyses] == [
            (a.func.__qualname__, a.keywords) for a in was.analyses]
    assert sorted(v for p in parts for v in p.variants) == sorted(was.variants)
    assert {k: v for p in parts for k, v in p.variants.items()} == was.variants
    assert {k: v for p in parts for k, v in p.tuned.items()} == dict(was.tuned)
    registered_expectations = {e.text: e for e in was.expectations}
    split = [e for p in parts for e in p.expectations]
    assert len(split) == len(registered_expectations)  # none in two parts, none lost
    assert all(registered_expectations[e.text] == e for e in split)


@pytest.mark.slow  # its fixture runs git
def test_a_planted_move_in_a_part_is_seen(registered, monkeypatch):
    """The comparison above notices a rate moved in the shared registration (a planted grid)."""
    shared = load_module(REPO / "experiments" / "_depth.py")
    was = study_lib.load_study(registered, "default").variants
    monkeypatch.setattr(shared, "LEARNING_RATES", (1e-3, 1e-2))
    moved = shared.build_part("depth_deepest", "c", "default", "deepest").variants
    assert any(was.get(name) != overrides for name, overrides in moved.items())

"""The tiny study the sweep tests run (2 variants, 6 steps on generated data): importable by a
test and by an experiment file that a test hands to the command line (it imports no entry point,
whose flags would then be defined twice)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from transformer_jax.studies.study import Comparison, Expectation, Study, load_config

REPO = Path(__file__).resolve().parents[1]


def tiny_study(data_dir: Path, probes=None, seeds=(0,), analyses=()) -> Study:
    base = load_config(REPO / "configs/synthetic.py", "tiny,task=sort")
    base.unlock()
    base.data.data_dir = str(data_dir)
    base.train.update(num_steps=6, log_every=2, eval_every=3, checkpoint_every=3, eval_batches=1)
    return Study(
        name="tiny", claim="scaling helps", published="none", base=base,
        variants={"scaled": {"model.attn_scale": True}, "unscaled": {"model.attn_scale": False}},
        seeds=seeds, metrics=("eval/accuracy", "eval/loss"),
        expectations=(Expectation("scaled is not worse", "eval/loss", "scaled",
                                  Comparison.BETTER, -10.0, b="unscaled", higher_is_better=False),),
        probes=probes, analyses=analyses)


def tiny_study_sharing(data_dir: Path, probes=None) -> Study:
    """A second study beside tiny_study: its 'same_as_scaled' is tiny's 'scaled' (one config,
    so a sweep of both links it to tiny's run and trains it once), 'longer' is its own."""
    return dataclasses.replace(
        tiny_study(data_dir, probes=probes), name="tiny_too", variants={
            "same_as_scaled": {"model.attn_scale": True},
            "longer": {"model.attn_scale": True, "train.num_steps": 9}},
        expectations=(Expectation("longer is not worse", "eval/loss", "longer", Comparison.BETTER,
                                  -10.0, b="same_as_scaled", higher_is_better=False),))


def tiny_study_tuned(data_dir: Path, probes=None, cap: int = 1) -> Study:
    """tiny_study with 'unscaled' as a tuned arm over two learning rates (1e-3, 1e-2) whose grid
    grows by ×3 / ÷3 at an edge a seed chose, `cap` points beyond each end (studies/grid.py)."""
    from transformer_jax.studies import grid, tuning

    study = tiny_study(data_dir, probes=probes)
    candidates = tuning.tuned_arm("unscaled", {"model.attn_scale": False},
                                  {"train.learning_rate": (1e-3, 1e-2)})
    return dataclasses.replace(
        study, variants={"scaled": study.variants["scaled"], **candidates},
        tuned={"unscaled": tuple(candidates)}, extend_grid=grid.GridExtension(cap=cap))


def tiny_experiment(path: Path, data_dir: Path) -> Study:
    """An experiment file's study at --size=tiny, its generated data under `data_dir` (a test's
    own, so no test reads another's)."""
    from transformer_jax.studies.study import load_study
    study = load_study(path, "tiny")
    study.base.unlock()
    study.base.data.data_dir = str(data_dir)
    return study

"""The tiny study the sweep tests run (2 variants, 6 steps on generated data): importable by a
test and by an experiment file that a test hands to the command line (it imports no entry point,
whose flags would then be defined twice)."""
from __future__ import annotations

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

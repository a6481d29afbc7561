"""Is an encoder permutation-equivariant: a study analysis (`Study.analyses`) that measures, for
each finished encoder run, the step-0 probe `probes.model_permutation_gap` on the run's own
model (its config, with a token head so that there is one output per position to permute;
params drawn from the run's seed): max |f(P·x) − P·f(x)| over the logits.

Why a per-run value: a verdict judges values over seeds. The analysis returns them as
`Section.values` under METRIC, which an expectation judges like any metric (the report counts
each as its run's final value, in summary.csv). Without positions every operation is per token
or a sum over keys, so the gap is float32 rounding; any positional scheme makes it O(1).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Mapping

import ml_collections

from transformer_jax.config import Arch, Head
from transformer_jax.studies.analysis import probes
from transformer_jax.studies.analysis.restore import finished_run_dirs
from transformer_jax.studies.checks import Section
from transformer_jax.studies.render.markdown import markdown_table
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.train.run import build_run

METRIC = "probe/permutation_gap"


def run_gap(run_dir: Path) -> float:
    """The probe on a run's model config at initialization (NaN for a decoder, whose causal
    mask breaks equivariance by construction)."""
    config = ml_collections.ConfigDict(json.loads(
        (Path(run_dir) / workdir_lib.CONFIG_FILE).read_text()))
    run = build_run(config)
    if run.model.arch is not Arch.ENCODER:
        return float("nan")
    cfg = dataclasses.replace(run.model, head=Head.TOKEN, num_outputs=run.model.vocab_size)
    return probes.model_permutation_gap(cfg, run.seed)


def make_analysis() -> Callable[[Path, dict], Section]:
    def permutation_equivariance(root: Path, runs: dict) -> Section:
        return analyse(Path(root), runs)
    return permutation_equivariance


def analyse(root: Path, runs: Mapping) -> Section:
    gaps = {(variant, seed): run_gap(path)
            for variant, dirs in finished_run_dirs(root, runs).items()
            for seed, path in dirs.items()}
    gaps = {key: gap for key, gap in gaps.items() if gap == gap}  # encoders only (not NaN)
    if not gaps:
        return Section("No finished encoder run to permute the inputs of.\n")
    rows = [(variant, seed, f"{gap:.3g}") for (variant, seed), gap in sorted(gaps.items())]
    table = markdown_table(["variant", "seed", "max |f(P·x) − P·f(x)| at initialization"], rows)
    return Section("### Permutation equivariance, per run\n\nEach encoder run's model at "
                   "initialization (its config with a token head, params from its seed), 4 "
                   "random sequences of 12 tokens, their positions permuted: the largest change "
                   f"in a logit beyond the permutation ({METRIC}).\n\n{table}\n",
                   values={METRIC: gaps})

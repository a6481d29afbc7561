"""A study's finished runs, restored for an analysis: each variant's final parameters stacked
over its seeds, ready for one vmapped evaluation (`steps.make_eval_step(replicas=True)`)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import ml_collections

from transformer_jax.train.init import init_model
from transformer_jax.train.run import Run, build_run
from transformer_jax.train import steps
from transformer_jax.train import workdir as workdir_lib
from transformer_jax.train.checkpointing import Checkpointer


def finished_run_dirs(root: Path, runs: Mapping[tuple[str, int], dict]) -> dict[str, dict[int, Path]]:
    """variant -> seed -> run dir, for the runs (`report.collect`'s) that finished."""
    by_variant: dict[str, dict[int, Path]] = {}
    for (variant, seed), run in runs.items():
        if run["status"].get("state") == workdir_lib.FINISHED:
            by_variant.setdefault(variant, {})[seed] = Path(root) / variant / f"seed_{seed}"
    return by_variant


@dataclasses.dataclass(frozen=True)
class Restored:
    """One variant's finished runs, ready to evaluate: params stacked over seeds."""
    run: Run  # the first seed's (every seed shares data and model config)
    data: ml_collections.ConfigDict  # the runs' `data` config
    seeds: tuple[int, ...]
    graphdef: Any
    params: Any  # leading seed axis


def restore_variant(run_dirs: Mapping[int, Path]) -> Restored:
    """seed -> run dir (each with config.json and a checkpoint of its final step)."""
    graphdef, stacked, first, config = None, [], None, None
    for seed, path in run_dirs.items():
        config = ml_collections.ConfigDict(json.loads((path / "config.json").read_text()))
        run = build_run(config)
        if first is None:
            first = run
            # shapes only: tracing init_model abstractly compiles nothing
            graphdef, params = jax.eval_shape(lambda: init_model(run.model, run.seed))
            tx, _ = steps.make_optimizer(run.train)
            target = {"params": params, "opt_state": jax.eval_shape(tx.init, params),
                      "step": jax.ShapeDtypeStruct((), jnp.int32)}
        with Checkpointer(str(path / "checkpoints"), keep=run.train.keep_checkpoints) as ckpt:
            found = ckpt.restore(target)
        if found is None:
            raise FileNotFoundError(f"no checkpoint in {path / 'checkpoints'}")
        stacked.append(found[1]["params"])
    return Restored(run=first, data=config.data, seeds=tuple(run_dirs), graphdef=graphdef,
                    params=jax.tree.map(lambda *xs: jnp.stack(xs), *stacked))

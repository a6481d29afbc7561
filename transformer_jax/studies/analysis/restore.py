"""A study's finished runs, restored for an analysis: each variant's final parameters stacked
over its seeds, ready for one vmapped evaluation (`steps.make_eval_step(replicas=True)`)."""
from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import ml_collections

from transformer_jax.train.init import graphdef_of, state_shapes
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


# A report runs several analyses over the same variants (head roles, head importance, group
# knock-out): each restored the same checkpoints again, ~0.3 s a checkpoint even at tiny size.
# The variants restored last are kept, keyed by their run dirs and the state of each checkpoint
# folder and config, so a run trained on (a new checkpoint) is read afresh. The cache is of use
# only if it holds a whole study's variants (analyses take them in turn), and it outlives the
# report: so it is bounded by a count and by the bytes of the parameters it holds.
_RESTORED: "collections.OrderedDict[tuple, Restored]" = collections.OrderedDict()
KEEP_RESTORED = 8  # variants
KEEP_BYTES = 1 << 30


def restore_variant(run_dirs: Mapping[int, Path]) -> Restored:
    """seed -> run dir (each with config.json and a checkpoint of its final step)."""
    key = tuple((seed, *_checkpoint_state(Path(path))) for seed, path in run_dirs.items())
    if key not in _RESTORED:
        _RESTORED[key] = _restore(run_dirs)
        while len(_RESTORED) > KEEP_RESTORED or (
                len(_RESTORED) > 1 and sum(map(_nbytes, _RESTORED.values())) > KEEP_BYTES):
            _RESTORED.popitem(last=False)
    _RESTORED.move_to_end(key)
    return _RESTORED[key]


def _nbytes(restored: Restored) -> int:
    return sum(x.nbytes for x in jax.tree.leaves(restored.params))


def _checkpoint_state(path: Path) -> tuple:
    """The run dir, and what changes when a checkpoint is written or removed there."""
    folder = path / "checkpoints"
    steps = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    config = path / "config.json"
    return (str(path.resolve()), tuple(steps), folder.stat().st_mtime_ns if folder.is_dir() else 0,
            config.stat().st_mtime_ns if config.exists() else 0)


def _restore(run_dirs: Mapping[int, Path]) -> Restored:
    graphdef, stacked, first, config = None, [], None, None
    for seed, path in run_dirs.items():
        config = ml_collections.ConfigDict(json.loads((path / "config.json").read_text()))
        run = build_run(config)
        if first is None:
            first = run
            graphdef = graphdef_of(run.model)
            target = state_shapes(run.model, steps.make_optimizer(run.train)[0])  # no compile
        with Checkpointer(str(path / "checkpoints"), keep=run.train.keep_checkpoints) as ckpt:
            found = ckpt.restore(target)
        if found is None:
            raise FileNotFoundError(f"no checkpoint in {path / 'checkpoints'}")
        stacked.append(found[1]["params"])
    return Restored(run=first, data=config.data, seeds=tuple(run_dirs), graphdef=graphdef,
                    params=jax.tree.map(lambda *xs: jnp.stack(xs), *stacked))

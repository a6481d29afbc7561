"""Atomic, self-healing training checkpoints on top of Orbax.

One checkpoint per saved step, laid out by `orbax.checkpoint.CheckpointManager` as::

    <workdir>/checkpoints/<step>/state/...   # the array pytree (StandardSave: OCDBT + zarr)
    <workdir>/checkpoints/<step>/meta/...    # a small JSON dict (JsonSave)

Both items go into the SAME step directory, written as one Composite save, so the array state and
its bookkeeping (data position, RNG seed, ...) can never disagree.

Atomicity: on a local filesystem Orbax writes into `<step>.orbax-checkpoint-tmp/` and renames it to
`<step>/` only once every item is complete (`AtomicRenameTemporaryPath`; each item likewise goes
through `<item>.orbax-checkpoint-tmp`). The manager lists only final, renamed directories, so a save
killed half way leaves a tmp directory that is never listed, never restored, and is deleted when the
next `Checkpointer` opens the directory (`cleanup_tmp_directories=True`).

Recovery: a listed checkpoint can still be damaged afterwards (disk full during a later copy,
files truncated or deleted by hand). `restore` therefore tries the newest step first and walks back
to older ones, logging a warning for each unreadable step, instead of crashing the run.

Recipe for an `nnx` model and `nnx.Optimizer` (flax 0.12.8; use the free functions
`nnx.to_pure_dict` / `nnx.replace_by_pure_dict`: the `State.to_pure_dict()` methods warn that
`nnx.State` is being replaced by plain dicts)::

    def checkpoint_state(model, optimizer):   # plain nested dicts of arrays, no Variable objects
        return {'model': nnx.to_pure_dict(nnx.state(model, nnx.Param)),
                'opt': nnx.to_pure_dict(nnx.state(optimizer, nnx.OptState))}  # step + optax state

    ckpt.save(step, checkpoint_state(model, optimizer), {'step': step, 'data_position': pos})

    # restore: a freshly built model/optimizer provides the structure, shapes and dtypes
    found = ckpt.restore(jax.eval_shape(lambda: checkpoint_state(model, optimizer)))
    if found is not None:
        step, restored, meta = found
        for obj, kind, key in ((model, nnx.Param, 'model'), (optimizer, nnx.OptState, 'opt')):
            state = nnx.state(obj, kind)
            nnx.replace_by_pure_dict(state, restored[key])
            nnx.update(obj, state)

Pure dicts keep the checkpoint independent of NNX's Variable classes. optax's chained states show
up as dicts with integer keys (`{'opt_state': {0: ...}}`); Orbax stores them as strings and
restores them into the target's integer keys. Keep RNG *keys* out of the array state: store the
integer seed (and step) in `meta` and rebuild `nnx.Rngs` from it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging as std_logging
import os
import sys
from typing import Any, Iterator, Mapping

import jax
from absl import logging

PyTree = Any


def _ocp():
    """orbax.checkpoint, imported on first use: a run imports it at its first save or resume,
    after the first step's compile, so its ~21 MiB (scripts/memory.py) do not add to
    that compile's peak."""
    import orbax.checkpoint as ocp
    return ocp

_STATE = "state"
_META = "meta"


class _DropRecords(std_logging.Filter):
    """Drops Orbax's per-save INFO chatter (~50 lines per save under absl's default verbosity)
    and asyncio's 'Task exception was never retrieved' tracebacks that a failed TensorStore read
    leaves behind. Warnings and errors from Orbax still pass."""

    def filter(self, record: std_logging.LogRecord) -> bool:
        if record.name == "asyncio":
            return not str(record.msg).startswith("Task exception was never retrieved")
        from_orbax = f"{os.sep}orbax{os.sep}" in (record.pathname or "")
        return not (from_orbax and record.levelno < std_logging.WARNING)


@contextlib.contextmanager
def _quiet_orbax() -> Iterator[None]:
    """Installs `_DropRecords` only for the duration of one Orbax call, so nothing else's logging
    is changed."""
    loggers = [std_logging.getLogger("absl"), std_logging.getLogger("asyncio")]
    drop = _DropRecords()
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


def _ignore_closed_loop_callbacks() -> None:
    """When a restore fails, TensorStore completes the aborted reads on its own threads and
    calls back into the asyncio loop Orbax has closed meanwhile (during the failure or later);
    each callback's `RuntimeError('Event loop is closed')` reaches `sys.unraisablehook`, which
    would print a traceback for every one (dozens, at any moment). This wraps the hook, once per
    process, to drop exactly those; every other unraisable exception still goes to the previous
    hook. (A process-wide hook because the callbacks come late, from threads we do not own.)"""
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_callbacks", False):
        return

    def hook(unraisable):
        error = unraisable.exc_value
        if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
            previous(unraisable)

    hook.drops_closed_loop_callbacks = True
    sys.unraisablehook = hook


class _DropOrphanedReads(std_logging.Filter):
    """Drops asyncio's '... exception was never retrieved' records about one unreadable
    checkpoint directory, at any later time. A failed restore can leave TensorStore read tasks
    that are still referenced by pending callbacks on TensorStore's threads: they are freed (and
    asyncio logs a traceback for each) whenever those threads finish, which under load can be many
    steps into the resumed run, long after `_quiet_orbax` is gone. Records about anything else,
    including other checkpoints, still pass."""

    def __init__(self, step_directory: str):
        super().__init__()
        self.step_directory = os.path.join(step_directory, "")  # "/.../checkpoints/15/"

    def filter(self, record: std_logging.LogRecord) -> bool:
        if "exception was never retrieved" not in str(record.msg).split("\n", 1)[0]:
            return True  # asyncio says 'Task ...' or 'Future ...'
        error = record.exc_info[1] if record.exc_info else None
        return self.step_directory not in f"{record.msg} {error}"


def _ignore_orphaned_reads(step_directory: str) -> None:
    """Installs `_DropOrphanedReads` for `step_directory` on the asyncio logger for the rest of
    the process (once per directory)."""
    logger = std_logging.getLogger("asyncio")
    wanted = os.path.join(step_directory, "")
    if not any(isinstance(f, _DropOrphanedReads) and f.step_directory == wanted
               for f in logger.filters):
        logger.addFilter(_DropOrphanedReads(step_directory))


def _short_error(error: Exception) -> str:
    """TensorStore errors embed the whole JSON spec of the store; keep the human part."""
    message = str(error).split(" [tensorstore_spec=")[0].strip()
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{type(error).__name__}: {message}"


class Checkpointer:
    """Saves and restores `(step, array pytree, JSON meta)` triples in one directory.

    Saves are synchronous (`enable_async_checkpointing=False`): with 2 CPU cores an async save
    competes with the training step for the same cores and gains little, while a synchronous save
    guarantees the checkpoint is on disk when `save` returns (simpler preemption story, no pending
    background thread at exit).
    """

    def __init__(self, directory: str, *, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._keep = keep
        self._orbax_manager = None  # made on first use (`_manager`)
        self._written: set[int] = set()  # steps saved by this instance since the last restore

    @property
    def _manager(self):
        if self._orbax_manager is None:
            ocp = _ocp()
            options = ocp.CheckpointManagerOptions(
                max_to_keep=self._keep,
                enable_async_checkpointing=False,
                create=True,
                cleanup_tmp_directories=True,
            )
            with _quiet_orbax():
                self._orbax_manager = ocp.CheckpointManager(
                    self.directory,
                    item_handlers={
                        _STATE: ocp.StandardCheckpointHandler(),
                        _META: ocp.JsonCheckpointHandler(),
                    },
                    options=options,
                )
        return self._orbax_manager

    def all_steps(self) -> list[int]:
        """Steps of all finalized checkpoints, ascending (tmp directories are never listed)."""
        if self._orbax_manager is None and not os.listdir(self.directory):
            return []  # a fresh run: no need to import Orbax to know that
        with _quiet_orbax():
            self._manager.reload()  # another process (or a test) may have changed the directory
            return sorted(int(s) for s in self._manager.all_steps())

    def latest_step(self) -> int | None:
        steps = self.all_steps()
        return steps[-1] if steps else None

    def save(self, step: int, state: PyTree, meta: Mapping[str, Any], *, force: bool = False) -> None:
        """Writes `state` (arrays) and `meta` (plain JSON types: no numpy scalars) as checkpoint
        `step`; returns once it is finalized on disk.

        Saving a step that this instance already saved (since its last `restore`) is a no-op
        unless `force` (the trainer may save the final step twice). Other existing checkpoints at
        steps >= `step` belong to an abandoned future (e.g. a corrupt checkpoint `restore` fell
        back past) and are deleted first; otherwise Orbax would refuse the save (it never writes
        a step at or below its latest one) and `restore` would keep preferring the stale one.
        """
        step = int(step)
        json.dumps(dict(meta))  # fail here, not half way through a save, on non-JSON meta
        if step in self._written and not force:
            logging.info("checkpoint at step %d already saved by this run; skipping", step)
            return
        with _quiet_orbax():
            for stale in [s for s in self.all_steps() if s >= step]:
                logging.warning("replacing checkpoint at step %d before saving step %d", stale, step)
                self._manager.delete(stale)
            ocp = _ocp()
            saved = self._manager.save(
                step,
                args=ocp.args.Composite(
                    **{_STATE: ocp.args.StandardSave(state), _META: ocp.args.JsonSave(dict(meta))}
                ),
                force=True,  # the interval policy is the trainer's business, not Orbax's
            )
            self._manager.wait_until_finished()
        if not saved:
            raise RuntimeError(f"Orbax declined to save step {step} in {self.directory}")
        self._written.add(step)

    def restore(self, target: PyTree) -> tuple[int, PyTree, dict] | None:
        """Restores the newest readable checkpoint into the structure, shapes and dtypes of
        `target` (concrete arrays or `jax.ShapeDtypeStruct`s). Returns `(step, state, meta)`,
        or None if no checkpoint exists.

        An unreadable checkpoint (truncated/missing files, bad JSON, ...) is skipped with a
        warning and the next older one tried. If checkpoints exist but none can be read, this
        raises instead of returning None: that usually means `target` does not match what was
        saved (changed model config), and silently training from scratch would hide it.
        Dtypes follow `target` (Orbax casts), shapes and tree structure must match exactly.
        """
        ocp = _ocp()
        abstract = jax.tree.map(ocp.tree.to_shape_dtype_struct, target)
        _ignore_closed_loop_callbacks()  # before: a failing read's callbacks can come at once
        self._written.clear()  # the run rewinds to what is restored; later saves must rewrite
        steps = self.all_steps()
        errors = []
        args = ocp.args.Composite(
            **{_STATE: ocp.args.StandardRestore(abstract), _META: ocp.args.JsonRestore()}
        )
        for i, step in enumerate(reversed(steps)):
            with _quiet_orbax():
                try:
                    restored = self._manager.restore(step, args=args)
                except Exception as error:  # noqa: BLE001 - any failure: this step is unusable
                    failure = _short_error(error)
                    _ignore_orphaned_reads(os.path.join(self.directory, str(step)))
                else:
                    return step, restored[_STATE], dict(restored[_META])
                # Orbax's failed gather can orphan asyncio tasks; now that the exception (and the
                # frames holding them) is gone, collect them while the filter hides their
                # 'Task exception was never retrieved' tracebacks (tasks that TensorStore's
                # threads still hold are freed later: `_DropOrphanedReads` hides those).
                gc.collect()
            errors.append(f"step {step}: {failure}")
            older = steps[-i - 2] if i + 1 < len(steps) else "none"
            logging.warning(
                "checkpoint at step %d is unreadable (%s); falling back to step %s",
                step, failure, older,
            )
        if errors:
            raise RuntimeError(
                f"no readable checkpoint in {self.directory} (target mismatch?):\n" + "\n".join(errors)
            )
        return None

    def close(self) -> None:
        if self._orbax_manager is None:
            return
        with _quiet_orbax():
            self._orbax_manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

"""The training layer: the loop, compiled steps, checkpoints, devices, logs and workdirs.

    from transformer_jax import train
    status = train.train_and_evaluate(config, workdir)  # status["state"]: train.FINISHED, ...

These are its public names, for users (tests, experiments, scripts); each is defined in the module
named beside it, which the package's own modules import it from.
"""
from transformer_jax.train.checkpointing import Checkpointer
from transformer_jax.train.init import (Stream, init_model, init_params, init_states, seed_stream,
                                        seed_streams, take_replica)
from transformer_jax.train.loop import train_and_evaluate, train_replicas
from transformer_jax.train.run import Run, build_run, check_config
from transformer_jax.train.workdir import DIVERGED, FINISHED, PREEMPTED, has_ended

__all__ = ["DIVERGED", "FINISHED", "PREEMPTED", "Checkpointer", "Run", "Stream", "build_run",
           "check_config", "has_ended", "init_model", "init_params", "init_states", "seed_stream",
           "seed_streams", "take_replica", "train_and_evaluate", "train_replicas"]

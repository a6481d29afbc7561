"""The training layer: the loop, compiled steps, checkpoints, devices, logs and workdirs.

    from transformer_jax.train import train_and_evaluate
    train_and_evaluate(config, workdir)
"""
from transformer_jax.train.loop import train_and_evaluate
from transformer_jax.train.run import Run, build_run, check_config

__all__ = ["Run", "build_run", "check_config", "train_and_evaluate"]

"""A training's programs are built once per model and optimizer in a process
(transformer_jax/train/programs.py): the same configuration gets the same jitted functions back,
and any field the programs compute with gets programs of its own."""
from __future__ import annotations

import dataclasses

import pytest

from conftest import tiny_config
from transformer_jax.config import TrainConfig
from transformer_jax.train import programs

TRAIN = TrainConfig(num_steps=4, batch_size=8, warmup_steps=0)
# A valid other value of every train.* field outside HOST_ONLY: each must change the programs.
OTHER = {"num_steps": 5, "batch_size": 16, "learning_rate": 2e-3, "warmup_steps": 1,
         "end_learning_rate_factor": 0.5, "schedule": "constant", "weight_decay": 0.0,
         "b1": 0.8, "b2": 0.9, "grad_clip_norm": 0.0, "num_devices": 1, "steps_per_call": 2,
         "microbatches": 2}


def test_the_same_configuration_gets_the_same_programs_whatever_its_cadences():
    built = programs.for_training(tiny_config(), TRAIN)
    cadences = dict(log_every=1, eval_every=2, checkpoint_every=3, keep_checkpoints=1,
                    eval_batches=1)
    assert set(cadences) == set(programs.HOST_ONLY)
    assert programs.for_training(tiny_config(), dataclasses.replace(TRAIN, **cadences)) is built
    assert programs.for_training(tiny_config(d_ff=64), TRAIN) is not built  # a model field
    assert built.multi_step is None  # one step per call
    assert programs.for_training(tiny_config(), dataclasses.replace(
        TRAIN, steps_per_call=2)).multi_step is not None


def test_every_field_outside_the_host_loops_is_in_the_key():
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(OTHER) == fields - set(programs.HOST_ONLY), "a new train.* field: add it here"


@pytest.mark.parametrize("field", sorted(OTHER))
def test_a_field_the_programs_compute_with_gets_programs_of_its_own(field):
    built = programs.for_training(tiny_config(), TRAIN)
    other = programs.for_training(tiny_config(), dataclasses.replace(TRAIN, **{field: OTHER[field]}))
    assert other is not built and other.train_step is not built.train_step


def test_initialization_is_built_once_per_model_and_its_shapes_are_a_fresh_copy():
    import jax

    from transformer_jax.train import init

    graphdef, params = init.init_model(tiny_config(), 0)
    assert init.graphdef_of(tiny_config()) is graphdef
    assert init.init_model(tiny_config(), 1)[0] is graphdef
    shapes = init.param_shapes(tiny_config())
    assert jax.tree.structure(shapes) == jax.tree.structure(params)
    assert all(jax.tree.leaves(jax.tree.map(
        lambda s, p: s.shape == p.shape and s.dtype == p.dtype, shapes, params)))
    shapes.clear()  # the caller's to change: the next caller gets them whole
    assert jax.tree.structure(init.param_shapes(tiny_config())) == jax.tree.structure(params)
    assert init.graphdef_of(tiny_config(d_ff=64)) is not graphdef

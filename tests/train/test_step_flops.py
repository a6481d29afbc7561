"""train/flops_per_step (steps.flops_per_call on the trainer's own program) against a hand
count of one replica's matmuls in a tiny model trained as two replicas: the count is one
replica's step (two would be 2×) and every head's attention is in it. Lowered, never compiled."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from transformer_jax.config import ModelConfig, TrainConfig
from transformer_jax.train import steps
from transformer_jax.train.init import init_states

from helpers_train import tiny_config

B, N, D, F, V, H = 2, 128, 64, 64, 16, 2  # attention's matmuls are a third of the step's


def matmul_flops(batch: int, n: int, d: int, d_ff: int, vocab: int, heads: int) -> float:
    """A 1-layer encoder's train-step matmul FLOPs by hand: each forward matmul (2·m·k·n) runs
    again for the input's gradient and for the weight's (×3; the embedding is a lookup)."""
    tokens = batch * n
    projections = 4 * 2 * tokens * d * d  # W_q, W_k, W_v, W_o
    feed_forward = 2 * 2 * tokens * d * d_ff
    d_k = d // heads
    attention = heads * (2 * batch * n * n * d_k) * 2  # per head: scores q·kᵀ, then weights·v
    output = 2 * tokens * d * vocab
    return 3.0 * (projections + feed_forward + attention + output)


def counted_flops(replicas: int, heads: int = H) -> float:
    """steps.flops_per_call of the trainer's replicated step, on shapes alone."""
    config = tiny_config(overrides={"model.d_model": D, "model.num_heads": heads,
                                    "model.d_ff": F, "model.num_layers": 1,
                                    "model.max_len": N, "model.arch": "encoder"})
    model = ModelConfig.from_config(config.model, vocab_size=V, num_outputs=V)
    tx, schedule = steps.make_optimizer(TrainConfig.from_config(config.train))
    found = {}

    def states():
        found["graphdef"], state = init_states(model, tx, list(range(replicas)))
        return state

    state = jax.eval_shape(states)
    batch = {"inputs": jax.ShapeDtypeStruct((replicas, B, N), jnp.int32),
             "targets": jax.ShapeDtypeStruct((replicas, B, N), jnp.int32),
             "weights": jax.ShapeDtypeStruct((replicas, B, N), jnp.float32),
             "padding_mask": jax.ShapeDtypeStruct((replicas, B, N), jnp.bool_)}
    rngs = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), replicas))
    program = steps.make_train_step(found["graphdef"], model, tx, schedule, replicas=True)
    return steps.flops_per_call(program, state, batch, rngs)


def agrees(counted: float, by_hand: float) -> bool:
    """The rest is elementwise (softmax, norms, Adam): a few % of the step at these sizes."""
    return 1.0 <= counted / by_hand <= 1.08


def test_one_replicas_step_holds_every_heads_matmuls():
    one = counted_flops(replicas=2)  # the replicas' loop body, counted once: per replica
    by_hand = matmul_flops(B, N, D, F, V, H)
    assert agrees(one, by_hand), one / by_hand
    # planted: a count of one head's attention only (~20 % short) must not agree
    one_head_only = by_hand - 3.0 * (H - 1) * 2 * (2 * B * N * N * (D // H))
    assert not agrees(one, one_head_only), one / one_head_only


def test_a_program_without_a_lowering_counts_nan():
    """A wrapper around a jitted step (test_faults' memory probe makes one) trains on: its
    count is nan, not an AttributeError that stops the run."""
    assert math.isnan(steps.flops_per_call(lambda x: x, 1.0))

"""Data parallelism (transformer_jax.train.parallel): the unchanged train step on a 2-device mesh trains
exactly like on one device, and the donated state stays replicated.

The devices are forced host (CPU) devices, which must be configured before JAX starts its
backend, so the checks run in a subprocess (bounded by a timeout: on a 2-core machine an
undrained queue of cross-device steps can deadlock; each step is waited for, as the trainer does).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from helpers_train import BACKGROUND_RUNS

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
NUM_DEVICES = 2

SCRIPT = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={sys.argv[1]}")
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import PartitionSpec as P
from transformer_jax import train
from transformer_jax.train import parallel, steps
from transformer_jax.config import ModelConfig, TrainConfig

NUM_STEPS, BATCH, LENGTH, VOCAB = 10, 8, 12, 13
model = ModelConfig(vocab_size=VOCAB, num_outputs=VOCAB, d_model=16, num_heads=2, num_layers=2,
                    d_ff=32, max_len=32)
tcfg = TrainConfig(num_steps=NUM_STEPS, batch_size=BATCH, warmup_steps=2, learning_rate=3e-3)
graphdef, params = train.init_model(model, 0)
tx, schedule = steps.make_optimizer(tcfg)
rng = jax.random.key(1)

def batch(step):
    g = np.random.default_rng([7, step])
    inputs = g.integers(1, VOCAB, (BATCH, LENGTH)).astype(np.int32)
    lengths = g.integers(LENGTH // 2, LENGTH + 1, (BATCH,))
    real = np.arange(LENGTH)[None] < lengths[:, None]
    return dict(inputs=np.where(real, inputs, 0).astype(np.int32),
                targets=np.roll(inputs, -1, 1).astype(np.int32),
                weights=real.astype(np.float32), padding_mask=real)

def fresh_state():
    p = jax.tree.map(jnp.array, params)  # copies: each run donates its own buffers
    return {"params": p, "opt_state": tx.init(p), "step": jnp.zeros((), jnp.int32)}

def train_run(mesh):
    step_fn = steps.make_train_step(graphdef, model, tx, schedule)
    state = fresh_state()
    if mesh is not None:
        state = parallel.replicate(state, mesh)
    losses = []
    for i in range(NUM_STEPS):
        b = batch(i) if mesh is None else parallel.shard_batch(batch(i), mesh)
        state, metrics = step_fn(state, b, rng)
        losses.append(float(jax.device_get(metrics["loss"])))  # waits for the step
    return losses, state

out = {"devices": len(jax.devices())}
single, _ = train_run(None)
mesh = parallel.make_mesh()
multi, state = train_run(mesh)
out["single"], out["multi"] = single, multi
leaves = jax.tree.leaves(state)
out["state_replicated"] = all(
    x.sharding.is_equivalent_to(parallel.replicated(mesh), x.ndim) and
    len(x.sharding.device_set) == len(jax.devices()) for x in leaves)
out["state_specs"] = sorted({repr(tuple(x.sharding.spec)) for x in leaves})
sharded = parallel.shard_batch(batch(0), mesh)
out["batch_specs"] = sorted({repr(tuple(x.sharding.spec)) for x in jax.tree.leaves(sharded)})
out["batch_shard_rows"] = sorted({s.data.shape[0] for s in sharded["inputs"].addressable_shards})
try:
    parallel.shard_batch({"inputs": np.zeros((BATCH + 1, LENGTH), np.int32)}, mesh)
    out["odd_batch_error"] = None
except ValueError as e:
    out["odd_batch_error"] = str(e)
try:
    parallel.make_mesh(len(jax.devices()) + 1)
    out["mesh_error"] = None
except ValueError as e:
    out["mesh_error"] = str(e)
out["mesh_axes"] = list(mesh.axis_names)
out["distributed_noop"] = parallel.maybe_initialize_distributed()
print("RESULT " + json.dumps(out))
"""


def _pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(scope="module")
def result() -> dict:
    return _result(BACKGROUND_RUNS.result("data_parallel"), "RESULT ")  # SCRIPT


def test_two_devices_train_like_one(result):
    assert result["devices"] == NUM_DEVICES
    single, multi = result["single"], result["multi"]
    assert len(single) == len(multi) == 10
    for step, (a, b) in enumerate(zip(single, multi)):
        assert abs(a - b) <= 1e-5 * abs(a), f"step {step}: 1 device {a!r} vs {NUM_DEVICES}: {b!r}"
    assert multi[-1] < multi[0]  # it trains


def test_donated_state_stays_replicated(result):
    assert result["state_replicated"]
    assert result["state_specs"] == ["()"]  # P(): a full copy on each device


def test_batch_is_split_over_the_data_axis(result):
    assert result["mesh_axes"] == ["data"]
    assert result["batch_specs"] == ["('data',)"]
    assert result["batch_shard_rows"] == [8 // NUM_DEVICES]


def test_bad_sizes_are_clear_errors(result):
    assert "not divisible" in result["odd_batch_error"] and "multiple of 2" in result["odd_batch_error"]
    assert "num_devices=3" in result["mesh_error"]
    assert result["distributed_noop"] is False


def test_distributed_arguments_are_checked():
    from transformer_jax.train import parallel

    with pytest.raises(ValueError, match="all of coordinator"):
        parallel.maybe_initialize_distributed("localhost:1234", None, 0)
    with pytest.raises(ValueError, match="process_id=2"):
        parallel.maybe_initialize_distributed("localhost:1234", 2, 2)
    assert parallel.maybe_initialize_distributed("localhost:1234", 1, 0) is False


# run after SCRIPT, in its process (one interpreter and JAX start for both)
TRAINER_SCRIPT = r"""
data_dir, root = sys.argv[2], sys.argv[3]
from absl import logging
from transformer_jax.studies import study
from transformer_jax import train
from transformer_jax.train import summaries
from transformer_jax.config import ConfigError
logging.set_verbosity(logging.INFO)

def config(seed, **train_fields):
    c = study.load_config("configs/synthetic.py", "tiny")
    c.unlock()
    c.seed = seed
    c.data.data_dir = data_dir
    c.train.update(num_steps=12, log_every=1, eval_every=6, checkpoint_every=6, **train_fields)
    c.lock()
    return c

out = {"devices": len(jax.devices())}
for name, devices in (("one", 1), ("all", 0)):
    dirs = [f"{root}/{name}/seed_{s}" for s in (0, 1)]
    statuses = train.train_replicas([config(s, num_devices=devices) for s in (0, 1)], dirs)
    out[name] = {"states": [s["state"] for s in statuses],
                 "curves": [summaries.read_scalars(d) for d in dirs]}
for field, value in (("num_devices", 3), ("batch_size", 7)):
    try:
        train.train_replicas([config(0, **{field: value})], [f"{root}/bad_{field}"])
        out[f"bad_{field}"] = None
    except ConfigError as e:
        out[f"bad_{field}"] = str(e)
    out[f"bad_{field}_wrote"] = os.path.exists(f"{root}/bad_{field}")
print("TRAINER_RESULT " + json.dumps(out))
"""


# The forced-2-device subprocess (SCRIPT, then TRAINER_SCRIPT) runs from the start of the session,
# while other tests run (helpers_train.BackgroundRuns); each fixture then reads its outcome.
BACKGROUND = {
    "data_parallel": (("result", "trainer_result"), lambda paths: (
        [sys.executable, "-c", SCRIPT + TRAINER_SCRIPT, str(NUM_DEVICES), paths.data_dir,
         paths.tmp / "data_parallel"], TIMEOUT_S * 3, _pythonpath())),
}


def _result(proc, prefix: str) -> dict:
    lines = [l for l in proc.stdout.splitlines() if l.startswith(prefix)]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len(prefix):])


@pytest.fixture(scope="module")
def trainer_result() -> dict:
    """train_replicas (2 seeds) on 1 device and data parallel on 2, in one subprocess."""
    proc = BACKGROUND_RUNS.result("data_parallel")  # TRAINER_SCRIPT, after SCRIPT
    assert "data parallel over 2 devices" in proc.stderr
    return _result(proc, "TRAINER_RESULT ")


def test_trainer_data_parallel_matches_one_device(trainer_result):
    """train.num_devices=0 (all: 2 virtual devices) gives the curves of num_devices=1, to 1e-5
    relative, for every seed of a replicated run: train loss each step, eval loss and accuracy."""
    assert trainer_result["devices"] == NUM_DEVICES
    one, two = trainer_result["one"], trainer_result["all"]
    assert one["states"] == two["states"] == ["finished", "finished"]
    for seed, (a, b) in enumerate(zip(one["curves"], two["curves"])):
        for tag in ("train/loss", "eval/loss", "eval/accuracy"):
            assert [s for s, _ in a[tag]] == [s for s, _ in b[tag]], tag
            for (step, x), (_, y) in zip(a[tag], b[tag]):
                assert abs(x - y) <= 1e-5 * max(abs(x), 1e-6), f"seed {seed} {tag} step {step}: {x} vs {y}"
        assert len(a["train/loss"]) == 12
    assert one["curves"][0]["train/loss"] != one["curves"][1]["train/loss"]  # seeds differ


def test_trainer_device_count_errors_name_the_value(trainer_result):
    assert "train.num_devices=3" in trainer_result["bad_num_devices"]
    assert "0 (all) or 1..2" in trainer_result["bad_num_devices"]
    assert "train.batch_size=7" in trainer_result["bad_batch_size"]
    assert "multiple of 2" in trainer_result["bad_batch_size"]
    assert not trainer_result["bad_num_devices_wrote"] and not trainer_result["bad_batch_size_wrote"]

"""Speed measurements of the project's training step (run them with `scripts/benchmark.py`).

- `setups`: the benchmark configurations, built through the trainer's own code path.
- `torch_reference`: the PyTorch GPT the charlm race runs against (same weights, same batches).
- `measure`: matmul peak, the charlm race, midsize MFU, compile scaling, seeds under vmap.
- `profiling`: the charlm trainer's adopted defaults (k steps per call, microbatches), PyTorch
  and XLA:CPU's options against one step per call; one worker process per variant, measured in
  turns.
- `ops` (transformer_jax.train.op_profile): one traced step, kernel by kernel; `gemm`: the models' matmul shapes
  in each XLA:CPU dot backend against PyTorch and NumPy (`gemm`).
- `accelerator`: the GPU/TPU checks and timings of `scripts/accelerator_check.py`.
- `multistep`: S seeds in one vmapped program (k steps per call are in `steps`).
Other candidates measured and not adopted are in the issues' closing notes and git history,
not code here.
"""

import os

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds this package


def worker_env(env: dict) -> dict:
    """`env` with this package importable, for `python -m bench.X` worker processes."""
    return dict(env, PYTHONPATH=os.pathsep.join(filter(None, [SCRIPTS, env.get("PYTHONPATH")])))

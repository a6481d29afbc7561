"""Speed measurements of the project's training step (run them with `scripts/benchmark.py`).

- `setups`: the benchmark configurations, built through the trainer's own code path.
- `torch_reference`: the PyTorch GPT the charlm race runs against (same weights, same batches).
- `measure`: matmul peak, the charlm race, midsize MFU, compile scaling, seeds under vmap.
- `profiling`: where the charlm step's time goes; one worker process per variant (XLA flags).
- `cpu_malloc`: keep glibc from unmapping XLA's scratch buffers between calls (an option:
  measured slower for the char LM's current step, 69 vs 61 ms).
- `multistep`: S seeds in one vmapped program (k steps per call are in `steps`).
- `candidates`: model/step changes applied as patches, so they are measured before adopted.
"""

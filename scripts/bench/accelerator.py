"""The accelerator paths, checked and timed on whatever device JAX sees: `scripts/accelerator_check.py`.

1. Attention: the fused path (`model.attention=fused`: cuDNN's flash attention on NVIDIA GPUs in
   half precision, see `attention.fused_kernel`) and XLA's fused path, each in float32 and
   bfloat16, against our explicit attention computed in float32, forward and gradient, with the
   causal and padding mask the model passes (as flags and key lengths; `fused_dense_mask` passes
   the dense mask instead); and fwd+bwd time of each.
2. The device's matmul peak in float32 and bfloat16 (a jitted n³ `jnp.dot`).
3. The train step (`steps.make_train_step`, as the trainer builds it) in {float32, bfloat16} ×
   {explicit, fused}: ms per step, model TFLOP/s (6·N + 12·L·T·d per token) and its fraction of
   the same dtype's matmul peak.

Batches are random tokens: no dataset, no host input pipeline in the timings. Each step trains
on the same batch, so the loss falling from the first to the last step shows the step learns.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from transformer_jax.model import attention as att
from bench import measure, setups
from transformer_jax.config import TrainConfig
from transformer_jax.model.transformer import structured_attention_mask

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Shapes of one check: attention [B, T, H, D]; the model L layers of width H·D."""
    batch: int
    seq_len: int
    heads: int
    head_dim: int
    layers: int
    matmul_n: int
    steps: int = 10  # timed train steps per measurement (after 2 untimed ones)


SMOKE = Sizes(batch=2, seq_len=16, heads=2, head_dim=8, layers=2, matmul_n=256, steps=2)
MIDSIZE = Sizes(batch=16, seq_len=256, heads=8, head_dim=64, layers=6, matmul_n=8192)  # issue #5's
LARGE = Sizes(batch=16, seq_len=1024, heads=16, head_dim=64, layers=12, matmul_n=8192)


def _best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """`measure.best_time` of a call that dispatches device work: waits for its results."""
    return measure.best_time(lambda: jax.block_until_ready(fn()), repeats)


def matmul_peak(n: int, dtype) -> float:
    """FLOP/s of a jitted n³ `jnp.dot` in `dtype` (float32 accumulation for bfloat16)."""
    a, b = (jax.random.normal(jax.random.key(i), (n, n), dtype) for i in range(2))
    dot = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    return 2.0 * n ** 3 / _best_seconds(lambda: dot(a, b), 5)


def attention_agreement(sizes: Sizes) -> dict[str, dict[str, Any]]:
    """{variant: {kernel, out_err, grad_err, ms}} for variant '<path>/<dtype>'. Errors are the
    largest absolute difference to float32 explicit attention, relative to that reference's
    largest magnitude; ms is one forward + backward."""
    b, t, h, d = sizes.batch, sizes.seq_len, sizes.heads, sizes.head_dim
    q, k, v, cotangent = (jax.random.normal(jax.random.key(i), (b, t, h, d)) for i in range(4))
    lengths = jnp.where(jnp.arange(b) % 2 == 0, t, 3 * t // 4)  # every other row right-padded
    padding = jnp.arange(t)[None, :] < lengths[:, None]  # [B, T]
    mask = structured_attention_mask(padding, t, causal=True)  # as the model passes it
    dense = mask.dense  # [B, 1, T, T]

    def explicit(q_, k_, v_):
        return att.scaled_dot_product_attention(q_, k_, v_, mask=dense)[0]

    def vjp(fn, dtype):  # a compiled (q, k, v, cotangent) -> (out, (dq, dk, dv)) in `dtype`
        def program(*arrays):
            *inputs, cot = [x.astype(dtype) for x in arrays]
            out, pullback = jax.vjp(fn, *inputs)
            return out, pullback(cot.astype(out.dtype))
        compiled = jax.jit(program)
        return lambda: compiled(q, k, v, cotangent)

    ref_out, ref_grads = vjp(explicit, jnp.float32)()
    fused = lambda **kw: lambda *x: att.fused_attention(*x, is_causal=True,
                                                        kv_lengths=mask.kv_lengths, **kw)
    paths = {"explicit": lambda dtype: explicit,
             "fused": lambda dtype: fused(),  # causal and key lengths as flags: the model's way
             "fused_xla": lambda dtype: fused(implementation="xla"),
             # the same mask as a dense [B, 1, T, T] array
             "fused_dense_mask": lambda dtype: lambda *x: att.fused_attention(*x, mask=dense)}
    results: dict[str, dict[str, Any]] = {}
    for dtype_name, dtype in DTYPES.items():
        for path, make in paths.items():
            name = f"{path}/{dtype_name}"
            kernel = ("ours" if path == "explicit" else "xla" if path == "fused_xla"
                      else att.fused_kernel(dtype, d))
            run = vjp(make(dtype), dtype)
            try:
                out, grads = run()
                ms = 1e3 * _best_seconds(run, 5)
            except Exception as error:  # noqa: BLE001 - a kernel a device lacks is a result too
                results[name] = {"kernel": kernel, "error": f"{type(error).__name__}: {error}"[:300]}
                continue
            rel = lambda a, r: float(jnp.max(jnp.abs(a.astype(jnp.float32) - r)) / jnp.max(jnp.abs(r)))
            results[name] = {"kernel": kernel, "out_err": rel(out, ref_out),
                             "grad_err": max(rel(g, r) for g, r in zip(grads, ref_grads)), "ms": ms}
    return results


def train_step_speed(sizes: Sizes, dtype: str, attention: str, peak_flops: float) -> dict[str, Any]:
    """One configuration's train step: ms/step (median of 3 timings of `sizes.steps` steps),
    model TFLOP/s and MFU against `peak_flops`."""
    d_model = sizes.heads * sizes.head_dim
    vocab = 256
    model = setups.model_config(vocab, d_model=d_model, num_heads=sizes.heads,
                                num_layers=sizes.layers, d_ff=4 * d_model, seq_len=sizes.seq_len,
                                dtype=dtype, attention=attention)
    ours = setups.Ours.build(model, TrainConfig(num_steps=1000, batch_size=sizes.batch,
                                                warmup_steps=10))
    tokens = jax.random.randint(jax.random.key(0), (sizes.batch, sizes.seq_len + 1), 0, vocab)
    batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:],
             "weights": jnp.ones((sizes.batch, sizes.seq_len), jnp.float32),
             "padding_mask": jnp.ones((sizes.batch, sizes.seq_len), bool)}
    rng = jax.random.key(1)

    def steps_(n):
        metrics = None
        for _ in range(n):
            ours.state, metrics = ours.train_step(ours.state, batch, rng)
        return float(metrics["loss"])  # waits for the last step

    start = time.perf_counter()
    loss_first = steps_(1)
    first_call_s = time.perf_counter() - start
    steps_(1)
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        loss = steps_(sizes.steps)
        timings.append((time.perf_counter() - start) / sizes.steps)
    seconds = statistics.median(timings)
    flops = measure.train_flops_per_token(measure.matmul_params(ours.state["params"]),
                                          sizes.layers, sizes.seq_len, d_model)
    flops *= sizes.batch * sizes.seq_len
    return {"ms_per_step": 1e3 * seconds, "model_tflops": flops / seconds / 1e12,
            "mfu": flops / seconds / peak_flops, "first_call_s": first_call_s,
            "loss_first": loss_first, "loss_last": loss, "finite": bool(np.isfinite(loss))}


def run(sizes_by_name: dict[str, Sizes], log: Callable[[str], None] = print) -> dict[str, Any]:
    device = jax.devices()[0]
    out: dict[str, Any] = {"backend": jax.default_backend(), "device": device.device_kind,
                           "jax": jax.__version__}
    first = next(iter(sizes_by_name.values()))
    log(f"device: {device.device_kind} ({jax.default_backend()}), jax {jax.__version__}")
    out["attention"] = attention_agreement(first)
    for name, row in out["attention"].items():
        log(f"  attention {name:26s} kernel={row['kernel']:6s} " + (
            row["error"] if "error" in row else
            f"out_err={row['out_err']:.1e} grad_err={row['grad_err']:.1e} fwd+bwd {row['ms']:.2f} ms"))
    out["peak_tflops"] = {n: matmul_peak(first.matmul_n, dt) / 1e12 for n, dt in DTYPES.items()}
    log("  matmul peak: " + ", ".join(f"{n} {v:.1f} TFLOP/s" for n, v in out["peak_tflops"].items()))
    out["train"] = {}
    for size_name, sizes in sizes_by_name.items():
        for dtype in DTYPES:
            for attention in ("explicit", "fused"):
                key = f"{size_name}/{dtype}/{attention}"
                try:
                    row = train_step_speed(sizes, dtype, attention, 1e12 * out["peak_tflops"][dtype])
                except Exception as error:  # noqa: BLE001 - report and go on to the next one
                    row = {"error": f"{type(error).__name__}: {error}"[:300]}
                out["train"][key] = row
                log(f"  train {key:28s} " + (row["error"] if "error" in row else
                    f"{row['ms_per_step']:8.2f} ms/step {row['model_tflops']:7.1f} TFLOP/s "
                    f"MFU {row['mfu']:.2f}  loss {row['loss_first']:.2f} -> {row['loss_last']:.2f}"))
    return out

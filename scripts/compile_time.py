"""How compile time grows with depth: the layer stack is one scanned block, so it should not.

Builds a decoder Transformer (d_model 128, 4 heads, d_ff 512; batch 8 x 64 tokens) at 2 and 24
layers and times `jax.jit(value_and_grad(loss)).lower(...).compile()` for a train-like step (a
fresh jit each time, best of 2), then prints both and their ratio.

    .venv/bin/python scripts/compile_time.py [--layers 2 24] [--repeats 2]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax import ModelConfig, Norm, Transformer

BATCH, LENGTH = 8, 64


def compile_seconds(num_layers: int, repeats: int) -> tuple[float, float]:
    """(best lowering time, best compile time) in seconds, over `repeats` fresh jits."""
    cfg = ModelConfig(vocab_size=256, num_outputs=256, d_model=128, num_heads=4, d_ff=512,
                      num_layers=num_layers, max_len=LENGTH, norm=Norm.POST)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    tokens = jnp.zeros((BATCH, LENGTH), jnp.int32)
    best_lower = best_compile = float("inf")
    for _ in range(repeats):
        def loss(params, tokens):  # a new function object: nothing cached from the last round
            logits, _ = nnx.merge(graphdef, params)(tokens)
            return jnp.mean(logits)

        step = jax.jit(jax.value_and_grad(loss))
        start = time.perf_counter()
        lowered = step.lower(params, tokens)
        lowered_at = time.perf_counter()
        lowered.compile()
        done = time.perf_counter()
        best_lower = min(best_lower, lowered_at - start)
        best_compile = min(best_compile, done - lowered_at)
    return best_lower, best_compile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 24])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; decoder d_model=128, 4 heads, "
          f"d_ff=512, batch {BATCH} x {LENGTH} tokens; best of {args.repeats}")
    totals = {}
    for num_layers in args.layers:
        lower, compile_ = compile_seconds(num_layers, args.repeats)
        totals[num_layers] = lower + compile_
        print(f"num_layers={num_layers:3d}: lower {lower:6.2f} s + compile {compile_:6.2f} s "
              f"= {lower + compile_:6.2f} s")
    if len(args.layers) >= 2:
        first, last = args.layers[0], args.layers[-1]
        print(f"ratio {last} / {first} layers: {totals[last] / totals[first]:.2f}x "
              f"(depth ratio {last / first:.0f}x)")


if __name__ == "__main__":
    main()

"""The printout of `python -m transformer_jax.trace --pretrained=DIR "dog bites man"`: the four
steps of one head of a trained checkpoint (`pretrained_steps`), as text. The vectors are wide
(d_model 384, d_k 32 in all-MiniLM-L6-v2): their first SHOW numbers are printed."""
from __future__ import annotations

from transformer_jax.explain.text import nums, table

SHOW = 8  # numbers printed of each vector


def format_pretrained(directory, n, layer: int, head: int) -> str:
    tokens, d_k = n["tokens"], n["d_k"]
    labels = [f"  {t}" for t in tokens]
    square = lambda m: table(m, labels, tokens, label_width=14)  # noqa: E731
    first = lambda m: table(m[:, :SHOW], labels, label_width=14)  # noqa: E731
    before = f"after layers 0-{layer - 1}" if layer else "the embeddings: no layer before it"
    difference = abs(n["weights"] - n["model_weights"]).max()
    lines = [
        f"The four steps with trained weights: {directory}",
        f"  {n['layers']} layers, {n['heads']} heads of d_k {d_k}, d_model {n['d_model']}; "
        f"layer {layer}, head {head}",
        f"tokens (the checkpoint's tokenizer): {' '.join(tokens)}",
        f"x = layer {layer}'s input ({before})   [T, d_model] = {list(n['x'].shape)}, first "
        f"{SHOW} numbers", *first(n["x"])]
    for name in ("q", "k", "v"):
        lines += [f"{name.upper()} = x·W_{name} + b_{name}, head {head}   [T, d_k] = "
                  f"{list(n[name].shape)}, first {SHOW} numbers", *first(n[name])]
    lines += [f"Step 1. Q·Kᵀ: each query (row) against each key (column), head {head}",
              *square(n["raw"]),
              f"Step 2. ÷√d_k = ×{d_k ** -0.5:.3f}", *square(n["scaled"]),
              "Step 3. softmax, row by row: each row sums to 1 (last column)",
              *table([list(r) + [s] for r, s in zip(n["weights"], n["row_sums"])], labels,
                     list(tokens) + ["sum"], label_width=14),
              f"Step 4. weights·V: each token's new vector from head {head}   [T, d_k], first "
              f"{SHOW} numbers", *first(n["new"]),
              f"  (the model's blocks.{layer}.attn.head_out, head {head}: max |difference| "
              f"{abs(n['new'] - n['model_new']).max():.1g})",
              f"The model's own attention weights, layer {layer} head {head}: max |difference| "
              f"from step 3 {difference:.1g}"]
    return "\n".join(lines)

"""The PyTorch reference the benchmark races: the same decoder, optimizer and schedule, eager.

Why start from our weights: `TorchGPT.from_params` copies our initial parameters, so both runs
begin at the same point and see the same batches; their validation losses then differ only by
float rounding and the order of operations, and a gap means a real difference in the training
step. The reference is written as PyTorch users write it, not as a copy of our code: one fused
q/k/v projection and `F.scaled_dot_product_attention`, nanoGPT style, so it is a fair (strong)
baseline. Architecture: pre-norm, sinusoidal positions added to √d·embedding, ReLU FFN, final
LayerNorm, linear head; AdamW with decoupled weight decay on weight matrices only, global-norm
clipping, linear warmup then cosine decay (optax's `warmup_cosine_decay_schedule`).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPSILON = 1e-5


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """The same table as `transformer_jax.model.transformer.positions.sinusoidal_table`: [length, d_model]."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[None, :]
    angle = pos / torch.pow(10000.0, two_i / d_model)
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


class Block(nn.Module):
    """x = x + attn(ln1(x)); x = x + ffn(ln2(x))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model, eps=LAYER_NORM_EPSILON)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model, eps=LAYER_NORM_EPSILON)
        self.hidden = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.num_heads, d // self.num_heads).transpose(1, 2)
                   for z in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.output(F.relu(self.hidden(self.ln2(x))))


class TorchGPT(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int,
                 d_ff: int, max_len: int):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", sinusoidal_table(max_len, d_model), persistent=False)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model, eps=LAYER_NORM_EPSILON)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * self.d_model ** 0.5 + self.positions[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))  # (B, T, V)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], num_heads: int) -> "TorchGPT":
        """A TorchGPT holding our (pure-dict) parameters: Flax kernels are [in, out], PyTorch
        weights [out, in]; our stacked layers are split along their leading axis."""
        vocab, d_model = np.shape(params["embed"]["embedding"])
        blocks = params["layers"]["blocks"]
        num_layers, _, d_ff = np.shape(blocks["feed_forward"]["hidden"]["kernel"])
        model = cls(vocab, d_model, num_heads, num_layers, d_ff, max_len=4096)
        t = lambda a: torch.from_numpy(np.array(a, np.float32))  # noqa: E731
        linear = lambda mod, p: (mod.weight.copy_(t(p["kernel"]).T), mod.bias.copy_(t(p["bias"])))  # noqa: E731
        norm = lambda mod, p: (mod.weight.copy_(t(p["scale"])), mod.bias.copy_(t(p["bias"])))  # noqa: E731
        at = lambda tree, i: {k: (at(v, i) if isinstance(v, Mapping) else v[i])  # noqa: E731
                              for k, v in tree.items()}
        with torch.no_grad():
            model.embed.weight.copy_(t(params["embed"]["embedding"]))
            norm(model.final_norm, params["final_norm"])
            linear(model.head, params["head"])
            for i, block in enumerate(model.blocks):
                p = at(blocks, i)
                a = p["attention"]
                block.qkv.weight.copy_(torch.cat([t(a[n]["kernel"]).T for n in ("query", "key", "value")]))
                block.qkv.bias.copy_(torch.cat([t(a[n]["bias"]) for n in ("query", "key", "value")]))
                linear(block.out, a["out"])
                linear(block.hidden, p["feed_forward"]["hidden"])
                linear(block.output, p["feed_forward"]["output"])
                norm(block.ln1, p["norm_before_attention"])
                norm(block.ln2, p["norm_before_feed_forward"])
        return model


def warmup_cosine(step: int, peak: float, warmup: int, total: int, end: float) -> float:
    """optax.warmup_cosine_decay_schedule(peak / (warmup + 1), peak, warmup, total, end) at
    `step`: steps.make_optimizer's schedule (warm-up from peak / (warmup + 1), as nanoGPT)."""
    if step < warmup:
        return peak * (step + 1) / (warmup + 1)
    frac = min(step - warmup, total - warmup) / max(total - warmup, 1)
    return end + (peak - end) * 0.5 * (1.0 + math.cos(math.pi * frac))


class TorchTrainer:
    """One AdamW step per `step(batch)`; lr follows the warmup + cosine schedule."""

    def __init__(self, model: TorchGPT, *, learning_rate: float, warmup_steps: int,
                 num_steps: int, end_learning_rate: float, weight_decay: float = 0.01,
                 b1: float = 0.9, b2: float = 0.99, grad_clip_norm: float = 1.0):
        self.model = model
        decayed = [p for p in model.parameters() if p.dim() >= 2]  # weight matrices, tables
        rest = [p for p in model.parameters() if p.dim() < 2]  # biases, norm scales
        self.opt = torch.optim.AdamW([{"params": decayed, "weight_decay": weight_decay},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=learning_rate, betas=(b1, b2), eps=1e-8)
        self.schedule = lambda s: warmup_cosine(s, learning_rate, warmup_steps, num_steps,
                                                end_learning_rate)
        self.clip = grad_clip_norm
        self.steps = 0

    def step(self, batch: Mapping[str, np.ndarray]) -> float:
        """One training step on a numpy batch ('inputs', 'targets', 'weights'); returns the loss
        (read back every step, as our trainer does)."""
        for group in self.opt.param_groups:
            group["lr"] = self.schedule(self.steps)
        logits = self.model(torch.from_numpy(batch["inputs"]).long())
        loss = weighted_cross_entropy(logits, batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        self.steps += 1
        return loss.item()


def weighted_cross_entropy(logits: torch.Tensor, batch: Mapping[str, np.ndarray],
                           reduce: bool = True) -> torch.Tensor:
    targets = torch.from_numpy(batch["targets"]).long()
    weights = torch.from_numpy(batch["weights"]).float()
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    total = (losses * weights.flatten()).sum()
    return total / weights.sum().clamp_min(1e-9) if reduce else total


@torch.no_grad()
def evaluate(model: TorchGPT, batches: Iterable[Mapping[str, np.ndarray]]) -> float:
    """Mean loss per weighted target over the batches."""
    model.eval()
    total, weight = 0.0, 0.0
    for batch in batches:
        total += float(weighted_cross_entropy(model(torch.from_numpy(batch["inputs"]).long()),
                                              batch, reduce=False))
        weight += float(batch["weights"].sum())
    model.train()
    return total / max(weight, 1e-9)

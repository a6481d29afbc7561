"""The compiled functions of a run: train step, eval step, attention probe. All pure.

The model travels as (graphdef, params) with params a pure dict (`nnx.to_pure_dict`):
`nnx.merge` inside the jitted function rebuilds it, so Flax's object graph costs nothing per
step outside the compiled program.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from transformer_jax.config import Head, ModelConfig, TrainConfig
from transformer_jax.model.norms import TRAINING

Array = jax.Array
Batch = dict[str, Array]
DECAYED = ("kernel", "embedding", "table")  # parameter names that get weight decay
DIAGNOSTICS = ("param_norm", "update_norm", "layer_grad_norm",
               "qk_grad_norm", "residual_rms")  # train metrics for the logs only
# The attention's W_q and W_k: the kernels whose gradient passes through the softmax (÷√d_k's
# "so that gradients flow" is a claim about them; W_v's gradient bypasses the softmax's Jacobian).
QK_KERNELS = ("query", "key")


def make_optimizer(train: TrainConfig) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """AdamW on a linear-warmup + cosine-decay schedule, with optional global-norm clipping.

    Warm-up: lr(t) = peak · (t + 1) / (warmup + 1) for t = 0 .. warmup, as nanoGPT does, so the
    first step already learns (from 0 it would be a wasted step); then cosine decay to
    peak · end_learning_rate_factor at `num_steps` (train.schedule "constant": peak from there
    on). Without warm-up the first step is at peak.

    Weight decay applies to weight matrices (kernels, embedding and position tables), not to
    biases or norm scales. It goes by name, since stacked layers give biases two dimensions.
    """
    schedule = learning_rate_schedule(train)
    decay_mask = lambda params: jax.tree_util.tree_map_with_path(
        lambda path, _: path[-1].key in DECAYED, params)  # params: a pure dict
    adamw = optax.adamw(schedule, b1=train.b1, b2=train.b2, weight_decay=train.weight_decay,
                        mask=decay_mask)
    clip = optax.clip_by_global_norm(train.grad_clip_norm) if train.grad_clip_norm > 0 else optax.identity()
    return optax.chain(clip, adamw), schedule


def learning_rate_schedule(train: TrainConfig) -> optax.Schedule:
    """The warm-up, then train.schedule: "cosine" decays over train.num_steps (an extended run
    follows the longer decay from where it resumes); "constant" stays at the peak, a function of
    the step alone, so a run extended from B to 2B steps is the run trained straight to 2B."""
    start = train.learning_rate / (train.warmup_steps + 1)
    if train.schedule == "constant":
        return optax.join_schedules([optax.linear_schedule(start, train.learning_rate,
                                                           train.warmup_steps),
                                     optax.constant_schedule(train.learning_rate)],
                                    [train.warmup_steps])
    return optax.warmup_cosine_decay_schedule(
        init_value=start, peak_value=train.learning_rate, warmup_steps=train.warmup_steps,
        decay_steps=train.num_steps, end_value=train.learning_rate * train.end_learning_rate_factor)


def loss_and_metrics(logits: Array, batch: Batch, head: Head) -> tuple[Array, dict[str, Array]]:
    """Weighted cross-entropy and accuracy.

    token head: logits [B, T, V], targets/weights [B, T]; pooled: logits [B, C], targets/weights [B].
    Also `seq_accuracy`: the fraction of sequences with every weighted position right.
    """
    targets, weights = batch["targets"], batch["weights"].astype(jnp.float32)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)  # [B, T] or [B]
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
    total = jnp.maximum(weights.sum(), 1e-9)
    loss = jnp.sum(losses * weights) / total
    metrics = {"loss": loss, "accuracy": jnp.sum(correct * weights) / total,
               "max_abs_logit": jnp.max(jnp.abs(logits))}
    if head is Head.TOKEN:
        wrong = jnp.sum((1.0 - correct) * weights, axis=-1)  # [B]
        real = (weights.sum(-1) > 0).astype(jnp.float32)
        metrics["seq_accuracy"] = jnp.sum((wrong == 0) * real) / jnp.maximum(real.sum(), 1.0)
    metrics["weight"] = weights.sum()
    return loss, metrics


def _layer_norms(tree: Any, num_layers: int) -> Array:
    """Per-layer global norm of the stacked-layer part of a params-shaped tree: [num_layers]."""
    squares = [jnp.sum(jnp.square(leaf.astype(jnp.float32)).reshape(num_layers, -1), axis=1)
               for leaf in jax.tree.leaves(tree)]
    return jnp.sqrt(sum(squares))


def qk_kernels(layers: dict) -> list[Array]:
    """The stacked layers' W_q and W_k kernels ([num_layers, d_model, d_model] each) of a
    params-shaped tree `layers` (params['layers'] or its gradient)."""
    attention = layers["blocks"]["attention"]
    return [attention[name]["kernel"] for name in QK_KERNELS]


def over_replicas(fn: Callable, shared: tuple[int, ...] = ()) -> Callable:
    """fn over a leading replica axis of its arguments (except those in `shared`), one replica
    after another inside one compiled program (`jax.lax.map`); a single replica is just fn.

    Not `jax.vmap`: for the studies' models (3 replicas, idle 2-core CPU, ms per step) vmap
    was no faster or slower: 2-layer encoder 20.5 vs 21.6 (lax.map), 6-layer 72.7 vs 72.1,
    2-layer decoder 55.6 vs 42.8. Either compiles the step once for all replicas, which is what
    a sweep of small models on a CPU needs most.
    """
    def mapped(*args):
        per_replica = tuple(a for i, a in enumerate(args) if i not in shared)

        def one(xs):
            it = iter(xs)
            return fn(*(args[i] if i in shared else next(it) for i in range(len(args))))

        if jax.tree.leaves(per_replica)[0].shape[0] == 1:  # static: no loop for one replica
            out = one(jax.tree.map(lambda x: x[0], per_replica))
            return jax.tree.map(lambda x: x[None], out)
        return jax.lax.map(one, per_replica)

    return mapped


def make_train_step(graphdef: nnx.GraphDef, model_cfg: ModelConfig,
                    tx: optax.GradientTransformation, schedule: optax.Schedule, *,
                    replicas: bool = False, diagnostics: bool = True,
                    microbatches: int = 1) -> Callable[[dict, Batch, Array], tuple[dict, dict]]:
    """state = {'params', 'opt_state', 'step'} -> (new state, metrics). Buffers are donated.

    replicas=True: every argument and result has a leading replica axis (e.g. seeds), trained
    in one compiled program (`over_replicas`).
    diagnostics=False leaves out DIAGNOSTICS (param_norm, update_norm, layer_grad_norm): more
    passes over all parameters, which cost the char-LM step 7 % (measured with `--profile`);
    the trainer computes them on the steps it logs (`make_logged_multi_step`).
    microbatches=m: the forward and backward run as m independent passes over strided slices of
    the batch, their gradients and metrics combined by weight (`combine_microbatches`): the same
    update to float rounding (dropout masks differ). XLA:CPU runs independent passes on
    different cores at once, which small models otherwise leave idle.
    """
    step = _step_function(graphdef, model_cfg, tx, schedule, microbatches)
    diagnose = _diagnostics_function(model_cfg)

    def train_step(state: dict, batch: Batch, rng: Array):
        state, metrics, last = step(state, batch, rng)
        if diagnostics:
            metrics.update(diagnose(state["params"], last))
        return state, metrics

    return jax.jit(over_replicas(train_step) if replicas else train_step, donate_argnums=(0,))


def _step_function(graphdef: nnx.GraphDef, model_cfg: ModelConfig,
                   tx: optax.GradientTransformation, schedule: optax.Schedule,
                   microbatches: int) -> Callable:
    """(state, batch, rng) -> (new state, metrics, last), not jitted, without DIAGNOSTICS. `last`
    is what `_diagnostics_function` reads of this step: {'grads': {'layers': ...}, 'updates',
    'stats', 'residual_rms'} (the stacked layers' gradients, every update, BatchNorm's
    statistics, the residual stream's RMS after each layer in this step's forward pass)."""

    def train_step(state: dict, batch: Batch, rng: Array):
        dropout_key = jax.random.fold_in(rng, state["step"]) if model_cfg.dropout > 0 else None

        def loss_fn(params, part, key):
            model = nnx.view(nnx.merge(graphdef, params), **TRAINING)  # BatchNorm: batch statistics
            # The residual stream's RMS per layer is read off this forward pass (the train batch,
            # not an eval batch): it costs no second pass, and the logged step 1 is then exactly
            # the initialization (the first step's forward reads the initial parameters), where
            # an eval batch would see the parameters after the step. Its real tokens only.
            logits, _, rms = model.with_residual_rms(
                part["inputs"], part["padding_mask"], dropout_key=key,
                training=True)  # model.causal_mask=False: no causal mask here
            loss, metrics = loss_and_metrics(logits, part, model_cfg.head)
            return loss, (metrics, nnx.to_pure_dict(nnx.state(model, nnx.BatchStat)), rms)

        value_and_grad = jax.value_and_grad(loss_fn, has_aux=True)
        if microbatches == 1:
            (loss, (metrics, stats, rms)), grads = value_and_grad(state["params"], batch,
                                                                  dropout_key)
        else:
            parts = [microbatch(batch, i, microbatches) for i in range(microbatches)]
            keys = [None if dropout_key is None else jax.random.fold_in(dropout_key, i)
                    for i in range(microbatches)]
            results = [value_and_grad(state["params"], part, key) for part, key in zip(parts, keys)]
            loss, metrics, grads = combine_microbatches(
                [((l, m), g) for (l, (m, _, _)), g in results], parts)
            rms = combine_rms([r for (_, (_, _, r)), _ in results], parts)
            stats = {}  # no BatchNorm here: train.check_config refuses it with microbatches > 1
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        # BatchNorm's running statistics sit in params but take no gradient (training normalizes
        # with the batch's): the optimizer's (zero) step on them is replaced by the forward
        # pass's moving averages.
        params = replace_leaves(optax.apply_updates(state["params"], updates), stats)
        metrics.update(learning_rate=schedule(state["step"]), grad_norm=optax.tree.norm(grads))
        metrics["finite"] = jnp.isfinite(loss) & jnp.isfinite(metrics["grad_norm"])
        new_state = {"params": params, "opt_state": opt_state, "step": state["step"] + 1}
        last = {"grads": {"layers": grads["layers"]}, "updates": updates, "stats": stats,
                "residual_rms": rms}
        return new_state, metrics, last

    return train_step


def _diagnostics_function(model_cfg: ModelConfig) -> Callable[[dict, dict], dict]:
    """(params after a step, that step's `last`) -> DIAGNOSTICS. qk_grad_norm: per layer, the
    norm of the gradient of W_q and W_k together (their kernels; biases left out); residual_rms:
    per layer, the stream's RMS in the step's forward pass (the parameters before the step)."""

    def diagnose(params: dict, last: dict) -> dict:
        weights = replace_leaves(params, jax.tree.map(jnp.zeros_like, last["stats"]))  # no stats
        layers = last["grads"]["layers"]
        return {"param_norm": optax.tree.norm(weights),
                "update_norm": optax.tree.norm(last["updates"]),
                "layer_grad_norm": _layer_norms(layers, model_cfg.num_layers),
                "qk_grad_norm": _layer_norms(qk_kernels(layers), model_cfg.num_layers),
                "residual_rms": last["residual_rms"]}

    return diagnose


def replace_leaves(tree: dict, new: dict) -> dict:
    """Nested dicts `tree` with the leaves that `new` (nested dicts, a part of tree's keys) has."""
    return {k: (replace_leaves(v, new[k]) if isinstance(v, dict) else new[k]) if k in new else v
            for k, v in tree.items()}


def microbatch(batch: Batch, i: int, m: int) -> Batch:
    """Slice i of m of every array's batch axis, strided (rows i, i+m, ...): on a data-parallel
    mesh each device keeps its own rows."""
    return jax.tree.map(lambda x: x.reshape((x.shape[0] // m, m) + x.shape[1:])[:, i], batch)


def combine_microbatches(results, parts) -> tuple[Array, dict, Any]:
    """[((loss, metrics), grads)] of microbatches -> the loss, metrics and gradients of their
    union: the parts' `weighted_sums` added up and divided, as an evaluation adds up batches;
    gradients weighted like the loss, max_abs_logit the max."""
    sums = [weighted_sums(metrics, part) for ((_, metrics), _), part in zip(results, parts)]
    total = {k: sum(s[k] for s in sums) for k in sums[0]}
    metrics = means_of_sums(total, jnp.maximum)
    metrics["weight"] = total["weight"]
    metrics["max_abs_logit"] = jnp.max(jnp.stack([m["max_abs_logit"] for (_, m), _ in results]))
    shares = [s["weight"] / jnp.maximum(total["weight"], 1e-9) for s in sums]
    grads = jax.tree.map(lambda *gs: sum(g * w for g, w in zip(gs, shares)),
                         *[g for _, g in results])
    return metrics["loss"], metrics, grads


def combine_rms(rms: list[Array], parts: list[Batch]) -> Array:
    """Per-layer RMS of each microbatch ([num_layers] each) -> that of their union: mean squares
    weighted by each part's real tokens, as one pass over the whole batch would count them."""
    counts = [jnp.sum(part["padding_mask"].astype(jnp.float32)) for part in parts]
    squares = sum(c * jnp.square(r) for c, r in zip(counts, rms))
    return jnp.sqrt(squares / jnp.maximum(sum(counts), 1.0))


def means_of_sums(sums: dict[str, Any], maximum: Callable = max) -> dict[str, Any]:
    """`weighted_sums`, added up over (micro)batches -> the means of their union: every sum over
    the total weight, seq_accuracy over the real sequences. `maximum` floors the divisors:
    `max` for host floats, `jnp.maximum` inside a compiled step."""
    out = {k: v / maximum(sums["weight"], 1e-9) for k, v in sums.items()
           if k not in ("weight", "sequences", "seq_accuracy")}
    if "seq_accuracy" in sums:
        out["seq_accuracy"] = sums["seq_accuracy"] / maximum(sums["sequences"], 1e-9)
    return out


def weighted_sums(metrics: dict[str, Array], batch: Batch) -> dict[str, Array]:
    """`loss_and_metrics`' means -> sums that add up over batches (or microbatches) of any fill:
    loss and accuracy × weight, seq_accuracy × the real sequences (also returned, 'sequences');
    'weight' kept; max_abs_logit left out (a max does not add up)."""
    weight = metrics["weight"]
    out = {k: v * weight for k, v in metrics.items()
           if k not in ("weight", "max_abs_logit", "seq_accuracy")}
    out["weight"] = weight
    if "seq_accuracy" in metrics:
        real = jnp.sum(batch["weights"].sum(-1) > 0)
        out["seq_accuracy"], out["sequences"] = metrics["seq_accuracy"] * real, real
    return out


def stack_batches(batches) -> Batch:
    """Batches (dicts of arrays) -> one with a new leading axis on every array (host numpy)."""
    return jax.tree.map(lambda *xs: np.stack(xs), *batches)


def make_logged_multi_step(graphdef: nnx.GraphDef, model_cfg: ModelConfig,
                           tx: optax.GradientTransformation, schedule: optax.Schedule, *,
                           replicas: bool = False, microbatches: int = 1) -> Callable:
    """The trainer's k-step call (`train.steps_per_call`): (state, batches [k, ...], rng) ->
    (state after k steps, metrics stacked [k, ...]), DIAGNOSTICS on the last step only (the one
    the trainer logs; NaN at the others).

    One step body in a `lax.scan` over all k batches; the last step's layer gradients and updates
    ride in the scan's carry and the diagnostics are computed from them after the loop. So the
    program holds the forward and backward passes once, where a scan of k - 1 lean steps
    followed by a separately traced logged step held them twice: for configs/lm.py (k = 10,
    2 microbatches, on a 2-CPU Intel Xeon) the compile went from 6.5 s and a 819 MiB peak to
    4.9 s and 632 MiB, and loading it from the compilation cache from a 540 to a 419 MiB peak,
    at the same ms per step (measured carrying every gradient; now only the layers' are carried).
    Training is that of the two-body program to float rounding (tests/scripts/test_benchmark_smoke.py),
    and bitwise for every committed study with steps_per_call > 1 (checked when it changed), so
    their results stand.
    """
    step = _step_function(graphdef, model_cfg, tx, schedule, microbatches)
    diagnose = _diagnostics_function(model_cfg)
    if replicas:
        step, diagnose = over_replicas(step), over_replicas(diagnose)

    def multi_step(state, batches, rng):
        def body(carry, batch):
            state, metrics, last = step(carry[0], batch, rng)
            return (state, last), metrics

        # `last` of the previous step rides in the carry: zeros of its shapes before the first.
        shapes = jax.eval_shape(step, state, jax.tree.map(lambda x: x[0], batches), rng)[2]
        start = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
        (state, last), metrics = jax.lax.scan(body, (state, start), batches)
        before = jax.tree.leaves(batches)[0].shape[0] - 1
        for name, value in diagnose(state["params"], last).items():  # the logged (last) step's
            metrics[name] = jnp.concatenate([jnp.full((before,) + value.shape, jnp.nan,
                                                      value.dtype), value[None]])
        return state, metrics

    return jax.jit(multi_step, donate_argnums=(0,))


def make_multi_step(train_step: Callable) -> Callable:
    """(state, batches [k, ...], rng) -> (state after k steps, metrics stacked [k, ...]).

    k optimizer steps in one compiled call (`jax.lax.scan` over k stacked batches; one program
    per distinct k). A small model on a CPU spends much of a step in per-call overhead (dispatch,
    argument handling, thread wake-ups between many small kernels, the host loop); one call per
    k steps pays it once. The scan body is the unchanged (jitted, inlined) train step. The
    trainer's own k-step call is `make_logged_multi_step` (diagnostics on the last step only).
    """

    def multi_step(state, batches, rng):
        return jax.lax.scan(lambda s, batch: train_step(s, batch, rng), state, batches)

    return jax.jit(multi_step, donate_argnums=(0,))


def next_call_size(step: int, stop: int, k: int, boundaries) -> int:
    """How many steps the call starting after `step` completed steps should run: k when k more
    steps stay within `stop` and reach no boundary before their last step (a step count that a
    boundary period divides: log, eval, checkpoint), else 1. So a call ends exactly on every
    boundary, where the trainer needs the state, and only two programs exist: 1 and k steps."""
    if k <= 1 or step + k > stop:
        return 1
    for every in boundaries:
        if every > 0 and (step // every) != ((step + k - 1) // every):
            return 1  # a boundary (a multiple of `every`) falls in steps step+1 .. step+k-1
    return k


def flops_per_call(program: Callable, *args: Any) -> float:
    """XLA's count of the floating-point operations in one call of the jitted `program` on
    `args` (its cost analysis of the lowered program, before optimization; nan where the
    backend gives none). Lowering is cached: the call that follows compiles this very lowering,
    so counting costs the analysis alone. A replicated step (`over_replicas`) maps over the
    replicas in a loop whose body XLA counts once: its count is one replica's step
    (tests/train/test_step_flops.py holds both to a hand count). A program that is not jitted
    itself (a wrapper around one, as tests and profilers make) has no lowering: nan."""
    if not hasattr(program, "lower"):
        return math.nan
    cost = program.lower(*args).cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float((cost or {}).get("flops", math.nan))


def make_eval_step(graphdef: nnx.GraphDef, model_cfg: ModelConfig, *, replicas: bool = False):
    """params, batch -> summed metrics (weighted sums, so batches of any fill add up exactly).

    replicas=True: params carry a leading replica axis, the batch is shared.
    """

    def eval_step(params, batch: Batch):
        logits, _ = nnx.merge(graphdef, params)(batch["inputs"], batch["padding_mask"])
        _, metrics = loss_and_metrics(logits, batch, model_cfg.head)
        return weighted_sums(metrics, batch)

    return jax.jit(over_replicas(eval_step, shared=(1,)) if replicas else eval_step)


def finish_eval(sums: dict[str, float], bits_name: str = "bits_per_token") -> dict[str, float]:
    """Turns summed eval metrics into means; adds bits per token or character (loss / ln 2)."""
    out = means_of_sums(sums)
    out[bits_name] = out["loss"] / math.log(2)
    return out


def make_probe(graphdef: nnx.GraphDef, *, replicas: bool = False):
    """params, batch -> per-layer attention statistics and the weights of example 0.

    entropy is normalized by log(number of keys a query may see), so 1 = uniform attention and
    0 = all weight on one key; `max_weight` is the mean over queries of the row maximum.
    """

    def probe(params, batch: Batch):
        _, found = nnx.merge(graphdef, params)(batch["inputs"], batch["padding_mask"], probe=True)
        w = found.weights.astype(jnp.float32)  # [L, B, H, T, T]
        allowed = (w > 0).sum(-1)  # keys each query may see (masked keys get exactly 0)
        entropy = -jnp.sum(jnp.where(w > 0, w * jnp.log(jnp.where(w > 0, w, 1.0)), 0.0), -1)
        entropy = entropy / jnp.maximum(jnp.log(jnp.maximum(allowed, 1)), 1e-9)
        real = batch["padding_mask"][None, :, None, :]  # queries on real tokens: [1, B, 1, T]
        choice = (real & (allowed > 1)).astype(jnp.float32)  # and with more than one key
        mean = lambda x, m: jnp.sum(x * m, axis=(1, 2, 3)) / jnp.maximum(
            jnp.sum(jnp.broadcast_to(m, x.shape), axis=(1, 2, 3)), 1.0)
        return {"entropy": mean(entropy, choice),
                "max_weight": mean(w.max(-1), choice),
                "max_abs_logit": found.max_abs_logit,
                "example_weights": w[:, 0]}  # [L, H, T, T]

    return jax.jit(over_replicas(probe, shared=(1,)) if replicas else probe)

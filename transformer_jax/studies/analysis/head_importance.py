"""Which heads the model uses: a study analysis (`Study.analyses`) that knocks out one head at a
time and measures what breaks.

Why: a head's role score (`head_roles`) says what its weights look like, not whether the model
relies on it. The standard evidence is causal: remove the head at test time and see how much
the metric falls (Michel et al. 2019: most heads can go at small cost, a few cannot; Voita et
al. 2019: the ones that cannot have recognisable roles).

For every finished run this restores the final parameters and evaluates the eval split (at most
`MAX_EXAMPLES` examples) once with every head and once per head with that head alone knocked out
(`Transformer(..., head_mask=...)`: its output is multiplied by 0 before W_o). A head's
importance is the metric's drop: value with all heads − value without it (for a loss, the rise).
Every knock-out of a variant's seeds runs in one compiled program (vmapped over seeds and masks).

Writes into the study dir `head_importance.csv` (variant, seed, layer, head, the metric with all
heads and without this one, the drop, and the head's role when `head_roles.csv` is there) and
`head_importance.png` (one layer × head grid per variant: mean drop over seeds); returns
markdown: per variant the most important head, how many heads cost less than `SMALL` of the
metric, whether the most important head has a role, and each of the study's checks (`Check`:
a statement about one seed's importances and role scores, stated before the run) pass or fail.
"""
from __future__ import annotations

import csv
import dataclasses
import itertools
from pathlib import Path
from typing import Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.studies.analysis import head_roles
from transformer_jax.studies.analysis.restore import Restored, finished_run_dirs, restore_variant
from transformer_jax.studies.checks import Check, CheckResult, Section, judged
from transformer_jax.studies.render.markdown import checks_table, markdown_table
from transformer_jax.train import steps
from transformer_jax.train.figures import file_pyplot

CSV_FILE, PLOT_FILE = "head_importance.csv", "head_importance.png"
MAX_EXAMPLES = 1024  # eval examples scored per knock-out (the eval split's first ones)
BATCH = 256
# masks evaluated in one program: each holds the batch's activations (induction's 35 masks × 5
# seeds at once held 8 GB)
MASKS_AT_ONCE = 8
SMALL = 0.01  # a head whose knock-out costs less than this (in the metric's units) is "cheap"
METRICS = ("accuracy", "loss")  # what a drop can be measured in (loss: a rise is a drop)


def knockout_masks(num_layers: int, num_heads: int) -> np.ndarray:
    """[1 + L·H, L, H]: every head kept, then each head (layer-major) alone set to 0."""
    masks = np.ones((1 + num_layers * num_heads, num_layers, num_heads), np.float32)
    for i, (layer, head) in enumerate(itertools.product(range(num_layers), range(num_heads))):
        masks[1 + i, layer, head] = 0.0
    return masks


def make_knockout_eval(graphdef: nnx.GraphDef, restored: Restored) -> Callable:
    """(params [S, ...], batch, masks [S, M, L, H]) -> weighted metric sums [S, M] (one
    program): each seed under its own masks."""
    head = restored.run.model.head

    def sums(params, batch, head_mask):
        model = nnx.merge(graphdef, params)
        logits, _ = model(batch["inputs"], batch["padding_mask"], head_mask=head_mask)
        _, metrics = steps.loss_and_metrics(logits, batch, head)
        return steps.weighted_sums(metrics, batch)

    over_masks = jax.vmap(sums, in_axes=(None, None, 0))
    return jax.jit(jax.vmap(over_masks, in_axes=(0, None, 0)))


def knockout_values(restored: Restored, metric: str = "accuracy",
                    max_examples: int = MAX_EXAMPLES) -> np.ndarray:
    """[seeds, 1 + L·H]: the metric on the eval split with every head, then with each knocked out."""
    cfg = restored.run.model
    masks = knockout_masks(cfg.num_layers, cfg.num_heads)
    return masked_values(restored, np.broadcast_to(masks, (len(restored.seeds),) + masks.shape),
                         metric, max_examples)


def masked_values(restored: Restored, masks: np.ndarray, metric: str = "accuracy",
                  max_examples: int = MAX_EXAMPLES) -> np.ndarray:
    """masks [S, M, L, H] (1 keeps a head, 0 knocks it out; seed i's under masks[i]) -> [S, M]:
    the metric on the eval split's first `max_examples` examples under each mask."""
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of: {', '.join(METRICS)}")
    cfg = restored.run.model
    evaluate = make_knockout_eval(restored.graphdef, restored)
    masks = jnp.asarray(masks, jnp.float32)
    total: Optional[dict] = None
    seen = 0
    for batch in restored.run.dataset.eval_batches(BATCH, cfg.arch.value):
        if seen >= max_examples:
            break
        seen += len(batch["inputs"])
        parts = [jax.device_get(evaluate(restored.params, batch, masks[:, i:i + MASKS_AT_ONCE]))
                 for i in range(0, masks.shape[1], MASKS_AT_ONCE)]
        out = {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]}
        total = out if total is None else {k: total[k] + out[k] for k in total}
    if total is None:
        raise ValueError("the eval split is empty: no examples to knock heads out on")
    return np.asarray(total[metric] / np.maximum(total["weight"], 1e-9))


def drops(values: np.ndarray, num_layers: int, num_heads: int, metric: str) -> np.ndarray:
    """knockout_values' [S, 1 + L·H] -> importance [S, L, H]: how much worse without the head."""
    base, knocked = values[:, :1], values[:, 1:]
    worse = base - knocked if metric == "accuracy" else knocked - base
    return worse.reshape(len(values), num_layers, num_heads)


def make_analysis(metric: str = "accuracy", checks: tuple[Check, ...] = (),
                  max_examples: int = MAX_EXAMPLES) -> Callable[[Path, dict], Section]:
    """The analysis for `Study.analyses`, measuring the drop in `metric` (eval/<metric>). Put it
    after head_roles' analysis in `Study.analyses` to read the roles and scores it writes."""
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of: {', '.join(METRICS)}")

    def head_importance(root: Path, runs: dict) -> Section:
        return analyse(Path(root), runs, metric, checks, max_examples)
    return head_importance


def analyse(root: Path, runs: Mapping, metric: str = "accuracy", checks: tuple[Check, ...] = (),
            max_examples: int = MAX_EXAMPLES) -> Section:
    results = {}  # variant -> (seeds, values [S, 1 + L·H], importance [S, L, H])
    for variant, dirs in finished_run_dirs(root, runs).items():
        restored = restore_variant(dirs)
        cfg = restored.run.model
        values = knockout_values(restored, metric, max_examples)
        results[variant] = (restored.seeds, values, drops(values, cfg.num_layers, cfg.num_heads,
                                                          metric))
    if not results:
        return Section("No finished runs to knock heads out of.\n")
    rows = read_head_roles(root / head_roles.CSV_FILE)
    roles = {key: r["role"] for key, r in rows.items()}
    _write_csv(results, roles, root / CSV_FILE)
    plot_importance({v: imp.mean(0) for v, (_, _, imp) in results.items()}, metric,
                    root / PLOT_FILE)
    found = judge(results, rows, checks)
    return Section(_markdown(results, roles, metric) + _checks_markdown(found), found)


def read_head_roles(path: Path) -> dict[tuple[str, int, int, int], dict[str, str]]:
    """(variant, seed, layer, head) -> the trained head's row of head_roles.csv (if present)."""
    if not path.is_file():
        return {}
    with path.open() as f:
        return {(r["variant"], int(r["seed"]), int(r["layer"]), int(r["head"])): r
                for r in csv.DictReader(f) if r["weights"] == "trained"}


def role_scores(rows: Mapping, variant: str, seed: int, shape: tuple[int, int]
                ) -> dict[str, np.ndarray]:
    """One seed's previous-token and prefix-matching scores [L, H] from read_head_roles' rows."""
    if not any(k[0] == variant and k[1] == seed for k in rows):
        return {}
    return {name: np.array([[float(rows[(variant, seed, layer, head)][name])
                             for head in range(shape[1])] for layer in range(shape[0])])
            for name in ("previous_token", "prefix_matching")}


# ---------------------------------------------------------------- Voita's question, per seed
# (importance [L, H], role_scores' dict; empty scores: no head has a role)

def has_role(scores: Mapping[str, np.ndarray]) -> Optional[np.ndarray]:
    """[L, H] bool: the head is previous-token or induction by head_roles' thresholds; None
    without scores."""
    if not scores:
        return None
    return ((scores["previous_token"] >= head_roles.PREVIOUS_TOKEN)
            | (scores["prefix_matching"] >= head_roles.INDUCTION))


def top_head_has_role(importance: np.ndarray, scores: Mapping[str, np.ndarray]) -> bool:
    """The head whose knock-out costs most is a previous-token or induction head."""
    role = has_role(scores)
    return role is not None and bool(role.flat[np.argmax(importance)])


def roles_in_top(importance: np.ndarray, scores: Mapping[str, np.ndarray], k: int) -> int:
    """How many of the k heads whose knock-out costs most have a role."""
    role = has_role(scores)
    return 0 if role is None else int(role.flat[np.argsort(-importance.ravel())[:k]].sum())


def roles_cost_more(importance: np.ndarray, scores: Mapping[str, np.ndarray]) -> bool:
    """Heads with a role cost more, on average, when knocked out than heads without one
    (Voita et al. 2019); False when no head, or every head, has a role."""
    role = has_role(scores)
    if role is None or role.all() or not role.any():
        return False
    return bool(importance[role].mean() > importance[~role].mean())


def judge(results, rows, checks: tuple[Check, ...]) -> tuple[CheckResult, ...]:
    """Each check on each finished seed's (importance [L, H], role scores)."""
    def per_seed(variant: str) -> list[tuple]:
        seeds, _, importance = results.get(variant, ((), None, None))
        return [(importance[i], role_scores(rows, variant, s, importance.shape[1:]))
                for i, s in enumerate(seeds)]
    return tuple(judged(c, per_seed(c.variant)) for c in checks)


def _checks_markdown(found: tuple[CheckResult, ...]) -> str:
    if not found:
        return ""
    # A blank line first: a table straight after the figure's line is not a table in Markdown.
    lines = ["", *checks_table("check (stated before the run)", found)]
    return "\n".join(lines) + "\n"


def _write_csv(results, roles, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "layer", "head", "with_all_heads", "without_head",
                         "drop", "role"])
        for variant, (seeds, values, importance) in results.items():
            for i, seed in enumerate(seeds):
                for layer, head in np.ndindex(importance.shape[1:]):
                    k = 1 + layer * importance.shape[2] + head
                    writer.writerow([variant, seed, layer, head, f"{values[i, 0]:.4f}",
                                     f"{values[i, k]:.4f}", f"{importance[i, layer, head]:.4f}",
                                     roles.get((variant, seed, layer, head), "")])


def _markdown(results, roles, metric: str) -> str:
    rows = []
    for variant, (seeds, values, importance) in results.items():
        mean = importance.mean(0)  # [L, H]
        layer, head = np.unravel_index(np.argmax(mean), mean.shape)
        top = importance[:, layer, head]
        cheap = (importance < SMALL).sum(axis=(1, 2))  # per seed
        top_roles = sorted({roles.get((variant, s, int(layer), int(head)), "") for s in seeds})
        second = np.sort(mean.ravel())[-2] if mean.size > 1 else float("nan")
        rows.append((variant, len(seeds), f"{values[:, 0].mean():.3f}",
                     f"L{layer} H{head}", f"{top.mean():.3f} [{top.min():.3f}, {top.max():.3f}]",
                     f"{second:.3f}", f"{cheap.min()}–{cheap.max()} of {mean.size}",
                     ", ".join(filter(None, top_roles)) or "—"))
    table = markdown_table(
        ["variant", "seeds", f"{metric}, all heads", "most important head (mean over seeds)",
         "its drop: mean [min, max]", "next largest drop", f"heads costing < {SMALL}",
         "its role (head_roles)"], rows)
    worse = "fall" if metric == "accuracy" else "rise"
    return "\n".join([
        "### Which heads the model uses (knock-out)", "",
        f"Each head of each finished run knocked out alone (its output × 0 before W_o) and the "
        f"eval split scored again: a head's importance is the {worse} in {metric}. Every head: "
        f"{CSV_FILE}.", "", table, "", f"![head importance]({PLOT_FILE})", ""])


def plot_importance(mean_drop: Mapping[str, np.ndarray], metric: str, path: Path) -> None:
    """One layers × heads heat-map per variant, the mean drop written in each cell; one colour
    scale shared by every panel."""
    plt = file_pyplot()

    top = max(float(np.max(m)) for m in mean_drop.values())
    vmax = top if top > 0 else 1.0
    fig, axes = plt.subplots(1, len(mean_drop), figsize=(2.2 + 1.8 * len(mean_drop), 2.8),
                             squeeze=False)
    image = None
    for ax, (variant, m) in zip(axes[0], mean_drop.items()):
        image = ax.imshow(m, cmap="viridis", vmin=min(0.0, float(np.min(m))), vmax=vmax,
                          aspect="auto")
        for layer, head in np.ndindex(m.shape):
            ax.text(head, layer, f"{m[layer, head]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if m[layer, head] < 0.6 * vmax else "black")
        ax.set_title(variant, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(m.shape[0]))
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8,
                 label=f"{metric} {'fall' if metric == 'accuracy' else 'rise'} without the head")
    fig.suptitle("head importance: the metric's drop when one head is knocked out (mean over "
                 "seeds)", fontsize=9)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)

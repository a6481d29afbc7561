"""What each attention head learned: a study analysis (`Study.analyses`) that names heads by role.

Why: "heads specialize" is a claim about the attention weights, not the loss. For every layer ×
head of each finished run this restores the final parameters and measures, from the weights the
model returns with `probe=True`:

  mean offset        Σ_j w_ij·(i − j), averaged over queries: how far back a head looks
  previous-token     w_{i,i−1}, averaged over queries i ≥ 1 (Olsson et al. 2022; Voita et al.
                     2019's "positional" heads): 1 = always exactly the token before
  prefix matching    on random tokens repeated twice (period P, length 2P), w_{i,i−P+1} averaged
                     over the second half: the weight on the token *after* the current token's
                     earlier occurrence, which identifies an induction head (Olsson et al. 2022)

and the same at initialization (the run's own seed, untrained), the baseline a "spread" is
judged against. A head's role: previous-token when that score ≥ PREVIOUS_TOKEN, induction when
the prefix-matching score ≥ INDUCTION (the larger of the two if both), else other.

Writes into the study dir `head_roles.csv` (every variant, seed, layer, head; trained and at
init) and `head_roles.png` (one grid per variant, seed 0: a cell per head coloured by role,
intensity = its score); returns markdown with a table and each check's pass/fail.
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.studies.checks import Check, CheckResult, Section, judged
from transformer_jax.studies.render.markdown import checks_table, markdown_table
from transformer_jax.train.init import init_params
from transformer_jax.train.run import Run
from transformer_jax.studies.analysis.restore import finished_run_dirs, restore_variant
from transformer_jax.train.figures import file_pyplot

PREVIOUS_TOKEN, INDUCTION = 0.5, 0.3  # role thresholds (Olsson et al. call 0.3+ prefix matching strong)
ROLES = ("previous-token", "induction", "other")
PROBE_SEED = 8_000_003  # the random repeated sequences: np.random.default_rng([PROBE_SEED, P])
NUM_SEQUENCES = 32
CSV_FILE, PLOT_FILE = "head_roles.csv", "head_roles.png"


# ---------------------------------------------------------------- the scores (pure numpy math)

def mean_offset(w: np.ndarray, query_mask: Optional[np.ndarray] = None) -> np.ndarray:
    """w [..., B, H, T, T] -> [..., H]: Σ_j w_ij (i − j), averaged over the (masked) queries."""
    t = w.shape[-1]
    offsets = np.arange(t)[:, None] - np.arange(t)[None, :]  # [T, T]: i − j
    per_query = np.sum(w * offsets, axis=-1)  # [..., B, H, T]
    return _mean_queries(per_query, query_mask)


def previous_token_score(w: np.ndarray, query_mask: Optional[np.ndarray] = None) -> np.ndarray:
    """w [..., B, H, T, T] -> [..., H]: the weight on key i − 1, averaged over queries i ≥ 1."""
    t = w.shape[-1]
    diag = np.diagonal(w, offset=-1, axis1=-2, axis2=-1)  # [..., B, H, T-1]: w[i, i-1], i = 1..
    mask = np.ones(w.shape[-4:-3] + (t,), bool) if query_mask is None else query_mask  # [B, T]
    return _mean_queries(diag, mask[:, 1:])


def prefix_matching_score(w: np.ndarray, period: int) -> np.ndarray:
    """w [..., B, H, 2P, 2P] on tokens repeated with period P -> [..., H]: the weight from each
    query i in the second half on key i − P + 1, the token after its earlier occurrence."""
    i = np.arange(period, 2 * period)
    return w[..., i, i - period + 1].mean(axis=(-3, -1))  # [..., H]


def _mean_queries(per_query: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
    """per_query [..., B, H, Tq], mask [B, Tq] or None -> mean over batch and queries [..., H]."""
    if mask is None:
        return per_query.mean(axis=(-3, -1))
    m = mask[:, None, :].astype(float)  # [B, 1, Tq]
    return np.sum(per_query * m, axis=(-3, -1)) / np.maximum(np.sum(m) * 1.0, 1.0)


def roles(previous: np.ndarray, induction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[..., H] scores -> (role index into ROLES, the role's score) per head."""
    is_prev = (previous >= PREVIOUS_TOKEN) & ((previous >= induction) | (induction < INDUCTION))
    is_ind = (induction >= INDUCTION) & ~is_prev
    role = np.where(is_prev, 0, np.where(is_ind, 1, 2))
    return role, np.where(role == 1, induction, previous)


def repeated_tokens(low: int, high: int, period: int, num: int = NUM_SEQUENCES) -> np.ndarray:
    """[num, 2·period] random token ids in [low, high), each row a sequence repeated twice; no id
    twice within a period when there are enough ids (so "its earlier occurrence" is one place)."""
    rng = np.random.default_rng([PROBE_SEED, period])
    ids = np.arange(low, high)
    if len(ids) >= period:
        half = np.stack([rng.permutation(ids)[:period] for _ in range(num)])
    else:
        half = rng.integers(low, high, size=(num, period))
    return np.concatenate([half, half], axis=1).astype(np.int32)


# ---------------------------------------------------------------- a model's heads

@dataclasses.dataclass(frozen=True)
class HeadScores:
    """Per layer × head ([L, H] each)."""
    offset: np.ndarray
    previous: np.ndarray
    induction: np.ndarray


def attention_weights(graphdef: nnx.GraphDef) -> Callable:
    """params, inputs [B, T], padding_mask [B, T] -> every layer's weights [L, B, H, T, T]."""
    def weights(params, inputs, padding_mask):
        _, found = nnx.merge(graphdef, params)(inputs, padding_mask, probe=True)
        return found.weights.astype(jnp.float32)
    return jax.jit(weights)


def score_heads(weights_fn: Callable, params, batch: Mapping[str, np.ndarray], low: int, high: int,
                period: int) -> HeadScores:
    """The three scores of every head: offsets and previous-token on `batch` (real data),
    prefix matching on repeated random ids in [low, high) of period `period`."""
    w = np.asarray(weights_fn(params, batch["inputs"], batch["padding_mask"]))  # [L, B, H, T, T]
    mask = np.asarray(batch["padding_mask"])
    rep = repeated_tokens(low, high, period)
    w_rep = np.asarray(weights_fn(params, rep, np.ones(rep.shape, bool)))
    return HeadScores(mean_offset(w, mask), previous_token_score(w, mask),
                      prefix_matching_score(w_rep, period))


def _probe_inputs(run: Run) -> tuple[dict, int, int, int]:
    """The run's first eval batch and the range of ordinary token ids and the repeat period."""
    ds = run.dataset
    batch = next(iter(ds.eval_batches(run.train.batch_size, run.model.arch.value)))
    high = getattr(ds, "num_symbols", ds.vocab_size - 1) + 1  # ids 1..: no pad, no SEP
    period = min(batch["inputs"].shape[1], run.model.max_len) // 2
    return batch, 1, high, period


# ---------------------------------------------------------------- the analysis

def make_analysis(checks: tuple[Check, ...] = ()) -> Callable[[Path, dict], Section]:
    """A `Study.analyses` entry: head roles of every finished run, with the study's checks."""
    def head_roles(root: Path, runs: dict) -> Section:
        return analyse(Path(root), runs, checks)
    return head_roles


def analyse(root: Path, runs: dict, checks: tuple[Check, ...] = ()) -> Section:
    results = {}  # variant -> seed -> (trained, init)
    for variant, dirs in finished_run_dirs(root, runs).items():
        restored = restore_variant(dirs)
        weights_fn = attention_weights(restored.graphdef)
        batch, low, high, period = _probe_inputs(restored.run)
        # [R, ...] each, on the host: a seed's slice is then numpy's, not a program per leaf
        stacked = jax.device_get((restored.params, init_params(restored.run.model, restored.seeds)))
        results[variant] = {}
        for i, seed in enumerate(restored.seeds):
            params, init = (jax.tree.map(lambda x: x[i], p) for p in stacked)
            results[variant][seed] = (score_heads(weights_fn, params, batch, low, high, period),
                                      score_heads(weights_fn, init, batch, low, high, period))
    if not results:
        return Section("No finished runs to read head roles from.\n")
    _write_csv(results, root / CSV_FILE)
    plot_grid({v: s[min(s)][0] for v, s in results.items()}, root / PLOT_FILE)
    return Section(_markdown(results, checks), judge(results, checks))


def _write_csv(results, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "weights", "layer", "head", "mean_offset",
                         "previous_token", "prefix_matching", "role"])
        for variant, per_seed in results.items():
            for seed, pair in per_seed.items():
                for name, s in zip(("trained", "init"), pair):
                    role, _ = roles(s.previous, s.induction)
                    for layer, head in np.ndindex(s.offset.shape):
                        writer.writerow([variant, seed, name, layer, head,
                                         f"{s.offset[layer, head]:.3f}",
                                         f"{s.previous[layer, head]:.3f}",
                                         f"{s.induction[layer, head]:.3f}",
                                         ROLES[role[layer, head]]])


def _markdown(results, checks: tuple[Check, ...]) -> str:
    rows = []
    for variant, per_seed in results.items():
        for seed, (s, init) in per_seed.items():
            role, _ = roles(s.previous, s.induction)
            counts = ", ".join(f"{np.sum(role == r)} {name}" for r, name in enumerate(ROLES))
            rows.append((variant, seed, s.offset.size, f"{s.previous.max():.2f}",
                         f"{s.induction.max():.2f}", f"{np.std(s.offset):.2f}",
                         f"{np.std(init.offset):.2f}", counts))
    table = markdown_table(
        ["variant", "seed", "heads", "max previous-token", "max prefix matching",
         "offset spread (std over heads)", "spread at init", "roles"], rows)
    lines = ["### What the heads learned", "",
             f"Every layer × head of each finished run (final parameters) and of the same model "
             f"at initialization: previous-token score (weight on i − 1), prefix-matching score "
             f"(random ids repeated twice; weight on the token after the earlier occurrence) and "
             f"mean attended offset i − j. Roles: previous-token ≥ {PREVIOUS_TOKEN}, induction ≥ "
             f"{INDUCTION}. Every head: {CSV_FILE}.", "", table, ""]
    if checks:
        lines += checks_table("check (thresholds from the study)", judge(results, checks))
        lines.append("")
    lines += [f"![head roles]({PLOT_FILE})", ""]
    return "\n".join(lines)


def judge(results, checks: tuple[Check, ...]) -> tuple[CheckResult, ...]:
    """Each check on each finished seed's (trained, at init) scores."""
    return tuple(judged(c, list(results.get(c.variant, {}).values())) for c in checks)


def plot_grid(scores: Mapping[str, HeadScores], path: Path) -> None:
    """One panel per variant: a layers × heads grid, each cell coloured by role (blue previous-
    token, red induction, grey other), the intensity its score, the mean offset written in it."""
    import matplotlib.patches
    plt = file_pyplot()

    cmaps = [plt.get_cmap(name) for name in ("Blues", "Reds", "Greys")]
    fig, axes = plt.subplots(1, len(scores), figsize=(2.2 + 1.6 * len(scores), 2.6), squeeze=False)
    for ax, (variant, s) in zip(axes[0], scores.items()):
        role, value = roles(s.previous, s.induction)
        rgba = np.zeros(role.shape + (4,))
        for r, cmap in enumerate(cmaps):
            shade = cmap(0.25 + 0.75 * np.clip(value, 0, 1)) if r < 2 else cmap(0.15 + 0.0 * value)
            rgba = np.where((role == r)[..., None], shade, rgba)
        ax.imshow(rgba, aspect="auto")
        for layer, head in np.ndindex(role.shape):
            ax.text(head, layer, f"{s.offset[layer, head]:.1f}", ha="center", va="center",
                    fontsize=7)
        ax.set_title(variant, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(role.shape[1]))
        ax.set_yticks(range(role.shape[0]))
    handles = [matplotlib.patches.Patch(color=cmaps[r](0.8 if r < 2 else 0.3), label=name)
               for r, name in enumerate(ROLES)]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("head roles (colour: role, shade: its score; number: mean offset i − j)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 0.92))
    fig.savefig(path, dpi=90)
    plt.close(fig)

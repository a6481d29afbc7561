"""Accuracy against sequence length: a study analysis (`Study.analyses`) for length
generalization.

Why a separate evaluation: the trainer's eval pools every unseen length into one number, which
hides *where* a scheme breaks (just past the training length, or only far beyond it). After all
runs ended, this restores each finished run's final parameters and scores them on fresh
examples of every length from `data.min_len` to `data.eval_seq_len`, one batch per length.

Cost: one compiled eval per variant (every length is padded to the same width, the longest
eval sequence; a causal decoder never looks at the right padding, and an encoder masks it), the
seeds of a variant in one call (`steps.make_eval_step(replicas=True)`).

Writes into the study dir: `accuracy_by_length.csv` (variant, seed, length, token and
whole-sequence accuracy) and `curves_by_length.png` (mean over seeds, shaded min to max, the
lengths past the longest training one shaded grey); returns a markdown table.
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Mapping

import jax
import ml_collections
import numpy as np

from transformer_jax.data import synthetic
from transformer_jax.studies.render import plots
from transformer_jax.studies.analysis.restore import Restored, finished_run_dirs, restore_variant
from transformer_jax.train.run import Run
from transformer_jax.train import steps
from transformer_jax.train.figures import file_pyplot

EVAL_SEED = 7_000_001  # examples per length: np.random.default_rng([EVAL_SEED, length])
NUM_PER_LENGTH = 64  # per length: 64 x L tokens; the range means pool 8-16 lengths
CSV_FILE, PLOT_FILE = "accuracy_by_length.csv", "curves_by_length.png"


def eval_lengths(data: ml_collections.ConfigDict) -> range:
    """data.min_len .. data.eval_seq_len (0: data.seq_len), every length scored."""
    return range(data.min_len, (data.eval_seq_len or data.seq_len) + 1)


def length_batch(run: Run, length: int, num: int = NUM_PER_LENGTH) -> dict:
    """`num` fresh examples of exactly `length`, formatted like the run's eval batches (same
    width, same format), through the dataset's own eval pipeline."""
    ds = run.dataset
    examples = synthetic.sample_examples(ds.task, ds.num_symbols, num, length, length,
                                         np.random.default_rng([EVAL_SEED, length]))
    only = dataclasses.replace(ds, eval=examples)
    return next(iter(only.eval_batches(num, run.model.arch.value)))


def evaluate_by_length(restored: Restored, num: int = NUM_PER_LENGTH
                       ) -> dict[int, dict[str, np.ndarray]]:
    """length -> {'accuracy': [seeds], 'seq_accuracy': [seeds]}."""
    eval_step = steps.make_eval_step(restored.graphdef, restored.run.model, replicas=True)
    out = {}
    for length in eval_lengths(restored.data):
        sums = jax.device_get(eval_step(restored.params, length_batch(restored.run, length, num)))
        per_seed = [steps.means_of_sums({k: float(v[i]) for k, v in sums.items()})
                    for i in range(len(restored.seeds))]
        out[length] = {k: np.array([m[k] for m in per_seed]) for k in ("accuracy", "seq_accuracy")}
    return out


def accuracy_by_length(root: Path, runs: Mapping[tuple[str, int], dict]) -> str:
    """The analysis: every finished run of the study in `root`, scored per length; writes the
    csv and the plot into root and returns markdown (token accuracy by length range)."""
    root = Path(root)
    results, train_len = {}, None
    for variant, dirs in finished_run_dirs(root, runs).items():
        restored = restore_variant(dirs)
        train_len = restored.data.seq_len  # the longest training length
        results[variant] = (restored.seeds, evaluate_by_length(restored))
    if not results:
        return "No finished runs to evaluate by length.\n"
    _write_csv(results, root / CSV_FILE)
    _plot(results, train_len, root / PLOT_FILE)
    return _markdown(results, train_len, len(runs))


def _write_csv(results, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "length", "accuracy", "seq_accuracy"])
        for variant, (seeds, by_length) in results.items():
            for length, m in by_length.items():
                for i, seed in enumerate(seeds):
                    writer.writerow([variant, seed, length, f"{m['accuracy'][i]:.4f}",
                                     f"{m['seq_accuracy'][i]:.4f}"])


def read_csv(path: Path) -> dict[str, tuple[tuple[int, ...], dict[int, dict[str, np.ndarray]]]]:
    """The results `_write_csv` wrote, read back (variant -> (seeds, length -> key ->
    per-seed values)), so that the figure can be drawn again from committed results."""
    rows: dict[str, dict[int, dict[int, dict[str, float]]]] = {}
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            rows.setdefault(row["variant"], {}).setdefault(int(row["length"]), {})[
                int(row["seed"])] = {k: float(row[k]) for k in ("accuracy", "seq_accuracy")}
    results = {}
    for variant, by_length in rows.items():
        seeds = tuple(sorted(next(iter(by_length.values()))))
        results[variant] = (seeds, {length: {k: np.array([per_seed[s][k] for s in seeds])
                                             for k in ("accuracy", "seq_accuracy")}
                                    for length, per_seed in sorted(by_length.items())})
    return results


def _ranges(lengths, train_len: int) -> list[tuple[str, list[int]]]:
    """Length ranges of the table: training lengths, then N+1..2N, then 2N+1..4N (or what the
    eval lengths cover of them)."""
    n = train_len
    spans = [(f"≤ {n} (train)", lambda l: l <= n), (f"{n + 1}–{2 * n}", lambda l: n < l <= 2 * n),
             (f"{2 * n + 1}–{max(lengths)}", lambda l: l > 2 * n)]
    return [(name, [l for l in lengths if keep(l)]) for name, keep in spans
            if any(keep(l) for l in lengths)]


def _markdown(results, train_len: int, num_runs: int) -> str:
    first = next(iter(results.values()))[1]
    ranges = _ranges(list(first), train_len)
    header = ["variant", "seeds"] + [f"acc {name}" for name, _ in ranges] + \
             [f"seq acc {name}" for name, _ in ranges]
    lines = ["### Accuracy by test length", "",
             f"Final parameters of each finished run, {NUM_PER_LENGTH} fresh examples per length; "
             f"token accuracy, then whole-sequence accuracy, averaged over the lengths of each "
             f"range: mean over seeds [min, max]. Trained on lengths ≤ {train_len}. Per length "
             f"and seed: {CSV_FILE}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant, (seeds, by_length) in results.items():
        cells = [variant, str(len(seeds))]
        for key in ("accuracy", "seq_accuracy"):
            for _, lengths in ranges:
                per_seed = np.mean([by_length[l][key] for l in lengths], axis=0)  # [seeds]
                cells.append(f"{per_seed.mean():.3f} [{per_seed.min():.2f}, {per_seed.max():.2f}]")
        lines.append("| " + " | ".join(cells) + " |")
    finished = sum(len(s) for s, _ in results.values())
    if finished < num_runs:
        lines += ["", f"{num_runs - finished} of {num_runs} runs did not finish and are left out."]
    lines += ["", f"![accuracy by length]({PLOT_FILE})", ""]
    return "\n".join(lines)


def length_figure(results, train_len: int):
    """Token and whole-sequence accuracy against test length, one panel each: per variant the
    mean over seeds, shaded over its 95 % t-interval (`plots.seed_band`), in the study
    figure's styles; the lengths past the longest training one shaded grey."""
    import matplotlib.lines
    plt = file_pyplot()

    styles = plots.variant_styles({v: {} for v in results})
    keys = ("accuracy", "seq_accuracy")
    fig, axes = plt.subplots(1, len(keys), figsize=(5.0 * len(keys), 3.6), squeeze=False)
    longest = max(max(by_length) for _, by_length in results.values())
    for ax, key in zip(axes[0], keys):
        for variant, (_, by_length) in results.items():
            lengths = sorted(by_length)
            values = np.array([by_length[l][key] for l in lengths])  # [lengths, seeds]
            mean, low, high = plots.seed_band(values.T, f"eval/{key}")
            ax.plot(lengths, mean, markevery=max(1, len(lengths) // 8), **styles[variant])
            ax.fill_between(lengths, low, high, color=styles[variant]["color"], alpha=0.15,
                            linewidth=0)
        ax.axvspan(train_len + 0.5, longest + 0.5, color="grey", alpha=0.12, linewidth=0)
        ax.set_title(f"{key} by test length: trained on ≤ {train_len}, unseen "
                     f"{train_len + 1}–{longest} (shaded)", fontsize=9)
        ax.set_xlabel("sequence length")
        ax.set_ylabel(plots.y_label(f"eval/{key}"))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    handles = [matplotlib.lines.Line2D([], [], **styles[v]) for v in results]
    fig.legend(handles, list(results), loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(results), 5), frameon=False,
               title=f"variant (line: mean over seeds; {plots.BAND_WORDS})")
    fig.tight_layout()
    return fig


def _plot(results, train_len: int, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = length_figure(results, train_len)
    fig.savefig(path, dpi=plots.DPI, bbox_inches="tight")
    plt.close(fig)

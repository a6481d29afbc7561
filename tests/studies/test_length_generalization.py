"""The length-generalization study: its distinct-symbol tasks, its per-length evaluation of a
tiny finished study, and the study itself at every size."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.studies.analysis import length as length_eval
from transformer_jax.studies.run import sweep
from transformer_jax.data import DataError, synthetic
from transformer_jax.studies.study import Study, load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments/length_generalization.py"


# conftest's session fixture: JAX's persistent compilation cache, as main enables it
pytestmark = pytest.mark.usefixtures("compilation_cache")


def test_sort_distinct_never_repeats_a_symbol_and_sorts():
    ex = synthetic.sample_examples("sort_distinct", 20, 500, 3, 20, np.random.default_rng(0))
    assert ex.lengths.min() == 3 and ex.lengths.max() == 20
    for x, y, n in zip(ex.x, ex.y, ex.lengths):
        assert len(set(x[:n])) == n and x[:n].min() >= 1 and x[:n].max() <= 20
        assert not x[n:].any() and not y[n:].any()
        np.testing.assert_array_equal(y[:n], np.sort(x[:n]))


def test_adding_tasks_left_the_existing_tasks_data_alone():
    """The old tasks draw exactly what they drew before (symbols, then nothing else)."""
    for task in ("copy", "sort", "reverse"):
        ex = synthetic.sample_examples(task, 16, 50, 1, 8, np.random.default_rng(3))
        rng = np.random.default_rng(3)
        lengths = rng.integers(1, 9, size=50)
        symbols = rng.integers(1, 17, size=(50, 8))
        np.testing.assert_array_equal(ex.lengths, lengths)
        np.testing.assert_array_equal(ex.x, np.where(np.arange(8) < lengths[:, None], symbols, 0))


def test_a_vocabulary_smaller_than_the_longest_set_is_refused():
    with pytest.raises(DataError, match="too small for data.task='sort_distinct'.*>= 32"):
        synthetic.check_task("sort_distinct", 16, 1, 9, "decoder", max_len=32)


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_study_loads_and_evaluates_unseen_lengths_up_to_4n(size):
    study = load_study(EXPERIMENT, size)
    data, model = study.base.data, study.base.model
    n = data.seq_len
    assert (data.eval_min_len, data.eval_seq_len) == (n + 1, 4 * n)
    assert data.vocab_size >= 4 * n and model.max_len >= 8 * n  # sets; [x, SEP, y] width
    assert set(study.variants) == {"none", "sinusoidal", "learned", "rotary", "alibi"}
    assert study.analyses == (length_eval.accuracy_by_length,)
    synthetic.check_task(data.task, data.vocab_size, data.min_len, data.eval_min_len, "decoder",
                         max_len=data.eval_seq_len)


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_accuracy_by_length_on_a_tiny_finished_study(tmp_path):
    full = load_study(EXPERIMENT, "tiny")
    base = full.base.copy_and_resolve_references()
    base.unlock()
    base.data.data_dir = str(tmp_path / "data")
    base.train.update(num_steps=4, log_every=2, eval_every=4, checkpoint_every=4, eval_batches=1)
    study = Study(name="tiny_lengths", claim="c", published="p", base=base,
                  variants={"alibi": {"model.position": "alibi"}}, seeds=(0, 1),
                  metrics=("eval/accuracy",), expectations=(), analyses=full.analyses)
    root = tmp_path / "study"
    assert sweep.run_study(study, str(root))

    n = base.data.seq_len
    lengths = list(range(1, 4 * n + 1))
    with (root / length_eval.CSV_FILE).open() as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["length"]), int(r["seed"])) for r in rows] == [(l, s) for l in lengths
                                                                  for s in (0, 1)]
    assert all(0.0 <= float(r[k]) <= 1.0 for r in rows for k in ("accuracy", "seq_accuracy"))
    assert (root / length_eval.PLOT_FILE).stat().st_size > 0
    verdict = (root / "verdict.md").read_text()
    assert "### Accuracy by test length" in verdict
    assert f"acc ≤ {n} (train) | acc {n + 1}–{2 * n} | acc {2 * n + 1}–{4 * n}" in verdict
    assert next(l for l in verdict.splitlines() if l.startswith("| alibi | 2 |"))

    # Every number again, computed apart from length_eval: each seed's checkpoint restored on
    # its own, its logits on each length's batch, token and sequence accuracy in numpy.
    independent = accuracy_by_hand(root / "alibi", (0, 1), lengths)
    for r in rows:
        for key in ("accuracy", "seq_accuracy"):
            assert float(r[key]) == pytest.approx(independent[int(r["length"]), int(r["seed"])][key],
                                                  abs=1e-4), r
    restored = length_eval.restore_variant({s: root / "alibi" / f"seed_{s}" for s in (0, 1)})
    by_length = length_eval.evaluate_by_length(restored)
    assert list(by_length) == lengths
    for length in lengths:
        for i, seed in enumerate((0, 1)):
            for key in ("accuracy", "seq_accuracy"):
                assert by_length[length][key][i] == pytest.approx(
                    independent[length, seed][key], abs=1e-6), (length, seed, key)
    assert len({round(v["accuracy"], 6) for v in independent.values()}) > 1  # not all alike


def accuracy_by_hand(variant_dir: Path, seeds, lengths) -> dict[tuple[int, int], dict]:
    """(length, seed) -> token and whole-sequence accuracy of the seed's final checkpoint on
    length_eval's examples of that length (the examples are the function's; the rest is not)."""
    import json

    import jax
    import ml_collections
    from flax import nnx

    from helpers_train import restore_newest
    from transformer_jax import train
    from transformer_jax.model.transformer import Transformer

    out, logits_of = {}, None
    for seed in seeds:
        run_dir = variant_dir / f"seed_{seed}"
        config = ml_collections.ConfigDict(json.loads((run_dir / "config.json").read_text()))
        run = train.build_run(config)
        step, state = restore_newest(run_dir, config)
        assert step == config.train.num_steps
        if logits_of is None:  # one model config for every seed
            graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(run.model,
                                                                       rngs=nnx.Rngs(0))))
            logits_of = jax.jit(lambda params, b: nnx.merge(graphdef, params)(
                b["inputs"], b["padding_mask"])[0])
        for length in lengths:
            batch = length_eval.length_batch(run, length)
            right = np.asarray(logits_of(state["params"], batch)).argmax(-1) == batch["targets"]
            weights = np.asarray(batch["weights"], np.float64)
            rows = weights.sum(-1) > 0
            assert rows.sum() == length_eval.NUM_PER_LENGTH
            out[length, seed] = {
                "accuracy": float((right * weights).sum() / weights.sum()),
                "seq_accuracy": float(np.mean([right[b][weights[b] > 0].all()
                                               for b in np.flatnonzero(rows)]))}
    return out

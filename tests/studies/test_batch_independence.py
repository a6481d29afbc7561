"""The batch-independence analysis (studies/analysis/batch_independence.py) on a tiny trained
LayerNorm and BatchNorm model: LayerNorm's and evaluation-mode BatchNorm's predictions do not move
with the batch or the padding; training-mode BatchNorm's do, and the analysis says so."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from transformer_jax.studies import report
from transformer_jax.studies.analysis import batch_independence as bi
from transformer_jax.studies.run import sweep
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_batchnorm(tmp_path_factory):
    study = load_study(REPO / "experiments" / "batchnorm.py", "tiny")
    study.base.unlock()
    root = tmp_path_factory.mktemp("bn")
    study.base.data.data_dir = str(root / "data")
    variants = {v: o for v, o in study.variants.items() if v.endswith("_batch8")}
    study = dataclasses.replace(study, seeds=(0,), variants=variants, expectations=(),
                                analyses=())  # the analysis is called below
    assert sweep.run_study(study, str(root / "study"))
    return study, root / "study"


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_scores_per_mode_and_the_checks(tiny_batchnorm):
    study, root = tiny_batchnorm
    found = bi.measure(root, report.collect(study, root), examples=16)
    ln, bn = found["layernorm_batch8"], found["batchnorm_batch8"]
    assert set(ln) == {bi.Mode.EVAL} and set(bn) == {bi.Mode.EVAL, bi.Mode.TRAINING}
    for comparisons in (ln[bi.Mode.EVAL], bn[bi.Mode.EVAL]):
        assert [c.way for c in comparisons] == ["one batch of 16", "batches of 8", "batches of 1",
                                                "+8 padding"]
        assert comparisons[0].max_logit_diff == 0.0  # the reference against itself
        assert all(c.changed == 0.0 and c.max_logit_diff < 1e-4 for c in comparisons)
        assert len({c.accuracy for c in comparisons}) == 1
    training = bn[bi.Mode.TRAINING]
    assert training[2].max_logit_diff > 1e-3  # one example at a time: its own batch statistics
    assert bi.identical(training[:1]) and not bi.identical(training)

    checks = (bi.Check("training-mode BatchNorm moves", ("batchnorm_batch8", "nope"),
                       lambda f: f[bi.Mode.TRAINING][2].max_logit_diff > 1e-3),)
    text = bi.markdown(found, checks)
    assert text.count("| layernorm_batch8 | evaluation |") == 4
    assert text.count("| batchnorm_batch8 | training |") == 4
    assert "| training-mode BatchNorm moves | batchnorm_batch8 | holds |" in text
    assert "| training-mode BatchNorm moves | nope | not run |" in text

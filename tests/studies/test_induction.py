"""The induction study (experiments/induction.py): its design, the count oracle its threshold
cites, and every analysis on a tiny finished study."""
from pathlib import Path

import numpy as np
import pytest
from tiny_study import tiny_experiment

from transformer_jax.data import synthetic
from transformer_jax.studies.analysis import head_importance, head_roles
from transformer_jax.studies.run import sweep
from transformer_jax.studies.study import load_module, load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments/induction.py"


# conftest's session fixture: JAX's persistent compilation cache, as main enables it
pytestmark = pytest.mark.usefixtures("compilation_cache")


@pytest.mark.parametrize("size", ["tiny", "default", "large"])
def test_the_variants_differ_in_depth_only(size):
    study = load_study(EXPERIMENT, size)
    one, two = (study.config(v, 0) for v in ("L1", "L2"))
    assert (one.model.num_layers, two.model.num_layers) == (1, 2)
    one.model.num_layers = 2
    assert one.to_dict() == two.to_dict()
    assert two.model.arch == "decoder" and two.data.task == "repeat" and study.suite == "induction"


def test_the_count_oracle_is_what_the_threshold_cites():
    """'counting the context allows 0.20': on the default size's own eval split."""
    induction, study = load_module(EXPERIMENT), load_study(EXPERIMENT, "default")
    data = study.base.data
    ex = synthetic.sample_examples("repeat", data.vocab_size, data.num_eval, data.min_len,
                                   data.seq_len, np.random.default_rng([synthetic.GEN_SEED, 1]))
    assert abs(induction.count_oracle(ex.x, ex.lengths) - 0.20) < 0.01
    assert induction.count_oracle(ex.x, ex.lengths) < induction.ONE_LAYER_AT_MOST


def test_the_count_oracle_on_a_hand_example():
    induction = load_module(EXPERIMENT)
    # a b c, then a b c: at "a" (seen twice) the least-seen are b, c -> 1/2; at "b": c alone -> 1
    assert induction.count_oracle(np.array([[1, 2, 3]]), np.array([3])) == pytest.approx(0.75)


def test_the_checks_read_the_right_heads():
    induction = load_module(EXPERIMENT)
    importance = np.array([[0.1, 0.2], [0.9, 0.3]])
    assert induction.is_best_prefix_matcher(importance, {"prefix_matching": np.array(
        [[0.9, 0.0], [0.5, 0.1]])})
    assert not induction.is_best_prefix_matcher(importance, {"prefix_matching": np.array(
        [[0.0, 0.0], [0.1, 0.5]])})
    assert induction.top_ratio(importance) == pytest.approx(3.0)


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_every_analysis_on_a_tiny_finished_study(tmp_path):
    study = tiny_experiment(EXPERIMENT, tmp_path / "data")
    root = tmp_path / "induction"
    assert sweep.run_study(study, str(root))
    verdict = (root / "verdict.md").read_text()
    for section in ("### What the heads learned", "### Which heads the model uses (knock-out)",
                    "### Groups of heads knocked out together",
                    "### When the induction head forms", "### The two heads on one sequence"):
        assert section in verdict
    # the group knock-outs are per-seed values in summary.csv, which the verdicts judge
    summary = (root / "summary.csv").read_text().splitlines()
    for name in ("prefix_matchers", "previous_token"):
        assert f"knockout/{name}/random_share" in summary[0]
        assert f"without {'layer 1' if name == 'prefix_matchers' else 'layer 0'}" in verdict
    assert "L2: the most important head is layer 1's best prefix matcher" in verdict
    for name in (head_roles.PLOT_FILE, head_importance.PLOT_FILE, "induction_heads.png"):
        assert (root / name).stat().st_size > 0

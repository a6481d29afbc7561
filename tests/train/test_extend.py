"""Training a run longer, explicitly (`--extend_to=N`, train.train_and_evaluate(extend_to=N)):
the finished tiny run goes on from its last checkpoint to N steps, its cosine schedule recomputed
for N (recorded in config_history.json, logged, a TensorBoard text at that step); any other
config change, and a plain num_steps change, are still refused with nothing written."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers_train import SYNTHETIC, main_args, run_main, tiny_config, tree_hashes

OVERRIDES = {"train.log_every": 1}


@pytest.fixture(scope="module")
def extended(tmp_path_factory, tj_data_dir):
    """A tiny run trained to its 20 steps, then extended to 30 in process."""
    from transformer_jax import train

    workdir = tmp_path_factory.mktemp("extend") / "run"
    config = tiny_config(SYNTHETIC, overrides={"data.data_dir": tj_data_dir, **OVERRIDES})
    first = train.train_and_evaluate(config, str(workdir))
    second = train.train_and_evaluate(config, str(workdir), extend_to=30)
    return config, workdir, first, second


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_extend_continues_a_finished_run(extended):
    from transformer_jax.train import summaries
    from transformer_jax.train import workdir as workdir_lib
    from helpers_train import checkpoint_steps

    config, workdir, first, second = extended
    assert (first["state"], first["step"]) == ("finished", 20)
    assert (second["state"], second["step"]) == ("finished", 30)
    assert json.loads((workdir / "config.json").read_text())["train"]["num_steps"] == 30
    curves = summaries.read_scalars(str(workdir))
    assert [s for s, _ in curves["train/loss"]] == list(range(1, 31))  # each step once
    assert 30 in checkpoint_steps(workdir)
    history = workdir_lib.config_history(workdir)
    assert len(history) == 1 and history[0]["step"] == 20
    assert history[0]["change"] == {"train.num_steps": [20, 30]}


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_extend_recomputes_the_schedule_and_says_where(extended):
    """The LR before step 20 is the 20-step schedule's, from there on the 30-step one's."""
    import optax

    from transformer_jax.train import summaries

    config, workdir, _, _ = extended
    lr = dict(summaries.read_scalars(str(workdir))["train/learning_rate"])
    t = config.train
    schedule = lambda total: optax.warmup_cosine_decay_schedule(
        t.learning_rate / (t.warmup_steps + 1), t.learning_rate, t.warmup_steps, total,
        t.learning_rate * t.end_learning_rate_factor)
    # the logged LR of step s is the schedule at s - 1 (the optimizer's count before the step)
    np.testing.assert_allclose([lr[s] for s in (10, 20)], [schedule(20)(s - 1) for s in (10, 20)],
                               rtol=1e-5)
    np.testing.assert_allclose([lr[s] for s in (21, 30)], [schedule(30)(s - 1) for s in (21, 30)],
                               rtol=1e-5)
    assert lr[21] > lr[20]  # the longer schedule's LR at step 20 is higher: a visible jump
    from tensorboard.backend.event_processing import event_accumulator as ea

    events = ea.EventAccumulator(str(workdir), size_guidance={ea.TENSORS: 0})
    events.Reload()
    tags = [t for t in events.Tags()["tensors"] if t.startswith("config_change")]
    assert len(tags) == 1, events.Tags()["tensors"]
    (marker,) = events.Tensors(tags[0])
    assert marker.step == 20
    assert b"train.num_steps" in marker.tensor_proto.string_val[0]


@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_other_changes_are_still_refused(extended, tmp_path):
    from transformer_jax import train
    from transformer_jax.train.workdir import WorkdirError

    config, workdir, _, _ = extended
    before = tree_hashes(workdir)
    changed = tiny_config(SYNTHETIC, overrides={"data.data_dir": config.data.data_dir,
                                                "train.learning_rate": 0.5, **OVERRIDES})
    with pytest.raises(WorkdirError, match="train.learning_rate"):
        train.train_and_evaluate(changed, str(workdir), extend_to=40)
    longer = tiny_config(SYNTHETIC, overrides={"data.data_dir": config.data.data_dir,
                                               "train.num_steps": 40, **OVERRIDES})
    with pytest.raises(WorkdirError, match="train.num_steps: 30 -> 40") as refused:
        train.train_and_evaluate(longer, str(workdir))  # without --extend_to: it names the flag
    assert "to resume it (--extend_to=40 in place of train.num_steps=40 trains it on to 40 " \
           "steps), or choose a new --workdir" in str(refused.value)
    with pytest.raises(WorkdirError) as refused:  # learning rate changed: no flag to name
        train.train_and_evaluate(changed, str(workdir))
    assert "extend_to" not in str(refused.value)
    with pytest.raises(WorkdirError, match="--extend_to=25 must exceed the run's train.num_steps=30"):
        train.train_and_evaluate(config, str(workdir), extend_to=25)
    with pytest.raises(WorkdirError, match="holds none"):
        train.train_and_evaluate(config, str(tmp_path / "new"), extend_to=40)
    assert tree_hashes(workdir) == before


def test_main_extend_flag(extended, tmp_path):
    """The flag through main: refused changes exit 2 with one line; the same --extend_to again
    (e.g. after a preemption) is no change and reports the finished run."""
    config, workdir, _, _ = extended
    args = main_args(f"{SYNTHETIC}:tiny", workdir, config.data.data_dir, OVERRIDES)
    again = run_main(args + ["--extend_to=30"])
    assert again.returncode == 0 and "finished at step 30" in again.stdout, again.stderr[-2000:]
    refused = run_main(args + ["--config.train.batch_size=4", "--extend_to=40"])
    assert refused.returncode == 2 and "train.batch_size: 8 -> 4" in refused.stderr


@pytest.mark.usefixtures("compilation_cache")  # three trainings of one program: compiled once
@pytest.mark.slow  # trains in-process for seconds (tests/fast_lane.py)
def test_a_constant_schedule_extended_is_the_run_trained_straight(tmp_path, tj_data_dir):
    """train.schedule="constant" (what a plateau budget extends): trained to 6 steps and
    extended to 12, a run ends with the params, optimizer state and final evaluation of the run
    trained straight to 12, and its train curve is the same at every step. (A cosine run
    extended is not that run: the test above.)"""
    from transformer_jax import train
    from transformer_jax.train import summaries
    from helpers_train import restore_newest

    overrides = {"data.data_dir": tj_data_dir, "train.schedule": "constant", "train.log_every": 1,
                 "train.warmup_steps": 2, "train.eval_every": 3, "train.num_steps": 6}
    config = tiny_config(SYNTHETIC, overrides=overrides)
    straight = tiny_config(SYNTHETIC, overrides={**overrides, "train.num_steps": 12})
    train.train_and_evaluate(config, str(tmp_path / "extended"))
    ends = [train.train_and_evaluate(config, str(tmp_path / "extended"), extend_to=12),
            train.train_and_evaluate(straight, str(tmp_path / "straight"))]
    assert [e["step"] for e in ends] == [12, 12]
    np.testing.assert_allclose(ends[0]["eval"]["loss"], ends[1]["eval"]["loss"], rtol=1e-6)
    states = [restore_newest(tmp_path / w, straight) for w in ("extended", "straight")]
    assert states[0][0] == states[1][0] == 12
    import jax
    for a, b in zip(jax.tree.leaves(states[0][1]), jax.tree.leaves(states[1][1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    curves = [summaries.read_scalars(str(tmp_path / w)) for w in ("extended", "straight")]
    for tag in ("train/loss", "train/learning_rate"):
        np.testing.assert_allclose([v for _, v in curves[0][tag]], [v for _, v in curves[1][tag]],
                                   rtol=1e-6)
    after_warmup = [v for s, v in curves[1]["train/learning_rate"] if s > 2]
    assert after_warmup == pytest.approx([config.train.learning_rate] * 10)


def test_only_the_cosine_schedule_depends_on_the_total():
    """The schedule of a run of B steps against one of 2B, step by step: "constant" is the same
    function of the step (so extending changes nothing), "cosine" is not."""
    from transformer_jax.config import TrainConfig
    from transformer_jax.train.steps import learning_rate_schedule

    def rates(schedule: str, total: int) -> list[float]:
        train = TrainConfig(num_steps=total, warmup_steps=3, schedule=schedule)
        return [float(learning_rate_schedule(train)(t)) for t in range(20)]

    assert rates("constant", 10) == rates("constant", 20)
    assert rates("constant", 10)[:4] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert rates("cosine", 10)[:4] == rates("cosine", 20)[:4]  # the same warm-up
    assert rates("cosine", 10)[9] < rates("cosine", 20)[9]
    from transformer_jax.config import ConfigError
    with pytest.raises(ConfigError, match="train.schedule='linear'; valid: cosine, constant"):
        TrainConfig(schedule="linear")

"""TensorBoard writing, checked by reading back through TensorBoard's own EventAccumulator."""

import json
import os

import numpy as np
import pytest

from transformer_jax.train import summaries


@pytest.fixture(autouse=True)
def _matplotlib_config(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))


def test_scalars_round_trip_exact_steps_and_values(tmp_path):
    logdir = str(tmp_path)
    # simple_value is float32 on disk: use values float32 represents exactly.
    expected = {
        "train/loss": [(0, 4.0), (10, 2.5), (20, 1.25)],
        "eval/bits_per_char": [(0, 3.5), (20, 1.75)],
        "layers/grad_norm/layer_03": [(10, 0.125)],
    }
    with summaries.SummaryWriter(logdir) as writer:
        writer.scalars(0, {"train/loss": 4.0, "eval/bits_per_char": np.float32(3.5)})
        writer.scalars(10, {"train/loss": 2.5, "layers/grad_norm/layer_03": np.asarray(0.125)})
        writer.scalars(np.int64(20), {"train/loss": 1.25, "eval/bits_per_char": 1.75})
    assert summaries.read_scalars(logdir) == expected
    assert sorted(summaries.read_tags(logdir)["scalars"]) == sorted(expected)


def test_images_and_text_tags(tmp_path):
    logdir = str(tmp_path)
    rgb_float = np.random.default_rng(0).random((8, 12, 3)).astype(np.float32)
    gray_uint8 = np.arange(64, dtype=np.uint8).reshape(8, 8)
    with summaries.SummaryWriter(logdir) as writer:
        writer.images(5, {"attention/layer_00": rgb_float, "attention/gray": gray_uint8})
        writer.text(5, "samples", "to be, or **not**")
    tags = summaries.read_tags(logdir)
    assert sorted(tags["images"]) == ["attention/gray", "attention/layer_00"]
    assert any(tag.startswith("samples") for tag in tags["tensors"])
    assert summaries.read_scalars(logdir) == {}  # text/hparams tensors are not scalars


def test_hparams_land_in_the_run_itself(tmp_path):
    logdir = str(tmp_path)
    config = {"model.num_layers": 4, "optimizer.lr": 0.001, "data.name": "tiny_shakespeare",
              "model.use_bias": False, "model.dropout": None, "model.shape": (2, 3)}
    with summaries.SummaryWriter(logdir) as writer:
        writer.hparams(config, ["eval/bits_per_char", "train/loss"])
        writer.scalars(1, {"eval/bits_per_char": 2.0})
    # No extra sub-run directory (tensorboardX's add_hparams would create one).
    assert all(os.path.isfile(os.path.join(logdir, name)) for name in os.listdir(logdir))
    tensor_tags = summaries.read_tags(logdir)["tensors"]
    assert "_hparams_/session_start_info" in tensor_tags
    assert "_hparams_/experiment" in tensor_tags
    values, metrics = summaries.read_hparams(logdir)
    assert values == {"model.num_layers": 4.0, "optimizer.lr": 0.001,
                      "data.name": "tiny_shakespeare", "model.use_bias": False,
                      "model.dropout": "None", "model.shape": "(2, 3)"}
    assert metrics == ["eval/bits_per_char", "train/loss"]


def test_a_study_run_is_a_trial_named_by_its_run(tmp_path):
    """In the sweep's layout (<study root>/<variant>/seed_<n>, the root's config.json naming the
    study) the HParams trial is named 'study/variant/seed_n' and study and variant are hparams
    that TensorBoard puts first (marked as differing); elsewhere the trial is the directory."""
    from tensorboard.plugins.hparams import backend_context, metadata

    (tmp_path / "config.json").write_text('{"study": "norms", "runs": [["pre", 1]]}')
    run = tmp_path / "pre" / "seed_1"
    run.mkdir(parents=True)
    assert summaries.run_identity(str(run)) == ("norms/pre/seed_1", {
        "study": "norms", "variant": "pre", "seed": "1"})
    assert summaries.run_identity(str(tmp_path / "pre")) == ("pre", {})
    # the sweep's view file names the swept fields: they are marked as differing too
    (tmp_path / summaries.STUDY_VIEW_FILE).write_text('{"swept": ["model.norm"]}')
    with summaries.SummaryWriter(str(run)) as writer:
        writer.hparams({"seed": 1, "model.norm": "pre", "data.task": "sort"}, ["eval/loss"])
        writer.images(3, {"attention_map/layer_00": np.zeros((4, 4))})
    values, _ = summaries.read_hparams(str(run))
    # the seed as a string: the plugin shows a number as 1.0000
    assert values["study"] == "norms" and values["variant"] == "pre" and values["seed"] == "1"
    # an image card names its variant and seed: TensorBoard shows the tag, cuts the run's name
    assert summaries.read_tags(str(run))["images"] == ["attention_map/pre/seed_1/layer_00"]
    content = summaries._accumulator(str(run)).PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    assert start.group_name == "norms/pre/seed_1"
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    assert {h.display_name for h in experiment.hparam_infos if h.differs} == {
        "variant", "seed", "model.norm"}
    # the columns in TensorBoard's own order (differing first, then by name; the first five
    # shown): variant first, though 'model.norm' < 'seed' < 'variant'; the study (the start of
    # the trial's name) first of the columns not shown, before data.task
    backend_context._sort_and_reduce_to_hparams_limit(experiment)
    assert [h.display_name for h in experiment.hparam_infos] == [
        "variant", "seed", "model.norm", "study", "data.task"]
    assert [h.name for h in experiment.hparam_infos][:4] == [
        "0:variant", "1:seed", "model.norm", "2:study"]


def test_hparams_show_three_swept_fields_and_not_the_study(tmp_path):
    """TensorBoard checks the first five HParams columns (the frontend's own count): a study
    sweeping three fields (positions: data.task, model.arch, model.position) shows all three
    after variant and seed; the study, which begins every trial's name, is left unchecked."""
    from tensorboard.plugins.hparams import backend_context, metadata

    (tmp_path / "config.json").write_text('{"study": "positions", "runs": [["a", 0]]}')
    swept = ["data.task", "model.arch", "model.position"]
    (tmp_path / summaries.STUDY_VIEW_FILE).write_text(json.dumps({"swept": swept}))
    run = tmp_path / "a" / "seed_0"
    run.mkdir(parents=True)
    with summaries.SummaryWriter(str(run)) as writer:
        writer.hparams({"seed": 0, "data.task": "order", "model.arch": "encoder",
                        "model.position": "none", "data.batch_size": 8}, ["eval/loss"])
    content = summaries._accumulator(str(run)).PluginTagToContent(metadata.PLUGIN_NAME)
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    backend_context._sort_and_reduce_to_hparams_limit(experiment)
    assert [h.display_name for h in experiment.hparam_infos][:5] == ["variant", "seed", *swept]


def test_purge_step_drops_events_of_interrupted_process(tmp_path):
    logdir = str(tmp_path)
    with summaries.SummaryWriter(logdir) as writer:  # the run that crashed after step 4
        for step in range(5):
            writer.scalars(step, {"train/loss": float(step)})
    # Restart from a checkpoint at step 3, in the same second (file names must not collide).
    with summaries.SummaryWriter(logdir, purge_step=3) as writer:
        for step in (3, 4):
            writer.scalars(step, {"train/loss": 10.0 + step})
    assert len(os.listdir(logdir)) == 2
    assert summaries.read_scalars(logdir)["train/loss"] == [
        (0, 0.0), (1, 1.0), (2, 2.0), (3, 13.0), (4, 14.0)]


def test_attention_map_image():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(8), size=(3, 5))  # [heads=3, q=5, kv=8], rows sum to 1
    image = summaries.attention_map_image(weights)
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert min(image.shape[:2]) >= 96  # small maps are upscaled to be visible
    # 3 heads tile as a 2x2 grid of (5*s) x (8*s) maps with 2-pixel gaps.
    scale = 96 // 8
    assert image.shape[:2] == (2 * 5 * scale + 2, 2 * 8 * scale + 2)
    other = summaries.attention_map_image(rng.dirichlet(np.ones(8), size=(3, 5)))
    assert other.shape == image.shape and np.any(other != image)
    # Within a map, different weights get different colours; equal weights equal colours.
    uniform = np.full((1, 4, 4), 0.25)
    uniform_image = summaries.attention_map_image(uniform)
    assert len(np.unique(uniform_image.reshape(-1, 3), axis=0)) == 1
    diagonal = summaries.attention_map_image(np.eye(4)[None])
    assert not np.array_equal(diagonal[0, 0], diagonal[0, -1])
    # The scale is fixed, 0..1: weight 1 is viridis' yellow, 0 its dark purple, and uniform
    # attention is neither (a per-image maximum would have drawn it yellow).
    from matplotlib import colormaps
    colour = lambda x: colormaps["viridis"](x, bytes=True)[:3]
    assert tuple(diagonal[0, 0]) == colour(1.0) and tuple(diagonal[0, -1]) == colour(0.0)
    assert tuple(uniform_image[0, 0]) == colour(0.25) != colour(1.0)
    half = summaries.attention_map_image(np.eye(4)[None] * 0.5)
    assert tuple(half[0, 0]) == colour(0.5)  # not rescaled to its own maximum
    with pytest.raises(ValueError):
        summaries.attention_map_image(np.ones((4, 4)))


def test_writing_summaries_does_not_import_torch(tmp_path):
    """tensorboardX's writer imports torch whenever it is installed (the test extras install
    it): seconds and hundreds of MB in every training process. The writer hides it, and a later
    `import torch` still works."""
    import subprocess
    import sys

    code = ("import sys\nfrom transformer_jax.train import summaries\n"
            f"w = summaries.SummaryWriter({str(tmp_path)!r})\n"
            "w.scalars(1, {'train/loss': 1.0})\nw.close()\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "import torch\nprint(torch.ones(2).sum().item())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "2.0"
    assert summaries.read_scalars(str(tmp_path))["train/loss"] == [(1, 1.0)]

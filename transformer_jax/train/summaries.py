"""TensorBoard logging without TensorFlow, and reading it back the way TensorBoard does.

Writing goes through tensorboardX, which produces valid event files with no TensorFlow installed
(`flax.metrics.tensorboard` and `clu.metric_writers` import TensorFlow and fail here). Reading goes
through TensorBoard's own `EventAccumulator`, so tests and the sweep report see exactly what the
dashboard would show rather than what our writer believes it wrote.

Hyperparameters are written with TensorBoard's own hparams protos
(`tensorboard.plugins.hparams.summary_v2.hparams_pb` / `hparams_config_pb`, both pure protobuf, no
TensorFlow) into the run's own event file. tensorboardX's `add_hparams` is avoided on purpose: it
opens a second writer in a `<logdir>/<timestamp>/` sub-directory, which TensorBoard lists as an
extra run next to every real one. A study's run (`<study>/<variant>/seed_<n>`) is an HParams
trial named by its run, with `variant`, `seed` and `study` as its first columns.
"""

from __future__ import annotations

import json
import logging as std_logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.plugins.hparams import summary_v2 as hparams_summary
from tensorboard.util import tb_logging, tensor_util

from transformer_jax.train.workdir import CONFIG_FILE

HParamValue = bool | int | float | str

_HPARAM_TYPES = {
    bool: api_pb2.DATA_TYPE_BOOL,
    int: api_pb2.DATA_TYPE_FLOAT64,  # the plugin stores every number as a double
    float: api_pb2.DATA_TYPE_FLOAT64,
    str: api_pb2.DATA_TYPE_STRING,
}


def _hparam_value(value) -> HParamValue:
    """The hparams plugin knows bool, number and string; anything else (None, tuples from a
    flattened ConfigDict, numpy scalars) is mapped onto those rather than dropped."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    return str(value)


# The hparams that tell a study's runs apart, in the order of their columns. TensorBoard sorts
# the HParams columns by (differs, name) and shows the first five: variant, seed and the study's
# swept fields are marked as differing (rather than the alphabetically first data.* fields
# showing), and these are written under names that sort before every config field ('0:variant',
# see `column_name`), shown by their display name: variant is the first column, whatever is
# swept. The study is not marked: the trial's name begins with it, the part of the name the
# table shows, and as a checked column it hid the third swept field (model.position in
# positions); it is the first column offered unchecked.
IDENTITY_HPARAMS = ("variant", "seed", "study")
SHOWN_IDENTITY = ("variant", "seed")
# At a study's root, written by the sweep (studies/render/board.py): {"swept": [config fields whose
# values differ between its runs], "metrics": [...], "cards": [its comparison cards' tags]}.
STUDY_VIEW_FILE = "tensorboard.json"


def swept_hparams(logdir: str) -> list[str]:
    """The swept fields of the study whose run is `logdir` (its view file); [] elsewhere."""
    try:
        view = json.loads((Path(logdir).absolute().parent.parent / STUDY_VIEW_FILE).read_text())
        swept = view.get("swept", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [k for k in swept if isinstance(k, str)] if isinstance(swept, list) else []


def run_identity(logdir: str) -> tuple[str, dict[str, HParamValue]]:
    """(trial name, identity hparams) of the run in `logdir`. A study's run,
    `<study root>/<variant>/seed_<n>` where the root's config.json names the study (the sweep's
    layout), is 'study/variant/seed_n' with {'study', 'variant', 'seed'} (the seed as a string:
    the plugin shows numbers with four decimals); any other run is its directory's name, with
    none."""
    path = Path(logdir).absolute()
    try:
        study = json.loads((path.parent.parent / CONFIG_FILE).read_text()).get("study")
    except (OSError, ValueError, AttributeError):
        study = None
    if isinstance(study, str) and path.name.startswith("seed_"):
        return f"{study}/{path.parent.name}/{path.name}", {
            "study": study, "variant": path.parent.name, "seed": path.name.removeprefix("seed_")}
    return path.name, {}


def column_name(key: str) -> str:
    """The name an hparam is written under: an identity hparam's rank before its key, so that
    TensorBoard's sort by name puts it first ('variant' -> '0:variant'); others as they are."""
    return f"{IDENTITY_HPARAMS.index(key)}:{key}" if key in IDENTITY_HPARAMS else key


def _key(name: str) -> str:
    """`column_name` undone: the key an hparam was written under."""
    rank, _, key = name.partition(":")
    return key if rank.isdigit() and key in IDENTITY_HPARAMS else name


def _experiment_pb(values: Mapping[str, HParamValue], metrics: Sequence[str],
                   first: Sequence[str] = SHOWN_IDENTITY) -> summary_pb2.Summary:
    """The experiment summary (hparam names *with types* + metric tags). `hparams_config_pb` can
    only type an hparam by giving it a domain, and a domain built from one run's value would make
    the dashboard's filters hide every other run of a sweep; so the proto is built directly,
    typed but domain-free (what PyTorch's and tensorboardX's `add_hparams` write too). The
    hparams `first` (variant, seed, a study's swept fields) are marked as differing,
    which puts them in the first columns."""
    experiment = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=column_name(k), display_name=k,
                                         type=_HPARAM_TYPES[type(v)], differs=k in first)
                      for k, v in sorted(values.items(), key=lambda kv: column_name(kv[0]))],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in metrics],
    )
    summary = summary_pb2.Summary()
    summary.value.add(
        tag=hparams_metadata.EXPERIMENT_TAG,
        metadata=hparams_metadata.create_summary_metadata(
            plugin_data_pb2.HParamsPluginData(experiment=experiment)
        ),
        tensor=hparams_metadata.NULL_TENSOR,
    )
    return summary


def _import_tensorboardx():
    """tensorboardX, imported with torch hidden unless torch is loaded already.

    Its writer module does `import torch` whenever torch is installed (the test extras install
    it; so do many researchers' environments), only to accept torch tensors, which we never
    pass: measured in a sweep worker, 5.2 s of a 21.8 s variant, and a few hundred MB of
    resident memory in every training process. Imported here, not at module level, so that
    readers and image helpers skip it altogether."""
    if "tensorboardX.writer" in sys.modules or "torch" in sys.modules:
        import tensorboardX
        return tensorboardX
    sys.modules["torch"] = None  # `import torch` raises ImportError: tensorboardX's fallback
    try:
        import tensorboardX
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]  # a later `import torch` (the user's) works as usual
    return tensorboardX


class SummaryWriter:
    """One event-file writer per run (`logdir` = the run's workdir).

    `purge_step`: TensorBoard discards the events earlier writers logged at steps >= purge_step
    (tensorboardX writes a `SessionLog.START` there; `EventAccumulator` purges on it). A run
    resumed from a checkpoint at step S passes S + 1: the events at S itself were logged before
    that checkpoint was saved and are valid; later ones would otherwise show twice.
    """

    def __init__(self, logdir: str, *, purge_step: int | None = None, flush_secs: int = 30):
        tensorboardX = _import_tensorboardx()
        self.logdir = str(logdir)
        # tensorboardX names files events.out.tfevents.<unix seconds>.<hostname> and opens them
        # with 'wb': a second writer on the same logdir within the same second (a quick restart,
        # tests) would truncate the first file. A fixed-width nanosecond suffix keeps names unique
        # and still sorted by creation time, the order in which TensorBoard replays them.
        suffix = f".{time.time_ns():020d}.{os.getpid()}"
        self._writer = tensorboardX.SummaryWriter(
            logdir=self.logdir, purge_step=purge_step, flush_secs=flush_secs,
            filename_suffix=suffix,
        )

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Tags like 'train/loss', 'layers/grad_norm/layer_03' (the part before the first '/'
        becomes the dashboard section). Values may be Python, numpy or 0-d JAX numbers."""
        for tag, value in values.items():
            self._writer.add_scalar(tag, float(value), global_step=int(step))

    def images(self, step: int, images: Mapping[str, np.ndarray]) -> None:
        """Each image HWC (C = 1, 3 or 4) or HW; float in [0, 1] or uint8 in [0, 255]. In a
        study's run the tag names the variant and seed after its first part
        ('attention_map/pre_ln/seed_0/layer_00'): TensorBoard's image card cuts the run's
        name ('positions/decoder_…') but shows the tag."""
        _, identity = run_identity(self.logdir)
        for tag, image in images.items():
            if identity:
                group, _, rest = tag.partition("/")
                tag = f"{group}/{identity['variant']}/seed_{identity['seed']}/{rest}"
            image = np.asarray(image)
            formats = {2: "HW", 3: "HWC"}.get(image.ndim)
            if formats is None:
                raise ValueError(f"image {tag!r} must be HW or HWC, got shape {image.shape}")
            self._writer.add_image(tag, image, global_step=int(step), dataformats=formats)

    def text(self, step: int, tag: str, text: str) -> None:
        """Markdown text (samples, configs) for the Text dashboard."""
        self._writer.add_text(tag, text, global_step=int(step))

    def hparams(self, hparams: Mapping[str, HParamValue], metrics: Sequence[str]) -> None:
        """Registers this run as one session of the HParams dashboard.

        `hparams` is the flattened config ({'model.num_layers': 4, ...}); `metrics` are scalar
        tags of this same run (e.g. 'eval/bits_per_char') that the dashboard should tabulate:
        it reads their latest values from the scalars written by `scalars`, so write them
        there as usual. Call once per run, typically at start.

        Each run also writes the experiment summary (hparam and metric names). TensorBoard uses
        the first one it finds under a logdir, so sweeps should give all runs the same keys.
        The trial is named by the run (`run_identity`): 'study/variant/seed_n' in a study, where
        `study` and `variant` are added as hparams.
        """
        trial, identity = run_identity(self.logdir)
        values = {**{str(k): _hparam_value(v) for k, v in hparams.items()}, **identity}
        if isinstance(values.get("seed"), int):
            values["seed"] = str(values["seed"])  # the plugin would show seed 1 as 1.0000
        # session_start_info: this run's values, its trial named by the run
        session = hparams_summary.hparams_pb({column_name(k): v for k, v in values.items()},
                                             trial_id=trial)
        first = (*SHOWN_IDENTITY, *swept_hparams(self.logdir))
        for pb in (_experiment_pb(values, list(metrics), first), session):
            self.summary(pb)

    def summary(self, pb: summary_pb2.Summary, step: int = 0) -> None:
        """A summary proto built with TensorBoard's own protos (a plugin's), as it is."""
        from tensorboardX.proto import summary_pb2 as tbx_summary_pb2

        # TensorBoard's Summary proto and tensorboardX's copy share the wire format.
        self._writer.file_writer.add_summary(
            tbx_summary_pb2.Summary.FromString(pb.SerializeToString()), step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class NullWriter:
    """SummaryWriter's interface, writing nothing: the processes other than 0 of a multi-host
    run, so that each run has one set of event files."""

    def scalars(self, step, values) -> None:
        del step, values

    def images(self, step, images) -> None:
        del step, images

    def text(self, step, tag, text) -> None:
        del step, tag, text

    def hparams(self, hparams, metrics) -> None:
        del hparams, metrics

    def summary(self, pb, step=0) -> None:
        del pb, step

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def attention_map_image(weights: np.ndarray, *, min_size: int = 96, pad: int = 2) -> np.ndarray:
    """Renders attention weights [heads, q_len, kv_len] as one HWC uint8 RGB image.

    Heads are tiled in a near-square grid (row-major, head 0 top-left), separated by `pad` white
    pixels. Each map is upscaled by an integer nearest-neighbour factor so that its longer side
    is at least `min_size` pixels: an 8x8 map would otherwise be 8 pixels in the dashboard.
    Colours use viridis (perceptually uniform, colour-blind safe) on the fixed scale 0 (dark
    purple) to 1 (yellow), the same in every image, head, layer and step: yellow always means a
    query puts all its weight on one key, and uniform attention over n keys shows the colour
    of 1/n (dark for long rows), never the bright yellow a per-image maximum would give it.
    """
    from matplotlib import colormaps  # registry only; no pyplot, no display backend

    weights = np.asarray(weights, dtype=np.float32)
    if weights.ndim != 3:
        raise ValueError(f"expected [heads, q_len, kv_len], got shape {weights.shape}")
    heads, q_len, kv_len = weights.shape
    scaled = np.clip(weights, 0.0, 1.0)  # a weight is a probability: the scale is fixed
    scale = max(1, math.ceil(min_size / max(q_len, kv_len, 1)))
    tiles = colormaps["viridis"](scaled, bytes=True)[..., :3]  # [heads, q, kv, 3] uint8
    tiles = tiles.repeat(scale, axis=1).repeat(scale, axis=2)
    cols = math.ceil(math.sqrt(heads))
    rows = math.ceil(heads / cols)
    tile_h, tile_w = q_len * scale, kv_len * scale
    image = np.full(
        (rows * tile_h + (rows - 1) * pad, cols * tile_w + (cols - 1) * pad, 3), 255, np.uint8
    )
    for h in range(heads):
        r, c = divmod(h, cols)
        y, x = r * (tile_h + pad), c * (tile_w + pad)
        image[y : y + tile_h, x : x + tile_w] = tiles[h]
    return image


def _accumulator(logdir: str) -> ea.EventAccumulator:
    """Loads every event file directly inside `logdir` (not sub-directories: those are other
    runs), keeping all events rather than TensorBoard's default reservoir sample."""
    keep_all = {ea.SCALARS: 0, ea.TENSORS: 0, ea.IMAGES: 0, ea.HISTOGRAMS: 0}
    # Its directory watcher logs a line per file read ("No path found after ..."): noise in the
    # sweep's log, one per run.
    tb_logging.get_logger().setLevel(std_logging.WARNING)
    accumulator = ea.EventAccumulator(str(logdir), size_guidance=keep_all)
    accumulator.Reload()
    return accumulator


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} in file order, from both classic `simple_value` scalars
    (tensorboardX) and 0-d numeric tensor summaries (TF2-style `tf.summary.scalar`).
    Tensor summaries owned by other plugins (hparams, text) are skipped."""
    accumulator = _accumulator(logdir)
    tags = accumulator.Tags()
    result = {
        tag: [(int(e.step), float(e.value)) for e in accumulator.Scalars(tag)]
        for tag in tags[ea.SCALARS]
    }
    for tag in tags[ea.TENSORS]:
        plugin = accumulator.SummaryMetadata(tag).plugin_data.plugin_name
        if plugin not in ("", "scalars"):
            continue
        points = []
        for event in accumulator.Tensors(tag):
            array = tensor_util.make_ndarray(event.tensor_proto)
            if array.size != 1 or not np.issubdtype(array.dtype, np.number):
                break
            points.append((int(event.step), float(array.reshape(()))))
        else:
            result[tag] = points
    return result


def read_tags(logdir: str) -> dict[str, list[str]]:
    """`EventAccumulator.Tags()` restricted to its list-valued entries
    ('scalars', 'images', 'tensors', 'histograms', ...)."""
    return {kind: list(tags) for kind, tags in _accumulator(logdir).Tags().items()
            if isinstance(tags, list)}


def read_hparams(logdir: str) -> tuple[dict[str, HParamValue], list[str]]:
    """(hparams of this run's session, metric tags of its experiment summary), as the HParams
    dashboard would read them; ({}, []) when `hparams` was never called for the run."""
    content = _accumulator(logdir).PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    values: dict[str, HParamValue] = {}
    metrics: list[str] = []
    if hparams_metadata.SESSION_START_INFO_TAG in content:
        info = hparams_metadata.parse_session_start_info_plugin_data(
            content[hparams_metadata.SESSION_START_INFO_TAG]
        )
        for name, value in info.hparams.items():
            kind = value.WhichOneof("kind")
            values[_key(name)] = getattr(value, kind) if kind else None
    if hparams_metadata.EXPERIMENT_TAG in content:
        experiment = hparams_metadata.parse_experiment_plugin_data(
            content[hparams_metadata.EXPERIMENT_TAG]
        )
        metrics = [m.name.tag for m in experiment.metric_infos]
    return values, metrics

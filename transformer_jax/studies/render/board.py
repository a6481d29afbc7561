"""A study as TensorBoard shows it beyond its runs' own curves: its variants compared.

At its start the sweep writes the study's view file (`summaries.STUDY_VIEW_FILE` at its root):
the swept config fields, which its runs' HParams put in the first columns, and the study's
metrics. Its report adds, from the runs it has just read, one comparison run per variant,
`<root>/compare/<variant>`, holding the variant's mean over finished seeds of each judged metric
under the tag `Compare/<study>/<metric>`: a card per judged metric per study, one line per
variant, a key as long as the study has variants (not a row per seed), in a section of Time
Series before every other. A metric the study figure draws on a log axis
(`plots.wants_log_scale`) is logged as log10 under `Compare/<study>/<metric>/log10`:
TensorBoard cannot be told to open a card on a log axis, and the gaps that the figure shows on
one vanish on a linear axis. The same cards are laid out in TensorBoard's Custom Scalars
dashboard (one category per study), and the view file lists them, so that every link to the
study (the sweep's, scripts/tensorboard.sh's) pins the same cards.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.custom_scalar import layout_pb2, metadata as layout_metadata
from tensorboard.util import tensor_util

from transformer_jax.studies.render import plots
from transformer_jax.train import summaries
from transformer_jax.studies.rundir import flatten, write_json_atomic

COMPARE_DIR = "compare"  # <study root>/compare/<variant>: the comparison runs
# A metric under probe/ is a step-0 probe (analysis/permutation.py: the run's model at
# initialization). The report files an analysis's value at its run's last step (report.add_measured:
# its final value is the value); its card draws it where it was measured, at step 0.
AT_INITIALIZATION = "probe/"
GROUP = "Compare"  # the comparison cards' section in Time Series: capitalised, so it is first


def judged_metrics(study) -> list[str]:
    """The metrics the study's expectations judge, in order; its metrics if it judges none."""
    judged = [e.metric for e in study.expectations] or list(study.metrics)
    return list(dict.fromkeys(judged))


def swept_fields(configs: Sequence[Any]) -> list[str]:
    """The flattened config fields whose values differ between the study's runs, by name
    (the seed left out: it is one of the identity hparams)."""
    flat = [flatten(c.to_dict()) for c in configs]
    keys = sorted(set().union(*flat)) if flat else []
    return [k for k in keys if k != "seed"
            and len({json.dumps(f.get(k), sort_keys=True, default=repr) for f in flat}) > 1]


def read_view(root: Path) -> dict[str, Any]:
    """The study's view file at `root`; {} when there is none (a sweep of an older version)."""
    try:
        found = json.loads((Path(root) / summaries.STUDY_VIEW_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_view(study, root: Path, configs: Sequence[Any]) -> None:
    """The view file at the sweep's start: the swept fields and the metrics (no cards yet:
    the comparison runs are written by the report). Cards already written are kept."""
    kept = {k: v for k, v in read_view(root).items() if k in ("cards", "compared")}
    view = {"study": study.name, "swept": swept_fields(configs),
            "metrics": list(study.metrics), "cards": [], **kept}
    write_json_atomic(Path(root) / summaries.STUDY_VIEW_FILE, view)


def card_tag(study_name: str, metric: str, log: bool) -> str:
    """'Compare/<study>/<metric>[/log10]': TensorBoard groups cards by a tag's first part and
    sorts the groups by code point, so the comparisons come before 'attention' and the rest."""
    return f"{GROUP}/{study_name}/{metric}" + ("/log10" if log else "")


def card_metric(tag: str) -> str:
    """'Compare/norms/eval/loss/log10' -> 'eval/loss (log10)'."""
    metric = tag.split("/", 2)[2]
    return metric.removesuffix("/log10") + (" (log10)" if metric.endswith("/log10") else "")


def comparison_curves(study, runs: Mapping[tuple[str, int], dict]) -> dict[str, dict[str, tuple]]:
    """card tag -> variant -> (steps, mean over finished seeds; log10 of it on a log card)."""
    cards = {}
    for metric in judged_metrics(study):
        means = {}
        for variant in study.variants:
            steps, values = plots.seed_curves(runs, variant, study.seeds, metric)
            if steps and metric.startswith(AT_INITIALIZATION):
                steps, values = [0], _last_values(values)
            if steps:
                means[variant] = (steps, plots.seed_band(values, metric)[0])
        log = plots.wants_log_scale(metric, [m for _, m in means.values()])
        cards[card_tag(study.name, metric, log)] = {
            v: (steps, np.log10(mean) if log else mean) for v, (steps, mean) in means.items()}
    return cards


def _last_values(values: np.ndarray) -> np.ndarray:
    """[seeds, steps] -> [seeds, 1]: each seed's last finite value (nan where it has none)."""
    last = [row[np.isfinite(row)][-1] if np.isfinite(row).any() else np.nan for row in values]
    return np.asarray(last, float)[:, None]


def layout(study_name: str, tags: Sequence[str]) -> layout_pb2.Layout:
    """The Custom Scalars layout of one study: a category named by it, a chart per card."""
    charts = [layout_pb2.Chart(title=f"{card_metric(tag)}: mean over seeds, a line per variant",
                               multiline=layout_pb2.MultilineChartContent(
                                   tag=[f"^{_escape(tag)}$"])) for tag in tags]
    return layout_pb2.Layout(category=[layout_pb2.Category(title=study_name, chart=charts)])


def _escape(tag: str) -> str:
    """`tag` as a regex that matches only itself (tags hold '.' and '_' at most: '.' needs it)."""
    return tag.replace(".", r"\.")


def layout_summary(layout_proto: layout_pb2.Layout) -> summary_pb2.Summary:
    """The Custom Scalars plugin's summary of a layout (`custom_scalar.summary.pb`, which
    needs TensorFlow, built from its protos)."""
    summary = summary_pb2.Summary()
    summary.value.add(tag=layout_metadata.CONFIG_SUMMARY_TAG,
                      metadata=layout_metadata.create_summary_metadata(),
                      tensor=tensor_util.make_tensor_proto(layout_proto.SerializeToString()))
    return summary


def write_comparison(study, root: Path, runs: Mapping[tuple[str, int], dict]) -> list[str]:
    """The comparison runs of the study in `root` and the cards in its view file; returns the
    card tags. They are derived from its runs: written anew when those changed, and left as
    they are (the same files) when a rerun reports the same runs again."""
    cards = comparison_curves(study, runs)
    digest = hashlib.sha256(json.dumps(
        {tag: {v: [list(map(int, steps)), [float(x) for x in values]]
               for v, (steps, values) in by_variant.items()} for tag, by_variant in cards.items()},
        sort_keys=True).encode()).hexdigest()[:16]
    compare = Path(root) / COMPARE_DIR
    view = read_view(root) or {"study": study.name, "swept": [], "metrics": list(study.metrics)}
    if view.get("compared") == digest and compare.is_dir():
        return list(cards)
    shutil.rmtree(compare, ignore_errors=True)
    proto = layout_summary(layout(study.name, list(cards)))
    for variant in study.variants:
        with summaries.SummaryWriter(str(compare / variant)) as writer:
            writer.summary(proto)  # each run carries the layout: TensorBoard merges them
            for tag, by_variant in cards.items():
                for step, value in zip(*by_variant.get(variant, ((), ()))):
                    if math.isfinite(value):
                        writer.scalars(step, {tag: value})
    write_json_atomic(Path(root) / summaries.STUDY_VIEW_FILE,
                      {**view, "cards": list(cards), "compared": digest})
    return list(cards)

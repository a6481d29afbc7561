"""The analysis of experiments/pretrained_claims.py: the head-role table and its checks (from
head_roles.json, which `checkpoint_claims.evaluate` wrote), the layer × head map, the attention
entropy per layer with and without ÷√d_k, and how far the embeddings move by layer without a
residual or a LayerNorm."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from transformer_jax.studies.analysis import checkpoint_roles as roles_lib
from transformer_jax.studies.analysis import head_controls
from transformer_jax.studies.analysis.checkpoint_claims import MAP_FILE, ROLES_FILE
from transformer_jax.studies.checks import Check, Section, judged
from transformer_jax.studies.render.markdown import checks_table, markdown_table


def role_checks(threshold: float) -> tuple[Check, ...]:
    """Per role: some head puts at least `threshold` of its attention on the role's target,
    on average over the sentences (Clark et al. 2019's measure). `test(best)`: the best head's
    average mass."""
    return tuple(Check(f"some head puts ≥ {threshold:g} of its attention on "
                       f"{roles_lib.TARGETS[role]}", "intact",
                       lambda best, t=threshold: best >= t) for role in roles_lib.ROLES)


def make_analysis(threshold: float, layers: int) -> Callable[[Path, dict], Section]:
    checks = role_checks(threshold)

    def checkpoint_analysis(root: Path, runs: dict) -> Section:
        found = json.loads((Path(root) / ROLES_FILE).read_text())
        scores = np.asarray(found["scores"])  # [L, H, roles]
        results = [judged(c, [(float(scores[..., r].max()),)]) for r, c in enumerate(checks)]
        text = ["### Heads by role (Clark et al. 2019)", "",
                f"Average attention mass of each head on each role's target over "
                f"{found['sentences']} sentences (every real query; previous/next: the queries "
                "that have one).", "", role_table(scores, found["groups"], threshold), "",
                f"![heads by role]({MAP_FILE})", "", f"Every head's scores and each role's "
                f"knock-out group: [{ROLES_FILE}]({ROLES_FILE}).", "",
                *checks_table("check", results), "",
                "### Attention entropy by layer, with and without ÷√d_k", "",
                by_layer(runs, layers, {"intact": "attention_entropy/layer_{}",
                                        "no_scale": "attention_entropy/layer_{}"}, "nats"), "",
                "### Embedding movement by layer (1 − cos to the intact embedding)", "",
                "Each removal beside its yardstick: random changes of the same norm added at "
                "the block's output (the mean over each sentence's draws).", "",
                by_layer(runs, layers, {v: "embedding_distance" for v in (
                    "no_residual_L{}", "yardstick_residual_L{}", "no_norm_L{}",
                    "yardstick_norm_L{}")}, "1 − cos"), "",
                *control_lines(scores, found["groups"], threshold, runs)]
        return Section("\n".join(text), tuple(results))

    return checkpoint_analysis


def control_lines(scores: np.ndarray, groups: dict, threshold: float, runs: dict) -> list[str]:
    """'### Knock-outs against their controls': per role, its group's size, whether a random
    set matched by layer exists (else why not: its expectation is then refused, not judged),
    and the mean distance of the knock-out, its matched sets and the original random sets."""
    rows = []
    for role in roles_lib.ROLES:
        group = [tuple(h) for h in groups[role]]
        try:
            eligible = head_controls.eligible_heads(scores.shape[:2], group, scores, threshold)
            head_controls.check_room(group, eligible, threshold)
            room = "yes"
        except head_controls.ControlError as error:
            room = f"no: {error}"
        rows.append([roles_lib.TARGETS[role], len(group), room,
                     *(mean_of(runs, f"{kind}_{role}", "embedding_distance")
                       for kind in ("knockout", "matched", "random"))])
    return ["### Knock-outs against their controls", "",
            "Mean 1 − cos to the intact embedding: the role's group knocked out, random sets "
            "matched to it by layer (role heads kept out, drawn afresh per sentence), and the "
            "original random sets of as many heads anywhere.", "",
            markdown_table(["target", "group size", "a matched set exists", "knock-out",
                            "matched sets", "random sets"], rows)]


def role_table(scores: np.ndarray, groups: dict, threshold: float) -> str:
    rows = []
    for r, role in enumerate(roles_lib.ROLES):
        s = scores[..., r]
        best = np.unravel_index(np.argmax(s), s.shape)
        rows.append([roles_lib.TARGETS[role], int(np.sum(s >= threshold)),
                     f"L{best[0]}.H{best[1]}", float(s[best]),
                     " ".join(f"L{l}.H{h}" for l, h in groups[role])])
    return markdown_table(["target", f"heads ≥ {threshold:g}", "strongest head", "its mass",
                           "knock-out group"], rows)


def by_layer(runs: dict, layers: int, columns: dict[str, str], unit: str) -> str:
    """A table of layer × column: each column's variant (or metric) pattern filled with the
    layer, its mean over the units."""
    header = ["layer", *(f"{v.format('i')} ({unit})" for v in columns)]
    rows = [[i, *(mean_of(runs, v.format(i), m.format(i)) for v, m in columns.items())]
            for i in range(layers)]
    return markdown_table(header, rows)


def mean_of(runs: dict, variant: str, metric: str) -> float:
    values = [run["curves"][metric][-1][1] for (v, _), run in runs.items()
              if v == variant and metric in run["curves"]]
    return float(np.mean(values)) if values else math.nan

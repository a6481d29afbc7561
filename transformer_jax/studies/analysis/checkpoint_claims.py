"""The article's claims measured on a trained checkpoint: an evaluation-only study's
`evaluate` (experiments/pretrained_claims.py) and its analysis.

`evaluate(study, root)` loads the checkpoint, measures the attention-role scores of every head
on the text's first `evaluation.role_sentences` sentences (head_roles.json, head_roles.png),
then runs every variant (an `Ablation`, from the variant's `ablation.*` config) on the next
`len(study.seeds)` sentences, one unit ("seed") per sentence, and on as many word-order-swapped
sentence pairs. Per unit and variant it returns, in the shape `report.collect` gives a trained
run (one point at step 0):

  embedding_distance   1 − cos between the sentence's embedding under the variant and intact
  swap_distance        1 − cos between "the A verbs the B." and "the B verbs the A." (pair i)
  attention_entropy    entropy (nats) of the attention weights, mean over layers, heads, queries
  attention_entropy/layer_<i>   the same in layer i alone (the analysis's table)

A `random_<role>` variant knocks out `evaluation.random_sets` random sets of heads, each the
size of the role's group, and its embedding_distance is their mean; it has no other metric.
Two controls a referee accepts (issue 65) have only embedding_distance too:

- `matched_<role>` (`ablation.matched`): on each sentence, `evaluation.draws` random sets
  matched to the role's group by layer, with the group and every head at or above any role's
  threshold kept out, drawn afresh per sentence (`head_controls.plan_control`, keyed by the
  unit); the value is the sentence's mean over its sets. A group that leaves a layer no room
  for a matched set gives NaN (the comparison is then refused, not judged);
- `yardstick_residual_L<i>`, `yardstick_norm_L<i>` (`ablation.yardstick`): the removal's
  change at block i's output replaced by `evaluation.draws` random changes of the same norm,
  drawn afresh per sentence (`yardsticks.measure`); the value is their mean distance.

The roles are fitted on sentences the claims are not judged on: the first
`evaluation.role_sentences` of the text, and the units are the sentences after them.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, NamedTuple

from absl import logging

import numpy as np

from transformer_jax.model.pretrained import (PretrainedError, load_bert, require_packages,
                                              tokenize)
from transformer_jax.studies.analysis import checkpoint_roles as roles_lib
from transformer_jax.studies.analysis import head_controls, yardsticks
from transformer_jax.studies.analysis.checkpoint_probe import (Ablation, CheckpointProbe,
                                                               attention_entropy,
                                                               cosine_distance, pad_batch)

ROLES_FILE, MAP_FILE = "head_roles.json", "head_roles.png"
NOUNS = ("dog", "man", "cat", "woman", "child", "bird", "horse", "teacher", "king", "farmer",
         "doctor", "fox")
VERBS = ("bites", "sees", "follows", "helps", "chases", "pushes", "loves", "calls", "finds",
         "watches")


def swap_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """`count` pairs ("the A verbs the B.", "the B verbs the A."), A ≠ B, drawn without
    repeats from NOUNS × VERBS × NOUNS by `seed`: the same words in another order."""
    triples = [(a, v, b) for a in NOUNS for v in VERBS for b in NOUNS if a != b]
    chosen = np.random.default_rng(seed).choice(len(triples), count, replace=False)
    return [(f"the {triples[i][0]} {triples[i][1]} the {triples[i][2]}.",
             f"the {triples[i][2]} {triples[i][1]} the {triples[i][0]}.") for i in chosen]


def read_text(path: str) -> str:
    """The text at `path`; a one-line error naming it when it is missing."""
    if not path or not Path(path).is_file():
        raise PretrainedError(f"data.text_path={path!r} is not a file: the study reads its "
                              "sentences from a local text (tiny Shakespeare: $TJ_SHAKESPEARE "
                              "or ../shared/data/tinyshakespeare.txt)")
    return Path(path).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def loaded(directory: str):
    """(model, tokenizer, CheckpointProbe) of a checkpoint directory, loaded once per process
    (the tests share it)."""
    if not directory:  # experiments/pretrained_claims.py's data_dir without the checkpoint package
        require_packages(packaged=True)  # one line naming what is missing and its command
    model, tokenizer = load_bert(directory)
    return model, tokenizer, CheckpointProbe(model)


class Runner:
    """The checkpoint, its tokenizer and the probe, run over fixed-shape batches."""

    def __init__(self, directory: str, rows: int, length: int):
        self.model, self.tokenizer, self.probe = loaded(directory)
        self.directory, self.rows, self.length = directory, rows, length
        self.punctuation = roles_lib.punctuation_ids(self.tokenizer)

    def fits(self, sentence: str) -> bool:
        return len(self.tokenizer.encode(sentence).ids) <= self.length

    def batches(self, texts: list):
        for start in range(0, len(texts), self.rows):
            part = texts[start:start + self.rows]
            yield len(part), pad_batch(tokenize(self.tokenizer, part), self.rows, self.length)

    def run(self, texts: list, ablation: Ablation) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings [N, D], attention entropy [L, N]) of `texts` under `ablation`."""
        embeddings, entropy = [], []
        for n, batch in self.batches(texts):
            found = self.probe.run(batch, ablation)
            embeddings.append(found.embeddings[:n])
            entropy.append(attention_entropy(found.weights, batch.padding_mask)[:, :n])
        return np.concatenate(embeddings), np.concatenate(entropy, axis=1)

    def role_scores(self, texts: list) -> np.ndarray:
        """[L, H, roles]: each head's average mass on each role's target over `texts`."""
        sums, counts = 0.0, 0.0
        for n, batch in self.batches(texts):
            found = self.probe.run(batch, Ablation())
            mask = batch.padding_mask[:n]
            s, c = roles_lib.role_sums(found.weights[:, :n], mask,
                                       self.punctuation[batch.tokens[:n]] & mask)
            sums, counts = sums + s, counts + c
        return sums / counts


def ablation_of(config, groups: dict, cfg) -> Ablation:
    """The variant's `ablation.*` config as an Ablation (a knock-out: its role's group)."""
    a = config.ablation
    mask = (roles_lib.head_mask(groups[a.knockout], cfg.num_layers, cfg.num_heads)
            if a.knockout else None)
    return Ablation(positions=a.positions, attn_scale=a.attn_scale, head_mask=mask,
                    no_residual=None if a.no_residual < 0 else a.no_residual,
                    no_norm=None if a.no_norm < 0 else a.no_norm)


def evaluate(study, root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every variant on every unit, as `report.collect`'s runs (see the module docstring)."""
    base, units = study.base, len(study.seeds)
    e = base.evaluation
    text = read_text(base.data.text_path)  # a missing text stops before the model loads
    runner = Runner(base.data.data_dir, e.batch_rows, e.max_tokens)
    found = [s for s in roles_lib.sentences(text) if runner.fits(s)]
    if len(found) < e.role_sentences + units:
        raise PretrainedError(f"data.text_path={base.data.text_path!r} has {len(found)} "
                              f"sentences of ≤ {e.max_tokens} tokens; the study needs "
                              f"{e.role_sentences + units}")
    role_texts, texts = found[:e.role_sentences], found[e.role_sentences:][:units]
    pairs = [p for pair in swap_pairs(units, e.pair_seed) for p in pair]
    scores = runner.role_scores(role_texts)
    groups = roles_lib.role_groups(scores, e.threshold, e.min_group)
    write_roles(root, scores, groups, len(role_texts), e.threshold)
    intact, _ = runner.run(texts, Ablation())
    context = Context(runner, texts, pairs, intact, scores, groups, tuple(study.seeds))
    runs = {}
    for variant in study.variants:
        values = variant_values(context, study.config(variant, study.seeds[0]))
        runs.update({(variant, s): as_run({k: v[i] for k, v in values.items()})
                     for i, s in enumerate(study.seeds)})
    return runs


class Context(NamedTuple):
    """What every variant is measured against: the runner, the judged sentences and swap pairs,
    the intact embeddings, the role scores [L, H, roles] and groups, the units' ids."""
    runner: "Runner"
    texts: list
    pairs: list
    intact: np.ndarray
    scores: np.ndarray
    groups: dict
    units: tuple


def variant_values(c: Context, config) -> dict[str, np.ndarray]:
    """One variant's metrics per unit [N], by what its `ablation.*` config takes out."""
    a, e, cfg = config.ablation, config.evaluation, c.runner.model.cfg
    if a.random:
        return {"embedding_distance": random_distance(
            c.runner, c.texts, c.intact, len(c.groups[a.random]), e.random_sets, e.random_seed)}
    if a.get("matched"):
        return {"embedding_distance": matched_distance(c, c.groups[a.matched], e)}
    ablation = ablation_of(config, c.groups, cfg)
    if a.get("yardstick"):
        return {"embedding_distance": yardstick_distance(c, ablation, e.draws)}
    return measure(c.runner, c.texts, c.pairs, c.intact, ablation)


def measure(runner: Runner, texts: list, pairs: list, intact: np.ndarray,
            ablation: Ablation) -> dict[str, np.ndarray]:
    """Each metric per unit [N] under `ablation`."""
    embeddings, entropy = runner.run(texts, ablation)
    swapped, _ = runner.run(pairs, ablation)
    values = {"embedding_distance": cosine_distance(embeddings, intact),
              "swap_distance": cosine_distance(swapped[0::2], swapped[1::2]),
              "attention_entropy": entropy.mean(0)}
    values.update({f"attention_entropy/layer_{i}": e for i, e in enumerate(entropy)})
    return values


def random_distance(runner: Runner, texts: list, intact: np.ndarray, size: int, sets: int,
                    seed: int) -> np.ndarray:
    """[N]: the mean over `sets` random sets of `size` heads of each sentence's distance from
    intact when that set is knocked out (the sets: np.random.default_rng([seed, size]))."""
    cfg = runner.model.cfg
    rng = np.random.default_rng([seed, size])
    every = [(layer, head) for layer in range(cfg.num_layers) for head in range(cfg.num_heads)]
    total = 0.0
    for _ in range(sets):
        chosen = [every[i] for i in rng.choice(len(every), size, replace=False)]
        mask = roles_lib.head_mask(chosen, cfg.num_layers, cfg.num_heads)
        total = total + cosine_distance(runner.run(texts, Ablation(head_mask=mask))[0], intact)
    return total / sets


def matched_distance(c: Context, group: list, e) -> np.ndarray:
    """[N]: each sentence's mean distance from intact over its `e.draws` matched random sets
    (the module docstring); NaN everywhere when no matched set exists."""
    cfg = c.runner.model.cfg
    try:
        plan = head_controls.plan_control((cfg.num_layers, cfg.num_heads), group, c.scores,
                                          e.threshold, c.units, e.draws, e.draw_seed)
    except head_controls.ControlError as error:
        logging.warning("no matched control for %s: %s", group, error)
        return np.full(len(c.units), np.nan)
    one = Runner(c.runner.directory, 1, c.runner.length)  # a sentence at a time: its own sets
    out = []
    for i, unit in enumerate(c.units):
        masks = [roles_lib.head_mask(heads, cfg.num_layers, cfg.num_heads)
                 for heads in plan[unit][1:]]
        distances = [cosine_distance(one.run([c.texts[i]], Ablation(head_mask=m))[0],
                                     c.intact[i:i + 1])[0] for m in masks]
        out.append(np.mean(distances))
    return np.array(out)


def yardstick_distance(c: Context, ablation: Ablation, draws: int) -> np.ndarray:
    """[N]: each sentence's mean distance from intact over `draws` random changes of the
    removal's norm at its block's output (`yardsticks.measure`, batch by batch)."""
    out, start = [], 0
    for n, batch in c.runner.batches(c.texts):
        found = yardsticks.measure(c.runner.probe, batch, ablation,
                                   units=c.units[start:start + n], draws=draws)
        out.append(found.yardstick_effects.mean(axis=1))
        start += n
    return np.concatenate(out)


def as_run(values: dict[str, float]) -> dict[str, Any]:
    """One unit's values as a finished run of one logged step (`report.collect`'s shape)."""
    return {"status": {"state": "finished", "step": 0},
            "curves": {k: [(0, float(v))] for k, v in values.items()}}


def write_roles(root: Path, scores: np.ndarray, groups: dict, sentences: int,
                threshold: float) -> None:
    """head_roles.json (the scores and each role's knock-out group) and head_roles.png."""
    record = {"roles": list(roles_lib.ROLES), "sentences": sentences, "threshold": threshold,
              "scores": scores.tolist(), "groups": {r: [list(h) for h in g]
                                                    for r, g in groups.items()}}
    (Path(root) / ROLES_FILE).write_text(json.dumps(record, indent=1) + "\n")
    roles_lib.plot_role_map(scores, threshold, Path(root) / MAP_FILE)

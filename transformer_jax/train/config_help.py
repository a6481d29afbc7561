"""The config's fields on the command line: `--help` lists each field of the config file it is
given with that file's value and a one-line description; `--show_config` prints the resolved
config, as the run would save it.

Why the descriptions are read from the dataclasses' source: the comment beside each field's
declaration (`d_model: int = 128  # width of the residual stream`) is its one description, kept
where the field is typed and validated (`ModelConfig`, `TrainConfig`, `DataConfig`); a second
copy for the help would drift from it.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import json
import textwrap
import tokenize
from typing import Any, Mapping

import ml_collections

from transformer_jax.config import ModelConfig, TrainConfig
from transformer_jax.data import DataConfig
from transformer_jax.train.run import check_config

SECTIONS = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig}
TOP_LEVEL = {"seed": "parameters, dropout and data order all derive from it"}  # not a dataclass's


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """{field: its comment} of a dataclass: the comment on the field's line(s), joined with the
    comment-only lines right below it (a description too long for one line continues there). A
    comment line that starts a sentence (a capital letter) is not a continuation but the next
    group's heading (`# What a BERT-family checkpoint needs ...` below model.dense_matmul), and
    ends the description."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments = {t.start[0]: t.string.lstrip("#").strip()
                for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT}
    notes = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        rows = [r for r in range(node.lineno, node.end_lineno + 1) if r in comments]
        row = node.end_lineno + 1
        while row in comments and _continues(lines[row - 1]):
            rows.append(row)
            row += 1
        notes[node.target.id] = " ".join(comments[r] for r in rows)
    return notes


def _continues(line: str) -> bool:
    """Whether a source line is a comment-only line that continues the description above it:
    its text starts in lower case, with a symbol, or indented to align under the line above."""
    text = line.lstrip()
    return text.startswith("#") and not text[1:].lstrip(" ")[:1].isupper()


def descriptions() -> dict[str, str]:
    """{'model.d_model': 'width of the residual stream', ...} for every field a config has."""
    out = dict(TOP_LEVEL)
    for section, cls in SECTIONS.items():
        notes = field_comments(cls)
        out.update({f"{section}.{f.name}": notes.get(f.name, "") for f in dataclasses.fields(cls)})
    return out


def fields_help(config: ml_collections.ConfigDict, source: str) -> str:
    """The `--help` section of a config file's fields, absl's way: the flag, its description,
    and the value this config file gives it."""
    notes = descriptions()
    out = ["", f"config fields of {source} (set one with --config.SECTION.FIELD=VALUE;",
           "the defaults are this file's; --show_config prints them all, resolved):"]
    for key, value in _leaves(config.to_dict()):
        flag = f"  --config.{key}: {notes.get(key, '')}".rstrip()
        out += textwrap.wrap(flag, 80, subsequent_indent="    ", break_on_hyphens=False)
        out.append(f"    (default: {value!r})")
    return "\n".join(out)


def _leaves(tree: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(dotted key, value): the top-level fields first, then each section in SECTIONS' order,
    its fields in its dataclass's order (the order they are declared and documented in)."""
    out = [(k, v) for k, v in sorted(tree.items()) if not isinstance(v, Mapping)]
    for section in [*SECTIONS, *sorted(set(tree) - set(SECTIONS))]:
        values = tree.get(section)
        if not isinstance(values, Mapping):
            continue
        order = [f.name for f in dataclasses.fields(SECTIONS[section])] if section in SECTIONS else []
        rank = lambda name: (order.index(name) if name in order else len(order), name)  # noqa: E731
        out += [(f"{section}.{name}", values[name]) for name in sorted(values, key=rank)]
    return out


def resolved(config: ml_collections.ConfigDict) -> str:
    """The config the command line resolves to (file, arguments, overrides), checked as a run
    checks it, as JSON: what the run would save as its config.json."""
    check_config(config)
    return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=float)

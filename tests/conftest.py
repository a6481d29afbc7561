"""Small shared helpers for the test suite (everything float32, tiny shapes, CPU)."""
from __future__ import annotations

import numpy as np
import pytest

from transformer_jax import ModelConfig

PARITY_ATOL = 1e-5  # max abs difference allowed in float32 parity checks


def tiny_config(**overrides) -> ModelConfig:
    """A ModelConfig small enough to compile in well under a second on a CPU."""
    values = dict(vocab_size=13, num_outputs=7, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                  max_len=32)
    values.update(overrides)
    return ModelConfig(**values)


def max_abs_diff(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def assert_close(a, b, atol: float = PARITY_ATOL):
    diff = max_abs_diff(a, b)
    assert diff <= atol, f"max abs diff {diff:.3g} > {atol:.1g}"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def randomize_biases_and_scales(module, seed: int = 0) -> None:
    """Gives every bias and LayerNorm scale a random value (they initialize to 0 and 1), so the
    parity tests would notice a bias or scale that is dropped or misplaced. Kernels are kept."""
    import jax
    from flax import nnx

    rng = np.random.default_rng(seed)

    def draw(path, x):
        name = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)][-1]
        noise = rng.normal(0.0, 0.1, x.shape).astype(np.float32)
        if name == "bias":
            return noise
        if name == "scale":
            return 1.0 + noise
        return x

    nnx.update(module, jax.tree_util.tree_map_with_path(draw, nnx.state(module, nnx.Param)))

"""LayerNorm's variance in two passes: rows whose mean is large against their spread (deep
residual streams, no-norm stacks) keep float32 precision, where E[x²] − E[x]² loses it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.config import NormType
from transformer_jax.model.norms import NORM_EPSILON, make_norm, qk_norm

WIDTH = 128


def reference(x: np.ndarray) -> np.ndarray:
    """LayerNorm in float64 (γ = 1, β = 0)."""
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + NORM_EPSILON)


@pytest.mark.parametrize("mean", [0.0, 1e2, 1e3, 1e4])
def test_layernorm_matches_float64_on_rows_with_a_large_mean(mean):
    rng = np.random.default_rng(0)
    x = (mean + rng.standard_normal((64, WIDTH))).astype(np.float32)  # std 1
    norm = make_norm(NormType.LAYERNORM, WIDTH, dtype=jnp.float32, rngs=nnx.Rngs(0))
    out = np.asarray(jax.jit(lambda m, x: m(x))(norm, jnp.asarray(x)))
    # float32 holds 1e3 + N(0, 1) to ~6e-5: the two-pass error is that rounding, not 0.3
    bound = 1e-4 if mean <= 1e3 else 2e-3
    assert np.abs(out - reference(x)).max() <= bound


def test_the_fast_variance_would_fail_the_same_rows():
    """The test above can fail: Flax's fast variance, E[x²] − E[x]², errs by far more."""
    x = (1e3 + np.random.default_rng(0).standard_normal((64, WIDTH))).astype(np.float32)
    fast = nnx.LayerNorm(WIDTH, epsilon=NORM_EPSILON, use_fast_variance=True, rngs=nnx.Rngs(0))
    assert np.abs(np.asarray(fast(jnp.asarray(x))) - reference(x)).max() > 1e-2


def test_qk_norm_is_two_pass_too():
    x = (1e3 + np.random.default_rng(1).standard_normal((8, 16))).astype(np.float32)
    out = np.asarray(qk_norm(16, dtype=jnp.float32, rngs=nnx.Rngs(0))(jnp.asarray(x)))
    # 16 values near 1e3 summed in float32 (ulp 2e-3 at 16e3): the mean alone rounds by ~1e-4
    assert np.abs(out - reference(x)).max() <= 3e-4
    fast = nnx.LayerNorm(16, epsilon=NORM_EPSILON, use_bias=False, use_fast_variance=True,
                         rngs=nnx.Rngs(0))
    assert np.abs(np.asarray(fast(jnp.asarray(x))) - reference(x)).max() > 1e-2

"""The persistent compilation cache goes where $TJ_JAX_CACHE_DIR says, keeps every program (the
eager example's are each quicker to compile than JAX's default threshold), and '' turns it off."""
import jax

from transformer_jax import enable_compilation_cache


def test_the_cache_goes_where_the_variable_says_and_empty_is_none(monkeypatch):
    settings = {}
    monkeypatch.setattr(jax.config, "update", lambda name, value: settings.update({name: value}))
    monkeypatch.setenv("TJ_JAX_CACHE_DIR", "/somewhere/cache")
    enable_compilation_cache()
    assert settings == {"jax_compilation_cache_dir": "/somewhere/cache",
                        "jax_persistent_cache_min_compile_time_secs": 0.0,
                        "jax_persistent_cache_min_entry_size_bytes": 0}
    settings.clear()
    monkeypatch.setenv("TJ_JAX_CACHE_DIR", "")
    enable_compilation_cache()
    assert settings == {}

"""scripts/bench/eager_example.py: the README's example split into its phases, every statement
kept, and its record rendered on docs/performance.md. Structure only: nothing here times."""
from __future__ import annotations

import ast

import pytest

from bench import eager_example, page


def test_the_readme_example_splits_into_its_four_phases_keeping_every_statement():
    source = eager_example.readme_example()
    split = eager_example.phases(source)
    assert [phase for phase, _ in split] == list(eager_example.PHASES)
    code = dict(split)
    assert "enable_compilation_cache()" in code["import"] and "ModelConfig(" not in code["import"]
    assert code["build"].rstrip().splitlines()[-1].startswith("model = ")
    assert "tokens = " in code["first call"] and "probe=True" in code["first call"]
    assert "scaled_dot_product_attention(" in code["rest"]
    statements = lambda text: [ast.dump(s) for s in ast.parse(text).body]  # noqa: E731
    assert sum((statements(c) for _, c in split), []) == statements(source)


def test_an_example_that_never_builds_a_model_is_refused():
    source = "import jax\nfrom transformer_jax import enable_compilation_cache\n" \
             "enable_compilation_cache()\nx = 1\n"
    with pytest.raises(ValueError, match="'build' phase"):
        eager_example.phases(source)


def test_the_record_renders_one_row_per_cpu_and_example():
    def phase(cold):
        return {"wall_s": cold, "cpu_s": cold, "compile_s": 0.5, "programs": 4, "cache_hits": 0}
    def summary(scale):
        return {"phases": {p: phase(scale) for p in eager_example.PHASES}, "example_s": 2 * scale}
    machine = {"cpu": "AMD EPYC", "cpus": 2, "cpu_flags": ["avx2"], "date": "2026-12-06",
               "jax": "0.10.2", "torch": None}
    record = {"eager_example": {"example": "README.md", "rounds": 3, "cold": summary(1.25),
                                "warm": summary(0.25)}, "machine": machine}
    other = {**record, "eager_example": {**record["eager_example"], "example": "eager"}}
    block = page.render([record, other])
    assert ("| AMD EPYC | 2 | avx2 | 2026-12-06 | `README.md` | 3 | **2.50 / 0.50** | 1.25 / 0.25 "
            "| 1.25 / 0.25 | 1.25 / 0.25 | 1.25 / 0.25 | 4 / 4 | jax 0.10.2, torch ? |") in block
    assert "| `eager` |" in block
    assert "No eager-example run recorded yet." in page.render([])

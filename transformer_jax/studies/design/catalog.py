"""Which studies a directory of experiment files holds: their suites, and the order a sweep runs
them and a results page lists them in (the main suite first, each suite in STUDY_ORDER, then by
name).

The suites are declared once, here (`DECLARED`): the sweep's --suite help is made from it, and
the texts that cannot import it (scripts/run.sh, scripts/large_studies.sh, README.md,
docs/verdicts.md) are written or checked against it (scripts/suites_page.py,
tests/studies/test_suites.py), so a new suite is one line here and a failing test until those
texts name it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from transformer_jax.config import ConfigError
from transformer_jax.studies.design import loading
from transformer_jax.studies.study import Study

STUDY_ORDER = ("scaling", "positions", "residuals", "norm_placement", "length_generalization",
               "lm_positions", "lm_scaling", "depth_sweep", "depth_deepest")


@dataclasses.dataclass(frozen=True)
class Suite:
    """A named collection of studies that one sweep runs together (a study's `suite=`)."""
    name: str
    description: str  # one line: what its studies are about, as the scripts and pages list it
    # How long it may take at --size=default on a 2-core CPU: what its studies are sized to
    # (their docstrings say why a study moved suite to fit); None for 'all', which has no budget
    # of its own.
    limit_minutes: Optional[int]


# The order --help, the scripts and the pages list them in: main (the default) first, 'all' last.
DECLARED = (
    Suite("main", "the studies on generated data", 10),
    Suite("lm", "the real-text studies (tiny Shakespeare)", 30),
    Suite("depth_sweep", "2 to 24 layers, each architecture, to the plateau", 30),
    Suite("depth_deepest", "96 layers at width 16, each architecture at its best rate", 30),
    Suite("depth_remedies_pre", "24 layers, Pre-LN, each remedy, tuned", 30),
    Suite("depth_remedies_post", "24 layers, Post-LN, each remedy, tuned", 30),
    Suite("depth_remedies_nonorm", "24 layers, residuals without a norm, each remedy, tuned",
          30),
    Suite("depth_remedies_noresidual", "24 layers, Pre-LN without residuals, each remedy, tuned",
          30),
    Suite("depth_article_pre", "96 layers, Pre-LN, tuned", 30),
    Suite("depth_article_post", "96 layers, Post-LN under DeepNet's init, tuned", 30),
    Suite("depth_article_nonorm", "96 layers, residuals without a norm, each init, tuned", 30),
    Suite("softmax_plateau_narrow", "÷√d_k at the plateau, d_k 64, each arm tuned", 30),
    Suite("softmax_plateau_wide", "÷√d_k at the plateau, d_k 256, each arm tuned", 30),
    Suite("lm_head_dim", "÷√d_k, d_k alone at one head, real text", 30),
    Suite("components", "BatchNorm, heads, softmax gradient, residual-stream range", 30),
    Suite("induction", "induction heads: one layer against two that compose", 30),
    Suite("induction_matched", "induction heads against matched random heads", 30),
    Suite("mechanisms", "causal mask, residual gradients, BatchNorm on text", 30),
    Suite("precision", "bfloat16 products in a character LM", 30),
    Suite("circuits", "a larger character LM's heads, by knock-out", 30),
    Suite("all", "every study, whatever its suite", None),
)
SUITES = tuple(s.name for s in DECLARED)  # the valid --suite values


def suite_help() -> str:
    """The sweep's --suite help: each suite's name and what it holds."""
    return "; ".join(f"{s.name}: {s.description}" for s in DECLARED)


def limit_minutes(suite: str) -> Optional[int]:
    """How long `suite` may take at --size=default (None: no limit, or no such suite)."""
    return next((s.limit_minutes for s in DECLARED if s.name == suite), None)


def check_suite(suite: str) -> str:
    if suite not in SUITES:
        raise ConfigError(f"--suite={suite!r} is not one of: {', '.join(SUITES)}")
    return suite


def order_key(suite: str, stem: str) -> tuple[bool, str, int, str]:
    """Sort key of a study of `suite` in experiments/<stem>.py."""
    rank = STUDY_ORDER.index(stem) if stem in STUDY_ORDER else len(STUDY_ORDER)
    return suite != "main", suite, rank, stem


def select_studies(directory: Path, size: str, suite: str = "main"
                   ) -> list[tuple[Study, Path]]:
    """The studies of `directory` in `suite` ('all': every one), in `order_key` order; not the
    evaluation-only ones (`Study.evaluate`: nothing to train, `studies.evaluate` runs them)."""
    check_suite(suite)
    files = list(Path(directory).glob("[!_]*.py"))
    if not files:
        raise ConfigError(f"--experiment={str(directory)!r} holds no experiment files")
    studies = sorted(((loading.load_study(path, size), path) for path in files),
                     key=lambda sp: order_key(sp[0].suite, sp[1].stem))
    chosen = [(s, p) for s, p in studies
              if s.evaluate is None and (suite == "all" or s.suite == suite)]
    if not chosen:
        found = sorted({s.suite for s, _ in studies})
        raise ConfigError(f"--experiment={str(directory)!r} holds no study of "
                                    f"--suite={suite!r}; its suites: {', '.join(found)}")
    return chosen

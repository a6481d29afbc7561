"""Which studies a directory of experiment files holds: their suites, and the order a sweep runs
them and a results page lists them in (the main suite first, each suite in STUDY_ORDER, then by
name)."""
from __future__ import annotations

from pathlib import Path

from transformer_jax.config import ConfigError
from transformer_jax.studies import loading
from transformer_jax.studies.study import Study

STUDY_ORDER = ("scaling", "positions", "residuals", "norm_placement", "length_generalization",
               "lm_positions", "lm_scaling", "depth")
SUITES = ("main", "lm", "depth", "components", "mechanisms", "precision", "circuits",
          "all")  # 'all': every study, whatever its suite


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

